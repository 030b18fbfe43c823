"""``burrowpy serve`` against a three-node Apache Kafka 4.4 cluster (KRaft, every node broker and
controller, replication factor 3): the offsets topic's partitions are led by all three nodes, so the
monitor reads them from each leader; when the node leading a group's offsets partition is killed, the
monitor follows the new leader and the group's later commits still arrive. End-to-end probes reach every
node, and while one node is paused with SIGSTOP its probes fail alone (before the kill: it needs all three).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

import pytest
from burrow_support import CLUSTER, BurrowpyProcess, MonitorSettings
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from harness import wait_until
from kafka_harness import KafkaCluster
from monitor_support import OFFSETS_TOPIC
from probe_support import (
    PROBE_TOPIC,
    ProbingBurrowpy,
    check_paused_broker_fails_alone,
    check_probes_everywhere,
)

from broker.groups.hashing import offsets_partition_for

pytestmark = pytest.mark.integration

TOPIC = GROUP = "cluster-orders"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("kafka-cluster"), nodes=3) as running:
        yield running


def commit(bootstrap: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        wait_until(lambda: consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False) or True,
                   60, interval=0.5, message=f"a commit of offset {offset}")
    finally:
        consumer.close()


def end_offset(monitor: BurrowpyProcess) -> int | None:
    status, body = monitor.get(f"/v3/kafka/{CLUSTER}/consumer/{GROUP}/lag")
    if status != 200 or not body["status"]["partitions"]:
        return None
    end = body["status"]["partitions"][0]["end"]
    return end["offset"] if end else None


def offsets_leaders(bootstrap: str) -> dict[int, int]:
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    return {p.id: p.leader for p in topics[OFFSETS_TOPIC].partitions.values()}


@contextlib.contextmanager
def sigstopped(cluster: KafkaCluster, node_id: int) -> Iterator[None]:
    process = cluster.servers[node_id - 1].process
    assert process is not None
    os.kill(process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(process.pid, signal.SIGCONT)


def test_probes_reach_every_node_and_a_paused_one_fails_alone(cluster, tmp_path):
    nodes = [server.node_id for server in cluster.servers]
    settings = MonitorSettings(cluster.servers[0].bootstrap, offset_refresh=1, topic_refresh=1, expire_cache=1)
    with ProbingBurrowpy(tmp_path / "burrowpy", settings) as monitor:
        def leaders() -> dict[int, int] | None:
            topics = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(PROBE_TOPIC, timeout=10).topics
            found = {p.id: p.leader for p in topics[PROBE_TOPIC].partitions.values()}
            return found if sorted(found.values()) == nodes else None

        check_probes_everywhere(monitor, nodes, wait_until(leaders, 30, interval=0.2,
                                                           message="a probe partition led by each node"))
        # Kafka fences a broker silent for broker.session.timeout.ms (9 s) and moves its leaders; the check
        # is done well before that, so the next test still finds every node leading.
        check_paused_broker_fails_alone(monitor, nodes[-1], nodes[:-1], sigstopped(cluster, nodes[-1]))


def test_the_monitor_reads_every_leader_and_follows_a_new_one(cluster, tmp_path):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 1, 3)]).values():
        future.result(60)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for number in range(50):
        producer.produce(TOPIC, value=b"%d" % number, partition=0)
    assert producer.flush(30) == 0
    commit(cluster.bootstrap, 10)

    leaders = offsets_leaders(cluster.bootstrap)
    assert set(leaders.values()) == {1, 2, 3}  # the monitor will read partitions led by every node
    partition = offsets_partition_for(GROUP, len(leaders))
    leader = leaders[partition]
    survivor = next(server for server in cluster.servers if server.node_id != leader)
    # the monitor is given one node, as a Burrow config often is; it learns the others from it
    settings = MonitorSettings(survivor.bootstrap, intervals=4, offset_refresh=1, topic_refresh=1, expire_cache=1)
    with BurrowpyProcess(tmp_path / "burrowpy", settings) as monitor:
        wait_until(lambda: end_offset(monitor) == 10, 60, interval=0.2, message="the first commit in the monitor")
        cluster.servers[leader - 1].kill()
        wait_until(lambda: offsets_leaders(cluster.bootstrap).get(partition, leader) not in (leader, -1), 60,
                   interval=0.5, message=f"a new leader for {OFFSETS_TOPIC}-{partition}")
        commit(cluster.bootstrap, 30)
        wait_until(lambda: end_offset(monitor) == 30, 90, interval=0.2,
                   message="the commit written after the leader change in the monitor")
        status, body = monitor.get(f"/v3/kafka/{CLUSTER}/consumer/{GROUP}/lag")
        assert status == 200 and body["status"]["partitions"][0]["current_lag"] == 20
