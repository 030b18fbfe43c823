"""One broker as a node of a cluster: the metadata quorum, gossip, the controller, replication, and what the
metadata means for this broker's own logs.

:class:`ClusterNode` is the replicated metadata's listener. After every applied command it reconciles
this broker with the metadata:

* local topics: every topic of the cluster exists in the local log manager under its cluster-wide id
  (partitions this broker does not replicate stay empty; the handlers see the whole cluster's topic
  list that way), with the cluster's config overrides; a topic deleted (or deleted and created again
  under a new id) is deleted here;
* replica roles: for each partition with this broker among its replicas, the replica manager is told to
  lead (with the epoch, replicas and ISR) or to follow the current leader; an offline partition, or one
  no longer assigned here, is stopped;
* group coordination: the groups of a `__consumer_offsets` partition are loaded when this broker
  becomes its leader and unloaded when it stops leading it;
* security: the cluster's ACLs and SCRAM credentials become this broker's (kept in its data dir too, so
  that a restarted broker authenticates and authorizes with the last it knew until it has caught up).

Nothing is reconciled before the metadata has caught up with the quorum (a restarted broker replays an
old journal first), so a stale view never deletes or moves anything.

It also answers the broker's cluster questions (live brokers, controller, partition leaders) from the
metadata, routes topic administration and ISR changes into the quorum, and on a clean stop hands its
leaderships over before it goes (gossip tells the controller it left).
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from broker.cluster.config import ClusterConfig
from broker.cluster.controller import BrokerSighting, Controller, OffsetsTopicSpec
from broker.cluster.membership import ALIVE, LEFT, GossipNode, MemberEvent
from broker.cluster.metadata import NO_LEADER, ClusterMetadata
from broker.cluster.raft import ProposalFailed, RaftNode
from broker.cluster.reconcile import (
    Role,
    broker_addresses,
    coordination_change,
    endpoint_tuples,
    is_leader,
    role_changes,
    sighting,
    topic_changes,
)
from broker.cluster.replication import ReplicaHost, ReplicaManager
from broker.cluster.shared_call import SharedCall
from broker.errors import ErrorCode, KafkaError
from broker.log.background import wait_durable
from broker.log.config import format_value, parse_configs
from broker.quotas import Change, ClientQuotas
from broker.security.acl import Acl, Authorizer
from broker.security.scram import ScramCredential, ScramStore
from broker.topics import OFFSETS_TOPIC, offsets_topic_configs

if TYPE_CHECKING:
    from broker.log.manager import LogManager, Topic

# how many partitions a new topic's reconciling changes the role of between two turns of the event loop
ROLE_CHANGES_AT_ONCE = 50

log = structlog.get_logger("broker.cluster")

ADMIN_TIMEOUT = 15.0
CATCH_UP_TIMEOUT = 5.0


class PartitionCoordinator(Protocol):
    """A coordinator whose state lives in an internal topic's partitions (groups, transactions): it takes over
    and hands over a partition as its leadership comes and goes."""

    async def load_partition(self, partition: int) -> None: ...

    def unload_partition(self, partition: int) -> None: ...


class ClusterHost(ReplicaHost, Protocol):
    """What the cluster node uses of its broker besides what replication does: the broker builds its node and
    hands itself over as this, so that the cluster never imports the broker (issue 32: no import cycle)."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def endpoints(self) -> dict[str, tuple[str, int]]: ...
    @property
    def logs(self) -> LogManager | None: ...
    @property
    def groups(self) -> PartitionCoordinator | None: ...
    @property
    def transactions(self) -> PartitionCoordinator | None: ...
    @property
    def authorizer(self) -> Authorizer | None: ...
    @property
    def client_quotas(self) -> ClientQuotas: ...
    @property
    def scram(self) -> ScramStore: ...

    def remove_topic(self, name: str) -> Topic: ...
    def delete_topic_files(self, topic: Topic) -> None: ...


class ClusterNode:
    def __init__(self, broker: ClusterHost, config: ClusterConfig) -> None:
        self.broker = broker
        self.config = config
        self.node_id = broker.node_id
        self.raft = RaftNode(self.node_id, config.raft_listen, config.raft_peers, config.secret,
                             broker.config.data_dir / "raft", ClusterMetadata, ClusterMetadata.from_snapshot,
                             timing=config.raft_timing, listener=self, tls=self._raft_tls(), join=config.raft_join)
        self.replicas = ReplicaManager(broker)
        self.gossip: GossipNode | None = None
        self._ready = asyncio.Event()  # set once Raft has caught up (on_ready)
        self.controller = Controller(
            self.raft, self.sightings,
            OffsetsTopicSpec(OFFSETS_TOPIC, broker.config["offsets.topic.num.partitions"],
                             broker.config["offsets.topic.replication.factor"], offsets_topic_configs(broker.config)),
            preferred_leader_election_interval=(config.preferred_leader_election_interval
                                                or broker.config["leader.imbalance.check.interval.seconds"]),
            unknown_broker_grace=config.unknown_broker_grace,
            unclean_election_enabled=self.unclean_election_enabled,
            auto_leader_rebalance=broker.config["auto.leader.rebalance.enable"],
            leader_imbalance_percentage=broker.config["leader.imbalance.per.broker.percentage"])
        self._roles: dict[tuple[str, int], Role] = {}
        self._configs_applied: dict[str, dict[str, str]] = {}
        self._security_applied: tuple[list, dict] | None = None  # the metadata's ACLs and SCRAM, as last applied
        self._group_locks: dict[tuple[str, int], asyncio.Lock] = {}
        self._group_tasks: set[asyncio.Task] = set()
        # topic name -> the creation or growth of its local logs under way, off the event loop
        self._local_changes: dict[str, asyncio.Task[None]] = {}
        # concurrent catch-ups share a barrier (one proposed after each of them arrived)
        self._barrier = SharedCall(self._commit_barrier)
        self._leaving = False
        self._fenced = asyncio.Event()
        self._reconcile_due = False  # a command applied whose reconciling waits for the commands queued after it

    def _raft_tls(self) -> tuple[Any, Any] | None:
        """Raft goes inside TLS when brokers reach each other over TLS (:mod:`broker.cluster.raft_tls`)."""
        broker_config = self.broker.config
        security = broker_config.inter_broker_security
        if security is None or security.ssl_context is None:
            return None
        return broker_config.ssl_contexts[broker_config.inter_broker_listener], security.ssl_context

    def unclean_election_enabled(self, topic: str) -> bool:
        local = self.broker.logs.topics.get(topic)
        return local is not None and local.config.unclean_leader_election_enable

    @property
    def metadata(self) -> ClusterMetadata:
        state = self.raft.state
        assert isinstance(state, ClusterMetadata)
        return state

    # --- lifecycle ---------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the cluster; the broker's Kafka listener must already be up (gossip advertises it)."""
        broker = self.broker
        await self.replicas.start()
        await self.raft.start()
        self.gossip = GossipNode(
            str(self.node_id), self.config.gossip_listen, self.config.secret,
            advertise=self.config.gossip_advertise, seeds=self.config.gossip_seeds, config=self.config.swim,
            on_event=self._on_member_event, meta=self._gossip_meta())
        await self.gossip.start()
        await self.controller.start()
        self.reconcile()
        if broker.config.scram_additions:
            self._spawn(self._share_scram_additions())

    def _gossip_meta(self) -> dict[str, Any]:
        """What the other brokers learn of this one through gossip: its addresses, which the controller
        registers in the metadata."""
        host, port = self.inter_broker_address
        return {"node_id": self.node_id, "host": host, "port": port, "rack": self.broker.config["rack"] or None,
                "endpoints": {name: list(address) for name, address in self.broker.endpoints.items()},
                "joining": self.joining}

    @property
    def joining(self) -> bool:
        """Joining a running cluster (``cluster.raft.join``) and not caught up with its metadata yet: until a
        voter is added for it, it has no metadata to serve or replicate by."""
        return self.config.raft_join and not self.raft.ready

    def endpoints_changed(self) -> None:
        """The broker's listeners changed at run time: its registration follows (the controller, woken here or
        by gossip, registers the new endpoints, which Metadata then tells clients)."""
        if self.gossip is not None:
            self.gossip.set_meta(self._gossip_meta())
        self.controller.wake()

    @property
    def inter_broker_address(self) -> tuple[str, int]:
        """Where the other brokers reach this one (replication, markers): its inter-broker listener."""
        broker = self.broker
        return broker.endpoints.get(broker.config.inter_broker_listener, (broker.host, broker.port))

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.create_task(coroutine)
        self._group_tasks.add(task)
        task.add_done_callback(self._group_tasks.discard)

    async def _share_scram_additions(self) -> None:
        """``--add-scram`` credentials go into the cluster's metadata (as kafka-storage's go into its bootstrap
        metadata), unless the metadata already has one for that user and mechanism."""
        await self.wait_caught_up()
        missing = [(user, mechanism, credential) for user, mechanism, credential in self.broker.config.scram_additions
                   if mechanism not in self.metadata.scram.get(user, {})]
        if missing:
            try:
                await ClusterTopicAdmin(self).alter_scram(missing, [])
            except KafkaError as exc:
                log.warning("SCRAM credentials from --add-scram not shared with the cluster", error=exc.message)

    async def stop(self) -> None:
        """Controlled shutdown (controlled.shutdown.enable): leave the gossip group, wait until the controller
        has fenced this broker (its leaderships moved to in-sync followers on the other live brokers, it left
        every ISR; a partition it is the last ISR member of goes offline until it returns), then stop. As Kafka 3's
        controlled shutdown it tries controlled.shutdown.max.retries times, each time waking the controller and
        waiting controlled.shutdown.retry.backoff.ms, and stops all the same after the last. Without it the broker
        stops at once and its leaderships move when the controller learns it left."""
        self._leaving = True
        if self.gossip is not None:
            await self.gossip.stop(leave=True)
        if self.broker.config["controlled.shutdown.enable"] and self.raft.leader_id is None:
            # between two Raft leaders (the last one, the controller, may have just stopped, its own fence taken to
            # this broker already): the next one is waited for, two elections' time at most; without a quorum
            # none comes and the broker stops at once after that
            await self.raft.leader_elected(2 * self.raft.timing.election_timeout_max)
        others = [b for b in self.metadata.live_broker_ids() if b != self.node_id]
        if (self.broker.config["controlled.shutdown.enable"] and self.raft.leader_id is not None and others
                and self.node_id in self.metadata.brokers):
            began = asyncio.get_running_loop().time()
            attempts = self.broker.config["controlled.shutdown.max.retries"]
            backoff_ms = self.broker.config["controlled.shutdown.retry.backoff.ms"]
            if await self._handed_over(attempts, backoff_ms / 1000):
                if self.raft.is_leader:
                    # bounded by an election's time: when the whole cluster stops at once, no quorum commits it
                    await self._commit_to_followers(min(backoff_ms / 1000, self.raft.timing.election_timeout_max))
                log.info("controlled shutdown: leaderships handed over", node_id=self.node_id,
                         seconds=round(asyncio.get_running_loop().time() - began, 3))
            else:
                log.warning("controlled shutdown: the controller did not fence this broker in time; stopping "
                            "with the leaderships it still holds", node_id=self.node_id, attempts=attempts,
                            backoff_ms=backoff_ms)
        else:
            self.controller.wake()
        await self.controller.stop()
        await self.replicas.stop()
        await self._barrier.close()
        await self.raft.stop()
        # a topic's files being made on a thread are finished before the logs close
        await asyncio.gather(*self._local_changes.values(), return_exceptions=True)
        for task in list(self._group_tasks):
            task.cancel()
        await asyncio.gather(*self._group_tasks, return_exceptions=True)

    async def catch_up(self) -> None:
        """Return once this broker has applied every metadata change the quorum committed before the call.
        A barrier command is committed through the leader; its answer comes after this broker applied it and
        all before it. Callers waiting at the same time share one barrier (each one proposed after they
        arrived). Without a quorum the local view is all there is (the wait gives up after
        CATCH_UP_TIMEOUT). The local logs of the topics it created or grew are made by then too."""
        await self._barrier()
        for name in list(self._local_changes):
            await self.local_topic_settled(name)

    async def _commit_barrier(self) -> None:
        try:
            await self.raft.propose({"op": "barrier"}, CATCH_UP_TIMEOUT)
        except ProposalFailed as exc:
            log.info("metadata catch-up failed; answering from this broker's view", error=str(exc))

    async def _handed_over(self, attempts: int, backoff_s: float) -> bool:
        for _ in range(attempts):
            self.controller.wake()
            try:
                async with asyncio.timeout(backoff_s):
                    await self._wait_fenced()
                return True
            except TimeoutError:
                continue
        return False

    async def _commit_to_followers(self, timeout: float) -> None:
        """The controller (the Raft leader) is stopping, its fence committed and applied here; but a follower learns
        of a commit only from the leader's next append, which pysyncobj sends up to a heartbeat later and a leader
        stopping at once may never send. The other brokers then named this one the leader of its partitions until
        a new Raft leader, an election timeout later, committed an entry of its own term (the rolling restart's
        hand-over check failed so, 0.5 s after the exit). A barrier appended now, after the fence's commit, carries
        that commit to each follower that acknowledges it: this waits (within ``timeout`` s) for every follower
        connected to have acknowledged it."""
        deadline = asyncio.get_running_loop().time() + timeout
        try:
            await self.raft.propose({"op": "barrier"}, timeout)
            told = await self.raft.followers_have_log(max(deadline - asyncio.get_running_loop().time(), 0.0))
        except ProposalFailed as exc:
            told, reason = False, str(exc)
        else:
            reason = "not acknowledged in time"
        if not told:
            log.info("controlled shutdown: the followers may not have the fence's commit yet", node_id=self.node_id,
                     reason=reason)

    async def _wait_fenced(self) -> None:
        while self.metadata.broker_epoch(self.node_id) is not None:  # fenced, or unregistered
            self._fenced.clear()
            await self._fenced.wait()

    # --- what the broker asks ----------------------------------------------------------------------------

    def live_brokers(self, listener: str | None = None) -> list[tuple[int, str, int, str | None]]:
        """The live brokers at their inter-broker address, or at ``listener``'s (a client is told the
        addresses of the listener it came in on; brokers without that listener are left out, as in Kafka)."""
        return broker_addresses(self.metadata.live_brokers(), listener)

    def controller_id(self) -> int:
        return self.raft.leader_id if self.raft.leader_id is not None else -1

    @property
    def caught_up(self) -> bool:
        """Whether the metadata here is the quorum's, as of some moment since this broker started (until then
        it is a replayed journal, maybe far behind)."""
        return self.raft.ready

    def partition_leader(self, topic: str, partition: int) -> tuple[int, int, list[int], list[int]]:
        state = self.metadata.partition(topic, partition)
        if state is None:
            return NO_LEADER, -1, [], []
        return state.leader, state.leader_epoch, list(state.replicas), list(state.isr)

    async def propose_isr(self, topic: str, partition: int, isr: list[int], leader_epoch: int) -> bool:
        """A partition leader's ISR change (replication calls this); True once the quorum committed it."""
        command = {"op": "change_isr", "topic": topic, "partition": partition, "leader": self.node_id,
                   "leader_epoch": leader_epoch, "isr": list(isr)}
        try:
            result = await self.raft.propose(command, ADMIN_TIMEOUT)
        except ProposalFailed as exc:
            log.warning("ISR change not committed", topic=topic, partition=partition, error=str(exc))
            return False
        if result["error_code"]:
            log.info("ISR change refused", topic=topic, partition=partition, error=result["error_message"])
        return result["error_code"] == 0

    async def propose(self, command: dict[str, Any], *, retry: bool, timeout: float = ADMIN_TIMEOUT) -> dict[str, Any]:
        """Commit an admin command within ``timeout`` seconds; KafkaError with the state machine's error if it
        was refused. With ``retry`` the command (which must be idempotent) is proposed again after an unknown
        outcome."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            try:
                result = await self.raft.propose(command, max(remaining, 0.1))
                break
            except ProposalFailed as exc:
                if not retry or remaining <= 0.5:
                    raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                                     f"the metadata quorum did not commit the change: {exc}") from None
                await asyncio.sleep(0.2)  # a leader election is probably under way
        if result["error_code"]:
            raise KafkaError(ErrorCode(result["error_code"]), result["error_message"] or "")
        return result

    # --- gossip ------------------------------------------------------------------------------------------

    def sightings(self) -> dict[int, BrokerSighting]:
        seen: dict[int, BrokerSighting] = {}
        if self.gossip is not None:
            for member in self.gossip.members():
                seen_member = sighting(member.meta, member.state)
                if seen_member is not None:
                    seen[seen_member.node_id] = seen_member
        broker = self.broker
        host, port = self.inter_broker_address
        seen[self.node_id] = BrokerSighting(self.node_id, host, port, broker.config["rack"] or None,
                                            LEFT if self._leaving else ALIVE, endpoint_tuples(broker.endpoints),
                                            joining=self.joining)
        return seen

    def _on_member_event(self, event: MemberEvent) -> None:
        self.controller.wake()

    # --- the metadata's listener (called on the event loop) ------------------------------------------------

    def on_applied(self, command: dict[str, Any], result: dict[str, Any]) -> None:
        op = command["op"]
        if op == "set_raft_voter":
            self.raft.learn_address(int(command["node_id"]), str(command["address"]))
        # a barrier and a voter's address change nothing this broker reconciles or the controller acts on
        quiet = op in ("barrier", "set_raft_voter")
        if not quiet and result["error_code"] == 0:
            self._reconcile_due = True
        if self._reconcile_due and not self.raft.applying_more:
            if op == "barrier":
                # A barrier changes nothing and reconciles nothing itself; the run of commands it ends, whose
                # reconciling waited for the last of them, is reconciled right after it (before anyone awaiting
                # a command of that run resumes).
                asyncio.get_running_loop().call_soon(self._reconcile_if_due)
            else:
                self._reconcile_if_due()
        if not quiet:
            self.controller.wake()

    def _reconcile_if_due(self) -> None:
        if self._reconcile_due:
            self._reconcile_due = False
            self.reconcile()

    def on_restored(self) -> None:
        for node_id, (address, _directory_id) in self.metadata.raft_voters.items():
            self.raft.learn_address(node_id, address)
        self.reconcile()
        self.controller.wake()

    async def wait_caught_up(self) -> None:
        """Return once this broker's metadata is the quorum's (:attr:`caught_up`)."""
        await self._ready.wait()

    def on_ready(self) -> None:
        self._ready.set()
        if self.config.raft_join and self.gossip is not None:
            self.gossip.set_meta(self._gossip_meta())  # caught up: the controller may register it now
        self.reconcile()
        self.controller.wake()

    def on_leader_changed(self, leader_id: int | None) -> None:
        self.controller.wake()

    # --- reconciling this broker with the metadata ---------------------------------------------------------

    def reconcile(self, max_role_changes: int | None = None) -> bool:
        """Bring this broker to the metadata; at most ``max_role_changes`` partitions change role (all without
        it). Whether role changes remain."""
        if not self.raft.ready:
            return False  # an old view (a journal being replayed) must not delete or move anything
        metadata = self.metadata
        if metadata.broker_epoch(self.node_id) is None:  # fenced, or unregistered
            self._fenced.set()
        dynamic = self.broker.dynamic_configs
        for scope in dynamic.layers:  # before the topics, so that a new topic gets the current defaults
            dynamic.update(scope, metadata.broker_configs.get(scope, {}))
        self._reconcile_security(metadata)
        self.broker.client_quotas.replace(metadata.client_quotas)
        self._reconcile_topics(metadata)
        logs = self.broker.logs
        # a partition whose local log is still being made takes its role once it is (the change reconciles)
        changes = role_changes(self.node_id, metadata, self._roles,
                               lambda name, index: logs.get_log(name, index) is not None)
        changed = changes[:max_role_changes]
        for tp, role in changed:
            self._change_role(tp, role)
        if changed:
            # one line for them all: a line per partition cost more than the change itself
            kinds: dict[str, list[str]] = {"leader": [], "follower": [], "stopped": []}
            for (name, index), role in changed:
                kinds[role[0] if role else "stopped"].append(f"{name}-{index}")
            log.info("partition roles changed", **kinds)
        return max_role_changes is not None and len(changes) > max_role_changes

    def _reconcile_security(self, metadata: ClusterMetadata) -> None:
        if self._security_applied == (metadata.acls, metadata.scram):
            return
        self._security_applied = (copy.deepcopy(metadata.acls), copy.deepcopy(metadata.scram))
        if self.broker.authorizer is not None:
            self.broker.authorizer.store.replace(Acl(*entry) for entry in metadata.acls)
        self.broker.scram.replace({
            user: {mechanism: ScramCredential(bytes.fromhex(salt), bytes.fromhex(stored), bytes.fromhex(server),
                                              iterations)
                   for mechanism, (salt, stored, server, iterations) in mechanisms.items()}
            for user, mechanisms in metadata.scram.items()})

    def _reconcile_topics(self, metadata: ClusterMetadata) -> None:
        logs = self.broker.logs
        busy = self._local_changes  # topics whose directories are being made: reconciled again when done
        deletions, changes = topic_changes(
            {name: (local.topic_id, local.partition_count) for name, local in logs.topics.items() if name not in busy},
            {name: topic for name, topic in metadata.topics.items() if name not in busy}, self._configs_applied)
        for name, partitions in deletions:
            self._delete_local_topic(name, partitions)
        for change in changes:
            topic = change.topic
            if topic.name in self._local_changes:
                continue  # deleted just now (created again under a new id): made once its old files are renamed
            try:
                if change.create:
                    self._change_local_topic(topic.name, partial(logs.create_topic, topic.name, len(topic.partitions),
                                                                 topic.configs, topic_id=topic.topic_id),
                                             "topic created from metadata", len(topic.partitions),
                                             configs=dict(topic.configs))
                elif change.partitions is not None:  # its configs follow when the partitions are made
                    self._change_local_topic(topic.name, partial(logs.add_partitions, topic.name, change.partitions),
                                             "partitions added from metadata", change.partitions)
                elif change.configs is not None:
                    logs.alter_topic_configs(topic.name, change.configs, replace=True)
                    self._configs_applied[topic.name] = change.configs
            except KafkaError as exc:
                log.error("cannot apply topic metadata locally", topic=topic.name, error=exc.message)

    def _change_local_topic(self, name: str, change: Callable[[], object], event: str, partitions: int, *,
                            configs: dict[str, str] | None = None) -> None:
        """Make a topic's (or its new partitions') directories and files on a thread: each waits on the file
        system's journal, which the metadata writer's fsyncs keep busy, and on the event loop every connection
        of the broker waited with it. The change is done once the topic file is on disk too. ``configs``: the
        overrides a new topic was created with."""
        self._local_changes[name] = asyncio.create_task(
            self._apply_local_change(name, change, event, partitions, configs), name=f"local-topic-{name}")

    async def _apply_local_change(self, name: str, change: Callable[[], object], event: str, partitions: int,
                                  configs: dict[str, str] | None) -> None:
        logs = self.broker.logs
        try:
            await asyncio.to_thread(change)
            await wait_durable(logs.topic(name).saved, f"topic {name}")
        except (KafkaError, OSError) as exc:
            # tried again at the next metadata change, as a change that failed on the event loop was
            del self._local_changes[name]
            log.error("cannot apply topic metadata locally", topic=name, error=str(exc))
            return
        if configs is not None:
            self._configs_applied[name] = configs
        log.info(event, topic=name, partitions=partitions)
        # The roles of its partitions: a slice of partitions at a time, the loop serving other connections
        # between slices (a topic of 400 partitions taking its roles at once held every connection of the
        # broker for about a second). The change is done once all are, and then whatever the metadata changed
        # of the topic meanwhile is reconciled.
        while self.reconcile(ROLE_CHANGES_AT_ONCE):
            await asyncio.sleep(0)
        del self._local_changes[name]
        self.reconcile()

    async def local_topic_settled(self, name: str) -> None:
        """Return once the local logs of ``name`` are as the metadata applied so far says (created or grown,
        on disk)."""
        while (change := self._local_changes.get(name)) is not None:
            await asyncio.shield(change)

    def _delete_local_topic(self, name: str, partitions: int) -> None:
        """The topic out of the local tables at once, its files on a thread (a log closed and a directory renamed
        per partition, which for a topic of 1,000 partitions held every connection of the broker on the event
        loop); the name is busy until they are renamed, then reconciled again (created anew if the metadata has
        it under a new id)."""
        for index in range(partitions):
            if (name, index) in self._roles:
                self._change_role((name, index), None)
        topic = self.broker.remove_topic(name)
        self._configs_applied.pop(name, None)
        self._local_changes[name] = asyncio.create_task(self._delete_local_files(topic), name=f"local-topic-{name}")

    async def _delete_local_files(self, topic: Topic) -> None:
        try:
            await asyncio.to_thread(self.broker.delete_topic_files, topic)
        except (KafkaError, OSError) as exc:
            # the next creation of the name, or the logs' close, tries the renames again
            log.error("cannot delete a topic's files", topic=topic.name, error=str(exc))
        del self._local_changes[topic.name]
        self.reconcile()

    def _change_role(self, tp: tuple[str, int], role: Role | None) -> None:
        topic, partition = tp
        load = coordination_change(topic, self._roles.get(tp), role)
        if role is None:
            self._roles.pop(tp, None)
            self.replicas.stop_replica(topic, partition)
        elif is_leader(role):
            self._roles[tp] = role
            self.replicas.become_leader(topic, partition, role[1], list(role[2]), list(role[3]))
        else:
            self._roles[tp] = role
            self.replicas.become_follower(topic, partition, role[1], role[2])
        if load is not None:
            self._spawn_group_change(topic, partition, load=load)

    def _spawn_group_change(self, topic: str, partition: int, *, load: bool) -> None:
        task = asyncio.create_task(self._change_group_partition(topic, partition, load),
                                   name=f"{topic}-{'load' if load else 'unload'}-{partition}")
        self._group_tasks.add(task)
        task.add_done_callback(self._group_tasks.discard)

    async def _change_group_partition(self, topic: str, partition: int, load: bool) -> None:
        """Loads and unloads of one coordinator partition (groups or transactions) run in the order they were
        decided, never interleaved."""
        lock = self._group_locks.setdefault((topic, partition), asyncio.Lock())
        coordinator = self.broker.groups if topic == OFFSETS_TOPIC else self.broker.transactions
        async with lock:
            try:
                if load:
                    await coordinator.load_partition(partition)
                    log.info("coordination taken over", topic=topic, partition=partition)
                else:
                    coordinator.unload_partition(partition)
                    log.info("coordination handed over", topic=topic, partition=partition)
            except Exception:
                log.exception("coordinator partition change failed", topic=topic, partition=partition, load=load)


class ClusterTopicAdmin:
    """Topic administration through the metadata quorum, from any broker. Each change is checked against
    the local logs first (names, configs), committed by Raft, and applied to the local logs by the time
    the call returns."""

    def __init__(self, node: ClusterNode) -> None:
        self.node = node

    async def catch_up(self) -> None:
        """Return once this broker has applied every metadata change the quorum committed before the
        call: a topic created through another broker a moment ago may not have reached this one yet, and
        an admin request must not be told it does not exist (see :meth:`ClusterNode.catch_up`)."""
        await self.node.catch_up()

    async def create_topic(self, name: str, partitions: int, configs: dict[str, Any], replication_factor: int,
                           assignments: list[list[int]] | None = None) -> bytes:
        self.node.broker.logs.validate_topic(name, partitions, configs)
        result = await self.node.propose({
            "op": "create_topic", "name": name, "topic_id": uuid.uuid4().hex, "partitions": partitions,
            "replication_factor": replication_factor, "configs": _normalized(configs),
            "assignments": assignments or None, "max_partitions": self.node.broker.config["max.partitions"]},
            retry=True)
        await self.node.local_topic_settled(name)
        return bytes.fromhex(result["topic_id"])

    async def delete_topic(self, name: str) -> None:
        await self.node.propose({"op": "delete_topic", "name": name}, retry=False)
        await self.node.local_topic_settled(name)  # its files renamed out of the way here

    async def create_partitions(self, name: str, total: int, assignments: list[list[int]] | None = None) -> None:
        await self.node.propose({"op": "create_partitions", "name": name, "count": total,
                                 "assignments": assignments or None,
                                 "max_partitions": self.node.broker.config["max.partitions"]}, retry=False)
        await self.node.local_topic_settled(name)

    async def alter_configs(self, name: str, updates: dict[str, Any], *, replace: bool,
                            validate_only: bool) -> None:
        logs = self.node.broker.logs
        logs.alter_topic_configs(name, updates, replace=replace, validate_only=True)
        if validate_only:
            return
        normalized: dict[str, str | None] = dict(_normalized({k: v for k, v in updates.items() if v is not None}))
        normalized.update({k: None for k, v in updates.items() if v is None})
        await self.node.propose({"op": "alter_configs", "name": name, "replace": replace, "configs": normalized},
                                retry=True)

    async def alter_broker_configs(self, scope: str, layer: dict[str, str]) -> None:
        """Commit ``layer`` as the dynamic broker configs of ``scope`` ("" for the cluster default); every
        broker applies it when it applies the command."""
        await self.node.propose({"op": "alter_broker_configs", "scope": scope, "configs": layer}, retry=True)

    async def alter_client_quotas(self, changes: list[Change]) -> None:
        """Client quotas for every broker: committed to the metadata, in force here once the call returns."""
        await self.node.propose({"op": "alter_client_quotas", "changes": [list(change) for change in changes]},
                                retry=True)

    async def change_acls(self, created: list[Acl], deleted: list[Acl]) -> None:
        """ACLs for every broker: committed to the metadata, in force here once the call returns."""
        if deleted:
            await self.node.propose({"op": "delete_acls", "acls": [list(acl) for acl in deleted]}, retry=True)
        if created:
            await self.node.propose({"op": "create_acls", "acls": [list(acl) for acl in created]}, retry=True)

    async def alter_scram(self, upserts: list[tuple[str, str, ScramCredential]],
                          deletions: list[tuple[str, str]]) -> None:
        await self.node.propose({"op": "alter_scram", "deletions": [list(d) for d in deletions], "upserts": [
            [user, mechanism, c.salt.hex(), c.stored_key.hex(), c.server_key.hex(), c.iterations]
            for user, mechanism, c in upserts]}, retry=True)

    async def elect_leaders(self, preferred: bool, partitions: list[tuple[str, int]] | None,
                            timeout: float) -> list[tuple[str, int, int, str | None]]:
        """Preferred or unclean elections of ``partitions`` (None: of every partition that needs one), judged
        and committed as one metadata command; (topic, partition, error code, message) of each. Not retried
        after an unknown outcome: a second commit would report the first one's elections as not needed."""
        command: dict[str, Any] = {"op": "elect_leaders", "preferred": preferred, "all": partitions is None,
                                   "partitions": [list(tp) for tp in partitions or ()]}
        result = await self.node.propose(command, retry=False, timeout=min(timeout, ADMIN_TIMEOUT))
        return [(str(topic), int(index), int(code), message) for topic, index, code, message in result["results"]]


def _normalized(configs: dict[str, Any]) -> dict[str, str]:
    """Config overrides as the log manager writes them, so every broker stores the same text."""
    return {key: format_value(value) for key, value in parse_configs(configs).items()}
