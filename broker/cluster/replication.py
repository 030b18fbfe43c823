"""Partition replication: leaders track their followers, followers copy their leaders' logs.

Leader side: every follower Fetch (``replica_id >= 0``, from a broker of this cluster: the Fetch handler takes
no other, see :meth:`broker.handlers.registry.RequestContext.from_cluster_broker`) reports the follower's log end to
:meth:`ReplicaManager.on_follower_fetch`; :class:`~broker.cluster.isr.PartitionLeaderState` turns those reports
into the high watermark and ISR changes. ISR changes are proposed to the metadata quorum through the
``propose_isr`` callback (default: the broker's ``cluster_view.propose_isr``) as ``(topic, partition, isr, leader_epoch)``; it
returns, or resolves to, True once the change is committed. ``acks=all`` producers wait in
:meth:`ReplicaManager.wait_for_isr`.

Follower side: one :class:`LeaderFetcher` per leader broker replicates all partitions this broker follows
from it over one connection, as Kafka's replica fetcher does. A partition joining a fetcher first settles
divergence: it asks the leader (OffsetForLeaderEpoch) where its own latest leader epoch ends on the leader
and cuts its log there, repeating with older epochs until both logs agree (KIP-101, KIP-279). Then it
fetches from its log end, appends the leader's batches as they are, and takes the leader's high watermark.

In a cluster every partition log opens without an automatic high watermark (the log manager's
``auto_high_watermark=False``): its high watermark is set only from here, so a log replayed after a crash
commits nothing of its own. A log with one (a single node's, or the hand-built brokers of tests) loses it
when it is taken over here (leader or follower).

Replication throttles (``--throttle`` of kafka-reassign-partitions, :mod:`broker.cluster.replication_quota`): the
Fetch handler answers a throttled follower with no records where :meth:`ReplicaManager.leader_throttles` says so
and counts what it sends with :meth:`ReplicaManager.count_leader_bytes`; a fetcher leaves out the partitions
:meth:`ReplicaManager.follower_throttles` holds back.

A broker acts as a partition's leader only where :func:`broker.cluster.isr.acts_as_leader` says so: the metadata names it, it has
caught up with the metadata quorum since it started, and the manager took up that very leader epoch.

What the broker provides (:class:`ReplicaHost`): ``node_id``, ``config``, ``clock``, ``partition_log``, its
cluster view's ``live_brokers`` (to find a leader's address), ``storage_failed`` (a replicated append the disk
refused), ``inter_broker_key`` and its cluster view's ``broker_epoch`` (to log in to the leader as a broker of
the cluster, :mod:`broker.security.broker_login`) and ``notify_appended`` (to wake long polls when the high
watermark moves). What it must call: :meth:`ReplicaManager.on_leader_append` after every append to a log (it
must not move the high watermark itself), and give the manager to the handlers' replica manager
(:mod:`broker.replica_manager`) for Produce and Fetch.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from broker.client import ClientError, KafkaConnection
from broker.cluster.follower_log import append_leader_batches, cut_divergent_tail
from broker.cluster.isr import IsrChange, PartitionLeaderState
from broker.cluster.replication_quota import NO_THROTTLE, ReplicationQuota, throttles_replica
from broker.config import BROKER_KEYS
from broker.errors import ErrorCode, KafkaError
from broker.log.background import wait_durable
from broker.log.partition import RollPending
from broker.protocol.api import ApiKey
from broker.quotas import QuotaWindow
from broker.security.broker_login import BrokerCredential

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.dynamic_config import DynamicBrokerConfigs
    from broker.log.partition import PartitionLog

log = structlog.get_logger("broker.replication")

TopicPartition = tuple[str, int]
FetcherKey = tuple[int, int]  # (leader id, fetcher id): one fetcher and connection per pair
ProposeIsr = Callable[[str, int, list[int], int], "bool | Awaitable[bool]"]

# Kafka's replica fetcher settings (broker configs; Kafka lets none of them change at run time), with the defaults
# the broker config has for them.
FETCHER_DEFAULTS: dict[str, int] = {
    key: BROKER_KEYS[key][1]
    for key in ("replica.fetch.wait.max.ms", "replica.fetch.min.bytes", "replica.fetch.max.bytes",
                "replica.fetch.response.max.bytes", "replica.fetch.backoff.ms", "replica.socket.timeout.ms",
                "replica.socket.receive.buffer.bytes")
}


@dataclass(eq=False, slots=True)
class FollowedPartition:
    """This broker's replica of a partition led elsewhere, as one fetcher sees it."""

    topic: str
    partition: int
    leader_epoch: int
    plog: PartitionLog
    diverged: bool = True  # not yet compared with the leader in this epoch
    fetch_offset: int | None = None  # None: the log end; set when the leader's log starts past our end
    retry_at: float = 0.0  # monotonic time before which the partition is not fetched (after an error)
    lag: int = 0  # the leader's high watermark past our next offset at the last fetch (Kafka's replica lag)
    in_sync: bool = False  # the last fetch reached the leader's high watermark (never throttled then)
    rolling: concurrent.futures.Future[None] | None = None  # a roll an append started, awaited before a fetch

    @property
    def next_offset(self) -> int:
        return self.plog.log_end_offset if self.fetch_offset is None else self.fetch_offset


def fetcher_id(topic: str, partition: int, fetchers: int) -> int:
    """Which of a leader's ``fetchers`` (num.replica.fetchers) copies the partition: Kafka's spread
    (abs(31 * topic.hashCode() + partition) % fetchers, in Java's 32-bit arithmetic)."""
    def int32(value: int) -> int:
        return (value + 2**31) % 2**32 - 2**31

    java_hash = 0
    units = topic.encode("utf-16-be")  # String.hashCode runs over UTF-16 code units
    for at in range(0, len(units), 2):
        java_hash = int32(31 * java_hash + int.from_bytes(units[at:at + 2], "big"))
    spread = int32(31 * java_hash + partition)
    return 0 if spread == -(2**31) else abs(spread) % fetchers


# Errors a fetcher waits out: the leader has not caught up with the metadata (or we have not).
_TRANSIENT_FETCH_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.REPLICA_NOT_AVAILABLE,
})


class LeaderFetcher:
    """Replicates every partition this broker follows from one leader broker, over one connection."""

    def __init__(self, manager: ReplicaManager, leader_id: int, fetcher_id: int = 0) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        self.partitions: dict[TopicPartition, FollowedPartition] = {}
        self._changed = asyncio.Event()
        self._connection: KafkaConnection | None = None
        self._task: asyncio.Task | None = None
        # Python 3.11's wait_for can swallow a cancellation that lands as its wait completes; the loop
        # also ends on this flag, so stopping never hangs.
        self._stopped = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"replica-fetcher-{self.leader_id}-{self.fetcher_id}")

    def cancel(self) -> asyncio.Task | None:
        """Stop fetching; the returned task ends once the connection is closed."""
        task, self._task = self._task, None
        self._stopped = True
        self._changed.set()
        if task is not None:
            task.cancel()
        return task

    def add(self, followed: FollowedPartition) -> None:
        self.partitions[(followed.topic, followed.partition)] = followed
        self._changed.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)
        self._changed.set()

    def _is_current(self, followed: FollowedPartition) -> bool:
        """False once the partition left this fetcher or was re-added (new epoch) while we awaited."""
        return self.partitions.get((followed.topic, followed.partition)) is followed

    # --- the loop ---------------------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = self.manager.fetcher_settings["replica.fetch.backoff.ms"] / 1000
        try:
            while not self._stopped:
                try:
                    if not await self._wait_for_work():
                        continue
                    connection = await self._connect()
                    await self._settle_divergence(connection)
                    await self._fetch_once(connection)
                except (ClientError, KafkaError, OSError) as exc:
                    log.warning("replica fetch from leader failed", leader=self.leader_id, error=str(exc))
                    await self._disconnect()
                    await asyncio.sleep(backoff)
                except Exception:
                    log.exception("replica fetcher failed", leader=self.leader_id)
                    await self._disconnect()
                    await asyncio.sleep(backoff)
        finally:
            await self._disconnect()

    async def _wait_for_work(self) -> bool:
        """Wait until some partition may be fetched; False if woken by a change (look again)."""
        now = asyncio.get_running_loop().time()
        waits = [f.retry_at - now for f in self.partitions.values()]
        if waits and min(waits) <= 0:
            return True
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(min(waits) if waits else None):
                await self._changed.wait()
        return False

    def _ready(self) -> list[FollowedPartition]:
        now = asyncio.get_running_loop().time()
        return [f for f in self.partitions.values() if f.retry_at <= now]

    def _back_off(self, followed: FollowedPartition) -> None:
        backoff = self.manager.fetcher_settings["replica.fetch.backoff.ms"] / 1000
        followed.retry_at = asyncio.get_running_loop().time() + backoff

    async def _connect(self) -> KafkaConnection:
        credential = self.manager.broker_credential()
        if self._connection is not None and self._connection.broker_credential == credential:
            return self._connection
        await self._disconnect()  # none yet, or logged in at a broker epoch this broker no longer has
        address = self.manager.broker_address(self.leader_id)
        if address is None:
            raise ClientError(f"leader {self.leader_id} is not among the live brokers")
        host, port = address
        settings = self.manager.fetcher_settings
        connection = KafkaConnection(host, port, client_id=f"replica-fetcher-{self.manager.node_id}",
                                     timeout=settings["replica.socket.timeout.ms"] / 1000,
                                     security=self.manager.broker.config.inter_broker_security,
                                     broker_credential=credential,
                                     receive_buffer_bytes=settings["replica.socket.receive.buffer.bytes"])
        await connection.open()
        if connection.receive_buffer_granted < connection.receive_buffer_bytes:
            log.warning("socket buffer smaller than configured: the kernel caps it",
                        key="replica.socket.receive.buffer.bytes", configured=connection.receive_buffer_bytes,
                        granted=connection.receive_buffer_granted, limit="net.core.rmem_max", leader=self.leader_id)
        self._connection = connection
        return connection

    async def _disconnect(self) -> None:
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    # --- divergence -------------------------------------------------------------------------------------

    async def _settle_divergence(self, connection: KafkaConnection) -> None:
        """OffsetForLeaderEpoch rounds until every ready partition agrees with the leader's log."""
        while True:
            asking: dict[TopicPartition, tuple[FollowedPartition, int, int]] = {}
            for followed in self._ready():
                if not followed.diverged:
                    continue
                entries = followed.plog.leader_epoch_entries()
                if not entries:
                    followed.diverged = False  # an empty log (or one without epochs) has nothing to cut
                    continue
                latest_epoch, latest_start = entries[-1]
                asking[(followed.topic, followed.partition)] = (followed, latest_epoch, latest_start)
            if not asking:
                return
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for (topic, partition), (followed, latest_epoch, _start) in asking.items():
                by_topic.setdefault(topic, []).append({
                    "partition": partition, "current_leader_epoch": followed.leader_epoch,
                    "leader_epoch": latest_epoch,
                })
            response = await connection.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, {
                "replica_id": self.manager.node_id,
                "topics": [{"topic": topic, "partitions": parts} for topic, parts in by_topic.items()],
            })
            for topic in response["topics"]:
                for answer in topic["partitions"]:
                    entry = asking.get((topic["topic"], answer["partition"]))
                    if entry is not None and self._is_current(entry[0]):
                        self._apply_epoch_answer(*entry, answer)

    def _apply_epoch_answer(self, followed: FollowedPartition, latest_epoch: int, latest_start: int,
                            answer: dict[str, Any]) -> None:
        if answer["error_code"]:
            log.info("leader cannot answer for its epochs yet", topic=followed.topic,
                     partition=followed.partition, leader=self.leader_id, error=answer["error_code"])
            self._back_off(followed)
            return
        followed.diverged = not cut_divergent_tail(followed.plog, latest_epoch, latest_start,
                                                   answer["leader_epoch"], answer["end_offset"])

    # --- fetching ---------------------------------------------------------------------------------------

    async def _fetch_once(self, connection: KafkaConnection) -> None:
        settings = self.manager.fetcher_settings
        sent: dict[TopicPartition, tuple[FollowedPartition, int]] = {}
        by_topic: dict[str, list[dict[str, Any]]] = {}
        held = False
        for followed in self._ready():
            if followed.diverged:
                continue
            if self.manager.follower_throttles(followed):
                held = True
                continue
            offset = followed.next_offset
            sent[(followed.topic, followed.partition)] = (followed, offset)
            by_topic.setdefault(followed.topic, []).append({
                "partition": followed.partition, "current_leader_epoch": followed.leader_epoch,
                "fetch_offset": offset, "last_fetched_epoch": -1,
                "log_start_offset": followed.plog.log_start_offset,
                "partition_max_bytes": settings["replica.fetch.max.bytes"],
            })
        if not sent:
            if held:  # as Kafka's fetcher with nothing to ask for: wait its backoff, then look at the rate again
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(settings["replica.fetch.backoff.ms"] / 1000):
                        await self._changed.wait()
            return
        response = await connection.request(ApiKey.FETCH, {
            "replica_id": self.manager.node_id,
            "max_wait_ms": settings["replica.fetch.wait.max.ms"],
            "min_bytes": settings["replica.fetch.min.bytes"],
            "max_bytes": settings["replica.fetch.response.max.bytes"],
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": parts} for topic, parts in by_topic.items()],
        })
        if response["error_code"]:
            raise KafkaError(ErrorCode(response["error_code"]), "replica fetch refused")
        if any(part["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
               for topic in response["responses"] for part in topic["partitions"]):
            # Kafka's answer to a follower fetch it does not take from a broker; a new connection logs in again
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                             "the leader refuses this broker's fetches: either it no longer counts this broker as "
                             "registered at the broker epoch it logged in with (it logs in again), or its ACLs "
                             "refuse the principal brokers log in with on the inter-broker listener, which needs "
                             "CLUSTER_ACTION on the cluster (list it in super.users, as Kafka's docs advise)")
        for topic in response["responses"]:
            for part in topic["partitions"]:
                tp = (topic["topic"], part["partition_index"])
                entry = sent.get(tp)
                if entry is not None and self._is_current(entry[0]):
                    self._apply_fetched(entry[0], entry[1], part)
                    if part["records"]:
                        # To the back of the next request: a response holds only what fits in its max_bytes, so
                        # the partitions in front would keep the others waiting (Kafka's fetcher does the same).
                        self.partitions[tp] = self.partitions.pop(tp)
        # the next fetch tells the leader what this replica holds: with flush.messages/flush.ms, only once the
        # fsyncs the appends asked for (run off the event loop) are done
        for followed, _offset in sent.values():
            await wait_durable(followed.plog.pending_flush(), f"{followed.topic}-{followed.partition}")
            rolling, followed.rolling = followed.rolling, None
            try:  # and a roll an append started off the event loop
                await wait_durable(rolling, f"{followed.topic}-{followed.partition}")
            except KafkaError as exc:  # the disk refused it: KAFKA_STORAGE_ERROR
                self.manager.broker.storage_failed(followed.topic, followed.partition, exc)
                raise

    def _apply_fetched(self, followed: FollowedPartition, fetch_offset: int, part: dict[str, Any]) -> None:
        error = part["error_code"]
        plog = followed.plog
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            leader_start = part["log_start_offset"]
            if leader_start > fetch_offset:
                # The leader deleted what we would fetch next: continue at its log start. The log keeps a gap
                # below it until the log start moves up (replicated from the leader below).
                log.info("leader log starts past our log end", topic=followed.topic,
                         partition=followed.partition, fetch_offset=fetch_offset, leader_start=leader_start)
                followed.fetch_offset = leader_start
            else:
                # We are past the leader's log end: our tail diverged. Ask about epochs again (after a pause,
                # in case the answer cannot fix it, e.g. a log without epochs).
                followed.diverged = True
                self._back_off(followed)
            return
        if error:
            if error not in _TRANSIENT_FETCH_ERRORS:
                log.warning("replica fetch error", topic=followed.topic, partition=followed.partition,
                            leader=self.leader_id, error=error)
            self._back_off(followed)
            return
        records = part["records"]
        if records:
            try:
                try:
                    appended = append_leader_batches(plog, records, fetch_offset)
                except RollPending as pending:  # the rest comes again, from the new segment's base
                    followed.rolling, appended = pending.rolled, True
                if appended:
                    followed.fetch_offset = None
                self.manager.broker.storage_written()
                metrics = self.manager.broker.metrics
                metrics.replication_bytes_in += len(records)
                adding = self.manager.broker.cluster_view.adding_replicas(followed.topic, followed.partition)
                if adding is not None and self.manager.node_id in adding:
                    metrics.reassignment_bytes_in += len(records)
                self.manager.count_follower_bytes(followed, len(records))
            except KafkaError as exc:
                if exc.code == ErrorCode.KAFKA_STORAGE_ERROR:
                    self.manager.broker.storage_failed(followed.topic, followed.partition, exc)
                else:
                    log.warning("cannot append replicated batches", topic=followed.topic,
                                partition=followed.partition, error=exc.message)
                self._back_off(followed)
                return
        plog.high_watermark = max(min(part["high_watermark"], plog.log_end_offset), plog.log_start_offset)
        followed.lag = max(part["high_watermark"] - followed.next_offset, 0)
        followed.in_sync = followed.lag == 0
        leader_start = part["log_start_offset"]
        new_start = min(leader_start, plog.high_watermark)
        if new_start > plog.log_start_offset:
            plog.delete_records_before(new_start)


@dataclass(slots=True)
class _IsrWaiter:
    required_offset: int
    future: asyncio.Future


@dataclass(eq=False, slots=True)
class LedPartition:
    """A partition this broker leads: the pure leader state and the log it describes."""

    state: PartitionLeaderState
    plog: PartitionLog


class ReplicationView(Protocol):
    """What replication asks of the cluster as its broker sees it (:class:`broker.cluster.view.ClusterView`)."""

    def live_brokers(self, listener: str | None = None) -> list[tuple[int, str, int, str | None]]: ...

    def broker_epoch(self, node_id: int) -> int | None: ...

    def adding_replicas(self, topic: str, partition: int) -> list[int] | None: ...

    async def propose_isr(self, topic: str, partition: int, isr: list[int], leader_epoch: int) -> bool: ...


class ReplicationMetrics(Protocol):
    replication_bytes_in: int
    reassignment_bytes_in: int

    def isr_changed(self, before: tuple[int, ...], after: tuple[int, ...]) -> None: ...


class ReplicaHost(Protocol):
    """What the replica manager uses of its broker (the module's docstring says what for)."""

    @property
    def node_id(self) -> int: ...

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def cluster_view(self) -> ReplicationView: ...

    @property
    def dynamic_configs(self) -> DynamicBrokerConfigs | None: ...

    @property
    def inter_broker_key(self) -> bytes | None: ...

    @property
    def metrics(self) -> ReplicationMetrics: ...

    def partition_log(self, topic: str, partition: int) -> PartitionLog: ...

    def notify_appended(self, topic: str, partition: int) -> None: ...

    def storage_failed(self, topic: str, partition: int, error: KafkaError) -> None: ...

    def storage_written(self) -> None: ...


class ReplicaManager:
    """Replication for one broker: leader state and follower fetchers of its partitions.

    ``become_leader``, ``become_follower`` and ``stop_replica`` are called by the cluster layer when the
    metadata changes. Calling ``become_leader`` again with the same epoch updates replicas and ISR (an ISR
    change committed by the controller); an older epoch than the current one is ignored.
    """

    def __init__(self, broker: ReplicaHost, *, propose_isr: ProposeIsr | None = None) -> None:
        self.broker = broker
        self._propose_isr = propose_isr
        self.lag_time_max_s = broker.config["replica.lag.time.max.ms"] / 1000
        self.fetcher_settings = {key: broker.config[key] for key in FETCHER_DEFAULTS}
        self._leading: dict[TopicPartition, LedPartition] = {}
        self._following: dict[TopicPartition, FetcherKey] = {}
        self._fetchers: dict[FetcherKey, LeaderFetcher] = {}
        self._waiters: dict[TopicPartition, list[_IsrWaiter]] = {}
        self._tasks: set[asyncio.Task] = set()
        self._isr_check: asyncio.Task | None = None
        window = QuotaWindow(broker.config["replication.quota.window.num"],
                             broker.config["replication.quota.window.size.seconds"] * 1000)
        self.leader_quota = ReplicationQuota(window)
        self.follower_quota = ReplicationQuota(window)

    @property
    def node_id(self) -> int:
        return self.broker.node_id

    # --- lifecycle --------------------------------------------------------------------------------------

    async def start(self) -> None:
        # num.replica.fetchers and the replication throttles are some Kafka lets change at run time
        self.broker.dynamic_configs.on_change.append(self._spread_over_fetchers)
        self.broker.dynamic_configs.on_change.append(self._take_throttle_rates)
        self._take_throttle_rates()
        self._isr_check = asyncio.create_task(self._check_isr_periodically(), name="isr-check")

    async def stop(self) -> None:
        for callback in (self._spread_over_fetchers, self._take_throttle_rates):
            with contextlib.suppress(ValueError):
                self.broker.dynamic_configs.on_change.remove(callback)
        tasks = [t for t in (self._isr_check, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._isr_check = None
        self._tasks.clear()
        stopping = [fetcher.cancel() for fetcher in self._fetchers.values()]
        self._fetchers.clear()
        self._following.clear()
        await asyncio.gather(*(task for task in stopping if task is not None), return_exceptions=True)
        for tp in list(self._leading):
            self._drop_leadership(tp)

    # --- role changes -----------------------------------------------------------------------------------

    def become_leader(self, topic: str, partition: int, leader_epoch: int, replicas: list[int],
                      isr: list[int]) -> None:
        tp = (topic, partition)
        now = self.broker.clock()
        led = self._leading.get(tp)
        if led is not None and leader_epoch < led.state.leader_epoch:
            log.warning("ignoring leadership for an older epoch", topic=topic, partition=partition,
                        epoch=leader_epoch, current_epoch=led.state.leader_epoch)
            return
        if led is not None and leader_epoch == led.state.leader_epoch:
            # the committed ISR: this broker's proposal coming back, or the controller's (a broker fenced)
            before = led.state.isr
            led.state.update_assignment(replicas, isr, now)
            self.broker.metrics.isr_changed(before, led.state.isr)
        else:
            plog = self.broker.partition_log(topic, partition)
            self._stop_following(tp)
            plog.auto_high_watermark = False
            state = PartitionLeaderState(
                leader_id=self.node_id, leader_epoch=leader_epoch, replicas=replicas, isr=isr,
                leader_end_offset=plog.log_end_offset, high_watermark=plog.high_watermark,
                lag_time_max_s=self.lag_time_max_s, now=now,
            )
            led = self._leading[tp] = LedPartition(state, plog)
            # debug: a topic's hundreds of partitions change role together (the node logs them in one line)
            log.debug("became leader", topic=topic, partition=partition, epoch=leader_epoch,
                     replicas=replicas, isr=list(state.isr), log_end_offset=plog.log_end_offset)
        if led.state.on_leader_append(led.plog.log_end_offset):
            self._publish_high_watermark(tp, led)

    def become_follower(self, topic: str, partition: int, leader_epoch: int, leader_id: int) -> None:
        if leader_id == self.node_id:
            raise ValueError(f"{topic}-{partition}: broker {leader_id} cannot follow itself")
        tp = (topic, partition)
        plog = self.broker.partition_log(topic, partition)
        self._drop_leadership(tp)
        current = self._following.get(tp)
        if current is not None and current[0] == leader_id:
            if self._fetchers[current].partitions[tp].leader_epoch == leader_epoch:
                return
        elif current is not None:
            self._stop_following(tp)
        plog.auto_high_watermark = False
        plog.high_watermark = min(plog.high_watermark, plog.log_end_offset)
        # A new entry (also for a new epoch of the same leader): answers to requests made for the old
        # one are ignored, and divergence is settled again.
        self._hand_to_fetcher(FollowedPartition(topic, partition, leader_epoch, plog), leader_id)
        log.debug("became follower", topic=topic, partition=partition, epoch=leader_epoch, leader=leader_id,
                 log_end_offset=plog.log_end_offset)

    def stop_replica(self, topic: str, partition: int) -> None:
        """Neither lead nor follow the partition any more (it moved away, or is being deleted)."""
        tp = (topic, partition)
        self._drop_leadership(tp)
        self._stop_following(tp)

    def _hand_to_fetcher(self, followed: FollowedPartition, leader_id: int) -> None:
        tp = (followed.topic, followed.partition)
        key = (leader_id, fetcher_id(followed.topic, followed.partition, self.broker.config["num.replica.fetchers"]))
        current = self._following.get(tp)
        if current is not None and current != key:
            self._stop_following(tp)
        fetcher = self._fetchers.get(key)
        if fetcher is None:
            fetcher = self._fetchers[key] = LeaderFetcher(self, *key)
            fetcher.start()
        fetcher.add(followed)
        self._following[tp] = key

    def _spread_over_fetchers(self) -> None:
        """After a change of num.replica.fetchers: move each followed partition to the fetcher it now falls to,
        with its progress (a request the old fetcher has in flight for it is ignored)."""
        for tp, (leader_id, _) in list(self._following.items()):
            followed = self._fetchers[self._following[tp]].partitions[tp]
            self._hand_to_fetcher(followed, leader_id)

    def _take_throttle_rates(self) -> None:
        for quota, name in ((self.leader_quota, "leader.replication.throttled.rate"),
                            (self.follower_quota, "follower.replication.throttled.rate")):
            rate = self.broker.dynamic_configs.value(name)
            quota.bound = NO_THROTTLE if rate is None else int(rate)

    def _stop_following(self, tp: TopicPartition) -> None:
        key = self._following.pop(tp, None)
        if key is None:
            return
        fetcher = self._fetchers[key]
        fetcher.remove(tp)
        if not fetcher.partitions:
            del self._fetchers[key]
            fetcher.cancel()

    def _drop_leadership(self, tp: TopicPartition) -> None:
        if self._leading.pop(tp, None) is None:
            return
        for waiter in self._waiters.pop(tp, []):
            if not waiter.future.done():
                waiter.future.set_result(False)

    # --- leader side ------------------------------------------------------------------------------------

    def leader_state(self, topic: str, partition: int) -> PartitionLeaderState | None:
        """The leader state of a partition this broker leads, else None."""
        led = self._leading.get((topic, partition))
        return None if led is None else led.state

    def following(self, topic: str, partition: int) -> int | None:
        """The leader this broker replicates the partition from, else None."""
        key = self._following.get((topic, partition))
        return None if key is None else key[0]

    def follower_lags(self) -> Iterator[int]:
        """The replica lag of every partition this broker follows (the metrics' max lag)."""
        for fetcher in self._fetchers.values():
            for followed in fetcher.partitions.values():
                yield followed.lag

    def leader_throttled(self, topic: str, partition: int) -> bool:
        """Whether the partition's topic lists this broker's replica in leader.replication.throttled.replicas."""
        led = self._leading.get((topic, partition))
        return led is not None and throttles_replica(led.plog.config.leader_replication_throttled_replicas,
                                                     partition, self.node_id)

    def leader_throttles(self, topic: str, partition: int, replica_id: int) -> bool:
        """Whether a fetch of the partition by follower ``replica_id`` gets no records now (Kafka's
        shouldLeaderThrottle): a throttled partition, a follower out of the ISR, the leader rate over its bound."""
        led = self._leading.get((topic, partition))
        return (led is not None and replica_id not in led.state.isr and self.leader_throttled(topic, partition)
                and self.leader_quota.exceeded(self._now_ms()))

    def count_leader_bytes(self, size: int) -> None:
        """Record bytes of throttled partitions sent to followers: in-sync ones' too, so that all replication of
        them keeps to the rate."""
        self.leader_quota.record(size, self._now_ms())

    def follower_throttles(self, followed: FollowedPartition) -> bool:
        """Whether the next fetch leaves the partition out (Kafka's shouldFollowerThrottle)."""
        return (not followed.in_sync and self._follower_throttled(followed)
                and self.follower_quota.exceeded(self._now_ms()))

    def count_follower_bytes(self, followed: FollowedPartition, size: int) -> None:
        if self._follower_throttled(followed):
            self.follower_quota.record(size, self._now_ms())

    def _follower_throttled(self, followed: FollowedPartition) -> bool:
        return throttles_replica(followed.plog.config.follower_replication_throttled_replicas, followed.partition,
                                 self.node_id)

    def _now_ms(self) -> int:
        return int(self.broker.clock() * 1000)

    def on_leader_append(self, topic: str, partition: int) -> None:
        """The leader's log grew (a produce or group-coordinator append); ``Broker.append`` calls this."""
        tp = (topic, partition)
        led = self._leading.get(tp)
        if led is not None and led.state.on_leader_append(led.plog.log_end_offset):
            self._publish_high_watermark(tp, led)

    def on_follower_fetch(self, topic: str, partition: int, replica_id: int, fetch_offset: int, now: float,
                          leader_epoch: int = -1) -> None:
        """A follower's Fetch asks for ``fetch_offset``: its log end. Called before the fetch is answered, so
        the high watermark in the answer already counts it. ``leader_epoch`` is the fetch's
        current_leader_epoch; a fetch from another epoch is not counted."""
        tp = (topic, partition)
        led = self._leading.get(tp)
        if led is None:
            return
        if led.state.on_follower_fetch(replica_id, fetch_offset, leader_epoch, led.plog.log_end_offset, now):
            self._publish_high_watermark(tp, led)
        self._maybe_change_isr(tp, led, now)

    async def wait_for_isr(self, topic: str, partition: int, required_offset: int, timeout_s: float) -> bool:
        """acks=all: True once the high watermark reached ``required_offset`` (the offset after the batch).

        False after ``timeout_s``, or as soon as this broker stops leading the partition; at once for a
        partition it does not lead (nothing here can confirm that the ISR holds the batch).
        """
        tp = (topic, partition)
        led = self._leading.get(tp)
        if led is None:
            return False
        if led.state.high_watermark >= required_offset:
            return True
        waiter = _IsrWaiter(required_offset, asyncio.get_running_loop().create_future())
        self._waiters.setdefault(tp, []).append(waiter)
        try:
            async with asyncio.timeout(timeout_s):
                return await waiter.future
        except TimeoutError:
            return False
        finally:
            waiters = self._waiters.get(tp)
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)
                if not waiters:
                    del self._waiters[tp]

    def _publish_high_watermark(self, tp: TopicPartition, led: LedPartition) -> None:
        """Make a moved high watermark visible: to consumers (the log, long polls) and acks=all waiters."""
        high_watermark = led.state.high_watermark
        led.plog.high_watermark = high_watermark
        waiters = self._waiters.pop(tp, [])
        remaining = []
        for waiter in waiters:
            if waiter.required_offset > high_watermark:
                remaining.append(waiter)
            elif not waiter.future.done():
                waiter.future.set_result(True)
        if remaining:
            self._waiters[tp] = remaining
        self.broker.notify_appended(*tp)

    # --- ISR changes ------------------------------------------------------------------------------------

    async def _check_isr_periodically(self) -> None:
        """Followers that fell behind leave the ISR even when nothing else happens (Kafka checks at half the
        lag limit)."""
        while True:
            await asyncio.sleep(self.lag_time_max_s / 2)
            now = self.broker.clock()
            for tp, led in list(self._leading.items()):
                self._maybe_change_isr(tp, led, now)

    def _maybe_change_isr(self, tp: TopicPartition, led: LedPartition, now: float) -> None:
        desired = led.state.desired_isr(now)
        if desired is None:
            return
        change = led.state.begin_isr_change(desired)
        log.info("proposing ISR change", topic=tp[0], partition=tp[1], epoch=led.state.leader_epoch,
                 isr=list(led.state.isr), proposed=list(desired))
        self._spawn(self._send_isr_change(tp, led, change))

    async def _send_isr_change(self, tp: TopicPartition, led: LedPartition, change: IsrChange) -> None:
        propose = self._propose_isr or self.broker.cluster_view.propose_isr
        try:
            answer = propose(tp[0], tp[1], list(change.isr), change.leader_epoch)
            if inspect.isawaitable(answer):
                answer = await answer
            committed = bool(answer)
        except Exception:
            log.exception("ISR change proposal failed", topic=tp[0], partition=tp[1])
            committed = False
        if self._leading.get(tp) is not led:
            return
        before = led.state.isr
        if led.state.finish_isr_change(change, committed, self.broker.clock()):
            self._publish_high_watermark(tp, led)
        self.broker.metrics.isr_changed(before, led.state.isr)
        log.info("ISR change committed" if committed else "ISR change refused", topic=tp[0], partition=tp[1],
                 isr=list(led.state.isr))

    # --- helpers ----------------------------------------------------------------------------------------

    def broker_credential(self) -> BrokerCredential:
        """What this broker logs in to other brokers with: its node id and current broker epoch, and the key
        from the cluster secret. ClientError while it is not a registered, unfenced broker (then no other
        broker takes its fetches or markers)."""
        key, epoch = self.broker.inter_broker_key, self.broker.cluster_view.broker_epoch(self.node_id)
        if key is None or epoch is None:
            raise ClientError(f"broker {self.node_id} is not a registered, unfenced broker of the cluster (yet): "
                              "other brokers do not take its requests")
        return BrokerCredential(self.node_id, epoch, key)

    def broker_address(self, node_id: int) -> tuple[str, int] | None:
        for live_id, host, port, _rack in self.broker.cluster_view.live_brokers():
            if live_id == node_id:
                return host, port
        return None

    def _spawn(self, coroutine: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
