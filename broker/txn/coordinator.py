"""The transaction coordinator: transactional ids, their producer ids and epochs, and two-phase commits.

What it does, as Kafka's coordinator does with ``transaction.version`` 1 (the protocol of every current
client against a broker that does not advertise version 2):

* InitProducerId with a transactional id gives the id's producer id with a bumped epoch, which fences
  every older instance of the producer. A transaction still open is aborted first, with a bumped epoch,
  and answered CONCURRENT_TRANSACTIONS: the client's retry gets the next epoch.
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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from broker.client import ClientError, KafkaConnection
from broker.errors import ErrorCode, KafkaError
from broker.groups.coordinator import read_partition_entries
from broker.groups.hashing import offsets_partition_for
from broker.protocol.api import ApiKey
from broker.protocol.records import Record, build_batch
from broker.protocol.responses import (
    DescribeTransactionsResponseTransactionState,
    ListTransactionsResponseTransactionState,
)
from broker.protocol.types import ProtocolError
from broker.topics import OFFSETS_TOPIC, TRANSACTIONS_TOPIC
from broker.txn.machine import InitStep, TxnMachine
from broker.txn.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TxnMetadata,
    TxnState,
    decode_record,
    record_key,
    record_value,
)

if TYPE_CHECKING:
    from broker.cluster.view import ClusterView
    from broker.config import BrokerConfig
    from broker.groups.coordinator import GroupCoordinator
    from broker.log.manager import LogManager, Topic
    from broker.log.partition import AppendResult, PartitionLog
    from broker.security.broker_login import BrokerCredential


class TopicCreator(Protocol):
    async def create_topic(self, name: str, partitions: int, configs: dict[str, Any], replication_factor: int,
                           assignments: list[list[int]] | None = None) -> bytes: ...


class MarkerRoutes(Protocol):
    """How markers reach the other brokers' partitions (:class:`broker.cluster.replication.ReplicaManager`)."""

    def broker_address(self, node_id: int) -> tuple[str, int] | None: ...

    def broker_credential(self) -> BrokerCredential: ...


class ProducerIds(Protocol):
    async def allocate(self) -> int: ...


class TxnHost(Protocol):
    """What the transaction coordinator (and a marker's write) uses of its broker."""

    @property
    def node_id(self) -> int: ...

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def logs(self) -> LogManager | None: ...

    @property
    def cluster_view(self) -> ClusterView: ...

    @property
    def topic_admin(self) -> TopicCreator: ...

    @property
    def groups(self) -> GroupCoordinator | None: ...

    @property
    def replica_manager(self) -> MarkerRoutes | None: ...

    @property
    def producer_ids(self) -> ProducerIds | None: ...

    def create_topic(self, name: str, partitions: int, configs: dict[str, Any], *,
                     replication_factor: int = 1) -> Topic: ...

    def partition_log(self, topic: str, partition: int) -> PartitionLog: ...

    async def append(self, topic: str, partition: int, batch: bytes | memoryview, *, leader_epoch: int | None = None,
                     from_coordinator: bool = False) -> AppendResult: ...

    async def append_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                            committed: bool, coordinator_epoch: int = 0) -> AppendResult: ...

log = structlog.get_logger("broker.txn")

TopicPartition = tuple[str, int]


async def write_marker(broker: TxnHost, topic: str, partition: int, producer_id: int, producer_epoch: int,
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
    def __init__(self, broker: TxnHost, *, clustered: bool = False) -> None:
        """``clustered``: the broker is a node of a cluster, where a partition of `__transaction_state` is
        coordinated by its leader and the controller creates the topic; a single node coordinates them all
        and creates it with its first record."""
        self.broker = broker
        self.clustered = clustered
        config = broker.config
        self.partition_count = config["transaction.state.log.num.partitions"]
        self.max_timeout_ms = config["transaction.max.timeout.ms"]
        self.machine = TxnMachine()
        self._locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._load_lock = asyncio.Lock()
        self._partition_locks: dict[int, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._loaded = False  # single node: every partition loaded (or none to load)
        self._owned: set[int] = set()  # the `__transaction_state` partitions this broker coordinates (cluster)
        self._creating: asyncio.Task | None = None
        self._making: asyncio.Future[Any] | None = None  # single node: the topic being created on a thread

    async def write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                           committed: bool) -> ErrorCode:
        """A marker another broker's coordinator sends this broker, the partition's leader (WriteTxnMarkers)."""
        return await write_marker(self.broker, topic, partition, producer_id, producer_epoch, committed)

    def _now_ms(self) -> int:
        return int(self.broker.clock() * 1000)

    # --- loading ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Single node: load `__transaction_state` if an earlier run created it (else it is created on first
        use). In a cluster, partitions are loaded as this broker becomes their leader (:meth:`load_partition`)."""
        if not self.clustered and self.broker.logs.topics.get(TRANSACTIONS_TOPIC) is not None:
            await self._ensure_loaded()

    def _topic_configs(self, replication: int) -> dict[str, object]:
        """`__transaction_state`'s configs as Kafka creates it: compacted, in segments of
        ``transaction.state.log.segment.bytes``, its min.insync.replicas ``transaction.state.log.min.isr``. That
        minimum is kept within the ``replication`` the topic gets: this broker creates the topic with the live
        brokers when there are fewer than ``transaction.state.log.replication.factor`` (Kafka waits for them), and
        a minimum above the replicas would refuse every transaction for good."""
        min_isr = self.broker.config["transaction.state.log.min.isr"]
        if min_isr > replication and self.clustered:  # a single node's one replica is no news
            log.warning("transaction.state.log.min.isr is more than __transaction_state's replicas; the topic gets "
                        "their number", min_isr=min_isr, replication_factor=replication)
        return {"cleanup.policy": "compact", "segment.bytes": self.broker.config["transaction.state.log.segment.bytes"],
                "min.insync.replicas": min(min_isr, replication)}

    async def _ensure_topic(self) -> None:
        """Single node: create `__transaction_state` before its first record, on a thread: its partitions'
        directories and files (50 by default) wait on the file system's journal, and on the event loop every
        connection waited with them. The writes asked meanwhile wait for the same creation; the topic is seen only
        once every partition is made (:meth:`LogManager.create_topic`). A creation that failed is tried again by
        the next write."""
        if self.clustered or self.broker.logs.topics.get(TRANSACTIONS_TOPIC) is not None:
            return
        if self._making is None:
            self._making = asyncio.ensure_future(asyncio.to_thread(
                self.broker.create_topic, TRANSACTIONS_TOPIC, self.partition_count, self._topic_configs(1)))
        making = self._making
        try:
            await asyncio.shield(making)
        finally:
            if making.done() and self._making is making:
                self._making = None  # made (the topic is there) or failed (made again next time)

    def request_topic(self) -> None:
        """In a cluster, the first lookup of a transaction coordinator has the controller create
        `__transaction_state` (as Kafka does); lookups answer COORDINATOR_NOT_AVAILABLE meanwhile."""
        if self.broker.logs.topics.get(TRANSACTIONS_TOPIC) is not None or (
                self._creating is not None and not self._creating.done()):
            return
        replication = max(min(self.broker.config["transaction.state.log.replication.factor"],
                              len(self.broker.cluster_view.live_brokers())), 1)

        async def create() -> None:
            try:
                await self.broker.topic_admin.create_topic(TRANSACTIONS_TOPIC, self.partition_count,
                                                           self._topic_configs(replication), replication)
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
            self.machine.load(loaded)
            self._owned.add(partition)
            if loaded:
                log.info("transaction state loaded", partition=partition, transactional_ids=len(loaded))
        for meta in self.machine.preparing():
            if loaded.get(meta.transactional_id) is meta:
                await self._complete_preparing(meta)

    def unload_partition(self, partition: int) -> None:
        """Another broker coordinates this partition's transactional ids from now on."""
        self._owned.discard(partition)
        self._drop_partition(partition)

    def _drop_partition(self, partition: int) -> None:
        self.machine.drop(lambda transactional_id: self.partition_for(transactional_id) == partition)

    async def _ready(self, transactional_id: str) -> ErrorCode | None:
        """None if this broker coordinates the transactional id now, else the error that sends the client
        looking for its coordinator (again)."""
        if not self.clustered:
            await self._ensure_loaded()
            return None
        if self.broker.logs.topics.get(TRANSACTIONS_TOPIC) is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not self.broker.cluster_view.in_quorum:
            # cut off from the quorum, it is being fenced and its partitions move: the client looks again
            return ErrorCode.NOT_COORDINATOR
        partition = self.partition_for(transactional_id)
        if partition in self._owned:
            return None
        leader = self.broker.cluster_view.partition_leader(TRANSACTIONS_TOPIC, partition)[0]
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if leader == self.broker.node_id else ErrorCode.NOT_COORDINATOR

    def partition_for(self, transactional_id: str) -> int:
        return offsets_partition_for(transactional_id, self.partition_count)

    # --- the log ----------------------------------------------------------------------------------------

    async def _write(self, meta: TxnMetadata | None, transactional_id: str) -> ErrorCode:
        """Append a state change (None: a tombstone) to the id's `__transaction_state` partition."""
        await self._ensure_topic()
        value = None if meta is None else record_value(meta)
        batch = build_batch([Record(offset=0, timestamp=self._now_ms(), key=record_key(transactional_id),
                                    value=value)])
        try:
            await self.broker.append(TRANSACTIONS_TOPIC, self.partition_for(transactional_id), batch)
        except KafkaError as exc:
            log.warning("append to __transaction_state failed", transactional_id=transactional_id,
                        error=exc.code.name)
            # Kafka's mapping, and a broker that lost the quorum meanwhile is no coordinator any more: asked
            # again, it would only time out again
            if exc.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR) \
                    or not self.broker.cluster_view.in_quorum:
                return ErrorCode.NOT_COORDINATOR
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE

    async def _transition(self, meta: TxnMetadata) -> ErrorCode:
        """Write a new state and, once it is in the log, make it the id's state."""
        self.machine.validate(meta)
        error = await self._write(meta, meta.transactional_id)
        if error == ErrorCode.NONE:
            self.machine.apply(meta)
        return error

    async def _complete_preparing(self, meta: TxnMetadata) -> None:
        """Finish a transaction found preparing (by loading, or by the periodic check), unless a request
        changed it meanwhile."""
        async with self._locks[meta.transactional_id]:
            if self.machine.get(meta.transactional_id) is meta:
                await self._complete(meta, meta.state == TxnState.PREPARE_COMMIT)

    async def _complete(self, meta: TxnMetadata, committed: bool) -> ErrorCode:
        """Second phase: a marker on every partition of the transaction (this broker writes those it leads,
        the other leaders get WriteTxnMarkers), then CompleteCommit/CompleteAbort. A partition whose topic
        was deleted meanwhile is skipped; any other failure leaves the transaction preparing, and the
        periodic check tries again."""
        local: list[tuple[str, int]] = []
        remote: defaultdict[int, list[tuple[str, int]]] = defaultdict(list)
        for topic, partition in sorted(meta.partitions):
            try:
                leader = self.broker.cluster_view.partition_leader(topic, partition)[0]
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
        return await self._transition(self.machine.completed(meta, self._now_ms()))

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

    async def _end(self, prepared: TxnMetadata) -> ErrorCode:
        """Both phases of ending a transaction: the prepared state, then the markers and the completion."""
        error = await self._transition(prepared)
        if error != ErrorCode.NONE:
            return error
        return await self._complete(prepared, prepared.state == TxnState.PREPARE_COMMIT)

    # --- requests -----------------------------------------------------------------------------------------

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
            step = self.machine.init_producer_id(transactional_id, producer_id, producer_epoch, fenced)
            if isinstance(step, ErrorCode):
                return step, -1, -1
            if step == InitStep.FENCE_FIRST:
                return await self._fence(transactional_id), -1, -1
            new_producer_id = await self.broker.producer_ids.allocate() if step == InitStep.NEW_PRODUCER_ID else None
            meta = self.machine.initialised(transactional_id, timeout_ms, self._now_ms(), new_producer_id,
                                            producer_epoch if producer_id != NO_PRODUCER_ID else NO_PRODUCER_EPOCH)
            error = await self._transition(meta)
            if error != ErrorCode.NONE:
                return error, -1, -1
            return ErrorCode.NONE, meta.producer_id, meta.producer_epoch

    async def _fence(self, transactional_id: str) -> ErrorCode:
        """InitProducerId on an open transaction, as Kafka answers it: the transaction is aborted with its
        producer's epoch bumped (fencing it), and the answer is CONCURRENT_TRANSACTIONS, so the client retries
        and its retry bumps the epoch again. The answer waits for the markers, as EndTxn's does here; markers
        that fail are left to the periodic check (the retry gets CONCURRENT_TRANSACTIONS meanwhile). A failed
        write of the abort is answered with its own error."""
        open_txn = self.machine.get(transactional_id)
        assert open_txn is not None  # only a known id has a transaction to fence
        fence = self.machine.fenced(open_txn, self._now_ms())
        error = await self._transition(fence)
        if error != ErrorCode.NONE:
            return error
        await self._complete(fence, committed=False)
        return ErrorCode.CONCURRENT_TRANSACTIONS

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition], fenced: ErrorCode
                             ) -> dict[TopicPartition, ErrorCode]:
        partitions = list(partitions)
        error = await self._ready(transactional_id)
        if error is not None:
            return dict.fromkeys(partitions, error)
        async with self._locks[transactional_id]:
            step = self.machine.add_partitions(transactional_id, producer_id, producer_epoch, partitions, fenced,
                                               self._now_ms())
            error = step if isinstance(step, ErrorCode) else await self._transition(step)
            return dict.fromkeys(partitions, error)

    async def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: Iterable[TopicPartition], fenced: ErrorCode
                                ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ ``verify_only``: are these partitions in the open transaction?"""
        partitions = list(partitions)
        error = await self._ready(transactional_id)
        if error is not None:
            return dict.fromkeys(partitions, error)
        return self.machine.verify_partitions(transactional_id, producer_id, producer_epoch, partitions, fenced)

    def check_transactional_write(self, producer_id: int, producer_epoch: int, topic: str, partition: int
                                  ) -> KafkaError | None:
        """May this transactional batch (or TxnOffsetCommit) be written? Kafka's partition verification: the
        partition must be in the producer's open transaction, with the producer's current epoch."""
        return self.machine.check_transactional_write(producer_id, producer_epoch, topic, partition, self.clustered)

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                      fenced: ErrorCode) -> ErrorCode:
        error = await self._ready(transactional_id)
        if error is not None:
            return error
        async with self._locks[transactional_id]:
            step = self.machine.end_txn(transactional_id, producer_id, producer_epoch, committed, fenced,
                                        self._now_ms())
            return step if isinstance(step, ErrorCode) else await self._end(step)

    # --- background ---------------------------------------------------------------------------------------

    async def abort_timed_out(self) -> None:
        """Abort (fencing the producer) every transaction open longer than its timeout; finish ones left
        preparing by a failed marker write."""
        for meta in self.machine.timed_out(self._now_ms()):
            async with self._locks[meta.transactional_id]:
                if self.machine.get(meta.transactional_id) is meta:
                    log.info("aborting a transaction that timed out", transactional_id=meta.transactional_id,
                             producer_id=meta.producer_id, timeout_ms=meta.timeout_ms)
                    await self._end(self.machine.fenced(meta, self._now_ms()))
        for meta in self.machine.preparing():
            await self._complete_preparing(meta)

    async def expire_transactional_ids(self) -> None:
        """Forget transactional ids unused for ``transactional.id.expiration.ms`` (a tombstone each)."""
        for meta in self.machine.expired(self._now_ms(), self.broker.config["transactional.id.expiration.ms"]):
            async with self._locks[meta.transactional_id]:
                if self.machine.get(meta.transactional_id) is not meta:
                    continue
                if await self._write(None, meta.transactional_id) == ErrorCode.NONE:
                    self.machine.forget(meta.transactional_id)
                    self._locks.pop(meta.transactional_id, None)
                    log.info("transactional id expired", transactional_id=meta.transactional_id)

    # --- admin ----------------------------------------------------------------------------------------------

    async def describe(self, transactional_ids: list[str]) -> list[DescribeTransactionsResponseTransactionState]:
        described: list[DescribeTransactionsResponseTransactionState] = []
        for transactional_id in transactional_ids:
            error = await self._ready(transactional_id) if transactional_id else ErrorCode.INVALID_REQUEST
            meta = self.machine.get(transactional_id) if error is None else None
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
                   ) -> tuple[ErrorCode, list[str], list[ListTransactionsResponseTransactionState]]:
        """The transactions this broker coordinates (an admin client asks every broker and merges)."""
        if not self.clustered:
            await self._ensure_loaded()
        unknown, listed = self.machine.listed(states, producer_ids, min_duration_ms, self._now_ms())
        return ErrorCode.NONE, unknown, [{"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                                          "transaction_state": t.state.kafka_name} for t in listed]
