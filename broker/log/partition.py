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

Rolls
-----
A roll's file work (the finished segment's last index entries and the release of the disk it reserved, the new
segment's three files, the producer-state snapshot) takes tens to hundreds of milliseconds now and then on a
busy disk, where creating a file waits for the journal. The event loop's appends (``roll_off_thread``: a
leader's produce, a follower's fetched batches) hand it to the roller thread
(:data:`broker.log.background.ROLLER`): the append that needs a roll seals the active segment under the lock
(memory only) and raises :class:`RollPending`; until the new segment is active every append of the partition
gets RollPending too, with the same future, and is made again once it is done, in the order they came. No
batch is written before the new segment is open and active, and reads meanwhile see the sealed segment, which
holds every record appended. A crash during a roll leaves the sealed segment whole and at most an empty new
one, which recovery opens as the active segment. Truncation, retention, close() and appends without
``roll_off_thread`` (which roll on their own thread) wait for a roll under way. Retention's roll of an expired
active segment is the roller's too, waited for with the lock released.

Two rolls have no data to seal. An empty active segment rolls when a follower's batch lies past its 32-bit range
(the leader's log start moved far): the new segment takes its place and its files go. A follower's truncation
that empties the log (``truncate_to`` with ``roll_off_thread``) leaves it at once on a *planned* segment, memory
only and never written to, and rolls from it: the roller writes the log's new checkpoints, renames the old
segments' files and makes the new segment's, in that order, so that a crash finds either the old log or the new
start.

Truncation
----------
A follower's truncation that keeps records (``truncate_to`` with ``roll_off_thread``, as the fetcher asks) changes
the log in memory at once, under the lock: the later segments leave the list, the segment holding the cut gets its
new end, indexes and statistics (:meth:`LogSegment.cut`, which reads only past its last index entry kept), the
leader epochs and aborted transactions past the end go, and every reader sees the shorter log. The file work goes to
the roller, as a roll's does, the partition's appends getting RollPending meanwhile: the later segments' files are
renamed, newest first, the cut segment's log file and indexes cut, the producer state replayed from the files through
descriptors of the roller's own (the snapshots past the end removed, the transaction indexes rewritten) and made the
log's, and only then the leader epochs' checkpoint written, which is held until the data is cut. A crash at any
point leaves the old log or a shorter prefix of it, down to the new end, each with its epochs: only records of the
old log, which the follower compares with its leader again. Truncations asked while the roller is at it follow it
without waiting, the one that empties the log too: it restarts the log in memory at once (the truncations queued
behind the one the roller is at are superseded, their segments retired with the rest) and queues its roll behind
that one (:meth:`_roll_restart`), which the roller makes once the cut is written and the cut's replayed producer
state is left aside (the restart emptied it). The files then go through the states of a cut (the old log or a
shorter prefix), then of a restart's roll (that prefix or the new start), one after the other, as they would had
the restart waited. A failed file work is made again before anything else changes the log: by the next append
(RollPending), or on the thread of a truncation, retention or close() that meets it; compaction skips the
partition until it is done.

The parts
---------
The log is built in layers, each a module of :mod:`broker.log`: the state they share
(:mod:`broker.log.partition_state`), durability (:mod:`broker.log.durability`), opening and recovery
(:mod:`broker.log.recovery`), segments leaving the log and compaction's swap (:mod:`broker.log.compaction_swap`)
and reads (:mod:`broker.log.reads`); appends, rolls, truncation and retention are here.

Thread safety: every public method holds the log's lock, so the compaction and retention threads can change
segments (briefly) while the event loop appends and reads.
"""

from __future__ import annotations

import concurrent.futures
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import structlog

from broker.errors import ErrorCode, KafkaError
from broker.log.background import FLUSHER, ROLLER
from broker.log.compaction_swap import LogSegments
from broker.log.config import LogConfig
from broker.log.descriptors import DescriptorBudget
from broker.log.epoch_cache import LeaderEpochCache
from broker.log.files import unlink_quietly
from broker.log.partition_state import (
    CLEAN_SHUTDOWN_FILE,
    CLEANED_SUFFIX,
    CLEANING_SUFFIX,
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
)
from broker.log.producer_state import ProducerStateManager, snapshot_offsets, snapshot_path, write_snapshot
from broker.log.reads import LogReads
from broker.log.recovery import SegmentReader
from broker.log.segment import LogSegment, SegmentCut
from broker.log.txn_index import AbortedTransactions, write_entries
from broker.protocol.record_walk import RecordChecks, validate_records
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

__all__ = ["CLEAN_SHUTDOWN_FILE", "CLEANED_SUFFIX", "CLEANING_SUFFIX", "LOG_START_FILE", "RECOVERY_POINT_FILE",
           "AppendResult", "PartitionLog", "RollPending"]

log = structlog.get_logger("broker.log")


def _roll_failed(directory: str, exc: OSError) -> KafkaError:
    return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot roll a segment in {directory}: {exc}")


def _truncation_failed(directory: str, exc: OSError) -> KafkaError:
    return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot truncate the log in {directory}: {exc}")


class RollPending(Exception):
    """A batch not appended because the partition's active segment is rolling off the caller's thread: append
    it again once ``rolled`` is done (it fails with KafkaError KAFKA_STORAGE_ERROR when the roll did)."""

    def __init__(self, rolled: concurrent.futures.Future[None]) -> None:
        super().__init__("the partition's active segment is rolling")
        self.rolled = rolled


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool = False
    # set when the append asked for a flush (flush.messages, flush.ms): completes once the data is fsynced
    durable: concurrent.futures.Future[None] | None = None


class PartitionLog(LogSegments, LogReads):
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
        descriptors: DescriptorBudget | None = None,
        roll_in: Callable[[Callable[[], None]], None] = ROLLER.submit,
    ) -> None:
        super().__init__(directory, config, clock, auto_high_watermark, background, descriptors)
        self._roll_in = roll_in  # runs the file work of rolls asked with roll_off_thread
        self._retiring: list[LogSegment] = []  # segments a restart took out of the log, until its roll renames them
        self._restarts = 0  # how many times the log was emptied (a truncation's file work started before keeps its state)
        self._epochs = LeaderEpochCache(self.directory, write=self._write_later)
        self._open()

    # --- appends -----------------------------------------------------------------------------------------

    def append(
        self, batch: bytes | bytearray | memoryview, *, leader_epoch: int = 0, now_ms: int | None = None,
        from_coordinator: bool = False, roll_off_thread: bool = False,
    ) -> AppendResult:
        """Append one producer batch: validate, check the producer's sequence, assign offsets, write.

        ``from_coordinator``: a batch of the broker's coordinators (a transaction marker, transactional offset
        commits): no sequence check, and it may be a control batch, which clients may not write.
        ``roll_off_thread`` (the event loop's appends): a batch that needs a roll, or meets one under way, is
        not appended; :class:`RollPending` is raised for the caller to append it again once the roll is done.
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
            self._settle_roll(roll_off_thread)
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
            self._maybe_roll(header.size, base_offset, last_offset, max_timestamp, now_ms, roll_off_thread)
            # The records' own largest timestamp is stored, whatever the header claimed, as Kafka stores it.
            patched = patched_header(batch, base_offset, leader_epoch, log_append_time_ms=append_time,
                                     max_timestamp=max_timestamp)
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

    def append_replicated(self, batches: bytes | bytearray | memoryview, *, now_ms: int | None = None,
                          roll_off_thread: bool = False) -> int:
        """Append batches whose offsets a leader assigned (a follower's fetch); return the new log end.

        Each whole batch must have a valid CRC and start at or after the log end (gaps are allowed: the
        leader's log may be compacted). A truncated tail is ignored. No producer checks are made, but the
        producer state and leader epochs are updated from the headers. ``roll_off_thread``: as for
        :meth:`append`, the batches before the one that needs a roll are appended, and RollPending raised.
        """
        if now_ms is None:
            now_ms = self._now_ms()
        view = memoryview(batches)
        with self._lock:
            self._settle_roll(roll_off_thread)
            records = 0
            try:
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
                    self._maybe_roll(header.size, header.base_offset, header.last_offset, header.max_timestamp,
                                     now_ms, roll_off_thread)
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
            finally:  # what was appended before a batch refused or a roll counts
                if self.auto_high_watermark:
                    self.high_watermark = self.log_end_offset
                if records:
                    self._after_write(records, now_ms)
            return self.log_end_offset

    def _settle_roll(self, roll_off_thread: bool = False) -> None:
        """Before the active segment changes (the caller holds the lock): the log is open and no roll is under
        way, waited for, or with ``roll_off_thread`` RollPending raised for the caller to come again."""
        self._check_open()
        if self._rolling is not None:
            if roll_off_thread:
                raise RollPending(self._rolling)
            self._wait_for_roll()
            self._check_open()
        if self._file_work:  # a truncation whose file work failed: made again before anything else changes
            if roll_off_thread:
                raise RollPending(self._start_cuts())
            self._run_cuts_here()

    def _maybe_roll(self, size: int, base_offset: int, last_offset: int, max_timestamp: int, now_ms: int,
                    roll_off_thread: bool) -> None:
        """Roll before writing a batch that needs it (:meth:`_roll_due`): on this thread, or with
        ``roll_off_thread`` on the roller, raising RollPending."""
        if not self._roll_due(size, last_offset, max_timestamp, now_ms):
            return
        if roll_off_thread:
            raise RollPending(self._start_roll(now_ms, base_offset))
        self._roll(now_ms, base_offset)

    def _roll_due(self, size: int, last_offset: int, max_timestamp: int, now_ms: int) -> bool:
        """Whether a batch must go to a new segment: it would overfill the active one, arrives after
        ``segment.ms`` (Kafka measures from the first batch's timestamp to this one's), or its offsets
        do not fit the segment's 32-bit relative range; and always on a planned segment (a restarted log's whose
        roll failed), which has no files to write to."""
        active = self._segments[-1]
        if active.planned:
            return True
        if last_offset - active.base_offset > INT32_MAX:
            return True
        if active.size == 0:
            return False
        if active.rolling_base_ms is not None:
            waited = max_timestamp - active.rolling_base_ms
        else:
            waited = now_ms - active.created_ms
        return active.size + size > self.config.segment_bytes or waited > self.config.segment_ms - self._roll_jitter_ms

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
        """Start a new active segment at ``base_offset`` on this thread; the caller holds the lock and no roll
        is under way (see "Rolls")."""
        old = self._segments[-1]
        try:
            snapshot = self._install_roll(old, self._roll_work(old, base_offset, now_ms)(), base_offset)
        except OSError as exc:
            raise _roll_failed(self.directory, exc) from exc
        self._delete_if_empty(old)
        self._write_roll_snapshot(base_offset, snapshot)

    def _start_roll(self, now_ms: int, base_offset: int) -> concurrent.futures.Future[None]:
        """Seal the active segment and hand the roll's file work to the roller; the caller holds the lock."""
        old = self._segments[-1]
        rolled: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._rolling = rolled
        self._roll_in(partial(self._roll_job, old, self._roll_work(old, base_offset, now_ms), base_offset, rolled))
        return rolled

    def _roll_job(self, old: LogSegment, work: Callable[[], LogSegment], base_offset: int,
                  rolled: concurrent.futures.Future[None]) -> None:
        """The roller's part of a roll: the files without the lock, then the new segment made active under it."""
        snapshot = None
        failure: BaseException | None = None
        try:
            new = work()
            with self._lock:
                if self._closed or self._segments[-1] is not old:
                    new.delete()  # the log was closed meanwhile (its topic deleted): no files left behind
                else:
                    snapshot = self._install_roll(old, new, base_offset)
        except OSError as exc:
            failure = _roll_failed(self.directory, exc)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            with self._lock:
                self._rolling = None
                self._roll_finished.notify_all()
            if failure is None:
                rolled.set_result(None)
            else:
                rolled.set_exception(failure)
        if snapshot is not None:
            self._delete_if_empty(old)
            self._write_roll_snapshot(base_offset, snapshot)

    def _roll_work(self, old: LogSegment, base_offset: int, now_ms: int) -> Callable[[], LogSegment]:
        """Seal ``old`` (the caller holds the lock); the file work of the roll, which needs no lock: the sealed
        segment's tail, then the new segment. Before a restarted log's (a planned ``old``) come its checkpoints (log
        start, leader epochs; the flusher's too, whichever writes first), the recovery point at the new base,
        then the renames of the segments it took out: a crash at any point finds either the old segments or the
        log's new start, and no later segment is trusted unchecked because of an older recovery point."""
        tail = old.seal()
        restart = None
        if old.planned:
            # the background job's checkpoints too, taken but perhaps not written yet: on disk before the renames
            restart = ({**self._in_flight, **self._pending_writes}, self._note_recovery_point(base_offset),
                       list(self._retiring))

        def work() -> LogSegment:
            tail.write()
            if restart is not None:
                checkpoints, point, retiring = restart
                self._write_files(checkpoints)
                self._write_recovery_point(*point)
                for segment in retiring:  # done again, harmlessly, if this roll fails and is made again
                    self._discard(segment)
                # the old log's producer snapshots (the new one at the base is written after the roll)
                unlink_quietly(*(snapshot_path(self.directory, at) for at in snapshot_offsets(self.directory)
                                 if at >= base_offset))
            return self._new_segment(base_offset, now_ms)

        return work

    def _install_roll(self, old: LogSegment, new: LogSegment, base_offset: int) -> bytes:
        """Make ``new`` the active segment; the producer state as of its base, for the snapshot. The caller holds
        the lock. Memory only (but for closing descriptors). An empty ``old`` leaves the log (its files go
        afterwards, :meth:`_delete_if_empty`): only a gap of offsets or a restart rolls one."""
        if old.size:
            old.release_descriptor()
            self._unsynced.append(old)
        else:
            self._segments.pop()
            self._bases.pop()
            if old.planned:
                self._retiring = []
        self._segments.append(new)
        self._bases.append(base_offset)
        self._schedule_durability()
        return self._producers.to_json()

    @staticmethod
    def _delete_if_empty(old: LogSegment) -> None:
        """The files of an empty segment a roll took out of the log; a planned one has none (and its base may be
        the new segment's)."""
        if not old.size and not old.planned:
            old.delete()

    def _write_roll_snapshot(self, base_offset: int, snapshot: bytes) -> None:
        """The producer state at a new segment's base. Only a shortcut for recovery (which replays the batch
        headers after the newest snapshot): the roll stands without it."""
        try:
            write_snapshot(self.directory, base_offset, snapshot)
        except OSError as exc:
            log.warning("cannot write a producer state snapshot", directory=self.directory, error=str(exc))

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

    def _delete_first_segment(self) -> None:
        segment = self._segments.pop(0)
        self._bases.pop(0)
        self._discard(segment)
        self._aborted.drop_before(self._segments[0].base_offset)
        self.structure_version += 1
        if self.log_start_offset < self._segments[0].base_offset:
            self._set_log_start(self._segments[0].base_offset)

    def truncate_to(self, offset: int, *, roll_off_thread: bool = False) -> None:
        """Remove every batch holding ``offset`` or later (a follower diverged from its leader).

        The log then ends at ``offset`` or, if that falls inside a batch, at that batch's base offset.
        At or below the log start the log is emptied and restarts at ``offset``; if the batch holding
        ``offset`` began below the log start, the log is emptied and restarts at the log start. A restart
        rolls to a new segment (:meth:`_restart_at`): with ``roll_off_thread`` (the event loop's truncations) on
        the roller, the partition's appends getting RollPending until it is done. Any other truncation changes the
        log in memory at once and leaves its file work to :meth:`_cut_files`: with ``roll_off_thread`` on the
        roller, the appends getting RollPending meanwhile (see "Truncation" in the module docstring).
        """
        with self._lock:
            while True:
                self._check_open()
                if offset >= self.log_end_offset:
                    return
                later = 0
                while later + 1 < len(self._segments) and self._segments[-1 - later].base_offset > offset:
                    later += 1
                target = self._segments[-1 - later]
                restart = offset <= self.log_start_offset or target.end_after_cut(offset) < self.log_start_offset
                # a roll under way is waited for, and a truncation's file work unless this one can follow it
                if self._rolling is not None and (not roll_off_thread or not self._cutting):
                    self._wait_for_roll()
                    continue
                break
            self.structure_version += 1
            if restart:
                # behind the roller's truncation file work (its first job, perhaps under way without the lock), or
                # superseding what failed of it
                queued = self._rolling is not None
                self._supersede_cuts(keep=1 if queued else 0)
                self._restart_at(offset if offset <= self.log_start_offset else self.log_start_offset)
                self._producers.clear()  # an empty log: the roll's file work removes the snapshots past its start
                self.high_watermark = min(self.high_watermark, self.log_end_offset)
                if queued:
                    self._file_work.append(self._roll_restart)  # the roller's loop takes it after the cut
                elif roll_off_thread:
                    self._start_roll(self._now_ms(), self.log_end_offset)
                else:
                    self._roll(self._now_ms(), self.log_end_offset)
                return
            discarded = self._segments[len(self._segments) - later :]
            del self._segments[len(self._segments) - later :]
            del self._bases[len(self._bases) - later :]
            cut = target.cut(offset)
            end = self.log_end_offset
            self._aborted.drop_from(end)  # the rest of the producer state follows with the file work
            self.high_watermark = min(self.high_watermark, end)
            readers = [SegmentReader(segment) for segment in self._segments]
            self._file_work.append(partial(self._cut_files, discarded, cut, readers, end, self.log_start_offset,
                                           self._restarts))
            self._epochs.truncate_from_end(end)  # its checkpoint is held until the data is cut
            if roll_off_thread:
                self._start_cuts()
            elif self._rolling is None:
                self._run_cuts_here()

    def _cut_files(self, discarded: list[LogSegment], cut: SegmentCut | None, readers: list[SegmentReader],
                   end: int, log_start: int, restarts: int) -> None:
        """A truncation's file work, without the lock (or under it, on the caller's thread); each step can be made
        again if one fails. The segments past the cut are renamed, newest first, then the segment holding the cut is
        cut: a crash at any point leaves the old log or a shorter one, never a gap, and each state holds only records
        of the old log, which the follower compares with its leader again. The producer state is replayed from the
        files (the snapshots past the end removed, the transaction indexes rewritten) and made the log's, unless the
        log was emptied since the truncation was asked (``restarts``): the restart's empty state stays."""
        for segment in reversed(discarded):
            self._discard(segment)
        if cut is not None:
            cut.write()
        producers, aborted = ProducerStateManager(), AbortedTransactions()
        try:
            rewrites = self._replay_producer_state(readers, end, log_start, producers, aborted)
        finally:
            for reader in readers:
                reader.close()
        for path, entries in rewrites:
            write_entries(path, entries)
        with self._lock:
            if self._closed:
                return
            if self._restarts == restarts:
                self._producers.take(producers)
                self._producers.remove_before(self.log_start_offset)  # DeleteRecords may have moved it meanwhile
                aborted.drop_before(self._segments[0].base_offset)
                self._aborted.replace(aborted.entries())
            # the shorter length and the removed segments must not come back after a power loss: fsynced on the
            # background, as a flush is, so that the follower's event loop does not wait for it
            self._truncated = True
            self._request_flush()

    def _start_cuts(self) -> concurrent.futures.Future[None]:
        """Have the roller make the pending truncations' file work (unless it is at it); its future. The caller
        holds the lock; no roll is under way."""
        if self._rolling is None:
            done: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._rolling, self._cutting = done, True
            self._roll_in(partial(self._run_cuts, done))
        assert self._rolling is not None
        return self._rolling

    def _run_cuts(self, done: concurrent.futures.Future[None]) -> None:
        """The roller's part: every pending truncation's file work, in order, those asked meanwhile too."""
        failure: BaseException | None = None
        while True:
            with self._lock:
                if failure is not None or self._closed or not self._file_work:
                    self._rolling, self._cutting = None, False
                    if not self._file_work or self._closed:
                        self._release_held_writes()
                    self._roll_finished.notify_all()
                    closed = self._closed
                    break
                job = self._file_work[0]
            try:
                job()
            except OSError as exc:
                failure = _truncation_failed(self.directory, exc)
            except BaseException as exc:
                failure = exc
            else:
                with self._lock:
                    self._file_work.pop(0)
        if failure is None or closed:
            done.set_result(None)
        else:
            done.set_exception(failure)
            if not isinstance(failure, KafkaError):
                raise failure

    def _run_cuts_here(self) -> None:
        """The pending truncations' file work on this thread; the caller holds the lock and no roll is under way."""
        while self._file_work:
            try:
                self._file_work[0]()
            except OSError as exc:
                raise _truncation_failed(self.directory, exc) from exc
            self._file_work.pop(0)
        self._release_held_writes()

    def _supersede_cuts(self, keep: int = 0) -> None:
        """A restart replaces the truncations whose file work failed, or is queued behind the roller's: its roll
        renames the segments they took out too. The caller holds the lock; no roll is under way, or ``keep`` is 1:
        the roller's first job, perhaps under way, stays, and so do the checkpoints held for it."""
        for job in self._file_work[keep:]:
            if isinstance(job, partial):  # else an earlier restart's roll, which this one's replaces
                self._retiring += job.args[0]
        del self._file_work[keep:]
        if not keep:
            self._release_held_writes()

    def _roll_restart(self) -> None:
        """The file work of a restart queued behind a truncation's (:meth:`truncate_to`): the roll of the planned
        segment it left, as :meth:`_roll_job` makes it, unless a later restart's made it already. Made on the roller
        after the truncations before it, or on a thread that meets it failed; made again if it fails."""
        with self._lock:
            old = self._segments[-1]
            if self._closed or not old.planned:
                return
            self._release_held_writes()  # the restart's leader epochs, held behind the cut: written before the renames
            base_offset = self.log_end_offset
            work = self._roll_work(old, base_offset, self._now_ms())
        try:
            new = work()
        except OSError as exc:
            raise _roll_failed(self.directory, exc) from exc
        with self._lock:
            if self._closed or self._segments[-1] is not old:
                new.delete()  # closed (its topic deleted) meanwhile: no files left behind
                return
            snapshot = self._install_roll(old, new, base_offset)
        self._delete_if_empty(old)
        self._write_roll_snapshot(base_offset, snapshot)

    def _restart_at(self, offset: int) -> None:
        """Take every segment out of the log; it continues, empty, at ``offset``, on a planned segment (memory
        only) that the caller rolls. The roll's file work retires the old segments' files, after the log's new
        checkpoints (:meth:`_roll_work`)."""
        self._retiring += [segment for segment in self._segments if not segment.planned]
        self._restarts += 1
        self._aborted.replace([])
        self._segments = [LogSegment.plan(self.directory, offset, self.config.index_interval_bytes, self._now_ms())]
        self._bases = [offset]
        self.log_start_offset = offset
        self._write_later(self._path(LOG_START_FILE), str(offset).encode())
        self._epochs.clear()

    def close(self) -> None:
        """See :meth:`LogDurability.close`. A restart whose roll failed (the active segment still planned) is rolled
        first, on this thread: the old segments it has not renamed would otherwise be opened, trusted, next time."""
        with self._lock:
            self._wait_for_roll()
            if not self._closed and self._file_work:
                self._run_cuts_here()
            if not self._closed and self._segments[-1].planned:
                self._roll(self._now_ms(), self.log_end_offset)
            super().close()

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
            self._settle_roll()  # its roll of the active segment would be the second
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
                # on the roller, waited for with the lock released: made here, under it, the roll held up the event
                # loop's appends and reads of the partition as long as the disk took to make the new segment
                rolled = self._start_roll(now_ms, self.log_end_offset)
                self._wait_for_roll()
                rolled.result()
                if self._closed or len(self._segments) == 1 or self._segments[0] is not first:
                    return deleted  # the log changed meanwhile (closed, truncated): the next pass looks again
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
