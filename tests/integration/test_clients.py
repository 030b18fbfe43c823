"""Real Kafka clients produce to and consume from our broker, with every compression codec they support.

Messages, keys, headers and timestamps must come back byte-identical, in order, per partition.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import subprocess
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from harness import ROOT, Scrape, free_port, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 3
COUNT = 30
BASE_TS = 1_700_000_000_000
METRICS_PORT = free_port()
BROKER_CONFIG = {"metrics.listen": f"127.0.0.1:{METRICS_PORT}"}


def make_messages(seed: int, *, printable: bool = False) -> list[dict]:
    rnd = random.Random(seed)

    def blob(n: int) -> bytes:
        if printable:
            return "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(n)).encode()
        return rnd.randbytes(n)

    messages = []
    for i in range(COUNT):
        messages.append({
            "partition": i % PARTITIONS,
            "key": None if i % 7 == 3 and not printable else blob(rnd.randint(1, 20)),
            "value": blob(rnd.randint(1, 300)) * rnd.randint(1, 4),
            "headers": [] if printable else [(f"h{j}", blob(rnd.randint(0, 10))) for j in range(i % 3)],
            "timestamp": BASE_TS + i * 1000,
        })
    return messages


def per_partition(messages: list[dict], *, with_timestamps: bool = True) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {p: [] for p in range(PARTITIONS)}
    for m in messages:
        item = (m["key"], m["value"], [tuple(h) for h in m["headers"]])
        out[m["partition"]].append(item + ((m["timestamp"],) if with_timestamps else ()))
    return out


def create_topic(bootstrap: str, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=PARTITIONS, replication_factor=1)])
    futures[name].result(timeout=30)
    return name


# --- confluent-kafka (librdkafka 2.x) ---------------------------------------------------------------------

@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_roundtrip(broker, codec):
    topic = create_topic(broker.bootstrap, f"ck-{codec}")
    sent = make_messages(1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 20})
    for m in sent:
        producer.produce(topic, value=m["value"], key=m["key"], partition=m["partition"],
                         timestamp=m["timestamp"], headers=m["headers"])
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got = []

    def drain() -> bool:
        msg = consumer.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got.append({"partition": msg.partition(), "key": msg.key(), "value": msg.value(),
                        "headers": msg.headers() or [], "timestamp": msg.timestamp()[1]})
        return len(got) == len(sent)

    wait_until(drain, 60, interval=0, message="confluent-kafka to consume everything")
    consumer.close()
    assert per_partition(got) == per_partition(sent)


def test_the_brokers_metrics_count_what_clients_do(broker):
    """The broker's /metrics (metrics.listen) under the JMX exporter's names: records and bytes in and out of a
    topic, requests and their times per API, the log's size, connections; a single node leads everything."""
    topic = create_topic(broker.bootstrap, "metrics")
    before = Scrape(METRICS_PORT)
    assert before.content_type.startswith("text/plain; version=0.0.4")
    assert before.value("kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 0
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    for m in make_messages(2):
        producer.produce(topic, value=m["value"], key=m["key"], partition=m["partition"], headers=m["headers"])
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got = []
    wait_until(lambda: (got.append(consumer.poll(0.5)) or sum(1 for m in got if m is not None) == COUNT), 60,
               interval=0, message="the consumer to read everything")
    try:
        after = Scrape(METRICS_PORT)
        assert after.value("kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") >= 2
    finally:
        consumer.close()
    messages_in = "kafka_server_brokertopicmetrics_messagesin_total"
    assert after.value(messages_in, topic=topic) == COUNT
    assert after.value(messages_in, topic="") - before.value(messages_in, topic="") >= COUNT
    bytes_in = after.value("kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    # the batches are kept as they came: the log holds exactly the bytes counted in, and consumers read them all
    assert bytes_in == sum(after.value("kafka_log_log_size", topic=topic, partition=str(p)) for p in range(PARTITIONS))
    assert after.value("kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= bytes_in > 0
    assert after.value("kafka_log_log_logendoffset", topic=topic) == COUNT
    # Kafka's request counters per topic: every partition of every Produce and Fetch, none failed
    assert after.value("kafka_server_brokertopicmetrics_totalproducerequests_total", topic=topic) > 0
    assert after.value("kafka_server_brokertopicmetrics_totalfetchrequests_total", topic=topic) > 0
    assert after.value("kafka_server_brokertopicmetrics_failedproducerequests_total", topic=topic) == 0
    assert after.value("kafka_server_brokertopicmetrics_failedfetchrequests_total", topic=topic) == 0
    for request in ("Produce", "FetchConsumer", "Metadata"):
        handled = after.value("kafka_network_requestmetrics_requests_total", request=request)
        assert handled > before.value("kafka_network_requestmetrics_requests_total", request=request)
        assert after.value("kafka_network_requestmetrics_totaltimems_count", request=request) == handled
        assert after.value("kafka_network_requestmetrics_totaltimems_bucket", request=request, le="+Inf") == handled
    assert after.value("kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert after.value("kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert after.value("kafka_server_replicamanager_leadercount") >= PARTITIONS
    # a single node is each partition's whole ISR: with min.insync.replicas 1, every partition is at its minimum
    assert after.value("kafka_server_replicamanager_atminisrpartitioncount") == \
        after.value("kafka_server_replicamanager_leadercount")
    assert after.value("kafka_server_replicamanager_underminisrpartitioncount") == 0
    assert after.value("kafka_log_logmanager_offlinelogdirectorycount") == 0
    assert {"process_cpu_seconds_total", "burrowpy_broker_requests_in_flight"} <= after.names()


# --- kafka-python 3 (idempotent producer by default) ------------------------------------------------------

@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_roundtrip(broker, codec):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    topic = create_topic(broker.bootstrap, f"kp-{codec}")
    sent = make_messages(2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=20)
    assert producer.config["enable_idempotence"], "kafka-python should be idempotent by default"
    futures = [producer.send(topic, value=m["value"], key=m["key"], headers=m["headers"],
                             partition=m["partition"], timestamp_ms=m["timestamp"]) for m in sent]
    producer.flush(30)
    for fut in futures:
        fut.get(10)
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None)
    parts = [KTopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(parts)
    consumer.seek_to_beginning(*parts)
    got = []

    def drain() -> bool:
        for tp, records in consumer.poll(timeout_ms=500).items():
            for r in records:
                got.append({"partition": tp.partition, "key": r.key, "value": r.value,
                            "headers": list(r.headers), "timestamp": r.timestamp})
        return len(got) >= len(sent)

    wait_until(drain, 60, interval=0, message="kafka-python to consume everything")
    consumer.close()
    assert per_partition(got) == per_partition(sent)


# --- aiokafka -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_aiokafka_roundtrip(broker, codec):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATopicPartition

    topic = create_topic(broker.bootstrap, f"aio-{codec}")
    sent = make_messages(3)

    async def run() -> list[dict]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec)
        await producer.start()
        try:
            for m in sent:
                await producer.send_and_wait(topic, value=m["value"], key=m["key"], partition=m["partition"],
                                             timestamp_ms=m["timestamp"], headers=m["headers"])
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await consumer.start()
        got = []
        try:
            parts = [ATopicPartition(topic, p) for p in range(PARTITIONS)]
            consumer.assign(parts)
            await consumer.seek_to_beginning(*parts)
            async with asyncio.timeout(60):
                while len(got) < len(sent):
                    for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                        got.extend({"partition": tp.partition, "key": r.key, "value": r.value,
                                    "headers": list(r.headers), "timestamp": r.timestamp} for r in records)
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(run())
    assert per_partition(got) == per_partition(sent)


# --- kafkajs (node) ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
def test_kafkajs_roundtrip(broker, codec):
    topic = create_topic(broker.bootstrap, f"js-{codec}")
    sent = make_messages(4)
    b64 = lambda b: None if b is None else base64.b64encode(b).decode()  # noqa: E731
    payload = json.dumps([{"partition": m["partition"], "key": b64(m["key"]), "value": b64(m["value"]),
                           "timestamp": m["timestamp"], "headers": [[k, b64(v)] for k, v in m["headers"]]}
                          for m in sent])
    proc = subprocess.run(["node", str(ROOT / "tests/js/roundtrip.js"), broker.bootstrap, topic, codec],
                          input=payload, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    unb64 = lambda s: None if s is None else base64.b64decode(s)  # noqa: E731
    got = [{"partition": m["partition"], "key": unb64(m["key"]), "value": unb64(m["value"]),
            "timestamp": m["timestamp"], "headers": [(k, unb64(v)) for k, v in m["headers"]]}
           for m in sorted(json.loads(proc.stdout), key=lambda m: (m["partition"], m["offset"]))]
    assert per_partition(got) == per_partition(sent)


# --- kcat (librdkafka 2.0.2 from Debian) ------------------------------------------------------------------

@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_roundtrip(broker, codec):
    topic = create_topic(broker.bootstrap, f"kcat-{codec}")
    sent = make_messages(5, printable=True)
    for partition in range(PARTITIONS):
        lines = "".join(f"{m['key'].decode()}\t{m['value'].decode()}\n" for m in sent if m["partition"] == partition)
        proc = subprocess.run(["kcat", "-b", broker.bootstrap, "-P", "-t", topic, "-p", str(partition),
                               "-z", codec, "-K", "\t", "-H", "origin=kcat"],
                              input=lines, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
    proc = subprocess.run(["kcat", "-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-J"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(got) == len(sent)
    by_partition: dict[int, list[tuple]] = {p: [] for p in range(PARTITIONS)}
    for m in sorted(got, key=lambda m: (m["partition"], m["offset"])):
        assert m["headers"] == ["origin", "kcat"]
        by_partition[m["partition"]].append((m["key"].encode(), m["payload"].encode(), []))
    assert by_partition == per_partition(sent, with_timestamps=False)
    offsets = {p: [m["offset"] for m in got if m["partition"] == p] for p in range(PARTITIONS)}
    assert all(sorted(o) == list(range(len(o))) for o in offsets.values())
