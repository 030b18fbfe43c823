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

On a single node this broker coordinates every transactional id. In a cluster, the leader of a
transactional id's `__transaction_state` partition does (the controller creates the topic on the first
coordinator lookup, replicated like `__consumer_offsets`); a new leader rebuilds the partition's state and
completes what the old one left preparing. Markers for partitions other brokers lead go to them in
WriteTxnMarkers, and every marker and state change is acknowledged by the in-sync replicas before the
next step. Partition verification of transactional produce (KIP-890) is made where the partition's leader
is the coordinator; elsewhere the producer's epoch is checked by the partition as for any producer.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

import structlog

from broker.client import ClientError, KafkaConnection
from broker.errors import ErrorCode, KafkaError
from broker.groups.coordinator import read_partition_entries
from broker.groups.hashing import offsets_partition_for
from broker.protocol.api import ApiKey
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


async def write_marker(broker: Broker, topic: str, partition: int, producer_id: int, producer_epoch: int,
                       committed: bool) -> ErrorCode:
    """Write a transaction marker to a partition this broker leads (once the in-sync replicas have it), and
    let the group coordinator settle the transaction's offsets when the partition is `__consumer_offsets`'."""
    try:
        await broker.append_marker(topic, partition, producer_id, producer_epoch, committed)
    except KafkaError as exc:
        return exc.code
    if topic == OFFSETS_TOPIC and broker.groups is not None:
        broker.groups.complete_transaction(partition, producer_id, committed)
    return ErrorCode.NONE


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
        self._partition_locks: dict[int, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._loaded = False  # single node: every partition loaded (or none to load)
        self._owned: set[int] = set()  # the `__transaction_state` partitions this broker coordinates (cluster)
        self._creating: asyncio.Task | None = None

    def _now_ms(self) -> int:
        return int(self.broker.clock() * 1000)

    @property
    def clustered(self) -> bool:
        return self.broker.cluster is not None

    # --- loading ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Single node: load `__transaction_state` if an earlier run created it (else it is created on first
        use). In a cluster, partitions are loaded as this broker becomes their leader (:meth:`load_partition`)."""
        if not self.clustered and self.broker.logs.topics.get(TRANSACTIONS_TOPIC) is not None:
            await self._ensure_loaded()

    def _topic_configs(self) -> dict[str, object]:
        return {"cleanup.policy": "compact", "segment.bytes": self.broker.config["transaction.state.log.segment.bytes"]}

    def _ensure_topic(self) -> None:
        """Single node: create `__transaction_state` before its first record."""
        if not self.clustered and self.broker.logs.topics.get(TRANSACTIONS_TOPIC) is None:
            self.broker.create_topic(TRANSACTIONS_TOPIC, self.partition_count, self._topic_configs())

    def request_topic(self) -> None:
        """In a cluster, the first lookup of a transaction coordinator has the controller create
        `__transaction_state` (as Kafka does); lookups answer COORDINATOR_NOT_AVAILABLE meanwhile."""
        if self.broker.logs.topics.get(TRANSACTIONS_TOPIC) is not None or (
                self._creating is not None and not self._creating.done()):
            return
        replication = min(self.broker.config["transaction.state.log.replication.factor"],
                          len(self.broker.live_brokers()))

        async def create() -> None:
            try:
                await self.broker.topic_admin.create_topic(TRANSACTIONS_TOPIC, self.partition_count,
                                                           self._topic_configs(), max(replication, 1))
            except KafkaError as exc:
                if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    log.warning("creating __transaction_state failed", error=exc.code.name)
        self._creating = asyncio.create_task(create(), name="create-transaction-state")

    async def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        async with self._load_lock:
            if self._loaded:
                return
            topic = self.broker.logs.topics.get(TRANSACTIONS_TOPIC)
            if topic is not None:
                if topic.partition_count != self.partition_count:
                    log.warning("__transaction_state has a different partition count than configured; using it",
                                partitions=topic.partition_count, configured=self.partition_count)
                    self.partition_count = topic.partition_count
                for partition in range(topic.partition_count):
                    await self.load_partition(partition)
            self._loaded = True  # with no topic, nothing to load: the topic comes with the first record

    async def load_partition(self, partition: int) -> None:
        """Become the coordinator of the transactional ids of a `__transaction_state` partition, rebuilt from
        its records; transactions a crash (or a leader change) left preparing are completed."""
        async with self._partition_locks[partition]:
            plog = self.broker.partition_log(TRANSACTIONS_TOPIC, partition)
            entries = await asyncio.to_thread(read_partition_entries, plog)
            loaded: dict[str, TxnMetadata] = {}
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
                    loaded.pop(transactional_id, None)
                else:
                    loaded[transactional_id] = meta
            self._drop_partition(partition)
            self._txns.update(loaded)
            self._by_producer.update({meta.producer_id: tid for tid, meta in loaded.items()})
            self._owned.add(partition)
            if loaded:
                log.info("transaction state loaded", partition=partition, transactional_ids=len(loaded))
        for meta in [m for m in loaded.values() if m.state in _PREPARING]:
            async with self._locks[meta.transactional_id]:
                if self._txns.get(meta.transactional_id) is meta:
                    await self._complete(meta, meta.state == TxnState.PREPARE_COMMIT)

    def unload_partition(self, partition: int) -> None:
        """Another broker coordinates this partition's transactional ids from now on."""
        self._owned.discard(partition)
        self._drop_partition(partition)

    def _drop_partition(self, partition: int) -> None:
        for transactional_id in [t for t in self._txns if self.partition_for(t) == partition]:
            meta = self._txns.pop(transactional_id)
            self._by_producer.pop(meta.producer_id, None)

    async def _ready(self, transactional_id: str) -> ErrorCode | None:
        """None if this broker coordinates the transactional id now, else the error that sends the client
        looking for its coordinator (again)."""
        if not self.clustered:
            await self._ensure_loaded()
            return None
        if self.broker.logs.topics.get(TRANSACTIONS_TOPIC) is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(transactional_id)
        if partition in self._owned:
            return None
        leader = self.broker.partition_leader(TRANSACTIONS_TOPIC, partition)[0]
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if leader == self.broker.node_id else ErrorCode.NOT_COORDINATOR

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
        """Second phase: a marker on every partition of the transaction (this broker writes those it leads,
        the other leaders get WriteTxnMarkers), then CompleteCommit/CompleteAbort. A partition whose topic
        was deleted meanwhile is skipped; any other failure leaves the transaction preparing, and the
        periodic check tries again."""
        local: list[tuple[str, int]] = []
        remote: defaultdict[int, list[tuple[str, int]]] = defaultdict(list)
        for topic, partition in sorted(meta.partitions):
            try:
                leader = self.broker.partition_leader(topic, partition)[0]
            except KafkaError:
                continue  # the topic is gone
            (local if leader == self.broker.node_id else remote[leader]).append((topic, partition))
        failed = False
        for topic, partition in local:
            error = await write_marker(self.broker, topic, partition, meta.producer_id, meta.producer_epoch, committed)
            if error not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                log.warning("writing a transaction marker failed", transactional_id=meta.transactional_id,
                            topic=topic, partition=partition, error=error.name)
                failed = True
        for leader, partitions in remote.items():
            if not await self._send_markers(leader, meta, committed, partitions):
                failed = True
        if failed:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        done = meta.copy(state=TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT,
                         partitions=set(), last_update_ms=self._now_ms())
        return await self._transition(done)

    async def _send_markers(self, leader: int, meta: TxnMetadata, committed: bool,
                            partitions: list[TopicPartition]) -> bool:
        """WriteTxnMarkers to the broker leading ``partitions``; True if every marker was written."""
        address = self.broker.replica_manager.broker_address(leader)  # remote leaders exist in a cluster only
        if address is None:
            log.warning("no live leader to write transaction markers to", transactional_id=meta.transactional_id,
                        leader=leader)
            return False
        topics: dict[str, list[int]] = defaultdict(list)
        for topic, partition in partitions:
            topics[topic].append(partition)
        body = {"markers": [{"producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch,
                             "transaction_result": committed, "coordinator_epoch": 0,
                             "topics": [{"name": t, "partition_indexes": p} for t, p in topics.items()]}]}
        try:
            async with await KafkaConnection.connect(
                    f"{address[0]}:{address[1]}", timeout=10, security=self.broker.config.inter_broker_security,
                    broker_credential=self.broker.replica_manager.broker_credential(),
                    client_id=f"broker-{self.broker.node_id}-txn-marker-sender") as connection:
                answer = await connection.request(ApiKey.WRITE_TXN_MARKERS, body, version=1)
        except (TimeoutError, OSError, ProtocolError, ClientError) as exc:
            log.warning("sending transaction markers failed", transactional_id=meta.transactional_id,
                        leader=leader, error=str(exc))
            return False
        errors = [(t["name"], p["partition_index"], p["error_code"]) for m in answer["markers"] for t in m["topics"]
                  for p in t["partitions"] if p["error_code"] not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        if errors:
            log.warning("transaction markers refused", transactional_id=meta.transactional_id, leader=leader,
                        errors=[(t, p, ErrorCode(e).name) for t, p, e in errors])
        return not errors

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
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, -1, -1
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        error = await self._ready(transactional_id)
        if error is not None:
            return error, -1, -1
        async with self._locks[transactional_id]:
            now = self._now_ms()
            meta = self._txns.get(transactional_id)
            if meta is None:
                meta = TxnMetadata(transactional_id, await self.broker.producer_ids.allocate(), 0, timeout_ms,
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
                bumped = meta.copy(producer_id=await self.broker.producer_ids.allocate(), producer_epoch=0,
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
        error = await self._ready(transactional_id)
        if error is not None:
            return dict.fromkeys(partitions, error)
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
        error = await self._ready(transactional_id)
        if error is not None:
            return dict.fromkeys(partitions, error)
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
        if meta is None and self.clustered:
            # coordinated by another broker: its verification (AddPartitionsToTxn v4, broker to broker) is
            # not made; the producer's epoch is still checked by the partition's producer state
            return None
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
        error = await self._ready(transactional_id)
        if error is not None:
            return error
        async with self._locks[transactional_id]:
            meta = self._txns.get(transactional_id)
            error = self._check_producer(meta, producer_id, producer_epoch, fenced)
            if error is not None:
                return error
            assert meta is not None  # _check_producer refuses a transactional id without one
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
        described = []
        for transactional_id in transactional_ids:
            error = await self._ready(transactional_id)
            meta = self._txns.get(transactional_id) if error is None else None
            if meta is None:
                # Kafka leaves the other fields at their zero defaults
                described.append({"error_code": error or ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
                                  "transactional_id": transactional_id, "transaction_state": "",
                                  "transaction_timeout_ms": 0, "transaction_start_time_ms": 0, "producer_id": 0,
                                  "producer_epoch": 0, "topics": []})
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
        """The transactions this broker coordinates (an admin client asks every broker and merges)."""
        if not self.clustered:
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
