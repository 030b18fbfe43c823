"""Fetch, ListOffsets, OffsetForLeaderEpoch and DeleteRecords: reading and trimming partition logs.

Fetch is sessionless (session_id 0): every requested partition is in every response, which is what
clients expect of a full fetch. Batches are served as stored (v2), also to Fetch v0-v3: Sarama (Burrow)
reads v2 batches under any Fetch version. Consumers never see past the high watermark, and read_committed
consumers (isolation level 1) not past the last stable offset (the first offset of the oldest open
transaction); they are told which transactions in what they read were aborted.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from broker.errors import ErrorCode, KafkaError
from broker.handlers.registry import RequestContext, handler
from broker.handlers.services import Services
from broker.log.background import wait_durable
from broker.protocol.api import ApiKey
from broker.protocol.responses import (
    DeleteRecordsResponse,
    DeleteRecordsResponsePartitionResult,
    DeleteRecordsResponseTopicResult,
    FetchResponse,
    FetchResponseFetchableTopicResponse,
    FetchResponsePartitionData,
    ListOffsetsResponse,
    ListOffsetsResponsePartitionResponse,
    ListOffsetsResponseTopicResponse,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderEpochResponseEpochEndOffset,
    OffsetForLeaderEpochResponseOffsetForLeaderTopicResult,
)
from broker.quotas import CONSUMER_BYTE_RATE
from broker.security.acl import Operation, ResourceType

if TYPE_CHECKING:
    from broker.cluster.replication import ReplicaManager

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3


READ_COMMITTED = 1

_Partition = TypeVar("_Partition")
_Topic = TypeVar("_Topic")
_Requested = TypeVar("_Requested", bound=Mapping[str, Any])


def _fetch_partition(ctx: RequestContext, topic: str, part: dict[str, Any], max_bytes: int,
                     follower: bool, read_committed: bool, min_one: bool) -> tuple[FetchResponsePartitionData, int]:
    """One partition's response and the number of record bytes it carries (0 when ``max_bytes`` is 0); with
    ``min_one`` its first batch comes whole even when larger than ``max_bytes``."""
    index = part["partition"]
    response = _partition_answer(index)
    try:
        plog, _epoch = ctx.services.replicas.leader_log(topic, index, part["current_leader_epoch"])
        hw = plog.high_watermark
        lso = plog.last_stable_offset
        response.update({"high_watermark": hw, "last_stable_offset": lso, "log_start_offset": plog.log_start_offset})
        offset = part["fetch_offset"]
        if offset < plog.log_start_offset or offset > plog.log_end_offset:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
        limit = plog.log_end_offset if follower else lso if read_committed else hw
        if offset >= limit or max_bytes <= 0:
            return response, 0
        # Left in the log files: the server sends them from there (sendfile), never through Python.
        region = plog.read_region(offset, max_bytes, max_offset=limit, min_one=min_one)
        if not len(region):
            region.close()
            return response, 0
        response["records"] = region
        if read_committed:
            response["aborted_transactions"] = [
                {"producer_id": entry.producer_id, "first_offset": entry.first_offset}
                for entry in plog.aborted_transactions(offset, limit)]
        return response, len(region)
    except KafkaError as exc:
        response["error_code"] = exc.code
        return response, 0


def _partition_answer(index: int, error: ErrorCode = ErrorCode.NONE) -> FetchResponsePartitionData:
    """A Fetch partition's answer with nothing read yet."""
    return {"partition_index": index, "error_code": error, "high_watermark": -1, "last_stable_offset": -1,
            "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}


@handler(ApiKey.FETCH)
async def fetch(ctx: RequestContext, request: dict[str, Any]) -> FetchResponse:
    services = ctx.services
    if request["session_id"] != 0 or request["session_epoch"] > 0:
        # We never create fetch sessions, so an incremental fetch names a session we do not have.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND, "session_id": 0,
                "responses": []}
    follower = request["replica_id"] >= 0
    read_committed = request["isolation_level"] == READ_COMMITTED and not follower
    if follower:
        if not ctx.from_cluster_broker(request["replica_id"]):
            # Kafka's answer to a follower fetch it may not take: every partition refused, nothing read or counted
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": 0, "responses": [
                {"topic": topic["topic"], "partitions": [
                    _partition_answer(part["partition"], ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    for part in topic["partitions"]]} for topic in request["topics"]]}
        ctx.services.replicas.follower_fetched(request["replica_id"], [
            (topic["topic"], part["partition"], part["fetch_offset"], part["current_leader_epoch"])
            for topic in request["topics"] for part in topic["partitions"]])
    readable = {topic["topic"]: follower or ctx.allowed(Operation.READ, ResourceType.TOPIC, topic["topic"])
                for topic in request["topics"]}
    deadline = time.monotonic() + max(request["max_wait_ms"], 0) / 1000
    # the broker's own cap on a response, as Kafka's: fetch.max.bytes for consumers, replica.fetch.response.max.bytes
    # for followers
    cap = services.config["replica.fetch.response.max.bytes" if follower else "fetch.max.bytes"]
    if not follower and (most := services.client_quotas.max_in_window(CONSUMER_BYTE_RATE, *ctx.quota_client(),
                                                                      services.quota_window())) is not None:
        cap = min(cap, int(most))  # Kafka's: never more than its consumer_byte_rate quota lets through at once
    wanted = [(t["topic"], p["partition"]) for t in request["topics"] for p in t["partitions"]]
    replicas = ctx.services.replicas.replication if follower else None
    while True:
        # Fetch v3+ caps the whole response; the first partition with data always gets one whole batch
        # (KIP-74), so a batch bigger than the limits can never stall a consumer. The partitions after it
        # get only whole batches that fit in what is left: the one oversized batch is the response's, not
        # each partition's. Before v3 there is no response cap, and each partition gets its first batch.
        budget = min(request["max_bytes"], cap) if ctx.api_version >= 3 else None
        total = 0
        responses: list[FetchResponseFetchableTopicResponse] = []
        read: list[tuple[str, int]] = []  # (topic, error) of each partition read: Kafka counts only those it may read
        for topic in request["topics"]:
            partitions: list[FetchResponsePartitionData] = []
            for part in topic["partitions"]:
                max_bytes = part["partition_max_bytes"]
                if budget is not None:
                    left = budget - total
                    max_bytes = min(max_bytes, left) if total else max(min(max_bytes, left), 1)
                if replicas is not None and replicas.leader_throttles(topic["topic"], part["partition"],
                                                                      request["replica_id"]):
                    max_bytes = 0  # a throttled replica's fetch is answered, only with no records (Kafka's)
                if not readable[topic["topic"]]:
                    entry, size = _partition_answer(part["partition"], ErrorCode.TOPIC_AUTHORIZATION_FAILED), 0
                else:
                    entry, size = _fetch_partition(ctx, topic["topic"], part, max_bytes, follower, read_committed,
                                                   min_one=budget is None or not total)
                    read.append((topic["topic"], entry["error_code"]))
                total += size
                partitions.append(entry)
            responses.append({"topic": topic["topic"], "partitions": partitions})
        remaining = deadline - time.monotonic()
        if total >= request["min_bytes"] or remaining <= 0:
            _count_bytes_out(services, responses, follower, total)
            if replicas is not None and total:
                _count_throttled_bytes(replicas, responses)
            for name, error in read:
                services.metrics.fetch_answered(name, error)
            return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}
        await ctx.services.replicas.wait_for_appends(wanted, remaining)


def _count_bytes_out(services: Services, responses: Sequence[Mapping[str, Any]], follower: bool, total: int) -> None:
    """Kafka's BytesOut per topic for consumers; followers' bytes are ReplicationBytesOut, for all topics."""
    if not total:
        return
    if follower:
        services.metrics.replication_bytes_out += total
        services.metrics.reassignment_bytes_out += sum(
            len(part["records"]) for topic in responses for part in topic["partitions"]
            if part["records"] and services.cluster.adding_replicas(topic["topic"], part["partition_index"]) is not None)
        return
    for topic in responses:
        size = sum(len(part["records"]) for part in topic["partitions"])
        if size:
            services.metrics.fetched(topic["topic"], size)


def _count_throttled_bytes(replicas: ReplicaManager, responses: Sequence[Mapping[str, Any]]) -> None:
    throttled = sum(len(part["records"]) for topic in responses for part in topic["partitions"]
                    if replicas.leader_throttled(topic["topic"], part["partition_index"]))
    if throttled:
        replicas.count_leader_bytes(throttled)


def _answer_partitions(ctx: RequestContext, operation: Operation, topics: list[dict[str, Any]], topic_key: str,
                       index_key: str, blank: Callable[[int, ErrorCode], _Partition],
                       fill: Callable[[str, dict[str, Any], _Partition], None],
                       topic_answer: Callable[[str, list[_Partition]], _Topic]) -> list[_Topic]:
    """The topics/partitions of a response: each requested partition gets ``blank(index, NONE)`` that
    ``fill(topic, requested_partition, entry)`` completes; for a KafkaError it raises the partition is answered
    ``blank(index, its code)``, and the other partitions as usual. The partitions of a topic the principal may
    not do ``operation`` on get TOPIC_AUTHORIZATION_FAILED. ``topic_answer(name, partitions)``: a topic's entry."""
    answered = []
    for topic in topics:
        partitions = []
        name = topic[topic_key]
        permitted = ctx.allowed(operation, ResourceType.TOPIC, name)
        for part in topic["partitions"]:
            try:
                if not permitted:
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                entry = blank(part[index_key], ErrorCode.NONE)
                fill(name, part, entry)
            except KafkaError as exc:
                # every fill raises before it changes the entry, so nothing of a half-filled one is lost
                entry = blank(part[index_key], exc.code)
            partitions.append(entry)
        answered.append(topic_answer(name, partitions))
    return answered


def _first_of_each(partitions: list[_Requested]) -> list[_Requested]:
    unique: dict[int, _Requested] = {}
    for part in partitions:
        unique.setdefault(part["partition_index"], part)
    return list(unique.values())


@handler(ApiKey.LIST_OFFSETS)
async def list_offsets(ctx: RequestContext, request: dict[str, Any]) -> ListOffsetsResponse:
    # A partition asked for more than once gets one answer, INVALID_REQUEST, as Kafka gives.
    asked = Counter((topic["name"], part["partition_index"]) for topic in request["topics"]
                    for part in topic["partitions"])
    topics = [{**topic, "partitions": _first_of_each(topic["partitions"])} for topic in request["topics"]]

    def fill(topic: str, part: dict[str, Any], entry: ListOffsetsResponsePartitionResponse) -> None:
        if asked[(topic, part["partition_index"])] > 1:
            raise KafkaError(ErrorCode.INVALID_REQUEST)
        plog, epoch = ctx.services.replicas.leader_log(topic, part["partition_index"], part["current_leader_epoch"])
        timestamp = part["timestamp"]
        found_ts = -1
        last_fetchable = plog.last_stable_offset if request["isolation_level"] == READ_COMMITTED else plog.high_watermark
        uncertain = False  # whether the answer rests on the high watermark being the ISR's
        if timestamp == LATEST:
            offset, uncertain = last_fetchable, True
        elif timestamp == EARLIEST:
            offset = plog.log_start_offset
        else:
            found = plog.max_timestamp() if timestamp == MAX_TIMESTAMP else plog.offset_for_timestamp(timestamp)
            # as Kafka: a record not yet readable (above the high watermark, or the last stable offset for
            # read_committed) is not an answer to a timestamp lookup
            uncertain = found is None or found[0] >= last_fetchable
            offset, found_ts = (-1, -1) if found is None or uncertain else found
        if uncertain and not ctx.services.replicas.high_watermark_known(topic, part["partition_index"]):
            # A leader just elected may not know yet how far its predecessor acknowledged: rather than an offset
            # that hides acknowledged records, OFFSET_NOT_AVAILABLE (retriable) until its ISR's fetches tell it.
            raise KafkaError(ErrorCode.OFFSET_NOT_AVAILABLE, f"{topic}-{part['partition_index']}: the high "
                             "watermark is behind the start of this leader epoch")
        if ctx.api_version == 0:
            # Burrow 1.2.1 reads offsets[0] of a v0 answer: never send an empty array for a hit.
            entry["old_style_offsets"] = [offset] if offset >= 0 else []
        entry["offset"], entry["timestamp"], entry["leader_epoch"] = offset, found_ts, epoch

    def blank(index: int, error: ErrorCode) -> ListOffsetsResponsePartitionResponse:
        return {"partition_index": index, "error_code": error, "old_style_offsets": [], "timestamp": -1,
                "offset": -1, "leader_epoch": -1}

    def topic_answer(name: str, partitions: list[ListOffsetsResponsePartitionResponse]
                     ) -> ListOffsetsResponseTopicResponse:
        return {"name": name, "partitions": partitions}

    return {"throttle_time_ms": 0, "topics": _answer_partitions(ctx, Operation.DESCRIBE, topics, "name",
                                                                "partition_index", blank, fill, topic_answer)}


@handler(ApiKey.OFFSET_FOR_LEADER_EPOCH)
async def offset_for_leader_epoch(ctx: RequestContext, request: dict[str, Any]) -> OffsetForLeaderEpochResponse:
    def fill(topic: str, part: dict[str, Any], entry: OffsetForLeaderEpochResponseEpochEndOffset) -> None:
        plog, _epoch = ctx.services.replicas.leader_log(topic, part["partition"], part["current_leader_epoch"])
        entry["leader_epoch"], entry["end_offset"] = plog.end_offset_for_epoch(part["leader_epoch"])

    def blank(index: int, error: ErrorCode) -> OffsetForLeaderEpochResponseEpochEndOffset:
        return {"partition": index, "error_code": error, "leader_epoch": -1, "end_offset": -1}

    def topic_answer(name: str, partitions: list[OffsetForLeaderEpochResponseEpochEndOffset]
                     ) -> OffsetForLeaderEpochResponseOffsetForLeaderTopicResult:
        return {"topic": name, "partitions": partitions}

    return {"throttle_time_ms": 0,
            "topics": _answer_partitions(ctx, Operation.DESCRIBE, request["topics"], "topic", "partition", blank,
                                         fill, topic_answer)}


@handler(ApiKey.DELETE_RECORDS)
async def delete_records(ctx: RequestContext, request: dict[str, Any]) -> DeleteRecordsResponse:
    # (partition, entry, its log's pending checkpoint)
    moved: list[tuple[str, DeleteRecordsResponsePartitionResult, Any]] = []

    def fill(topic: str, part: dict[str, Any], entry: DeleteRecordsResponsePartitionResult) -> None:
        plog, _epoch = ctx.services.replicas.leader_log(topic, part["partition_index"])
        offset = plog.high_watermark if part["offset"] == -1 else part["offset"]
        if offset < 0 or offset > plog.high_watermark:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
        entry["low_watermark"] = plog.delete_records_before(offset)
        moved.append((f"{topic}-{part['partition_index']}", entry, plog.pending_durability()))

    def blank(index: int, error: ErrorCode) -> DeleteRecordsResponsePartitionResult:
        return {"partition_index": index, "error_code": error, "low_watermark": -1}

    def topic_answer(name: str, partitions: list[DeleteRecordsResponsePartitionResult]
                     ) -> DeleteRecordsResponseTopicResult:
        return {"name": name, "partitions": partitions}

    topics = _answer_partitions(ctx, Operation.DELETE, request["topics"], "name", "partition_index", blank, fill,
                                topic_answer)
    # the new log starts are on disk (written off the event loop) before the answer says so
    for name, entry, pending in moved:
        try:
            await wait_durable(pending, name)
        except KafkaError as exc:
            entry["error_code"], entry["low_watermark"] = exc.code, -1
    return {"throttle_time_ms": 0, "topics": topics}
