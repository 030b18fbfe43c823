"""Reads of a partition's log: whole stored batches by offset (copied or as file regions), the offset of a
timestamp, the largest timestamp, the end offset of a leader epoch.
"""

from __future__ import annotations

import os
from bisect import bisect_right

from broker.errors import ErrorCode, KafkaError
from broker.log.partition_state import PartitionState
from broker.log.segment import LogSegment
from broker.protocol.record_walk import record_times
from broker.protocol.types import FileRegion


class LogReads(PartitionState):
    # --- reads -------------------------------------------------------------------------------------------

    def _segment_index(self, offset: int) -> int:
        return max(bisect_right(self._bases, offset) - 1, 0)

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        """Whole batches from the one holding ``offset``: up to ``max_bytes``, but always one whole
        batch when there is one (KIP-74), and none starting at ``max_offset`` (the high watermark) or later.

        Raises KafkaError OFFSET_OUT_OF_RANGE below the log start or beyond the log end.
        """
        with self._lock:
            parts = [segment.read(start, stop - start) for segment, start, stop in
                     self._read_ranges(offset, max_bytes, max_offset)]
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def read_region(self, offset: int, max_bytes: int, max_offset: int | None = None, *,
                    min_one: bool = True) -> FileRegion | bytes:
        """What :meth:`read` returns, left in the segment files for the server to send without copying.
        Without ``min_one`` only the whole batches within ``max_bytes`` are read, possibly none: a Fetch
        allows one oversized batch per response, not per partition (KIP-74). When the broker's budget of open
        files has no room for the region's descriptors, the bytes are read now instead (never empty)."""
        with self._lock:
            ranges = self._read_ranges(offset, max_bytes, max_offset, min_one)
            account = self._descriptors
            if ranges and not account.borrow(len(ranges)):
                return b"".join(segment.read(start, stop - start) for segment, start, stop in ranges)
            return FileRegion([(os.dup(segment.fd), start, stop - start) for segment, start, stop in ranges],
                              account.give_back)

    def _read_ranges(self, offset: int, max_bytes: int, max_offset: int | None,
                     min_one: bool = True) -> list[tuple[LogSegment, int, int]]:
        """(segment, start, end) file ranges of a read; the caller holds the lock."""
        self._check_open()
        end = self.log_end_offset
        if offset < self.log_start_offset or offset > end:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {offset} is outside [{self.log_start_offset}, {end}]",
            )
        limit = end if max_offset is None else min(max_offset, end)
        ranges: list[tuple[LogSegment, int, int]] = []
        total = 0
        i = self._segment_index(offset)
        while offset < limit and i < len(self._segments):
            segment = self._segments[i]
            found = segment.find_batch(offset)
            if found is not None:
                stop, more = segment.batches_end(found[0], max_bytes - total, limit, min_one and not ranges)
                if stop > found[0]:
                    ranges.append((segment, found[0], stop))
                    total += stop - found[0]
                if not more:
                    break
            i += 1
            if i < len(self._segments):
                offset = self._segments[i].base_offset
        return ranges

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``timestamp_ms``, or None (ListOffsets)."""
        with self._lock:
            self._check_open()
            for segment in self._segments:
                if segment.max_timestamp < timestamp_ms:
                    continue
                start = max(
                    segment.time_index.lookup(timestamp_ms), self.log_start_offset, segment.base_offset
                )
                found = segment.find_batch(start)
                if found is None:
                    continue
                for pos, header in segment.batches(found[0]):
                    if header.max_timestamp < timestamp_ms or header.last_offset < self.log_start_offset:
                        continue
                    limit = self.config.max_decompressed_message_bytes
                    for offset, timestamp in record_times(segment.read(pos, header.size), limit):
                        if timestamp >= timestamp_ms and offset >= self.log_start_offset:
                            return offset, timestamp
            return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp, or None (ListOffsets -3)."""
        with self._lock:
            self._check_open()
            best = None
            for segment in self._segments:
                if segment.max_timestamp >= 0 and (
                    best is None or segment.max_timestamp > best.max_timestamp
                ):
                    best = segment
            if best is None:
                return None
            found = best.find_batch(best.offset_of_max_timestamp)
            if found is not None:
                pos, header = found
                for offset, timestamp in record_times(best.read(pos, header.size),
                                                      self.config.max_decompressed_message_bytes):
                    if timestamp == best.max_timestamp:
                        return offset, timestamp
            return best.offset_of_max_timestamp, best.max_timestamp

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, from the leader-epoch cache."""
        with self._lock:
            return self._epochs.end_offset_for(epoch, self.log_end_offset)
