"""Opening a partition's log: its segments found and (after a crash) checked, an interrupted compaction
swap finished, the producer state and aborted transactions rebuilt; see "Recovery" in :mod:`broker.log.partition`.
"""

from __future__ import annotations

import json
import os
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from typing import Protocol

from broker.log.config import INT64_MAX
from broker.log.durability import LogDurability
from broker.log.files import TEMP_SUFFIX, fsync_directory, read_int, unlink_quietly
from broker.log.partition_state import (
    CLEAN_SHUTDOWN_FILE,
    CLEANED_SUFFIX,
    CLEANING_SUFFIX,
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
)
from broker.log.producer_state import (
    CompletedTxn,
    ProducerStateManager,
    load_latest_snapshot,
)
from broker.log.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    TIME_INDEX_SUFFIX,
    BatchScan,
    LogSegment,
    pread_exact,
    segment_file,
)
from broker.log.txn_index import AbortedTransactions, AbortedTxn, append_entry, read_entries, write_entries
from broker.protocol.records import BatchHeader, read_marker


class ReplayedSegment(Protocol):
    """What a producer-state replay reads of a segment (a :class:`LogSegment`, or a :class:`SegmentReader`)."""

    @property
    def base_offset(self) -> int: ...

    @property
    def next_offset(self) -> int: ...

    @property
    def txn_index_path(self) -> str: ...

    def batches(self) -> Iterator[tuple[int, BatchHeader]]: ...

    def read(self, position: int, length: int) -> bytes: ...


class SegmentReader:
    """A segment's data as it was when the log's lock was held, read through a descriptor of its own (the
    segment's may be closed meanwhile by the budget of open files). A segment gone from the log meanwhile (renamed
    by retention or DeleteRecords) reads as empty: its records are below the log start the caller applies."""

    def __init__(self, segment: LogSegment) -> None:
        self.base_offset = segment.base_offset
        self.next_offset = segment.next_offset
        self.txn_index_path = segment.txn_index_path
        self._path = segment.log_path
        self._size = segment.size
        self._fd = -1

    def batches(self) -> Iterator[tuple[int, BatchHeader]]:
        """Opens the file on first use (a replay reads only the segments after its snapshot)."""
        if self._fd < 0:
            try:
                self._fd = os.open(self._path, os.O_RDONLY)
            except FileNotFoundError:
                return iter(())
        return iter(BatchScan(self._fd, 0, self._size, self.base_offset, min_offset=-1))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def read(self, position: int, length: int) -> bytes:
        return pread_exact(self._fd, length, position)


def _aborted_entry(completed: CompletedTxn | None, producers: ProducerStateManager) -> AbortedTxn | None:
    """The entry of a transaction a marker ended, if it was aborted."""
    if completed is None or completed.committed:
        return None
    unstable = producers.first_unstable_offset()
    return AbortedTxn(completed.producer_id, completed.first_offset, completed.marker_offset,
                      completed.marker_offset + 1 if unstable is None else unstable)


class LogRecovery(LogDurability):
    # --- opening and recovery ----------------------------------------------------------------------------

    def _open(self) -> None:
        now_ms = self._now_ms()
        self._finish_interrupted_cleaning()
        clean = os.path.exists(self._path(CLEAN_SHUTDOWN_FILE))
        if clean:
            os.unlink(self._path(CLEAN_SHUTDOWN_FILE))
        bases = self._segment_bases_on_disk()
        checkpointed_start = read_int(self._path(LOG_START_FILE))
        recovery_point = read_int(self._path(RECOVERY_POINT_FILE)) or 0
        recover_from = max(bisect_right(bases, recovery_point) - 1, 0)
        interval = self.config.index_interval_bytes
        for i, base in enumerate(bases):
            if clean or i < recover_from:
                self._segments.append(LogSegment.open(self.directory, base, interval, now_ms, self._descriptors))
                continue
            segment, result = LogSegment.open_and_recover(self.directory, base, interval, now_ms, self._descriptors)
            self._segments.append(segment)
            for header in result.headers:
                self._epochs.assign(header.partition_leader_epoch, header.base_offset)
            if result.truncated_bytes:
                for later in bases[i + 1 :]:
                    for suffix in SEGMENT_SUFFIXES:
                        unlink_quietly(segment_file(self.directory, later, suffix))
                break
        if not self._segments:
            start = checkpointed_start or 0
            self._segments.append(self._new_segment(start, now_ms))
        elif not clean:
            # A run that stopped without closing the log may have left disk space reserved past the end.
            self._segments[-1].release_reserved_space(unknown=True)
        self._bases = [segment.base_offset for segment in self._segments]
        end = self._segments[-1].next_offset
        self.log_start_offset = min(max(checkpointed_start or 0, self._segments[0].base_offset), end)
        self._epochs.truncate_from_end(end)
        self._epochs.truncate_from_start(self.log_start_offset)
        self._rebuild_producer_state()
        self.high_watermark = end if self.auto_high_watermark else self.log_start_offset

    def _new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        """A new active segment; with the topic's ``preallocate`` it reserves ``segment.bytes`` of disk at once."""
        config = self.config
        return LogSegment.create(self.directory, base_offset, config.index_interval_bytes, now_ms,
                                 preallocate=config.segment_bytes if config.preallocate else 0,
                                 account=self._descriptors)

    def _segment_bases_on_disk(self) -> list[int]:
        bases = []
        for name in os.listdir(self.directory):
            stem, _, suffix = name.partition(".")
            if name.endswith((CLEANED_SUFFIX, TEMP_SUFFIX, DELETED_SUFFIX)):
                # leftovers of an unfinished clean or checkpoint, or deleted segments not yet removed
                os.unlink(self._path(name))
            elif "." + suffix == LOG_SUFFIX and len(stem) == 20 and stem.isdigit():
                bases.append(int(stem))
        return sorted(bases)

    def _rebuild_producer_state(self) -> None:
        """Newest snapshot at or below the log end, then replay the batch headers after it; aborted
        transactions come from the segments' ``.txnindex`` files up to the snapshot and from the
        replayed markers after it. On this thread, under the lock."""
        rewrites = self._replay_producer_state(self._segments, self.log_end_offset, self.log_start_offset,
                                               self._producers, self._aborted)
        for path, entries in rewrites:
            write_entries(path, entries)

    def _replay_producer_state(self, segments: Sequence[ReplayedSegment], end: int, log_start: int,
                               producers: ProducerStateManager, aborted: AbortedTransactions,
                               ) -> list[tuple[str, list[AbortedTxn]]]:
        """What :meth:`_rebuild_producer_state` does, into ``producers`` and ``aborted``, for ``segments`` (the
        log's, or readers of its files off the lock: :class:`SegmentReader`); the ``.txnindex`` files to rewrite,
        for the caller. Snapshots past ``end`` are removed."""
        since = load_latest_snapshot(self.directory, producers, end)
        replay_from = log_start if since is None else since
        on_disk = {segment.base_offset: read_entries(segment.txn_index_path) for segment in segments}
        aborted.replace([entry for entries in on_disk.values() for entry in entries])
        aborted.drop_from(replay_from)
        for segment in segments:
            if segment.next_offset <= replay_from:
                continue
            for position, header in segment.batches():
                if header.base_offset >= replay_from:
                    marker = read_marker(segment.read(position, header.size)) if header.is_control else None
                    entry = _aborted_entry(producers.update(header, marker), producers)
                    if entry is not None:
                        aborted.add(entry)
        producers.remove_before(log_start)
        # the files of the replayed segments now say what the replay found (a crash may have lost entries)
        rewrites = []
        for i, segment in enumerate(segments):
            if segment.next_offset > replay_from or i + 1 == len(segments):
                upper = segments[i + 1].base_offset if i + 1 < len(segments) else INT64_MAX
                entries = aborted.between(segment.base_offset, upper)
                if entries != on_disk[segment.base_offset]:
                    rewrites.append((segment.txn_index_path, entries))
        return rewrites

    def _note_completed(self, completed: CompletedTxn | None, *, persist: bool = True) -> None:
        """Index a transaction the last appended marker ended, if it was aborted."""
        entry = _aborted_entry(completed, self._producers)
        if entry is None:
            return
        self._aborted.add(entry)
        if persist:
            append_entry(self._segments[-1].txn_index_path, entry)

    def _finish_interrupted_cleaning(self) -> None:
        for name in sorted(os.listdir(self.directory)):
            if not name.endswith(CLEANING_SUFFIX):
                continue
            base = int(name[: -len(CLEANING_SUFFIX)])
            with open(self._path(name)) as f:
                end = json.load(f)["end"]
            if os.path.exists(segment_file(self.directory, base, LOG_SUFFIX) + CLEANED_SUFFIX):
                # The old files may still be there (all or some): the cleaned ones replace them.
                for name_on_disk in os.listdir(self.directory):
                    stem, _, suffix = name_on_disk.partition(".")
                    if (
                        len(stem) == 20
                        and stem.isdigit()
                        and base <= int(stem) < end
                        and "." + suffix in SEGMENT_SUFFIXES
                    ):
                        os.unlink(self._path(name_on_disk))
            else:
                # The log file was renamed already; index files still to rename are rebuilt instead.
                for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                    unlink_quietly(segment_file(self.directory, base, suffix) + CLEANED_SUFFIX)
                    unlink_quietly(segment_file(self.directory, base, suffix))
            self._complete_swap(base)
            fsync_directory(self.directory)
            os.unlink(self._path(name))

    def _complete_swap(self, base: int) -> None:
        """Rename the cleaned files over the segment's; the caller makes the renames durable."""
        for suffix in SEGMENT_SUFFIXES:
            cleaned = segment_file(self.directory, base, suffix) + CLEANED_SUFFIX
            if os.path.exists(cleaned):
                os.replace(cleaned, segment_file(self.directory, base, suffix))
