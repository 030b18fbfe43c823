"""Idempotent-producer state of one partition: per producer id, its epoch and its last five batches.

Rules follow Kafka's ProducerStateManager / ProducerAppendInfo (2.5+):

* a batch whose (producer id, epoch, first sequence, last sequence) equals one of the producer's last
  five batches is a retry: it is acknowledged with the original offsets and not appended again;
* an epoch older than the known one is INVALID_PRODUCER_EPOCH;
* a newer epoch must start at sequence 0, unless the partition knows no epoch for the producer;
* in the same epoch the first sequence must follow the last one (INT32_MAX wraps to 0), else
  OUT_OF_ORDER_SEQUENCE_NUMBER;
* a producer the partition has no state for (never seen, expired, or its batches deleted by retention
  or DeleteRecords) may start at any sequence; Kafka dropped UNKNOWN_PRODUCER_ID for this in 2.5.

Transactions: a producer's first transactional batch after a marker opens its transaction (its offset
is the partition's first unstable offset until the transaction ends); a control batch (COMMIT or ABORT
marker, written by the transaction coordinator) closes it, and :meth:`ProducerStateManager.update`
returns the finished transaction so that the log can index aborted ones.

The state is rebuilt on open from batch headers (and the one record of each marker), starting from the newest
snapshot file ``%020d.snapshot`` (JSON, the state before that offset) at or below the log end. Snapshots
are written when a segment rolls and on clean shutdown.
"""

from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass, field

from broker.errors import ErrorCode, KafkaError
from broker.log.files import unlink_quietly, write_atomically
from broker.protocol.records import INT32_MAX, NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader, Marker

MAX_CACHED_BATCHES = 5
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOTS_KEPT = 2


@dataclass(slots=True, frozen=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    last_timestamp: int = -1
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))
    coordinator_epoch: int = -1  # of the transaction coordinator whose marker ended its last transaction

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1


@dataclass(slots=True, frozen=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    marker_offset: int
    committed: bool


def _in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}
        # producer id -> first offset of its open transaction (the producer's entry stays while it is open)
        self._open_txns: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, or None when no transaction is open."""
        return min(self._open_txns.values()) if self._open_txns else None

    def active(self) -> list[tuple[ProducerEntry, int]]:
        """Each producer this partition remembers, with the first offset of its open transaction (-1: none)."""
        return [(entry, self._open_txns.get(pid, -1)) for pid, entry in self._producers.items()]

    def last_offsets(self) -> dict[int, int]:
        """Producer id -> offset of its last batch (compaction keeps that batch's header)."""
        return {pid: entry.last_offset for pid, entry in self._producers.items()}

    def check_append(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate a client's idempotent batch before it is appended.

        Returns the original batch if this one is a retry of it, None if it may be appended; raises
        KafkaError INVALID_PRODUCER_EPOCH or OUT_OF_ORDER_SEQUENCE_NUMBER otherwise.
        """
        entry = self._producers.get(header.producer_id)
        if entry is None:
            return None
        epoch = header.producer_epoch
        first_sequence = header.base_sequence
        if epoch == entry.epoch:
            last_sequence = header.last_sequence
            for batch in entry.batches:
                if batch.first_sequence == first_sequence and batch.last_sequence == last_sequence:
                    return batch
        if epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {header.producer_id} epoch {epoch} is older than the current epoch {entry.epoch}",
            )
        if epoch != entry.epoch:
            if first_sequence != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {header.producer_id} epoch {epoch} must start at sequence 0, not {first_sequence}",
                )
        elif not _in_sequence(entry.last_sequence, first_sequence):
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {header.producer_id}: sequence {first_sequence} does not follow {entry.last_sequence}",
            )
        return None

    def update(self, header: BatchHeader, marker: Marker | None = None) -> CompletedTxn | None:
        """Record an appended batch (offsets assigned). Replicated and recovered batches come here unchecked.

        For a control batch ``marker`` is its COMMIT or ABORT marker; the transaction it ends is returned
        (None when the producer had no open transaction).
        """
        producer_id = header.producer_id
        if producer_id < 0:
            return None
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerEntry(producer_id)
        if header.producer_epoch != entry.epoch:
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)
        if header.is_control:
            if marker is not None:
                entry.coordinator_epoch = marker.coordinator_epoch
            first = self._open_txns.pop(producer_id, None)
            if first is None or marker is None:
                return None
            return CompletedTxn(producer_id, first, header.base_offset, marker.committed)
        if header.is_transactional:
            self._open_txns.setdefault(producer_id, header.base_offset)
        entry.batches.append(
            BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                header.base_offset,
                header.base_offset + header.last_offset_delta,
                header.max_timestamp,
            )
        )
        return None

    def remove_before(self, log_start_offset: int) -> None:
        """Forget producers whose every batch now lies before the log start."""
        gone = [pid for pid, entry in self._producers.items()
                if entry.last_offset < log_start_offset and pid not in self._open_txns]
        for pid in gone:
            del self._producers[pid]

    def expire(self, now_ms: int, max_idle_ms: int) -> None:
        # A producer with an open transaction stays: the transaction coordinator ends it (timeout).
        gone = [pid for pid, entry in self._producers.items()
                if now_ms - entry.last_timestamp >= max_idle_ms and pid not in self._open_txns]
        for pid in gone:
            del self._producers[pid]

    def clear(self) -> None:
        self._producers.clear()
        self._open_txns.clear()

    def take(self, other: ProducerStateManager) -> None:
        """Become ``other`` (a state rebuilt aside), which is not used afterwards."""
        self._producers, self._open_txns = other._producers, other._open_txns

    # --- snapshots -------------------------------------------------------------------------------------

    def to_json(self) -> bytes:
        producers = [
            [
                entry.producer_id,
                entry.epoch,
                entry.last_timestamp,
                [
                    [b.first_sequence, b.last_sequence, b.first_offset, b.last_offset, b.timestamp]
                    for b in entry.batches
                ],
                self._open_txns.get(entry.producer_id, -1),  # first offset of its open transaction
                entry.coordinator_epoch,
            ]
            for entry in self._producers.values()
        ]
        return json.dumps({"version": 3, "producers": producers}).encode()

    def load_json(self, data: bytes) -> None:
        self.clear()
        for producer_id, epoch, last_timestamp, batches, *rest in json.loads(data)["producers"]:
            # version 1 snapshots (before transactions) have no open-transaction offset, version 2 ones no
            # coordinator epoch
            entry = ProducerEntry(producer_id, epoch, last_timestamp, coordinator_epoch=rest[1] if len(rest) > 1 else -1)
            entry.batches.extend(BatchMetadata(*batch) for batch in batches)
            self._producers[producer_id] = entry
            if rest and rest[0] >= 0:
                self._open_txns[producer_id] = rest[0]


def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")


def snapshot_offsets(directory: str) -> list[int]:
    offsets = []
    for name in os.listdir(directory):
        if name.endswith(SNAPSHOT_SUFFIX) and name[: -len(SNAPSHOT_SUFFIX)].isdigit():
            offsets.append(int(name[: -len(SNAPSHOT_SUFFIX)]))
    return sorted(offsets)


def write_snapshot(directory: str, offset: int, state: bytes) -> None:
    """Save the state as of ``offset`` (all batches below it applied: :meth:`ProducerStateManager.to_json`
    then); keep only the newest few.

    Not fsynced: a snapshot lost or damaged in a power loss is skipped, and batch headers replayed. Two writers
    may prune at once (a roll finishing off the caller's thread, and close()).
    """
    write_atomically(snapshot_path(directory, offset), state, durable=False)
    unlink_quietly(*(snapshot_path(directory, old) for old in snapshot_offsets(directory)[:-SNAPSHOTS_KEPT]))


def load_latest_snapshot(directory: str, state: ProducerStateManager, max_offset: int) -> int | None:
    """Load the newest readable snapshot at or below ``max_offset``; delete newer ones (the log was cut).

    Returns the snapshot's offset, from which batches must be replayed, or None if there was none.
    """
    for offset in reversed(snapshot_offsets(directory)):
        path = snapshot_path(directory, offset)
        if offset > max_offset:
            os.unlink(path)
            continue
        try:
            with open(path, "rb") as f:
                state.load_json(f.read())
            return offset
        except (OSError, ValueError, KeyError, TypeError):
            os.unlink(path)
    state.clear()
    return None
