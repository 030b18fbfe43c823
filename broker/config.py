"""Broker configuration: Kafka's server.properties names, written as a flat YAML mapping.

``burrowpy broker --config broker.yaml`` reads it; ``--listen``, ``--data-dir`` and ``--node-id`` override
the file. Unknown keys are errors (a typo must not be silently ignored); every error names the file and
the key and the command exits 1.
"""

from __future__ import annotations

import errno
import functools
import socket
import ssl
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.client import ClientSecurity
from broker.config_loading import ConfigError, Section, load_document, valid_listen_address
from broker.connection_limits import parse_ip_overrides
from broker.errors import KafkaError
from broker.kafka_broker_configs import KAFKA_BROKER_CONFIGS
from broker.log.config import parse_configs
from broker.protocol.records import COMPRESSION_NAMES
from broker.protocol.types import uuid_from_text, uuid_text
from broker.security import SecurityConfigError
from broker.security.acl import STANDARD_AUTHORIZER, AclError, parse_principal, parse_super_users
from broker.security.listeners import (
    PLAINTEXT,
    SASL_PLAINTEXT,
    SASL_SSL,
    SSL,
    Listener,
    ListenerError,
    parse_listeners,
)
from broker.security.passwords import ENCODER_KEYS, password_encoders
from broker.security.sasl import SaslConfigError, SaslSettings, inter_broker_login, listener_sasl
from broker.security.tls import TlsConfigError, client_context, listener_lookup, server_context

# name -> (kind, default). Topic-level defaults (log.*) are handed to the log manager under the topic
# config name they set (see TOPIC_DEFAULTS).
BROKER_KEYS: dict[str, tuple[str, Any]] = {
    "node.id": ("int", 1),
    "listeners": ("str", "127.0.0.1:9092"),
    "advertised.listeners": ("str", ""),
    "data.dir": ("str", ""),
    "cluster.id": ("str", ""),
    "rack": ("str", ""),
    "auto.create.topics.enable": ("bool", True),
    "delete.topic.enable": ("bool", True),
    "num.partitions": ("int", 1),
    # the most partitions the cluster may hold, internal topics' included: burrowpy's own (KIP-578 proposed
    # it, Kafka has no such bound); CreateTopics and CreatePartitions past it get POLICY_VIOLATION
    "max.partitions": ("int", 10000),
    # the most files the logs hold open at once (segments and indexes kept open between uses, and the duplicates
    # a Fetch or a flush holds): burrowpy's own; 0 is half the process's open-file limit (see broker.log.descriptors)
    "log.max.open.files": ("int", 0),
    # the most partitions one DescribeTopicPartitions answer holds (KIP-966)
    "max.request.partition.size.limit": ("int", 2000),
    "default.replication.factor": ("int", 1),
    "message.max.bytes": ("int", 1048588),
    "socket.request.max.bytes": ("int", 104857600),
    # what frames being received may hold in all (0 or less: no bound); their buffers grow as their bytes arrive
    "queued.max.request.bytes": ("int", -1),
    "sasl.server.max.receive.size": ("int", 524288),  # the largest frame before a SASL login
    "socket.listen.backlog.size": ("int", 50),
    "max.connections": ("int", 2147483647),
    "max.connections.per.ip": ("int", 2147483647),
    "max.connections.per.ip.overrides": ("str", ""),
    "max.connection.creation.rate": ("int", 2147483647),
    "quota.window.num": ("int", 11),  # the creation rate's and client quotas' window: this many samples
    "quota.window.size.seconds": ("int", 1),  # of this length
    "controller.quota.window.num": ("int", 11),  # controller_mutation_rate's burst: this many windows' worth
    "controller.quota.window.size.seconds": ("int", 1),
    # the replication throttles' window (broker/cluster/replication_quota.py)
    "replication.quota.window.num": ("int", 11),
    "replication.quota.window.size.seconds": ("int", 1),
    # also the deadline for a TLS handshake and a SASL login (broker/server.py)
    "connections.max.idle.ms": ("int", 600000),
    "connection.failed.authentication.delay.ms": ("int", 100),
    # SO_RCVBUF of the listeners (accepted connections inherit it) and SO_SNDBUF of each connection. -1, the
    # kernel's own sizing, by default: Kafka's 100 KiB was no faster here, and slower for four consumers in
    # three of four A/B rows (bench/HISTORY.md)
    "socket.receive.buffer.bytes": ("int", -1),
    "socket.send.buffer.bytes": ("int", -1),
    # TCP congestion control of the listeners' connections (Linux's TCP_CONGESTION; accepted connections take
    # the listener's): empty for the system's (net.ipv4.tcp_congestion_control). burrowpy's own, Kafka has
    # none: with bbr the kernel paces every send with timers, loopback included, which cost consumers on the
    # same machine about a quarter of their rate here (bench/HISTORY.md, "What four consumers cost")
    "socket.congestion.control": ("str", ""),
    "log.segment.bytes": ("int", 1073741824),
    "log.roll.ms": ("int", 7 * 24 * 3600 * 1000),
    "log.retention.ms": ("int", 7 * 24 * 3600 * 1000),
    "log.retention.bytes": ("int", -1),
    "log.retention.disk.percent": ("float", -1.0),
    "log.cleanup.policy": ("str", "delete"),
    "log.cleaner.delete.retention.ms": ("int", 24 * 3600 * 1000),
    "log.cleaner.min.cleanable.ratio": ("float", 0.5),
    "log.cleaner.min.compaction.lag.ms": ("int", 0),
    "log.cleaner.max.compaction.lag.ms": ("int", 2**63 - 1),
    "log.roll.jitter.ms": ("int", 0),
    "log.index.size.max.bytes": ("int", 10 * 1024 * 1024),
    "log.segment.delete.delay.ms": ("int", 60000),
    "log.preallocate": ("bool", False),
    "log.message.timestamp.before.max.ms": ("int", 2**63 - 1),
    "log.message.timestamp.after.max.ms": ("int", 3600000),
    "log.local.retention.ms": ("int", -2),
    "log.local.retention.bytes": ("int", -2),
    "compression.type": ("str", "producer"),
    "compression.gzip.level": ("int", -1),
    "compression.lz4.level": ("int", 9),
    "compression.zstd.level": ("int", 3),
    "max.decompressed.message.bytes": ("int", 2147483639),
    "unclean.leader.election.enable": ("bool", False),
    # the cluster controller's moves of leadership back to preferred replicas (broker/cluster/controller.py)
    "auto.leader.rebalance.enable": ("bool", True),
    "leader.imbalance.check.interval.seconds": ("int", 300),
    # Kafka 3's setting, burrowpy's own since Kafka 4 dropped it with ZooKeeper; 0 by default, as Kafka 4's KRaft
    # controller behaves (it rebalances on any imbalance); Kafka 3's default was 10
    "leader.imbalance.per.broker.percentage": ("int", 0),
    # a cluster broker's hand-over of its leaderships before it stops (broker/cluster/node.py), waited for at most
    # max.retries times retry.backoff.ms: Kafka 3's settings, burrowpy's own since Kafka 4 dropped them with
    # ZooKeeper (a Kafka 4 broker waits for its controller's approval within a fixed 5 minutes)
    "controlled.shutdown.enable": ("bool", True),
    "controlled.shutdown.max.retries": ("int", 3),
    "controlled.shutdown.retry.backoff.ms": ("int", 5000),
    "log.message.timestamp.type": ("str", "CreateTime"),
    "log.index.interval.bytes": ("int", 4096),
    "log.flush.interval.messages": ("int", 2**63 - 1),
    "log.flush.interval.ms": ("int", 2**63 - 1),
    "log.retention.check.interval.ms": ("int", 300000),
    "log.cleaner.backoff.ms": ("int", 15000),
    # the log cleaner's resources (broker/log/cleaner.py): off, nothing is compacted (Kafka's read-only switch)
    "log.cleaner.enable": ("bool", True),
    "log.cleaner.dedupe.buffer.size": ("int", 134217728),
    "log.cleaner.io.buffer.load.factor": ("float", 0.9),
    "log.cleaner.io.buffer.size": ("int", 524288),
    "log.cleaner.io.max.bytes.per.second": ("float", 1.7976931348623157e308),
    "min.insync.replicas": ("int", 1),
    "offsets.topic.num.partitions": ("int", 50),
    "offsets.topic.replication.factor": ("int", 1),
    "offsets.topic.segment.bytes": ("int", 104857600),  # __consumer_offsets' segment.bytes, set as it is created
    # the codec of the group coordinator's batches (Kafka's compression type ids: 0 none ... 4 zstd)
    "offsets.topic.compression.codec": ("int", 0),
    "offsets.retention.minutes": ("int", 10080),
    "offsets.retention.check.interval.ms": ("int", 600000),
    "offset.metadata.max.bytes": ("int", 4096),  # a committed offset's metadata: longer is OFFSET_METADATA_TOO_LARGE
    "group.initial.rebalance.delay.ms": ("int", 3000),
    "group.min.session.timeout.ms": ("int", 6000),
    "group.max.session.timeout.ms": ("int", 1800000),
    "group.max.size": ("int", 2147483647),  # members of a classic group: more get GROUP_MAX_SIZE_REACHED
    "group.consumer.max.size": ("int", 2147483647),  # members of a KIP-848 consumer group, the same
    # the assignors a KIP-848 group may ask for (uniform, range), the first its default
    "group.consumer.assignors": ("str", "uniform,range"),
    # without consumer, KIP-848's APIs answer UNSUPPORTED_VERSION (share and streams groups: not served here)
    "group.coordinator.rebalance.protocols": ("str", "classic,consumer,streams"),
    "group.metadata.value.version": ("int", 3),
    "group.consumer.session.timeout.ms": ("int", 45000),
    "connections.max.reauth.ms": ("int", 0),
    "group.consumer.heartbeat.interval.ms": ("int", 5000),
    # the bounds Kafka holds the two above to (checked at start-up, as Kafka's GroupCoordinatorConfig does)
    "group.consumer.min.session.timeout.ms": ("int", 45000),
    "group.consumer.max.session.timeout.ms": ("int", 60000),
    "group.consumer.min.heartbeat.interval.ms": ("int", 5000),
    "group.consumer.max.heartbeat.interval.ms": ("int", 15000),
    "replica.lag.time.max.ms": ("int", 30000),
    "replica.high.watermark.checkpoint.interval.ms": ("int", 5000),
    # the replica fetcher's (broker/cluster/replication.py): the bytes it asks for per partition and per response
    # how long a partition keeps an idle producer's state (its sequences, for duplicates), and how often it looks
    "producer.id.expiration.ms": ("int", 86400000),
    "producer.id.expiration.check.interval.ms": ("int", 600000),
    # the largest Fetch response to a consumer (Kafka's default, 55 MiB); KIP-74's first batch may exceed it
    "fetch.max.bytes": ("int", 57671680),
    "replica.fetch.max.bytes": ("int", 1048576),
    "replica.fetch.response.max.bytes": ("int", 10485760),
    "replica.fetch.wait.max.ms": ("int", 500),
    "replica.fetch.min.bytes": ("int", 1),
    "replica.fetch.backoff.ms": ("int", 1000),
    "replica.socket.timeout.ms": ("int", 30000),
    # SO_RCVBUF of the fetcher's connections: the kernel's sizing by default, as for the listeners' (Kafka's
    # 64 KiB made a follower copy a partition about a quarter slower here)
    "replica.socket.receive.buffer.bytes": ("int", -1),
    "num.replica.fetchers": ("int", 1),
    "transaction.state.log.num.partitions": ("int", 50),
    "transaction.state.log.replication.factor": ("int", 1),
    "transaction.state.log.segment.bytes": ("int", 104857600),
    # `__transaction_state`'s min.insync.replicas, set as it is created (Kafka's default 2; at most the replication
    # factor it is created with, which this broker caps at the live brokers): the coordinator's writes need that ISR
    "transaction.state.log.min.isr": ("int", 2),
    "transaction.max.timeout.ms": ("int", 900000),
    "transactional.id.expiration.ms": ("int", 604800000),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ("int", 10000),
    "transaction.remove.expired.transaction.cleanup.interval.ms": ("int", 3600000),
    # host:port of the Prometheus endpoint (GET /metrics; broker/metrics.py): burrowpy's own, off when empty, as
    # Kafka's JMX is until JMX_PORT is set
    "metrics.listen": ("str", ""),
    # KIP-226's password encoder of dynamic password configs (broker.security.passwords)
    **ENCODER_KEYS,
}

# The KIP-848 assignors (broker.groups.assignors), by name
UNIFORM = "uniform"
RANGE = "range"
ASSIGNORS = (UNIFORM, RANGE)
# group.consumer.assignors may name them by Kafka's classes too
_KAFKA_CLASSES = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM,
                  "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE}


def parse_assignors(value: str) -> tuple[str, ...]:
    """``group.consumer.assignors``: the assignors a KIP-848 group may ask for, the first its default when none
    asks. ValueError for an empty list, a repeated one, or a class this broker cannot load."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise ValueError("must name at least one assignor")
    chosen = []
    for name in names:
        assignor = name if name in ASSIGNORS else _KAFKA_CLASSES.get(name)
        if assignor is None:
            raise ValueError(f"{name!r} is an assignor this broker cannot load; it has {', '.join(ASSIGNORS)}")
        if assignor in chosen:
            raise ValueError(f"names {assignor!r} twice")
        chosen.append(assignor)
    return tuple(chosen)


REBALANCE_PROTOCOLS = ("consumer", "classic", "share", "streams")


@functools.lru_cache(maxsize=8)
def parse_rebalance_protocols(value: str) -> frozenset[str]:
    """``group.coordinator.rebalance.protocols``, checked in Kafka's words (ValueError)."""
    names = frozenset(name.strip() for name in value.split(",") if name.strip())
    unknown = sorted(names - set(REBALANCE_PROTOCOLS))
    if unknown:
        raise ValueError(f"Invalid value {unknown[0]} for configuration group.coordinator.rebalance.protocols: "
                         f"String must be one of: {', '.join(REBALANCE_PROTOCOLS)}")
    if "classic" not in names:
        raise ValueError("Disabling the 'classic' protocol is not supported.")
    return names


# The authorizer's settings (broker.security.acl): Kafka hands all three to its StandardAuthorizer.
AUTHORIZER_KEYS = ("authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found")

# Kafka broker configs about SASL and authorization this broker cannot honour (GSSAPI, OAUTHBEARER, delegation
# tokens, custom principal builders...): refused. Those it honours are let through before this check.
SECURITY_PREFIXES = ("sasl.", "listener.name.", "authorizer.", "super.users", "security.",
                     "principal.builder", "allow.everyone.if.no.acl.found", "delegation.token.",
                     "early.start.listeners")

# broker key -> the per-topic config it provides the default for
TOPIC_DEFAULTS = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.retention.disk.percent": "retention.disk.percent",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "message.max.bytes": "max.message.bytes",
    "min.insync.replicas": "min.insync.replicas",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.preallocate": "preallocate",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.local.retention.ms": "local.retention.ms",
    "log.local.retention.bytes": "local.retention.bytes",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "max.decompressed.message.bytes": "max.decompressed.message.bytes",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}


# Listener and TLS settings this broker reads (broker/security); every other ssl.* config of Kafka tunes
# Java's TLS machinery and is accepted with the start-up warning about configs without effect here.
_HONOURED_KEYS = frozenset({
    "listener.security.protocol.map", "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates", "ssl.client.auth",
    "ssl.enabled.protocols", "ssl.cipher.suites", "inter.broker.listener.name", "ssl.endpoint.identification.algorithm",
    "ssl.allow.dn.changes", "ssl.allow.san.changes", "security.inter.broker.protocol",
})
# Kafka configs that name Java classes (a policy, a quota callback, a TLS engine): refused when set, rather than
# run without the policy or limit they would enforce
_JAVA_CLASS_KEYS = ("ssl.engine.factory.class", "create.topic.policy.class.name", "alter.config.policy.class.name",
                    "client.quota.callback.class")

# Kafka's older or alternative names for a setting this broker reads: (name, factor to the broker key's unit),
# the broker key winning when both are set, as on Kafka (log.retention.ms over .minutes over .hours)
SYNONYMS: dict[str, tuple[tuple[str, int | None], ...]] = {
    "log.retention.ms": (("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
    "log.roll.ms": (("log.roll.hours", 3_600_000),),
    "log.roll.jitter.ms": (("log.roll.jitter.hours", 3_600_000),),
    "node.id": (("broker.id", None),),
    "rack": (("broker.rack", None),),
    "data.dir": (("log.dirs", None), ("log.dir", None)),
}
_SYNONYM_KEYS = frozenset(name for names in SYNONYMS.values() for name, _ in names)


def is_honoured_security_key(key: str) -> bool:
    """A TLS or SASL setting (broker-wide or per listener) this broker acts on."""
    if key.startswith("listener.name."):
        key = key[len("listener.name."):].partition(".")[2]
    return key in _HONOURED_KEYS or is_sasl_key(key) or key in _JAAS_KEYS


_JAAS_KEYS = ("plain.sasl.jaas.config", "scram-sha-256.sasl.jaas.config", "scram-sha-512.sasl.jaas.config")


def is_sasl_key(key: str) -> bool:
    """The SASL settings this broker reads: the mechanisms (broker-wide or per listener) and a listener's JAAS
    lines (listener.name.<l>.plain.sasl.jaas.config, ...scram-sha-256.sasl.jaas.config, ...)."""
    if key in ("sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol"):
        return True
    if key.startswith("listener.name."):
        rest = key[len("listener.name."):].partition(".")[2]
        return rest == "sasl.enabled.mechanisms" or rest in _JAAS_KEYS
    return False


def is_tls_key(key: str) -> bool:
    """A broker-wide ssl.* config of Kafka, or one for a single listener (listener.name.<l>.ssl.*)."""
    if key.startswith("listener.name."):
        _, _, rest = key[len("listener.name."):].partition(".")
        return rest.startswith("ssl.") and rest in KAFKA_BROKER_CONFIGS
    return key.startswith("ssl.") and key in KAFKA_BROKER_CONFIGS


def listener_security(listeners: list[Listener], settings: Mapping[str, Any]
                      ) -> tuple[dict[str, ssl.SSLContext], dict[str, SaslSettings]]:
    """Each TLS listener's SSLContext and each SASL listener's settings, from Kafka's ``ssl.*``/``sasl.*``
    settings (broker-wide or ``listener.name.<l>.``); SecurityConfigError names the setting at fault."""
    ssl_contexts, sasl_settings = {}, {}
    for listener in listeners:
        lookup = listener_lookup(listener.name, settings)
        if listener.protocol in (SASL_PLAINTEXT, SASL_SSL):
            sasl_settings[listener.name] = listener_sasl(listener.name, lookup)
        if listener.uses_tls:
            ssl_contexts[listener.name] = server_context(lookup)
    return ssl_contexts, sasl_settings


def _inter_broker_listener(section: Section, raw: dict[str, Any], listeners: list[Listener]) -> Listener:
    """The listener ``inter.broker.listener.name`` names or, as Kafka's older form, the one
    ``security.inter.broker.protocol`` names by its protocol (a listener called as the protocol is); PLAINTEXT
    when neither is set. Kafka refuses both at once."""
    named, protocol = raw.get("inter.broker.listener.name"), raw.get("security.inter.broker.protocol")
    if named and protocol:
        raise section.error("security.inter.broker.protocol", "only one of inter.broker.listener.name and "
                                                              "security.inter.broker.protocol may be set")
    key = "security.inter.broker.protocol" if protocol else "inter.broker.listener.name"
    wanted = str(named or protocol or "PLAINTEXT").upper()
    if protocol and wanted not in (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL):
        raise section.error(key, f"{protocol!r} is not a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, "
                                 "SASL_SSL)")
    found = next((listener for listener in listeners if listener.name == wanted), None)
    if found is None:
        raise section.error(key, f"{wanted} is not one of the listeners ({', '.join(x.name for x in listeners)}); "
                                 "name the one brokers reach each other on")
    return found


def _inter_broker(section: Section, raw: dict[str, Any], listeners: list[Listener],
                  sasl_settings: dict[str, SaslSettings]) -> tuple[Listener, ClientSecurity | None]:
    """The listener a cluster's brokers reach each other on (``inter.broker.listener.name``, else the one
    named PLAINTEXT, as in Kafka) and what connecting to it takes: a TLS client context from the listener's
    stores, a SASL login (``sasl.mechanism.inter.broker.protocol``, with the username and password of the
    listener's JAAS line for it)."""
    found = _inter_broker_listener(section, raw, listeners)
    if found.protocol == PLAINTEXT:
        return found, None
    lookup = listener_lookup(found.name, raw)
    context = None
    if found.uses_tls:
        algorithm = raw.get(f"listener.name.{found.name.lower()}.ssl.endpoint.identification.algorithm",
                            raw.get("ssl.endpoint.identification.algorithm", "https"))
        try:
            context = client_context(lookup, check_hostname=bool(str(algorithm or "").strip()))
        except TlsConfigError as exc:
            raise section.error(exc.key, str(exc)) from None
    mechanism, username, password = None, "", ""
    if found.protocol in (SASL_PLAINTEXT, SASL_SSL):
        mechanism = str(raw.get("sasl.mechanism.inter.broker.protocol") or "").upper()
        offered = sasl_settings[found.name].mechanisms
        if mechanism not in offered:
            raise section.error("sasl.mechanism.inter.broker.protocol",
                                f"brokers log in to each other on {found.name}: set one of the mechanisms it "
                                f"offers ({', '.join(offered)}); Kafka's default, GSSAPI, is not available here")
        try:
            username, password = inter_broker_login(found.name, mechanism, lookup)
        except SaslConfigError as exc:
            raise section.error(exc.key, str(exc)) from None
    return found, ClientSecurity(context, mechanism, username, password)


def cleaner_value_problem(key: str, value: float) -> str | None:
    """What is wrong with a value of the log cleaner's load factor or throttle, or None. Kafka has no
    validator for either, but a load factor over 1 overfills its offset map (the cleaner thread dies), one of 0
    maps no key (no pass gets anywhere), and a rate of 0 or less is no rate: refused here instead."""
    if key == "log.cleaner.io.buffer.load.factor" and not 0 < value <= 1:
        return "must be more than 0 and at most 1 (the share of the dedupe buffer a pass fills)"
    if key == "log.cleaner.io.max.bytes.per.second" and not value > 0:
        return "must be more than 0 bytes per second"
    return None


def _metrics_address(section: Section, text: str) -> tuple[str, int] | None:
    """metrics.listen as (host, port); None when empty. The host is required: the metrics name every topic, so
    where they are served (127.0.0.1 for this machine only) is the operator's explicit choice."""
    if not text:
        return None
    host, _, port = text.rpartition(":")
    if not valid_listen_address(text) or not host:
        raise section.error("metrics.listen", f"{text!r} is not host:port (127.0.0.1:9308 serves this machine "
                                              "only, 0.0.0.0:9308 every interface)")
    return host.strip("[]"), int(port)


def _check_kafka_types(section: Section, raw: Mapping[str, Any]) -> None:
    """Kafka's configs this broker does not read still take Kafka's type: a number or a boolean that is not one
    is refused, as Kafka refuses it, rather than kept and described as given."""
    getters: dict[int, Callable[[str, Any], Any]] = {1: section.get_bool, 3: section.get_int, 4: section.get_int,
                                                     5: section.get_int, 6: section.get_float}
    for key in raw:
        if key not in BROKER_KEYS and key in KAFKA_BROKER_CONFIGS:
            getter = getters.get(KAFKA_BROKER_CONFIGS[key][1])
            if getter is not None:
                getter(key, None)


def _check_consumer_group_bounds(section: Section, settings: dict[str, Any]) -> None:
    """Kafka's start-up checks of the KIP-848 group timings against their bounds, in Kafka's words."""
    session, heartbeat = "group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms"
    for key in (session, heartbeat, "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms",
                "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
                "offsets.topic.segment.bytes"):
        if settings[key] < 1:
            raise section.error(key, "must be at least 1")
    codec = settings["offsets.topic.compression.codec"]
    if codec not in COMPRESSION_NAMES:
        raise section.error("offsets.topic.compression.codec", f"Unknown compression type id: {codec} (Kafka's ids: "
                            + ", ".join(f"{i} {name}" for i, name in COMPRESSION_NAMES.items()) + ")")
    for value, low, high in ((heartbeat, "group.consumer.min.heartbeat.interval.ms",
                              "group.consumer.max.heartbeat.interval.ms"),
                             (session, "group.consumer.min.session.timeout.ms",
                              "group.consumer.max.session.timeout.ms")):
        if settings[high] < settings[low]:
            raise section.error(high, f"must be greater than or equal to {low}")
        if settings[value] < settings[low]:
            raise section.error(value, f"must be greater than or equal to {low}")
        if settings[value] > settings[high]:
            raise section.error(value, f"must be less than or equal to {high}")
    if settings[heartbeat] >= settings[session]:
        raise section.error(heartbeat, f"must be less than {session}")


def _check_cleaner(section: Section, settings: dict[str, Any]) -> None:
    """Kafka's requirements on the log cleaner's buffers, and cleaner_value_problem's."""
    threads = section.get_int("log.cleaner.threads", 1)
    if settings["log.cleaner.dedupe.buffer.size"] < threads << 20:
        raise section.error("log.cleaner.dedupe.buffer.size", "must be at least 1MB per cleaner thread (Kafka's rule)")
    if settings["log.cleaner.io.buffer.size"] < 0:
        raise section.error("log.cleaner.io.buffer.size", "must be at least 0")
    for key in ("log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second"):
        if (problem := cleaner_value_problem(key, settings[key])) is not None:
            raise section.error(key, problem)


def _check_replica_fetcher(section: Section, settings: dict[str, Any]) -> None:
    """Kafka's checks of the replica fetcher's settings: its validators' least values, and the two requirements
    KafkaConfig puts on replica.fetch.wait.max.ms (a follower's fetch may wait at the leader that long)."""
    for key, least in (("fetch.max.bytes", 1024), ("replica.fetch.max.bytes", 0), ("replica.fetch.response.max.bytes", 0),
                       ("replica.fetch.backoff.ms", 0), ("num.replica.fetchers", 1)):
        if settings[key] < least:
            raise section.error(key, f"must be at least {least}, got {settings[key]}")
    if settings["replica.socket.receive.buffer.bytes"] < -1 or settings["replica.socket.receive.buffer.bytes"] == 0:
        raise section.error("replica.socket.receive.buffer.bytes",
                            "must be a number of bytes, or -1 for the operating system's default")
    wait = settings["replica.fetch.wait.max.ms"]
    if wait > settings["replica.socket.timeout.ms"]:
        raise section.error("replica.socket.timeout.ms",
                            f"({settings['replica.socket.timeout.ms']}) must be at least replica.fetch.wait.max.ms "
                            f"({wait}): the leader may hold a follower's fetch that long")
    if wait > settings["replica.lag.time.max.ms"]:
        raise section.error("replica.fetch.wait.max.ms",
                            f"({wait}) must be at most replica.lag.time.max.ms ({settings['replica.lag.time.max.ms']}), "
                            "or idle followers would keep leaving the ISR")


def congestion_control_problem(name: str) -> str | None:
    """Why ``name`` cannot be the congestion control of the broker's connections, or None when it can: tried
    on a socket of its own, as the listeners will set it (a privileged process may have the kernel load it)."""
    if not hasattr(socket, "TCP_CONGESTION"):
        return "is a Linux setting (TCP_CONGESTION); leave it empty on this system"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, name.encode())
        except OSError as exc:
            sysctl = "tcp_allowed_congestion_control" if exc.errno == errno.EPERM else \
                "tcp_available_congestion_control"
            known = Path("/proc/sys/net/ipv4", sysctl).read_text().split()
            return f"{name!r} cannot be set here ({exc.strerror}); net.ipv4.{sysctl}: {', '.join(known)}"
    return None


@dataclass
class BrokerConfig:
    node_id: int
    host: str
    port: int
    advertised_host: str
    advertised_port: int
    data_dir: Path
    cluster_id: str
    settings: dict[str, Any] = field(default_factory=dict)
    cluster: Section | None = None  # the `cluster:` block (multi-node); None on a single node
    explicit: frozenset[str] = frozenset()  # the keys the file (or the command line) set
    # Kafka broker configs the file set that burrowpy has no use for (Kafka's threads, buffers, quotas, ...):
    # accepted so that a server.properties works unchanged, and named in a warning at start-up
    inert: dict[str, Any] = field(default_factory=dict)
    listeners: list[Listener] = field(default_factory=list)  # the first one is `host`/`port` above
    protocol_map: str = ""  # listener.security.protocol.map as the file gave it ("": Kafka's default)
    ssl_contexts: dict[str, Any] = field(default_factory=dict)  # listener name -> ssl.SSLContext
    sasl_settings: dict[str, Any] = field(default_factory=dict)  # listener name -> security.sasl.SaslSettings
    # the TLS and SASL settings the file gave (ssl.*, sasl.*, listener.name.<l>.*), as given: what the dynamic
    # ones (broker.dynamic_config) are laid over when a listener's context is built again at run time
    security_settings: dict[str, Any] = field(default_factory=dict)
    # SCRAM credentials given at start-up (``--add-scram``): (user, mechanism, credential)
    scram_additions: list[Any] = field(default_factory=list)
    # authorizer.class.name set (to Kafka's StandardAuthorizer): ACLs are enforced, with these two settings
    authorizer: bool = False
    super_users: list[str] = field(default_factory=list)
    allow_everyone_if_no_acl_found: bool = False
    # the listener brokers of a cluster reach each other on, and how (TLS, SASL login); None: plain TCP
    inter_broker_listener: str = "PLAINTEXT"
    inter_broker_security: ClientSecurity | None = None
    metrics_address: tuple[str, int] | None = None  # metrics.listen, parsed; None: no metrics endpoint

    def __getitem__(self, key: str) -> Any:
        return self.settings[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.settings.get(key, default)

    def topic_defaults(self) -> dict[str, Any]:
        return {topic_key: self.settings[broker_key] for broker_key, topic_key in TOPIC_DEFAULTS.items()}

    @classmethod
    def load(cls, path: str | Path | None = None, *, listen: str | None = None, data_dir: str | None = None,
             node_id: int | None = None, overrides: dict[str, Any] | None = None) -> BrokerConfig:
        file = str(path) if path else "<command line>"
        raw = load_document(path) if path else {}
        cluster_block = raw.pop("cluster", None)
        raw.update(overrides or {})
        section = Section(file, "broker", raw)
        for key in raw:
            if is_tls_key(key) or is_sasl_key(key) or key in AUTHORIZER_KEYS:
                continue
            if key not in BROKER_KEYS and key not in KAFKA_BROKER_CONFIGS:
                raise section.error(key, "unknown key: neither a broker config of Apache Kafka 4.4 nor one of "
                                         "burrowpy's own (config/broker.yaml lists those)")
            if key.startswith(SECURITY_PREFIXES) and key not in BROKER_KEYS and key != "security.inter.broker.protocol":
                raise section.error(key, "this SASL or authorization setting is not available in this broker (it "
                                         "has TLS, SASL PLAIN and SCRAM, and Kafka's StandardAuthorizer); "
                                         "refusing it rather than running without the security it asks for")
        getters: dict[str, Callable[[str, Any], Any]] = {"int": section.get_int, "str": section.get_str, "bool": section.get_bool,
                   "float": section.get_float}
        settings = {key: getters[kind](key, default) for key, (kind, default) in BROKER_KEYS.items()}
        for key, synonyms in SYNONYMS.items():
            given = [(name, factor) for name, factor in synonyms if name in raw]
            if key in raw or not given:
                continue
            name, factor = given[0]
            if factor is not None:
                settings[key] = max(section.get_int(name, 0) * factor, -1)  # negative: no limit, as on Kafka
            elif BROKER_KEYS[key][0] == "int":
                settings[key] = section.get_int(name, 0)
            else:
                settings[key] = section.get_str(name, "")
        if not data_dir and "," in settings["data.dir"]:
            raise section.error("log.dirs" if "log.dirs" in raw else "data.dir",
                                "one data directory only: this broker keeps its logs in a single directory")
        if "broker.id" in raw and "node.id" in raw and section.get_int("broker.id", -1) not in (-1, settings["node.id"]):
            raise section.error("broker.id", "must be node.id (Kafka's rule), or left out")
        if listen:
            settings["listeners"] = listen
        if data_dir:
            settings["data.dir"] = data_dir
        if node_id is not None:
            settings["node.id"] = node_id
        if not settings["data.dir"]:
            raise section.error("data.dir", "is required (or pass --data-dir)")
        if settings["log.cleanup.policy"] not in ("delete", "compact", "compact,delete", "delete,compact"):
            raise section.error("log.cleanup.policy", "must be delete, compact or compact,delete")
        if settings["log.message.timestamp.type"] not in ("CreateTime", "LogAppendTime"):
            raise section.error("log.message.timestamp.type", "must be CreateTime or LogAppendTime")
        for key in ("socket.receive.buffer.bytes", "socket.send.buffer.bytes"):
            if settings[key] < -1 or settings[key] == 0:
                raise section.error(key, "must be a number of bytes, or -1 for the operating system's default")
        if (wanted := settings["socket.congestion.control"]) and (problem := congestion_control_problem(wanted)):
            raise section.error("socket.congestion.control", problem)
        for key in ("socket.request.max.bytes", "sasl.server.max.receive.size", "socket.listen.backlog.size",
                    "max.connections", "max.connections.per.ip", "max.partitions", "log.max.open.files",
                    "max.connection.creation.rate",
                    "quota.window.num", "quota.window.size.seconds", "controller.quota.window.num",
                    "controller.quota.window.size.seconds", "replication.quota.window.num",
                    "replication.quota.window.size.seconds", "producer.id.expiration.ms",
                    "producer.id.expiration.check.interval.ms", "max.request.partition.size.limit",
                    "leader.imbalance.check.interval.seconds", "transaction.state.log.min.isr"):
            least = 0 if key.startswith(("max.", "log.max.")) and key != "max.request.partition.size.limit" else 1
            if settings[key] < least:
                raise section.error(key, f"must be at least {least}")
        for key in ("controlled.shutdown.max.retries", "controlled.shutdown.retry.backoff.ms"):
            if settings[key] < 0:
                raise section.error(key, "must be at least 0")
        if not 0 <= settings["leader.imbalance.per.broker.percentage"] <= 100:
            raise section.error("leader.imbalance.per.broker.percentage", "must be a percentage, 0 to 100")
        delay = settings["connection.failed.authentication.delay.ms"]
        if delay < 0 or 0 <= settings["connections.max.idle.ms"] <= delay:
            raise section.error("connection.failed.authentication.delay.ms", "must be at least 0 and less than "
                                                                             "connections.max.idle.ms (Kafka's rule)")
        queued = settings["queued.max.request.bytes"]
        if 0 < queued < settings["socket.request.max.bytes"]:
            # Kafka's rule: a budget smaller than one request could never let the largest one in
            raise section.error("queued.max.request.bytes", "must be at least socket.request.max.bytes (or 0 "
                                                            "or less: no bound)")
        try:
            parse_ip_overrides(settings["max.connections.per.ip.overrides"])
        except ValueError as exc:
            raise section.error("max.connections.per.ip.overrides", str(exc)) from None
        _check_replica_fetcher(section, settings)
        try:
            password_encoders(settings)
        except SecurityConfigError as exc:
            raise section.error(exc.key, str(exc)) from None
        metrics_address = _metrics_address(section, settings["metrics.listen"])
        _check_cleaner(section, settings)
        _check_consumer_group_bounds(section, settings)
        _check_kafka_types(section, raw)
        for key, parse in (("group.consumer.assignors", parse_assignors),
                           ("group.coordinator.rebalance.protocols", parse_rebalance_protocols)):
            try:
                parse(settings[key])
            except ValueError as exc:
                raise section.error(key, str(exc)) from None
        if settings["group.metadata.value.version"] not in (0, 1, 2, 3):
            raise section.error("group.metadata.value.version", "must be 0, 1, 2 or 3")
        for broker_key, topic_key in TOPIC_DEFAULTS.items():  # topic defaults take the topic configs' checks
            try:
                parse_configs({topic_key: settings[broker_key]})
            except KafkaError as exc:
                raise section.error(broker_key, exc.message) from None
        try:
            listeners = parse_listeners(settings["listeners"], settings["advertised.listeners"],
                                        str(raw.get("listener.security.protocol.map") or ""))
        except ListenerError as exc:
            raise section.error(exc.key, str(exc)) from None
        try:
            ssl_contexts, sasl_settings = listener_security(listeners, raw)
        except SecurityConfigError as exc:
            raise section.error(exc.key, str(exc)) from None
        for key in raw:
            if key.endswith(_JAVA_CLASS_KEYS) and raw[key]:
                raise section.error(key, "names a Java class this broker cannot load")
        if section.get_str("config.providers", ""):
            raise section.error("config.providers", "config providers are Java classes this broker cannot load: "
                                                    "give the values themselves")
        if section.get_str("ssl.principal.mapping.rules", "DEFAULT").strip() != "DEFAULT":
            raise section.error("ssl.principal.mapping.rules", "only DEFAULT (the certificate's subject as Java "
                                                               "prints it) is available; refusing other rules "
                                                               "rather than give principals other names")
        authorizer = section.get_str("authorizer.class.name", "") or ""
        if authorizer not in ("", STANDARD_AUTHORIZER):
            raise section.error("authorizer.class.name", f"{authorizer!r} is not an authorizer this broker has; it "
                                                         f"has Kafka's {STANDARD_AUTHORIZER}")
        super_users = parse_super_users(section.get_str("super.users", ""))
        for principal in super_users:
            try:
                parse_principal(principal)
            except AclError as exc:
                raise section.error("super.users", str(exc)) from None
        allow_everyone = section.get_bool("allow.everyone.if.no.acl.found", False)
        main = listeners[0]
        data = Path(settings["data.dir"])
        cluster_section = None
        if cluster_block is not None:
            if not isinstance(cluster_block, dict):
                raise ConfigError(file, "cluster", "expected a mapping")
            cluster_section = Section(file, "cluster", cluster_block)
            inter_broker, inter_broker_security = _inter_broker(section, raw, listeners, sasl_settings)
        else:
            if raw.get("inter.broker.listener.name") or raw.get("security.inter.broker.protocol"):
                _inter_broker_listener(section, raw, listeners)  # checked as Kafka does, with no peer to reach
            inter_broker, inter_broker_security = main, None
        return cls(node_id=settings["node.id"], host=main.host, port=main.port, advertised_host=main.advertised_host,
                   advertised_port=main.advertised_port, data_dir=data, cluster_id=settings["cluster.id"],
                   settings=settings, cluster=cluster_section, explicit=frozenset(raw),
                   # TLS and SASL settings without a listener to use them are named in that warning too
                   inert={key: raw[key] for key in raw if key not in BROKER_KEYS and key not in _SYNONYM_KEYS and not (
                       is_honoured_security_key(key) and (ssl_contexts if is_tls_key(key) else sasl_settings if is_sasl_key(key)
                                           else True)) and not (key in AUTHORIZER_KEYS and authorizer)},
                   listeners=listeners, protocol_map=str(raw.get("listener.security.protocol.map") or ""),
                   ssl_contexts=ssl_contexts, sasl_settings=sasl_settings,
                   security_settings={key: raw[key] for key in raw if is_tls_key(key) or is_sasl_key(key)},
                   authorizer=bool(authorizer), super_users=super_users,
                   allow_everyone_if_no_acl_found=allow_everyone, inter_broker_listener=inter_broker.name,
                   inter_broker_security=inter_broker_security, metrics_address=metrics_address)

    def ensure_directory_id(self, cluster_id: str) -> bytes:
        """This broker's data directory id (KIP-858's ``directory.id``): made once and kept in meta.properties,
        written there in Kafka's format (with the cluster and node ids) because Kafka's tools read it from there:
        ``kafka-metadata-quorum add-controller`` sends it as the new voter's directory id."""
        meta = self.data_dir / "meta.properties"
        entries: dict[str, str] = {}
        if meta.exists():
            for line in meta.read_text().splitlines():
                key, sep, value = line.partition("=")
                if sep and not key.startswith("#"):
                    entries[key.strip()] = value.strip()
        if entries.get("directory.id"):
            return uuid_from_text(entries["directory.id"])
        directory_id = uuid.uuid4().bytes
        entries.update({"version": "1", "cluster.id": cluster_id, "node.id": str(self.node_id),
                        "directory.id": uuid_text(directory_id)})
        meta.write_text("".join(f"{key}={value}\n" for key, value in entries.items()))
        return directory_id

    def ensure_cluster_id(self) -> str:
        """The cluster id: configured, else generated once and kept in the data dir (meta.properties)."""
        if self.cluster_id:
            return self.cluster_id
        meta = self.data_dir / "meta.properties"
        if meta.exists():
            for line in meta.read_text().splitlines():
                if line.startswith("cluster.id="):
                    self.cluster_id = line.split("=", 1)[1].strip()
                    return self.cluster_id
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = uuid.uuid4().hex[:22]
        meta.write_text(f"cluster.id={self.cluster_id}\nnode.id={self.node_id}\nversion=1\n")
        return self.cluster_id
