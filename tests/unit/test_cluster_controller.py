"""The controller's decisions (pure) and the cluster config block."""

from __future__ import annotations

import pytest

from broker.cluster.config import ClusterConfig
from broker.cluster.controller import (
    BrokerSighting,
    OffsetsTopicSpec,
    plan_membership,
    plan_offsets_topic,
    plan_preferred_elections,
)
from broker.cluster.membership import ALIVE, DEAD, LEFT, SUSPECT
from broker.cluster.metadata import ClusterMetadata
from burrowpy.config import ConfigError, Section


def seen(node: int, state: str = ALIVE, port: int | None = None) -> BrokerSighting:
    return BrokerSighting(node, "127.0.0.1", port or 9000 + node, None, state)


def registered(*nodes: int) -> ClusterMetadata:
    metadata = ClusterMetadata()
    for node in nodes:
        metadata.apply({"op": "register_broker", "node_id": node, "host": "127.0.0.1", "port": 9000 + node})
    return metadata


def test_brokers_seen_alive_are_registered_once():
    metadata = registered(1)
    commands = plan_membership(metadata, {1: seen(1), 2: seen(2), 3: seen(3, SUSPECT)}, fence_unknown=True)
    assert commands == [
        {"op": "register_broker", "node_id": 2, "host": "127.0.0.1", "port": 9002, "rack": None, "endpoints": {}},
        {"op": "register_broker", "node_id": 3, "host": "127.0.0.1", "port": 9003, "rack": None, "endpoints": {}}]
    for command in commands:
        metadata.apply(command)
    assert plan_membership(metadata, {1: seen(1), 2: seen(2), 3: seen(3)}, fence_unknown=True) == []


def test_a_broker_back_at_a_new_address_is_registered_again():
    metadata = registered(1, 2)
    commands = plan_membership(metadata, {1: seen(1), 2: seen(2, port=9100)}, fence_unknown=True)
    assert commands == [{"op": "register_broker", "node_id": 2, "host": "127.0.0.1", "port": 9100, "rack": None,
                         "endpoints": {}}]


def test_a_broker_with_new_listener_addresses_is_registered_again():
    metadata = registered(1)
    with_listeners = BrokerSighting(1, "127.0.0.1", 9001, None, ALIVE,
                                    (("PLAINTEXT", "127.0.0.1", 9001), ("SSL", "10.0.0.1", 9093)))
    commands = plan_membership(metadata, {1: with_listeners}, fence_unknown=True)
    assert commands[0]["endpoints"] == {"PLAINTEXT": ["127.0.0.1", 9001], "SSL": ["10.0.0.1", 9093]}
    metadata.apply(commands[0])
    assert plan_membership(metadata, {1: with_listeners}, fence_unknown=True) == []


def test_failed_brokers_are_fenced_and_unknown_ones_only_after_the_grace():
    metadata = registered(1, 2, 3, 4)
    sightings = {1: seen(1), 2: seen(2, DEAD), 3: seen(3, LEFT)}
    assert plan_membership(metadata, sightings, fence_unknown=False) == [
        {"op": "fence_broker", "node_id": 2}, {"op": "fence_broker", "node_id": 3}]
    assert plan_membership(metadata, sightings, fence_unknown=True)[-1] == {"op": "fence_broker", "node_id": 4}
    metadata.apply({"op": "fence_broker", "node_id": 2})
    # Already fenced: nothing more to do until it comes back.
    assert {"op": "fence_broker", "node_id": 2} not in plan_membership(metadata, sightings, fence_unknown=False)
    assert plan_membership(metadata, {**sightings, 2: seen(2)}, fence_unknown=False)[0]["op"] == "register_broker"


def test_offsets_topic_waits_for_enough_brokers():
    spec = OffsetsTopicSpec("__consumer_offsets", 12, 3, {"cleanup.policy": "compact"})
    assert plan_offsets_topic(registered(1, 2), spec, lambda: "ab" * 16) is None
    metadata = registered(1, 2, 3)
    command = plan_offsets_topic(metadata, spec, lambda: "ab" * 16)
    assert command == {"op": "create_topic", "name": "__consumer_offsets", "topic_id": "ab" * 16, "partitions": 12,
                       "replication_factor": 3, "configs": {"cleanup.policy": "compact"}}
    metadata.apply(command)
    assert plan_offsets_topic(metadata, spec, lambda: "cd" * 16) is None


def test_preferred_elections_are_planned_for_returned_replicas():
    metadata = registered(1, 2)
    metadata.apply({"op": "create_topic", "name": "t", "topic_id": "01" * 16, "partitions": 2,
                    "replication_factor": 2, "configs": {}})
    assert plan_preferred_elections(metadata) == []
    metadata.apply({"op": "fence_broker", "node_id": 1})
    metadata.apply({"op": "register_broker", "node_id": 1, "host": "127.0.0.1", "port": 9001})
    metadata.apply({"op": "change_isr", "topic": "t", "partition": 0, "leader": 2, "leader_epoch": 1,
                    "isr": [1, 2]})
    assert plan_preferred_elections(metadata) == [{"op": "elect_preferred", "topic": "t", "partition": 0}]


def test_preferred_elections_wait_for_a_brokers_imbalance_to_pass_the_percentage():
    metadata = registered(1, 2, 3)
    metadata.apply({"op": "create_topic", "name": "t", "topic_id": "01" * 16, "partitions": 6,
                    "replication_factor": 2, "configs": {}, "assignments": [[1, 2]] * 4 + [[2, 1]] * 2})
    metadata.apply({"op": "fence_broker", "node_id": 1})
    metadata.apply({"op": "register_broker", "node_id": 1, "host": "127.0.0.1", "port": 9001})
    # broker 1 back in the ISR of one of its four partitions: 4 of 4 not led by it, 1 electable
    metadata.apply({"op": "change_isr", "topic": "t", "partition": 0, "leader": 2, "leader_epoch": 1,
                    "isr": [1, 2]})
    assert plan_preferred_elections(metadata, 99) == [{"op": "elect_preferred", "topic": "t", "partition": 0}]
    assert plan_preferred_elections(metadata, 100) == []  # an imbalance must be above the percentage
    for partition in (1, 2):
        metadata.apply({"op": "change_isr", "topic": "t", "partition": partition, "leader": 2, "leader_epoch": 1,
                        "isr": [1, 2]})
        metadata.apply({"op": "elect_preferred", "topic": "t", "partition": partition})
    metadata.apply({"op": "change_isr", "topic": "t", "partition": 3, "leader": 2, "leader_epoch": 1,
                    "isr": [1, 2]})
    # now 2 of broker 1's 4 partitions are not led by it: 50%
    assert plan_preferred_elections(metadata, 49) != []
    assert plan_preferred_elections(metadata, 50) == []
    assert plan_preferred_elections(metadata, 10) == [{"op": "elect_preferred", "topic": "t", "partition": 0},
                                                      {"op": "elect_preferred", "topic": "t", "partition": 3}]


def test_the_imbalance_check_interval_defaults_to_the_brokers():
    assert parse(block()).preferred_leader_election_interval is None


# --- the cluster: block ----------------------------------------------------------------------------------------

def block(**overrides) -> dict:
    data = {"secret": "0123456789abcdef0123456789abcdef",
            "raft": {"listen": "127.0.0.1:7001", "peers": {2: "127.0.0.1:7002", 3: "127.0.0.1:7003"}},
            "gossip": {"listen": "127.0.0.1:7101", "seeds": ["127.0.0.1:7102"], "protocol_period_ms": 200,
                       "ping_timeout_ms": 50}}
    data.update(overrides)
    return data


def parse(data: dict, node_id: int = 1) -> ClusterConfig:
    return ClusterConfig.from_section(Section("broker.yaml", "cluster", data), node_id)


def test_cluster_block_parses():
    config = parse(block(controller={"preferred_leader_election_interval_ms": 1500}))
    assert config.raft_peers == {2: "127.0.0.1:7002", 3: "127.0.0.1:7003"}
    assert config.gossip_listen == ("127.0.0.1", 7101) and config.gossip_seeds == [("127.0.0.1", 7102)]
    assert config.gossip_advertise is None
    relayed = parse(block(gossip={"listen": "127.0.0.1:7101", "advertise": "127.0.0.1:7201"}))
    assert relayed.gossip_listen == ("127.0.0.1", 7101) and relayed.gossip_advertise == ("127.0.0.1", 7201)
    assert config.swim.protocol_period == 0.2 and config.swim.ping_timeout == 0.05
    assert config.preferred_leader_election_interval == 1.5
    assert config.raft_timing.election_timeout_min == 0.4


@pytest.mark.parametrize(("data", "where"), [
    (block(bogus=1), "cluster.bogus"),
    (block(secret=""), "cluster.secret"),
    (block(secret="0123456789abcdef0123456789abcde"), "cluster.secret"),
    (block(secret="CHANGE-ME: python3 -c 'import secrets; print(secrets.token_hex(32))'"), "cluster.secret"),
    ({k: v for k, v in block().items() if k != "secret"}, "cluster.secret"),
    (block(raft={"listen": "127.0.0.1:7001", "peers": {}, "typo": 1}), "cluster.raft.typo"),
    (block(raft={"listen": "nowhere", "peers": {}}), "cluster.raft.listen"),
    (block(raft={"listen": "127.0.0.1:7001", "peers": {1: "127.0.0.1:7001"}}), "cluster.raft.peers"),
    (block(raft={"listen": "127.0.0.1:7001", "peers": {"x": "127.0.0.1:7002"}}), "cluster.raft.peers"),
    (block(raft={"listen": "127.0.0.1:7001", "peers": {}, "heartbeat_interval_ms": 500}), "cluster.raft"),
    (block(gossip={"listen": "127.0.0.1:7101", "seeds": ["bad"]}), "cluster.gossip.seeds"),
    (block(gossip={"listen": "127.0.0.1:7101", "advertise": "relay"}), "cluster.gossip.advertise"),
    (block(gossip={"listen": "127.0.0.1:7101", "ping_timeout_ms": 900}), "cluster.gossip"),
    (block(controller={"preferred_leader_election_interval_ms": 0}), "cluster.controller"),
    (block(gossip="yes"), "cluster.gossip"),
])
def test_cluster_block_errors_name_file_and_key(data, where):
    with pytest.raises(ConfigError) as caught:
        parse(data)
    assert caught.value.file == "broker.yaml"
    assert caught.value.path.startswith(where), caught.value.path


def test_a_joining_broker_is_registered_only_once_it_has_caught_up():
    metadata = registered(1)
    joining = BrokerSighting(2, "127.0.0.1", 9002, None, ALIVE, joining=True)
    assert plan_membership(metadata, {1: seen(1), 2: joining}, fence_unknown=True) == []
    assert plan_membership(metadata, {1: seen(1), 2: seen(2)}, fence_unknown=True)[0]["node_id"] == 2


def test_raft_join_is_off_unless_set():
    assert parse(block()).raft_join is False
    joining = block(raft={"listen": "127.0.0.1:7004", "join": True, "peers": {1: "127.0.0.1:7001"}})
    assert parse(joining, node_id=4).raft_join is True
