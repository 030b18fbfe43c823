"""ElectLeaders: preferred and unclean leader elections asked for by an operator (kafka-leader-election)."""

from __future__ import annotations

from typing import Any

from broker.errors import ErrorCode, KafkaError
from broker.handlers.registry import RequestContext, handler
from broker.protocol.api import ApiKey
from broker.protocol.responses import ElectLeadersResponse, ElectLeadersResponsePartitionResult
from broker.security.acl import CLUSTER_NAME, Operation, ResourceType

PREFERRED, UNCLEAN = 0, 1

# (topic, partition, error code, error message) per partition, as the topic admins answer
ElectionResult = tuple[str, int, int, str | None]


def _answer(error_code: int, results: list[ElectionResult], topics: list[str] | None = None) -> ElectLeadersResponse:
    """``topics``: every topic, each answered even without a partition (Kafka's answer for all partitions)."""
    by_topic: dict[str, list[ElectLeadersResponsePartitionResult]] = {topic: [] for topic in topics or ()}
    for topic, partition, code, message in results:
        by_topic.setdefault(topic, []).append({"partition_id": partition, "error_code": code,
                                               "error_message": message})
    return {"throttle_time_ms": 0, "error_code": error_code, "replica_election_results": [
        {"topic": topic, "partition_result": found} for topic, found in by_topic.items()]}


@handler(ApiKey.ELECT_LEADERS)
async def elect_leaders(ctx: RequestContext, request: dict[str, Any]) -> ElectLeadersResponse:
    """Version 0 has no election type: it asks for preferred elections. Without ``topic_partitions`` every
    partition of the cluster is considered and only those that needed an election are answered (Kafka's
    controller does the same)."""
    listed = request["topic_partitions"]
    partitions = None if listed is None else list(dict.fromkeys(
        (entry["topic"], index) for entry in listed for index in entry["partitions"]))

    def everyone(code: ErrorCode, message: str) -> ElectLeadersResponse:
        return _answer(code, [(topic, index, code, message) for topic, index in partitions or ()])

    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return everyone(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    election_type = request["election_type"] if ctx.api_version >= 1 else PREFERRED
    if election_type not in (PREFERRED, UNCLEAN):
        return everyone(ErrorCode.INVALID_REQUEST, f"unknown election type {election_type} (0: preferred, "
                                                   "1: unclean)")
    timeout = max(request["timeout_ms"], 0) / 1000
    try:
        results = await ctx.services.topic_admin.elect_leaders(election_type == PREFERRED, partitions, timeout)
    except KafkaError as exc:
        return _answer(ErrorCode.NONE, [(topic, index, exc.code, exc.message) for topic, index in partitions or ()])
    return _answer(ErrorCode.NONE, results, None if partitions is not None else sorted(ctx.services.logs.topics))
