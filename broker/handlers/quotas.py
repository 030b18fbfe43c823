"""DescribeClientQuotas and AlterClientQuotas (KIP-546): the quotas of :mod:`broker.quotas`, kept by the topic
admin (a single node's data dir, a cluster's metadata) and described from this broker's copy, as a Kafka broker
answers from its metadata image."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from broker.errors import ErrorCode, KafkaError
from broker.handlers.registry import RequestContext, handler
from broker.protocol.api import ApiKey
from broker.protocol.responses import (
    AlterClientQuotasResponse,
    DescribeClientQuotasResponse,
    DescribeClientQuotasResponseEntityData,
)
from broker.quotas import IP, Entity, MutationQuota, QuotaRefused, QuotaWindow, entity_of, is_address
from broker.security.acl import CLUSTER_NAME, Operation, ResourceType

_DENIED = "Cluster authorization failed."
RESOLVE_SECONDS = 5.0  # the longest an ip entity's name may take to resolve


def now_ms() -> int:
    return int(time.monotonic() * 1000)


def mutation_quota(ctx: RequestContext, strict_since: int) -> MutationQuota:
    """The client's controller_mutation_rate for a CreateTopics, CreatePartitions or DeleteTopics, strict from
    the API's version ``strict_since`` on (Kafka's: clients from there know THROTTLING_QUOTA_EXCEEDED)."""
    config = ctx.services.config
    window = QuotaWindow(config["controller.quota.window.num"], config["controller.quota.window.size.seconds"] * 1000)
    return ctx.services.client_quotas.mutation_quota(*ctx.quota_client(), window,
                                                     strict=ctx.api_version >= strict_since)


async def _resolves(name: str) -> bool:
    try:
        async with asyncio.timeout(RESOLVE_SECONDS):
            await asyncio.get_running_loop().getaddrinfo(name, None)
        return True
    except (OSError, UnicodeError):  # TimeoutError is an OSError
        return False


def _entity_data(entity: Entity) -> list[DescribeClientQuotasResponseEntityData]:
    # AlterClientQuotas' entity data has the same fields, so the one list serves both answers
    return [{"entity_type": kind, "entity_name": name} for kind, name in entity]


@handler(ApiKey.DESCRIBE_CLIENT_QUOTAS)
async def describe_client_quotas(ctx: RequestContext, request: dict[str, Any]) -> DescribeClientQuotasResponse:
    if not ctx.allowed(Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": _DENIED, "entries": None}
    components = [(c["entity_type"], c["match_type"], c["match"]) for c in request["components"]]
    try:
        found = ctx.services.client_quotas.describe(components, request["strict"])
    except QuotaRefused as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "error_message": exc.message, "entries": None}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": "", "entries": [
        {"entity": _entity_data(entity), "values": [{"key": key, "value": value} for key, value in values.items()]}
        for entity, values in found]}


@handler(ApiKey.ALTER_CLIENT_QUOTAS)
async def alter_client_quotas(ctx: RequestContext, request: dict[str, Any]) -> AlterClientQuotasResponse:
    entries = [(entity_of((e["entity_type"], e["entity_name"]) for e in entry["entity"]),
                [(op["key"], op["value"], op["remove"]) for op in entry["ops"]]) for entry in request["entries"]]
    if not ctx.allowed(Operation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "entries": [
            {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": _DENIED,
             "entity": _entity_data(entity)} for entity, _ops in entries]}
    # Kafka resolves an ip entity's name; here off the event loop, and within a bound
    names = {name for entity, _ops in entries for kind, name in entity
             if kind == IP and name is not None and not is_address(name)}
    resolved = {name for name in names if await _resolves(name)}
    outcome = ctx.services.client_quotas.alter(entries, lambda host: is_address(host) or host in resolved)
    results = dict(outcome.results)
    if outcome.changes and not request["validate_only"]:
        try:
            await ctx.services.topic_admin.alter_client_quotas(outcome.changes)
        except KafkaError as exc:  # nothing was changed: every entity that would have been gets the error
            results = {entity: (exc.code, exc.message) if code == ErrorCode.NONE else (code, message)
                       for entity, (code, message) in results.items()}
    return {"throttle_time_ms": 0, "entries": [
        {"error_code": code, "error_message": message, "entity": _entity_data(entity)}
        for entity, (code, message) in results.items()]}
