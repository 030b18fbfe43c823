"""The Java client (kafka-clients 4.4) and Kafka Streams against our broker, with their default settings.

tests/peers/java/.../JavaClients.java runs the producer (idempotent, acks=all by default), a consumer in a
group, and the AdminClient's topic, config, group and records calls, printing what each returned; what the
broker really did is checked here with librdkafka. WordCount.java is a Kafka Streams application
(at-least-once) whose counts are read back from its output topic.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from harness import wait_until
from kafka_harness import java_peer, run_word_count

pytestmark = pytest.mark.integration

CLIENTS = "burrowpy.peers.JavaClients"


def steps(broker, *args: str) -> dict[str, object]:
    output = java_peer(CLIENTS, args[0], broker.bootstrap, *args[1:]).stdout
    return {line["step"]: line["value"] for line in map(json.loads, output.splitlines())}


def create_topic(broker, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def read_all(broker, topic: str, partitions: int, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic}-check",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    messages: list = []
    try:
        def enough() -> bool:
            messages.extend(m for m in consumer.consume(500, timeout=0.5) if m.error() is None)
            return len(messages) >= count
        wait_until(enough, 60, interval=0, message=f"{count} records of {topic}")
    finally:
        consumer.close()
    return messages


def test_admin_client_topics_and_configs(broker):
    done = steps(broker, "admin", "java-admin")
    assert done["created"] == "java-admin" and done["listed"] is True
    assert done["described"] == {"partitions": 3, "topic_id_set": True}
    assert done["configs"] == {"retention.ms": "7200000", "cleanup.policy": "compact",
                               "retention.ms.source": "DYNAMIC_TOPIC_CONFIG"}
    assert done["partitions"] == 5
    assert done["deleted"] == "java-admin"
    assert "java-admin" not in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics


def test_producer_consumer_and_the_admin_clients_group_calls(broker):
    create_topic(broker, "java-data", 3)
    produced = steps(broker, "produce", "java-data", "30")["produced"]
    stored = {(m.partition(), m.offset()): (m.key().decode(), m.value().decode())
              for m in read_all(broker, "java-data", 3, 30)}
    assert {(r["partition"], r["offset"]): (r["key"], r["key"].replace("key", "value")) for r in produced} == stored

    consumed = steps(broker, "consume", "java-data", "java-group", "30")
    assert Counter(r["key"] for r in consumed["consumed"]) == Counter(f"key-{i}" for i in range(30))
    ends = Counter(partition for partition, _ in stored)
    assert {int(p): o for p, o in consumed["committed"].items()} == dict(ends)

    groups = steps(broker, "groups", "java-data", "java-group")
    assert [(g["group"], g["type"].lower(), g["protocol"]) for g in groups["listed"]] == [
        ("java-group", "classic", "consumer")]
    assert groups["described"] == {"state": "Empty", "members": 0}
    assert {int(p): o for p, o in groups["offsets"].items()} == dict(ends)
    # alterConsumerGroupOffsets(partition 0 -> 1), deleteConsumerGroupOffsets(partition 1)
    assert {int(p): o for p, o in groups["altered"].items()} == {0: 1, 2: ends[2]}
    assert groups["records_deleted"] == {"0": 1}
    checker = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "java-check-low"})
    try:
        low, _ = checker.get_watermark_offsets(TopicPartition("java-data", 0), timeout=10)
    finally:
        checker.close()
    assert low == 1
    assert groups["group_deleted"] is True


def test_kafka_streams_word_count(broker, tmp_path):
    create_topic(broker, "words-in", 2)
    app = run_word_count(broker.bootstrap, "word-count", "words-in", "words-out", tmp_path / "state")
    code = app.exit_code
    assert code in (0, 143), app.stderr()[-3000:]
    assert app.lines[-1] == {"state": "NOT_RUNNING"}
    # Streams created its repartition and changelog topics on our broker, the changelog compacted
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    internal = sorted(t for t in admin.list_topics(timeout=10).topics if t.startswith("word-count-"))
    changelogs = [t for t in internal if t.endswith("-changelog")]
    assert any(t.endswith("-repartition") for t in internal) and len(changelogs) == 1
    resource = ConfigResource("topic", changelogs[0])
    assert admin.describe_configs([resource])[resource].result(30)["cleanup.policy"].value == "compact"
