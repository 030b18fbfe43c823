"""Partition replication between broker processes on 127.0.0.1.

Each broker is a real process (replication_harness.py): leadership is assigned by hand, as the cluster
layer will assign it, and everything else is the real thing: follower fetchers over TCP, OffsetForLeaderEpoch,
the produce path with acks=all, real clients.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from harness import free_port, wait_until
from replication_harness import ReplicationNode

from broker.client import KafkaConnection
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey
from broker.protocol.records import Record, build_batch

pytestmark = pytest.mark.integration

LAG_MS = 3000
NODE_CONFIG = {
    "replica.lag.time.max.ms": LAG_MS,
    "offsets.topic.num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
}


@pytest.fixture
def nodes(tmp_path):
    """Three broker processes that know each other; stopped (or killed) at the end."""
    ports = {node_id: free_port() for node_id in (1, 2, 3)}
    started = {node_id: ReplicationNode(node_id, port, tmp_path / f"data-{node_id}", ports, NODE_CONFIG)
               for node_id, port in ports.items()}
    try:
        for node in started.values():
            node.launch()
        for node in started.values():
            node.wait_ready()
        yield started
    finally:
        for node in started.values():
            node.end_commands()
        for node in started.values():
            node.stop()


def create_everywhere(nodes, topic: str, configs: dict | None = None) -> None:
    for node in nodes:
        node.command("create_topic", topic=topic, partitions=1, configs=configs or {})


def values(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


async def produce(node: ReplicationNode, topic: str, texts: list[str], *, acks: int,
                  timeout_ms: int = 10000) -> dict:
    """One Produce request with one batch; the partition's answer."""
    batch = build_batch([Record(i, int(time.time() * 1000), None, text.encode()) for i, text in enumerate(texts)])
    async with await KafkaConnection.connect(node.bootstrap) as connection:
        response = await connection.request(ApiKey.PRODUCE, {
            "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        })
    return response["responses"][0]["partition_responses"][0]


def same_log(leader: ReplicationNode, *followers: ReplicationNode, topic: str):
    """The leader's description once every follower holds exactly its log, with its high watermark."""
    expected = leader.describe(topic)
    for follower in followers:
        got = follower.describe(topic)
        if (got["digest"], got["log_end_offset"], got["high_watermark"]) != (
                expected["digest"], expected["log_end_offset"], expected["high_watermark"]):
            return None
    return expected


def test_followers_catch_up_join_the_isr_and_serve_real_clients(nodes):
    leader, f2, f3 = nodes[1], nodes[2], nodes[3]
    topic = "catch-up"
    # small segments: the leader's appends and the followers' roll them (off the event loop) a few times over
    create_everywhere(nodes.values(), topic, {"segment.bytes": 2048})
    leader.command("lead", topic=topic, partition=0, epoch=0, replicas=[1, 2, 3], isr=[1])

    producer = Producer({"bootstrap.servers": leader.bootstrap, "acks": "all", "linger.ms": 5,
                         "batch.num.messages": 20})
    for text in values("early-", 300):
        producer.produce(topic, value=text.encode(), partition=0)
    assert producer.flush(30) == 0
    assert leader.describe(topic)["log_end_offset"] == 300

    # Followers start from nothing while the leader has 300 records: they catch up and join the ISR.
    f2.command("follow", topic=topic, partition=0, epoch=0, leader=1, replicas=[1, 2, 3])
    f3.command("follow", topic=topic, partition=0, epoch=0, leader=1, replicas=[1, 2, 3])
    wait_until(lambda: leader.describe(topic)["isr"] == [1, 2, 3], 30, message="both followers in the ISR")
    wait_until(lambda: same_log(leader, f2, f3, topic=topic), 30, message="followers with the leader's log")

    # With the ISR complete, acks=all from a real client; a consumer sees every acknowledged record.
    delivered = []
    for text in values("late-", 200):
        producer.produce(topic, value=text.encode(), partition=0,
                         on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None] * 200
    state = wait_until(lambda: same_log(leader, f2, f3, topic=topic), 30, message="followers up to date")
    assert state["values"] == values("early-", 300) + values("late-", 200)
    assert state["high_watermark"] == 500
    assert min(node.describe(topic)["segments"] for node in (leader, f2, f3)) >= 4

    consumer = Consumer({"bootstrap.servers": leader.bootstrap, "group.id": "replication-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[str] = []

    def drain() -> bool:
        message = consumer.poll(0.5)
        if message is not None:
            assert message.error() is None, message.error()
            got.append(message.value().decode())
        return len(got) == 500

    wait_until(drain, 60, interval=0, message="the consumer to read all 500 records")
    consumer.close()
    assert got == values("early-", 300) + values("late-", 200)


async def test_acks_all_waits_for_the_in_sync_replicas(nodes):
    leader, follower = nodes[1], nodes[2]
    topic = "acks-all"
    create_everywhere([leader, follower], topic, {"min.insync.replicas": "2"})
    leader.command("lead", topic=topic, partition=0, epoch=0, replicas=[1, 2], isr=[1, 2])
    follower.command("follow", topic=topic, partition=0, epoch=0, leader=1, replicas=[1, 2])

    # Acknowledged means the follower has it: right after the answer, without waiting.
    for round_ in range(5):
        answer = await produce(leader, topic, values(f"r{round_}-", 3), acks=-1)
        assert answer["error_code"] == 0
        assert follower.describe(topic)["log_end_offset"] >= answer["base_offset"] + 3

    # The follower freezes. acks=all cannot complete; the record is written but not committed.
    follower.pause()
    committed = leader.describe(topic)["high_watermark"]
    started = time.monotonic()
    answer = await produce(leader, topic, ["uncommitted"], acks=-1, timeout_ms=1000)
    assert answer["error_code"] == ErrorCode.REQUEST_TIMED_OUT
    assert time.monotonic() - started >= 0.9
    described = leader.describe(topic)
    assert described["high_watermark"] == committed
    assert described["log_end_offset"] == committed + 1

    # Still frozen: after replica.lag.time.max.ms the follower leaves the ISR. A producer waiting then is
    # told its batch is committed by fewer replicas than min.insync.replicas.
    answer = await produce(leader, topic, ["after-append"], acks=-1, timeout_ms=LAG_MS * 4)
    assert answer["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert leader.describe(topic)["isr"] == [1]
    answer = await produce(leader, topic, ["refused"], acks=-1)
    assert answer["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS
    answer = await produce(leader, topic, ["one-ack"], acks=1)
    assert answer["error_code"] == 0

    # The follower comes back, catches up, rejoins; acks=all works again.
    follower.resume()
    wait_until(lambda: leader.describe(topic)["isr"] == [1, 2], 30, message="the follower to rejoin the ISR")
    answer = await produce(leader, topic, ["back"], acks=-1)
    assert answer["error_code"] == 0
    state = wait_until(lambda: same_log(leader, follower, topic=topic), 30, message="identical logs")
    assert state["values"][-4:] == ["uncommitted", "after-append", "one-ack", "back"]


async def test_returning_leader_truncates_its_divergent_tail(nodes):
    old_leader, new_leader = nodes[1], nodes[2]
    topic = "diverge"
    create_everywhere([old_leader, new_leader], topic)
    old_leader.command("lead", topic=topic, partition=0, epoch=0, replicas=[1, 2], isr=[1, 2])
    new_leader.command("follow", topic=topic, partition=0, epoch=0, leader=1, replicas=[1, 2])
    assert (await produce(old_leader, topic, values("a", 5), acks=-1))["error_code"] == 0

    # Node 2 stops replicating; node 1 takes three more records with acks=1 and then dies.
    new_leader.command("stop_replica", topic=topic, partition=0)
    assert (await produce(old_leader, topic, values("lost", 3), acks=1))["error_code"] == 0
    assert old_leader.describe(topic)["log_end_offset"] == 8
    old_leader.kill()

    # Node 2 leads epoch 1 and writes different records at the same offsets.
    new_leader.command("lead", topic=topic, partition=0, epoch=1, replicas=[1, 2], isr=[2])
    assert (await produce(new_leader, topic, values("b", 2), acks=-1))["error_code"] == 0

    # Node 1 returns as a follower: it asks where epoch 0 ends (5), cuts "lost*", fetches "b*", rejoins.
    old_leader.start()
    old_leader.command("follow", topic=topic, partition=0, epoch=1, leader=2, replicas=[1, 2])
    state = wait_until(lambda: same_log(new_leader, old_leader, topic=topic), 30,
                       message="the returning broker to hold the new leader's log")
    assert state["values"] == values("a", 5) + values("b", 2)
    assert old_leader.describe(topic)["epochs"] == [[0, 0], [1, 5]]
    wait_until(lambda: new_leader.describe(topic)["isr"] == [1, 2], 30, message="node 1 back in the ISR")
    assert "truncating divergent log tail" in old_leader.log_text()
