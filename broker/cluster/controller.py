"""The controller: what the Raft leader does to keep the metadata true to the cluster.

Any broker may propose a command (topic creation, an ISR change from a partition leader); the state
machine (:mod:`broker.cluster.metadata`) applies each one the same way everywhere, which is where
replicas are assigned round robin and where leadership leaves a fenced broker. What only the controller
does is decide, from what gossip sees, that something has to change:

* a broker gossip sees alive that is not registered (or registered as dead, or with another address)
  is registered; a registered broker that gossip declares dead or left is fenced, which moves its
  leaderships to other ISR members with new epochs. A registered broker gossip has never heard of is
  fenced only after a grace period, so a new controller does not fence brokers its gossip has not met yet;
* `__consumer_offsets` is created once enough brokers are registered for its replication factor;
* with auto.leader.rebalance.enable, every leader.imbalance.check.interval.seconds (or the cluster's
  ``preferred_leader_election_interval_ms``) leadership goes back to preferred replicas: for each broker
  whose share of the partitions it is the preferred replica of, but does not lead, is above
  leader.imbalance.per.broker.percentage, each of those partitions where it is a live ISR member again (a
  broker returned and caught up) elects it (the rule of Kafka's controller before KRaft, which dropped the
  percentage and rebalances on any imbalance: a percentage of 0).
* a partition left without a live ISR member is led by a live out-of-sync replica if its topic's
  unclean.leader.election.enable (as this broker sees it) allows it.

The decisions are pure functions of the metadata and the gossip view (:func:`plan_membership`,
:func:`plan_offsets_topic`, :func:`plan_preferred_elections`, :func:`plan_unclean_elections`);
:class:`Controller` runs them whenever something changes while this broker is the Raft leader, and
proposes the commands one at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from broker.cluster.membership import ALIVE, DEAD, LEFT, SUSPECT
from broker.cluster.metadata import ClusterMetadata, Command
from broker.cluster.raft import ProposalFailed, RaftNode

log = structlog.get_logger("broker.controller")

PROPOSAL_TIMEOUT = 5.0


@dataclass(frozen=True)
class BrokerSighting:
    """A broker as gossip sees it: its inter-broker listener, its SWIM state and the addresses of all its
    listeners (name -> (host, port))."""

    node_id: int
    host: str
    port: int
    rack: str | None
    state: str
    endpoints: tuple[tuple[str, str, int], ...] = ()
    # a broker joining a running cluster that has not caught up with the metadata yet (it is no voter yet): it
    # could host no replica, so it is not registered until it has (as a Kafka broker registers once caught up)
    joining: bool = False

    def endpoint_map(self) -> dict[str, list]:
        return {name: [host, port] for name, host, port in self.endpoints}


@dataclass(frozen=True)
class OffsetsTopicSpec:
    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str]


def plan_membership(metadata: ClusterMetadata, sightings: dict[int, BrokerSighting],
                    *, fence_unknown: bool) -> list[Command]:
    """Register brokers gossip sees alive; fence registered brokers that gossip declared failed (and, with
    ``fence_unknown``, those gossip does not know at all)."""
    commands: list[Command] = []
    for node_id in sorted(sightings):
        seen = sightings[node_id]
        if seen.state not in (ALIVE, SUSPECT) or seen.joining:
            continue
        registered = metadata.brokers.get(node_id)
        if (registered is None or not registered.alive
                or (registered.host, registered.port, registered.rack, registered.endpoints)
                != (seen.host, seen.port, seen.rack, seen.endpoint_map())):
            commands.append({"op": "register_broker", "node_id": node_id, "host": seen.host, "port": seen.port,
                             "rack": seen.rack, "endpoints": seen.endpoint_map()})
    for broker in metadata.live_brokers():
        sighting = sightings.get(broker.node_id)
        if (sighting is None and fence_unknown) or (sighting is not None and sighting.state in (DEAD, LEFT)):
            commands.append({"op": "fence_broker", "node_id": broker.node_id})
    return commands


def plan_offsets_topic(metadata: ClusterMetadata, spec: OffsetsTopicSpec,
                       new_topic_id: Callable[[], str]) -> Command | None:
    if spec.name in metadata.topics or len(metadata.live_broker_ids()) < spec.replication_factor:
        return None
    return {"op": "create_topic", "name": spec.name, "topic_id": new_topic_id(), "partitions": spec.partitions,
            "replication_factor": spec.replication_factor, "configs": dict(spec.configs)}


def plan_preferred_elections(metadata: ClusterMetadata, imbalance_percentage: float = 0) -> list[Command]:
    """Preferred elections for the brokers whose leader imbalance is above ``imbalance_percentage``: the
    partitions a broker is the preferred replica of but does not lead, over all it is the preferred replica
    of."""
    preferred_of: dict[int, int] = {}
    not_led_by: dict[int, int] = {}
    for _name, _index, state in metadata.partitions():
        preferred = state.preferred_leader
        preferred_of[preferred] = preferred_of.get(preferred, 0) + 1
        if state.leader != preferred:
            not_led_by[preferred] = not_led_by.get(preferred, 0) + 1
    imbalanced = {broker for broker, count in not_led_by.items()
                  if count / preferred_of[broker] > imbalance_percentage / 100}
    due = set(metadata.preferred_elections_due())
    return [{"op": "elect_preferred", "topic": topic, "partition": partition}
            for topic, partition, state in metadata.partitions()
            if (topic, partition) in due and state.preferred_leader in imbalanced]


def plan_unclean_elections(metadata: ClusterMetadata, enabled: Callable[[str], bool]) -> list[Command]:
    """Unclean elections for the offline partitions of topics whose unclean.leader.election.enable is on."""
    return [{"op": "elect_unclean", "topic": topic, "partition": partition}
            for topic, partition in metadata.offline_partitions() if enabled(topic)]


def new_topic_id() -> str:
    return uuid.uuid4().hex


class Controller:
    """Runs the plans while this broker leads the Raft quorum. ``wake()`` on any change."""

    def __init__(self, raft: RaftNode, sightings: Callable[[], dict[int, BrokerSighting]],
                 offsets_topic: OffsetsTopicSpec, *, preferred_leader_election_interval: float,
                 unknown_broker_grace: float, clock: Callable[[], float] = time.monotonic,
                 unclean_election_enabled: Callable[[str], bool] = lambda topic: False,
                 auto_leader_rebalance: bool = True, leader_imbalance_percentage: float = 0) -> None:
        """``unclean_election_enabled(topic)``: the topic's unclean.leader.election.enable as this broker
        sees it (its override, else the broker's dynamic or static default). ``auto_leader_rebalance`` off:
        leadership goes back to preferred replicas only when asked (ElectLeaders)."""
        self.raft = raft
        self.auto_leader_rebalance = auto_leader_rebalance
        self.leader_imbalance_percentage = leader_imbalance_percentage
        self.unclean_election_enabled = unclean_election_enabled
        self.sightings = sightings
        self.offsets_topic = offsets_topic
        self.preferred_interval = preferred_leader_election_interval
        self.unknown_broker_grace = unknown_broker_grace
        self.clock = clock
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._running = False
        self._active_since: float | None = None
        self._next_preferred_check = 0.0

    async def start(self) -> None:
        self._running = True
        self._task = asyncio.create_task(self._run(), name="controller")

    async def stop(self) -> None:
        # The flag ends the loop even if the cancellation is swallowed by a wait_for that was completing.
        self._running = False
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def wake(self) -> None:
        self._wake.set()

    @property
    def active(self) -> bool:
        return self._active_since is not None

    async def _run(self) -> None:
        while self._running:
            self._wake.clear()
            try:
                await self._step()
            except Exception:
                log.exception("controller step failed")
            timeout = None
            if self._active_since is not None:
                now = self.clock()
                deadlines = [self._next_preferred_check] if self.auto_leader_rebalance else []
                grace_end = self._active_since + self.unknown_broker_grace
                if now < grace_end:
                    deadlines.append(grace_end)
                timeout = max(0.05, min(deadlines) - now) if deadlines else None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()

    async def _step(self) -> None:
        now = self.clock()
        if not self.raft.is_leader:
            if self._active_since is not None:
                log.info("no longer the controller", node_id=self.raft.node_id)
            self._active_since = None
            return
        if self._active_since is None:
            self._active_since = now
            self._next_preferred_check = now + self.preferred_interval
            log.info("became the controller", node_id=self.raft.node_id)
        metadata = self.raft.state
        assert isinstance(metadata, ClusterMetadata)
        commands = plan_membership(metadata, self.sightings(),
                                   fence_unknown=now >= self._active_since + self.unknown_broker_grace)
        if not commands:
            offsets = plan_offsets_topic(metadata, self.offsets_topic, new_topic_id)
            commands = [offsets] if offsets is not None else []
        if not commands:
            commands = plan_unclean_elections(metadata, self.unclean_election_enabled)
        if not commands and self.auto_leader_rebalance and now >= self._next_preferred_check:
            self._next_preferred_check = now + self.preferred_interval
            commands = plan_preferred_elections(metadata, self.leader_imbalance_percentage)
        for command in commands:
            if not await self._propose(command):
                self.wake()  # try again after a short pause: the quorum may be electing
                await asyncio.sleep(0.1)
                return

    async def _propose(self, command: Command) -> bool:
        try:
            result: Any = await self.raft.propose(command, PROPOSAL_TIMEOUT)
        except ProposalFailed as exc:
            log.warning("controller proposal failed", command=command, error=str(exc))
            return False
        log.info("controller applied", op=command["op"], command=command, error_code=result["error_code"],
                 error_message=result["error_message"])
        return True
