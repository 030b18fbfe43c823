"""CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs."""

from __future__ import annotations

from typing import Any

from broker.dynamic_config import (
    CLUSTER_DEFAULT,
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_TOPIC,
    TOPIC_SYNONYMS,
    TYPE_LIST,
    TYPE_UNKNOWN,
)
from broker.errors import ErrorCode, KafkaError
from broker.handlers.registry import RequestContext, handler
from broker.kafka_broker_configs import KAFKA_BROKER_CONFIGS
from broker.log.config import CONFIG_DEFS, format_value
from broker.protocol.api import ApiKey
from broker.topics import INTERNAL_TOPICS

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
# IncrementalAlterConfigs operations
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3

ZERO_UUID = bytes(16)


# DescribeConfigs v3+ config_type codes (ConfigEntry.ConfigType) of our config kinds
CONFIG_TYPES = {"boolean": 1, "int": 3, "long": 5, "double": 6, "string": 2, "list": 7}


def _config_entries(ctx: RequestContext, topic: str, keys: list[str] | None, synonyms: bool) -> list[dict[str, Any]]:
    """A topic's configs as Kafka describes them: the topic's override, else the broker configs that
    provide its default (this broker's dynamic value, the cluster default, the YAML, Kafka's default)."""
    found = ctx.broker.logs.topics[topic]
    dynamic = ctx.broker.dynamic_configs
    entries = []
    for name in sorted(CONFIG_DEFS):
        if keys is not None and name not in keys:
            continue
        chain = [(name, found.overrides[name], SOURCE_DYNAMIC_TOPIC)] if name in found.overrides else []
        for broker_name in TOPIC_SYNONYMS.get(name, ()):
            chain += dynamic.sources(broker_name)
        source = chain[0][2] if chain else SOURCE_DEFAULT
        entries.append({"name": name, "value": format_value(found.config.value_of(name)), "read_only": False,
                        "is_default": source == SOURCE_DEFAULT, "config_source": source, "is_sensitive": False,
                        "synonyms": _synonyms(chain) if synonyms else [],
                        "config_type": CONFIG_TYPES[CONFIG_DEFS[name].kind], "documentation": None})
    return entries


def _synonyms(chain: list[tuple[str, str | None, int]]) -> list[dict[str, Any]]:
    return [{"name": name, "value": value, "source": source} for name, value, source in chain]


async def _create_one(ctx: RequestContext, topic: dict[str, Any], validate_only: bool) -> dict[str, Any]:
    broker = ctx.broker
    name = topic["name"]
    result = {"name": name, "topic_id": ZERO_UUID, "error_code": 0, "error_message": None,
              "num_partitions": -1, "replication_factor": -1, "configs": None}
    try:
        if name in broker.logs.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        assignments = topic["assignments"]
        replica_lists = None
        if assignments:
            if topic["num_partitions"] != -1 or topic["replication_factor"] != -1:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "give either assignments or num_partitions/replication_factor, not both")
            partitions = len(assignments)
            replication = len(assignments[0]["broker_ids"])
            live = {node for node, *_ in broker.live_brokers()}
            for assignment in assignments:
                if set(assignment["broker_ids"]) - live or len(assignment["broker_ids"]) != replication:
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "unknown broker in assignment")
            ordered = sorted(assignments, key=lambda a: a["partition_index"])
            if [a["partition_index"] for a in ordered] != list(range(partitions)):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partition indexes must be 0 to n-1")
            replica_lists = [list(a["broker_ids"]) for a in ordered]
        else:
            partitions = topic["num_partitions"]
            replication = topic["replication_factor"]
            if partitions == -1:
                partitions = broker.config["num.partitions"]
            if replication == -1:
                replication = broker.config["default.replication.factor"]
        if partitions <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "number of partitions must be larger than 0")
        if replication <= 0:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be larger than 0")
        if replication > len(broker.live_brokers()):
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"replication factor {replication} is larger than the {len(broker.live_brokers())} "
                             "available brokers")
        configs = {c["name"]: c["value"] for c in topic["configs"]}
        if validate_only:
            broker.logs.validate_topic(name, partitions, configs)
        else:
            topic_id = await broker.topic_admin.create_topic(name, partitions, configs, replication, replica_lists)
        result.update(num_partitions=partitions, replication_factor=replication)
        if not validate_only:
            result["topic_id"] = topic_id
            result["configs"] = [{k: e[k] for k in ("name", "value", "read_only", "config_source", "is_sensitive")}
                                 for e in _config_entries(ctx, name, None, False)]
    except KafkaError as exc:
        result.update(error_code=exc.code, error_message=exc.message)
    return result


@handler(ApiKey.CREATE_TOPICS)
async def create_topics(ctx: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    results = [await _create_one(ctx, topic, request["validate_only"]) for topic in request["topics"]]
    return {"throttle_time_ms": 0, "topics": results}


@handler(ApiKey.DELETE_TOPICS)
async def delete_topics(ctx: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    if ctx.api_version >= 6:
        wanted = [(t["name"], t["topic_id"]) for t in request["topics"]]
    else:
        wanted = [(name, ZERO_UUID) for name in request["topic_names"]]
    by_id = {getattr(t, "topic_id", None): n for n, t in broker.logs.topics.items()}
    responses = []
    for name, topic_id in wanted:
        if name is None:
            name = by_id.get(topic_id)
        entry = {"name": name, "topic_id": topic_id, "error_code": 0, "error_message": None}
        try:
            if name is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
            if not broker.config["delete.topic.enable"]:
                raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
            if name in INTERNAL_TOPICS:
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"cannot delete internal topic {name}")
            if name not in broker.logs.topics:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
            await broker.topic_admin.delete_topic(name)
        except KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        responses.append(entry)
    return {"throttle_time_ms": 0, "responses": responses}


@handler(ApiKey.CREATE_PARTITIONS)
async def create_partitions(ctx: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    results = []
    for topic in request["topics"]:
        entry = {"name": topic["name"], "error_code": 0, "error_message": None}
        try:
            existing = broker.logs.topics.get(topic["name"])
            if existing is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic['name']!r} does not exist")
            if topic["count"] <= existing.partition_count:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                                 f"topic has {existing.partition_count} partitions; {topic['count']} is not more")
            if not request["validate_only"]:
                assignments = [list(a["broker_ids"]) for a in topic["assignments"] or ()]
                await broker.topic_admin.create_partitions(topic["name"], topic["count"], assignments or None)
        except KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        results.append(entry)
    return {"throttle_time_ms": 0, "results": results}


def _broker_config_entries(broker: Any, scope: str, keys: list[str] | None, synonyms: bool) -> list[dict[str, Any]]:
    """Broker configs as Kafka describes them. For this broker: every config Kafka 4.4 has (ours with the
    value this broker runs with, the others with Kafka's default: they have no effect here), burrowpy's own
    keys and any custom dynamic config; for the cluster default ("") only what is set there."""
    dynamic = broker.dynamic_configs
    if scope == CLUSTER_DEFAULT:
        names = dynamic.dynamic_names(CLUSTER_DEFAULT)
    else:
        names = sorted(set(KAFKA_BROKER_CONFIGS) | set(broker.config.settings) | set(dynamic.dynamic_names()))
    entries = []
    for name in names:
        if keys is not None and name not in keys:
            continue
        custom = name not in KAFKA_BROKER_CONFIGS and name not in broker.config.settings
        _, config_type, read_only, sensitive = KAFKA_BROKER_CONFIGS.get(
            name, (None, TYPE_UNKNOWN if custom else 2, True, custom))
        chain = dynamic.sources(name, scope)
        value = dynamic.layers[CLUSTER_DEFAULT].get(name) if scope == CLUSTER_DEFAULT else dynamic.value(name)
        value = None if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        source = chain[0][2] if chain else SOURCE_DEFAULT
        if sensitive:
            value = None
            chain = [(synonym, None, synonym_source) for synonym, _, synonym_source in chain]
        entries.append({"name": name, "value": value, "read_only": read_only, "is_default": source == SOURCE_DEFAULT,
                        "config_source": source, "is_sensitive": sensitive,
                        # Kafka lists no synonyms for a config it shows without a value, unless it hides it
                        "synonyms": _synonyms(chain) if synonyms and (value is not None or sensitive) else [],
                        "config_type": config_type, "documentation": None})
    return entries


@handler(ApiKey.DESCRIBE_CONFIGS)
async def describe_configs(ctx: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    synonyms = bool(request.get("include_synonyms"))
    results = []
    for resource in request["resources"]:
        kind, name, keys = resource["resource_type"], resource["resource_name"], resource["configuration_keys"]
        entry = {"error_code": 0, "error_message": "", "resource_type": kind, "resource_name": name,
                 "configs": []}
        try:
            if kind == RESOURCE_TOPIC:
                if name not in broker.logs.topics:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
                entry["configs"] = _config_entries(ctx, name, keys, synonyms)
            elif kind == RESOURCE_BROKER:
                scope = broker.dynamic_configs.scope_of(name, describing=True)
                entry["configs"] = _broker_config_entries(broker, scope, keys, synonyms)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"unsupported resource type {kind}")
        except KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        results.append(entry)
    return {"throttle_time_ms": 0, "results": results}


async def _alter(ctx: RequestContext, request: dict[str, Any], incremental: bool) -> dict[str, Any]:
    broker = ctx.broker
    responses = []
    for resource in request["resources"]:
        kind, name = resource["resource_type"], resource["resource_name"]
        entry = {"error_code": 0, "error_message": None, "resource_type": kind, "resource_name": name}
        try:
            if kind == RESOURCE_BROKER:
                await _alter_broker(broker, name, resource["configs"], incremental, request["validate_only"])
                responses.append(entry)
                continue
            if kind != RESOURCE_TOPIC:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"unsupported resource type {kind}")
            if name not in broker.logs.topics:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
            if incremental:
                updates: dict[str, str | None] = {}
                for config in resource["configs"]:
                    op = config["config_operation"]
                    if op == OP_SET:
                        updates[config["name"]] = config["value"]
                    elif op == OP_DELETE:
                        updates[config["name"]] = None
                    elif op in (OP_APPEND, OP_SUBTRACT):
                        current = updates.get(config["name"], broker.logs.topics[name].overrides.get(config["name"]))
                        updates[config["name"]] = _list_operation(config["name"], op, current, config["value"])
                    else:
                        raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown config operation {op}")
                await broker.topic_admin.alter_configs(name, updates, replace=False,
                                                       validate_only=request["validate_only"])
            else:
                updates = {c["name"]: c["value"] for c in resource["configs"]}
                await broker.topic_admin.alter_configs(name, updates, replace=True,
                                                       validate_only=request["validate_only"])
        except KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        responses.append(entry)
    return {"throttle_time_ms": 0, "responses": responses}


async def _alter_broker(broker: Any, name: str, configs: list[dict[str, Any]], incremental: bool,
                        validate_only: bool) -> None:
    """AlterConfigs (the configs become the whole dynamic layer) or IncrementalAlterConfigs on the
    cluster default ("") or this broker's own dynamic configs."""
    dynamic = broker.dynamic_configs
    scope = dynamic.scope_of(name)
    updates: dict[str, str | None] = {}
    for config in configs:
        op = config.get("config_operation", OP_SET) if incremental else OP_SET
        if op == OP_SET:
            updates[config["name"]] = config["value"]
        elif op == OP_DELETE:
            updates[config["name"]] = None
        elif op in (OP_APPEND, OP_SUBTRACT):
            known = KAFKA_BROKER_CONFIGS.get(config["name"])
            if known is None or known[1] != TYPE_LIST:
                verb = "append" if op == OP_APPEND else "subtract"
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Config value {verb} is not allowed for config key: {config['name']}")
            current = updates.get(config["name"], dynamic.current(scope, config["name"]))
            updates[config["name"]] = _merge_list(op, current, config["value"])
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown config operation {op}")
    layer = dynamic.prepare(scope, updates, replace=not incremental)
    if not validate_only:
        await broker.topic_admin.alter_broker_configs(scope, layer)


def _list_operation(name: str, op: int, current: str | None, value: str | None) -> str:
    """IncrementalAlterConfigs APPEND or SUBTRACT on a topic's list config, starting from the topic's
    override or else Kafka's default, as Kafka does."""
    definition = CONFIG_DEFS.get(name)
    if definition is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"unknown topic config name: {name}")
    if definition.kind != "list":
        verb = "APPEND" if op == OP_APPEND else "SUBTRACT"
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Can't {verb} to key {name} because its type is not LIST.")
    return _merge_list(op, current or format_value(definition.default), value)


def _merge_list(op: int, current: str | None, value: str | None) -> str:
    """APPEND (add the items not there yet) or SUBTRACT (remove them) on a comma-separated list."""
    items = [item.strip() for item in (current or "").split(",") if item.strip()]
    given = [item.strip() for item in (value or "").split(",") if item.strip()]
    if op == OP_APPEND:
        items += [item for item in given if item not in items]
    else:
        items = [item for item in items if item not in given]
    return ",".join(items)


@handler(ApiKey.ALTER_CONFIGS)
async def alter_configs(ctx: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    return await _alter(ctx, request, incremental=False)


@handler(ApiKey.INCREMENTAL_ALTER_CONFIGS)
async def incremental_alter_configs(ctx: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    return await _alter(ctx, request, incremental=True)
