"""Partition reassignment (KIP-455): AlterPartitionReassignments and ListPartitionReassignments, what
kafka-reassign-partitions drives. In a cluster each change is a command of the metadata quorum (see
:mod:`broker.cluster.metadata` for how one proceeds); a single node answers as a one-broker Kafka does."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from broker.cluster.metadata import reassignment_target_problem, unknown_partition_message
from broker.errors import ErrorCode, KafkaError
from broker.handlers.registry import RequestContext, handler
from broker.protocol.api import ApiKey
from broker.security.acl import CLUSTER_NAME, Operation, ResourceType


def _reassign_alone(ctx: RequestContext, topic: str, index: int, replicas: list[int] | None) -> None:
    """A single node: its one broker is the only possible target, which every partition has already."""
    local = ctx.broker.logs.topics.get(topic)
    if local is None or not 0 <= index < local.partition_count:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, unknown_partition_message(topic, index,
                                                                                          local is not None))
    if replicas is None:
        raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"no reassignment of {topic}-{index} is in progress")
    problem = reassignment_target_problem(list(replicas), {ctx.broker.config.node_id})
    if problem is not None:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)


async def _reassign(ctx: RequestContext, topic: str, partition: dict[str, Any]) -> dict[str, Any]:
    replicas = partition["replicas"]
    answer = {"partition_index": partition["partition_index"], "error_code": 0, "error_message": None}
    try:
        if ctx.broker.cluster is None:
            _reassign_alone(ctx, topic, partition["partition_index"], replicas)
            return answer
        # a target proposed again changes nothing, so an unknown outcome may be retried; a cancellation may not
        # a cancellation that needs an unclean election is the topic's unclean.leader.election.enable's call
        await ctx.broker.cluster.propose({"op": "alter_reassignment", "topic": topic,
                                          "partition": partition["partition_index"],
                                          "replicas": None if replicas is None else list(replicas),
                                          "unclean": replicas is None and
                                          ctx.broker.cluster.unclean_election_enabled(topic)},
                                         retry=replicas is not None)
    except KafkaError as exc:
        # Kafka gives no words with NO_REASSIGNMENT_IN_PROGRESS
        answer.update(error_code=exc.code,
                      error_message=None if exc.code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS else exc.message)
    return answer


@handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
async def alter_partition_reassignments(ctx: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return {"throttle_time_ms": 0, "error_code": error, "error_message": None, "responses": [
            {"name": topic["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": error, "error_message": None}
                for p in topic["partitions"]]} for topic in request["topics"]]}
    if ctx.broker.cluster is not None:
        await ctx.broker.cluster.catch_up()
    responses = []
    for topic in request["topics"]:
        partitions = await asyncio.gather(*(_reassign(ctx, topic["name"], p) for p in topic["partitions"]))
        responses.append({"name": topic["name"], "partitions": list(partitions)})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": responses}


@handler(ApiKey.LIST_PARTITION_REASSIGNMENTS)
async def list_partition_reassignments(ctx: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None,
                "topics": []}
    if ctx.broker.cluster is None:  # a single node never has a reassignment in progress
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": []}
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
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": topics}
