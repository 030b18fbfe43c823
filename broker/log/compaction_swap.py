"""A partition's segments leaving the log and a cleaned segment taking the place of several: the part of
:class:`broker.log.partition.PartitionLog` the cleaner and every deletion share. See "Off the caller's thread" in
:mod:`broker.log.partition` for the guarantees.
"""

from __future__ import annotations

import json
import os
from functools import partial

from broker.log.background import run_later
from broker.log.files import fsync_directory, unlink_quietly, write_atomically
from broker.log.partition_state import CLEANED_SUFFIX, CLEANING_SUFFIX
from broker.log.recovery import LogRecovery
from broker.log.segment import LogSegment
from broker.log.txn_index import write_entries


class LogSegments(LogRecovery):
    def _discard(self, segment: LogSegment) -> None:
        """A segment out of the log: its files are renamed ``*.deleted`` now and removed on the background
        thread ``file.delete.delay.ms`` later (as Kafka does), so that the event loop does not wait for the
        kernel to free a gigabyte and a fetch that found the segment a moment ago can still read it."""
        renamed = segment.retire()
        if renamed:
            run_later(partial(unlink_quietly, *renamed), self.config.file_delete_delay_ms / 1000, self._background)

    # --- compaction support ------------------------------------------------------------------------------

    def cleaning_snapshot(self) -> tuple[int, list[LogSegment], dict[int, int]]:
        """What the cleaner works on: (structure version, non-active segments, producer last offsets)."""
        with self._lock:
            self._check_open()
            if self._cutting or self._file_work:  # the producer state follows a truncation's file work: next pass
                return self.structure_version, [], {}
            # Segments holding a record of an open transaction wait: whether it commits decides what stays.
            unstable = self._producers.first_unstable_offset()
            segments = [segment for segment in self._segments[:-1]
                        if unstable is None or segment.next_offset <= unstable]
            return self.structure_version, segments, self._producers.last_offsets()

    def create_cleaned_segment(self, base_offset: int) -> LogSegment:
        """A segment built aside (``*.cleaned`` files) to replace segments starting at ``base_offset``."""
        return LogSegment.create(
            self.directory,
            base_offset,
            self.config.index_interval_bytes,
            self._now_ms(),
            suffix=CLEANED_SUFFIX,
            account=self._descriptors,
        )

    def replace_segments(self, version: int, old: list[LogSegment], cleaned: LogSegment) -> int | None:
        """Swap a cleaned segment in for ``old`` (consecutive, not active); return the new structure
        version, or None if the log changed since ``version`` (nothing is swapped then).

        Crash safety: ``<base>.cleaning`` records the range being replaced once the cleaned files are
        durable; the old files are then deleted and the cleaned ones renamed. On open, a ``.cleaning``
        file means the swap is finished; without one, ``*.cleaned`` files are discarded.
        """
        # The cleaned files are the cleaner's alone until the swap, and the fsyncs (the cleaned files, the marker,
        # the renames) happen outside the log's lock: under it they held up every append and read of the
        # partition, the event loop's among them. The lock is held for the check and the renames only.
        cleaned.close_for_appends()
        cleaned.flush()
        cleaned.close()
        with self._lock:
            span = self._swap_span(version, old)
            if span is None:
                return None
            aborted = self._aborted.between(old[0].base_offset, span[1])
        base = old[0].base_offset
        write_entries(cleaned.txn_index_path, aborted)
        marker = self._path(f"{base:020d}{CLEANING_SUFFIX}")
        write_atomically(marker, json.dumps({"end": span[1]}).encode())
        with self._lock:
            # the log may have changed while the marker was written (retention, truncation): checked again
            span = self._swap_span(version, old)
            if span is None:
                os.unlink(marker)
                fsync_directory(self.directory)
                return None
            for segment in old:
                self._discard(segment)  # renamed now, removed on the background as retention's are
            self._complete_swap(base)
            new = LogSegment.open(self.directory, base, self.config.index_interval_bytes, self._now_ms(),
                                  self._descriptors)
            first = span[0]
            self._segments[first : first + len(old)] = [new]
            self._bases = [segment.base_offset for segment in self._segments]
            self.structure_version += 1
            swapped = self.structure_version
        fsync_directory(self.directory)  # the renames are durable before the marker goes
        os.unlink(marker)
        fsync_directory(self.directory)
        return swapped

    def _swap_span(self, version: int, old: list[LogSegment]) -> tuple[int, int] | None:
        """Where ``old`` sits in the log (its index) and the base offset after it, if the log is still at
        ``version`` and holds them, consecutive and not active; the caller holds the lock."""
        if self._closed or version != self.structure_version:
            return None
        first = next((i for i, s in enumerate(self._segments) if s is old[0]), None)
        if (
            first is None
            or first + len(old) >= len(self._segments)
            or any(self._segments[first + k] is not segment for k, segment in enumerate(old))
        ):
            return None
        return first, self._segments[first + len(old)].base_offset
