"""Sparse offset and time indexes of one log segment, in Kafka's on-disk layout.

``%020d.index`` holds 8-byte entries (relative offset int32, file position int32); ``%020d.timeindex``
holds 12-byte entries (timestamp int64, relative offset int32); all big-endian. An offset entry names
the start of a batch; a time entry says "batches before this offset all have smaller timestamps".

Both live in memory as arrays (searched with bisect); new entries reach their files in groups of
``PENDING_ENTRIES`` (one write() to the OS for the group, like the log itself), and whatever is left when the
segment stops taking appends, is flushed or closed. Entries come every ``index.interval.bytes`` of log, which
with producers' batches of 16 KiB is every batch: a write() per entry was two system calls per batch. A
segment that rolls writes its entries at once; the active one's, held when the process dies, are not
missed, since recovery after an unclean shutdown rebuilds its indexes from the log (and an index with
fewer entries would still be right: lookups would start from an earlier batch). A 1 GiB segment has ~260k
entries: 2 MiB of memory. Files are neither preallocated nor mmapped, and loading reads the file once.
Callers serialize changes to one index (the partition's lock).

An index is only a hint. Recovery rebuilds it from the log when it is missing or fails
:meth:`OffsetIndex.is_sane` / :meth:`TimeIndex.is_sane`, and so does a segment cut short (a follower's
truncation, :meth:`broker.log.segment.LogSegment.truncate_to`).
"""

from __future__ import annotations

import errno
import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right

from broker.log.descriptors import DescriptorAccount

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


# entries held in memory before they are written to the file together
PENDING_ENTRIES = 32


def _write_all(fd: int, data: bytes | bytearray) -> None:
    written = os.write(fd, data)
    while written < len(data):  # a regular file writes short only when something is wrong
        written += os.write(fd, data[written:])


def replace_entries(path: str, entries: bytes) -> None:
    """Make the index file ``path`` hold exactly ``entries`` (a segment cut short keeps its first entries), on a
    descriptor of the caller's own. A crash in the middle leaves fewer entries, which is still a right index."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if entries:
            _write_all(fd, entries)
    finally:
        os.close(fd)


def append_entries(path: str, entries: bytes) -> None:
    """Append packed entries (:meth:`_IndexFile.take_pending`) to the index file ``path``, on a descriptor of
    the caller's own."""
    if not entries:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        _write_all(fd, entries)
    finally:
        os.close(fd)


class _IndexFile:
    """The file under an index: entries written in groups, all of them on flush and close, closed once. Its
    descriptor is opened when entries are first written and given back by :meth:`release` (a segment no
    longer appended to keeps none open), so that many partitions do not mean many open files."""

    path: str
    _fd: int
    _closed: bool
    _account: DescriptorAccount | None  # where its descriptor is counted (the broker's budget of open files)
    _entry: struct.Struct
    _pending: bytearray  # packed entries not yet written

    def _open_file(self, path: str, *, fresh: bool, make: bool) -> None:
        """Make sure the file exists (unless not ``make``: a planned segment's, which never has one); ``fresh``:
        empty it (a new segment's index), else keep what it holds."""
        if make:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if fresh else 0), 0o644))
        self._fd = -1
        self._closed = False
        self._pending = bytearray()

    def _descriptor(self) -> int:
        if self._fd < 0:
            if self._closed:
                raise OSError(errno.EBADF, f"index {self.path} is closed")
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            if self._account is not None:
                self._account.opened()
        return self._fd

    def _add(self, *fields: int) -> None:
        self._pending += self._entry.pack(*fields)
        if len(self._pending) >= PENDING_ENTRIES * self._entry.size:
            self.write_pending()

    def write_pending(self) -> None:
        """Write the entries held in memory to the file (O_APPEND: at its end)."""
        pending = self._pending
        if not pending:
            return
        _write_all(self._descriptor(), pending)
        pending.clear()

    def take_pending(self) -> bytes:
        """The entries held in memory, for the caller to write with :func:`append_entries` (a segment that
        rolls writes its last ones off the partition's lock, where its own descriptor may be taken back)."""
        pending = bytes(self._pending)
        self._pending.clear()
        return pending

    def flush(self) -> None:
        self.write_pending()
        os.fsync(self._descriptor())

    def release(self) -> None:
        """Write what is pending and close the descriptor (the next write opens it again)."""
        if not self._closed:
            self.write_pending()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            if self._account is not None:
                self._account.closed()

    def close(self) -> None:
        self.release()
        self._closed = True


class OffsetIndex(_IndexFile):
    """Maps an offset to the file position of a batch at or before it."""

    _entry = _OFFSET_ENTRY

    def __init__(self, path: str, base_offset: int, *, load: bool = True, make: bool = True,
                 account: DescriptorAccount | None = None) -> None:
        self.path = path
        self.base_offset = base_offset
        self._account = account
        self._relative_offsets = array("i")
        self._positions = array("i")
        data = _read_file(path) if load else b""
        usable = len(data) - len(data) % _OFFSET_ENTRY.size
        self.torn = usable != len(data)
        if usable:
            raw = array("i")
            raw.frombytes(data[:usable])
            if sys.byteorder == "little":
                raw.byteswap()
            self._relative_offsets = raw[0::2]
            self._positions = raw[1::2]
        self._open_file(path, fresh=not load, make=make)

    def __len__(self) -> int:
        return len(self._positions)

    def entries(self) -> list[tuple[int, int]]:
        """(absolute offset, position) pairs, oldest first."""
        base = self.base_offset
        return [(base + rel, pos) for rel, pos in zip(self._relative_offsets, self._positions, strict=True)]

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        self._relative_offsets.append(relative)
        self._positions.append(position)
        self._add(relative, position)

    def cut_at(self, position: int) -> None:
        """Forget the entries at or past file ``position`` (in memory: the file is the caller's, with
        :meth:`packed`)."""
        keep = bisect_left(self._positions, position)
        del self._relative_offsets[keep:]
        del self._positions[keep:]
        self._pending.clear()

    def entry_before(self, position: int) -> tuple[int, int] | None:
        """The last entry (absolute offset, position) before file ``position``."""
        i = bisect_left(self._positions, position)
        return (self.base_offset + self._relative_offsets[i - 1], self._positions[i - 1]) if i else None

    def packed(self) -> bytes:
        """Every entry as the file holds it."""
        return b"".join(_OFFSET_ENTRY.pack(rel, pos) for rel, pos in zip(self._relative_offsets, self._positions,
                                                                          strict=True))

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch starting at or before ``offset`` (0 if none)."""
        i = bisect_right(self._relative_offsets, offset - self.base_offset)
        return self._positions[i - 1] if i else 0

    def lookup_position(self, position: int) -> int:
        """Position of the last indexed batch starting at or before file ``position`` (0 if none)."""
        i = bisect_right(self._positions, position)
        return self._positions[i - 1] if i else 0

    def is_sane(self, log_size: int) -> bool:
        """Whole entries, increasing offsets and positions, all inside the log."""
        if self.torn:
            return False
        offsets, positions = self._relative_offsets, self._positions
        if any(
            offsets[i] >= offsets[i + 1] or positions[i] >= positions[i + 1] for i in range(len(offsets) - 1)
        ):
            return False
        return not positions or (offsets[0] >= 0 and positions[0] >= 0 and positions[-1] < log_size)


class TimeIndex(_IndexFile):
    """Maps a timestamp to the offset of the first batch whose max timestamp reaches it."""

    _entry = _TIME_ENTRY

    def __init__(self, path: str, base_offset: int, *, load: bool = True, make: bool = True,
                 account: DescriptorAccount | None = None) -> None:
        self.path = path
        self.base_offset = base_offset
        self._account = account
        self._timestamps = array("q")
        self._relative_offsets = array("i")
        data = _read_file(path) if load else b""
        usable = len(data) - len(data) % _TIME_ENTRY.size
        self.torn = usable != len(data)
        for timestamp, relative in _TIME_ENTRY.iter_unpack(data[:usable]):
            self._timestamps.append(timestamp)
            self._relative_offsets.append(relative)
        self._open_file(path, fresh=not load, make=make)

    def __len__(self) -> int:
        return len(self._timestamps)

    def entries(self) -> list[tuple[int, int]]:
        """(timestamp, absolute offset) pairs, oldest first."""
        base = self.base_offset
        return [(ts, base + rel) for ts, rel in zip(self._timestamps, self._relative_offsets, strict=True)]

    @property
    def last_entry(self) -> tuple[int, int] | None:
        if not self._timestamps:
            return None
        return self._timestamps[-1], self.base_offset + self._relative_offsets[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Record a new maximum timestamp; anything not above the last entry adds nothing."""
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        relative = offset - self.base_offset
        self._timestamps.append(timestamp)
        self._relative_offsets.append(relative)
        self._add(timestamp, relative)

    def cut_below(self, next_offset: int) -> None:
        """Forget the entries of offsets ``next_offset`` and later (in memory, as :meth:`OffsetIndex.cut_at`)."""
        keep = bisect_left(self._relative_offsets, next_offset - self.base_offset)
        del self._timestamps[keep:]
        del self._relative_offsets[keep:]
        self._pending.clear()

    def entry_at_or_before(self, offset: int) -> tuple[int, int] | None:
        """The last entry (timestamp, absolute offset) whose offset is ``offset`` or below."""
        i = bisect_right(self._relative_offsets, offset - self.base_offset)
        return (self._timestamps[i - 1], self.base_offset + self._relative_offsets[i - 1]) if i else None

    def packed(self) -> bytes:
        return b"".join(_TIME_ENTRY.pack(ts, rel) for ts, rel in zip(self._timestamps, self._relative_offsets,
                                                                      strict=True))

    def lookup(self, timestamp: int) -> int:
        """Offset from which to scan for the first batch reaching ``timestamp`` (the segment base if none)."""
        i = bisect_right(self._timestamps, timestamp)
        return self.base_offset + self._relative_offsets[i - 1] if i else self.base_offset

    def is_sane(self, next_offset: int) -> bool:
        """Whole entries, increasing timestamps and non-decreasing offsets below ``next_offset``."""
        if self.torn:
            return False
        ts, offsets = self._timestamps, self._relative_offsets
        if any(ts[i] >= ts[i + 1] or offsets[i] > offsets[i + 1] for i in range(len(ts) - 1)):
            return False
        return not offsets or (offsets[0] >= 0 and self.base_offset + offsets[-1] < next_offset)
