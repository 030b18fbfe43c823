"""Partition reassignment (KIP-455): AlterPartitionReassignments and ListPartitionReassignments, what
kafka-reassign-partitions drives. In a cluster each change is a command of the metadata quorum (see
:mod:`broker.cluster.metadata` for how one proceeds); a single node answers as a one-broker Kafka does."""

from __future__ import annotations

import asyncio
from typing import Any

from broker.errors import ErrorCode, KafkaError
from broker.handlers.registry import RequestContext, handler
from broker.protocol.api import ApiKey
from broker.protocol.responses import (
    AlterPartitionReassignmentsResponse,
    AlterPartitionReassignmentsResponseReassignablePartitionResponse,
    AlterPartitionReassignmentsResponseReassignableTopicResponse,
    ListPartitionReassignmentsResponse,
)
from broker.security.acl import CLUSTER_NAME, Operation, ResourceType


async def _reassign(ctx: RequestContext, topic: str, partition: dict[str, Any]
                   ) -> AlterPartitionReassignmentsResponseReassignablePartitionResponse:
    replicas = partition["replicas"]
    answer: AlterPartitionReassignmentsResponseReassignablePartitionResponse = {"partition_index": partition["partition_index"], "error_code": 0, "error_message": None}
    try:
        await ctx.services.cluster.reassign(topic, partition["partition_index"], replicas)
    except KafkaError as exc:
        # Kafka gives no words with NO_REASSIGNMENT_IN_PROGRESS
        answer["error_code"] = exc.code
        answer["error_message"] = None if exc.code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS else exc.message
    return answer


@handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
async def alter_partition_reassignments(ctx: RequestContext,
                                        request: dict[str, Any]) -> AlterPartitionReassignmentsResponse:
    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return {"throttle_time_ms": 0, "error_code": error, "error_message": None, "responses": [
            {"name": topic["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": error, "error_message": None}
                for p in topic["partitions"]]} for topic in request["topics"]]}
    await ctx.services.cluster.catch_up()
    responses: list[AlterPartitionReassignmentsResponseReassignableTopicResponse] = []
    for topic in request["topics"]:
        partitions = await asyncio.gather(*(_reassign(ctx, topic["name"], p) for p in topic["partitions"]))
        responses.append({"name": topic["name"], "partitions": list(partitions)})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": responses}


@handler(ApiKey.LIST_PARTITION_REASSIGNMENTS)
async def list_partition_reassignments(ctx: RequestContext,
                                       request: dict[str, Any]) -> ListPartitionReassignmentsResponse:
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None,
                "topics": []}
    view = ctx.services.cluster
    await view.catch_up()
    wanted = None if request["topics"] is None else [(topic["name"], topic["partition_indexes"])
                                                     for topic in request["topics"]]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": [
        {"name": name, "partitions": [{"partition_index": r.partition, "replicas": r.replicas,
                                       "adding_replicas": r.adding, "removing_replicas": r.removing}
                                      for r in ongoing]}
        for name, ongoing in view.reassignments(wanted).items()]}
