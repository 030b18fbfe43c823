"""Go clients against our broker: Sarama, franz-go and segmentio/kafka-go, each with a small program of
ours (tests/peers/go, built by ``make install``) that produces, and consumes in a group and commits.

What each library does is checked independently of it: produced records are read back with
confluent-kafka (offsets, keys, values, headers), the group's members are seen through confluent-kafka's
AdminClient before anything is produced (so no rebalance happens while they read and every record is read
exactly once), and the committed offsets are read back with a confluent-kafka consumer of the group.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from harness import ROOT, JsonLinesProcess, wait_until

pytestmark = pytest.mark.integration

BIN = ROOT / "tests" / "peers" / "go" / "bin"
PEERS = {"sarama": "sarama-peer", "franz-go": "franz-peer", "kafka-go": "kafkago-peer"}
PARTITIONS = 4
RECORDS = 40


def peer_binary(library: str) -> Path:
    binary = BIN / PEERS[library]
    assert binary.is_file(), f"{binary} is missing: make install builds the Go peers"
    return binary


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)


def events(output: str, kind: str) -> list[dict]:
    return [event for event in map(json.loads, output.splitlines()) if event["event"] == kind]


def read_back(bootstrap: str, topic: str, count: int) -> dict[tuple[int, int], tuple[str, str, dict]]:
    """Every record of the topic as (partition, offset) -> (key, value, headers), read with librdkafka."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    records = {}
    try:
        def all_read() -> bool:
            for message in consumer.consume(100, timeout=0.5):
                assert message.error() is None, message.error()
                headers = {k: v.decode() for k, v in (message.headers() or [])}
                records[(message.partition(), message.offset())] = (message.key().decode(), message.value().decode(),
                                                                    headers)
            return len(records) >= count
        wait_until(all_read, 60, interval=0, message=f"{count} records of {topic}")
    finally:
        consumer.close()
    return records


class Member(JsonLinesProcess):
    """One consumer process of a peer."""

    def __init__(self, library: str, bootstrap: str, topic: str, group: str) -> None:
        super().__init__([str(peer_binary(library)), "consume", "--bootstrap", bootstrap, "--topic", topic,
                          "--group", group])

    def consumed(self) -> list[dict]:
        return [line for line in self.lines if line["event"] == "consumed"]


def group_members(admin: AdminClient, group: str) -> dict[str, list[int]] | None:
    """member id -> assigned partitions, once the group is stable; None before."""
    description = admin.describe_consumer_groups([group])[group].result(10)
    if description.state != ConsumerGroupState.STABLE:
        return None
    return {m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions) for m in description.members}


@pytest.mark.parametrize("library", list(PEERS))
def test_produce_with_keys_values_and_headers(broker, library):
    topic = f"go-produce-{library}"
    create_topic(broker.bootstrap, topic)
    completed = subprocess.run([str(peer_binary(library)), "produce", "--bootstrap", broker.bootstrap, "--topic",
                                topic, "--count", str(RECORDS)], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    produced = events(completed.stdout, "produced")
    assert sorted(int(e["key"].removeprefix("key-")) for e in produced) == list(range(RECORDS))
    stored = read_back(broker.bootstrap, topic, RECORDS)
    assert {(e["partition"], e["offset"]): (e["key"], e["value"]) for e in produced} == {
        position: (key, value) for position, (key, value, _) in stored.items()}
    assert all(headers == {"peer": library} for _, _, headers in stored.values())
    # each partition's offsets are contiguous from 0, and the keys went to more than one partition
    by_partition = Counter(partition for partition, _ in stored)
    assert len(by_partition) > 1
    assert set(stored) == {(p, o) for p, n in by_partition.items() for o in range(n)}


@pytest.mark.parametrize("library", list(PEERS))
def test_two_members_share_a_topic_read_each_record_once_and_commit(broker, library):
    topic, group = f"go-group-{library}", f"go-group-{library}"
    create_topic(broker.bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    members = [Member(library, broker.bootstrap, topic, group) for _ in range(2)]
    try:
        assignment = wait_until(lambda: (a := group_members(admin, group)) and len(a) == 2 and a, 60, interval=0.2,
                                message=f"{library}: a stable group of two members")
        assert sorted(p for partitions in assignment.values() for p in partitions) == list(range(PARTITIONS))
        assert all(assignment.values()), f"a member got no partition: {assignment}"

        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(RECORDS):
            producer.produce(topic, key=b"key-%d" % i, value=b"value-%d" % i, headers={"from": b"librdkafka"})
        assert producer.flush(30) == 0
        wait_until(lambda: sum(len(m.consumed()) for m in members) >= RECORDS, 60, interval=0.1,
                   message=f"{library}: the members to read {RECORDS} records")
        ends = dict(Counter(e["partition"] for m in members for e in m.consumed()))
    finally:
        codes = [member.stop() for member in members]
    for member, code in zip(members, codes, strict=True):
        assert code == 0, member.stderr()
    consumed = [e for m in members for e in m.consumed()]
    assert Counter(e["key"] for e in consumed) == Counter(f"key-{i}" for i in range(RECORDS))  # each exactly once
    assert all(e["value"] == e["key"].replace("key", "value") and e["headers"] == {"from": "librdkafka"}
               for e in consumed)
    assert all(m.consumed() for m in members), "one member read nothing"
    assert all(m.lines[-1]["event"] == "closed" for m in members), [m.lines[-3:] for m in members]

    checker = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committed = checker.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        checker.close()
    assert sorted(ends) == list(range(PARTITIONS))  # the keys reached every partition
    assert {tp.partition: tp.offset for tp in committed} == ends  # each partition committed to its end
