"""The pipeline against our broker and a real Apache Kafka 4.4: Spark's own Kafka source and our
broker-offsets source (batch, streaming), and the streaming job.

Each test runs on both (the module's `server` fixture), with real librdkafka clients and real Spark in
local mode; Spark's Kafka source comes from the jars `make install` put in .venv/spark-jars.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from harness import wait_until

from burrowpy.pipeline.offsets_decoder import commits_from_records
from burrowpy.pipeline.replay import ReplaySettings
from burrowpy.pipeline.session import build_session
from burrowpy.pipeline.stream import StreamSettings, start_stream

pytestmark = pytest.mark.integration

# Each look at a stream's output is a Spark job (a scan, a sort) competing with the stream's own
# micro-batches for the JVM: polled every 50 ms it took a core; the output changes at most once a trigger.
POLL_S = 1.0


@pytest.fixture(scope="module", params=["broker", "kafka"])
def server(request):
    """Our broker, then Apache Kafka 4.4."""
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def spark():
    return build_session("local[2]", app_name="burrowpy-tests", shuffle_partitions=2)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(10)


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for index in range(count):
        producer.produce(
            topic, key=f"k{index}".encode(), value=f"v{index}".encode(), partition=index % partitions
        )
    assert producer.flush(10) == 0


def commit_offsets(bootstrap: str, group: str, topic: str, offsets: list[int], partition: int = 0) -> None:
    """Commit each offset in turn for one partition, as a simple (assign-only) consumer does."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        for offset in offsets:
            consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        consumer.close()


def test_batch_read_of_a_topic_by_partition_and_range(spark, server):
    create_topic(server.bootstrap, "pipeline-read", 3)
    produce(server.bootstrap, "pipeline-read", 90, 3)
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", server.bootstrap)
    records = reader.option("subscribe", "pipeline-read").load()
    assert records.rdd.getNumPartitions() == 3  # one Spark partition per topic partition
    rows = records.collect()
    assert len(rows) == 90
    assert {(r.partition, r.offset) for r in rows} == {(p, o) for p in range(3) for o in range(30)}
    assert {bytes(r.value) for r in rows} == {f"v{i}".encode() for i in range(90)}
    ranged = (
        reader.option("subscribe", "pipeline-read")
        .option("startingOffsets", '{"pipeline-read": {"0": 10, "1": 30, "2": -2}}')
        .option("endingOffsets", '{"pipeline-read": {"0": 20, "1": -1, "2": -1}}')
        .load()
        .collect()
    )
    # partition 0: [10, 20); partition 1: from its end (nothing); partition 2: earliest (-2) to latest
    assert sorted((r.partition, r.offset) for r in ranged) == (
        [(0, o) for o in range(10, 20)] + [(2, o) for o in range(30)]
    )
    fresh = spark.read.format("kafka").option("kafka.bootstrap.servers", server.bootstrap)
    assert fresh.option("subscribe", "pipeline-no-such-topic").load().collect() == []  # as a topic with no records
    with pytest.raises(Exception, match="kafka.bootstrap.servers"):
        spark.read.format("kafka").option("subscribe", "x").load().collect()


def test_offsets_topic_decoded_into_commits_and_broker_samples(spark, server):
    create_topic(server.bootstrap, "pipeline-decode", 2)
    produce(server.bootstrap, "pipeline-decode", 40, 2)
    commit_offsets(server.bootstrap, "pipeline-decode-group", "pipeline-decode", [5, 9, 12], partition=1)
    records = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", server.bootstrap)
        .option("subscribe", "__consumer_offsets")
        .option("kafka.exclude.internal.topics", "false")
        .load()
    )
    commits = [
        r for r in commits_from_records(records, "local").collect() if r.group == "pipeline-decode-group"
    ]
    assert [(r.kind, r.cluster, r.topic, r.partition, r.offset) for r in commits] == [
        ("commit", "local", "pipeline-decode", 1, offset) for offset in (5, 9, 12)
    ]
    orders = [r.order for r in commits]
    assert orders == sorted(orders) and len(set(orders)) == 3
    now_ms = time.time() * 1000
    assert all(now_ms - 60_000 < r.timestamp <= now_ms for r in commits)

    samples = (
        spark.read.format("burrowpy-broker-offsets")
        .option("kafka.bootstrap.servers", server.bootstrap)
        .option("cluster", "local")
        .option("subscribe", "pipeline-decode")
        .load()
        .collect()
    )
    assert sorted((r.kind, r.topic, r.partition, r.offset, r.group, r.order) for r in samples) == [
        ("broker", "pipeline-decode", 0, 20, None, None),
        ("broker", "pipeline-decode", 1, 20, None, None),
    ]


def test_stream_read_picks_up_new_records(spark, server, tmp_path):
    create_topic(server.bootstrap, "pipeline-stream-read", 2)
    produce(server.bootstrap, "pipeline-stream-read", 10, 2)
    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", server.bootstrap)
        .option("subscribe", "pipeline-stream-read")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "7")
        .load()
        .writeStream.format("memory")
        .queryName("pipeline_stream_read")
        .trigger(processingTime="0.5 seconds")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:

        def count() -> int:
            return spark.sql("select count(*) from pipeline_stream_read").first()[0]

        wait_until(lambda: count() == 10, timeout=60, interval=POLL_S, message="the first 10 records")
        produce(server.bootstrap, "pipeline-stream-read", 10, 2)
        wait_until(lambda: count() == 20, timeout=60, interval=POLL_S, message="10 more records")
        batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        assert max(batches) <= 7  # admission control: at most maxOffsetsPerTrigger per micro-batch
        rows = spark.sql("select partition, offset from pipeline_stream_read").collect()
        assert sorted((r.partition, r.offset) for r in rows) == [(p, o) for p in range(2) for o in range(10)]
    finally:
        query.stop()


@pytest.mark.timeout(480)
def test_stream_job_sees_a_group_go_ok_stop_ok(spark, server, tmp_path):
    """A consumer keeps up (OK), goes silent while producers go on (STOP), comes back and catches up (OK)."""
    topic, group = "pipeline-live", "pipeline-live-group"
    create_topic(server.bootstrap, topic, 1)
    settings = StreamSettings(
        bootstrap_servers=server.bootstrap,
        output=str(tmp_path / "changes"),
        checkpoint=str(tmp_path / "checkpoint"),
        history=str(tmp_path / "history"),
        cluster="live",
        sample_interval_s=0.5,
        trigger_s=0.5,
        replay=ReplaySettings(intervals=5),
    )
    producing, consuming, stop_all = threading.Event(), threading.Event(), threading.Event()
    producing.set()

    def keep_producing() -> None:
        producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 1})
        while not stop_all.is_set():
            if producing.is_set():
                producer.produce(topic, value=b"x", partition=0)
                producer.poll(0)
            time.sleep(0.02)
        producer.flush(10)

    def keep_consuming() -> None:
        """While ``consuming`` is set: read everything produced and commit the position every 0.5 s."""
        consumer = Consumer(
            {"bootstrap.servers": server.bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        consumer.assign([TopicPartition(topic, 0, 0)])
        position, last_commit = 0, 0.0
        try:
            while not stop_all.is_set():
                if not consuming.wait(0.05):
                    continue
                for message in consumer.consume(100, timeout=0.05):
                    if message.error() is None:
                        position = message.offset() + 1
                if position and time.monotonic() - last_commit > 0.5:
                    consumer.commit(offsets=[TopicPartition(topic, 0, position)], asynchronous=False)
                    last_commit = time.monotonic()
        finally:
            consumer.close()

    def statuses() -> list[str]:
        frame = spark.read.parquet(settings.output)
        rows = frame.where(frame["group"] == group).orderBy("timestamp").collect()
        return [r.status for r in rows]

    threads = [
        threading.Thread(target=keep_producing, daemon=True),
        threading.Thread(target=keep_consuming, daemon=True),
    ]
    for thread in threads:
        thread.start()
    consuming.set()
    queries = start_stream(spark, settings)
    try:
        wait_until(
            # the first micro-batches include the stream's start: on a busy machine (the suite's other worker)
            # that alone has taken over a minute
            lambda: "OK" in statuses(), timeout=240, interval=POLL_S,
            message="the group evaluated OK while it keeps up",
        )
        consuming.clear()
        # silent while the log end moves on: STOP once the window and the broker history are passed
        wait_until(lambda: "STOP" in statuses(), timeout=60, interval=POLL_S,
                   message="STOP after the consumer went silent")
        producing.clear()
        consuming.set()
        wait_until(
            lambda: statuses()[-1] == "OK" and "STOP" in statuses(),
            timeout=60,
            interval=POLL_S,
            message="OK again after the consumer caught up",
        )
        changes = statuses()
        assert changes[0] == "OK" and changes.index("STOP") < len(changes) - 1
        history = spark.read.parquet(settings.history)
        assert history.where((history.kind == "commit") & (history["group"] == group)).count() > 10
        assert history.where((history.kind == "broker") & (history.topic == topic)).count() > 10
    finally:
        stop_all.set()
        for query in queries:
            query.stop()
        for thread in threads:
            thread.join(10)
