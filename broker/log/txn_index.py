"""Aborted transactions of a partition, and the per-segment ``.txnindex`` files that keep them.

A read_committed consumer is told, with each fetch, which producers' transactions in the fetched range
were aborted (producer id and first offset); it then skips those producers' batches until their ABORT
marker. The broker learns of an aborted transaction when the marker is appended, and remembers it in
the ``.txnindex`` file of the segment holding the marker, in Kafka's layout: 34 bytes per entry, all
big-endian -- version (int16, 0), producer id (int64), first offset (int64), last offset (the marker's,
int64), last stable offset after the abort (int64).

Files are appended to as markers are written (no fsync per entry: the segment's data is not fsynced per
append either) and rewritten whole when the entries of a segment change on recovery or compaction.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from typing import NamedTuple

from broker.log.files import unlink_quietly, write_atomically

ENTRY = struct.Struct(">hqqqq")
ENTRY_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int


def read_entries(path: str) -> list[AbortedTxn]:
    """The entries of one file (a torn last entry, or one of an unknown version, ends the list)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    entries = []
    for position in range(0, len(data) - ENTRY.size + 1, ENTRY.size):
        version, producer_id, first, last, stable = ENTRY.unpack_from(data, position)
        if version != ENTRY_VERSION:
            break
        entries.append(AbortedTxn(producer_id, first, last, stable))
    return entries


def append_entry(path: str, entry: AbortedTxn) -> None:
    with open(path, "ab") as f:
        f.write(ENTRY.pack(ENTRY_VERSION, *entry))


def write_entries(path: str, entries: list[AbortedTxn]) -> None:
    """Replace a file's entries (the file is removed when there are none)."""
    if not entries:
        unlink_quietly(path)
        return
    write_atomically(path, b"".join(ENTRY.pack(ENTRY_VERSION, *entry) for entry in entries), durable=False)


class AbortedTransactions:
    """A partition's aborted transactions in marker order (the order they were appended)."""

    def __init__(self) -> None:
        self._entries: list[AbortedTxn] = []
        self._last_offsets: list[int] = []

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    def add(self, entry: AbortedTxn) -> None:
        self._entries.append(entry)
        self._last_offsets.append(entry.last_offset)

    def replace(self, entries: list[AbortedTxn]) -> None:
        self._entries = sorted(entries, key=lambda e: e.last_offset)
        self._last_offsets = [e.last_offset for e in self._entries]

    def between(self, low: int, high: int) -> list[AbortedTxn]:
        """Entries whose marker is in [low, high)."""
        start = bisect_left(self._last_offsets, low)
        stop = bisect_left(self._last_offsets, high)
        return self._entries[start:stop]

    def overlapping(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """Transactions a fetch from ``fetch_offset`` that reads below ``upper_offset`` must be told about:
        aborted at or after the fetch offset, begun before the upper bound (Kafka's rule)."""
        start = bisect_left(self._last_offsets, fetch_offset)
        return [e for e in self._entries[start:] if e.first_offset < upper_offset]

    def drop_before(self, offset: int) -> None:
        """Forget transactions whose marker is below ``offset`` (their segment was deleted)."""
        start = bisect_left(self._last_offsets, offset)
        del self._entries[:start]
        del self._last_offsets[:start]

    def drop_from(self, offset: int) -> None:
        """Forget transactions whose marker is at or after ``offset`` (to be replayed, or truncated)."""
        stop = bisect_left(self._last_offsets, offset)
        del self._entries[stop:]
        del self._last_offsets[stop:]
