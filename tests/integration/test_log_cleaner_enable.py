"""log.cleaner.enable on a real broker process: off, a compacted topic keeps every duplicate; on, the
cleaner removes them."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from harness import BrokerProcess, create_topics, unique_name, wait_until

pytestmark = pytest.mark.integration

KEYS = 5
ROUNDS = 60


def broker_config(enable: bool) -> dict:
    # every topic compacted, small segments (the active one is never cleaned), a pass every 100 ms
    return {"log.cleaner.enable": enable, "log.cleanup.policy": "compact", "log.segment.bytes": 1024,
            "log.cleaner.backoff.ms": 100}


def produce_rounds(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for round_ in range(ROUNDS):
        for key in range(KEYS):
            producer.produce(topic, key=b"key-%d" % key, value=b"round-%d-%s" % (round_, b"x" * 40))
        producer.flush(10)
    assert producer.flush(10) == 0


def stored_records(bootstrap: str, topic: str) -> int:
    """How many records a consumer reads from the start of the partition to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("count"),
                         "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        count = 0
        while True:
            message = consumer.poll(10)
            assert message is not None, "no end of partition in time"
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                return count
            count += 1
    finally:
        consumer.close()


def test_cleaner_disabled_keeps_duplicates_enabled_removes_them(tmp_path: Path) -> None:
    written = KEYS * ROUNDS
    for name in ("on", "off"):
        (tmp_path / name).mkdir()
    with BrokerProcess(tmp_path / "on" / "data", extra_config=broker_config(True)) as on, \
            BrokerProcess(tmp_path / "off" / "data", extra_config=broker_config(False)) as off:
        topic = unique_name("compacted")
        for broker in (on, off):
            create_topics({"bootstrap.servers": broker.bootstrap}, topic)
            produce_rounds(broker.bootstrap, topic)
        wait_until(lambda: stored_records(on.bootstrap, topic) < written / 2, timeout=30,
                   message="the enabled cleaner to compact the topic")
        # a second round gives the disabled broker as many passes again as the enabled one needed
        for broker in (on, off):
            produce_rounds(broker.bootstrap, topic)
        wait_until(lambda: stored_records(on.bootstrap, topic) < written, timeout=30,
                   message="the enabled cleaner to compact the second round")
        assert stored_records(off.bootstrap, topic) == 2 * written
        assert "log.cleaner.enable is false" in off.log_text() and "log.cleaner.enable" not in on.log_text()
