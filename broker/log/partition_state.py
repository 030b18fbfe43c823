"""What every part of a partition's log works on: its directory and files, its segments and producer
state, the lock, the bookkeeping of what is still to be made durable, and the offsets read from them.

:class:`broker.log.partition.PartitionLog` is built on this in layers: durability
(:mod:`broker.log.durability`), opening and recovery (:mod:`broker.log.recovery`) and reads
(:mod:`broker.log.reads`), with appends, removal and compaction in the log itself.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from collections.abc import Callable

from broker.errors import ErrorCode, KafkaError
from broker.log.config import LogConfig
from broker.log.descriptors import DescriptorBudget
from broker.log.epoch_cache import LeaderEpochCache
from broker.log.producer_state import ProducerStateManager
from broker.log.segment import LogSegment
from broker.log.txn_index import AbortedTransactions, AbortedTxn

CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
LOG_START_FILE = "log-start-offset"
RECOVERY_POINT_FILE = "recovery-point"
CLEANED_SUFFIX = ".cleaned"
CLEANING_SUFFIX = ".cleaning"


class PartitionState:
    """The state of one partition's log; see :mod:`broker.log.partition` for the guarantees."""

    # set when the log opens (:mod:`broker.log.recovery`)
    _epochs: LeaderEpochCache
    log_start_offset: int
    high_watermark: int

    def __init__(self, directory: str | os.PathLike[str], config: LogConfig, clock: Callable[[], float],
                 auto_high_watermark: bool, background: Callable[[Callable[[], None]], None],
                 descriptors: DescriptorBudget | None) -> None:
        self.directory = os.fspath(directory)
        # the broker's budget of open files (a log of its own has one of its own)
        self._descriptors = (descriptors or DescriptorBudget()).account(self)
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
        # a roll under way off the caller's thread (see "Rolls" in broker.log.partition): done once the new
        # segment is active, or failed with KAFKA_STORAGE_ERROR
        self._rolling: concurrent.futures.Future[None] | None = None
        self._roll_finished = threading.Condition(self._lock)
        # the file work of follower truncations that did not empty the log, oldest first, until each is done: run by
        # one runner at a time off the caller's thread (then _cutting, and _rolling its future), or on the caller's
        self._file_work: list[Callable[[], None]] = []
        self._cutting = False
        # the leader epochs' checkpoint while a truncation's file work is pending: written once the data is cut
        self._held_writes: dict[str, tuple[int, bytes]] = {}
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

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name)

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

    def release_descriptors_if_idle(self) -> bool:
        """Close the segments' cached descriptors (they open again on next use) unless the log is in use: its
        lock busy, or held by this very thread further up (a reentrant lock would be taken again, and the
        caller may be in the middle of using one)."""
        lock = self._lock
        if lock._is_owned() or not lock.acquire(blocking=False):  # type: ignore[attr-defined]
            return False
        try:
            for segment in self._segments:
                segment.release_descriptor()
            return True
        finally:
            lock.release()

    def _wait_for_roll(self) -> None:
        """Wait (releasing the lock meanwhile) for a roll under way to finish; the caller holds the lock. For
        what changes the active segment otherwise (truncation, a follower's append, close), which is rare
        while an append of the same partition waits for its roll."""
        while self._rolling is not None:
            self._roll_finished.wait()

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"log {self.directory} is closed")
