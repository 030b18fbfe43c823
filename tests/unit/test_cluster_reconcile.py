"""What the cluster node decides from the metadata (broker/cluster/reconcile.py), on metadata built by applying
the quorum's commands: replica roles, coordinator hand-overs, local topics, addresses and gossip sightings."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.cluster.metadata import ClusterMetadata
from broker.cluster.reconcile import (
    Role,
    TopicPartition,
    broker_addresses,
    coordination_change,
    role_changes,
    sighting,
    topic_changes,
)
from broker.topics import OFFSETS_TOPIC, TRANSACTIONS_TOPIC

TOPIC_ID = "11" * 16
OTHER_ID = "22" * 16


def cluster(*nodes: int) -> ClusterMetadata:
    metadata = ClusterMetadata()
    for node in nodes:
        assert metadata.apply({"op": "register_broker", "node_id": node, "host": "10.0.0.1", "port": 9000 + node,
                               "rack": None, "endpoints": {"CLIENT": ["c.example", 19000 + node]} if node != 3
                               else {}})["error_code"] == 0
    return metadata


def apply(metadata: ClusterMetadata, **command: object) -> None:
    result = metadata.apply(command)
    assert result["error_code"] == 0, result


def create(metadata: ClusterMetadata, name: str, partitions: int, rf: int, topic_id: str = TOPIC_ID,
           assignments: list[list[int]] | None = None, configs: dict[str, str] | None = None) -> None:
    apply(metadata, op="create_topic", name=name, topic_id=topic_id, partitions=partitions, replication_factor=rf,
          configs=configs or {}, assignments=assignments)


def reconciled(node_id: int, metadata: ClusterMetadata, roles: dict[TopicPartition, Role]
               ) -> dict[TopicPartition, Role]:
    """The roles after carrying out the changes, as the node does."""
    roles = dict(roles)
    for tp, role in role_changes(node_id, metadata, roles):
        if role is None:
            roles.pop(tp)
        else:
            roles[tp] = role
    return roles


def test_roles_follow_leadership_isr_and_fencing():
    metadata = cluster(1, 2, 3)
    create(metadata, "t", 2, 2, assignments=[[1, 2], [2, 3]])
    roles = reconciled(1, metadata, {})
    assert roles == {("t", 0): ("leader", 0, (1, 2), (1, 2))}  # not a replica of t-1
    assert reconciled(2, metadata, {}) == {("t", 0): ("follower", 0, 1), ("t", 1): ("leader", 0, (2, 3), (2, 3))}
    # an ISR change is a changed leader role; nothing else is touched
    apply(metadata, op="change_isr", topic="t", partition=0, leader=1, leader_epoch=0, isr=[1])
    assert role_changes(1, metadata, roles) == [(("t", 0), ("leader", 0, (1, 2), (1,)))]
    roles = reconciled(1, metadata, roles)
    assert role_changes(1, metadata, roles) == []  # carried out: nothing more to do
    # broker 1 fenced with 2 out of the ISR: no leader for t-0, so no role at all (the replica is stopped)
    apply(metadata, op="fence_broker", node_id=1)
    assert metadata.partition("t", 0).leader == -1
    assert role_changes(1, metadata, roles) == [(("t", 0), None)]


def test_a_leader_moving_makes_the_old_leader_a_follower_of_the_new_epoch():
    metadata = cluster(1, 2)
    create(metadata, "t", 1, 2, assignments=[[1, 2]])
    roles = reconciled(2, metadata, {})
    apply(metadata, op="fence_broker", node_id=1)
    assert role_changes(2, metadata, roles) == [(("t", 0), ("leader", 1, (1, 2), (2,)))]
    apply(metadata, op="register_broker", node_id=1, host="10.0.0.1", port=9001, rack=None)
    roles_of_1 = reconciled(1, metadata, {("t", 0): ("leader", 0, (1, 2), (1, 2))})
    assert roles_of_1 == {("t", 0): ("follower", 1, 2)}


def test_a_deleted_topic_stops_its_replicas():
    metadata = cluster(1)
    create(metadata, "t", 2, 1)
    roles = reconciled(1, metadata, {})
    apply(metadata, op="delete_topic", name="t")
    assert sorted(role_changes(1, metadata, roles)) == [(("t", 0), None), (("t", 1), None)]


def test_coordination_is_taken_over_and_handed_over_with_leadership_of_the_internal_topics():
    leader, follower = ("leader", 0, (1, 2), (1, 2)), ("follower", 1, 2)
    for topic in (OFFSETS_TOPIC, TRANSACTIONS_TOPIC):
        assert coordination_change(topic, None, leader) is True
        assert coordination_change(topic, follower, leader) is True
        assert coordination_change(topic, leader, follower) is False
        assert coordination_change(topic, leader, None) is False
        assert coordination_change(topic, leader, ("leader", 1, (1, 2), (1,))) is None  # still the leader
        assert coordination_change(topic, None, follower) is None
    assert coordination_change("orders", None, leader) is None


def test_local_topics_are_created_grown_reconfigured_and_deleted_as_the_metadata_says():
    metadata = cluster(1)
    create(metadata, "same", 2, 1, configs={"retention.ms": "1000"})
    create(metadata, "grown", 1, 1, topic_id=OTHER_ID)
    apply(metadata, op="create_partitions", name="grown", count=3)
    create(metadata, "new", 1, 1, topic_id="33" * 16)
    create(metadata, "recreated", 1, 1, topic_id="44" * 16)
    topics = metadata.topics
    local = {"same": (topics["same"].topic_id, 2), "grown": (topics["grown"].topic_id, 1),
             "recreated": (bytes.fromhex("55" * 16), 4), "gone": (bytes.fromhex("66" * 16), 2)}
    applied = {"same": {"retention.ms": "1000"}, "grown": {"retention.ms": "5"}, "recreated": {}}
    deletions, changes = topic_changes(local, topics, applied)
    assert sorted(deletions) == [("gone", 2), ("recreated", 4)]
    by_name = {c.topic.name: c for c in changes}
    assert set(by_name) == {"grown", "new", "recreated"}  # "same" needs nothing
    assert by_name["new"].create and by_name["recreated"].create
    assert (by_name["grown"].create, by_name["grown"].partitions, by_name["grown"].configs) == (False, 3, {})


def test_partitions_are_never_taken_away_locally():
    metadata = cluster(1)
    create(metadata, "t", 2, 1)
    assert topic_changes({"t": (metadata.topics["t"].topic_id, 5)}, metadata.topics, {"t": {}}) == ([], [])


def test_clients_are_told_the_addresses_of_their_listener():
    metadata = cluster(1, 2, 3)
    brokers = metadata.live_brokers()
    assert broker_addresses(brokers, None) == [(1, "10.0.0.1", 9001, None), (2, "10.0.0.1", 9002, None),
                                               (3, "10.0.0.1", 9003, None)]
    # broker 3 registered no listeners (an older version): its one address serves every listener
    assert broker_addresses(brokers, "CLIENT") == [(1, "c.example", 19001, None), (2, "c.example", 19002, None),
                                                   (3, "10.0.0.1", 9003, None)]
    assert broker_addresses(brokers, "OTHER") == [(3, "10.0.0.1", 9003, None)]


def test_a_gossiped_broker_is_read_from_its_metadata_and_garbage_is_ignored():
    seen = sighting({"node_id": "4", "host": "h", "port": 9004, "rack": "r1",
                     "endpoints": {"B": ["b", 2], "A": ["a", 1]}}, "alive")
    assert (seen.node_id, seen.host, seen.port, seen.rack, seen.state, seen.endpoints) == (
        4, "h", 9004, "r1", "alive", (("A", "a", 1), ("B", "b", 2)))
    for meta in ({}, {"node_id": "x", "host": "h", "port": 1}, {"node_id": 1, "host": "h", "port": None},
                 {"node_id": 1, "host": "h", "port": 1, "endpoints": {"A": ["a"]}}):
        assert sighting(meta, "alive") is None


commands = st.one_of(
    st.tuples(st.just("fence"), st.integers(1, 3)),
    st.tuples(st.just("register"), st.integers(1, 3)),
    st.tuples(st.just("create"), st.sampled_from("abc"), st.integers(1, 3), st.integers(1, 3)),
    st.tuples(st.just("delete"), st.sampled_from("abc")),
    st.tuples(st.just("shrink"), st.sampled_from("abc"), st.integers(0, 2)),
)


@settings(deadline=None, max_examples=100)
@given(st.lists(commands, max_size=25))
def test_after_carrying_out_the_changes_each_broker_holds_exactly_the_metadatas_roles(steps):
    metadata = cluster(1, 2, 3)
    roles: dict[int, dict[TopicPartition, Role]] = {1: {}, 2: {}, 3: {}}
    for step in steps:
        if step[0] == "fence":
            metadata.apply({"op": "fence_broker", "node_id": step[1]})
        elif step[0] == "register":
            metadata.apply({"op": "register_broker", "node_id": step[1], "host": "h", "port": 1, "rack": None})
        elif step[0] == "create":
            metadata.apply({"op": "create_topic", "name": step[1], "topic_id": step[1].encode().hex() * 16,
                            "partitions": step[2], "replication_factor": step[3], "configs": {}})
        elif step[0] == "delete":
            metadata.apply({"op": "delete_topic", "name": step[1]})
        else:
            state = metadata.partition(step[1], step[2])
            if state is not None and state.leader >= 0:
                metadata.apply({"op": "change_isr", "topic": step[1], "partition": step[2], "leader": state.leader,
                                "leader_epoch": state.leader_epoch, "isr": [state.leader]})
        leaders: dict[TopicPartition, list[int]] = {}
        for node in roles:
            roles[node] = reconciled(node, metadata, roles[node])
            assert role_changes(node, metadata, roles[node]) == []
            for tp, role in roles[node].items():
                state = metadata.partition(*tp)
                assert state is not None and node in state.replicas and role[1] == state.leader_epoch
                if role[0] == "leader":
                    leaders.setdefault(tp, []).append(node)
                else:
                    assert role[2] == state.leader
        # one leader per partition that has one, and it is the metadata's
        for name, index, state in metadata.partitions():
            assert leaders.get((name, index), []) == ([] if state.leader < 0 else [state.leader])
