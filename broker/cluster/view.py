"""The cluster as one broker sees it: the live brokers, the controller, each partition's leader, epoch,
replicas and ISR, and the metadata quorum's part in changes (ISR, reassignments).

Handlers, coordinators and replication ask a :class:`ClusterView` and never which kind of broker they run
on: :class:`SingleNodeView` is a broker that is the whole cluster (it leads every partition, is its own
controller, and has no quorum), :class:`ReplicatedView` answers from the replicated metadata of a
:class:`broker.cluster.node.ClusterNode` (:class:`MetadataNode`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from broker.cluster.controller import BrokerSighting
from broker.cluster.isr import PartitionLeaderState, acts_as_leader
from broker.cluster.membership import ALIVE
from broker.cluster.metadata import ClusterMetadata, reassignment_target_problem, unknown_partition_message
from broker.cluster.reconcile import broker_addresses
from broker.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from broker.cluster.raft import RaftNode

# (node id, host, port, rack) of a live broker
BrokerAddress = tuple[int, str, int, str | None]
# (leader id, leader epoch, replicas, isr) of a partition
PartitionLeader = tuple[int, int, list[int], list[int]]


@dataclass(frozen=True, slots=True)
class Reassignment:
    """A partition reassignment in progress (KIP-455)."""

    partition: int
    replicas: list[int]
    adding: list[int]
    removing: list[int]


class ClusterView(Protocol):
    def live_brokers(self, listener: str | None = None) -> list[BrokerAddress]:
        """The live brokers' addresses, on ``listener`` when given (a client is told those of the listener it
        connected to)."""

    def fenced_brokers(self, listener: str | None = None) -> list[BrokerAddress]:
        """The registered brokers that are fenced (not alive), as :meth:`live_brokers` gives the live ones."""

    def controller_id(self) -> int:
        """The controller's node id, -1 while none is known."""

    def broker_epoch(self, node_id: int) -> int | None:
        """The broker epoch of a registered, unfenced broker of the cluster; None for any other broker."""

    def partition_leader(self, topic: str, partition: int) -> PartitionLeader:
        """(leader id, leader epoch, replicas, isr) of a partition."""

    def adding_replicas(self, topic: str, partition: int) -> list[int] | None:
        """The replicas a reassignment of the partition in progress adds; None when none is in progress."""

    @property
    def caught_up(self) -> bool:
        """Whether this broker's view is the quorum's, as of some moment since it started. Until then a
        restarted broker knows only the journal it replayed, maybe far behind: as a Kafka broker that has not
        caught up, it neither leads nor names a leader to anyone."""

    @property
    def in_quorum(self) -> bool:
        """Whether this broker is in contact with the metadata quorum now. One cut off from it for longer than
        the failure timeouts is one the others fence and take its leaderships from: it must not go on acting as a
        coordinator (Kafka's fenced broker); its metadata is stale from then on."""

    def metadata_version(self) -> int:
        """Changes whenever the replicated metadata changes (leaders, epochs, replicas, ISRs)."""

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The leader epoch in which this broker acts as the partition's leader now: it may append, serve
        reads and offsets, and acknowledge. KafkaError NOT_LEADER_OR_FOLLOWER when it does not (clients then
        refresh their metadata and go elsewhere)."""

    async def propose_isr(self, topic: str, partition: int, isr: list[int], leader_epoch: int) -> bool:
        """A partition leader's ISR change, for the controller to commit; True once committed."""

    async def catch_up(self) -> None:
        """Return once this broker has applied every metadata change the quorum committed before the call."""

    async def reassign(self, topic: str, partition: int, replicas: list[int] | None) -> None:
        """Start (``replicas``) or cancel (None) a partition's reassignment; KafkaError when refused."""

    async def unregister_broker(self, node_id: int) -> None:
        """Drop a broker's registration (Kafka's UnregisterBroker): it leaves every ISR and the cluster's broker
        list. One still running is registered again (a new broker epoch), as gossip sees it alive. KafkaError
        BROKER_ID_NOT_REGISTERED for a broker that is not registered."""

    def reassignments(self, wanted: Iterable[tuple[str, Iterable[int]]] | None) -> dict[str, list[Reassignment]]:
        """The reassignments in progress of the ``wanted`` (topic, partitions), of every partition when None;
        partitions that do not exist are left out, as Kafka's controller does."""

    @property
    def quorum(self) -> RaftNode | None:
        """The metadata quorum's Raft node (DescribeQuorum, voter changes), None where there is no quorum."""

    def voter_directory_id(self, node_id: int) -> bytes:
        """The directory id a Raft voter was added with at run time (AddRaftVoter); the zero id for a configured
        voter, as a static Kafka quorum's voters have none."""

    def seen_alive(self, node_id: int) -> bool:
        """Whether the broker is running as far as membership (gossip) sees now, registered or not."""


class LeaderStates(Protocol):
    """The leaderships a broker's replication has taken up (:class:`broker.cluster.replication.ReplicaManager`)."""

    def leader_state(self, topic: str, partition: int) -> PartitionLeaderState | None: ...


class MetadataNode(Protocol):
    """What the view of a cluster reads of its node (:class:`broker.cluster.node.ClusterNode`)."""

    @property
    def node_id(self) -> int: ...

    @property
    def metadata(self) -> ClusterMetadata: ...

    @property
    def caught_up(self) -> bool: ...

    @property
    def raft(self) -> RaftNode: ...

    @property
    def replicas(self) -> LeaderStates: ...

    def sightings(self) -> dict[int, BrokerSighting]: ...

    def live_brokers(self, listener: str | None = None) -> list[BrokerAddress]: ...

    def controller_id(self) -> int: ...

    def partition_leader(self, topic: str, partition: int) -> PartitionLeader: ...

    async def propose_isr(self, topic: str, partition: int, isr: list[int], leader_epoch: int) -> bool: ...

    async def catch_up(self) -> None: ...

    async def propose(self, command: dict[str, Any], *, retry: bool, timeout: float = ...) -> dict[str, Any]: ...

    def unclean_election_enabled(self, topic: str) -> bool: ...


def committed_leader(view: ClusterView, topic: str, partition: int) -> int:
    """The partition's leader to name to clients (Metadata, FindCoordinator): -1 until the view is the
    quorum's."""
    return view.partition_leader(topic, partition)[0] if view.caught_up else -1


def replica_leader_epoch(view: ClusterView, node_id: int, replicas: LeaderStates, topic: str,
                         partition: int) -> int:
    """:meth:`ClusterView.leader_epoch` where partitions are replicated: the metadata naming this broker is not
    enough (:func:`broker.cluster.isr.acts_as_leader`): a restarted broker's view is the journal it replayed
    until it has caught up with the quorum, and a leadership counts once the replica manager has taken it up
    for that epoch, with the ISR to wait for."""
    leader, epoch, _replicas, _isr = view.partition_leader(topic, partition)
    state = replicas.leader_state(topic, partition)
    if not acts_as_leader(node_id, leader, epoch, None if state is None else state.leader_epoch,
                          caught_up=view.caught_up):
        raise not_leader(node_id, topic, partition, epoch)
    return epoch


def not_leader(node_id: int, topic: str, partition: int, epoch: int) -> KafkaError:
    return KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                      f"broker {node_id} does not lead {topic}-{partition} (epoch {epoch})")


class SingleNodeView:
    """A broker that is the whole cluster: the only live broker, its own controller, the leader (epoch 0) and
    only replica of every partition, always caught up, with no quorum and no reassignment ever in progress."""

    def __init__(self, node_id: int, rack: Callable[[], str | None], endpoints: Mapping[str, tuple[str, int]],
                 address: Callable[[], tuple[str, int]], partition_count: Callable[[str], int | None]) -> None:
        """``endpoints``: listener -> advertised address, as the broker keeps it up to date; ``address``: the
        broker's own advertised address (its port is known once its first listener listens);
        ``partition_count``: a local topic's, None for a topic that does not exist."""
        self.node_id = node_id
        self._rack = rack
        self._endpoints = endpoints
        self._address = address
        self._partition_count = partition_count

    def live_brokers(self, listener: str | None = None) -> list[BrokerAddress]:
        host, port = self._endpoints.get(listener, self._address()) if listener else self._address()
        return [(self.node_id, host, port, self._rack())]

    def fenced_brokers(self, listener: str | None = None) -> list[BrokerAddress]:
        return []

    def controller_id(self) -> int:
        return self.node_id

    def broker_epoch(self, node_id: int) -> int | None:
        return None  # no other brokers to speak to

    def partition_leader(self, topic: str, partition: int) -> PartitionLeader:
        return self.node_id, 0, [self.node_id], [self.node_id]

    def adding_replicas(self, topic: str, partition: int) -> list[int] | None:
        return None

    @property
    def caught_up(self) -> bool:
        return True

    @property
    def in_quorum(self) -> bool:
        return True

    def metadata_version(self) -> int:
        return 0

    def leader_epoch(self, topic: str, partition: int) -> int:
        return 0

    async def propose_isr(self, topic: str, partition: int, isr: list[int], leader_epoch: int) -> bool:
        return False

    async def catch_up(self) -> None:
        """The local logs are the whole truth: nothing to wait for."""

    async def reassign(self, topic: str, partition: int, replicas: list[int] | None) -> None:
        """Its one broker is the only possible target, which every partition has already."""
        count = self._partition_count(topic)
        if count is None or not 0 <= partition < count:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             unknown_partition_message(topic, partition, count is not None))
        if replicas is None:
            raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                             f"no reassignment of {topic}-{partition} is in progress")
        problem = reassignment_target_problem(list(replicas), {self.node_id})
        if problem is not None:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)

    async def unregister_broker(self, node_id: int) -> None:
        """Its one broker is running, so it stays registered; any other id names no broker."""
        if node_id != self.node_id:
            raise KafkaError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker ID {node_id} is not currently registered")

    def reassignments(self, wanted: Iterable[tuple[str, Iterable[int]]] | None) -> dict[str, list[Reassignment]]:
        return {}

    @property
    def quorum(self) -> RaftNode | None:
        return None

    def voter_directory_id(self, node_id: int) -> bytes:
        return bytes(16)  # no quorum, so no voter added at run time

    def seen_alive(self, node_id: int) -> bool:
        return node_id == self.node_id


class ReplicatedView:
    """A node of a cluster: every answer from the replicated metadata it has applied."""

    def __init__(self, node: MetadataNode) -> None:
        self._node = node

    def live_brokers(self, listener: str | None = None) -> list[BrokerAddress]:
        return self._node.live_brokers(listener)

    def fenced_brokers(self, listener: str | None = None) -> list[BrokerAddress]:
        return broker_addresses(sorted((b for b in self._node.metadata.brokers.values() if not b.alive),
                                       key=lambda b: b.node_id), listener)

    def controller_id(self) -> int:
        return self._node.controller_id()

    def broker_epoch(self, node_id: int) -> int | None:
        return self._node.metadata.broker_epoch(node_id)

    def partition_leader(self, topic: str, partition: int) -> PartitionLeader:
        return self._node.partition_leader(topic, partition)

    def adding_replicas(self, topic: str, partition: int) -> list[int] | None:
        state = self._node.metadata.partition(topic, partition)
        return list(state.adding) if state is not None and state.reassigning else None

    @property
    def caught_up(self) -> bool:
        return self._node.caught_up

    @property
    def in_quorum(self) -> bool:
        return self._node.raft.in_quorum

    def metadata_version(self) -> int:
        return self._node.metadata.version

    def leader_epoch(self, topic: str, partition: int) -> int:
        return replica_leader_epoch(self, self._node.node_id, self._node.replicas, topic, partition)

    async def propose_isr(self, topic: str, partition: int, isr: list[int], leader_epoch: int) -> bool:
        return await self._node.propose_isr(topic, partition, isr, leader_epoch)

    async def catch_up(self) -> None:
        await self._node.catch_up()

    async def reassign(self, topic: str, partition: int, replicas: list[int] | None) -> None:
        # a target proposed again changes nothing, so an unknown outcome may be retried; a cancellation may not;
        # a cancellation that needs an unclean election is the topic's unclean.leader.election.enable's call
        await self._node.propose({"op": "alter_reassignment", "topic": topic, "partition": partition,
                                  "replicas": None if replicas is None else list(replicas),
                                  "unclean": replicas is None and self._node.unclean_election_enabled(topic)},
                                 retry=replicas is not None)

    async def unregister_broker(self, node_id: int) -> None:
        # not retried: after an unknown outcome a second try would be refused, or drop a registration made since
        await self._node.propose({"op": "unregister_broker", "node_id": node_id}, retry=False)

    def reassignments(self, wanted: Iterable[tuple[str, Iterable[int]]] | None) -> dict[str, list[Reassignment]]:
        metadata = self._node.metadata
        if wanted is None:
            wanted = [(name, range(len(topic.partitions))) for name, topic in metadata.topics.items()]
        found: dict[str, list[Reassignment]] = {}
        for name, indexes in wanted:
            ongoing = []
            for index in indexes:
                state = metadata.partition(name, index)
                if state is not None and state.reassigning:
                    ongoing.append(Reassignment(index, list(state.replicas), list(state.adding),
                                                list(state.removing)))
            if ongoing:
                found[name] = ongoing
        return found

    @property
    def quorum(self) -> RaftNode | None:
        return self._node.raft

    def voter_directory_id(self, node_id: int) -> bytes:
        added = self._node.metadata.raft_voters.get(node_id)
        return bytes(16) if added is None else added[1]

    def seen_alive(self, node_id: int) -> bool:
        seen = self._node.sightings().get(node_id)
        return seen is not None and seen.state == ALIVE
