"""What the cluster's metadata asks of one broker, decided without I/O: the replica role it takes for each
partition, which coordinator partitions it takes over or hands over, which local topics it creates, grows,
reconfigures or deletes, and the broker addresses it tells clients. :class:`broker.cluster.node.ClusterNode`
carries the decisions out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.cluster.controller import BrokerSighting
from broker.cluster.metadata import (
    NO_LEADER,
    BrokerRegistration,
    ClusterMetadata,
    PartitionState,
    TopicMetadata,
)
from broker.topics import OFFSETS_TOPIC, TRANSACTIONS_TOPIC

TopicPartition = tuple[str, int]
# ("leader", leader epoch, replicas, isr) or ("follower", leader epoch, leader id): a changed tuple is a
# changed role, which the replica manager is told of
Role = tuple[Any, ...]
BrokerAddress = tuple[int, str, int, str | None]  # node id, host, port, rack

COORDINATOR_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTIONS_TOPIC})


def role_for(node_id: int, state: PartitionState) -> Role | None:
    """This broker's role for a partition: none unless it is a replica of a partition with a leader."""
    if node_id not in state.replicas or state.leader == NO_LEADER:
        return None
    if state.leader == node_id:
        return ("leader", state.leader_epoch, tuple(state.replicas), tuple(state.isr))
    return ("follower", state.leader_epoch, state.leader)


def is_leader(role: Role | None) -> bool:
    return role is not None and role[0] == "leader"


def role_changes(node_id: int, metadata: ClusterMetadata, current: Mapping[TopicPartition, Role],
                 has_log: Callable[[str, int], bool] = lambda name, index: True
                 ) -> list[tuple[TopicPartition, Role | None]]:
    """The role changes that bring ``current`` to what the metadata says: the replicas to stop first (None),
    then every new or changed role. A partition ``has_log`` says has no local log yet takes no role."""
    wanted: dict[TopicPartition, Role] = {}
    for name, index, state in metadata.partitions():
        role = role_for(node_id, state)
        if role is not None and has_log(name, index):
            wanted[(name, index)] = role
    stops: list[tuple[TopicPartition, Role | None]] = [(tp, None) for tp in current if tp not in wanted]
    return stops + [(tp, role) for tp, role in wanted.items() if current.get(tp) != role]


def coordination_change(topic: str, was: Role | None, role: Role | None) -> bool | None:
    """For a partition of `__consumer_offsets` or `__transaction_state`: True when this broker becomes its
    coordinator (load it), False when it stops being it (unload), None when neither."""
    if topic not in COORDINATOR_TOPICS or is_leader(was) == is_leader(role):
        return None
    return is_leader(role)


@dataclass(frozen=True, slots=True)
class TopicChange:
    """One metadata topic to bring the local logs to: create it whole, or grow and reconfigure it."""

    topic: TopicMetadata
    create: bool = False
    partitions: int | None = None  # the count to grow to
    configs: dict[str, str] | None = None  # the overrides to replace the local ones with


def topic_changes(local: Mapping[str, tuple[bytes, int]], topics: Mapping[str, TopicMetadata],
                  configs_applied: Mapping[str, dict[str, str]]
                  ) -> tuple[list[tuple[str, int]], list[TopicChange]]:
    """(local topics to delete, with their partition counts; changes for the metadata's topics).

    ``local``: name -> (topic id, partition count) of the local logs. A local topic the metadata does not
    have, or has under another id (deleted and created again), is deleted, then created anew. Partitions
    are only ever added, as Kafka's are."""
    deletions = [(name, count) for name, (topic_id, count) in local.items()
                 if name not in topics or topics[name].topic_id != topic_id]
    deleted = {name for name, _ in deletions}
    changes = []
    for name, topic in topics.items():
        if name not in local or name in deleted:
            changes.append(TopicChange(topic, create=True))
            continue
        grow = len(topic.partitions) if local[name][1] < len(topic.partitions) else None
        configs = dict(topic.configs) if configs_applied.get(name) != topic.configs else None
        if grow is not None or configs is not None:
            changes.append(TopicChange(topic, partitions=grow, configs=configs))
    return deletions, changes


def broker_addresses(brokers: Iterable[BrokerRegistration], listener: str | None) -> list[BrokerAddress]:
    """Brokers at their inter-broker address, or at ``listener``'s (a client is told the addresses of the
    listener it came in on; brokers without that listener are left out, as in Kafka; a broker that
    registered no listeners is known by its one address)."""
    found = []
    for b in brokers:
        if listener is None or not b.endpoints:
            found.append((b.node_id, b.host, b.port, b.rack))
        elif listener in b.endpoints:
            host, port = b.endpoints[listener]
            found.append((b.node_id, host, port, b.rack))
    return found


def endpoint_tuples(endpoints: Mapping[str, Any]) -> tuple[tuple[str, str, int], ...]:
    """Listener name -> (host, port) as a sighting carries it: sorted (name, host, port) triples."""
    return tuple(sorted((str(name), str(host), int(port)) for name, (host, port) in endpoints.items()))


def sighting(meta: Mapping[str, Any], state: str) -> BrokerSighting | None:
    """A gossip member's broker, from the metadata it gossips; None for metadata that does not describe one
    (another version's, or damaged)."""
    try:
        node_id = int(meta["node_id"])
        return BrokerSighting(node_id, str(meta["host"]), int(meta["port"]), meta.get("rack"), state,
                              endpoint_tuples(meta.get("endpoints") or {}), joining=bool(meta.get("joining")))
    except (KeyError, TypeError, ValueError):
        return None
