"""The transaction coordinator: transactional ids, their producer ids and epochs, and two-phase commits.

What it does, as Kafka's coordinator does with ``transaction.version`` 1 (the protocol of every current
client against a broker that does not advertise version 2):

* InitProducerId with a transactional id gives the id's producer id with a bumped epoch, which fences
  every older instance of the producer. A transaction still open is aborted first.
* AddPartitionsToTxn / AddOffsetsToTxn add partitions (and a group's `__consumer_offsets` partition) to
  the open transaction; the first one opens it (Ongoing).
* EndTxn writes PrepareCommit/PrepareAbort to `__transaction_state`, then a COMMIT/ABORT marker to every
  partition of the transaction, then CompleteCommit/CompleteAbort. The answer comes after the markers:
  once EndTxn succeeds, read_committed consumers can read the transaction.
* A transaction open longer than its timeout is aborted with a bumped epoch (the producer is fenced);
  transactional ids idle for ``transactional.id.expiration.ms`` are forgotten (a tombstone).

State lives in `__transaction_state` (compacted, ``transaction.state.log.num.partitions`` partitions,
created on first use), one record per change, so a restart rebuilds it; a transaction caught between
prepare and complete by a crash is completed at start-up, markers being idempotent for the logs.
Requests for one transactional id are serialised by a lock, so none sees another half done.

On a single node this broker coordinates every transactional id. A cluster does not coordinate
transactions yet: FindCoordinator and InitProducerId refuse transactional ids with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (FindCoordinator with the reason), which clients treat as fatal
instead of retrying forever.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

import structlog

from broker.errors import ErrorCode, KafkaError
from broker.groups.coordinator import read_partition_entries
from broker.groups.hashing import offsets_partition_for
from broker.protocol.records import Record, build_batch
from broker.protocol.types import ProtocolError
from broker.topics import OFFSETS_TOPIC, TRANSACTIONS_TOPIC
from broker.txn.state import (
    IDLE_STATES,
    MAX_PRODUCER_EPOCH,
    STATE_BY_NAME,
    TxnMetadata,
    TxnState,
    decode_record,
    record_key,
    record_value,
)

if TYPE_CHECKING:
    from broker.broker import Broker

log = structlog.get_logger("broker.txn")

TopicPartition = tuple[str, int]
_PREPARING = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE})
CLUSTER_MESSAGE = "transactions run on a single-node burrowpy broker; a cluster does not coordinate them yet"


class TransactionCoordinator:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config
        self.partition_count = config["transaction.state.log.num.partitions"]
        self.max_timeout_ms = config["transaction.max.timeout.ms"]
        self._txns: dict[str, TxnMetadata] = {}
        self._by_producer: dict[int, str] = {}
        self._locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._load_lock = asyncio.Lock()
        self._loaded = False

    def _now_ms(self) -> int:
        return int(self.broker.clock() * 1000)

    @property
    def available(self) -> bool:
        return self.broker.cluster is None

    # --- loading ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load `__transaction_state` if an earlier run created it (else it is created on first use)."""
        if self.broker.logs.topics.get(TRANSACTIONS_TOPIC) is not None:
            await self._ensure_loaded()

    def _ensure_topic(self) -> None:
        """Create `__transaction_state` before its first record, as Kafka does."""
        if self.broker.logs.topics.get(TRANSACTIONS_TOPIC) is None:
            self.broker.create_topic(TRANSACTIONS_TOPIC, self.partition_count, {
                "cleanup.policy": "compact",
                "segment.bytes": self.broker.config["transaction.state.log.segment.bytes"],
            })

    async def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        async with self._load_lock:
            if self._loaded:
                return
            topic = self.broker.logs.topics.get(TRANSACTIONS_TOPIC)
            if topic is None:
                self._loaded = True  # nothing to load; the topic comes with the first record
                return
            if topic.partition_count != self.partition_count:
                log.warning("__transaction_state has a different partition count than configured; using it",
                            partitions=topic.partition_count, configured=self.partition_count)
                self.partition_count = topic.partition_count
            for partition in range(topic.partition_count):
                entries = await asyncio.to_thread(read_partition_entries,
                                                  self.broker.partition_log(TRANSACTIONS_TOPIC, partition))
                for entry in entries:
                    if entry.marker is not None or entry.key is None:
                        continue
                    try:
                        transactional_id, meta = decode_record(entry.key, entry.value)
                    except (ProtocolError, ValueError) as exc:
                        log.warning("skipping undecodable __transaction_state record", partition=partition,
                                    error=str(exc))
                        continue
                    if meta is None:
                        self._txns.pop(transactional_id, None)
                    else:
                        self._txns[transactional_id] = meta
            self._by_producer = {meta.producer_id: tid for tid, meta in self._txns.items()}
            self._loaded = True
            if self._txns:
                log.info("transaction state loaded", transactional_ids=len(self._txns))
        for meta in [m for m in self._txns.values() if m.state in _PREPARING]:
            async with self._locks[meta.transactional_id]:
                await self._complete(meta, meta.state == TxnState.PREPARE_COMMIT)

    def partition_for(self, transactional_id: str) -> int:
        return offsets_partition_for(transactional_id, self.partition_count)

    # --- the log ----------------------------------------------------------------------------------------

    async def _write(self, meta: TxnMetadata | None, transactional_id: str) -> ErrorCode:
        """Append a state change (None: a tombstone) to the id's `__transaction_state` partition."""
        self._ensure_topic()
        value = None if meta is None else record_value(meta)
        batch = build_batch([Record(offset=0, timestamp=self._now_ms(), key=record_key(transactional_id),
                                    value=value)])
        try:
            await self.broker.append(TRANSACTIONS_TOPIC, self.partition_for(transactional_id), batch)
        except KafkaError as exc:
            log.warning("append to __transaction_state failed", transactional_id=transactional_id,
                        error=exc.code.name)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE

    async def _transition(self, meta: TxnMetadata) -> ErrorCode:
        """Write a new state and, once it is in the log, make it the id's state."""
        error = await self._write(meta, meta.transactional_id)
        if error == ErrorCode.NONE:
            old = self._txns.get(meta.transactional_id)
            if old is not None and old.producer_id != meta.producer_id:
                self._by_producer.pop(old.producer_id, None)
            self._txns[meta.transactional_id] = meta
            self._by_producer[meta.producer_id] = meta.transactional_id
        return error

    async def _complete(self, meta: TxnMetadata, committed: bool) -> ErrorCode:
        """Second phase: a marker on every partition of the transaction, then CompleteCommit/CompleteAbort.
        A partition whose topic was deleted meanwhile is skipped; any other failure leaves the transaction
        preparing, and the periodic check tries again."""
        for topic, partition in sorted(meta.partitions):
            try:
                await self.broker.append_marker(topic, partition, meta.producer_id, meta.producer_epoch, committed)
            except KafkaError as exc:
                if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    continue
                log.warning("writing a transaction marker failed", transactional_id=meta.transactional_id,
                            topic=topic, partition=partition, error=exc.code.name)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            if topic == OFFSETS_TOPIC and self.broker.groups is not None:
                self.broker.groups.complete_transaction(partition, meta.producer_id, committed)
        done = meta.copy(state=TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT,
                         partitions=set(), last_update_ms=self._now_ms())
        return await self._transition(done)

    async def _end(self, meta: TxnMetadata, committed: bool) -> ErrorCode:
        prepared = meta.copy(state=TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT,
                             last_update_ms=self._now_ms())
        error = await self._transition(prepared)
        if error != ErrorCode.NONE:
            return error
        return await self._complete(prepared, committed)

    async def _abort_fencing(self, meta: TxnMetadata) -> ErrorCode:
        """Abort an open transaction with a bumped epoch, so its producer can no longer write (Kafka's
        epoch fence, used on timeout and when a new instance initialises)."""
        epoch = meta.producer_epoch + 1 if meta.producer_epoch < MAX_PRODUCER_EPOCH else meta.producer_epoch
        fenced = meta.copy(producer_epoch=epoch, last_producer_epoch=meta.producer_epoch)
        return await self._end(fenced, committed=False)

    # --- requests -----------------------------------------------------------------------------------------

    def _check_producer(self, meta: TxnMetadata | None, producer_id: int, producer_epoch: int,
                        fenced: ErrorCode) -> ErrorCode | None:
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != meta.producer_epoch:
            return fenced
        return None

    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int,
                               producer_epoch: int, fenced: ErrorCode) -> tuple[ErrorCode, int, int]:
        if not self.available:
            # fatal for clients (they stop instead of retrying forever), as the refusal it is
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, -1, -1
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        await self._ensure_loaded()
        async with self._locks[transactional_id]:
            now = self._now_ms()
            meta = self._txns.get(transactional_id)
            if meta is None:
                meta = TxnMetadata(transactional_id, self.broker.producer_ids.allocate(), 0, timeout_ms,
                                   last_update_ms=now)
                error = await self._transition(meta)
                return (error, meta.producer_id, meta.producer_epoch) if error == ErrorCode.NONE else (error, -1, -1)
            if producer_id >= 0 and (producer_id != meta.producer_id or
                                     producer_epoch not in (meta.producer_epoch, meta.last_producer_epoch)):
                # KIP-360: only the current producer (or the one a timeout fenced) may bump its own epoch
                return fenced, -1, -1
            if meta.state in _PREPARING:
                return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
            if meta.state == TxnState.ONGOING:
                error = await self._abort_fencing(meta)
                if error != ErrorCode.NONE:
                    return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1  # the client retries; so do we
                meta = self._txns[transactional_id]
            if meta.producer_epoch + 1 >= MAX_PRODUCER_EPOCH:
                bumped = meta.copy(producer_id=self.broker.producer_ids.allocate(), producer_epoch=0,
                                   previous_producer_id=meta.producer_id)
            else:
                bumped = meta.copy(producer_epoch=meta.producer_epoch + 1)
            bumped = bumped.copy(timeout_ms=timeout_ms, state=TxnState.EMPTY, partitions=set(), start_ms=-1,
                                 last_update_ms=now, last_producer_epoch=-1)
            error = await self._transition(bumped)
            if error != ErrorCode.NONE:
                return error, -1, -1
            return ErrorCode.NONE, bumped.producer_id, bumped.producer_epoch

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition], fenced: ErrorCode
                             ) -> dict[TopicPartition, ErrorCode]:
        partitions = list(partitions)
        if not self.available:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        await self._ensure_loaded()
        async with self._locks[transactional_id]:
            meta = self._txns.get(transactional_id)
            error = self._check_producer(meta, producer_id, producer_epoch, fenced)
            if error is None and meta.state in _PREPARING:
                error = ErrorCode.CONCURRENT_TRANSACTIONS
            if error is not None:
                return dict.fromkeys(partitions, error)
            if meta.state == TxnState.ONGOING and meta.partitions.issuperset(partitions):
                return dict.fromkeys(partitions, ErrorCode.NONE)
            now = self._now_ms()
            ongoing = meta.copy(state=TxnState.ONGOING, partitions=meta.partitions | set(partitions),
                                start_ms=meta.start_ms if meta.state == TxnState.ONGOING else now,
                                last_update_ms=now)
            return dict.fromkeys(partitions, await self._transition(ongoing))

    async def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: Iterable[TopicPartition], fenced: ErrorCode
                                ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ ``verify_only``: are these partitions in the open transaction?"""
        partitions = list(partitions)
        await self._ensure_loaded()
        meta = self._txns.get(transactional_id)
        error = self._check_producer(meta, producer_id, producer_epoch, fenced)
        if error is not None:
            return dict.fromkeys(partitions, error)
        return {tp: ErrorCode.NONE if meta.state == TxnState.ONGOING and tp in meta.partitions
                else ErrorCode.INVALID_TXN_STATE for tp in partitions}

    def check_transactional_write(self, producer_id: int, producer_epoch: int, topic: str, partition: int
                                  ) -> KafkaError | None:
        """May this transactional batch (or TxnOffsetCommit) be written? Kafka's partition verification: the
        partition must be in the producer's open transaction, with the producer's current epoch."""
        transactional_id = self._by_producer.get(producer_id)
        meta = self._txns.get(transactional_id) if transactional_id is not None else None
        if meta is None:
            return KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                              f"producer id {producer_id} belongs to no transactional id")
        if producer_epoch < meta.producer_epoch:
            return KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                              f"producer epoch {producer_epoch} is older than {meta.producer_epoch}")
        if meta.state != TxnState.ONGOING or (topic, partition) not in meta.partitions:
            return KafkaError(ErrorCode.INVALID_TXN_STATE,
                              f"{topic}-{partition} was not added to the transaction of {transactional_id!r}")
        return None

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                      fenced: ErrorCode) -> ErrorCode:
        if not self.available:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        await self._ensure_loaded()
        async with self._locks[transactional_id]:
            meta = self._txns.get(transactional_id)
            error = self._check_producer(meta, producer_id, producer_epoch, fenced)
            if error is not None:
                return error
            if meta.state == TxnState.ONGOING:
                return await self._end(meta, committed)
            if meta.state == TxnState.COMPLETE_COMMIT:
                return ErrorCode.NONE if committed else ErrorCode.INVALID_TXN_STATE  # a retry, or a mistake
            if meta.state == TxnState.COMPLETE_ABORT:
                return ErrorCode.INVALID_TXN_STATE if committed else ErrorCode.NONE
            if meta.state in _PREPARING:
                return ErrorCode.CONCURRENT_TRANSACTIONS
            return ErrorCode.INVALID_TXN_STATE

    # --- background ---------------------------------------------------------------------------------------

    async def abort_timed_out(self) -> None:
        """Abort (fencing the producer) every transaction open longer than its timeout; finish ones left
        preparing by a failed marker write."""
        if not self._loaded:
            return
        now = self._now_ms()
        for meta in list(self._txns.values()):
            if meta.state == TxnState.ONGOING and now - meta.start_ms > meta.timeout_ms:
                async with self._locks[meta.transactional_id]:
                    current = self._txns.get(meta.transactional_id)
                    if current is meta:
                        log.info("aborting a transaction that timed out", transactional_id=meta.transactional_id,
                                 producer_id=meta.producer_id, timeout_ms=meta.timeout_ms)
                        await self._abort_fencing(meta)
            elif meta.state in _PREPARING:
                async with self._locks[meta.transactional_id]:
                    if self._txns.get(meta.transactional_id) is meta:
                        await self._complete(meta, meta.state == TxnState.PREPARE_COMMIT)

    async def expire_transactional_ids(self) -> None:
        """Forget transactional ids unused for ``transactional.id.expiration.ms`` (a tombstone each)."""
        if not self._loaded:
            return
        now = self._now_ms()
        expiration = self.broker.config["transactional.id.expiration.ms"]
        for meta in list(self._txns.values()):
            if meta.state in IDLE_STATES and now - meta.last_update_ms >= expiration:
                async with self._locks[meta.transactional_id]:
                    if self._txns.get(meta.transactional_id) is not meta:
                        continue
                    if await self._write(None, meta.transactional_id) == ErrorCode.NONE:
                        del self._txns[meta.transactional_id]
                        self._by_producer.pop(meta.producer_id, None)
                        self._locks.pop(meta.transactional_id, None)
                        log.info("transactional id expired", transactional_id=meta.transactional_id)

    # --- admin ----------------------------------------------------------------------------------------------

    async def describe(self, transactional_ids: list[str]) -> list[dict]:
        if self.available:
            await self._ensure_loaded()
        described = []
        for transactional_id in transactional_ids:
            meta = self._txns.get(transactional_id) if self.available else None
            if meta is None:
                error = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND if self.available else ErrorCode.COORDINATOR_NOT_AVAILABLE
                # Kafka leaves the other fields at their zero defaults
                described.append({"error_code": error, "transactional_id": transactional_id,
                                  "transaction_state": "", "transaction_timeout_ms": 0,
                                  "transaction_start_time_ms": 0, "producer_id": 0, "producer_epoch": 0,
                                  "topics": []})
                continue
            described.append({
                "error_code": ErrorCode.NONE, "transactional_id": transactional_id,
                "transaction_state": meta.state.kafka_name, "transaction_timeout_ms": meta.timeout_ms,
                "transaction_start_time_ms": meta.start_ms, "producer_id": meta.producer_id,
                "producer_epoch": meta.producer_epoch,
                "topics": [{"topic": topic, "partitions": partitions}
                           for topic, partitions in meta.sorted_partitions().items()],
            })
        return described

    async def list(self, states: list[str], producer_ids: list[int], min_duration_ms: int
                   ) -> tuple[ErrorCode, list[str], list[dict]]:
        if not self.available:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [], []
        await self._ensure_loaded()
        unknown = [name for name in states if name not in STATE_BY_NAME]
        wanted = {STATE_BY_NAME[name] for name in states if name in STATE_BY_NAME}
        now = self._now_ms()
        listed = []
        for transactional_id, meta in sorted(self._txns.items()):
            if states and meta.state not in wanted:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (meta.state != TxnState.ONGOING or now - meta.start_ms < min_duration_ms):
                continue
            listed.append({"transactional_id": transactional_id, "producer_id": meta.producer_id,
                           "transaction_state": meta.state.kafka_name})
        return ErrorCode.NONE, unknown, listed
