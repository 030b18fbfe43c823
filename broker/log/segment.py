"""One log segment: ``%020d.log`` holding whole v2 batches, with its offset and time indexes.

The log file is written with ``pwrite`` at its current end, unbuffered, so an append that returned is in
the OS page cache and survives a crash of the process. Reads use ``pread``; nothing here decodes records.
Scans read batch headers in 64 KiB chunks and, during recovery, check every batch's CRC-32C.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import structlog

from broker.errors import ErrorCode, KafkaError
from broker.log.descriptors import DescriptorAccount
from broker.log.files import release_space_after, reserve_space, unlink_quietly
from broker.log.index import OffsetIndex, TimeIndex, append_entries, replace_entries
from broker.protocol.records import HEADER_SIZE, INT32_MAX, NO_TIMESTAMP, BatchHeader, crc_of

_SCAN_CHUNK = 1 << 16

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"  # aborted transactions whose ABORT marker is in the segment (broker.log.txn_index)
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
# a segment's files once it is out of the log, until they are removed (Kafka's name for them too)
DELETED_SUFFIX = ".deleted"


log = structlog.get_logger("broker.log")


def segment_file(directory: str, base_offset: int, suffix: str) -> str:
    return os.path.join(directory, f"{base_offset:020d}{suffix}")


def pread_exact(fd: int, length: int, position: int) -> bytes:
    """``length`` bytes at ``position`` (fewer only at the end of the file)."""
    data = os.pread(fd, length, position)
    if len(data) == length or not data:
        return data
    parts = [data]
    got = len(data)
    while got < length:
        more = os.pread(fd, length - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


class BatchScan:
    """Iterate (position, header) over the plausible whole batches in ``[start, end)`` of a segment file.

    Iteration stops at the first batch that is truncated, has an impossible header (magic, length,
    offsets going backwards or past the segment's 32-bit relative range) or, with ``verify_crc``, a bad
    checksum. ``valid_end`` is the position after the last batch yielded.
    """

    def __init__(
        self,
        fd: int,
        start: int,
        end: int,
        segment_base: int,
        *,
        min_offset: int | None = None,
        verify_crc: bool = False,
    ) -> None:
        self.fd = fd
        self.start = start
        self.end = end
        self.segment_base = segment_base
        self.min_offset = segment_base if min_offset is None else min_offset
        self.verify_crc = verify_crc
        self.valid_end = start

    def __iter__(self) -> Iterator[tuple[int, BatchHeader]]:
        fd, end, segment_base = self.fd, self.end, self.segment_base
        pos = self.start
        buf = b""
        buf_start = pos
        expected = self.min_offset
        while end - pos >= HEADER_SIZE:
            rel = pos - buf_start
            if rel + HEADER_SIZE > len(buf):
                buf = pread_exact(fd, min(_SCAN_CHUNK, end - pos), pos)
                buf_start, rel = pos, 0
                if len(buf) < HEADER_SIZE:
                    return
            header = BatchHeader.parse(buf, rel)
            size = header.batch_length + 12
            if (
                header.magic != 2
                or size < HEADER_SIZE
                or pos + size > end
                or header.base_offset < expected
                or header.last_offset_delta < 0
                or header.records_count < 0
                or header.base_offset + header.last_offset_delta - segment_base > INT32_MAX
            ):
                return
            if self.verify_crc:
                if rel + size > len(buf):
                    buf = pread_exact(fd, max(size, min(_SCAN_CHUNK, end - pos)), pos)
                    buf_start, rel = pos, 0
                    if len(buf) < size:
                        return
                if crc_of(buf, rel, size) != header.crc:
                    return
            expected = header.base_offset + header.last_offset_delta + 1
            pos += size
            self.valid_end = pos
            yield pos - size, header


def _release_reserved(fd: int, size: int, path: str) -> None:
    try:
        release_space_after(fd, size)
    except OSError as exc:  # the data is whole either way; only the reservation stays
        log.warning("cannot free the disk reserved past a segment's data", path=path, error=str(exc))


@dataclass(frozen=True, slots=True)
class SealedTail:
    """What a sealed segment still has to write (:meth:`LogSegment.seal`). Written through descriptors of its
    own, by path: the segment's cached ones may be taken back meanwhile (the budget of open files) or be in a
    reader's use, and nothing appends to the segment any more."""

    index_path: str
    index_entries: bytes
    time_index_path: str
    time_index_entries: bytes
    log_path: str
    reserved_from: int | None  # the end of the data, when disk was reserved past it

    def write(self) -> None:
        append_entries(self.index_path, self.index_entries)
        append_entries(self.time_index_path, self.time_index_entries)
        if self.reserved_from is not None:
            fd = os.open(self.log_path, os.O_WRONLY)
            try:
                _release_reserved(fd, self.reserved_from, self.log_path)
            finally:
                os.close(fd)


@dataclass(frozen=True, slots=True)
class SegmentCut:
    """The file work of a segment cut short in memory (:meth:`LogSegment.cut`): the log file to its new size, then
    the indexes to the entries kept. Through descriptors of its own, by path, as :class:`SealedTail`; each step can
    be made again. A crash before the log file is cut leaves the segment whole; after it, recovery finds index
    entries past the end (rebuilt, as :meth:`OffsetIndex.is_sane` refuses them) or fewer of them (still right)."""

    log_path: str
    size: int
    index_path: str
    index_entries: bytes
    time_index_path: str
    time_index_entries: bytes

    def write(self) -> None:
        fd = os.open(self.log_path, os.O_WRONLY)
        try:
            os.ftruncate(fd, self.size)  # frees what was reserved past it too
        finally:
            os.close(fd)
        replace_entries(self.index_path, self.index_entries)
        replace_entries(self.time_index_path, self.time_index_entries)


@dataclass(slots=True)
class RecoveryResult:
    """What recovering a segment found: the batches kept and how many bytes of tail were cut."""

    headers: list[BatchHeader]
    truncated_bytes: int


class LogSegment:
    """A segment file and its indexes. Not thread-safe: the owning PartitionLog serialises access.

    Descriptors are opened when first used, not when the segment is created or loaded, and a segment that
    stops being appended to gives its own back: a partition nobody writes or reads holds no file open, so a
    topic of thousands of partitions does not hold thousands of files (nor a broker restarting with them)."""

    def __init__(self, directory: str, base_offset: int, index_interval_bytes: int, now_ms: int,
                 account: DescriptorAccount | None = None) -> None:
        self.directory = directory
        self._descriptors = account  # where its descriptors are counted (the broker's budget of open files)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = now_ms
        self.log_path = segment_file(directory, base_offset, LOG_SUFFIX)
        self.txn_index_path = segment_file(directory, base_offset, TXN_INDEX_SUFFIX)
        self._fd = -1
        self._closed = False
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1  # base offset of the first batch that reached max_timestamp
        self.rolling_base_ms: int | None = None
        self.offset_index: OffsetIndex
        self.time_index: TimeIndex
        self._bytes_since_index_entry = 0
        # Whether disk space may be reserved past the data (the topic's ``preallocate``).
        self._reserved = False
        self.planned = False  # see plan()

    # --- opening ---------------------------------------------------------------------------------------

    @classmethod
    def create(
        cls, directory: str, base_offset: int, index_interval_bytes: int, now_ms: int, *, suffix: str = "",
        preallocate: int = 0, account: DescriptorAccount | None = None,
    ) -> LogSegment:
        """A new empty segment; ``suffix`` (e.g. ".cleaned") names files built aside by the cleaner.

        ``preallocate`` > 0 reserves that many bytes of disk at once (the topic's ``preallocate``, with its
        ``segment.bytes``); the file's size stays that of the data written.
        """
        segment = cls(directory, base_offset, index_interval_bytes, now_ms, account)
        segment.log_path += suffix
        segment.txn_index_path += suffix
        segment._open_log_file(os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        if preallocate > 0:
            # False where the file system cannot reserve: the segment is then written as without it.
            segment._reserved = reserve_space(segment.fd, 0, preallocate)
        segment.offset_index = OffsetIndex(segment._path(INDEX_SUFFIX) + suffix, base_offset, load=False,
                                           account=account)
        segment.time_index = TimeIndex(segment._path(TIME_INDEX_SUFFIX) + suffix, base_offset, load=False,
                                       account=account)
        segment.release_descriptor()
        return segment

    @classmethod
    def plan(cls, directory: str, base_offset: int, index_interval_bytes: int, now_ms: int) -> LogSegment:
        """An empty segment without files, never written to: a log emptied by a follower's truncation stands on
        it until the roller has made the files of the segment that replaces it (made on the event loop, they
        held it up whenever the disk's journal was busy)."""
        segment = cls(directory, base_offset, index_interval_bytes, now_ms)
        segment.planned = True
        segment.offset_index = OffsetIndex(segment._path(INDEX_SUFFIX), base_offset, load=False, make=False)
        segment.time_index = TimeIndex(segment._path(TIME_INDEX_SUFFIX), base_offset, load=False, make=False)
        return segment

    @classmethod
    def open(cls, directory: str, base_offset: int, index_interval_bytes: int, now_ms: int,
             account: DescriptorAccount | None = None) -> LogSegment:
        """An existing segment whose data is trusted; its indexes are rebuilt if they look wrong."""
        segment = cls(directory, base_offset, index_interval_bytes, now_ms, account)
        segment.size = os.fstat(segment.fd).st_size
        indexes_exist = all(os.path.exists(segment._path(s)) for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX))
        segment.offset_index = OffsetIndex(segment._path(INDEX_SUFFIX), base_offset, account=account)
        segment.time_index = TimeIndex(segment._path(TIME_INDEX_SUFFIX), base_offset, account=account)
        if not indexes_exist or not segment.offset_index.is_sane(segment.size) or not segment._load_tail():
            segment.rebuild_indexes()
        segment.release_descriptor()
        return segment

    @classmethod
    def open_and_recover(
        cls, directory: str, base_offset: int, index_interval_bytes: int, now_ms: int,
        account: DescriptorAccount | None = None,
    ) -> tuple[LogSegment, RecoveryResult]:
        """An existing segment after an unclean shutdown: verify every batch, cut a torn or corrupt tail."""
        segment = cls(directory, base_offset, index_interval_bytes, now_ms, account)
        segment.size = os.fstat(segment.fd).st_size
        segment.offset_index = OffsetIndex(segment._path(INDEX_SUFFIX), base_offset, load=False, account=account)
        segment.time_index = TimeIndex(segment._path(TIME_INDEX_SUFFIX), base_offset, load=False, account=account)
        file_size = segment.size
        headers = segment._index_batches(verify_crc=True)
        segment.release_descriptor()
        return segment, RecoveryResult(headers, file_size - segment.size)

    def _path(self, suffix: str) -> str:
        return segment_file(self.directory, self.base_offset, suffix)

    @property
    def fd(self) -> int:
        """The log file's descriptor, opened on first use (after :meth:`close`, an OSError as on a closed
        descriptor)."""
        if self._fd < 0:
            if self._closed:
                raise OSError(errno.EBADF, f"segment {self.log_path} is closed")
            self._open_log_file(os.O_RDWR)
        return self._fd

    def _open_log_file(self, flags: int) -> None:
        self._fd = os.open(self.log_path, flags, 0o644)
        if self._descriptors is not None:
            self._descriptors.opened()

    def _close_log_file(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            if self._descriptors is not None:
                self._descriptors.closed()

    def open_for_reading(self) -> int:
        """A descriptor of the log file of the caller's own (the cleaner's, reading outside the partition's lock),
        counted in the broker's budget of open files until :meth:`close_for_reading`. It is not refused at the
        budget: one reader at a time holds one."""
        fd = os.open(self.log_path, os.O_RDONLY)
        if self._descriptors is not None:
            self._descriptors.borrow(1, refusable=False)
        return fd

    def close_for_reading(self, fd: int) -> None:
        os.close(fd)
        if self._descriptors is not None:
            self._descriptors.give_back(1)

    def release_descriptor(self) -> None:
        """Close the log file's descriptor and the indexes' until the segment is used again."""
        self._close_log_file()
        self.offset_index.release()
        self.time_index.release()

    def _load_tail(self) -> bool:
        """Finish loading from trusted indexes: find the last batch and the max timestamp."""
        if self.size == 0:
            return len(self.offset_index) == 0 and len(self.time_index) == 0
        start = self.offset_index.lookup(2**63 - 1)
        last = None
        scan = BatchScan(self.fd, start, self.size, self.base_offset)
        for _, header in scan:
            last = header
        if last is None or scan.valid_end != self.size:
            return False
        self.next_offset = last.next_offset
        if not self.time_index.is_sane(self.next_offset):
            return False
        final = self.time_index.last_entry
        if final is not None:
            self.max_timestamp, self.offset_of_max_timestamp = final
        self._set_rolling_base()
        # Entries resume one interval after the last one, as if the segment had never been closed.
        self._bytes_since_index_entry = self.size - start
        return True

    def _set_rolling_base(self) -> None:
        """segment.ms counts from the first batch's max timestamp (Kafka's rule), else from creation."""
        self.rolling_base_ms = None
        if self.size >= HEADER_SIZE:
            first = BatchHeader.parse(pread_exact(self.fd, HEADER_SIZE, 0))
            if first.max_timestamp >= 0:
                self.rolling_base_ms = first.max_timestamp

    def rebuild_indexes(self) -> None:
        """Recreate both indexes from the log (trusted data, no CRC check)."""
        self.offset_index.close()
        self.time_index.close()
        self.offset_index = OffsetIndex(self._path(INDEX_SUFFIX), self.base_offset, load=False, account=self._descriptors)
        self.time_index = TimeIndex(self._path(TIME_INDEX_SUFFIX), self.base_offset, load=False, account=self._descriptors)
        self._index_batches(verify_crc=False)

    def _index_batches(self, *, verify_crc: bool) -> list[BatchHeader]:
        """Scan the whole file into fresh indexes; cut anything after the last valid batch."""
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self._bytes_since_index_entry = 0
        file_size = self.size
        self.size = 0
        headers = []
        scan = BatchScan(self.fd, 0, file_size, self.base_offset, verify_crc=verify_crc)
        for pos, header in scan:
            self._account(pos, header.base_offset, header.next_offset, header.max_timestamp, header.size)
            headers.append(header)
        self.size = scan.valid_end
        if self.size < file_size:
            os.ftruncate(self.fd, self.size)  # frees what was reserved past it too
            self._reserved = False
        self._set_rolling_base()
        return headers

    # --- writing ---------------------------------------------------------------------------------------

    def _account(self, pos: int, base_offset: int, next_offset: int, max_timestamp: int, size: int) -> None:
        """Update indexes and statistics for a batch written at ``pos`` (Kafka's sparse-index rule)."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = base_offset
        if self._bytes_since_index_entry > self.index_interval_bytes:
            self.offset_index.append(base_offset, pos)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += size
        self.size = pos + size
        self.next_offset = next_offset

    def append(
        self,
        parts: Sequence[bytes | bytearray | memoryview],
        base_offset: int,
        next_offset: int,
        max_timestamp: int,
    ) -> None:
        """Write one batch (offsets already assigned), given as consecutive pieces, at the end of the segment."""
        pos = self.size
        size = sum(len(part) for part in parts)
        try:
            written = os.pwritev(self.fd, parts, pos)
            if written < size:
                # Regular files only write short when something is wrong; finish or raise.
                rest = b"".join(parts)[written:]
                while rest:
                    n = os.pwrite(self.fd, rest, pos + written)
                    written += n
                    rest = rest[n:]
        except OSError as exc:
            try:
                os.ftruncate(self.fd, pos)
            except OSError:
                pass
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot write {self.log_path}: {exc}") from exc
        if pos == 0 and max_timestamp >= 0:
            self.rolling_base_ms = max_timestamp
        self._account(pos, base_offset, next_offset, max_timestamp, size)

    def release_reserved_space(self, *, unknown: bool = False) -> None:
        """Free the disk space reserved past the data. ``unknown``: whatever an earlier run may have left
        reserved (after an unclean shutdown)."""
        if not (unknown or self._reserved):
            return
        self._reserved = False
        was_open = self._fd >= 0
        _release_reserved(self.fd, self.size, self.log_path)
        if not was_open:  # a segment recovered at start-up, say: it keeps no descriptor for this
            self._close_log_file()

    def seal(self) -> SealedTail:
        """The segment stops taking appends: its final max timestamp goes into the time index (reopening then
        need not scan), and what is left to write, the index entries held in memory and the release of the
        disk reserved past its data, is handed to the caller. Memory only: a roll seals under the partition's
        lock and writes the tail without it."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        reserved, self._reserved = self._reserved, False
        return SealedTail(self.offset_index.path, self.offset_index.take_pending(), self.time_index.path,
                          self.time_index.take_pending(), self.log_path, self.size if reserved else None)

    def close_for_appends(self) -> None:
        """Seal the segment, write its tail and give its descriptors back."""
        self.seal().write()
        self.release_descriptor()

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding ``offset`` or later, on this thread (:meth:`cut` and its file work)."""
        cut = self.cut(offset)
        if cut is not None:
            cut.write()

    def cut(self, offset: int) -> SegmentCut | None:
        """Remove every batch holding ``offset`` or later in memory, and hand the file work to the caller (None:
        nothing to remove). Reads only the batches after the last index entry kept (``index.interval.bytes``), not
        the segment: the kept entries hold the largest timestamp up to there (see :meth:`_account`), so the
        statistics come out as a scan of the whole segment would make them."""
        plan = self._plan_cut(offset)
        if plan is None:
            return None
        position, kept, start, next_offset, max_timestamp, offset_of_max = plan
        self.offset_index.cut_at(position)
        # the time entries added with the offset entries kept, as a rebuild makes them (a sealed segment's last one
        # goes too; the next seal adds it again)
        self.time_index.cut_below(self.base_offset if kept is None else kept + 1)
        self.size = position
        self.next_offset = next_offset
        self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, offset_of_max
        self._bytes_since_index_entry = position - start
        self._reserved = False
        if position < HEADER_SIZE:
            self.rolling_base_ms = None
        return SegmentCut(self.log_path, position, self.offset_index.path, self.offset_index.packed(),
                          self.time_index.path, self.time_index.packed())

    def end_after_cut(self, offset: int) -> int:
        """Where the segment would end after :meth:`cut` at ``offset``, without cutting."""
        plan = self._plan_cut(offset)
        return self.next_offset if plan is None else plan[3]

    def _plan_cut(self, offset: int) -> tuple[int, int | None, int, int, int, int] | None:
        """The cut at ``offset``: (file position, the offset of the last index entry kept, where the scan for the
        statistics starts, next offset, max timestamp, its offset); None if no batch holds ``offset`` or a later
        one."""
        found = self.find_batch(offset)
        if found is None:
            return None
        position = found[0]
        kept = self.offset_index.entry_before(position)
        start, max_timestamp, offset_of_max = 0, NO_TIMESTAMP, -1
        if kept is not None:
            # the entry was added with the batch at its position counted: the time entries up to that batch
            start = kept[1]
            entry = self.time_index.entry_at_or_before(kept[0])
            if entry is not None:
                max_timestamp, offset_of_max = entry
        next_offset = self.base_offset
        for _, header in BatchScan(self.fd, start, position, self.base_offset, min_offset=-1):
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.base_offset
            next_offset = header.next_offset
        return position, None if kept is None else kept[0], start, next_offset, max_timestamp, offset_of_max

    # --- reading ---------------------------------------------------------------------------------------

    @property
    def rolling_base(self) -> int:
        """When the segment's age starts for rolling and compaction lag: its first batch's max timestamp (as
        Kafka's segment.ms), else its creation."""
        return self.created_ms if self.rolling_base_ms is None else self.rolling_base_ms

    def largest_timestamp(self) -> int:
        """What time retention compares: the max record timestamp, else the file's modification time."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        # retention asks this of every segment: no descriptor opened just for it
        stat = os.fstat(self._fd) if self._fd >= 0 else os.stat(self.log_path)
        return int(stat.st_mtime * 1000)

    def read(self, position: int, length: int) -> bytes:
        return pread_exact(self.fd, length, position)

    def batches(self, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """Headers of the batches from file position ``start`` on."""
        if start >= self.size:
            return iter(())  # no descriptor opened for nothing (a planned segment has no file to open)
        return iter(BatchScan(self.fd, start, self.size, self.base_offset, min_offset=-1))

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is ``offset`` or later, with its position."""
        if offset >= self.next_offset:
            return None
        for pos, header in self.batches(self.offset_index.lookup(offset)):
            if header.base_offset + header.last_offset_delta >= offset:
                return pos, header
        return None

    def read_batches(
        self, position: int, max_bytes: int, max_offset: int, at_least_one: bool
    ) -> tuple[bytes, bool]:
        """Whole batches from ``position``: at most ``max_bytes`` (but one batch even if larger when
        ``at_least_one``, KIP-74), none starting at ``max_offset`` or beyond.

        Returns the bytes and whether reading may continue into the next segment (this one was read to
        its end within the limits).
        """
        end, more = self.batches_end(position, max_bytes, max_offset, at_least_one)
        return (self.read(position, end - position) if end > position else b""), more

    def batches_end(self, position: int, max_bytes: int, max_offset: int, at_least_one: bool) -> tuple[int, bool]:
        """Where the read of :meth:`read_batches` ends (``position`` for nothing), and whether reading may
        continue into the next segment. Only the batches around the two cut points are looked at (found
        through the offset index), not every batch read: a large read costs a few header reads."""
        if self.size - position < HEADER_SIZE:
            return position, True
        stop = self.size if max_offset >= self.next_offset else self._first_batch_from(max_offset, position)
        if stop <= position:
            return position, False
        want = min(max_bytes, stop - position)
        if at_least_one:
            want = max(want, BatchHeader.parse(self.read(position, HEADER_SIZE)).size)
        if want < HEADER_SIZE:
            return position, False
        end = position + want
        if end < stop:
            end = self._last_boundary_before(position, end)
            if end <= position:
                return position, False
        return end, end == self.size and end - position < max_bytes

    def _first_batch_from(self, offset: int, start: int) -> int:
        """Position of the first batch at or after ``start`` whose base offset is ``offset`` or later."""
        for pos, header in self.batches(max(start, self.offset_index.lookup(offset))):
            if header.base_offset >= offset:
                return pos
        return self.size

    def _last_boundary_before(self, start: int, limit: int) -> int:
        """The end of the last whole batch between ``start`` (a batch boundary) and ``limit``."""
        boundary = max(start, self.offset_index.lookup_position(limit))
        for pos, header in self.batches(boundary):
            if pos + header.size > limit:
                break
            boundary = pos + header.size
        return boundary

    # --- durability and lifetime -------------------------------------------------------------------------

    def flush(self) -> None:
        if self.planned:
            return  # nothing written, and no file to sync
        os.fsync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()

    def close(self) -> None:
        self._close_log_file()
        self._closed = True
        self.offset_index.close()
        self.time_index.close()

    def file_paths(self) -> list[str]:
        return [self.log_path, self.offset_index.path, self.time_index.path, self.txn_index_path]

    def delete(self) -> None:
        self.close()
        unlink_quietly(*self.file_paths())

    def retire(self) -> list[str]:
        """Close the segment and rename its files ``<name>.deleted`` (reads under way keep their own
        descriptors); the new names, for the caller to remove when it likes."""
        self.close()
        renamed = []
        for path in self.file_paths():
            try:
                os.rename(path, path + DELETED_SUFFIX)
            except FileNotFoundError:
                continue
            renamed.append(path + DELETED_SUFFIX)
        return renamed

