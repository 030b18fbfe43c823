"""Apache Kafka 4.4's own command-line tools against our broker, unchanged (run through their main classes,
as kafka-topics.sh and friends do): topics, consumer groups, the console producer and consumer, the
producer and consumer performance tools, log dirs and producers (the metadata quorum: test_cluster.py). What
each tool did is checked with librdkafka, not with the tool.
"""

from __future__ import annotations

import json
import re

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from harness import create_topics, wait_until
from kafka_harness import java_peer

pytestmark = pytest.mark.integration

TOPICS = "org.apache.kafka.tools.TopicCommand"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"


def tool(main_class: str, broker, *args: str, input: str | None = None) -> str:
    completed = java_peer(main_class, "--bootstrap-server", broker.bootstrap, *args, input=input)
    return completed.stdout


def partitions_of(broker, topic: str) -> int | None:
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)  # no auto-creation
    found = metadata.topics.get(topic)
    return None if found is None or found.error is not None else len(found.partitions)


def committed(broker, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        answer = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in answer if tp.offset >= 0}


def test_kafka_topics(broker):
    tool(TOPICS, broker, "--create", "--topic", "tools-topics", "--partitions", "3", "--replication-factor", "1",
         "--config", "retention.ms=100000")
    assert partitions_of(broker, "tools-topics") == 3
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    config = admin.describe_configs([ConfigResource("topic", "tools-topics")])[ConfigResource("topic", "tools-topics")] \
        .result(30)
    assert config["retention.ms"].value == "100000"

    assert "tools-topics" in tool(TOPICS, broker, "--list").split()
    description = tool(TOPICS, broker, "--describe", "--topic", "tools-topics")
    assert re.search(r"Topic: tools-topics\s+TopicId: \S+\s+PartitionCount: 3\s+ReplicationFactor: 1\s+"
                     r"Configs: retention.ms=100000", description)
    # Kafka 3.8+'s tool describes through DescribeTopicPartitions when the broker serves it (then it shows ELRs)
    assert len(re.findall(r"Partition: \d\s+Leader: 1\s+Replicas: 1\s+Isr: 1\s+Elr: \s+LastKnownElr: ",
                          description)) == 3
    # pages of two partitions: the tool follows the answers' cursors through every topic
    paged = tool(TOPICS, broker, "--describe", "--partition-size-limit-per-response", "2")
    assert re.findall(r"Topic: tools-topics\s+Partition: (\d)", paged) == ["0", "1", "2"]
    assert len(re.findall(r"Topic: __consumer_offsets\s+Partition: \d+", paged)) == 50

    tool(TOPICS, broker, "--alter", "--topic", "tools-topics", "--partitions", "5")
    assert partitions_of(broker, "tools-topics") == 5
    tool(TOPICS, broker, "--delete", "--topic", "tools-topics")
    wait_until(lambda: partitions_of(broker, "tools-topics") is None, 30, message="the topic to be deleted")


def test_console_producer_and_consumer_then_consumer_groups(broker):
    tool(TOPICS, broker, "--create", "--topic", "tools-console", "--partitions", "2", "--replication-factor", "1")
    lines = [f"line {n}" for n in range(10)]
    tool("org.apache.kafka.tools.ConsoleProducer", broker, "--topic", "tools-console", input="\n".join(lines) + "\n")
    consumed = tool("org.apache.kafka.tools.consumer.ConsoleConsumer", broker, "--topic", "tools-console",
                    "--from-beginning", "--max-messages", "10", "--group", "tools-group", "--timeout-ms", "30000")
    assert sorted(consumed.splitlines()) == sorted(lines)
    ends = committed(broker, "tools-group", "tools-console", 2)
    assert sum(ends.values()) == 10

    assert "tools-group" in tool(GROUPS, broker, "--list").split()
    rows = [line.split() for line in tool(GROUPS, broker, "--describe", "--group", "tools-group").splitlines()
            if line.startswith("tools-group ")]
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
    assert {(r[1], int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in rows} == {
        ("tools-console", p, offset, offset, 0) for p, offset in ends.items()}

    reset = tool(GROUPS, broker, "--group", "tools-group", "--topic", "tools-console", "--reset-offsets",
                 "--to-earliest", "--execute")
    assert "NEW-OFFSET" in reset
    assert committed(broker, "tools-group", "tools-console", 2) == dict.fromkeys(ends, 0)
    fuller = max(ends, key=ends.get)  # the tool clamps offsets to the log end: reset where there are records
    tool(GROUPS, broker, "--group", "tools-group", "--topic", f"tools-console:{fuller}", "--reset-offsets",
         "--to-offset", "3", "--execute")
    assert committed(broker, "tools-group", "tools-console", 2)[fuller] == 3

    deleted = tool(GROUPS, broker, "--group", "tools-group", "--topic", "tools-console", "--delete-offsets")
    assert "Successful" in deleted
    assert committed(broker, "tools-group", "tools-console", 2) == {}
    # As on Kafka 4, the emptied group is still there for --delete
    assert "was successful" in tool(GROUPS, broker, "--group", "tools-group", "--delete")
    assert "tools-group" not in tool(GROUPS, broker, "--list").split()


def test_performance_tools(broker):
    tool(TOPICS, broker, "--create", "--topic", "tools-perf", "--partitions", "2", "--replication-factor", "1")
    # the Java producer's defaults: idempotent, acks=all
    produced = java_peer("org.apache.kafka.tools.ProducerPerformance", "--topic", "tools-perf", "--num-records",
                         "20000", "--record-size", "100", "--throughput", "-1", "--producer-props",
                         f"bootstrap.servers={broker.bootstrap}").stdout
    assert re.search(r"^20000 records sent, [\d.]+ records/sec", produced, re.MULTILINE), produced
    read = tool("org.apache.kafka.tools.ConsumerPerformance", broker, "--topic", "tools-perf", "--messages", "20000",
                "--timeout", "60000", "--hide-header")
    values = [line.split(", ") for line in read.splitlines() if line.count(", ") >= 9]
    assert values and int(values[-1][4]) == 20000, read
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "tools-perf-check"})
    try:
        ends = [consumer.get_watermark_offsets(TopicPartition("tools-perf", p), timeout=10) for p in range(2)]
    finally:
        consumer.close()
    assert sum(high for _, high in ends) == 20000


def test_log_dirs_and_producers(broker):
    create_topics({"bootstrap.servers": broker.bootstrap}, "tools-dirs", partitions=2)  # no JVM for this
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for n in range(5):
        producer.produce("tools-dirs", b"value-%d" % n, partition=0)
        producer.flush(30)  # a batch each: the last sequence is the fifth record's
    assert producer.flush(30) == 0

    printed = tool(LOG_DIRS, broker, "--describe", "--topic-list", "tools-dirs")
    described = json.loads(printed.splitlines()[-1])
    [only] = described["brokers"]
    [log_dir] = only["logDirs"]
    assert only["broker"] == 1 and log_dir["error"] is None and log_dir["logDir"].endswith("/logs")
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    assert set(sizes) == {"tools-dirs-0", "tools-dirs-1"} and sizes["tools-dirs-1"] == 0
    assert sizes["tools-dirs-0"] > 5 * len(b"value-0")
    assert all(p["offsetLag"] == 0 and not p["isFuture"] for p in log_dir["partitions"])

    rows = [line.split() for line in tool(TRANSACTIONS, broker, "describe-producers", "--topic", "tools-dirs",
                                          "--partition", "0").splitlines()[1:]]
    # ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp CurrentTransactionStartOffset
    assert [(row[1], row[3], row[5]) for row in rows] == [("0", "4", "None")]
