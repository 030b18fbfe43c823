"""Partition reassignment (KIP-455): AlterPartitionReassignments and ListPartitionReassignments, what
kafka-reassign-partitions drives. Only a cluster's brokers advertise them (broker.CLUSTER_VERSIONS): each
change is a command of the metadata quorum (see :mod:`broker.cluster.metadata` for how one proceeds)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from broker.errors import ErrorCode, KafkaError
from broker.handlers.registry import RequestContext, handler
from broker.protocol.api import ApiKey
from broker.security.acl import CLUSTER_NAME, Operation, ResourceType


async def _reassign(ctx: RequestContext, topic: str, partition: dict[str, Any]) -> dict[str, Any]:
    replicas = partition["replicas"]
    answer = {"partition_index": partition["partition_index"], "error_code": 0, "error_message": None}
    try:
        # a target proposed again changes nothing, so an unknown outcome may be retried; a cancellation may not
        await ctx.broker.cluster.propose({"op": "alter_reassignment", "topic": topic,
                                          "partition": partition["partition_index"],
                                          "replicas": None if replicas is None else list(replicas)},
                                         retry=replicas is not None)
    except KafkaError as exc:
        answer.update(error_code=exc.code, error_message=exc.message)
    return answer


@handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
async def alter_partition_reassignments(ctx: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return {"error_code": error, "error_message": None, "responses": [
            {"name": topic["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": error, "error_message": None}
                for p in topic["partitions"]]} for topic in request["topics"]]}
    await ctx.broker.cluster.catch_up()
    responses = []
    for topic in request["topics"]:
        partitions = await asyncio.gather(*(_reassign(ctx, topic["name"], p) for p in topic["partitions"]))
        responses.append({"name": topic["name"], "partitions": list(partitions)})
    return {"error_code": 0, "error_message": None, "responses": responses}


@handler(ApiKey.LIST_PARTITION_REASSIGNMENTS)
async def list_partition_reassignments(ctx: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "topics": []}
    await ctx.broker.cluster.catch_up()
    metadata = ctx.broker.cluster.metadata
    wanted: list[tuple[str, Iterable[int]]]
    if request["topics"] is None:
        wanted = [(name, range(len(topic.partitions))) for name, topic in metadata.topics.items()]
    else:  # as Kafka's controller: topics and partitions that do not exist are left out, not errors
        wanted = [(topic["name"], topic["partition_indexes"]) for topic in request["topics"]]
    topics = []
    for name, indexes in wanted:
        ongoing = []
        for index in indexes:
            state = metadata.partition(name, index)
            if state is not None and state.reassigning:
                ongoing.append({"partition_index": index, "replicas": list(state.replicas),
                                "adding_replicas": list(state.adding), "removing_replicas": list(state.removing)})
        if ongoing:
            topics.append({"name": name, "partitions": ongoing})
    return {"error_code": 0, "error_message": None, "topics": topics}
