"""Client quotas on a single node: set and shown with Apache Kafka 4.4's kafka-configs tool (AlterClientQuotas,
DescribeClientQuotas), kept across a restart, and enforced: a confluent-kafka producer over its
producer_byte_rate is held to that rate and told its throttle time (KIP-219). The cluster's path (quotas in the
metadata, every broker enforcing them): test_cluster.py.

The broker's quota window is two samples of one second, so that the rate settles within seconds (with Kafka's
eleven the first ten seconds allow a burst of ten seconds' worth)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from confluent_kafka import Producer
from harness import BrokerProcess, create_topics
from kafka_harness import java_peer

from broker.client import KafkaConnection
from broker.protocol.api import ApiKey

pytestmark = pytest.mark.integration

BROKER_CONFIG = {"quota.window.num": 2, "quota.window.size.seconds": 1}
CONFIGS = "org.apache.kafka.tools.ConfigCommand"


def set_quota(bootstrap: str, entity: list[tuple[str, str | None]], key: str, value: float | None) -> None:
    """AlterClientQuotas straight from our client (the tool is checked above; a JVM takes seconds to start)."""

    async def alter() -> dict[str, Any]:
        async with await KafkaConnection.connect(bootstrap) as connection:
            return await connection.request(ApiKey.ALTER_CLIENT_QUOTAS, {"entries": [{
                "entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity],
                "ops": [{"key": key, "value": value or 0.0, "remove": value is None}]}], "validate_only": False},
                version=1)

    answer = asyncio.run(alter())
    assert [entry["error_code"] for entry in answer["entries"]] == [0], answer


def configs(bootstrap: str, *args: str) -> list[str]:
    result = java_peer(CONFIGS, "--bootstrap-server", bootstrap, *args)
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]


def test_kafka_configs_sets_shows_and_removes_quotas_of_every_entity_kind(broker):
    bootstrap = broker.bootstrap
    assert configs(bootstrap, "--alter", "--entity-type", "clients", "--entity-name", "tool-client", "--add-config",
                   "producer_byte_rate=1024000,consumer_byte_rate=2048000") == [
        "Completed updating config for client tool-client."]
    configs(bootstrap, "--alter", "--entity-type", "clients", "--entity-default", "--add-config",
            "request_percentage=150.5")
    configs(bootstrap, "--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config",
            "controller_mutation_rate=10")
    configs(bootstrap, "--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
            "--entity-name", "tool-client", "--add-config", "producer_byte_rate=4096")
    configs(bootstrap, "--alter", "--entity-type", "users", "--entity-default", "--add-config",
            "consumer_byte_rate=5000")

    assert configs(bootstrap, "--describe", "--entity-type", "clients", "--entity-name", "tool-client") == [
        "Quota configs for client-id 'tool-client' are consumer_byte_rate=2048000.0, producer_byte_rate=1024000.0"]
    assert configs(bootstrap, "--describe", "--entity-type", "clients", "--entity-default") == [
        "Quota configs for the default client-id are request_percentage=150.5"]
    every_client = configs(bootstrap, "--describe", "--entity-type", "clients")
    assert sorted(every_client) == [
        "Quota configs for client-id 'tool-client' are consumer_byte_rate=2048000.0, producer_byte_rate=1024000.0",
        "Quota configs for the default client-id are request_percentage=150.5"]
    assert "Quota configs for user-principal 'alice' are controller_mutation_rate=10.0" in configs(
        bootstrap, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert configs(bootstrap, "--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type",
                   "clients", "--entity-name", "tool-client") == [
        "Quota configs for user-principal 'alice', client-id 'tool-client' are producer_byte_rate=4096.0"]
    assert "Quota configs for the default user-principal are consumer_byte_rate=5000.0" in configs(
        bootstrap, "--describe", "--entity-type", "users", "--entity-default")

    # what Kafka refuses, refused in Kafka's words, and nothing changed
    refused = java_peer(CONFIGS, "--bootstrap-server", bootstrap, "--alter", "--entity-type", "clients",
                        "--entity-name", "tool-client", "--add-config", "producer_byte_rate=12.5", check=False)
    assert refused.returncode != 0
    assert "producer_byte_rate cannot be a fractional value." in refused.stdout + refused.stderr

    for entity in (("clients", "--entity-name", "tool-client"), ("clients", "--entity-default"),
                   ("users", "--entity-name", "alice")):
        configs(bootstrap, "--alter", "--entity-type", *entity, "--delete-config",
                {"clients": "producer_byte_rate,consumer_byte_rate", "users": "controller_mutation_rate"}[entity[0]]
                if entity[1:] != ("--entity-default",) else "request_percentage")
    configs(bootstrap, "--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
            "--entity-name", "tool-client", "--delete-config", "producer_byte_rate")
    configs(bootstrap, "--alter", "--entity-type", "users", "--entity-default", "--delete-config",
            "consumer_byte_rate")
    assert configs(bootstrap, "--describe", "--entity-type", "clients") == []


def test_quotas_survive_a_restart(tmp_path):
    server = BrokerProcess(tmp_path / "data")
    server.start()
    try:
        configs(server.bootstrap, "--alter", "--entity-type", "clients", "--entity-name", "kept", "--add-config",
                "producer_byte_rate=777")
        server.stop()
        server.start()
        assert configs(server.bootstrap, "--describe", "--entity-type", "clients") == [
            "Quota configs for client-id 'kept' are producer_byte_rate=777.0"]
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
        producer.purge()  # what is still queued would take seconds at the quota
        producer.flush(10)
    finally:
        set_quota(broker.bootstrap, [("client-id", "held")], "producer_byte_rate", None)
    # the steady state, after the first window's allowance: bytes acknowledged between 2 s and 6 s
    steady = sum(size for at, size in acked if started + 2 <= at < started + 6) / 4
    assert 0.6 * quota <= steady <= 1.3 * quota, steady
    assert throttles and max(throttles) > 0
