"""The transaction coordinator's decisions, without I/O: Kafka's TransactionMetadata and the checks of its
TransactionCoordinator, for the transactional ids this broker coordinates.

Every request is answered in two steps. The machine first decides: an error to answer now, or the next
state of the transactional id (a :class:`TxnMetadata`) to write to `__transaction_state`. The coordinator
(:mod:`broker.txn.coordinator`) writes it and, once it is in the log, hands it back to :meth:`TxnMachine.apply`,
which makes it the id's state. A write that fails is never applied, so the machine only holds what the log
holds. :meth:`apply` refuses a transition Kafka's TransactionState does not allow, and an epoch that goes
backwards, so a wrong decision fails loudly instead of being written.

The states are Kafka's. PrepareEpochFence is never written here: Kafka holds it in memory only while the
fencing abort is written, and the coordinator's per-id lock does the same here (the fence is written as
PrepareAbort with the bumped epoch). Dead is the tombstone of an expired id (:meth:`TxnMachine.forget`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from broker.errors import ErrorCode, KafkaError
from broker.txn.state import (
    IDLE_STATES,
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    STATE_BY_NAME,
    TxnMetadata,
    TxnState,
)

TopicPartition = tuple[str, int]
PREPARING = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE})

# Kafka's TransactionState.validPreviousStates: the states a state may be entered from.
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                 TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


class IllegalTransition(Exception):
    """A state change Kafka's transaction state machine does not allow: a bug of the caller, never written."""


class InitStep(Enum):
    """What InitProducerId needs before the machine can give the id's next producer id and epoch."""

    NEW_PRODUCER_ID = "new producer id"  # an unknown transactional id, or its epochs are exhausted
    BUMP = "bump"  # the next epoch of the same producer id
    FENCE_FIRST = "fence first"  # an open transaction is aborted (fencing its producer); the client retries
    RETRY = "retry"  # a recovering producer asks again for the epoch its last InitProducerId gave it


@dataclass(frozen=True, slots=True)
class Listed:
    transactional_id: str
    producer_id: int
    state: TxnState


class TxnMachine:
    def __init__(self) -> None:
        self._txns: dict[str, TxnMetadata] = {}
        self._by_producer: dict[int, str] = {}

    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self._txns.get(transactional_id)

    def transactional_id_of(self, producer_id: int) -> str | None:
        return self._by_producer.get(producer_id)

    def transactions(self) -> list[TxnMetadata]:
        return list(self._txns.values())

    # --- state changes, once the log has them ------------------------------------------------------------

    def validate(self, meta: TxnMetadata) -> None:
        """IllegalTransition unless Kafka allows the id's current state to become ``meta`` (checked before
        the write, so a wrong decision never reaches the log)."""
        old = self._txns.get(meta.transactional_id)
        if old is None:
            if meta.state != TxnState.EMPTY:
                raise IllegalTransition(f"{meta.transactional_id!r} cannot begin in {meta.state.kafka_name}")
            return
        if old.state not in VALID_PREVIOUS[meta.state]:
            raise IllegalTransition(f"{meta.transactional_id!r}: {old.state.kafka_name} to {meta.state.kafka_name}")
        if old.producer_id == meta.producer_id and meta.producer_epoch < old.producer_epoch:
            raise IllegalTransition(f"{meta.transactional_id!r}: epoch {old.producer_epoch} to {meta.producer_epoch}")

    def apply(self, meta: TxnMetadata) -> None:
        """Make a written state the id's state (IllegalTransition if Kafka would not allow it)."""
        self.validate(meta)
        old = self._txns.get(meta.transactional_id)
        if old is not None and old.producer_id != meta.producer_id:
            self._by_producer.pop(old.producer_id, None)
        self._txns[meta.transactional_id] = meta
        self._by_producer[meta.producer_id] = meta.transactional_id

    def forget(self, transactional_id: str) -> None:
        """The id's tombstone is written (Kafka's Dead): it may only come from an idle state."""
        meta = self._txns.get(transactional_id)
        if meta is None:
            return
        if meta.state not in VALID_PREVIOUS[TxnState.DEAD]:
            raise IllegalTransition(f"{transactional_id!r}: {meta.state.kafka_name} to Dead")
        del self._txns[transactional_id]
        self._by_producer.pop(meta.producer_id, None)

    def load(self, replayed: dict[str, TxnMetadata]) -> None:
        """States rebuilt from a `__transaction_state` partition (its last record per id), as they are."""
        self._txns.update(replayed)
        self._by_producer.update({meta.producer_id: tid for tid, meta in replayed.items()})

    def drop(self, belongs: Callable[[str], bool]) -> None:
        """Forget the ids another broker coordinates from now on (no record: they are not dead)."""
        for transactional_id in [t for t in self._txns if belongs(t)]:
            meta = self._txns.pop(transactional_id)
            self._by_producer.pop(meta.producer_id, None)

    # --- InitProducerId -----------------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, producer_id: int, producer_epoch: int,
                         fenced: ErrorCode) -> ErrorCode | InitStep:
        """The first step of InitProducerId (its timeout and id are checked by the coordinator first), as
        Kafka's prepareInitProducerIdTransit decides it.

        A ``producer_id`` is a producer recovering its own id (KIP-360): it must name the id's producer id
        (or the one rotated away from, at its exhausted epoch) and then the current epoch, to bump it, or the
        epoch a bump already gave it (a retry whose answer was lost); anything else is ``fenced``. A
        transaction still open is aborted first (FENCE_FIRST) whatever the request names, and the client is
        told to retry."""
        meta = self._txns.get(transactional_id)
        if meta is None:
            return InitStep.NEW_PRODUCER_ID
        if producer_id != NO_PRODUCER_ID and producer_id != meta.producer_id and not (
                producer_id == meta.previous_producer_id and producer_epoch >= MAX_PRODUCER_EPOCH):
            return fenced
        if meta.state in PREPARING:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if meta.state == TxnState.ONGOING:
            return InitStep.FENCE_FIRST
        if producer_id == NO_PRODUCER_ID or producer_epoch == meta.producer_epoch:
            return InitStep.NEW_PRODUCER_ID if self.epochs_exhausted(meta) else InitStep.BUMP
        if producer_epoch == meta.last_producer_epoch:
            return InitStep.RETRY
        return fenced

    @staticmethod
    def epochs_exhausted(meta: TxnMetadata) -> bool:
        return meta.producer_epoch >= MAX_PRODUCER_EPOCH

    def initialised(self, transactional_id: str, timeout_ms: int, now_ms: int, new_producer_id: int | None,
                    producer_epoch: int = NO_PRODUCER_EPOCH) -> TxnMetadata:
        """The id's state after InitProducerId, Empty with no partitions: a new producer id at epoch 0 (when
        one was needed), else the next epoch, or for a RETRY the epoch the first attempt gave. Call after
        :meth:`init_producer_id` said so, with the request's ``producer_epoch``: a recovering producer's
        epoch is remembered (in memory, as Kafka does) so that its retry gets the same answer."""
        meta = self._txns.get(transactional_id)
        if meta is None:
            if new_producer_id is None:
                raise ValueError(f"{transactional_id!r} is new: it needs a producer id")
            return TxnMetadata(transactional_id, new_producer_id, 0, timeout_ms, last_update_ms=now_ms)
        recovering = producer_epoch != NO_PRODUCER_EPOCH
        if recovering and producer_epoch != meta.producer_epoch:
            if producer_epoch != meta.last_producer_epoch:
                raise ValueError(f"{transactional_id!r}: epoch {producer_epoch} is neither the current nor the last")
            bumped = meta.copy()
        elif self.epochs_exhausted(meta):
            if new_producer_id is None:
                raise ValueError(f"{transactional_id!r} has used its epochs: it needs a new producer id")
            bumped = meta.copy(producer_id=new_producer_id, producer_epoch=0, previous_producer_id=meta.producer_id,
                               last_producer_epoch=meta.producer_epoch if recovering else NO_PRODUCER_EPOCH)
        else:
            bumped = meta.copy(producer_epoch=meta.producer_epoch + 1,
                               last_producer_epoch=meta.producer_epoch if recovering else NO_PRODUCER_EPOCH)
        return bumped.copy(timeout_ms=timeout_ms, state=TxnState.EMPTY, partitions=set(), start_ms=-1,
                           last_update_ms=now_ms)

    # --- a transaction ------------------------------------------------------------------------------------

    def _check_producer(self, meta: TxnMetadata | None, producer_id: int, producer_epoch: int,
                        fenced: ErrorCode) -> ErrorCode | None:
        """Kafka's checks before any state: the producer id the transactional id has, in its current epoch."""
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != meta.producer_epoch:
            return fenced
        return None

    def _open_for(self, transactional_id: str, producer_id: int, producer_epoch: int, fenced: ErrorCode
                  ) -> TxnMetadata | ErrorCode:
        """The transaction a producer's request names, or the answer refusing it (an empty id is
        INVALID_REQUEST; then _check_producer's refusals)."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        meta = self._txns.get(transactional_id)
        error = self._check_producer(meta, producer_id, producer_epoch, fenced)
        if error is not None:
            return error
        assert meta is not None  # _check_producer refuses an unknown transactional id
        return meta

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], fenced: ErrorCode, now_ms: int
                       ) -> ErrorCode | TxnMetadata:
        """AddPartitionsToTxn / AddOffsetsToTxn: the Ongoing state with the partitions added, or the answer
        (NONE when they are all in the open transaction already)."""
        meta = self._open_for(transactional_id, producer_id, producer_epoch, fenced)
        if isinstance(meta, ErrorCode):
            return meta
        if meta.state in PREPARING:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        added = set(partitions)
        if meta.state == TxnState.ONGOING and meta.partitions.issuperset(added):
            return ErrorCode.NONE
        return meta.copy(state=TxnState.ONGOING, partitions=meta.partitions | added,
                         start_ms=meta.start_ms if meta.state == TxnState.ONGOING else now_ms,
                         last_update_ms=now_ms)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition], fenced: ErrorCode
                          ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ ``verify_only``: are these partitions in the open transaction? As Kafka's
        coordinator answers it: CONCURRENT_TRANSACTIONS while its markers are being written, and a partition
        outside it TRANSACTION_ABORTABLE (the broker that asked turns it into the producer's error)."""
        meta = self._open_for(transactional_id, producer_id, producer_epoch, fenced)
        if isinstance(meta, ErrorCode):
            return dict.fromkeys(partitions, meta)
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return dict.fromkeys(partitions, ErrorCode.CONCURRENT_TRANSACTIONS)
        return {tp: ErrorCode.NONE if meta.state == TxnState.ONGOING and tp in meta.partitions
                else ErrorCode.TRANSACTION_ABORTABLE for tp in partitions}

    def check_transactional_write(self, producer_id: int, producer_epoch: int, topic: str, partition: int,
                                  clustered: bool) -> KafkaError | None:
        """May this transactional batch (or TxnOffsetCommit) be written? Kafka's partition verification
        (KIP-890): the partition must be in the producer's open transaction, with the producer's current
        epoch. In a cluster, a producer id this broker does not know is another coordinator's: its
        verification is not made (the partition's producer state still checks the epoch)."""
        transactional_id = self._by_producer.get(producer_id)
        meta = self._txns.get(transactional_id) if transactional_id is not None else None
        if meta is None:
            return None if clustered else KafkaError(
                ErrorCode.INVALID_PRODUCER_ID_MAPPING, f"producer id {producer_id} belongs to no transactional id")
        if producer_epoch < meta.producer_epoch:
            return KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                              f"producer epoch {producer_epoch} is older than {meta.producer_epoch}")
        if meta.state != TxnState.ONGOING or (topic, partition) not in meta.partitions:
            return KafkaError(ErrorCode.INVALID_TXN_STATE,
                              f"{topic}-{partition} was not added to the transaction of {transactional_id!r}")
        return None

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                fenced: ErrorCode, now_ms: int) -> ErrorCode | TxnMetadata:
        """EndTxn: the PrepareCommit/PrepareAbort state to write, or the answer. As Kafka's endTransaction: a
        retry of an ended transaction's own result is NONE, one still preparing it CONCURRENT_TRANSACTIONS,
        and the other result INVALID_TXN_STATE."""
        meta = self._open_for(transactional_id, producer_id, producer_epoch, fenced)
        if isinstance(meta, ErrorCode):
            return meta
        if meta.state == TxnState.ONGOING:
            return self.prepared(meta, committed, now_ms)
        same_result = {TxnState.COMPLETE_COMMIT: (committed, ErrorCode.NONE),
                       TxnState.COMPLETE_ABORT: (not committed, ErrorCode.NONE),
                       TxnState.PREPARE_COMMIT: (committed, ErrorCode.CONCURRENT_TRANSACTIONS),
                       TxnState.PREPARE_ABORT: (not committed, ErrorCode.CONCURRENT_TRANSACTIONS)}.get(meta.state)
        if same_result is not None and same_result[0]:
            return same_result[1]
        return ErrorCode.INVALID_TXN_STATE

    @staticmethod
    def prepared(meta: TxnMetadata, committed: bool, now_ms: int) -> TxnMetadata:
        return meta.copy(state=TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT,
                         last_update_ms=now_ms)

    @staticmethod
    def fenced(meta: TxnMetadata, now_ms: int) -> TxnMetadata:
        """Kafka's epoch fence (prepareFenceProducerEpoch): an open transaction's abort with the epoch bumped,
        so its producer can no longer write, nor recover its id with InitProducerId (no last epoch is kept).
        The bumped epoch is never handed out: the InitProducerId that fenced is answered
        CONCURRENT_TRANSACTIONS and its retry bumps again (a new producer id if that exhausts the epochs)."""
        return TxnMachine.prepared(meta.copy(producer_epoch=meta.producer_epoch + 1,
                                             last_producer_epoch=NO_PRODUCER_EPOCH), committed=False, now_ms=now_ms)

    @staticmethod
    def completed(meta: TxnMetadata, now_ms: int) -> TxnMetadata:
        """The state once every marker of a preparing transaction is written."""
        if meta.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise IllegalTransition(f"{meta.transactional_id!r} is {meta.state.kafka_name}, not preparing")
        return meta.copy(state=TxnState.COMPLETE_COMMIT if meta.state == TxnState.PREPARE_COMMIT
                         else TxnState.COMPLETE_ABORT, partitions=set(), last_update_ms=now_ms)

    # --- timers -------------------------------------------------------------------------------------------

    def timed_out(self, now_ms: int) -> list[TxnMetadata]:
        """Transactions open longer than their timeout (to abort, fencing their producers)."""
        return [m for m in self._txns.values() if m.state == TxnState.ONGOING and now_ms - m.start_ms > m.timeout_ms]

    def preparing(self) -> list[TxnMetadata]:
        """Transactions whose markers are still to write (a failed write, a crash, a new coordinator)."""
        return [m for m in self._txns.values() if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)]

    def expired(self, now_ms: int, expiration_ms: int) -> list[TxnMetadata]:
        """Ids unused for ``transactional.id.expiration.ms`` (to forget, with a tombstone each)."""
        return [m for m in self._txns.values() if m.state in IDLE_STATES and now_ms - m.last_update_ms >= expiration_ms]

    # --- admin --------------------------------------------------------------------------------------------

    def listed(self, states: list[str], producer_ids: list[int], min_duration_ms: int, now_ms: int
               ) -> tuple[list[str], list[Listed]]:
        """ListTransactions: (the state filters Kafka does not know, the transactions that pass the filters)."""
        unknown = [name for name in states if name not in STATE_BY_NAME]
        wanted = {STATE_BY_NAME[name] for name in states if name in STATE_BY_NAME}
        listed = []
        for transactional_id, meta in sorted(self._txns.items()):
            if states and meta.state not in wanted:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (meta.state != TxnState.ONGOING or now_ms - meta.start_ms < min_duration_ms):
                continue
            listed.append(Listed(transactional_id, meta.producer_id, meta.state))
        return unknown, listed
