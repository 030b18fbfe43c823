"""The log of one partition: segments, offsets, idempotent producers, leader epochs, recovery, retention.

Appends stay opaque (DESIGN principle 2): a producer's batch is validated by its header and CRC-32C,
patched with its offsets and leader epoch, and written as bytes. Reads return whole stored batches.
Records are decoded only for a timestamp lookup and, on compacted topics, to refuse records without a
key (as Kafka does).

Directory layout (Kafka's)::

    00000000000000000000.log / .index / .timeindex   segments, named by base offset
    00000000000000000000.snapshot                    producer state before that offset (JSON)
    leader-epoch-checkpoint                          leader epoch -> start offset
    log-start-offset                                 advanced by retention and DeleteRecords
    recovery-point                                   segments from here on are checked after a crash
    .clean-shutdown                                  written last by close(), removed on open
    <base>.cleaning                                  a compaction swap in progress (see replace_segments)
    00000000000000000000.log.deleted (and indexes)   out of the log, removed file.delete.delay.ms later

Flush policy
------------
By default Kafka's: every append is written to the operating system before it is acknowledged, so it
survives a crash of the process (kill -9), but there is no fsync per append. When a segment rolls the
finished segment is fsynced in the background (:mod:`broker.log.background`, as Kafka's scheduler does it:
appends go on meanwhile) and then the recovery point moves past it, so after a crash of the machine only
segments from the recovery point on need checking. Topic configs ``flush.messages`` (fsync
after that many records) and ``flush.ms`` (fsync when the oldest unflushed append is that old, checked on
append and by :meth:`flush_if_due`) tighten this; set ``flush.messages=1`` in the broker-wide defaults to
fsync every append. ``close()`` fsyncs everything and writes the clean-shutdown marker.

Recovery
--------
Without the marker, every segment from the recovery point on is re-read: each batch's header must be
plausible and its CRC-32C must match. The first torn or corrupt batch and everything after it (including
later segments) is cut away; indexes of those segments are rebuilt. With the marker, segments are
trusted and only indexes that are missing or inconsistent are rebuilt.

Off the caller's thread
-----------------------
Nothing that waits for the disk runs on the caller's thread (the broker's event loop): checkpoints (the log
start offset, the leader epochs) are noted under the lock and written, fsynced, by a job on the background,
as are the fsyncs ``flush.messages``/``flush.ms`` ask for; the job fsyncs without the lock, on duplicates of
the files' descriptors. Its order is the one recovery relies on: the checkpoints first, then the data, then the
recovery point moves past what is durable. An append that asked for a flush carries a future
(:attr:`AppendResult.durable`) that completes when the data is on disk, and the producer's answer waits for it;
:meth:`pending_durability` is the same for everything asked so far (DeleteRecords waits for its log start).

Thread safety: every public method holds the log's lock, so the compaction and retention threads can change
segments (briefly) while the event loop appends and reads.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import random
import threading
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from broker.errors import ErrorCode, KafkaError
from broker.log.background import FLUSHER, run_later
from broker.log.config import INT64_MAX, LogConfig
from broker.log.epoch_cache import LeaderEpochCache
from broker.log.files import TEMP_SUFFIX, fsync_directory, read_int, unlink_quietly, write_atomically
from broker.log.producer_state import (
    CompletedTxn,
    ProducerStateManager,
    load_latest_snapshot,
    write_snapshot,
)
from broker.log.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    TIME_INDEX_SUFFIX,
    LogSegment,
    segment_file,
)
from broker.log.txn_index import AbortedTransactions, AbortedTxn, append_entry, read_entries, write_entries
from broker.protocol.record_walk import RecordChecks, record_times, validate_records
from broker.protocol.records import (
    ATTR_COMPRESSION_MASK,
    HEADER_SIZE,
    INT32_MAX,
    BatchHeader,
    crc_of,
    iter_batches,
    patched_header,
    read_marker,
    recompress,
    validate_batch,
)
from broker.protocol.types import FileRegion

CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
LOG_START_FILE = "log-start-offset"
RECOVERY_POINT_FILE = "recovery-point"
CLEANED_SUFFIX = ".cleaned"
CLEANING_SUFFIX = ".cleaning"


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool = False
    # set when the append asked for a flush (flush.messages, flush.ms): completes once the data is fsynced
    durable: concurrent.futures.Future[None] | None = None


class PartitionLog:
    """One partition's log in ``directory``; see the module docstring for layout and guarantees.

    ``high_watermark`` is a plain attribute. With ``auto_high_watermark`` (a single node) every append
    moves it to the log end; replication turns that off and sets it itself.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        config: LogConfig,
        clock: Callable[[], float] = time.time,
        *,
        auto_high_watermark: bool = True,
        background: Callable[[Callable[[], None]], None] = FLUSHER.submit,
    ) -> None:
        self.directory = os.fspath(directory)
        self._jitter_for = -1  # the segment (base offset) the current roll jitter was drawn for
        self._jitter_ms = 0
        self.config = config
        self._clock = clock
        self.auto_high_watermark = auto_high_watermark
        self._lock = threading.RLock()
        self._background = background  # runs a job off the caller's thread (fsyncs of rolled segments)
        self._segments: list[LogSegment] = []
        self._unsynced: list[LogSegment] = []  # rolled segments not yet fsynced (oldest first)
        self._bases: list[int] = []
        self._producers = ProducerStateManager()
        self._aborted = AbortedTransactions()
        self._closed = False
        self._unflushed_messages = 0
        self._first_unflushed_ms: int | None = None
        # what the background job is to make durable (see "Off the caller's thread")
        self._durable_future: concurrent.futures.Future[None] | None = None
        self._flush_requested: concurrent.futures.Future[None] | None = None  # the future of the flush asked
        self._truncated = False  # a truncation's new length and removed files wait for the background's fsyncs
        self._pending_writes: dict[str, tuple[int, bytes]] = {}  # path -> (sequence number, content)
        self._write_sequence = 0
        self._written: dict[str, int] = {}  # path -> sequence number of the content on disk
        self._in_flight: dict[str, tuple[int, bytes]] = {}  # what the background job took to write
        self._write_lock = threading.Lock()  # taken after self._lock, never before it
        self._deleted = False
        # Bumped whenever existing segments change (truncation, deletion, compaction swap), so the
        # cleaner can tell that the segments it read are no longer the ones in the log.
        self.structure_version = 0
        # Compaction bookkeeping (in memory: after a restart the cleaner makes one full pass).
        self.cleaned_through_offset = 0
        self.next_tombstone_expiry_ms: int | None = None
        os.makedirs(self.directory, exist_ok=True)
        self._epochs = LeaderEpochCache(self.directory, write=self._write_later)
        self._open()

    # --- opening and recovery ----------------------------------------------------------------------------

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name)

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
                self._segments.append(LogSegment.open(self.directory, base, interval, now_ms))
                continue
            segment, result = LogSegment.open_and_recover(self.directory, base, interval, now_ms)
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
                                 preallocate=config.segment_bytes if config.preallocate else 0)

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
        replayed markers after it."""
        end = self.log_end_offset
        since = load_latest_snapshot(self.directory, self._producers, end)
        replay_from = self.log_start_offset if since is None else since
        on_disk = {segment.base_offset: read_entries(segment.txn_index_path) for segment in self._segments}
        self._aborted.replace([entry for entries in on_disk.values() for entry in entries])
        self._aborted.drop_from(replay_from)
        for segment in self._segments:
            if segment.next_offset <= replay_from:
                continue
            for position, header in segment.batches():
                if header.base_offset >= replay_from:
                    marker = read_marker(segment.read(position, header.size)) if header.is_control else None
                    self._note_completed(self._producers.update(header, marker), persist=False)
        self._producers.remove_before(self.log_start_offset)
        # the files of the replayed segments now say what the replay found (a crash may have lost entries)
        for i, segment in enumerate(self._segments):
            if segment.next_offset > replay_from or i + 1 == len(self._segments):
                upper = self._segments[i + 1].base_offset if i + 1 < len(self._segments) else INT64_MAX
                entries = self._aborted.between(segment.base_offset, upper)
                if entries != on_disk[segment.base_offset]:
                    write_entries(segment.txn_index_path, entries)

    def _note_completed(self, completed: CompletedTxn | None, *, persist: bool = True) -> None:
        """Index a transaction the last appended marker ended, if it was aborted."""
        if completed is None or completed.committed:
            return
        unstable = self._producers.first_unstable_offset()
        entry = AbortedTxn(completed.producer_id, completed.first_offset, completed.marker_offset,
                           completed.marker_offset + 1 if unstable is None else unstable)
        self._aborted.add(entry)
        if persist:
            append_entry(self._segments[-1].txn_index_path, entry)

    # --- properties --------------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return sum(segment.size for segment in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def latest_epoch(self) -> int:
        return self._epochs.latest_epoch

    def leader_epoch_entries(self) -> list[tuple[int, int]]:
        with self._lock:
            return self._epochs.entries()

    def producer_state(self) -> ProducerStateManager:
        return self._producers

    @property
    def last_stable_offset(self) -> int:
        """Where read_committed consumers stop: the first offset of the oldest open transaction, or the
        high watermark when that is lower or no transaction is open."""
        unstable = self._producers.first_unstable_offset()
        return self.high_watermark if unstable is None else min(unstable, self.high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """The aborted transactions a read_committed fetch of [fetch_offset, upper_offset) must skip."""
        with self._lock:
            return self._aborted.overlapping(fetch_offset, upper_offset)

    def aborted_entries(self) -> list[AbortedTxn]:
        with self._lock:
            return self._aborted.entries()

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"log {self.directory} is closed")

    # --- appends -----------------------------------------------------------------------------------------

    def append(
        self, batch: bytes | bytearray | memoryview, *, leader_epoch: int = 0, now_ms: int | None = None,
        from_coordinator: bool = False,
    ) -> AppendResult:
        """Append one producer batch: validate, check the producer's sequence, assign offsets, write.

        ``from_coordinator``: a batch of the broker's coordinators (a transaction marker, transactional offset
        commits): no sequence check, and it may be a control batch, which clients may not write.
        """
        header = validate_batch(batch, from_coordinator=from_coordinator)
        self._check_size(header)
        if now_ms is None:
            now_ms = self._now_ms()
        config = self.config
        timed = not config.log_append_time
        max_timestamp = validate_records(batch, header, RecordChecks(
            config.max_decompressed_message_bytes, config.compact and not header.is_control,
            now_ms - config.message_timestamp_before_max_ms if timed else None,
            now_ms + config.message_timestamp_after_max_ms if timed else None,
            os.path.basename(self.directory)))
        codec = config.codec
        if codec is not None and header.attributes & ATTR_COMPRESSION_MASK != codec and not header.is_control:
            # The topic's compression.type differs from the producer's: the only case where the broker
            # rewrites a batch (with compression.type=producer, the default, batches stay opaque).
            batch = recompress(batch, codec, config.codec_level)
            header = validate_batch(batch)
            self._check_size(header)
        if header.size > config.segment_bytes:
            # Kafka's UnifiedLog.append refuses what no segment could hold (RecordBatchTooLargeException)
            # rather than store a segment bigger than segment.bytes.
            raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                             f"batch of {header.size} bytes exceeds segment.bytes {config.segment_bytes}")
        with self._lock:
            self._check_open()
            if header.producer_id >= 0 and not from_coordinator:
                original = self._producers.check_append(header)
                if original is not None:
                    return AppendResult(
                        original.first_offset, original.last_offset, -1, self.log_start_offset, duplicate=True
                    )
            base_offset = self.log_end_offset
            last_offset = base_offset + header.last_offset_delta
            append_time = now_ms if self.config.log_append_time else None
            if append_time is not None:
                max_timestamp = append_time
            # The records' own largest timestamp is stored, whatever the header claimed, as Kafka stores it.
            patched = patched_header(batch, base_offset, leader_epoch, log_append_time_ms=append_time,
                                     max_timestamp=max_timestamp)
            self._maybe_roll(header.size, base_offset, last_offset, max_timestamp, now_ms)
            self._segments[-1].append(
                (patched, memoryview(batch)[HEADER_SIZE:]), base_offset, last_offset + 1, max_timestamp
            )
            completed = self._producers.update(
                header._replace(
                    base_offset=base_offset, partition_leader_epoch=leader_epoch, max_timestamp=max_timestamp
                ),
                read_marker(batch) if header.is_control else None,
            )
            self._note_completed(completed)
            self._epochs.assign(leader_epoch, base_offset)
            if self.auto_high_watermark:
                self.high_watermark = last_offset + 1
            durable = self._after_write(header.records_count, now_ms)
            return AppendResult(
                base_offset, last_offset, -1 if append_time is None else append_time, self.log_start_offset,
                durable=durable,
            )

    def _check_size(self, header: BatchHeader) -> None:
        if header.size > self.config.max_message_bytes:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"batch of {header.size} bytes exceeds max.message.bytes {self.config.max_message_bytes}",
            )

    def append_replicated(self, batches: bytes | bytearray | memoryview, *, now_ms: int | None = None) -> int:
        """Append batches whose offsets a leader assigned (a follower's fetch); return the new log end.

        Each whole batch must have a valid CRC and start at or after the log end (gaps are allowed: the
        leader's log may be compacted). A truncated tail is ignored. No producer checks are made, but the
        producer state and leader epochs are updated from the headers.
        """
        if now_ms is None:
            now_ms = self._now_ms()
        view = memoryview(batches)
        with self._lock:
            self._check_open()
            records = 0
            for pos, header in iter_batches(view):
                if crc_of(view, pos, header.size) != header.crc:
                    raise KafkaError(
                        ErrorCode.CORRUPT_MESSAGE,
                        f"replicated batch at offset {header.base_offset} has a bad CRC",
                    )
                if header.base_offset < self.log_end_offset or header.last_offset_delta < 0:
                    raise KafkaError(
                        ErrorCode.INVALID_RECORD,
                        f"replicated batch at offset {header.base_offset} does not follow log end {self.log_end_offset}",
                    )
                self._maybe_roll(
                    header.size, header.base_offset, header.last_offset, header.max_timestamp, now_ms
                )
                self._segments[-1].append(
                    (view[pos : pos + header.size],),
                    header.base_offset,
                    header.next_offset,
                    header.max_timestamp,
                )
                marker = read_marker(view[pos : pos + header.size]) if header.is_control else None
                self._note_completed(self._producers.update(header, marker))
                self._epochs.assign(header.partition_leader_epoch, header.base_offset)
                records += header.records_count
            if self.auto_high_watermark:
                self.high_watermark = self.log_end_offset
            if records:
                self._after_write(records, now_ms)
            return self.log_end_offset

    def _maybe_roll(
        self, size: int, base_offset: int, last_offset: int, max_timestamp: int, now_ms: int
    ) -> None:
        """Roll before writing a batch that would overfill the active segment, arrives after
        ``segment.ms`` (Kafka measures from the first batch's timestamp to this one's), or whose offsets
        do not fit the segment's 32-bit relative range."""
        active = self._segments[-1]
        if last_offset - active.base_offset > INT32_MAX:
            self._roll(now_ms, base_offset)
            return
        if active.size == 0:
            return
        if active.rolling_base_ms is not None:
            waited = max_timestamp - active.rolling_base_ms
        else:
            waited = now_ms - active.created_ms
        if active.size + size > self.config.segment_bytes or waited > self.config.segment_ms - self._roll_jitter_ms:
            self._roll(now_ms, base_offset)

    @property
    def _roll_jitter_ms(self) -> int:
        """segment.jitter.ms: each segment rolls up to this much before segment.ms, a random share drawn
        once per segment, so that many partitions created together do not all roll at the same moment."""
        jitter = self.config.segment_jitter_ms
        if jitter <= 0:
            return 0
        active = self._segments[-1]
        if self._jitter_for != active.base_offset:
            self._jitter_for, self._jitter_ms = active.base_offset, random.randrange(jitter)
        return min(self._jitter_ms, jitter - 1)

    def _roll(self, now_ms: int, base_offset: int) -> None:
        """Start a new active segment at ``base_offset``; the finished one is fsynced in the background,
        and the recovery point moves past it once it is.

        A full or failing disk fails the batch that needed the roll with KAFKA_STORAGE_ERROR, as in Kafka
        (clients retry it); a finished segment stays the active one until a roll succeeds."""
        old = self._segments[-1]
        try:
            if old.size == 0:
                # nothing to keep: its files go first, as the new segment may have its very base offset
                old.delete()
                self._segments.pop()
                self._bases.pop()
                new = self._new_segment(base_offset, now_ms)
            else:
                new = self._new_segment(base_offset, now_ms)
                try:
                    old.close_for_appends()  # writes its last index entries
                except OSError:
                    new.delete()  # the next roll creates it again
                    raise
                self._unsynced.append(old)
            self._segments.append(new)
            self._bases.append(base_offset)
            write_snapshot(self.directory, base_offset, self._producers)
        except OSError as exc:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot roll a segment in {self.directory}: {exc}") from exc
        self._schedule_durability()

    # --- durability, off the caller's thread -------------------------------------------------------------

    def _schedule_durability(self) -> concurrent.futures.Future[None]:
        """The future of the background job that will make what is asked so far durable; the caller holds
        the lock."""
        if self._durable_future is None:
            self._durable_future = concurrent.futures.Future()
            self._background(self._make_durable)
        return self._durable_future

    def _write_later(self, path: str, data: bytes) -> None:
        """Replace the checkpoint ``path`` with ``data``, fsynced, on the background; the caller holds the lock.
        Of several contents given, the newest stays, whichever thread writes it."""
        self._write_sequence += 1
        self._pending_writes[path] = (self._write_sequence, data)
        self._schedule_durability()

    def _request_flush(self) -> concurrent.futures.Future[None]:
        """fsync the active segment (and rolled ones not yet synced) on the background; the caller holds the
        lock."""
        self._unflushed_messages = 0
        self._first_unflushed_ms = None
        self._flush_requested = self._schedule_durability()
        return self._flush_requested

    def pending_durability(self) -> concurrent.futures.Future[None] | None:
        """A future that completes once every checkpoint and fsync asked for so far is done; None if none is
        pending."""
        with self._lock:
            return self._durable_future

    def pending_flush(self) -> concurrent.futures.Future[None] | None:
        """The future of the fsync flush.messages/flush.ms asked for, until it is done."""
        with self._lock:
            return self._flush_requested

    def _take_writes(self) -> dict[str, tuple[int, bytes]]:
        writes, self._pending_writes = self._pending_writes, {}
        return writes

    def _write_now(self) -> None:
        """Write every checkpoint asked for, the background job's too if it took them and has not written
        them yet (what it writes later is then older, and skipped); the caller holds the lock."""
        self._write_files({**self._in_flight, **self._take_writes()})

    def _write_files(self, writes: dict[str, tuple[int, bytes]]) -> None:
        """Write checkpoints taken with :meth:`_take_writes`, skipping any a newer content has replaced."""
        with self._write_lock:
            if self._deleted:
                return
            for path, (sequence, data) in writes.items():
                if sequence > self._written.get(path, 0):
                    write_atomically(path, data)
                    self._written[path] = sequence

    def _make_durable(self) -> None:
        """The background job: checkpoints, then the data of rolled segments (and of the active one when a
        flush was asked), then the recovery point moves past the rolled segments. Only the segments' data is
        fsynced: indexes are checked on open and rebuilt when they do not fit the log."""
        with self._lock:
            done, self._durable_future = self._durable_future, None
            writes = self._in_flight = self._take_writes()
            rolled = [] if self._closed else self._pending_sync()  # close() fsynced them
            flush = done is not None and self._flush_requested is done
            flushing = [self._segments[-1]] if flush and not self._closed else []
            descriptors = [os.dup(segment.fd) for segment in [*rolled, *flushing]]
            truncated, self._truncated = self._truncated, False
        try:
            self._write_files(writes)
            for fd in descriptors:
                os.fsync(fd)
            if rolled or truncated:
                fsync_directory(self.directory)  # the new segments' names, the truncated ones' removal
        except FileNotFoundError:
            pass  # the log was deleted meanwhile
        except OSError as exc:
            if done is not None:
                done.set_exception(exc)
            raise
        finally:
            for fd in descriptors:
                os.close(fd)
            if flush:
                with self._lock:
                    self._flush_requested = None if self._flush_requested is done else self._flush_requested
        with self._lock:
            if self._in_flight is writes:
                self._in_flight = {}
            if rolled and not self._closed:
                self._unsynced = [segment for segment in self._pending_sync() if segment not in rolled]
                self._checkpoint_recovery_point()
        if done is not None:
            done.set_result(None)

    def _pending_sync(self) -> list[LogSegment]:
        """The rolled segments still waiting for their fsync (retention and truncation may have deleted some
        since they rolled); the caller holds the lock."""
        self._unsynced = [segment for segment in self._unsynced if segment in self._segments]
        return list(self._unsynced)

    def _sync_rolled_now(self) -> None:
        """fsync the rolled segments still waiting for the background, on this thread (under the lock)."""
        for segment in self._pending_sync():
            os.fsync(segment.fd)
        if self._unsynced:
            fsync_directory(self.directory)
            self._unsynced = []

    def _checkpoint_recovery_point(self) -> None:
        """Recovery starts at the oldest segment that may hold data not yet fsynced. A hint: if the update is
        lost, recovery starts earlier than it needs to."""
        point = self._unsynced[0].base_offset if self._unsynced else self._segments[-1].base_offset
        write_atomically(self._path(RECOVERY_POINT_FILE), str(point).encode(), durable=False)

    def _after_write(self, records: int, now_ms: int) -> concurrent.futures.Future[None] | None:
        """Count the records written; when flush.messages or flush.ms says so, the future of their fsync."""
        self._unflushed_messages += records
        if self._first_unflushed_ms is None:
            self._first_unflushed_ms = now_ms
        if (
            self._unflushed_messages >= self.config.flush_messages
            or now_ms - self._first_unflushed_ms >= self.config.flush_ms
        ):
            return self._request_flush()
        return None

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
                    min_one: bool = True) -> FileRegion:
        """What :meth:`read` returns, left in the segment files for the server to send without copying.
        Without ``min_one`` only the whole batches within ``max_bytes`` are read, possibly none: a Fetch
        allows one oversized batch per response, not per partition (KIP-74)."""
        with self._lock:
            ranges = self._read_ranges(offset, max_bytes, max_offset, min_one)
            return FileRegion([(os.dup(segment.fd), start, stop - start) for segment, start, stop in ranges])

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

    # --- removing data -----------------------------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start to ``offset`` (-1: the high watermark); return the new start."""
        with self._lock:
            self._check_open()
            if offset == -1:
                offset = self.high_watermark
            if offset < 0 or offset > self.high_watermark:
                raise KafkaError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"cannot delete records before {offset}: high watermark is {self.high_watermark}",
                )
            if offset > self.log_start_offset:
                self._set_log_start(offset)
                while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
                    self._delete_first_segment()
            return self.log_start_offset

    def _set_log_start(self, offset: int) -> None:
        self.log_start_offset = offset
        self._write_later(self._path(LOG_START_FILE), str(offset).encode())
        self._epochs.truncate_from_start(offset)
        self._producers.remove_before(offset)

    def _discard(self, segment: LogSegment) -> None:
        """A segment out of the log: its files are renamed ``*.deleted`` now and removed on the background
        thread ``file.delete.delay.ms`` later (as Kafka does), so that the event loop does not wait for the
        kernel to free a gigabyte and a fetch that found the segment a moment ago can still read it."""
        renamed = segment.retire()
        if renamed:
            run_later(partial(unlink_quietly, *renamed), self.config.file_delete_delay_ms / 1000, self._background)

    def _delete_first_segment(self) -> None:
        segment = self._segments.pop(0)
        self._bases.pop(0)
        self._discard(segment)
        self._aborted.drop_before(self._segments[0].base_offset)
        self.structure_version += 1
        if self.log_start_offset < self._segments[0].base_offset:
            self._set_log_start(self._segments[0].base_offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding ``offset`` or later (a follower diverged from its leader).

        The log then ends at ``offset`` or, if that falls inside a batch, at that batch's base offset.
        At or below the log start the log is emptied and restarts at ``offset``; if the batch holding
        ``offset`` began below the log start, the log is emptied and restarts at the log start.
        """
        with self._lock:
            self._check_open()
            if offset >= self.log_end_offset:
                return
            self.structure_version += 1
            if offset <= self.log_start_offset:
                self._restart_at(offset)
            else:
                while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
                    self._discard(self._segments.pop())
                    self._bases.pop()
                active = self._segments[-1]
                active.truncate_to(offset)
                if self.log_end_offset < self.log_start_offset:
                    self._restart_at(self.log_start_offset)
                else:
                    # the shorter length and the removed segments must not come back after a power loss: fsynced
                    # on the background, as a flush is, so that the follower's event loop does not wait for it
                    self._truncated = True
                    self._request_flush()
                    self._epochs.truncate_from_end(self.log_end_offset)
            self._producers.clear()
            self._rebuild_producer_state()
            self.high_watermark = min(self.high_watermark, self.log_end_offset)

    def _restart_at(self, offset: int) -> None:
        """Delete every segment; the log continues, empty, at ``offset``."""
        for segment in self._segments:
            self._discard(segment)
        self._aborted.replace([])
        self._segments = [self._new_segment(offset, self._now_ms())]
        self._bases = [offset]
        self.log_start_offset = offset
        self._write_later(self._path(LOG_START_FILE), str(offset).encode())
        # a follower's truncation is not acknowledged to anyone who could wait: it writes at once, as before
        self._write_now()
        write_atomically(self._path(RECOVERY_POINT_FILE), str(offset).encode(), durable=False)
        self._epochs.clear()

    def expire_producers(self, now_ms: int, max_idle_ms: int) -> None:
        """Forget the producers idle ``max_idle_ms`` (producer.id.expiration.ms), but for those with an open
        transaction: a later batch of one is then a new producer's, and a retried one no longer a duplicate."""
        with self._lock:
            self._check_open()
            self._producers.expire(now_ms, max_idle_ms)

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete the oldest segments past ``retention.ms`` or beyond ``retention.bytes``; return how many.

        As in Kafka, the active segment goes too when it qualifies and holds data: the log rolls first,
        so the log start moves to the log end.
        """
        if now_ms is None:
            now_ms = self._now_ms()
        with self._lock:
            self._check_open()
            if not self.config.delete:
                return 0
            deleted = 0
            retention_ms = self.config.retention_ms
            if retention_ms >= 0:
                deleted += self._delete_while(
                    lambda segment, _: now_ms - segment.largest_timestamp() > retention_ms, now_ms
                )
            if self.config.retention_bytes >= 0:
                excess = [self.size_bytes - self.config.retention_bytes]

                def over_size(segment: LogSegment, _: int) -> bool:
                    if excess[0] - segment.size < 0:
                        return False
                    excess[0] -= segment.size
                    return True

                deleted += self._delete_while(over_size, now_ms)
            return deleted

    def _delete_while(self, predicate: Callable[[LogSegment, int], bool], now_ms: int) -> int:
        deleted = 0
        while True:
            first = self._segments[0]
            if (len(self._segments) == 1 and first.size == 0) or not predicate(first, now_ms):
                return deleted
            if len(self._segments) == 1:
                self._roll(now_ms, self.log_end_offset)
            self._delete_first_segment()
            deleted += 1

    def oldest_deletable_timestamp(self) -> int | None:
        """Largest timestamp of the oldest segment if it may be deleted (it is not the active one)."""
        with self._lock:
            if self._closed or len(self._segments) < 2:
                return None
            return self._segments[0].largest_timestamp()

    def delete_oldest_segment(self) -> bool:
        """Delete the oldest segment unless it is the active one (disk-usage retention)."""
        with self._lock:
            if self._closed or len(self._segments) < 2:
                return False
            self._delete_first_segment()
            return True

    # --- compaction support ------------------------------------------------------------------------------

    def cleaning_snapshot(self) -> tuple[int, list[LogSegment], dict[int, int]]:
        """What the cleaner works on: (structure version, non-active segments, producer last offsets)."""
        with self._lock:
            self._check_open()
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
            new = LogSegment.open(self.directory, base, self.config.index_interval_bytes, self._now_ms())
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

    def _complete_swap(self, base: int) -> None:
        """Rename the cleaned files over the segment's; the caller makes the renames durable."""
        for suffix in SEGMENT_SUFFIXES:
            cleaned = segment_file(self.directory, base, suffix) + CLEANED_SUFFIX
            if os.path.exists(cleaned):
                os.replace(cleaned, segment_file(self.directory, base, suffix))

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

    # --- durability and lifetime -------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the active segment and any rolled one the background has not fsynced yet."""
        with self._lock:
            self._check_open()
            self._flush_locked()

    def _flush_locked(self) -> None:
        self._write_now()
        if self._unsynced:
            self._sync_rolled_now()
            self._checkpoint_recovery_point()
        self._segments[-1].flush()
        self._unflushed_messages = 0
        self._first_unflushed_ms = None

    def flush_if_due(self, now_ms: int) -> bool:
        """Have the background fsync if the oldest unflushed append is older than ``flush.ms``; True if due."""
        with self._lock:
            if self._closed or self._first_unflushed_ms is None:
                return False
            if now_ms - self._first_unflushed_ms < self.config.flush_ms:
                return False
            self._request_flush()
            return True

    def close(self) -> None:
        """fsync everything, checkpoint producer state, and mark the shutdown clean."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            active = self._segments[-1]
            active.close_for_appends()
            self._sync_rolled_now()
            active.flush()
            end = self.log_end_offset
            write_snapshot(self.directory, end, self._producers)
            write_atomically(self._path(RECOVERY_POINT_FILE), str(active.base_offset).encode(), durable=False)
            for segment in self._segments:
                segment.close()
            self._write_now()
            # The marker says "trust every file": it must not reach the disk before they do.
            with open(self._path(CLEAN_SHUTDOWN_FILE), "wb"):
                pass
            fsync_directory(self.directory)

    def close_without_checkpoint(self) -> None:
        """Release files without marking the shutdown clean (the log is about to be deleted)."""
        with self._lock:
            self._closed = True
            self._pending_writes.clear()
            for segment in self._segments:
                segment.close()
            with self._write_lock:  # a checkpoint being written finishes; none is written after
                self._deleted = True

    @property
    def closed(self) -> bool:
        return self._closed
