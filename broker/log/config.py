"""Per-topic log configuration: Kafka's topic config names, types, defaults and bounds.

A topic's effective configuration is Kafka's default, overridden by the broker-wide defaults the broker
hands to the :class:`~broker.log.manager.LogManager`, overridden by the topic's own settings. Values
arrive as strings from the wire (CreateTopics, AlterConfigs) or as Python values from the broker's YAML;
both are accepted. A bad name or value raises KafkaError INVALID_CONFIG with a message naming both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from broker.errors import ErrorCode, KafkaError

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
DAY_MS = 24 * 3600 * 1000


class InvalidConfigValue(KafkaError):
    """INVALID_CONFIG for a value, in Kafka's words: ``problem`` says why (``Value must be at least 0``)."""

    def __init__(self, name: str, shown: Any, problem: str) -> None:
        super().__init__(ErrorCode.INVALID_CONFIG, f"Invalid value {shown} for configuration {name}: {problem}")
        self.problem = problem


# A config's check: None when a parsed value is fine, else Kafka's reason, or (the part of the value that is
# wrong, the reason) where Kafka names that part rather than the whole value.
Check = Callable[[Any], "str | tuple[str, str] | None"]


class ConfigDef(NamedTuple):
    name: str
    kind: str  # "int" (32-bit), "long", "double", "string", "list", "boolean"
    default: Any
    check: Check


def _at_least(minimum: float) -> Check:
    return lambda value: None if value >= minimum else f"Value must be at least {minimum}"


def _range(low: float, high: float) -> Check:
    return lambda value: _at_least(low)(value) or (None if value <= high else f"Value must be no more than {high}")


def _one_of(*allowed: str) -> Check:
    """``allowed`` in the order Kafka lists them in its refusal."""
    return lambda value: None if value in allowed else f"String must be one of: {', '.join(allowed)}"


def _cleanup_policy(value: tuple[str, ...]) -> tuple[str, str] | None:
    unknown = [item for item in value if item not in ("compact", "delete")]
    return (unknown[0], "String must be one of: compact, delete") if unknown else None


def _throttled_replicas(name: str) -> Check:
    """Kafka's format: the literal '*' alone, or partition:broker pairs."""
    def check(value: tuple[str, ...]) -> tuple[str, str] | None:
        pairs = all(len(item.split(":")) == 2 and all(part.strip().isdigit() for part in item.split(":"))
                    for item in value)
        if value == ("*",) or pairs:
            return None
        return (f"[{', '.join(value)}]", f"{name} must be the literal '*' or a list of replicas in the following "
                                         "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return check


def _gzip_level(value: int) -> str | None:
    return None if 1 <= value <= 9 or value == -1 else "Value must be between 1 and 9 or equal to -1"


def _not(refused: Any, why: str) -> Check:
    return lambda value: why if value == refused else None


# Topic compression.type values and the batch codec each asks for (None: keep the producer's).
COMPRESSION_TYPES = {"producer": None, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _disk_percent(value: float) -> str | None:
    return None if value == -1 or 0 < value <= 100 else "Value must be -1 (off) or a percentage in (0, 100]"


CONFIG_DEFS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        ConfigDef("segment.bytes", "int", 1024**3, _at_least(14)),
        ConfigDef("segment.ms", "long", 7 * DAY_MS, _at_least(1)),
        ConfigDef("retention.ms", "long", 7 * DAY_MS, _at_least(-1)),
        ConfigDef("retention.bytes", "long", -1, lambda value: None),
        ConfigDef("cleanup.policy", "list", ("delete",), _cleanup_policy),
        ConfigDef("delete.retention.ms", "long", DAY_MS, _at_least(0)),
        ConfigDef("max.message.bytes", "int", 1048588, _at_least(0)),
        ConfigDef("message.timestamp.type", "string", "CreateTime", _one_of("CreateTime", "LogAppendTime")),
        ConfigDef("index.interval.bytes", "int", 4096, _at_least(0)),
        ConfigDef("flush.messages", "long", INT64_MAX, _at_least(1)),
        ConfigDef("flush.ms", "long", INT64_MAX, _at_least(0)),
        ConfigDef("min.insync.replicas", "int", 1, _at_least(1)),
        ConfigDef("retention.disk.percent", "double", -1.0, _disk_percent),
        ConfigDef("compression.type", "string", "producer",
                  _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
        ConfigDef("compression.gzip.level", "int", -1, _gzip_level),
        ConfigDef("compression.lz4.level", "int", 9, _range(1, 17)),
        ConfigDef("compression.zstd.level", "int", 3, _range(-131072, 22)),
        ConfigDef("message.timestamp.before.max.ms", "long", INT64_MAX, _at_least(0)),
        ConfigDef("message.timestamp.after.max.ms", "long", 3600000, _at_least(0)),
        ConfigDef("segment.jitter.ms", "long", 0, _at_least(0)),
        ConfigDef("segment.index.bytes", "int", 10 * 1024 * 1024, _at_least(4)),
        ConfigDef("file.delete.delay.ms", "long", 60000, _at_least(0)),
        ConfigDef("preallocate", "boolean", False, lambda value: None),
        ConfigDef("min.cleanable.dirty.ratio", "double", 0.5, _range(0, 1)),
        ConfigDef("min.compaction.lag.ms", "long", 0, _at_least(0)),
        ConfigDef("max.compaction.lag.ms", "long", INT64_MAX, _at_least(1)),
        ConfigDef("max.decompressed.message.bytes", "int", 2147483639, _at_least(1)),
        ConfigDef("unclean.leader.election.enable", "boolean", False, lambda value: None),
        ConfigDef("leader.replication.throttled.replicas", "list", (),
                  _throttled_replicas("leader.replication.throttled.replicas")),
        ConfigDef("follower.replication.throttled.replicas", "list", (),
                  _throttled_replicas("follower.replication.throttled.replicas")),
        ConfigDef("remote.storage.enable", "boolean", False,
                  _not(True, "Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
                             "with remote log storage.")),
        ConfigDef("remote.log.copy.disable", "boolean", False, lambda value: None),
        ConfigDef("remote.log.delete.on.disable", "boolean", False, lambda value: None),
        ConfigDef("remote.copy.lag.bytes", "long", -1, _at_least(-1)),
        ConfigDef("remote.copy.lag.ms", "long", 0, _at_least(-1)),
        ConfigDef("local.retention.ms", "long", -2, _at_least(-2)),
        ConfigDef("local.retention.bytes", "long", -2, _at_least(-2)),
        ConfigDef("errors.deadletterqueue.group.enable", "boolean", False, lambda value: None),
    )
}


def _parse(definition: ConfigDef, raw: Any) -> Any:
    """Turn a wire string or a Python value into the config's type, or raise INVALID_CONFIG (in Kafka's
    words where Kafka has them)."""
    name, kind = definition.name, definition.kind
    value: Any  # of the config's kind
    try:
        if kind in ("int", "long"):
            if isinstance(raw, bool) or isinstance(raw, float) and not raw.is_integer():
                raise ValueError
            value = int(raw.strip()) if isinstance(raw, str) else int(raw)
            low, high = (-(2**31), INT32_MAX) if kind == "int" else (-(2**63), INT64_MAX)
            if not low <= value <= high:
                raise ValueError
        elif kind == "double":
            if isinstance(raw, bool):
                raise ValueError
            value = float(raw)
        elif kind == "list":
            items = raw.split(",") if isinstance(raw, str) else list(raw)
            value = tuple(str(item).strip() for item in items if str(item).strip())
        elif kind == "boolean":
            if isinstance(raw, bool):
                value = raw
            elif isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
                value = raw.strip().lower() == "true"
            else:
                raise ValueError
        else:
            if not isinstance(raw, str):
                raise ValueError
            value = raw.strip()
    except (TypeError, ValueError):
        raise InvalidConfigValue(name, raw, _TYPE_PROBLEMS[kind]) from None
    problem = definition.check(value)
    if isinstance(problem, tuple):
        raise InvalidConfigValue(name, *problem)
    if problem:
        raise InvalidConfigValue(name, raw, problem)
    return value


_TYPE_PROBLEMS = {"int": "Not a number of type INT", "long": "Not a number of type LONG",
                  "double": "Not a number of type DOUBLE", "boolean": "Expected value to be either true or false",
                  "list": "Expected a comma separated list", "string": "Expected value to be a string"}


def format_value(value: Any) -> str:
    """How Kafka shows a config value: lists comma-joined, everything else as text."""
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_configs(configs: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a mapping of config names to values; return the parsed values."""
    parsed = {}
    for name, raw in configs.items():
        definition = CONFIG_DEFS.get(name)
        if definition is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        if raw is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name}: a value is required")
        parsed[name] = _parse(definition, raw)
    return parsed


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The effective configuration of one topic's logs (Kafka names with dots as underscores)."""

    segment_bytes: int = CONFIG_DEFS["segment.bytes"].default
    segment_ms: int = CONFIG_DEFS["segment.ms"].default
    retention_ms: int = CONFIG_DEFS["retention.ms"].default
    retention_bytes: int = CONFIG_DEFS["retention.bytes"].default
    cleanup_policy: tuple[str, ...] = CONFIG_DEFS["cleanup.policy"].default
    delete_retention_ms: int = CONFIG_DEFS["delete.retention.ms"].default
    max_message_bytes: int = CONFIG_DEFS["max.message.bytes"].default
    message_timestamp_type: str = CONFIG_DEFS["message.timestamp.type"].default
    index_interval_bytes: int = CONFIG_DEFS["index.interval.bytes"].default
    flush_messages: int = CONFIG_DEFS["flush.messages"].default
    flush_ms: int = CONFIG_DEFS["flush.ms"].default
    min_insync_replicas: int = CONFIG_DEFS["min.insync.replicas"].default
    retention_disk_percent: float = CONFIG_DEFS["retention.disk.percent"].default
    compression_type: str = CONFIG_DEFS["compression.type"].default
    compression_gzip_level: int = CONFIG_DEFS["compression.gzip.level"].default
    compression_lz4_level: int = CONFIG_DEFS["compression.lz4.level"].default
    compression_zstd_level: int = CONFIG_DEFS["compression.zstd.level"].default
    message_timestamp_before_max_ms: int = CONFIG_DEFS["message.timestamp.before.max.ms"].default
    message_timestamp_after_max_ms: int = CONFIG_DEFS["message.timestamp.after.max.ms"].default
    segment_jitter_ms: int = CONFIG_DEFS["segment.jitter.ms"].default
    segment_index_bytes: int = CONFIG_DEFS["segment.index.bytes"].default
    file_delete_delay_ms: int = CONFIG_DEFS["file.delete.delay.ms"].default
    preallocate: bool = CONFIG_DEFS["preallocate"].default
    min_cleanable_dirty_ratio: float = CONFIG_DEFS["min.cleanable.dirty.ratio"].default
    min_compaction_lag_ms: int = CONFIG_DEFS["min.compaction.lag.ms"].default
    max_compaction_lag_ms: int = CONFIG_DEFS["max.compaction.lag.ms"].default
    max_decompressed_message_bytes: int = CONFIG_DEFS["max.decompressed.message.bytes"].default
    unclean_leader_election_enable: bool = CONFIG_DEFS["unclean.leader.election.enable"].default
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    remote_storage_enable: bool = False
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    remote_copy_lag_bytes: int = CONFIG_DEFS["remote.copy.lag.bytes"].default
    remote_copy_lag_ms: int = CONFIG_DEFS["remote.copy.lag.ms"].default
    local_retention_ms: int = CONFIG_DEFS["local.retention.ms"].default
    local_retention_bytes: int = CONFIG_DEFS["local.retention.bytes"].default
    errors_deadletterqueue_group_enable: bool = False

    @classmethod
    def from_settings(cls, *layers: Mapping[str, Any]) -> LogConfig:
        """Kafka defaults overridden by each layer in turn (e.g. broker defaults, then topic settings)."""
        values: dict[str, Any] = {}
        for layer in layers:
            values.update(parse_configs(layer))
        return cls(**{name.replace(".", "_"): value for name, value in values.items()})

    def value_of(self, name: str) -> Any:
        return getattr(self, name.replace(".", "_"))

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def codec(self) -> int | None:
        """The batch codec compression.type asks for, or None to keep what the producer sent."""
        return COMPRESSION_TYPES[self.compression_type]

    @property
    def codec_level(self) -> int | None:
        """The compression level of :attr:`codec` (compression.<codec>.level)."""
        return {1: self.compression_gzip_level, 3: self.compression_lz4_level,
                4: self.compression_zstd_level}.get(self.codec or 0)
