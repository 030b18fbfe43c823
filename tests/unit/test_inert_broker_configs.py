"""Every broker config of Kafka that this broker accepts and does not act on, each with the reason it has no
meaning here: a key that becomes one (a config a newer Kafka adds to ``broker/kafka_broker_configs.py``, or one
the broker stops reading) fails these tests until it is classified here and named in the README's "Kafka
configs without effect". None with a security or resource meaning belongs here: such a key is honoured or
refused."""

from __future__ import annotations

import fnmatch
import functools
import re
from pathlib import Path

import pytest

from broker.config import BROKER_KEYS, BrokerConfig
from broker.groups.machine import GroupConfig
from broker.kafka_broker_configs import KAFKA_BROKER_CONFIGS
from burrowpy.config import ConfigError

JVM = "a thread, queue or buffer of Kafka's JVM process: one event loop here, compaction on one thread"
KRAFT = "KRaft's controller and metadata log: a cluster here agrees through pysyncobj's Raft and SWIM gossip"
JAVA_TLS = "Java's TLS machinery: Python's ssl module chooses (ssl.enabled.protocols and ssl.cipher.suites are read)"
TIERED = "tiered storage: remote.storage.enable=true on a topic is refused, so nothing is ever tiered"
NOT_SERVED = "share groups, streams groups or an API this broker does not serve"
ASSIGNOR_TUNING = "tuning of KIP-848 behaviour this broker does not have (it assigns at once, no migration)"
METRICS = "JMX metrics and reporters: the broker serves Prometheus at metrics.listen"
ONE_DIR = "one data directory, and checkpoints written when they change rather than on Kafka's schedule"
AS_CLIENT = "the broker as a client of other brokers, a purgatory, or a check this broker always makes"
# inert only while nothing uses them: read once a TLS or SASL listener, or the authorizer, is configured (or, for
# an empty value, a setting left at its default)
UNTIL_USED = "read once a TLS or SASL listener or the authorizer uses it"

INERT: dict[str, str] = {
    **dict.fromkeys([
        "background.threads", "num.io.threads", "num.network.threads", "num.recovery.threads.per.data.dir",
        "num.replica.alter.log.dirs.threads", "group.coordinator.threads", "group.coordinator.background.threads",
        "log.cleaner.threads",
        # no request queue: a connection has one request at a time, so the requests waiting are bounded by
        # max.connections and their memory by queued.max.request.bytes
        "queued.max.requests",
        "group.coordinator.append.linger.ms", "group.coordinator.cached.buffer.max.bytes", "offsets.load.buffer.size",
        "transaction.state.log.load.buffer.size",
    ], JVM),
    **dict.fromkeys([
        "process.roles", "controller.listener.names", "controller.quorum.append.linger.ms",
        "controller.quorum.auto.join.enable", "controller.quorum.bootstrap.servers",
        "controller.quorum.election.backoff.max.ms", "controller.quorum.election.timeout.ms",
        "controller.quorum.fetch.max.bytes", "controller.quorum.fetch.snapshot.max.bytes",
        "controller.quorum.fetch.timeout.ms", "controller.quorum.request.timeout.ms",
        "controller.quorum.retry.backoff.ms", "controller.quorum.voters", "controller.socket.timeout.ms",
        "metadata.log.dir", "metadata.log.max.record.bytes.between.snapshots", "metadata.log.max.snapshot.interval.ms",
        "metadata.log.segment.bytes", "metadata.log.segment.ms", "metadata.max.idle.interval.ms",
        "metadata.max.retention.bytes", "metadata.max.retention.ms", "broker.heartbeat.interval.ms",
        "broker.session.timeout.ms", "initial.broker.registration.timeout.ms",
    ], KRAFT),
    **dict.fromkeys([
        "ssl.protocol", "ssl.provider", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
        "ssl.secure.random.implementation",
        # DEFAULT is what this broker does; any other rules are refused
        "ssl.principal.mapping.rules",
    ], JAVA_TLS),
    **dict.fromkeys([
        "follower.fetch.last.tiered.offset.enable", "log.remote.copy.lag.bytes", "log.remote.copy.lag.ms",
        "remote.fetch.max.wait.ms", "remote.list.offsets.request.timeout.ms",
        "remote.log.index.file.cache.total.size.bytes", "remote.log.manager.copier.thread.pool.size",
        "remote.log.manager.copy.max.bytes.per.second", "remote.log.manager.copy.quota.window.num",
        "remote.log.manager.copy.quota.window.size.seconds", "remote.log.manager.expiration.thread.pool.size",
        "remote.log.manager.fetch.max.bytes.per.second", "remote.log.manager.fetch.quota.window.num",
        "remote.log.manager.fetch.quota.window.size.seconds", "remote.log.manager.follower.thread.pool.size",
        "remote.log.manager.task.interval.ms", "remote.log.manager.thread.pool.size",
        "remote.log.metadata.custom.metadata.max.bytes", "remote.log.metadata.manager.class.name",
        "remote.log.metadata.manager.class.path", "remote.log.metadata.manager.impl.prefix",
        "remote.log.metadata.manager.listener.name", "remote.log.reader.max.pending.tasks",
        "remote.log.reader.threads", "remote.log.storage.manager.class.name", "remote.log.storage.manager.class.path",
        "remote.log.storage.manager.impl.prefix", "remote.log.storage.system.enable",
    ], TIERED),
    **{key: NOT_SERVED for key in KAFKA_BROKER_CONFIGS
       if key.startswith(("group.share.", "group.streams.", "share.coordinator.", "errors.deadletterqueue."))},
    **dict.fromkeys([
        "share.fetch.purgatory.purge.interval.requests",
        # fetch is sessionless: no session cache to bound
        "max.incremental.fetch.session.cache.slots",
        "telemetry.max.bytes",  # PushTelemetry
        # KIP-939's two-phase commit: InitProducerId is served to v4, which cannot ask for it
        "transaction.two.phase.commit.enable",
    ], NOT_SERVED),
    **dict.fromkeys([
        "group.consumer.migration.policy", "group.consumer.assignment.interval.ms",
        "group.consumer.min.assignment.interval.ms", "group.consumer.max.assignment.interval.ms",
    ], ASSIGNOR_TUNING),
    **dict.fromkeys([
        "metric.reporters", "kafka.metrics.polling.interval.secs", "kafka.metrics.reporters", "metrics.num.samples",
        "metrics.recording.level", "metrics.sample.window.ms",
    ], METRICS),
    **dict.fromkeys([
        "log.dir.failure.timeout.ms", "cordoned.log.dirs", "log.flush.offset.checkpoint.interval.ms",
        "log.flush.start.offset.checkpoint.interval.ms", "log.flush.scheduler.interval.ms",
    ], ONE_DIR),
    **dict.fromkeys([
        "request.timeout.ms", "socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms",
        # followers never serve consumers
        "replica.selector.class",
        "add.partitions.to.txn.retry.backoff.ms", "add.partitions.to.txn.retry.backoff.max.ms",
        # no throttle rate can be set for moving logs between directories
        "alter.log.dirs.replication.quota.window.num", "alter.log.dirs.replication.quota.window.size.seconds",
        # transactional writes are always verified (KIP-890)
        "transaction.partition.verification.enable",
        "offsets.commit.timeout.ms",
        "delete.records.purgatory.purge.interval.requests", "fetch.purgatory.purge.interval.requests",
        "producer.purgatory.purge.interval.requests",
    ], AS_CLIENT),
    **dict.fromkeys([
        "authorizer.class.name", "config.providers", "sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol",
        "ssl.allow.dn.changes", "ssl.allow.san.changes", "ssl.cipher.suites", "ssl.client.auth",
        "ssl.enabled.protocols", "ssl.endpoint.identification.algorithm", "ssl.key.password",
        "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.location", "ssl.keystore.password",
        "ssl.keystore.type", "ssl.truststore.certificates", "ssl.truststore.location", "ssl.truststore.password",
        "ssl.truststore.type",
    ], UNTIL_USED),
}


def inert_when_set_alone(tmp_path: Path) -> set[str]:
    """The Kafka broker configs that, each set alone to Kafka's default (or any value where Kafka has none), load
    and land among those the broker names as without effect."""
    inert = set()
    for key, (default, kind, *_) in KAFKA_BROKER_CONFIGS.items():
        if key in BROKER_KEYS:
            continue
        value = default if default is not None else {1: "false", 3: "1", 4: "1", 5: "1", 6: "1.0"}.get(kind, "x")
        try:
            config = BrokerConfig.load(overrides={key: value}, data_dir=str(tmp_path))
        except ConfigError:
            continue  # refused by name
        if key in config.inert:
            inert.add(key)
    return inert


def test_every_kafka_config_without_effect_is_classified(tmp_path):
    found = inert_when_set_alone(tmp_path)
    assert sorted(found - INERT.keys()) == [], "without effect, not classified here"
    assert sorted(INERT.keys() - found) == [], "classified here, but honoured or refused"


@functools.cache
def readme_section() -> str:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    start = readme.index("**Kafka configs without effect.**")
    return readme[start:readme.index("\n\n", readme.index("\n- ", start))]


@pytest.mark.parametrize("key", sorted(key for key, reason in INERT.items() if reason != UNTIL_USED))
def test_the_readme_names_each_one(key):
    names = re.findall(r"`([^`]+)`", readme_section())
    assert any(fnmatch.fnmatchcase(key, name) for name in names), f"{key} is not named in README's list"


@pytest.mark.parametrize("text, key, message", [
    ("group.consumer.session.timeout.ms: 30000\n", "group.consumer.session.timeout.ms",
     "greater than or equal to group.consumer.min.session.timeout.ms"),
    ("group.consumer.session.timeout.ms: 90000\n", "group.consumer.session.timeout.ms",
     "less than or equal to group.consumer.max.session.timeout.ms"),
    ("group.consumer.min.session.timeout.ms: 70000\n", "group.consumer.max.session.timeout.ms",
     "greater than or equal to group.consumer.min.session.timeout.ms"),
    ("group.consumer.heartbeat.interval.ms: 1000\n", "group.consumer.heartbeat.interval.ms",
     "greater than or equal to group.consumer.min.heartbeat.interval.ms"),
    ("group.consumer.heartbeat.interval.ms: 20000\n", "group.consumer.heartbeat.interval.ms",
     "less than or equal to group.consumer.max.heartbeat.interval.ms"),
    ("group.consumer.min.session.timeout.ms: 1000\ngroup.consumer.session.timeout.ms: 5000\n",
     "group.consumer.heartbeat.interval.ms", "less than group.consumer.session.timeout.ms"),
    ("offsets.topic.segment.bytes: 0\n", "offsets.topic.segment.bytes", "at least 1"),
    ("offsets.topic.compression.codec: 9\n", "offsets.topic.compression.codec", "Unknown compression type id: 9"),
    ("group.consumer.assignors: com.example.MyAssignor\n", "group.consumer.assignors", "cannot load"),
    ("group.consumer.assignors: range,range\n", "group.consumer.assignors", "twice"),
    ("group.consumer.assignors: ''\n", "group.consumer.assignors", "at least one"),
    # Kafka 4.4's words for these two (its storage tool refuses both)
    ("group.coordinator.rebalance.protocols: consumer\n", "group.coordinator.rebalance.protocols",
     "Disabling the 'classic' protocol is not supported"),
    ("group.coordinator.rebalance.protocols: classic,bogus\n", "group.coordinator.rebalance.protocols",
     "Invalid value bogus .* String must be one of: consumer, classic, share, streams"),
    # read or not, Kafka's configs take Kafka's types
    ("queued.max.requests: plenty\n", "queued.max.requests", "expected an integer"),
    ("transaction.partition.verification.enable: maybe\n", "transaction.partition.verification.enable",
     "expected true or false"),
    ("remote.log.manager.copy.max.bytes.per.second: fast\n", "remote.log.manager.copy.max.bytes.per.second",
     "expected an integer"),
])
def test_the_group_settings_are_checked_as_kafka_checks_them(tmp_path, text, key, message):
    path = tmp_path / "broker.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"broker\.yaml.*{re.escape(key)}.*{message}"):
        BrokerConfig.load(path, data_dir=str(tmp_path / "data"))


def test_group_consumer_assignors_take_kafkas_names_and_classes(tmp_path):
    config = BrokerConfig.load(overrides={
        "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor, uniform"},
        data_dir=str(tmp_path))
    assert GroupConfig.from_broker_config(config).consumer_assignors == ("range", "uniform") and not config.inert
    default = BrokerConfig.load(data_dir=str(tmp_path))
    assert GroupConfig.from_broker_config(default).consumer_assignors == ("uniform", "range")


def test_lowered_bounds_let_lower_timings_through(tmp_path):
    config = BrokerConfig.load(overrides={
        "group.consumer.min.session.timeout.ms": 6000, "group.consumer.session.timeout.ms": 6000,
        "group.consumer.min.heartbeat.interval.ms": 300, "group.consumer.heartbeat.interval.ms": 300},
        data_dir=str(tmp_path))
    assert config["group.consumer.session.timeout.ms"] == 6000 and not config.inert

