"""kill -9 the broker in the middle of a produce stream: every acknowledged record survives the restart."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from harness import BrokerProcess, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 2


def test_acknowledged_records_survive_kill_9(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        topic = "crash"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
        acked: dict[tuple[int, int], bytes] = {}

        def delivered(err, msg) -> None:
            if err is None:
                acked[(msg.partition(), msg.offset())] = msg.value()

        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 1,
                             "message.timeout.ms": 3000, "retries": 0,
                             "reconnect.backoff.max.ms": 200})
        sent = 0
        killed = False
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if not killed:
                try:
                    producer.produce(topic, f"record-{sent:06d}".encode() * 3, partition=sent % PARTITIONS,
                                     on_delivery=delivered)
                    sent += 1
                except BufferError:
                    pass
            producer.poll(0.001 if not killed else 0.1)
            if not killed and len(acked) >= 3000:
                broker.kill()
                killed = True
            if killed and len(producer) == 0:
                break
        assert killed, "the broker was never killed: production too slow"
        assert len(producer) == 0, "in-flight messages did not resolve after the kill"

        broker.start()
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "crash-check",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        stored: dict[tuple[int, int], bytes] = {}
        last_acked = {p: max(o for (q, o) in acked if q == p) for p in range(PARTITIONS)}

        def caught_up() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                stored[(msg.partition(), msg.offset())] = msg.value()
            return all(any(q == p and o >= last_acked[p] for (q, o) in stored) for p in range(PARTITIONS))

        wait_until(caught_up, 60, interval=0, message="the restarted broker to serve every acknowledged record")
        missing = {k: v for k, v in acked.items() if stored.get(k) != v}
        assert not missing, f"{len(missing)} acknowledged records lost or changed, e.g. {list(missing)[:5]}"
        # Offsets stay dense after recovery: no holes below what was acknowledged.
        for p in range(PARTITIONS):
            offsets = sorted(o for (q, o) in stored if q == p)
            assert offsets == list(range(len(offsets)))

        # The restarted broker takes new writes and serves them.
        producer2 = Producer({"bootstrap.servers": broker.bootstrap})
        producer2.produce(topic, b"after-restart", partition=0)
        assert producer2.flush(30) == 0

        def sees_new() -> bool:
            msg = consumer.poll(0.5)
            return msg is not None and msg.error() is None and msg.value() == b"after-restart"

        wait_until(sees_new, 30, interval=0, message="the record produced after restart")
        consumer.close()
    finally:
        broker.stop()
