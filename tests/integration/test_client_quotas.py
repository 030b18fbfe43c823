"""Client quotas on a single node: set and shown with Apache Kafka 4.4's kafka-configs tool (AlterClientQuotas,
DescribeClientQuotas), kept across a restart, and enforced: a confluent-kafka producer over its
producer_byte_rate is held to that rate and told its throttle time (KIP-219). The cluster's path (quotas in the
metadata, every broker enforcing them): test_cluster.py.

The broker's quota window is two samples of one second, so that the rate settles within seconds (with Kafka's
eleven the first ten seconds allow a burst of ten seconds' worth)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from harness import BrokerProcess, Scrape, create_topics, free_port, set_quota, wait_until
from kafka_harness import java_peer

from broker.client import KafkaConnection
from broker.protocol.api import ApiKey

pytestmark = pytest.mark.integration

METRICS_PORT = free_port()
BROKER_CONFIG = {"quota.window.num": 2, "quota.window.size.seconds": 1, "metrics.listen": f"127.0.0.1:{METRICS_PORT}"}
CONFIGS = "org.apache.kafka.tools.ConfigCommand"


def configs(bootstrap: str, *args: str) -> list[str]:
    result = java_peer(CONFIGS, "--bootstrap-server", bootstrap, *args)
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]


def described(bootstrap: str) -> list[tuple[list[tuple[str, str | None]], dict[str, float]]]:
    """Every quota set, as DescribeClientQuotas with an empty filter answers."""

    async def describe() -> dict[str, Any]:
        async with await KafkaConnection.connect(bootstrap) as connection:
            return await connection.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": [], "strict": False},
                                            version=1)

    answer = asyncio.run(describe())
    assert answer["error_code"] == 0, answer
    return sorted((([(e["entity_type"], e["entity_name"]) for e in entry["entity"]],
                    {v["key"]: v["value"] for v in entry["values"]}) for entry in answer["entries"]), key=repr)


def test_kafka_configs_sets_shows_and_removes_quotas(broker):
    """Kafka 4.4's kafka-configs on a client id, a user and client id, defaults; what it set is what the broker
    holds (Kafka's checks and refusals, word for word: test_protocol_differential.py)."""
    bootstrap = broker.bootstrap
    assert configs(bootstrap, "--alter", "--entity-type", "clients", "--entity-name", "tool-client", "--add-config",
                   "producer_byte_rate=1024000,consumer_byte_rate=2048000") == [
        "Completed updating config for client tool-client."]
    configs(bootstrap, "--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
            "--entity-name", "tool-client", "--add-config", "producer_byte_rate=4096")
    set_quota(bootstrap, [("client-id", None)], "request_percentage", 150.5)
    set_quota(bootstrap, [("user", None)], "controller_mutation_rate", 10)
    assert described(bootstrap) == sorted([
        ([("client-id", None)], {"request_percentage": 150.5}),
        ([("client-id", "tool-client")], {"consumer_byte_rate": 2048000.0, "producer_byte_rate": 1024000.0}),
        ([("client-id", "tool-client"), ("user", "alice")], {"producer_byte_rate": 4096.0}),
        ([("user", None)], {"controller_mutation_rate": 10.0})], key=repr)

    assert sorted(configs(bootstrap, "--describe", "--entity-type", "clients")) == [
        "Quota configs for client-id 'tool-client' are consumer_byte_rate=2048000.0, producer_byte_rate=1024000.0",
        "Quota configs for the default client-id are request_percentage=150.5"]
    assert configs(bootstrap, "--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type",
                   "clients", "--entity-name", "tool-client") == [
        "Quota configs for user-principal 'alice', client-id 'tool-client' are producer_byte_rate=4096.0"]

    configs(bootstrap, "--alter", "--entity-type", "clients", "--entity-name", "tool-client", "--delete-config",
            "producer_byte_rate,consumer_byte_rate")
    set_quota(bootstrap, [("user", "alice"), ("client-id", "tool-client")], "producer_byte_rate", None)
    set_quota(bootstrap, [("client-id", None)], "request_percentage", None)
    set_quota(bootstrap, [("user", None)], "controller_mutation_rate", None)
    assert described(bootstrap) == []


def test_quotas_survive_a_restart(tmp_path):
    server = BrokerProcess(tmp_path / "data")
    server.start()
    try:
        set_quota(server.bootstrap, [("client-id", "kept")], "producer_byte_rate", 777)
        server.stop()
        server.start()
        assert described(server.bootstrap) == [([("client-id", "kept")], {"producer_byte_rate": 777.0})]
    finally:
        server.stop()


def test_a_producer_over_its_quota_is_held_to_its_rate(broker):
    """100 KB/s for client id 'held': a producer sending as fast as it can gets about that through, and librdkafka
    reports the throttle time the broker's answers carried."""
    quota = 100_000
    create_topics({"bootstrap.servers": broker.bootstrap}, "quota-produce")
    set_quota(broker.bootstrap, [("client-id", "held")], "producer_byte_rate", quota)
    throttles: list[int] = []

    def stats(text: str) -> None:
        for node in json.loads(text)["brokers"].values():
            if node.get("throttle", {}).get("cnt"):
                throttles.append(node["throttle"]["max"])

    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "held", "linger.ms": 5,
                         "batch.size": 16_384, "compression.type": "none", "statistics.interval.ms": 500,
                         "stats_cb": stats, "queue.buffering.max.messages": 100})
    acked: list[tuple[float, int]] = []

    def delivered(err, msg) -> None:
        if err is None:
            acked.append((time.monotonic(), len(msg.value())))

    value = b"x" * 1000
    started = time.monotonic()
    try:
        while time.monotonic() - started < 6:
            try:
                producer.produce("quota-produce", value, on_delivery=delivered)
            except BufferError:
                producer.poll(0.05)
            producer.poll(0)
        # Kafka's per-client quota metrics, tagged with the entity the quota was found at (the client id alone)
        scrape = Scrape(METRICS_PORT)
        producer.purge()  # what is still queued would take seconds at the quota
        producer.flush(10)
    finally:
        set_quota(broker.bootstrap, [("client-id", "held")], "producer_byte_rate", None)
    # the steady state, after the first window's allowance: bytes acknowledged between 2 s and 6 s
    steady = sum(size for at, size in acked if started + 2 <= at < started + 6) / 4
    assert 0.6 * quota <= steady <= 1.3 * quota, steady
    assert throttles and max(throttles) > 0
    assert 0.6 * quota <= scrape.value("kafka_server_produce_byte_rate", user="", client_id="held") <= 2 * quota
    assert scrape.value("kafka_server_produce_throttle_time", user="", client_id="held") > 0
    # (no consumer quota holds it: no fetch figures, as Kafka keeps none for a client without a quota)
    assert not [s for s in scrape.samples if s.name == "kafka_server_fetch_byte_rate" and s.labels["client_id"] == "held"]


def test_a_consumer_over_its_quota_is_held_to_its_rate(broker):
    """consumer_byte_rate 100 KB/s for client id 'slow-reader': a consumer reading a topic of 2 MB gets about that
    (a throttled Fetch is answered with no data, the next Fetch is capped at what the window lets through)."""
    quota = 100_000
    create_topics({"bootstrap.servers": broker.bootstrap}, "quota-fetch")
    # batches well within what one window lets through: a single batch bigger than that is never let through
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 16_384})
    for _ in range(2000):
        producer.produce("quota-fetch", b"y" * 1000)
    assert producer.flush(30) == 0
    set_quota(broker.bootstrap, [("client-id", "slow-reader")], "consumer_byte_rate", quota)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "slow-reader", "group.id": "slow",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    received: list[tuple[float, int]] = []
    try:
        consumer.subscribe(["quota-fetch"])
        started = None
        deadline = time.monotonic() + 30
        while (started is None or time.monotonic() - started < 6) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                started = started or time.monotonic()
                received.append((time.monotonic(), len(message.value())))
    finally:
        consumer.close()
        set_quota(broker.bootstrap, [("client-id", "slow-reader")], "consumer_byte_rate", None)
    assert started is not None, "nothing consumed"
    steady = sum(size for at, size in received if started + 2 <= at < started + 6) / 4
    assert 0.5 * quota <= steady <= 1.3 * quota, steady


def test_topic_creation_past_controller_mutation_rate_is_refused_as_on_kafka(broker):
    """controller_mutation_rate 1 for client id 'creator': a burst of eleven partitions (Kafka's eleven one-second
    windows), then CreateTopics v7 refuses the next topic with THROTTLING_QUOTA_EXCEEDED and the time until the
    bucket is back at zero (KIP-599)."""
    set_quota(broker.bootstrap, [("client-id", "creator")], "controller_mutation_rate", 1)

    async def create() -> dict[str, Any]:
        async with await KafkaConnection.connect(broker.bootstrap, client_id="creator") as connection:
            return await connection.request(ApiKey.CREATE_TOPICS, {"topics": [
                {"name": f"mutated-{n}", "num_partitions": 10, "replication_factor": 1, "assignments": [],
                 "configs": []} for n in range(3)], "timeout_ms": 30_000, "validate_only": False}, version=7)

    try:
        answer = asyncio.run(create())
    finally:
        set_quota(broker.bootstrap, [("client-id", "creator")], "controller_mutation_rate", None)
    assert [(t["error_code"], t["error_message"]) for t in answer["topics"]] == [
        (0, None), (0, None), (89, "The throttling quota has been exceeded.")]
    assert 7_000 <= answer["throttle_time_ms"] <= 9_000, answer["throttle_time_ms"]


def test_request_percentage_counts_the_time_requests_take_not_what_they_wait_for(broker):
    """request_percentage: a Fetch that long-polls half a second on an empty partition takes well under 5% of a
    thread in that time (its wait does not count); a client allowed a thousandth of a percent is throttled by its
    first requests, for at most one window (Kafka's bound on the request-time throttle)."""
    create_topics({"bootstrap.servers": broker.bootstrap}, "quota-idle")
    set_quota(broker.bootstrap, [("client-id", "poller")], "request_percentage", 5)
    set_quota(broker.bootstrap, [("client-id", "busy")], "request_percentage", 0.001)

    async def ask(client_id: str, api: int, body: dict[str, Any], version: int) -> dict[str, Any]:
        async with await KafkaConnection.connect(broker.bootstrap, client_id=client_id) as connection:
            return await connection.request(api, body, version=version)

    fetch = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
             "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [], "topics": [
                 {"topic": "quota-idle", "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                         "last_fetched_epoch": -1, "log_start_offset": -1,
                                                         "partition_max_bytes": 1 << 20}]}]}
    try:
        started = time.monotonic()
        polled = asyncio.run(ask("poller", ApiKey.FETCH, fetch, 12))
        assert time.monotonic() - started >= 0.5  # it did wait
        assert polled["throttle_time_ms"] == 0
        metadata = {"topics": None, "allow_auto_topic_creation": False}
        throttles = [asyncio.run(ask("busy", ApiKey.METADATA, metadata, 12))["throttle_time_ms"] for _ in range(3)]
        assert any(throttles) and all(0 <= t <= 1000 for t in throttles), throttles
    finally:
        set_quota(broker.bootstrap, [("client-id", "poller")], "request_percentage", None)
        set_quota(broker.bootstrap, [("client-id", "busy")], "request_percentage", None)


def test_connections_past_an_addresss_connection_creation_rate_are_closed(broker):
    """connection_creation_rate 2 for 127.0.0.2 (KIP-612): of six connections opened at once from there, the
    first two are served and the others closed after their throttle time; 127.0.0.1 is not held."""
    set_quota(broker.bootstrap, [("ip", "127.0.0.2")], "connection_creation_rate", 2)
    opened: list[socket.socket] = []
    try:
        for _ in range(6):
            sock = socket.create_connection(("127.0.0.1", broker.port), timeout=5, source_address=("127.0.0.2", 0))
            opened.append(sock)
        set_quota(broker.bootstrap, [("client-id", "unrelated")], "producer_byte_rate", 1)  # 127.0.0.1 is served

        def closed(sock: socket.socket) -> bool:
            sock.setblocking(False)
            try:
                return sock.recv(1) == b""
            except BlockingIOError:
                return False

        wait_until(lambda: sum(closed(sock) for sock in opened) >= 4, 10, message="four connections closed")
        assert sum(not closed(sock) for sock in opened) == 2
    finally:
        for sock in opened:
            sock.close()
        set_quota(broker.bootstrap, [("ip", "127.0.0.2")], "connection_creation_rate", None)
        set_quota(broker.bootstrap, [("client-id", "unrelated")], "producer_byte_rate", None)
