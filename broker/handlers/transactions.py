"""Transactions on the wire: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
DescribeTransactions and ListTransactions (InitProducerId is in :mod:`broker.handlers.produce`).

The coordinator (:mod:`broker.txn.coordinator`) does the work; these handlers translate versions:

* a fenced producer (an epoch older than the transactional id's) gets PRODUCER_FENCED from the versions
  that know it (KIP-588: InitProducerId v4, AddPartitionsToTxn v2, AddOffsetsToTxn v2, EndTxn v2,
  TxnOffsetCommit v3) and INVALID_PRODUCER_EPOCH before;
* AddPartitionsToTxn v0-3 carries one transaction; v4+ (broker to broker in Kafka) a batch of them,
  possibly ``verify_only``, taken from a broker of this cluster only. Partitions of unknown topics get
  UNKNOWN_TOPIC_OR_PARTITION and then the others OPERATION_NOT_ATTEMPTED, as in Kafka.
* TxnOffsetCommit writes the offsets in the producer's transaction; they count once it commits.
* WriteTxnMarkers (between brokers only) writes markers to partitions this broker leads.
"""

from __future__ import annotations

from typing import Any

from broker.errors import ErrorCode
from broker.groups.coordinator import OFFSETS_TOPIC
from broker.groups.requests import CommitRequest
from broker.handlers.groups import (
    by_topic,
    group_allowed,
    partition_errors,
    partition_exists,
    requested_commits,
    topic_allowed,
)
from broker.handlers.registry import RequestContext, handler
from broker.protocol.api import ApiKey
from broker.protocol.responses import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResponsePartitionResult,
    AddPartitionsToTxnResponseResult,
    AddPartitionsToTxnResponseTopicResult,
    DescribeTransactionsResponse,
    EndTxnResponse,
    ListTransactionsResponse,
    TxnOffsetCommitResponse,
    WriteTxnMarkersResponse,
    WriteTxnMarkersResponseWritableTxnMarkerPartitionResult,
    WriteTxnMarkersResponseWritableTxnMarkerResult,
    WriteTxnMarkersResponseWritableTxnMarkerTopicResult,
)
from broker.security.acl import Operation, ResourceType
from broker.topics import INTERNAL_TOPICS

# The first version of each API that knows PRODUCER_FENCED.
_FENCED_SINCE: dict[int, int] = {
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
    ApiKey.TXN_OFFSET_COMMIT: 3,
}


def fenced_error(ctx: RequestContext) -> ErrorCode:
    since = _FENCED_SINCE[ctx.api_key]
    return ErrorCode.PRODUCER_FENCED if ctx.api_version >= since else ErrorCode.INVALID_PRODUCER_EPOCH


def transactional_id_allowed(ctx: RequestContext, operation: Operation, transactional_id: str) -> bool:
    return ctx.allowed(operation, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _version_error(ctx: RequestContext, code: ErrorCode) -> ErrorCode:
    """PRODUCER_FENCED as the request's version can express it."""
    return fenced_error(ctx) if code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH) else code


async def _add_partitions(ctx: RequestContext, transactional_id: str, producer_id: int, producer_epoch: int,
                          topics: list[dict[str, Any]], verify_only: bool = False
                          ) -> list[AddPartitionsToTxnResponseTopicResult]:
    wanted = [(t["name"], p) for t in topics for p in t["partitions"]]
    coordinator = ctx.services.transactions
    refused = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in wanted
               if not topic_allowed(ctx, Operation.WRITE, tp[0])}
    refused |= {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in wanted
                if tp not in refused and (not partition_exists(ctx, *tp) or tp[0] in INTERNAL_TOPICS)}
    if not verify_only and not transactional_id_allowed(ctx, Operation.WRITE, transactional_id):
        errors = dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif refused:
        errors = {tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in wanted}
    elif verify_only:
        errors = await coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, wanted,
                                                     fenced_error(ctx))
    else:
        errors = await coordinator.add_partitions(transactional_id, producer_id, producer_epoch, wanted,
                                                  fenced_error(ctx))
    results = by_topic((topic, AddPartitionsToTxnResponsePartitionResult(
        partition_index=partition, partition_error_code=errors[(topic, partition)])) for topic, partition in wanted)
    return [{"name": name, "results_by_partition": partitions} for name, partitions in results.items()]


@handler(ApiKey.ADD_PARTITIONS_TO_TXN)
async def add_partitions_to_txn(ctx: RequestContext, request: dict[str, Any]) -> AddPartitionsToTxnResponse:
    if ctx.api_version <= 3:
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": await _add_partitions(
            ctx, request["v3_and_below_transactional_id"], request["v3_and_below_producer_id"],
            request["v3_and_below_producer_epoch"], request["v3_and_below_topics"])}
    if not ctx.from_cluster_broker():
        # v4+ is spoken between Kafka's brokers (a leader verifies a transaction's partitions with it), refused
        # to clients as CLUSTER_ACTION is; here, as follower fetches and markers, to anyone but a broker of ours
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "results_by_transaction": []}
    results: list[AddPartitionsToTxnResponseResult] = []
    for txn in request["transactions"]:
        results.append({"transactional_id": txn["transactional_id"], "topic_results": await _add_partitions(
            ctx, txn["transactional_id"], txn["producer_id"], txn["producer_epoch"], txn["topics"],
            verify_only=txn["verify_only"])})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results_by_transaction": results}


@handler(ApiKey.ADD_OFFSETS_TO_TXN)
async def add_offsets_to_txn(ctx: RequestContext, request: dict[str, Any]) -> AddOffsetsToTxnResponse:
    if not transactional_id_allowed(ctx, Operation.WRITE, request["transactional_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not group_allowed(ctx, Operation.READ, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    partition = ctx.services.groups.partition_for(request["group_id"])
    errors = await ctx.services.transactions.add_partitions(
        request["transactional_id"], request["producer_id"], request["producer_epoch"],
        [(OFFSETS_TOPIC, partition)], fenced_error(ctx))
    return {"throttle_time_ms": 0, "error_code": errors[(OFFSETS_TOPIC, partition)]}


@handler(ApiKey.END_TXN)
async def end_txn(ctx: RequestContext, request: dict[str, Any]) -> EndTxnResponse:
    if not transactional_id_allowed(ctx, Operation.WRITE, request["transactional_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    error = await ctx.services.transactions.end_txn(request["transactional_id"], request["producer_id"],
                                                    request["producer_epoch"], request["committed"], fenced_error(ctx))
    return {"throttle_time_ms": 0, "error_code": error}


@handler(ApiKey.TXN_OFFSET_COMMIT)
async def txn_offset_commit(ctx: RequestContext, request: dict[str, Any]) -> TxnOffsetCommitResponse:
    version = ctx.api_version
    group_id = request["group_id"]
    requested, refused, commits = requested_commits(ctx, request["topics"], leader_epoch=version >= 2)
    errors = dict(refused)
    if not group_allowed(ctx, Operation.READ, group_id):
        errors = dict.fromkeys(requested, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    elif not transactional_id_allowed(ctx, Operation.WRITE, request["transactional_id"]):
        errors = dict.fromkeys(requested, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif commits:
        groups = ctx.services.groups
        write_refused = ctx.services.transactions.check_transactional_write(
            request["producer_id"], request["producer_epoch"], OFFSETS_TOPIC, groups.partition_for(group_id))
        if write_refused is not None:
            errors.update(dict.fromkeys(commits, _version_error(ctx, write_refused.code)))
        else:
            errors.update(await groups.commit_transactional_offsets(CommitRequest(
                group_id=group_id,
                generation_id=request["generation_id"] if version >= 3 else -1,
                member_id=request["member_id"] if version >= 3 else "",
                group_instance_id=request["group_instance_id"] if version >= 3 else None,
                offsets=commits,
            ), request["producer_id"], request["producer_epoch"]))
    return {"throttle_time_ms": 0, "topics": partition_errors(requested, errors.__getitem__)}


@handler(ApiKey.DESCRIBE_TRANSACTIONS)
async def describe_transactions(ctx: RequestContext, request: dict[str, Any]) -> DescribeTransactionsResponse:
    ids = request["transactional_ids"]
    allowed = [tid for tid in ids if transactional_id_allowed(ctx, Operation.DESCRIBE, tid)]
    states = {state["transactional_id"]: state
              for state in (await ctx.services.transactions.describe(allowed) if allowed else [])}
    return {"throttle_time_ms": 0, "transaction_states": [states.get(tid) or {
        "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactional_id": tid,
        "transaction_state": "", "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
        "producer_epoch": -1, "topics": []} for tid in ids]}


@handler(ApiKey.LIST_TRANSACTIONS)
async def list_transactions(ctx: RequestContext, request: dict[str, Any]) -> ListTransactionsResponse:
    error, unknown, states = await ctx.services.transactions.list(
        request["state_filters"], request["producer_id_filters"],
        request["duration_filter"] if ctx.api_version >= 1 else -1)
    return {"throttle_time_ms": 0, "error_code": error, "unknown_state_filters": unknown,
            "transaction_states": [state for state in states
                                   if transactional_id_allowed(ctx, Operation.DESCRIBE, state["transactional_id"])]}


@handler(ApiKey.WRITE_TXN_MARKERS)
async def write_txn_markers(ctx: RequestContext, request: dict[str, Any]) -> WriteTxnMarkersResponse:
    """Markers a transaction coordinator asks this broker to write to partitions it leads (in a cluster): only
    from a broker of this cluster, for any client could end other producers' transactions with them."""
    permitted = ctx.from_cluster_broker()
    results: list[WriteTxnMarkersResponseWritableTxnMarkerResult] = []
    for marker in request["markers"]:
        topics: list[WriteTxnMarkersResponseWritableTxnMarkerTopicResult] = []
        for topic in marker["topics"]:
            partitions: list[WriteTxnMarkersResponseWritableTxnMarkerPartitionResult] = []
            for index in topic["partition_indexes"]:
                if not permitted:
                    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                elif not partition_exists(ctx, topic["name"], index):
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif ctx.services.cluster.partition_leader(topic["name"], index)[0] != ctx.services.node_id:
                    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                else:
                    code = await ctx.services.transactions.write_marker(
                        topic["name"], index, marker["producer_id"], marker["producer_epoch"], marker["transaction_result"])
                partitions.append({"partition_index": index, "error_code": code})
            topics.append({"name": topic["name"], "partitions": partitions})
        results.append({"producer_id": marker["producer_id"], "topics": topics})
    return {"markers": results}
