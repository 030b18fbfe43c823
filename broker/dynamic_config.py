"""Dynamic broker configs: what AlterConfigs and IncrementalAlterConfigs set on the BROKER resource while
the broker runs, as Apache Kafka has them.

Two layers sit above the broker's YAML (its static configs): the cluster-wide default (resource name "",
Kafka's DYNAMIC_DEFAULT_BROKER_CONFIG) and this broker's own (resource name = its node id,
DYNAMIC_BROKER_CONFIG), the latter winning. The configs that may be changed are those Kafka 4.4 describes
as not read-only (broker/kafka_broker_configs.py, read from a live Kafka); names Kafka does not know are
kept and described as Kafka keeps them (custom configs: no value shown, sensitive). A changed topic
default (log.retention.ms, message.max.bytes, the log cleaner's ratios and lags, ...) reaches every topic
that has no override of its own at once; log.cleaner.backoff.ms paces the next compaction pass and the
cleaner's dedupe buffer, io buffer and throttle shape it. Those that
tune Kafka's own machinery (threads, buffers, quotas) are kept and described like the YAML's, and named in
a warning: nothing here uses them. A broker's listeners (``listeners``, ``advertised.listeners``,
``listener.security.protocol.map``) change with Kafka's dynamic listener checks: the broker starts the
listeners added and stops those removed (its ``on_change``), and a cluster's registration follows.

A single node keeps the layers in ``dynamic-broker-configs.json`` in its data directory; a cluster keeps
them in its replicated metadata, so every broker sees the same cluster default after any restart, and each
broker's file holds the last the metadata gave, applied from the start until the metadata is replayed (so
that retention never runs on the YAML's defaults in between).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from broker.config import (
    BROKER_KEYS,
    SECURITY_PREFIXES,
    TOPIC_DEFAULTS,
    BrokerConfig,
    cleaner_value_problem,
    is_honoured_security_key,
    is_sasl_key,
    is_tls_key,
    listener_security,
)
from broker.errors import ErrorCode, KafkaError
from broker.kafka_broker_configs import KAFKA_BROKER_CONFIGS, KAFKA_BROKER_MINIMUMS
from broker.log.background import write_later, written
from broker.log.config import InvalidConfigValue, parse_configs
from broker.log.files import keep_private
from broker.security import SecurityConfigError
from broker.security.listeners import (
    DEFAULT_PROTOCOL_MAP,
    Listener,
    ListenerError,
    NoProtocolError,
    parse_listeners,
)
from broker.security.passwords import (
    ENCODER_KEYS,
    PasswordDecodeError,
    is_encoded,
    is_password_config,
    password_encoders,
)
from broker.security.tls import (
    HandshakeError,
    check_certificate_change,
    check_handshake,
    keystore_certificate,
    listener_lookup,
)

log = structlog.get_logger("broker.config")

CLUSTER_DEFAULT = ""
FILE_NAME = "dynamic-broker-configs.json"

# DescribeConfigs config_source values
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT = 3
SOURCE_STATIC = 4
SOURCE_DEFAULT = 5

# Kafka's config types (DescribeConfigs config_type)
TYPE_UNKNOWN, TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = range(8)
_INTEGER_RANGES = {TYPE_INT: (-(2**31), 2**31 - 1), TYPE_SHORT: (-(2**15), 2**15 - 1),
                   TYPE_LONG: (-(2**63), 2**63 - 1)}
_TYPE_NAMES = {TYPE_INT: "INT", TYPE_SHORT: "SHORT", TYPE_LONG: "LONG", TYPE_DOUBLE: "DOUBLE"}

# Broker configs Kafka derives from coarser ones when unset, with those synonyms, in Kafka's order.
BROKER_SYNONYMS = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
}

# The broker config whose synonyms (BROKER_SYNONYMS) follow a topic config's own in DescribeConfigs, as
# Kafka 4.4 lists them (it lists none for segment.ms and flush.ms); topic configs not here have none.
TOPIC_SYNONYMS: Mapping[str, tuple[str, ...]] = {
    topic_key: (broker_key,) for broker_key, topic_key in TOPIC_DEFAULTS.items()
    if topic_key not in ("segment.ms", "flush.ms")
} | {"remote.copy.lag.bytes": ("log.remote.copy.lag.bytes",), "remote.copy.lag.ms": ("log.remote.copy.lag.ms",)}

# Kafka's thread pools that may be resized at run time, within bounds (DynamicBrokerConfigs._check_thread_count)
THREAD_POOLS = ("num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads")

# Kafka's own requirements on these, which it words apart from its validators' refusals: the least value.
_REQUIREMENTS = {"log.roll.ms": 1, "log.roll.jitter.ms": 0}

# Kafka lets these change only per listener (listener.name.<listener>.ssl.keystore...), on one broker.
_PER_LISTENER_ONLY = ("ssl.keystore.", "ssl.truststore.")
# and these only on one broker, never at the cluster default.
_PER_BROKER_ONLY = ("listeners", "advertised.listeners", "listener.security.protocol.map", "principal.builder.class", "cordoned.log.dirs",
                    "ssl.", "sasl.")
# The replication rate limits kafka-reassign-partitions --throttle sets (broker/cluster/replication_quota.py):
# Kafka's quota configs, LONGs of at least 0 that a broker does not describe unless set.
REPLICATION_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
_THROTTLE_DEFINITION = (None, TYPE_LONG, False, False)
# Security settings this broker cannot change while it runs (TLS and SASL settings can: they are let through
# before this check).
_NOT_AT_RUN_TIME = SECURITY_PREFIXES
# The listener set: which sockets serve, with which protocol, told to clients as which address
_LISTENER_SET = ("listeners", "advertised.listeners", "listener.security.protocol.map")
_LISTENER_PREFIX = "listener.name."
# Store files read again when an alter names them, though their names did not change
_RELOADABLE_FILES = ("ssl.keystore.location", "ssl.truststore.location")
# Listener-prefixed configs Kafka takes at the cluster default too (the others are per broker)
_CLUSTER_LEVEL_LISTENER_CONFIGS = ("max.connections", "max.connection.creation.rate", "num.network.threads")


def base_name(name: str) -> str:
    """The Kafka config a listener-prefixed name sets (listener.name.<l>.ssl.keystore.location:
    ssl.keystore.location; listener.name.<l>.<mechanism>.sasl.jaas.config: sasl.jaas.config), else ``name``."""
    if not name.startswith(_LISTENER_PREFIX):
        return name
    rest = name[len(_LISTENER_PREFIX):].partition(".")[2]
    return "sasl.jaas.config" if rest.endswith(".sasl.jaas.config") else rest


def kafka_definition(name: str) -> tuple[str | None, int, bool, bool] | None:
    """Kafka 4.4's (default, type, read-only, sensitive) of ``name`` or of the config it sets for one listener."""
    if name in REPLICATION_THROTTLES:
        return _THROTTLE_DEFINITION
    return KAFKA_BROKER_CONFIGS.get(name) or KAFKA_BROKER_CONFIGS.get(base_name(name))


def is_dynamic(name: str) -> bool:
    """Whether Kafka 4.4 lets ``name`` change at run time (custom names, unknown to Kafka, are kept). A KRaft
    Kafka keeps advertised.listeners read-only because its controllers hold the registration; here a broker's
    registration follows its listeners (as a ZooKeeper-mode Kafka's did), so it changes with them."""
    if name == "advertised.listeners":
        return True
    if name in ENCODER_KEYS:
        return False  # the stored passwords are encoded with them: read at start only, as on Kafka
    known = kafka_definition(name)
    return known is None or not known[2]


def _changes_at_run_time(name: str) -> bool:
    """TLS and SASL settings, broker-wide or per listener: their listeners take them at once."""
    return base_name(name).startswith(("ssl.", "sasl."))


class DynamicBrokerConfigs:
    """The dynamic layers of one broker and what they change; ``on_change`` is called after each change."""

    def __init__(self, config: BrokerConfig, *, persist: bool) -> None:
        self.config = config
        self.node_id = config.node_id
        self.static = dict(config.settings)
        self.layers: dict[str, dict[str, str]] = {CLUSTER_DEFAULT: {}, str(config.node_id): {}}
        self.on_change: list[Callable[[], None]] = []
        self._path = config.data_dir / FILE_NAME if persist else None
        self._encoder, self._old_encoder = password_encoders(config.settings)
        # each layer as stored (passwords encoded); ``layers`` holds them decoded
        self._stored: dict[str, dict[str, str]] = {scope: {} for scope in self.layers}
        self.saved = written()  # the last write of the file, which runs off the event loop
        # what the listeners' contexts were built from: the settings, the store files' times, the certificates
        self._security_running: dict[str, Any] | None = self.security_settings()
        self._running_stamps = _store_stamps(self._security_running)
        self._running_certificates = _certificates(self.config.listeners, self._security_running)
        self._secured_listeners = _shape(self.config.listeners)
        if self._path is not None and self._path.exists():
            keep_private(os.fspath(self._path))  # AlterConfigs may have put passwords (ssl.keystore.password) in
            stored = json.loads(self._path.read_text())
            self._stored.update({scope: dict(values) for scope, values in stored.items() if scope in self.layers})
            renewed = False
            for scope, values in self._stored.items():
                self.layers[scope], outdated = self._decoded(values)
                if outdated and self._encoder is not None:
                    self._stored[scope] = self.persistent(scope, self.layers[scope])
                    renewed = True
            if renewed:  # passwords from an older broker or an old secret: stored again under this secret
                self._write()
        self._apply()

    # --- scopes --------------------------------------------------------------------------------------------

    def scope_of(self, resource_name: str, *, describing: bool = False) -> str:
        """The layer a BROKER resource name addresses, or Kafka's INVALID_REQUEST."""
        if resource_name == CLUSTER_DEFAULT:
            return CLUSTER_DEFAULT
        try:
            node = int(resource_name)
        except ValueError:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Node id must be an integer, but it is: {resource_name}") from None
        if node != self.node_id:
            expected = f"{self.node_id} or empty string" if describing else str(self.node_id)
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Unexpected broker id, expected {expected}, but received {resource_name}")
        return str(node)

    # --- reading -------------------------------------------------------------------------------------------

    def sources(self, name: str, scope: str | None = None) -> list[tuple[str, str | None, int]]:
        """(synonym name, value, source) of ``name`` in Kafka's order: for each synonym, this broker's
        dynamic value, the cluster default, the static config, Kafka's default. ``scope`` "" gives the
        cluster default's only, as Kafka describes the default resource."""
        found: list[tuple[str, str | None, int]] = []
        for synonym in BROKER_SYNONYMS.get(name, (name,)):
            if scope != CLUSTER_DEFAULT and synonym in self.layers[str(self.node_id)]:
                found.append((synonym, self.layers[str(self.node_id)][synonym], SOURCE_DYNAMIC_BROKER))
            if synonym in self.layers[CLUSTER_DEFAULT]:
                found.append((synonym, self.layers[CLUSTER_DEFAULT][synonym], SOURCE_DYNAMIC_DEFAULT))
            if scope == CLUSTER_DEFAULT:
                continue
            if synonym in self.config.explicit:
                found.append((synonym, _text(self._static_value(synonym)), SOURCE_STATIC))
            default = self.default(synonym)
            if default is not None:
                found.append((synonym, default, SOURCE_DEFAULT))
        # Kafka names the coarser synonyms (log.retention.hours, ...) only once the config itself has a value
        return found if any(synonym == name for synonym, _, _ in found) else []

    @staticmethod
    def default(name: str) -> str | None:
        """The value ``name`` has when nothing sets it: Kafka's, or this broker's own where it differs
        (socket buffers sized by the kernel, internal topics with one replica). Where Kafka has none (it
        derives log.retention.ms from log.retention.hours), there is none here either."""
        kafkas = KAFKA_BROKER_CONFIGS.get(name, (None,))[0]
        if kafkas is None or name not in BROKER_KEYS or _as_kind(BROKER_KEYS[name][0], kafkas) == BROKER_KEYS[name][1]:
            return kafkas  # in Kafka's spelling where it is the same value (1.7976931348623157E308)
        return _text(BROKER_KEYS[name][1])

    def _is_static(self, name: str) -> bool:
        return name in self.static or name in self.config.inert or name in self.config.security_settings

    def _static_value(self, name: str) -> Any:
        if name in self.static:
            return self.static[name]
        return self.config.security_settings.get(name, self.config.inert.get(name))

    def value(self, name: str) -> Any:
        """What this broker runs with: the dynamic layers over its YAML over Kafka's default."""
        for scope in (str(self.node_id), CLUSTER_DEFAULT):
            if name in self.layers[scope]:
                return self.layers[scope][name]
        if self._is_static(name):
            return self._static_value(name)
        return self.default(name)

    def dynamic_names(self, scope: str | None = None) -> list[str]:
        scopes = [scope] if scope is not None else list(self.layers)
        return sorted({name for s in scopes for name in self.layers[s]})

    # --- changing ------------------------------------------------------------------------------------------

    def prepare(self, scope: str, updates: Mapping[str, str | None], *, replace: bool) -> dict[str, str]:
        """The layer ``scope`` would hold after ``updates`` (None removes a config; ``replace``: the
        updates are the whole layer, as AlterConfigs has it), checked as Kafka checks it."""
        fixed = sorted(name for name in updates if not is_dynamic(name))
        if fixed:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Cannot update these configs dynamically: [{', '.join(fixed)}]")
        per_listener = sorted(name for name in updates if name.startswith(_PER_LISTENER_ONLY))
        if per_listener:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             "These security configs can be dynamically updated only per-listener using the "
                             f"listener prefix: [{', '.join(per_listener)}]")
        per_broker = sorted(name for name in updates if name.startswith(_PER_BROKER_ONLY) or (
            name.startswith(_LISTENER_PREFIX) and base_name(name) not in _CLUSTER_LEVEL_LISTENER_CONFIGS))
        if scope == CLUSTER_DEFAULT and per_broker:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster level, "
                                                        f"broker id must be specified: [{', '.join(per_broker)}]")
        refused = sorted(name for name in updates
                         if name.startswith(_NOT_AT_RUN_TIME) and not _changes_at_run_time(name))
        if refused:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"These security settings cannot change at run time on this broker: "
                             f"[{', '.join(refused)}]")
        layer = {} if replace else dict(self.layers[scope])
        for name, value in updates.items():
            if value is None:
                layer.pop(name, None)
            else:
                layer[name] = check_value(name, value, self._cleaner_threads(updates))
                if name in THREAD_POOLS:
                    self._check_thread_count(name, int(layer[name]))
        wanted_layers = {**self.layers, scope: dict(layer)}
        # AlterConfigs replaces the whole layer: listener settings it leaves out change too
        changed = any(layer.get(name) != self.layers[scope].get(name) for name in _LISTENER_SET)
        listeners = self._check_listeners(wanted_layers) if changed else None
        self._check_security(scope, layer, reload=any(base_name(name) in _RELOADABLE_FILES for name in updates),
                             listeners=listeners)
        return layer

    def listeners(self, layers: Mapping[str, Mapping[str, str]] | None = None) -> list[Listener]:
        """The listeners the dynamic layers (``layers``: as they would be after a change) give over the file's,
        those running keeping the port they were given where the setting asks for any (port 0); ListenerError
        names the setting at fault."""
        layers = self.layers if layers is None else layers
        parsed = parse_listeners(self._setting(layers, "listeners", self.static["listeners"]),
                                 self._setting(layers, "advertised.listeners", self.static["advertised.listeners"]),
                                 self._setting(layers, "listener.security.protocol.map",
                                               self.config.protocol_map or DEFAULT_PROTOCOL_MAP))
        running = {listener.name: listener for listener in self.config.listeners}
        resolved = []
        for listener in parsed:
            before = running.get(listener.name)
            if before is not None and listener.port == 0 and (listener.host, listener.protocol) == (
                    before.host, before.protocol):
                listener = Listener(listener.name, listener.protocol, listener.host, before.port,
                                    listener.advertised_host, listener.advertised_port or before.advertised_port)
            resolved.append(listener)
        return resolved

    def _setting(self, layers: Mapping[str, Mapping[str, str]], name: str, static: str) -> str:
        for scope in (str(self.node_id), CLUSTER_DEFAULT):
            if name in layers[scope]:
                return layers[scope][name]
        return static

    def _check_listeners(self, layers: Mapping[str, Mapping[str, str]]) -> list[Listener]:
        """The listeners ``layers`` would run, checked as Kafka checks a dynamic listener update: each has a
        security protocol, the inter-broker listener stays, a running one keeps its protocol; one added must
        be able to bind its port."""
        try:
            wanted = self.listeners(layers)
        except NoProtocolError as exc:
            given = self._setting(layers, "listeners", self.static["listeners"])
            entries = ", ".join(entry.strip() for entry in given.split(",") if entry.strip())
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Error creating broker listeners from '[{entries}]': "
                                                        f"No security protocol defined for listener {exc.listener}") from None
        except ListenerError as exc:
            raise _invalid_dynamic_configuration(f"{exc.key}: {exc}") from None
        names = {listener.name for listener in wanted}
        if self.config.inter_broker_listener not in names:
            raise _invalid_dynamic_configuration("Advertised listener must be specified for inter-broker listener "
                                                 f"{self.config.inter_broker_listener}")
        running = {listener.name: listener for listener in self.config.listeners}
        for listener in wanted:
            before = running.get(listener.name)
            if before is None:
                _check_bind(listener)
            elif before.protocol != listener.protocol:
                raise _invalid_dynamic_configuration(
                    f"Security protocol cannot be updated for existing listener ListenerName({listener.name})")
            elif (before.host, before.port) != (listener.host, listener.port):
                # Kafka would keep the old socket without a word; a listener moves by being removed, then added
                raise _invalid_dynamic_configuration(
                    f"The address of existing listener {listener.name} cannot be updated: remove the listener, "
                    "then add it with the new address")
        return wanted

    def security_settings(self, layers: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Any]:
        """The TLS and SASL settings listeners are built from: the file's, then the cluster default's, then
        this broker's own (``layers``: as they would be after a change)."""
        layers = self.layers if layers is None else layers
        merged = dict(self.config.security_settings)
        for scope in (CLUSTER_DEFAULT, str(self.node_id)):
            merged.update((name, value) for name, value in layers[scope].items()
                          if is_tls_key(name) or is_sasl_key(name) or _changes_at_run_time(name))
        return merged

    def _check_security(self, scope: str, layer: Mapping[str, str], *, reload: bool,
                        listeners: list[Listener] | None = None) -> None:
        """Each listener built as ``layer`` would have it, before anything changes (Kafka's order): a keystore
        that does not load, a key that does not match its certificate, a certificate with another subject or
        fewer alternative names (ssl.allow.dn.changes, ssl.allow.san.changes), a JAAS line that does not
        read is refused and the listeners keep what they run with. ``reload``: the request names a store file,
        which is read again if it was renewed in place (Kafka's rule). ``listeners``: the listeners after the
        change, when it changes them."""
        running = self.security_settings()
        wanted = self.security_settings({**self.layers, scope: dict(layer)})
        listeners = self.config.listeners if listeners is None else listeners
        if (wanted == running and _shape(listeners) == self._secured_listeners
                and not (reload and _store_stamps(wanted) != self._running_stamps)):
            return
        try:
            listener_security(listeners, wanted)
            for listener in listeners:
                if listener.uses_tls:
                    check_certificate_change(self._running_certificates.get(listener.name),
                                             listener_lookup(listener.name, wanted))
                if listener.name == self.config.inter_broker_listener and listener.name in self._running_certificates:
                    check_handshake(listener_lookup(listener.name, running), listener_lookup(listener.name, wanted))
        except HandshakeError as exc:
            raise _invalid_dynamic_configuration("Validation of dynamic config update of SSLFactory failed: "
                                                 f"javax.net.ssl.SSLHandshakeException: {exc}") from None
        except SecurityConfigError as exc:
            reason = f"{exc.key}: {exc}"
            if is_tls_key(exc.key) or base_name(exc.key).startswith("ssl."):
                reason = ("Validation of dynamic config update of SSLFactory failed: "
                          f"org.apache.kafka.common.config.ConfigException: {reason}")
            raise _invalid_dynamic_configuration(reason) from None

    def _check_thread_count(self, name: str, wanted: int) -> None:
        """Kafka's bounds on resizing a thread pool (num.replica.fetchers: the fetchers per leader) at run time:
        at most double, at least half of what the broker runs with."""
        current = int(self.value(name))
        problem = None
        if wanted < current // 2:
            problem = f"value should be at least half the current value {current}"
        elif wanted > current * 2:
            problem = f"value should not be greater than double the current value {current}"
        if problem is not None:
            raise _invalid_dynamic_configuration(
                f"Dynamic thread count update validation failed for {name}={wanted}, {problem}")

    def _cleaner_threads(self, updates: Mapping[str, str | None]) -> int:
        """log.cleaner.threads as it would be after ``updates`` (what the dedupe buffer is split between)."""
        for raw in (updates.get("log.cleaner.threads"), self.value("log.cleaner.threads")):
            if raw is None:
                continue
            try:
                return int(raw)
            except (TypeError, ValueError):
                continue
        return 1

    def persistent(self, scope: str, layer: Mapping[str, str]) -> dict[str, str]:
        """``layer`` as it is stored (in the data dir, in a cluster's metadata): its passwords encoded with
        ``password.encoder.secret``, or Kafka's refusal when there is none (or at the cluster default, which every
        broker reads with its own secret)."""
        passwords = sorted(name for name in layer if is_password_config(name))
        if not passwords:
            return dict(layer)
        if scope == CLUSTER_DEFAULT:
            problem = "Password config can be defined only at broker level"
        elif self._encoder is None:
            problem = "Password encoder secret not configured"
        else:
            encoder = self._encoder
            return {name: encoder.encode(name, value) if name in passwords else value for name, value in layer.items()}
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid config value for resource ConfigResource(type=BROKER, "
                                                   f"name='{scope}'): {problem}")

    def _decoded(self, stored: Mapping[str, str]) -> tuple[dict[str, str], bool]:
        """A stored layer with its passwords decoded, and whether any should be stored again (kept in the clear
        by an older broker, or encoded with the old secret). One that does not decode is left out and named, as
        Kafka does."""
        layer, outdated = {}, False
        for name, value in stored.items():
            if not (is_password_config(name) and is_encoded(value)):
                layer[name] = value
                outdated = outdated or is_password_config(name)
                continue
            for encoder in (self._encoder, self._old_encoder):
                if encoder is None:
                    continue
                try:
                    layer[name] = encoder.decode(name, value)
                except PasswordDecodeError:
                    continue
                outdated = outdated or encoder is self._old_encoder
                break
            else:
                log.error("a dynamic password config does not decode with password.encoder.secret (nor "
                          "password.encoder.old.secret): ignored", config=name,
                          secret="set" if self._encoder is not None else "not set")
        return layer, outdated

    def update(self, scope: str, stored: Mapping[str, str]) -> None:
        """Make ``stored`` (a layer checked by :meth:`prepare`, in its :meth:`persistent` form) the dynamic
        configs of ``scope``."""
        if scope not in self.layers or dict(stored) == self._stored[scope]:
            return
        layer, _ = self._decoded(stored)
        self._stored[scope] = dict(stored)
        if layer == self.layers[scope]:
            self._write()
            return
        inert = sorted(name for name, value in layer.items() if name not in BROKER_KEYS
                       and name not in REPLICATION_THROTTLES and not is_honoured_security_key(name)
                       and self.layers[scope].get(name) != value)
        if inert:  # as the YAML's are named at start-up: kept and described, but nothing here uses them
            log.warning("dynamic broker configs that have no effect in burrowpy", scope=scope or "cluster default",
                        keys=inert)
        self.layers[scope] = layer
        self._write()
        self._apply()

    def _write(self) -> None:
        if self._path is not None:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self.saved = write_later(os.fspath(self._path),
                                     json.dumps(self._stored, indent=1, sort_keys=True).encode(), private=True)

    def current(self, scope: str, name: str) -> str | None:
        """The value a list operation (APPEND, SUBTRACT) at ``scope`` starts from: what that scope sees."""
        if scope != CLUSTER_DEFAULT:
            return _text(self.value(name))
        if name in self.layers[CLUSTER_DEFAULT]:
            return self.layers[CLUSTER_DEFAULT][name]
        if self._is_static(name):
            return _text(self._static_value(name))
        return self.default(name)

    def _apply(self) -> None:
        settings = self.config.settings
        for name, (kind, _) in BROKER_KEYS.items():
            raw = self.value(name) if is_dynamic(name) and name in KAFKA_BROKER_CONFIGS else self.static[name]
            settings[name] = _as_kind(kind, raw)
        self._apply_listeners()
        self._apply_security()
        for callback in self.on_change:
            callback()


    def _apply_listeners(self) -> None:
        """The listener set the layers give, for the broker to start and stop sockets by (its ``on_change``).
        Layers that no longer make a valid set (a cluster's metadata written by a broker with other files) are
        named and the running listeners kept."""
        try:
            wanted = self.listeners()
        except ListenerError as exc:
            log.error("the dynamic listener settings do not make listeners: the running ones are kept",
                      key=exc.key, problem=str(exc))
            return
        if wanted != self.config.listeners:
            log.info("listeners changed", listeners=[f"{x.name}://{x.host}:{x.port}" for x in wanted])
            self.config.listeners = wanted

    def _apply_security(self) -> None:
        """The listeners' TLS contexts and SASL settings built again where their settings changed: new
        connections get them (KafkaServer.reconfigure), those open carry on with what they were accepted with.
        Settings checked by :meth:`prepare` build; ones that no longer do (a keystore file removed since, a
        cluster's metadata from a broker with other files) are named and the running ones kept."""
        wanted = self.security_settings()
        if wanted == self._security_running and _shape(self.config.listeners) == self._secured_listeners:
            return
        try:
            ssl_contexts, sasl_settings = listener_security(self.config.listeners, wanted)
        except SecurityConfigError as exc:
            log.error("listener security settings do not build: the listeners keep the running ones",
                      key=exc.key, problem=str(exc))
            return
        # a listener removed takes its context with it
        self.config.ssl_contexts.clear()
        self.config.ssl_contexts.update(ssl_contexts)
        self.config.sasl_settings.clear()
        self.config.sasl_settings.update(sasl_settings)
        self._secured_listeners = _shape(self.config.listeners)
        self._security_running = wanted
        self._running_stamps = _store_stamps(wanted)
        self._running_certificates = _certificates(self.config.listeners, wanted)
        log.info("listener security settings applied", listeners=sorted({*ssl_contexts, *sasl_settings}))


    def reload_files(self, updates: Mapping[str, str | None]) -> None:
        """Keystores and truststores renewed in place, under the names the listeners run with: built again
        when an alter names them (``updates``; Kafka reloads a store file an alter names even with the same
        value)."""
        named = any(base_name(name) in _RELOADABLE_FILES for name in updates)
        if named and _store_stamps(self.security_settings()) != self._running_stamps:
            self._security_running = None
            self._apply()


def _shape(listeners: list[Listener]) -> list[tuple[str, str]]:
    """What a listener's security is built for: its name and protocol."""
    return [(listener.name, listener.protocol) for listener in listeners]


def _check_bind(listener: Listener) -> None:
    """Whether a listener added at run time can have its address, refused in Kafka's words if not."""
    try:
        infos = socket.getaddrinfo(listener.host or None, listener.port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
        for family, kind, proto, _, address in infos:
            with socket.socket(family, kind, proto) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(address)
    except OSError as exc:
        raise _invalid_dynamic_configuration(f"Socket server failed to bind to {listener.host}:{listener.port}: "
                                             f"{exc.strerror or exc}.") from None


def _store_stamps(settings: Mapping[str, Any]) -> dict[str, tuple[int, int, int]]:
    """The modification time, size and inode of each keystore and truststore file named in ``settings``."""
    stamps = {}
    for name, value in settings.items():
        if base_name(name) in _RELOADABLE_FILES and value:
            with contextlib.suppress(OSError):
                found = os.stat(str(value))
                stamps[str(value)] = (found.st_mtime_ns, found.st_size, found.st_ino)
    return stamps


def _certificates(listeners: list[Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """Each TLS listener's own certificate, which a renewed one is compared with."""
    found = {}
    for listener in listeners:
        if listener.uses_tls:
            with contextlib.suppress(SecurityConfigError):
                found[listener.name] = keystore_certificate(listener_lookup(listener.name, settings))
    return found


def _invalid_dynamic_configuration(reason: str) -> KafkaError:
    """A reconfiguration refused, in the words Kafka wraps its reconfigurations' refusals in."""
    return KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid value org.apache.kafka.common.config.ConfigException: "
                                                 f"{reason} for configuration Invalid dynamic configuration")


def check_value(name: str, value: str, cleaner_threads: int = 1) -> str:
    """``value`` as stored for broker config ``name``, or Kafka's INVALID_REQUEST naming both (with the
    number as Kafka parsed it where its range check refuses it). ``cleaner_threads``: the log cleaner threads
    the dedupe buffer is shared by."""
    known = kafka_definition(name)
    if known is None:
        return value
    config_type = known[1]
    problem = None
    shown: Any = value
    text = value.strip()
    if config_type in _INTEGER_RANGES or config_type == TYPE_DOUBLE:
        low, high = _INTEGER_RANGES.get(config_type, (-math.inf, math.inf))
        try:
            number = float(text) if config_type == TYPE_DOUBLE else int(text)
        except ValueError:
            number = None
        if number is None or not low <= number <= high:
            problem = f"Not a number of type {_TYPE_NAMES[config_type]}"
        elif (least := "0" if name in REPLICATION_THROTTLES else KAFKA_BROKER_MINIMUMS.get(name)) is not None \
                and number < float(least):
            shown, problem = number, f"Value must be at least {least}"
    elif config_type == TYPE_BOOLEAN and text.lower() not in ("true", "false"):
        problem = "Expected value to be either true or false"
    if problem is None and name in _REQUIREMENTS:
        minimum = _REQUIREMENTS[name]
        if int(text) < minimum:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"requirement failed: {name} must be greater than or equal to {minimum}")
    if problem is None and name == "log.cleaner.dedupe.buffer.size" and int(text) < cleaner_threads << 20:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread.")
    if problem is None and config_type == TYPE_DOUBLE:
        problem = cleaner_value_problem(name, float(text))
    if problem is None and name in TOPIC_DEFAULTS:
        try:
            parse_configs({TOPIC_DEFAULTS[name]: text})
        except InvalidConfigValue as exc:
            problem = exc.problem
    if problem is not None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid value {shown} for configuration {name}: {problem}")
    return text.lower() if config_type == TYPE_BOOLEAN else text


def _as_kind(kind: str, raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    if kind == "int":
        return int(raw)
    if kind == "float":
        return float(raw)
    if kind == "bool":
        return raw.lower() == "true"
    return raw


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return str(value).lower() if isinstance(value, bool) else str(value)
