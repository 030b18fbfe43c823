"""Log compaction: keep the latest record per key in the non-active segments of a partition.

One pass over a partition (:func:`clean_partition`):

1. Map every key of the dirty section (the non-active segments past what the last pass cleaned) to the
   offset of its latest record (records are decoded here; this is the one place besides timestamp lookups
   that does). The map holds what ``log.cleaner.dedupe.buffer.size`` holds in Kafka's SkimpyOffsetMap (24
   bytes a key: its 16-byte MD5 and an offset, filled to ``log.cleaner.io.buffer.load.factor``): when the
   dirty section has more keys, the pass ends at the last offset mapped and the next one goes on from there.
   Records of the cleaned section whose key is not in the map are the latest of their key already.
2. Group consecutive segments so that each group's cleaned output fits ``segment.bytes``, and rebuild
   each group aside into ``*.cleaned`` files: a batch keeps its base offset, offset range, producer
   fields and codec, and holds only the records that are still the latest for their key. Batches that
   lose nothing are copied byte for byte; control batches are kept as they are.
3. Swap each group in under the log's lock (:meth:`PartitionLog.replace_segments`), which is short:
   renames and unlinks. If the log changed meanwhile (retention, truncation), the group is dropped and
   the next pass starts over.

Tombstones (records with a null value) follow KIP-534: the first pass that keeps a tombstone stamps its
batch with a delete horizon (now + ``delete.retention.ms``, attribute bit 6, stored in baseTimestamp);
a pass after the horizon removes it, so consumers have ``delete.retention.ms`` to see every delete.
Records without a key cannot be compacted and are dropped, as Kafka's cleaner does. Transactions: records of
aborted transactions are removed and never count as a key's latest record; segments holding records of
a transaction still open are not cleaned until it ends; markers are kept. A batch of an
idempotent producer that loses all its records is kept as an empty batch if it is that producer's last,
so its sequence numbers survive a restart.

Segments are read in spans of at most half of ``log.cleaner.io.buffer.size`` (Kafka's read buffer; its
write buffer is the other half), a batch larger than that alone; every byte read and written passes the
:class:`Throttler` of ``log.cleaner.io.max.bytes.per.second``.

The active segment is never touched. Runs in the caller's thread (the broker uses ``asyncio.to_thread``).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from broker.log.partition import PartitionLog
from broker.log.segment import BatchScan, LogSegment, pread_exact
from broker.log.txn_index import AbortedTxn
from broker.protocol.records import (
    INT32_MAX,
    TIMESTAMP_LOG_APPEND_TIME,
    BatchHeader,
    Record,
    build_batch,
    decode_batch,
)

# Kafka's SkimpyOffsetMap: an MD5 of the key and an 8-byte offset per entry
_BYTES_PER_ENTRY = 16 + 8


class Throttler:
    """Kafka's Throttler: every ``check_interval_s`` it compares the bytes observed with the time taken and
    sleeps off what ran faster than ``bytes_per_second``. Shared by all passes; the rate may change between
    calls (the config is dynamic)."""

    def __init__(
        self,
        bytes_per_second: float,
        *,
        check_interval_s: float = 0.3,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.bytes_per_second = bytes_per_second
        self._check_interval_s = check_interval_s
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._period_start = clock()
        self._observed = 0

    def __call__(self, observed: int) -> None:
        with self._lock:
            self._observed += observed
            elapsed = self._clock() - self._period_start
            if elapsed < self._check_interval_s:
                return
            wanted = self._observed / self.bytes_per_second
            if wanted > elapsed:
                self._sleep(wanted - elapsed)
            self._period_start = self._clock()
            self._observed = 0


@dataclass(frozen=True)
class CleanerSettings:
    """The broker's log.cleaner.* resource settings, as a pass uses them (Kafka's defaults)."""

    dedupe_buffer_size: int = 128 * 1024 * 1024
    load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    throttler: Callable[[int], None] | None = None

    @property
    def max_keys(self) -> int:
        """How many keys one pass maps (Kafka caps the buffer of a map at 2 GiB)."""
        return int(min(self.dedupe_buffer_size, INT32_MAX) // _BYTES_PER_ENTRY * self.load_factor)

    def observe(self, nbytes: int) -> None:
        if self.throttler is not None:
            self.throttler(nbytes)


def _read_batches(segment: LogSegment, settings: CleanerSettings) -> Iterator[tuple[BatchHeader, bytes]]:
    """Every batch of a segment, read through a file descriptor of our own (retention may close or
    delete the segment meanwhile, and an open descriptor keeps the file readable), in spans of at most
    the read buffer, a larger batch on its own."""
    read_buffer = settings.io_buffer_size // 2
    fd = segment.open_for_reading()
    try:
        end = os.fstat(fd).st_size
        span: list[tuple[int, BatchHeader]] = []
        for pos, header in BatchScan(fd, 0, end, segment.base_offset, min_offset=-1):
            if span and pos + header.size - span[0][0] > read_buffer:
                yield from _read_span(fd, span, settings)
                span = []
            span.append((pos, header))
        if span:
            yield from _read_span(fd, span, settings)
    finally:
        segment.close_for_reading(fd)


def _read_span(
    fd: int, span: list[tuple[int, BatchHeader]], settings: CleanerSettings
) -> Iterator[tuple[BatchHeader, bytes]]:
    start = span[0][0]
    last_pos, last = span[-1]
    data = pread_exact(fd, last_pos + last.size - start, start)
    settings.observe(len(data))
    view = memoryview(data)
    for pos, header in span:
        yield header, bytes(view[pos - start:pos - start + header.size])


def _key_hash(key: bytes) -> bytes:
    return hashlib.md5(key, usedforsecurity=False).digest()


class _Aborted:
    """Whether a batch belongs to an aborted transaction (from the partition's aborted-transaction index)."""

    def __init__(self, entries: list[AbortedTxn]) -> None:
        self._ranges: dict[int, list[tuple[int, int]]] = {}
        for entry in entries:
            self._ranges.setdefault(entry.producer_id, []).append((entry.first_offset, entry.last_offset))

    def __call__(self, header: BatchHeader) -> bool:
        if not header.is_transactional or header.is_control:
            return False
        ranges = self._ranges.get(header.producer_id)
        return ranges is not None and any(first <= header.base_offset <= last for first, last in ranges)


def _latest_offsets(
    dirty: list[LogSegment], start: int, aborted: _Aborted, settings: CleanerSettings
) -> tuple[dict[bytes, int], int]:
    """The offset map of the dirty section from ``start`` (key hash -> offset of its latest record), and
    the offset this pass cleans up to: the dirty section's end, or, when more keys than the map holds come
    first, the offset after the last one mapped."""
    latest: dict[bytes, int] = {}
    max_keys = settings.max_keys
    mapped_through = start - 1
    for segment in dirty:
        for header, data in _read_batches(segment, settings):
            if header.last_offset < start:
                continue
            if not header.is_control and not aborted(header):
                for record in decode_batch(data)[1]:
                    if record.key is None or record.offset < start:
                        continue
                    digest = _key_hash(record.key)
                    if digest not in latest and len(latest) >= max_keys:
                        return latest, mapped_through + 1
                    latest[digest] = record.offset
                    mapped_through = record.offset
            mapped_through = header.last_offset
    return latest, dirty[-1].next_offset if dirty else start


def _group_segments(segments: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    """Consecutive runs whose total size fits one segment and whose offsets fit its 32-bit range."""
    groups: list[list[LogSegment]] = []
    for segment in segments:
        if groups:
            group = groups[-1]
            size = sum(member.size for member in group) + segment.size
            if size <= max_bytes and segment.next_offset - 1 - group[0].base_offset <= INT32_MAX:
                group.append(segment)
                continue
        groups.append([segment])
    return groups


class _BatchFilter:
    """Decides what becomes of each batch; remembers the earliest delete horizon it leaves behind."""

    def __init__(
        self,
        latest: dict[bytes, int],
        end_offset: int,
        producer_last_offsets: dict[int, int],
        now_ms: int,
        delete_retention_ms: int,
        aborted: _Aborted,
    ) -> None:
        self.aborted = aborted
        self.latest = latest
        self.end_offset = end_offset
        self.producer_last_offsets = producer_last_offsets
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        self.next_horizon_ms: int | None = None

    def cleaned(self, header: BatchHeader, data: bytes) -> bytes | None:
        """The batch to write in place of ``data`` (``data`` itself if unchanged), or None to drop it."""
        if header.is_control:
            return data
        aborted = self.aborted(header)
        records = [] if aborted else decode_batch(data)[1]
        horizon = header.delete_horizon_ms
        kept: list[Record] = []
        keeps_tombstone = False
        for record in records:
            # past the map's end nothing is known to supersede a record (Kafka keeps it, keyless or not)
            if record.offset < self.end_offset and (
                record.key is None or record.offset < self.latest.get(_key_hash(record.key), -1)
            ):
                continue
            if record.value is None:
                if horizon is not None and self.now_ms >= horizon:
                    continue
                keeps_tombstone = True
            kept.append(record)
        new_horizon = None
        if keeps_tombstone:
            new_horizon = horizon if horizon is not None else self.now_ms + self.delete_retention_ms
            if self.next_horizon_ms is None or new_horizon < self.next_horizon_ms:
                self.next_horizon_ms = new_horizon
        if not aborted and len(kept) == len(records) and new_horizon == horizon:
            return data
        if not kept and not (
            header.producer_id >= 0
            and self.producer_last_offsets.get(header.producer_id) == header.last_offset
        ):
            return None
        return build_batch(
            kept,
            base_offset=header.base_offset,
            compression=header.compression,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            timestamp_type=header.timestamp_type,
            partition_leader_epoch=header.partition_leader_epoch,
            is_transactional=header.is_transactional,
            last_offset_delta=header.last_offset_delta,
            # LogAppendTime records take the batch's time; an emptied batch keeps it for retention.
            max_timestamp=header.max_timestamp
            if header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME or not kept
            else None,
            delete_horizon_ms=new_horizon,
        )


def _clean_group(
    partition_log: PartitionLog, group: list[LogSegment], batch_filter: _BatchFilter, settings: CleanerSettings
) -> LogSegment | None:
    """Build the cleaned replacement of ``group`` aside; None (and nothing left behind) if it would
    be identical to what is there."""
    cleaned = partition_log.create_cleaned_segment(group[0].base_offset)
    changed = len(group) > 1  # merging small segments is worth a rewrite by itself
    try:
        for segment in group:
            for header, data in _read_batches(segment, settings):
                kept = batch_filter.cleaned(header, data)
                if kept is not data:
                    changed = True
                if kept is not None:
                    settings.observe(len(kept))
                    kept_header = BatchHeader.parse(kept)
                    cleaned.append(
                        (kept,), kept_header.base_offset, kept_header.next_offset, kept_header.max_timestamp
                    )
    except BaseException:
        cleaned.delete()
        raise
    if not changed:
        cleaned.delete()
        return None
    return cleaned


def clean_partition(partition_log: PartitionLog, now_ms: int, settings: CleanerSettings | None = None) -> bool:
    """Compact one partition if it has uncleaned segments or tombstones past their horizon.

    Returns True if any segment was rewritten. If retention, truncation or deletion changes the log
    meanwhile, the pass stops early and the next one starts over.
    """
    version, segments, producer_last_offsets = partition_log.cleaning_snapshot()
    min_lag = partition_log.config.min_compaction_lag_ms
    if min_lag > 0:
        # min.compaction.lag.ms: records stay as written until they are that old; cleaning stops at the
        # first segment holding a younger one (the segments after it are younger still, or not older)
        young = next((i for i, segment in enumerate(segments) if segment.max_timestamp > now_ms - min_lag),
                     len(segments))
        segments = segments[:young]
    if not segments:
        return False
    cleaned_through = partition_log.cleaned_through_offset
    dirty = [segment for segment in segments if segment.next_offset > cleaned_through]
    horizon = partition_log.next_tombstone_expiry_ms
    tombstones_due = horizon is not None and now_ms >= horizon
    if not dirty and not tombstones_due:
        return False
    config = partition_log.config
    if dirty and not tombstones_due:
        # min.cleanable.dirty.ratio: wait until the uncleaned part is that share of the log, unless
        # max.compaction.lag.ms says its oldest record has waited long enough
        dirty_bytes = sum(segment.size for segment in dirty)
        ratio = dirty_bytes / max(1, sum(segment.size for segment in segments))
        first_written = dirty[0].rolling_base
        overdue = now_ms - first_written > config.max_compaction_lag_ms
        if ratio < config.min_cleanable_dirty_ratio and not overdue:
            return False
    settings = settings or CleanerSettings()
    rewritten = False
    try:
        aborted = _Aborted(partition_log.aborted_entries())
        latest, end_offset = _latest_offsets(dirty, cleaned_through, aborted, settings)
        batch_filter = _BatchFilter(
            latest, end_offset, producer_last_offsets, now_ms, config.delete_retention_ms, aborted
        )
        # what lies wholly past the pass's end is left for the next pass
        segments = [segment for segment in segments if segment.base_offset < end_offset]
        for group in _group_segments(segments, config.segment_bytes):
            cleaned = _clean_group(partition_log, group, batch_filter, settings)
            if cleaned is None:
                continue
            new_version = partition_log.replace_segments(version, group, cleaned)
            if new_version is None:
                cleaned.delete()
                return rewritten
            version = new_version
            rewritten = True
    except FileNotFoundError:
        return rewritten  # a segment or the whole partition was deleted meanwhile
    partition_log.cleaned_through_offset = max(cleaned_through, end_offset)
    partition_log.next_tombstone_expiry_ms = batch_filter.next_horizon_ms
    return rewritten
