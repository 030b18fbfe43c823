"""One broker node: the logs, the request server, the group coordinator and the background jobs.

With a ``cluster:`` block in its config the broker is one node of a cluster (:mod:`broker.cluster`): the
replicated metadata answers who the live brokers, the controller and the partition leaders are, topic
administration goes through the metadata quorum, and partitions are replicated between brokers.
Without it the broker is the whole cluster: it leads every partition and coordinates every group.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import structlog

from broker.cluster.keys import derive_key
from broker.cluster.metadata import ELECTION_NOT_NEEDED_MESSAGE, no_such_partition_message
from broker.cluster.view import ClusterView, ReplicatedView, SingleNodeView
from broker.config import BrokerConfig
from broker.connection_limits import ConnectionQuotas
from broker.dynamic_config import DynamicBrokerConfigs
from broker.errors import ErrorCode, KafkaError
from broker.framing import MemoryBudget
from broker.handlers.metadata_cache import MetadataCache
from broker.handlers.services import Services
from broker.log.background import settled, wait_durable, write_later
from broker.log.cleaner import CleanerSettings, Throttler
from broker.log.files import write_atomically
from broker.log.manager import LogManager, Topic
from broker.log.partition import RollPending
from broker.metrics import BrokerMetrics, MetricsServer
from broker.protocol.api import ApiKey
from broker.protocol.records import build_marker_batch
from broker.quotas import QUOTAS_FILE, Change, ClientQuotas, QuotaWindow
from broker.replica_manager import ReplicaManager as KafkaReplicaManager
from broker.security.acl import STORE_FILE as ACL_STORE_FILE
from broker.security.acl import Acl, AclStore, Authorizer
from broker.security.listeners import Listener
from broker.security.scram import STORE_FILE as SCRAM_STORE_FILE
from broker.security.scram import ScramCredential, ScramStore
from broker.server import KafkaServer
from broker.topics import INTERNAL_TOPICS

if TYPE_CHECKING:
    from broker.cluster.config import ClusterConfig
    from broker.cluster.node import ClusterNode, ClusterTopicAdmin
    from broker.cluster.replication import ReplicaManager
    from broker.groups.coordinator import GroupCoordinator
    from broker.txn.coordinator import TransactionCoordinator

log = structlog.get_logger("broker")

# In a cluster, how long the coordinators' writes (their logs, the transaction markers) wait for the ISR: Kafka's
# offsets.commit.timeout.ms default (a fixed wait here: that key is on the README's list of inert configs).
COORDINATOR_WRITE_TIMEOUT = 5.0


# What ApiVersions advertises: every version in each range is served (kafkajs ignores minimums, so no
# gaps). Reasons for the bounds are in ../shared/reference/kafka-protocol.md sections 2, 3 and 8: minimum
# 0 for the group APIs (librdkafka's feature gates), Produce from 3 (v2 batches only), Fetch up to 12
# (no topic ids on the wire), ListOffsets from 0 (Burrow 1.2.1).
ADVERTISED_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 9),
    ApiKey.FETCH: (0, 12),
    ApiKey.LIST_OFFSETS: (0, 7),
    ApiKey.METADATA: (0, 12),
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.JOIN_GROUP: (0, 7),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    # Kafka 4 serves v1+ (KIP-896); the codec keeps v0
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.WRITE_TXN_MARKERS: (1, 1),  # Kafka 4 removed v0 (KIP-896)
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.UNREGISTER_BROKER: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 5),  # Kafka 4 removed v0 (KIP-896)
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
}
# What only a cluster's brokers serve: a single node runs no Raft quorum to describe, and, like a Kafka broker
# without one (ZooKeeper mode), does not advertise DescribeQuorum.
CLUSTER_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.DESCRIBE_QUORUM: (0, 2),
    ApiKey.ADD_RAFT_VOTER: (0, 1),
    ApiKey.REMOVE_RAFT_VOTER: (0, 0),
}


class ProducerIdAllocator:
    """Hands out producer ids that are never reused, even across restarts (a block is reserved on disk).

    In a cluster every broker hands out ids, so each draws from its own range: ``base`` is the node id
    shifted past any count one broker can reach (2**40), and the ids of two brokers never meet.
    """

    BLOCK = 1000
    NODE_RANGE_BITS = 40

    def __init__(self, path: os.PathLike[str] | str, base: int = 0) -> None:
        self.path = os.fspath(path)
        self.base = base
        try:
            with open(self.path) as f:
                self._next = int(json.load(f)["next"])
        except (OSError, ValueError, KeyError):
            self._next = 0
        self._reserved_until = self._next
        self._reserving = asyncio.Lock()

    async def allocate(self) -> int:
        """The next id; reserving a new block writes and fsyncs the file on a thread, not the event loop."""
        async with self._reserving:  # allocations that need the block wait for it, none reserves twice
            if self._next >= self._reserved_until:
                until = self._next + self.BLOCK
                await asyncio.to_thread(write_atomically, self.path, json.dumps({"next": until}).encode())
                self._reserved_until = until
            pid = self._next
            self._next += 1
            return self.base + pid


class Broker:
    def __init__(self, config: BrokerConfig, *, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.clock = clock
        self.node_id = config.node_id
        self.host = config.advertised_host
        self.port = config.advertised_port
        self.cluster_id = ""
        self.directory_id = bytes(16)  # the data directory's id (KIP-858), read or made at start
        self.api_versions = dict(ADVERTISED_VERSIONS) if config.cluster is None else {**ADVERTISED_VERSIONS,
                                                                                       **CLUSTER_VERSIONS}
        self.logs: LogManager | None = None
        self.groups: GroupCoordinator | None = None
        self.transactions: TransactionCoordinator | None = None
        self.server: KafkaServer | None = None  # the first listener's
        self._serving_held = False  # listening, not accepting yet (a joining broker, until it caught up)
        self.servers: list[KafkaServer] = []
        self._listener_changes: asyncio.Task | None = None  # listeners being started and stopped (dynamic configs)
        # shared by all listeners: Kafka's broker-wide max.connections and queued.max.request.bytes
        self.connection_quotas = ConnectionQuotas(
            lambda key: self.config[key],
            lambda host: self.client_quotas.record_connection(host, int(time.monotonic() * 1000), self.quota_window()))
        self.request_memory = MemoryBudget(config["queued.max.request.bytes"])
        self.endpoints: dict[str, tuple[str, int]] = {}  # listener -> address clients of it are told
        self.producer_ids: ProducerIdAllocator | None = None
        self.cluster: ClusterNode | None = None  # in a cluster
        self.replica_manager: ReplicaManager | None = None  # the cluster's
        # the cluster as this broker sees it: this node alone, until it joins a cluster (start)
        self.cluster_view: ClusterView = SingleNodeView(
            self.node_id, lambda: self.config["rack"] or None, self.endpoints, lambda: (self.host, self.port),
            self._local_partition_count)
        self.topic_admin: LocalTopicAdmin | ClusterTopicAdmin = LocalTopicAdmin(self)
        self.dynamic_configs: DynamicBrokerConfigs | None = None
        self.client_quotas = ClientQuotas()  # AlterClientQuotas' quotas and the rates they hold clients to
        self.scram: ScramStore = ScramStore(None)  # SCRAM credentials (broker.security.scram), from start()
        self.authorizer: Authorizer | None = None  # ACLs (broker.security.acl), when authorizer.class.name is set
        # what the brokers of a cluster prove themselves to each other with (broker.security.broker_login)
        self.inter_broker_key: bytes | None = None
        self.services: Services  # what the handlers are given: made by start()
        self._waiters: dict[tuple[str, int], set[asyncio.Future]] = defaultdict(set)
        self._tasks: list[asyncio.Task] = []
        # writes refused by a full or failing disk since start, per log dir (see storage_failed)
        self.storage_errors: Counter[str] = Counter()
        # log dirs whose last write failed, until a write succeeds again (Kafka's offline log dirs)
        self.failed_log_dirs: set[str] = set()
        self.metrics = BrokerMetrics(self)
        self.metrics_server: MetricsServer | None = None

    # --- lifecycle ------------------------------------------------------------------------------------

    async def start(self) -> None:
        from broker.groups.coordinator import GroupCoordinator

        cluster_config = self._cluster_config()
        if self.config.metrics_address is not None:
            # first: an address it cannot have stops the broker before anything else started
            self.metrics_server = MetricsServer(self.metrics, *self.config.metrics_address)
            await self.metrics_server.start()
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        if cluster_config is not None and not self.config.cluster_id:
            # Every node of the cluster must report the same id: one derived from the voters' addresses (for a
            # broker joining a running cluster, those of the voters it joins: its peers).
            voters = sorted([*([] if cluster_config.raft_join else [cluster_config.raft_listen]),
                             *cluster_config.raft_peers.values()])
            self.config.cluster_id = uuid.uuid5(uuid.NAMESPACE_URL, "burrowpy:" + ",".join(voters)).hex[:22]
        self.cluster_id = self.config.ensure_cluster_id()
        self.directory_id = self.config.ensure_directory_id(self.cluster_id)
        # on disk: a single node's dynamic broker configs, or the last a cluster's metadata gave (they apply
        # from the start, before the metadata is replayed and replaces them)
        self.dynamic_configs = DynamicBrokerConfigs(self.config, persist=True)
        # in a cluster only the ISR moves a high watermark, also of a log replayed after a crash
        # one for every pass, as Kafka's: log.cleaner.io.max.bytes.per.second bounds the cleaner's I/O as a whole
        self._cleaner_throttler = Throttler(self.config["log.cleaner.io.max.bytes.per.second"])
        self.logs = LogManager(self.config.data_dir / "logs", self.config.topic_defaults(),
                               auto_high_watermark=cluster_config is None,
                               open_files=self.config["log.max.open.files"])
        # a cluster's brokers answer an unknown user with the same salt, as they would a known one
        self.scram = ScramStore(self.config.data_dir / SCRAM_STORE_FILE, None if cluster_config is None
                                else derive_key(cluster_config.secret, "scram-unknown-users"))
        if self.config.authorizer:
            self.authorizer = Authorizer(AclStore(self.config.data_dir / ACL_STORE_FILE), self.config.super_users,
                                         self.config.allow_everyone_if_no_acl_found)
            log.info("authorizer enabled", acls=len(self.authorizer.store), super_users=self.config.super_users,
                     allow_everyone_if_no_acl_found=self.config.allow_everyone_if_no_acl_found)
        if cluster_config is None and (self.config.data_dir / QUOTAS_FILE).exists():
            # a cluster's quotas are in its metadata
            self.client_quotas.replace(json.loads((self.config.data_dir / QUOTAS_FILE).read_text()))
        if self.config.scram_additions:
            self.scram.apply(self.config.scram_additions, [])
        self.dynamic_configs.on_change.append(lambda: self.logs.set_defaults(self.config.topic_defaults()))
        self.producer_ids = ProducerIdAllocator(
            self.config.data_dir / "producer-ids.json",
            base=0 if cluster_config is None else self.node_id << ProducerIdAllocator.NODE_RANGE_BITS)
        self.groups = GroupCoordinator(self)
        await self.groups.start(load_all_partitions=cluster_config is None)
        from broker.txn.coordinator import TransactionCoordinator

        self.transactions = TransactionCoordinator(self, clustered=cluster_config is not None)
        if cluster_config is not None:
            from broker.cluster.node import ClusterNode, ClusterTopicAdmin

            self.cluster = ClusterNode(self, cluster_config)
            self.inter_broker_key = derive_key(cluster_config.secret, "inter-broker")
            self.replica_manager = self.cluster.replicas
            self.cluster_view = ReplicatedView(self.cluster)
            self.topic_admin = ClusterTopicAdmin(self.cluster)
        self.services = Services(
            cluster=self.cluster_view, metadata_cache=MetadataCache(self.logs, self.cluster_view),
            replicas=KafkaReplicaManager(self.logs, self.cluster_view, self.replica_manager, self.append,
                                         self.wait_for_appends, self.clock),
            node_id=self.node_id, cluster_id=self.cluster_id, api_versions=self.api_versions, config=self.config,
            dynamic_configs=self.dynamic_configs, logs=self.logs, topic_admin=self.topic_admin, groups=self.groups,
            transactions=self.transactions, producer_ids=self.producer_ids, authorizer=self.authorizer,
            client_quotas=self.client_quotas, quota_window=self.quota_window, scram=self.scram,
            metrics=self.metrics, voters=self.cluster)
        # a broker joining a running cluster has no metadata until a voter is added for it and it caught up: as
        # Kafka's, it accepts no client before (one that bootstrapped from it would learn of no broker at all)
        self._serving_held = cluster_config is not None and cluster_config.raft_join
        if self.config.listeners:
            for listener in list(self.config.listeners):
                await self._start_listener(listener)
        else:
            self.servers.append(KafkaServer(self, self.config.host, self.config.port,
                                            self.config["socket.request.max.bytes"]))
            await self.servers[0].start(serve=not self._serving_held)
        self.server = self.servers[0]
        self.dynamic_configs.on_change.append(self._reconfigure_listeners)
        if self.config.port == 0:
            self.port = self.server.port
        if self.cluster is not None:
            await self.cluster.start()
            if self._serving_held:
                self._tasks.append(asyncio.create_task(self._serve_once_caught_up(self.cluster)))
        else:
            await self.transactions.start()
        self._every(lambda: self.config["transaction.abort.timed.out.transaction.cleanup.interval.ms"] / 1000,
                    self.transactions.abort_timed_out)
        self._every(lambda: self.config["transaction.remove.expired.transaction.cleanup.interval.ms"] / 1000,
                    self.transactions.expire_transactional_ids)
        self._every(self.config["log.retention.check.interval.ms"] / 1000, self._run_retention)
        if self.config["log.cleaner.enable"]:
            self._every(lambda: self.config["log.cleaner.backoff.ms"] / 1000, self._run_compaction)
        else:  # as Kafka 4.1+ warns (KIP-1148: from Kafka 5.0 the cleaner always runs)
            log.warning("log.cleaner.enable is false: compacted topics, __consumer_offsets among them, are not "
                        "compacted and grow; Kafka deprecates this setting and from 5.0 always runs its cleaner")
        self._every(lambda: self.config["producer.id.expiration.check.interval.ms"] / 1000, self._expire_producers)
        self._every(1.0, self._run_flush)  # flush.ms applies even when no appends arrive
        if self.cluster is not None:
            self._every(lambda: self.config["replica.high.watermark.checkpoint.interval.ms"] / 1000,
                        self._checkpoint_high_watermarks)
        if self.config.inert:
            log.warning("broker configs that have no effect in burrowpy", keys=sorted(self.config.inert))
        log.info("broker started", node_id=self.node_id, host=self.host, port=self.port,
                 data_dir=str(self.config.data_dir), cluster_id=self.cluster_id)

    async def _serve_once_caught_up(self, cluster: ClusterNode) -> None:
        if not cluster.caught_up:
            log.info("listening; accepting clients once a voter is added for this broker and it has caught up "
                     "with the cluster's metadata (kafka-metadata-quorum add-controller)", node_id=self.node_id)
        await cluster.wait_caught_up()
        self._serving_held = False
        for server in list(self.servers):
            await server.serve()
        log.info("caught up with the cluster's metadata: accepting clients", node_id=self.node_id)

    def _cluster_config(self) -> ClusterConfig | None:
        """The parsed ``cluster:`` block, or None on a single node (raises ConfigError naming file and key)."""
        if self.config.cluster is None:
            return None
        from broker.cluster.config import ClusterConfig

        return ClusterConfig.from_section(self.config.cluster, self.node_id)

    async def _start_listener(self, listener: Listener) -> None:
        server = KafkaServer(self, listener.host, listener.port, self.config["socket.request.max.bytes"],
                             ssl_context=self.config.ssl_contexts.get(listener.name), listener=listener.name,
                             sasl=self.config.sasl_settings.get(listener.name))
        await server.start(serve=not self._serving_held)
        self.servers.append(server)
        if listener.port == 0:
            # a listener on port 0 (tests) keeps the port it got, and is advertised with it
            self.config.listeners = [replace(x, port=server.port) if x.name == listener.name else x
                                     for x in self.config.listeners]
        self.endpoints[listener.name] = (listener.advertised_host, listener.advertised_port or server.port)

    def _reconfigure_listeners(self) -> None:
        """Each listener's TLS context and SASL settings as the dynamic configs left them (KIP-226); listeners
        added start serving and removed ones stop, closing their connections (Kafka's dynamic listeners)."""
        wanted = {listener.name: listener for listener in self.config.listeners}
        endpoints = dict(self.endpoints)
        removed = [server for server in self.servers if server.listener not in wanted]
        added = [listener for name, listener in wanted.items() if all(s.listener != name for s in self.servers)]
        for server in removed:
            self.servers.remove(server)
            self.endpoints.pop(server.listener, None)
        for server in self.servers:
            listener = wanted[server.listener]
            self.endpoints[server.listener] = (listener.advertised_host, listener.advertised_port or server.port)
            server.reconfigure(self.config.ssl_contexts.get(server.listener), self.config.sasl_settings.get(server.listener))
        if removed or added:
            previous = self._listener_changes
            self._listener_changes = asyncio.create_task(self._change_listeners(previous, removed, added))
        elif self.endpoints != endpoints and self.cluster is not None:
            self.cluster.endpoints_changed()

    async def _change_listeners(self, previous: asyncio.Task | None, removed: list[KafkaServer],
                                added: list[Listener]) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        for server in removed:
            await server.stop()
            log.info("listener removed", listener=server.listener, port=server.port)
        for listener in added:
            try:
                await self._start_listener(listener)
            except OSError as exc:
                # checked free when the change was accepted; taken since
                log.error("listener added but it cannot listen", listener=listener.name, host=listener.host,
                          port=listener.port, error=str(exc))
                continue
            log.info("listener added", listener=listener.name, port=self.endpoints[listener.name][1])
        self.server = self.servers[0]
        if self.cluster is not None:
            self.cluster.endpoints_changed()

    async def listeners_changed(self) -> None:
        """Returns once the listeners added or removed by the last dynamic config change serve or are closed."""
        if self._listener_changes is not None:
            await asyncio.gather(self._listener_changes, return_exceptions=True)

    async def stop(self) -> None:
        if self.cluster is not None:
            await self.cluster.stop()  # hands leaderships over while clients can still be answered
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.listeners_changed()
        for server in self.servers:
            await server.stop()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        if self.groups is not None:
            await self.groups.stop()
        for waiters in self._waiters.values():
            for fut in waiters:
                if not fut.done():
                    fut.cancel()
        if self.logs is not None:
            # every log's fsyncs (segment, producer snapshot, recovery point, directory): off the event loop,
            # which may serve others meanwhile (another broker of the process, the demo's monitor)
            await asyncio.to_thread(self.logs.close)
        log.info("broker stopped", node_id=self.node_id)

    def _every(self, seconds: float | Callable[[], float], job: Callable[[], Awaitable[None]]) -> None:
        """Run ``job`` every ``seconds`` (a callable: read before each wait, for a dynamic broker config)."""
        async def loop() -> None:
            while True:
                await asyncio.sleep(seconds() if callable(seconds) else seconds)
                try:
                    await job()
                except Exception:
                    log.exception("background job failed", job=job.__name__)

        self._tasks.append(asyncio.create_task(loop(), name=job.__name__))

    async def _run_retention(self) -> None:
        assert self.logs is not None
        # segments renamed away, rolls and the disk-usage check: on a thread, the event loop serves meanwhile
        await asyncio.to_thread(self.logs.run_retention, int(self.clock() * 1000))

    async def _expire_producers(self) -> None:
        assert self.logs is not None
        await asyncio.to_thread(self.logs.expire_producers, int(self.clock() * 1000),
                                self.config["producer.id.expiration.ms"])

    async def _run_flush(self) -> None:
        assert self.logs is not None
        self.logs.run_flush(int(self.clock() * 1000))  # only hands the fsyncs to the logs' background

    async def _checkpoint_high_watermarks(self) -> None:
        assert self.logs is not None
        await asyncio.to_thread(self.logs.checkpoint_high_watermarks)  # an fsync: off the event loop

    async def _run_compaction(self) -> None:
        assert self.logs is not None
        self._cleaner_throttler.bytes_per_second = self.config["log.cleaner.io.max.bytes.per.second"]
        settings = CleanerSettings(dedupe_buffer_size=self.config["log.cleaner.dedupe.buffer.size"],
                                   load_factor=self.config["log.cleaner.io.buffer.load.factor"],
                                   io_buffer_size=self.config["log.cleaner.io.buffer.size"],
                                   throttler=self._cleaner_throttler)
        await asyncio.to_thread(self.logs.run_compaction, None, settings)

    # --- topics ---------------------------------------------------------------------------------------

    def ensure_topic(self, name: str, partitions: int | None = None, configs: dict[str, Any] | None = None):
        """The topic, created (with broker defaults unless given) if it does not exist yet."""
        assert self.logs is not None
        topic = self.logs.topics.get(name)
        if topic is not None:
            return topic
        return self.create_topic(name, partitions or self.config["num.partitions"], configs or {})

    def create_topic(self, name: str, partitions: int, configs: dict[str, Any], *, replication_factor: int = 1):
        """Create the topic's logs on this node (a single node's topic creation; the cluster's is in
        :attr:`topic_admin`)."""
        assert self.logs is not None
        topic = self.logs.create_topic(name, partitions, configs)
        log.info("topic created", topic=name, partitions=partitions, configs=configs)
        return topic

    async def delete_topic(self, name: str) -> None:
        """Delete the topic's logs on this node (a single node's topic deletion): out of every table at once
        (:meth:`remove_topic`), its files on a thread; returns once they are renamed out of the way."""
        await asyncio.to_thread(self.delete_topic_files, self.remove_topic(name))

    def remove_topic(self, name: str) -> Topic:
        """The topic out of the logs' table, its metrics forgotten and the fetches waiting on its partitions woken
        (they find it gone): memory only, for the event loop. Its logs and directories are left to
        :meth:`delete_topic_files`, on a thread; a topic of the same name made meanwhile waits for them."""
        assert self.logs is not None
        topic = self.logs.remove_topic(name)
        self.metrics.forget_topic(name)
        for index in range(topic.partition_count):
            self.notify_appended(name, index)
        return topic

    def delete_topic_files(self, topic: Topic) -> None:
        """Blocking: the removed topic's logs closed, its directories renamed (:meth:`LogManager.delete_files`)."""
        assert self.logs is not None
        self.logs.delete_files(topic)
        log.info("topic deleted", topic=topic.name)

    def add_partitions(self, name: str, count: int) -> None:
        assert self.logs is not None
        self.logs.add_partitions(name, count)
        log.info("partitions added", topic=name, count=count)

    def _local_partition_count(self, topic: str) -> int | None:
        found = self.logs.topics.get(topic) if self.logs is not None else None
        return None if found is None else found.partition_count

    def partition_log(self, topic: str, partition: int):
        assert self.logs is not None
        plog = self.logs.get_log(topic, partition)
        if plog is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} is not on this broker")
        return plog

    # --- appends and long polls ---------------------------------------------------------------------------

    async def append(self, topic: str, partition: int, batch: bytes | memoryview, *, leader_epoch: int | None = None,
                     from_coordinator: bool = False):
        """Append one batch as the partition's leader and wake fetches waiting on it.

        NOT_LEADER_OR_FOLLOWER unless this broker acts as the leader (:meth:`ClusterView.leader_epoch`), in ``leader_epoch``
        when given (the one its caller checked), and the batch is stamped with that epoch. In a cluster the
        replica manager hears of the append (the high watermark follows the ISR), and the group coordinator's
        writes to `__consumer_offsets` return only once the ISR has them, as Kafka's coordinator writes with
        acks=all: a commit that was answered survives a failover.
        """
        plog = self.partition_log(topic, partition)
        try:
            while True:
                epoch = self.cluster_view.leader_epoch(topic, partition)
                if leader_epoch is not None and leader_epoch != epoch:
                    raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                     f"{topic}-{partition}: leader epoch {epoch} here, not {leader_epoch}")
                if topic in INTERNAL_TOPICS and self.replica_manager is not None:
                    # the coordinators write with acks=all, so as a producer's acks=all batch, their write is
                    # refused while the ISR is below the topic's min.insync.replicas (Kafka's check before it
                    # appends); the coordinators answer their clients COORDINATOR_NOT_AVAILABLE, and they retry
                    isr = self.cluster_view.partition_leader(topic, partition)[3]
                    if len(isr) < plog.config.min_insync_replicas:
                        raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                                         f"{topic}-{partition}: {len(isr)} in-sync replicas, min.insync.replicas "
                                         f"is {plog.config.min_insync_replicas}")
                try:
                    result = plog.append(batch, leader_epoch=epoch, now_ms=int(self.clock() * 1000),
                                         from_coordinator=from_coordinator, roll_off_thread=True)
                    break
                except RollPending as pending:
                    # the roll's files are made off the event loop; the batches waiting go in their order
                    await settled(pending.rolled)
        except KafkaError as exc:
            if exc.code == ErrorCode.KAFKA_STORAGE_ERROR:
                self.storage_failed(topic, partition, exc)
            raise
        if result.duplicate:
            return result
        self.storage_written()
        self.metrics.appended(topic, len(batch), result.last_offset - result.base_offset + 1)
        self.notify_appended(topic, partition)
        # flush.messages/flush.ms promise the answer comes after the fsync, which runs off the event loop
        await wait_durable(result.durable, f"{topic}-{partition}")
        if self.replica_manager is not None:
            self.replica_manager.on_leader_append(topic, partition)
            # the coordinators' writes (and transaction markers anywhere) are acknowledged by the ISR, as
            # Kafka's coordinators write with acks=all
            if (topic in INTERNAL_TOPICS or from_coordinator) and not await self.replica_manager.wait_for_isr(
                    topic, partition, result.last_offset + 1, COORDINATOR_WRITE_TIMEOUT):
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"{topic}-{partition}: the ISR did not confirm")
        return result

    def storage_failed(self, topic: str, partition: int, error: KafkaError) -> None:
        """A write the disk refused (full, or failing): the client gets KAFKA_STORAGE_ERROR and retries, and
        nothing was appended; the operator gets an error naming the log dir, with the count so far."""
        log_dir = self.logs.data_dir if self.logs is not None else str(self.config.data_dir)
        self.storage_errors[log_dir] += 1
        self.failed_log_dirs.add(log_dir)
        log.error("log dir write failed", log_dir=log_dir, topic=topic, partition=partition, error=error.message,
                  storage_errors=self.storage_errors[log_dir])

    def storage_written(self) -> None:
        """A write to the log dir succeeded (a leader's append or a follower's): it takes writes again."""
        if self.failed_log_dirs:
            self.failed_log_dirs.clear()

    async def append_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                            committed: bool, coordinator_epoch: int = 0):
        """Write a transaction's COMMIT or ABORT marker to one of its partitions (as its leader)."""
        batch = build_marker_batch(producer_id, producer_epoch, committed, coordinator_epoch,
                                   int(self.clock() * 1000))
        return await self.append(topic, partition, batch, from_coordinator=True)

    def notify_appended(self, topic: str, partition: int) -> None:
        waiters = self._waiters.pop((topic, partition), None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    async def wait_for_appends(self, partitions: list[tuple[str, int]], timeout: float) -> None:
        """Return when any of the partitions gets new data, or after ``timeout`` seconds."""
        if timeout <= 0:
            return
        fut = asyncio.get_running_loop().create_future()
        for key in partitions:
            self._waiters[key].add(fut)
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await fut
        finally:
            for key in partitions:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        self._waiters.pop(key, None)

    def quota_window(self) -> QuotaWindow:
        """Kafka's client quota window: quota.window.num samples of quota.window.size.seconds."""
        return QuotaWindow(self.config["quota.window.num"], self.config["quota.window.size.seconds"] * 1000)


class LocalTopicAdmin:
    """Topic administration on a single node: straight to the local logs. A cluster uses
    :class:`broker.cluster.node.ClusterTopicAdmin`, with the same methods."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def catch_up(self) -> None:
        """The local logs are the whole truth on a single node: nothing to wait for."""

    async def create_topic(self, name: str, partitions: int, configs: dict[str, Any], replication_factor: int,
                           assignments: list[list[int]] | None = None) -> bytes:
        # on a thread: creating the partitions' directories and files waits on the file system's journal, which
        # the metadata writer's fsyncs keep busy; the topic file is durable before the answer
        topic = await asyncio.to_thread(self.broker.create_topic, name, partitions, configs,
                                        replication_factor=replication_factor)
        await wait_durable(topic.saved, f"topic {name}")
        return topic.topic_id

    async def delete_topic(self, name: str) -> None:
        await self.broker.delete_topic(name)

    async def create_partitions(self, name: str, total: int, assignments: list[list[int]] | None = None) -> None:
        await asyncio.to_thread(self.broker.add_partitions, name, total)
        assert self.broker.logs is not None
        await wait_durable(self.broker.logs.topic(name).saved, f"topic {name}")

    async def alter_configs(self, name: str, updates: dict[str, Any], *, replace: bool,
                            validate_only: bool) -> None:
        assert self.broker.logs is not None
        self.broker.logs.alter_topic_configs(name, updates, replace=replace, validate_only=validate_only)
        await wait_durable(self.broker.logs.topic(name).saved, f"topic {name}")

    async def alter_broker_configs(self, scope: str, layer: dict[str, str]) -> None:
        """Make ``layer`` the dynamic broker configs of ``scope`` ("" for the cluster default)."""
        assert self.broker.dynamic_configs is not None
        self.broker.dynamic_configs.update(scope, layer)
        await wait_durable(self.broker.dynamic_configs.saved, "dynamic broker configs")
        await self.broker.listeners_changed()

    async def alter_client_quotas(self, changes: list[Change]) -> None:
        """Apply AlterClientQuotas' changes, kept in the data dir before the answer."""
        quotas = self.broker.client_quotas
        quotas.apply(changes)
        await wait_durable(write_later(os.fspath(self.broker.config.data_dir / QUOTAS_FILE),
                                       json.dumps(quotas.to_json(), sort_keys=True).encode()), "client quotas")

    async def change_acls(self, created: list[Acl], deleted: list[Acl]) -> None:
        store = self.broker.authorizer.store
        if deleted:
            store.remove(deleted)
        if created:
            store.add(created)
        await wait_durable(store.saved, "ACLs")

    async def alter_scram(self, upserts: list[tuple[str, str, ScramCredential]],
                          deletions: list[tuple[str, str]]) -> None:
        self.broker.scram.apply(upserts, deletions)
        await wait_durable(self.broker.scram.saved, "SCRAM credentials")

    async def elect_leaders(self, preferred: bool, partitions: list[tuple[str, int]] | None,
                            timeout: float) -> list[tuple[str, int, int, str | None]]:
        """A single node leads every partition it has, its only (so preferred) replica: no election is ever
        needed (and for every partition, none is answered)."""
        logs = self.broker.logs
        assert logs is not None
        results: list[tuple[str, int, int, str | None]] = []
        for topic, index in partitions or ():
            found = logs.topics.get(topic)
            if found is None or not 0 <= index < found.partition_count:
                results.append((topic, index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.value,
                                no_such_partition_message(topic, index, found is not None)))
            else:
                results.append((topic, index, ErrorCode.ELECTION_NOT_NEEDED.value, ELECTION_NOT_NEEDED_MESSAGE))
        return results
