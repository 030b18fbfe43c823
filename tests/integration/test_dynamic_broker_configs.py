"""Dynamic broker configs (AlterConfigs / IncrementalAlterConfigs on the BROKER resource) on our broker,
side by side with a real Apache Kafka 4.4: the same requests get the same answers, DescribeConfigs shows
the same values, sources and synonyms, Kafka's `kafka-configs.sh` works unchanged; a changed default
reaches topics and survives a restart, on a single node and through a cluster's metadata.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from cluster_harness import BrokerCluster
from harness import BrokerProcess, free_port, wait_until
from kafka_harness import java_peer

from broker.client import KafkaConnection
from broker.kafka_broker_configs import KAFKA_BROKER_CONFIGS
from broker.protocol.api import ApiKey
from broker.protocol.records import Record, build_batch

pytestmark = pytest.mark.integration

SET, DELETE, APPEND = 0, 1, 2
BROKER = 4
TOPIC = 2


async def _request(bootstrap: str, api: int, body: dict[str, Any], version: int) -> dict[str, Any]:
    async with await KafkaConnection.connect(bootstrap) as connection:
        return await connection.request(api, body, version=version)


def alter(bootstrap: str, name: str, *configs: tuple[str, int, str | None]) -> tuple[int, str | None]:
    """IncrementalAlterConfigs on one BROKER resource: (error code, error message)."""
    answer = asyncio.run(_request(bootstrap, ApiKey.INCREMENTAL_ALTER_CONFIGS, {"resources": [
        {"resource_type": BROKER, "resource_name": name, "configs": [
            {"name": n, "config_operation": op, "value": v} for n, op, v in configs]}], "validate_only": False}, 1))
    response = answer["responses"][0]
    return response["error_code"], response["error_message"]


def describe(bootstrap: str, kind: int, name: str, keys: list[str] | None = None, synonyms: bool = True,
             documentation: bool = False) -> dict[str, dict[str, Any]]:
    answer = asyncio.run(_request(bootstrap, ApiKey.DESCRIBE_CONFIGS, {"resources": [
        {"resource_type": kind, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": synonyms, "include_documentation": documentation}, 4))
    result = answer["results"][0]
    assert result["error_code"] == 0, result
    return {c["name"]: {k: c[k] for k in ("value", "config_source", "synonyms", "read_only", "is_sensitive",
                                          "config_type", "documentation")} for c in result["configs"]}


def create_topic(bootstrap: str, name: str, **configs: str) -> None:
    """Create it and wait until DescribeConfigs knows it (a Kafka broker learns of it a moment later)."""
    answer = asyncio.run(_request(bootstrap, ApiKey.CREATE_TOPICS, {"topics": [{
        "name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
        "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()]}],
        "timeout_ms": 30000}, 5))
    assert answer["topics"][0]["error_code"] == 0, answer

    def described() -> bool:
        answer = asyncio.run(_request(bootstrap, ApiKey.DESCRIBE_CONFIGS, {"resources": [
            {"resource_type": TOPIC, "resource_name": name, "configuration_keys": ["retention.ms"]}]}, 4))
        return answer["results"][0]["error_code"] == 0

    wait_until(described, 30, message=f"topic {name} to be described")


# (resource name, configs) sent to both: the answers must be the same, code and message.
REFUSALS = {
    "read-only at the default": ("", [("num.partitions", SET, "3")]),
    "read-only for the broker": ("1", [("num.partitions", SET, "3")]),
    "read-only before a bad value": ("", [("num.partitions", SET, "3"), ("message.max.bytes", SET, "x")]),
    "not a number": ("", [("message.max.bytes", SET, "abc")]),
    "below the minimum": ("", [("message.max.bytes", SET, "-5")]),
    "threads below one": ("", [("num.io.threads", SET, "0")]),
    "fetchers more than doubled": ("1", [("num.replica.fetchers", SET, "3")]),
    "threads less than halved": ("1", [("num.io.threads", SET, "3")]),
    "threads more than doubled at the default": ("", [("background.threads", SET, "21")]),
    "segments below Kafka's broker minimum": ("", [("log.segment.bytes", SET, "10")]),
    "ratio above one": ("", [("log.cleaner.min.cleanable.ratio", SET, "1.5")]),
    "gzip level": ("", [("compression.gzip.level", SET, "10")]),
    "unknown codec": ("", [("compression.type", SET, "brotli")]),
    "unknown timestamp type": ("", [("log.message.timestamp.type", SET, "Foo")]),
    "not a boolean": ("", [("unclean.leader.election.enable", SET, "maybe")]),
    "timestamp bound below zero": ("", [("log.message.timestamp.after.max.ms", SET, "-1")]),
    "another broker": ("2", [("log.retention.ms", SET, "1000")]),
    "not a broker id": ("abc", [("log.retention.ms", SET, "1000")]),
    "append to a number": ("", [("log.retention.ms", APPEND, "1")]),
    "TLS at the default": ("", [("ssl.keystore.location", SET, "/x")]),
    "a listener's keystore at the default": ("", [("listener.name.ssl.ssl.keystore.location", SET, "/x")]),
    "a listener's JAAS line at the default": ("", [("listener.name.sasl_ssl.plain.sasl.jaas.config", SET, "x")]),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refusals_are_kafkas(broker, kafka, case):
    name, configs = REFUSALS[case]
    ours, kafkas = alter(broker.bootstrap, name, *configs), alter(kafka.bootstrap, name, *configs)
    assert ours[0] != 0
    assert ours == kafkas


def test_a_dynamic_password_is_refused_without_password_encoder_secret(broker):
    """KIP-226 as Kafka has it: a password config is stored only encrypted, and this broker has no
    password.encoder.secret to encrypt it with; nothing is kept."""
    key = "listener.name.plaintext.ssl.truststore.password"
    assert alter(broker.bootstrap, "1", (key, SET, "a-password")) == (40, (  # INVALID_CONFIG
        "Invalid config value for resource ConfigResource(type=BROKER, name='1'): Password encoder secret not "
        "configured"))
    assert key not in describe(broker.bootstrap, BROKER, "1")
    assert describe(broker.bootstrap, BROKER, "1", ["password.encoder.secret"])["password.encoder.secret"][
        "read_only"]


def settable(bootstrap: str, values: dict[str, str]) -> dict[tuple[str, str], tuple[int, str | None]]:
    """Each config set to its value (validate_only) at the cluster default and for broker 1: the answers."""
    async def ask() -> dict[tuple[str, str], tuple[int, str | None]]:
        answers = {}
        async with await KafkaConnection.connect(bootstrap) as connection:
            for scope in ("", "1"):
                for name, value in values.items():
                    answer = await connection.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, {"resources": [
                        {"resource_type": BROKER, "resource_name": scope, "configs": [
                            {"name": name, "config_operation": SET, "value": value}]}], "validate_only": True},
                        version=1)
                    response = answer["responses"][0]
                    answers[(scope, name)] = response["error_code"], response["error_message"]
        return answers
    return asyncio.run(ask())


def test_the_configs_kafka_lets_change_at_run_time_are_ours(broker, kafka):
    """The same configs may change dynamically, at the same scopes, refused in the same words otherwise (the
    TLS and SASL settings among them); apart from the principal builder, which this broker cannot change while
    it runs (Kafka takes it for one broker), broker 1's min.insync.replicas, which Kafka 4 holds fixed for its
    eligible leader replicas, and Kafka's default listeners and map, which leave out its controller's listener."""
    defaults = {name: default for name, (default, *_) in KAFKA_BROKER_CONFIGS.items() if default is not None}
    ours, kafkas = settable(broker.bootstrap, defaults), settable(kafka.bootstrap, defaults)
    assert len(kafkas) > 500
    differing = {key for key in kafkas if ours[key] != kafkas[key]}
    assert {name for _, name in differing} <= {"min.insync.replicas", "listeners", "listener.security.protocol.map",
                                               "principal.builder.class"}
    assert ours[("1", "principal.builder.class")][1].startswith("These security settings cannot change at run time")
    # Kafka's node is also its KRaft controller: a listener set without its CONTROLLER listener is refused for that
    assert all("CONTROLLER" in kafkas[("1", name)][1].upper() for name in ("listeners", "listener.security.protocol.map"))
    accepted = {name for (scope, name), (code, _) in ours.items() if code == 0 and scope == "1"}
    assert {"message.max.bytes", "log.retention.bytes", "log.cleaner.threads", "num.io.threads"} <= accepted
    assert "num.partitions" not in accepted


def test_listener_refusals_are_kafkas(broker, kafka):
    """A listener added without a security protocol, or a running listener's protocol changed: refused in
    Kafka's words, each naming that broker's own listeners."""
    for server, others in ((broker, ""), (kafka, ",CONTROLLER:PLAINTEXT")):
        running = describe(server.bootstrap, BROKER, "1", ["listeners"])["listeners"]["value"]
        entries = ", ".join(part.strip() for part in running.split(","))
        extra = f"EXTRA://127.0.0.1:{free_port()}"
        assert alter(server.bootstrap, "1", ("listeners", SET, f"{running},{extra}")) == (
            42, f"Error creating broker listeners from '[{entries}, {extra}]': No security protocol defined for "
                "listener EXTRA")
        assert alter(server.bootstrap, "1", ("listener.security.protocol.map", SET, f"PLAINTEXT:SSL{others}")) == (
            42, "Invalid value org.apache.kafka.common.config.ConfigException: Security protocol cannot be updated for "
                "existing listener ListenerName(PLAINTEXT) for configuration Invalid dynamic configuration")
        assert describe(server.bootstrap, BROKER, "1", ["listeners"])["listeners"]["value"] == running


def test_kerberos_settings_are_taken_and_described_as_kafka_does(broker, kafka):
    """The issue's example, with Kafka's tool: Kafka takes sasl.kerberos.* for one broker even where no listener
    uses Kerberos; this broker keeps and describes them the same (and names them in its log as having no
    effect)."""
    key = "sasl.kerberos.min.time.before.relogin"
    altered = config_command(broker.bootstrap, "--entity-name", "1", "--alter", "--add-config", f"{key}=58000")
    assert altered == ["Completed updating config for broker 1."]
    assert alter(kafka.bootstrap, "1", (key, SET, "58000")) == (0, None)
    try:
        # Kafka's broker applies the change once the controller's metadata reaches it, a moment after the answer
        wait_until(lambda: describe(kafka.bootstrap, BROKER, "1", [key])[key]["value"] == "58000", 30,
                   message="Kafka's broker to apply the change")
        ours, kafkas = describe(broker.bootstrap, BROKER, "1", [key]), describe(kafka.bootstrap, BROKER, "1", [key])
        assert ours == kafkas
        assert (ours[key]["value"], ours[key]["config_source"]) == ("58000", 2)
    finally:
        for server in (broker, kafka):
            assert alter(server.bootstrap, "1", (key, DELETE, None)) == (0, None)


def test_numbers_below_kafkas_bounds_are_refused_in_kafkas_words(broker, kafka):
    """Every numeric broker config that changes at run time, set far too low: the same refusals (Kafka's
    validators' least values are generated from a live Kafka into broker/kafka_broker_configs.py), except
    the topic defaults Kafka takes unchecked at the broker level, which ours checks as the topic config, and the
    cleaner's load factor and throttle, which Kafka takes unchecked and its cleaner then fails on or stalls."""
    low = {name: "-1000" for name, (_, config_type, read_only, _) in KAFKA_BROKER_CONFIGS.items()
           if not read_only and config_type in (3, 4, 5, 6) and not name.startswith(("ssl.", "sasl."))}
    ours, kafkas = settable(broker.bootstrap, low), settable(kafka.bootstrap, low)
    assert len(kafkas) > 100
    assert sum(code == 42 for code, _ in kafkas.values()) > 80
    differing = {name for (scope, name) in kafkas if ours[(scope, name)] != kafkas[(scope, name)]}
    assert differing == {"log.retention.ms", "log.flush.interval.ms", "log.cleaner.io.buffer.load.factor",
                         "log.cleaner.io.max.bytes.per.second"}
    assert ours[("", "log.cleaner.io.max.bytes.per.second")] == (
        42, "Invalid value -1000 for configuration log.cleaner.io.max.bytes.per.second: must be more than 0 bytes "
            "per second")
    assert ours[("", "log.retention.ms")] == (
        42, "Invalid value -1000 for configuration log.retention.ms: Value must be at least -1")


CHANGED = ["log.retention.ms", "message.max.bytes", "num.io.threads", "log.cleanup.policy", "log.cleaner.threads",
           "log.roll.jitter.ms", "my.custom.config"]


def test_dynamic_configs_are_described_as_kafka_does(broker, kafka):
    for server in (broker, kafka):
        for name, configs in (("", [("log.retention.ms", SET, "3600000"), ("message.max.bytes", SET, "2000"),
                                    ("num.io.threads", SET, "4"), ("log.cleanup.policy", APPEND, "compact"),
                                    ("log.roll.jitter.ms", SET, "5"), ("my.custom.config", SET, "x")]),
                              ("1", [("log.retention.ms", SET, "7200000"), ("log.cleaner.threads", SET, "2")])):
            assert alter(server.bootstrap, name, *configs) == (0, None)
        create_topic(server.bootstrap, "dynamic-plain")
        create_topic(server.bootstrap, "dynamic-override", retention_ms="5000")
    for kind, name, keys in ((BROKER, "1", CHANGED), (BROKER, "", None), (TOPIC, "dynamic-plain", None),
                             (TOPIC, "dynamic-override", None)):
        ours, kafkas = describe(broker.bootstrap, kind, name, keys), describe(kafka.bootstrap, kind, name, keys)
        # Kafka 4's storage tool sets min.insync.replicas as a cluster default (for ELR); ours has no such step
        kafkas.pop("min.insync.replicas", None)
        ours.pop("min.insync.replicas", None)
        ours.pop("retention.disk.percent", None)  # ours only
        assert ours == kafkas, (kind, name, {n: (ours.get(n), kafkas.get(n)) for n in set(ours) | set(kafkas)
                                             if ours.get(n) != kafkas.get(n)})
    assert describe(broker.bootstrap, TOPIC, "dynamic-plain")["retention.ms"]["config_source"] == 2
    for server in (broker, kafka):  # back to the defaults
        assert alter(server.bootstrap, "1", ("log.retention.ms", DELETE, None),
                     ("log.cleaner.threads", DELETE, None)) == (0, None)
        assert alter(server.bootstrap, "", *[(n, DELETE, None) for n in CHANGED]) == (0, None)
    plain = describe(broker.bootstrap, TOPIC, "dynamic-plain")
    assert (plain["retention.ms"]["value"], plain["retention.ms"]["config_source"]) == ("604800000", 5)


def test_documentation_is_kafkas(broker, kafka):
    for server in (broker, kafka):
        create_topic(server.bootstrap, "documented")
    for kind, name in ((BROKER, "1"), (TOPIC, "documented")):
        ours = describe(broker.bootstrap, kind, name, synonyms=False, documentation=True)
        kafkas = describe(kafka.bootstrap, kind, name, synonyms=False, documentation=True)
        assert all(c["documentation"] for c in kafkas.values())
        assert {n: ours[n]["documentation"] for n in kafkas} == {n: c["documentation"] for n, c in kafkas.items()}
        # ours only: burrowpy's own configs, which Kafka has no text for
        assert {n for n, c in ours.items() if not c["documentation"]} == set(ours) - set(kafkas)
        assert not any(c["documentation"] for c in describe(broker.bootstrap, kind, name).values())


def config_command(bootstrap: str, *args: str) -> list[str]:
    result = java_peer("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap,
                       "--entity-type", "brokers", *args)
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]


def test_kafka_configs_tool_works_as_on_kafka(broker, kafka):
    outputs = []
    for server in (broker, kafka):
        altered = config_command(server.bootstrap, "--entity-default", "--alter", "--add-config",
                                 "log.retention.bytes=999000,log.cleaner.backoff.ms=2000")
        per_broker = config_command(server.bootstrap, "--entity-name", "1", "--alter", "--add-config",
                                    "log.retention.bytes=888000")
        described = config_command(server.bootstrap, "--entity-default", "--describe")
        described_broker = config_command(server.bootstrap, "--entity-name", "1", "--describe")
        outputs.append((altered, per_broker, [line for line in described if "min.insync.replicas" not in line],
                        described_broker))
        config_command(server.bootstrap, "--entity-default", "--alter", "--delete-config",
                       "log.retention.bytes,log.cleaner.backoff.ms")
        config_command(server.bootstrap, "--entity-name", "1", "--alter", "--delete-config", "log.retention.bytes")
    ours, kafkas = outputs
    assert ours == kafkas
    assert "log.retention.bytes=888000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.bytes=888000, " \
           "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=999000, DEFAULT_CONFIG:log.retention.bytes=-1}" in ours[3]


async def produce(bootstrap: str, topic: str, records: list[Record]) -> dict[str, Any]:
    answer = await _request(bootstrap, ApiKey.PRODUCE, {
        "transactional_id": None, "acks": 1, "timeout_ms": 30_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": build_batch(records)}]}]}, 9)
    return answer["responses"][0]["partition_responses"][0]


async def earliest_offset(bootstrap: str, topic: str) -> int:
    answer = await _request(bootstrap, ApiKey.LIST_OFFSETS, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}]}, 7)
    return answer["topics"][0]["partitions"][0]["offset"]


def test_a_batch_bigger_than_a_segment_is_refused_as_kafka_refuses_it(broker, kafka):
    """Kafka's log refuses a batch no segment can hold (RECORD_LIST_TOO_LARGE) once it is within
    max.message.bytes; 1 MiB segments, as Kafka 4 allows no smaller."""
    big = [Record(0, int(time.time() * 1000), b"k", b"y" * 1_200_000)]
    fits = [Record(0, int(time.time() * 1000), b"k", b"y" * 1_000_000)]
    answers = {}
    for name, bootstrap in (("ours", broker.bootstrap), ("kafka", kafka.bootstrap)):
        create_topic(bootstrap, "segment-sized", segment_bytes="1048576", max_message_bytes="2000000")
        # a Kafka broker may learn that it leads the new partition a moment after the topic is described
        wait_until(lambda b=bootstrap: asyncio.run(produce(b, "segment-sized", fits))["error_code"] == 0, 30,
                   message="the partition to take a batch that fits")
        answers[name] = asyncio.run(produce(bootstrap, "segment-sized", big))["error_code"]
    assert answers == {"ours": 18, "kafka": 18}


def test_defaults_change_behaviour_and_survive_a_restart(tmp_path):
    server = BrokerProcess(tmp_path / "data", extra_config={"log.retention.check.interval.ms": 200})
    server.start()
    try:
        # segments that hold the big batch below (Kafka refuses a batch bigger than segment.bytes)
        create_topic(server.bootstrap, "follows-defaults", segment_bytes="6000")
        create_topic(server.bootstrap, "own-limit", max_message_bytes="100000")
        day_ago = int(time.time() * 1000) - 24 * 3600 * 1000
        for n in range(10):
            assert asyncio.run(produce(server.bootstrap, "follows-defaults",
                                       [Record(0, day_ago, b"k", b"x" * 3000 + b"%d" % n)]))["error_code"] == 0
        big = [Record(0, int(time.time() * 1000), b"k", b"y" * 5000)]
        assert asyncio.run(produce(server.bootstrap, "follows-defaults", big))["error_code"] == 0

        assert alter(server.bootstrap, "", ("message.max.bytes", SET, "2000"),
                     ("log.retention.ms", SET, "3600000")) == (0, None)
        assert asyncio.run(produce(server.bootstrap, "follows-defaults", big))["error_code"] == 10  # too large
        assert asyncio.run(produce(server.bootstrap, "own-limit", big))["error_code"] == 0  # its own override
        # the day-old segments are past the new one-hour retention and go; the active one stays
        wait_until(lambda: asyncio.run(earliest_offset(server.bootstrap, "follows-defaults")) >= 8, 30,
                   message="retention to follow the dynamic log.retention.ms")
        # a listener added at run time is listened on again after the restart
        extra = free_port()
        assert alter(server.bootstrap, "1", ("listeners", SET, f"PLAINTEXT://{server.bootstrap},EXTRA://127.0.0.1:"
                                                               f"{extra}"),
                     ("listener.security.protocol.map", SET, "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT")) == (0, None)

        server.stop()
        server.start()
        assert brokers_told(f"127.0.0.1:{extra}") == [(1, "127.0.0.1", extra)]
        described = describe(server.bootstrap, TOPIC, "follows-defaults", ["max.message.bytes", "retention.ms"])
        assert {n: (c["value"], c["config_source"]) for n, c in described.items()} == {
            "max.message.bytes": ("2000", 3), "retention.ms": ("3600000", 3)}
        assert asyncio.run(produce(server.bootstrap, "follows-defaults", big))["error_code"] == 10
    finally:
        server.stop()


def brokers_told(bootstrap: str) -> list[tuple[int, str, int]]:
    """The brokers a Metadata request on that address is told of."""
    answer = asyncio.run(_request(bootstrap, ApiKey.METADATA, {"topics": [], "allow_auto_topic_creation": False}, 12))
    return sorted((b["node_id"], b["host"], b["port"]) for b in answer["brokers"])


def listeners_follow_in_the_metadata(cluster: BrokerCluster) -> None:
    """Broker 3 given a second listener and another advertised host at run time: it serves on the new one, and
    its registration in the cluster's metadata follows, so that broker 1 tells clients the new address."""
    port, extra = cluster.brokers[3].port, free_port()
    assert alter(cluster.brokers[3].bootstrap, "3",
                 ("listeners", SET, f"PLAINTEXT://127.0.0.1:{port},EXTRA://127.0.0.1:{extra}"),
                 ("listener.security.protocol.map", SET, "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT"),
                 ("advertised.listeners", SET, f"PLAINTEXT://localhost:{port}")) == (0, None)
    wait_until(lambda: (3, "localhost", port) in brokers_told(cluster.brokers[1].bootstrap), 30,
               message="broker 1 to tell clients broker 3's new advertised address")
    wait_until(lambda: brokers_told(f"127.0.0.1:{extra}") == [(3, "127.0.0.1", extra)], 30,
               message="the new listener's clients to be told of the brokers that have it")


def test_a_cluster_shares_its_dynamic_defaults_through_the_metadata(tmp_path):
    cluster = BrokerCluster(tmp_path / "cluster")
    try:
        cluster.start()
        assert alter(cluster.brokers[2].bootstrap, "", ("log.retention.ms", SET, "3600000")) == (0, None)
        assert alter(cluster.brokers[3].bootstrap, "3", ("log.retention.ms", SET, "7200000")) == (0, None)
        assert cluster.create_topic(1, "cluster-dynamic", 3, 3)["error_code"] == 0

        def retention(node: int) -> tuple[str, int]:
            entry = describe(cluster.brokers[node].bootstrap, TOPIC, "cluster-dynamic", ["retention.ms"])
            return entry["retention.ms"]["value"], entry["retention.ms"]["config_source"]

        wait_until(lambda: [retention(n) for n in (1, 2, 3)] == [("3600000", 3), ("3600000", 3), ("7200000", 2)],
                   30, message="every broker to follow the cluster default, broker 3 its own")
        listeners_follow_in_the_metadata(cluster)
        cluster.kill(1)
        cluster.restart(1)
        cluster.wait_healthy()
        wait_until(lambda: retention(1) == ("3600000", 3), 30, message="the restarted broker to keep the default")
        assert describe(cluster.brokers[1].bootstrap, BROKER, "", ["log.retention.ms"])["log.retention.ms"]["value"] \
            == "3600000"
    finally:
        cluster.stop()
