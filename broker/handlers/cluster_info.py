"""ApiVersions, Metadata and DescribeCluster: what clients learn about the broker before anything else."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.errors import ErrorCode, KafkaError
from broker.handlers.registry import RequestContext, handler
from broker.protocol.api import ApiKey, encode_element
from broker.protocol.responses import (
    ApiVersionsResponse,
    DescribeClusterResponse,
    DescribeClusterResponseBroker,
    MetadataResponse,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from broker.protocol.types import Encoded
from broker.security.acl import CLUSTER_NAME, RESOURCE_OPERATIONS, Operation, ResourceType
from broker.topics import INTERNAL_TOPICS

ZERO_UUID = bytes(16)
OPERATIONS_OMITTED = -(2**31)


def every_operation(resource_type: ResourceType) -> int:
    """The authorized-operations bit field of a resource type's every operation (what anyone may do
    without an authorizer)."""
    return sum(1 << operation for operation in RESOURCE_OPERATIONS[resource_type])


def operations_field(ctx: RequestContext, wanted: bool, resource_type: ResourceType, name: str) -> int:
    """An authorized_operations field: the principal's operations when asked for, else Kafka's 'omitted'."""
    if not wanted:
        return OPERATIONS_OMITTED
    return ctx.operations(resource_type, name, every_operation(resource_type))


@handler(ApiKey.API_VERSIONS)
async def api_versions(ctx: RequestContext, request: dict[str, Any]) -> ApiVersionsResponse:
    versions = sorted((ctx.api_versions or ctx.services.api_versions).items())
    return {"error_code": 0, "throttle_time_ms": 0,
            "api_keys": [{"api_key": key, "min_version": low, "max_version": high} for key, (low, high) in versions]}


def _topic_entry(ctx: RequestContext, name: str, live: frozenset[int], operations: bool = False) -> Encoded | None:
    """One topic's answer, encoded (None when the topic is gone: deleted by another request while this one waited);
    ``live``: the ids of the live brokers (offline replicas are the others).

    The encoding is kept per topic and version and used again while what it says is unchanged (its
    id, its partitions' leaders, epochs, replicas and ISRs, the live brokers, the operations field), so a
    Metadata of many topics does not build and encode every unchanged one again."""
    services = ctx.services
    topic = services.logs.topics.get(name)
    if topic is None:
        return None
    topic_id = getattr(topic, "topic_id", None) or ZERO_UUID
    leaders = tuple(ctx.services.cluster.partition_leader(name, index) for index in range(topic.partition_count))
    if not ctx.services.cluster.caught_up:
        leaders = tuple((-1, epoch, replicas, isr) for _leader, epoch, replicas, isr in leaders)
    operations_value = operations_field(ctx, operations, ResourceType.TOPIC, name)
    signature = (topic_id, live, operations_value,
                 tuple((leader, epoch, tuple(replicas), tuple(isr)) for leader, epoch, replicas, isr in leaders))
    key = (name, ctx.api_version)
    cache = ctx.services.metadata_cache
    cached = cache.entry(key, signature)
    if cached is not None:
        return cached
    partitions: list[MetadataResponsePartition] = []
    for index, (leader, epoch, replicas, isr) in enumerate(leaders):
        # A partition whose ISR is all down has no leader until one of them returns, nor any while this broker
        # has not caught up with the quorum (clients retry).
        error = ErrorCode.LEADER_NOT_AVAILABLE if leader < 0 else ErrorCode.NONE
        partitions.append({"error_code": error, "partition_index": index, "leader_id": leader,
                           "leader_epoch": epoch, "replica_nodes": replicas, "isr_nodes": isr,
                           "offline_replicas": [r for r in replicas if r not in live]})
    entry: MetadataResponseTopic = {
        "error_code": 0, "name": name, "topic_id": topic_id, "is_internal": name in INTERNAL_TOPICS,
        "partitions": partitions, "topic_authorized_operations": operations_value}
    encoded = encode_element(ApiKey.METADATA, ctx.api_version, "topics", entry)
    cache.keep_entry(key, signature, encoded)
    return encoded


def _every_topic(ctx: RequestContext, live: frozenset[int], operations: bool,
                 described: Callable[[str], bool]) -> list[Encoded | MetadataResponseTopic]:
    """The entries of every topic the principal may describe, in name order.

    Kept and used again while nothing they depend on changes: the topics and the cluster's metadata
    (``MetadataCache.generation``, taken first), the live brokers, the ACLs and who asks (with an
    authorizer), the version and whether operations are asked for. A monitor or an admin client asking for
    every topic over and over then costs no work per topic."""
    services = ctx.services
    authorizer = services.authorizer
    asker = None if authorizer is None else (authorizer.store.generation, ctx.principal, ctx.client_host)
    cache = ctx.services.metadata_cache
    key = (ctx.api_version, operations, cache.generation(), live, asker)
    kept = cache.topic_list(key)
    if kept is None:
        kept = [entry for name in sorted(services.logs.topics)
                if described(name) and (entry := _topic_entry(ctx, name, live, operations)) is not None]
        cache.keep_topic_list(key, kept)
    return list(kept)


def _error_topic(name: str | None, code: ErrorCode, topic_id: bytes = ZERO_UUID) -> MetadataResponseTopic:
    return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False, "partitions": []}


@handler(ApiKey.METADATA)
async def metadata(ctx: RequestContext, request: dict[str, Any]) -> MetadataResponse:
    services = ctx.services
    requested = request["topics"]
    operations = ctx.api_version >= 8 and request["include_topic_authorized_operations"]
    live = frozenset(node_id for node_id, *_ in ctx.services.cluster.live_brokers())

    def described(name: str) -> bool:
        return ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name)

    # v0: an empty list means every topic; v1+: null means every topic and [] means none.
    topics: list[Encoded | MetadataResponseTopic]
    if requested is None or (ctx.api_version == 0 and not requested):
        # every topic the principal may describe; the others are left out
        topics = _every_topic(ctx, live, operations, described)
    elif ctx.api_version < 12 and any(t["name"] is None or t["topic_id"] != ZERO_UUID for t in requested):
        # v10 and v11 carry topic ids but a topic cannot be asked for by id before v12: Kafka refuses the
        # request, each topic INVALID_REQUEST, a null name answered as "" (the response's name is not nullable)
        topics = [_error_topic(t["name"] or "", ErrorCode.INVALID_REQUEST, t["topic_id"]) for t in requested]
    else:
        auto_create = services.config["auto.create.topics.enable"] and (
            ctx.api_version < 4 or request["allow_auto_topic_creation"])
        by_id = {getattr(t, "topic_id", None): name for name, t in services.logs.topics.items()}
        topics = []
        for wanted in requested:
            name = wanted["name"]
            if name is None:
                found = by_id.get(wanted["topic_id"])
                if found is None:
                    topics.append(_error_topic(None, ErrorCode.UNKNOWN_TOPIC_ID, wanted["topic_id"]))
                    continue
                name = found
            if not described(name):
                topics.append(_error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if name not in services.logs.topics:
                if auto_create and not (ctx.allowed(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
                                        or ctx.allowed(Operation.CREATE, ResourceType.TOPIC, name)):
                    topics.append(_error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                    continue
                if not auto_create:
                    topics.append(_error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                try:
                    await services.topic_admin.create_topic(name, services.config["num.partitions"], {},
                                                            services.config["default.replication.factor"])
                except KafkaError as exc:
                    # Another request may have created it meanwhile: that is success too.
                    if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS or name not in services.logs.topics:
                        topics.append(_error_topic(name, exc.code))
                        continue
            entry = _topic_entry(ctx, name, live, operations)
            # a topic deleted since it was found (or made) above, while this request waited
            topics.append(entry if entry is not None else _error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    cluster_operations = 8 <= ctx.api_version <= 10 and request["include_cluster_authorized_operations"]
    brokers = ctx.services.cluster.live_brokers(ctx.listener)
    return {"throttle_time_ms": 0, "cluster_id": services.cluster_id,
            "brokers": [{"node_id": node_id, "host": host, "port": port, "rack": rack}
                        for node_id, host, port, rack in brokers],
            "controller_id": ctx.services.cluster.controller_id(), "topics": topics,
            "cluster_authorized_operations": operations_field(ctx, cluster_operations, ResourceType.CLUSTER,
                                                              CLUSTER_NAME)}


@handler(ApiKey.DESCRIBE_CLUSTER)
async def describe_cluster(ctx: RequestContext, request: dict[str, Any]) -> DescribeClusterResponse:
    brokers: list[DescribeClusterResponseBroker] = [
        {"broker_id": node_id, "host": host, "port": port, "rack": rack}
        for node_id, host, port, rack in ctx.services.cluster.live_brokers(ctx.listener)]
    if ctx.api_version >= 2:  # KIP-1073: whether each is fenced, and the fenced ones too when asked
        for entry in brokers:
            entry["is_fenced"] = False
        if request["include_fenced_brokers"]:
            brokers += [{"broker_id": node_id, "host": host, "port": port, "rack": rack, "is_fenced": True}
                        for node_id, host, port, rack in ctx.services.cluster.fenced_brokers(ctx.listener)]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
            "cluster_id": ctx.services.cluster_id, "controller_id": ctx.services.cluster.controller_id(),
            "brokers": brokers,
            "cluster_authorized_operations": operations_field(
                ctx, request["include_cluster_authorized_operations"], ResourceType.CLUSTER, CLUSTER_NAME)}
