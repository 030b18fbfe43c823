"""Lag in seconds against the truth, on our broker and on a real Apache Kafka 4.4.

A producer writes records with timestamps the test chooses; a group commits an offset and then stops (only
commits, no consumer running); producers pause. The monitor's ``lag_seconds`` must be the age of the record
at the committed offset, within a second, keep growing while nothing happens, drop to 0 once the group has
caught up, use the broker's append time on LogAppendTime topics, and fall back to interpolation (saying so)
when the record has been deleted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from burrow_support import CLUSTER, BurrowpyProcess, MonitorSettings
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from harness import wait_until
from monitor_support import broker_offsets

pytestmark = pytest.mark.integration

OFFSET_REFRESH = 1


@pytest.fixture(scope="module", params=["burrowpy-broker", "kafka-4.4"])
def cluster(request, tmp_path_factory) -> Iterator[tuple[str, BurrowpyProcess]]:
    server = request.getfixturevalue("broker" if request.param == "burrowpy-broker" else "kafka")
    settings = MonitorSettings(server.bootstrap, intervals=4, offset_refresh=OFFSET_REFRESH, topic_refresh=1,
                               expire_cache=0)
    with BurrowpyProcess(tmp_path_factory.mktemp("monitor") / "burrowpy", settings) as monitor:
        yield server.bootstrap, monitor


def create_topic(bootstrap: str, topic: str, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=config or {})]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, timestamps_ms: list[int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for number, timestamp in enumerate(timestamps_ms):
        producer.produce(topic, value=b"record %d" % number, partition=0, timestamp=timestamp)
    assert producer.flush(30) == 0


def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    """A group that commits and is gone: no member keeps consuming."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        wait_until(lambda: consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False) or True,
                   60, interval=0.5, message=f"{group}'s commit of {topic}:{offset}")
    finally:
        consumer.close()


def record_timestamp(bootstrap: str, topic: str, offset: int) -> tuple[int, int]:
    """(timestamp type, timestamp) of one record, read back with a consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, offset)])
        message = wait_until(lambda: consumer.poll(0.5), 30, message=f"record {offset} of {topic}")
        assert message.error() is None and message.offset() == offset
        return message.timestamp()
    finally:
        consumer.close()


def lag_reading(monitor: BurrowpyProcess, group: str) -> tuple[float, dict, float] | None:
    """(time before asking, the partition's JSON, time after): the true age lies between the two times."""
    before = time.time()
    status, body = monitor.get(f"/v3/kafka/{CLUSTER}/consumer/{group}/lag")
    after = time.time()
    if status != 200 or not body["status"]["partitions"]:
        return None
    return before, body["status"]["partitions"][0], after


def wait_for_method(monitor: BurrowpyProcess, group: str, method: str) -> tuple[float, dict, float]:
    def ready() -> tuple[float, dict, float] | None:
        reading = lag_reading(monitor, group)
        return reading if reading and reading[1]["lag_seconds_method"] == method else None

    return wait_until(ready, 60, interval=0.2, message=f"{group}'s lag in seconds by {method}")


def assert_age(reading: tuple[float, dict, float], record_ms: float, tolerance: float = 1.0) -> float:
    before, partition, after = reading
    lowest, highest = before - record_ms / 1000, after - record_ms / 1000
    assert lowest - tolerance <= partition["lag_seconds"] <= highest + tolerance, (partition, lowest, highest)
    return partition["lag_seconds"]


def test_a_stopped_group_ages_exactly_and_keeps_ageing_while_producers_pause(cluster):
    bootstrap, monitor = cluster
    group = topic = f"age-{monitor.settings.bootstrap.rsplit(':', 1)[1]}"
    create_topic(bootstrap, topic)
    start = int(time.time() * 1000)
    stamps = [start - 600_000 + number * 10_000 for number in range(10)]  # 10 minutes ago, 10 s apart
    produce(bootstrap, topic, stamps)
    wait_until(lambda: broker_offsets(monitor, topic) == [10], 60, interval=0.2, message=f"{topic}'s offsets")
    commit(bootstrap, group, topic, 4)

    first = wait_for_method(monitor, group, "fetch")
    age = assert_age(first, stamps[4])
    assert 540 < age < 600
    # Producers paused, group stopped: the figure keeps growing with the clock.
    later = wait_until(lambda: (r := lag_reading(monitor, group)) and r[1]["lag_seconds"] >= age + 2 and r, 30,
                       interval=0.2, message="lag in seconds to grow")
    assert later[1]["lag_seconds_method"] == "fetch"
    assert_age(later, stamps[4])

    _, metrics = monitor.get("/metrics")
    assert f'burrow_kafka_consumer_partition_lag_seconds{{cluster="{CLUSTER}",consumer_group="{group}",' \
           f'partition="0",topic="{topic}"}}' in metrics
    _, status = monitor.get(f"/v3/kafka/{CLUSTER}/consumer/{group}/status")
    assert status["status"]["max_lag_seconds"] >= age

    commit(bootstrap, group, topic, 10)
    caught_up = wait_for_method(monitor, group, "caught_up")
    assert caught_up[1]["lag_seconds"] == 0


def test_log_append_time_topics_age_from_the_brokers_time(cluster):
    bootstrap, monitor = cluster
    group = topic = f"append-time-{monitor.settings.bootstrap.rsplit(':', 1)[1]}"
    create_topic(bootstrap, topic, {"message.timestamp.type": "LogAppendTime"})
    a_day_ago = int(time.time() * 1000) - 86_400_000
    produce(bootstrap, topic, [a_day_ago] * 5)  # the producer's times are replaced by the broker's
    wait_until(lambda: broker_offsets(monitor, topic) == [5], 60, interval=0.2, message=f"{topic}'s offsets")
    timestamp_type, appended = record_timestamp(bootstrap, topic, 2)
    assert timestamp_type == 2 and appended > a_day_ago + 80_000_000  # TIMESTAMP_LOG_APPEND_TIME
    commit(bootstrap, group, topic, 2)
    assert_age(wait_for_method(monitor, group, "fetch"), appended)


def test_a_deleted_record_falls_back_to_interpolation(cluster):
    bootstrap, monitor = cluster
    group = topic = f"deleted-{monitor.settings.bootstrap.rsplit(':', 1)[1]}"
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, [int(time.time() * 1000)] * 5)
    wait_until(lambda: broker_offsets(monitor, topic) == [5], 60, interval=0.2, message=f"{topic}'s offsets")
    # The monitor has now seen the log end at 5; the next five records are appended between two of its
    # samples, one refresh apart.
    appended = time.time()
    produce(bootstrap, topic, [int(appended * 1000)] * 5)
    wait_until(lambda: broker_offsets(monitor, topic) == [10], 60, interval=0.2, message=f"{topic}'s offsets")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, 8)]).values():
        future.result(30)
    commit(bootstrap, group, topic, 6)

    reading = wait_for_method(monitor, group, "interpolated")
    assert_age(reading, appended * 1000, tolerance=OFFSET_REFRESH + 1.0)
