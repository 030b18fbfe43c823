"""Produce and InitProducerId.

A Produce v3+ partition carries exactly one v2 record batch. The batch stays opaque: the log checks its
header and CRC, patches the base offset and appends the bytes (DESIGN principle 2). With acks=all the
answer waits until the in-sync replicas hold the batch (``broker.cluster.replication``). A transactional
batch is accepted only for a partition its producer added to its open transaction, with the current
epoch (Kafka's partition verification); InitProducerId with a transactional id goes to the transaction
coordinator (:mod:`broker.txn.coordinator`).
"""

from __future__ import annotations

import struct
from typing import Any

import structlog

from broker.errors import ErrorCode, KafkaError
from broker.handlers.registry import RequestContext, handler
from broker.handlers.transactions import fenced_error
from broker.protocol.api import ApiKey
from broker.protocol.records import BatchHeader
from broker.protocol.responses import (
    InitProducerIdResponse,
    ProduceResponse,
    ProduceResponsePartitionProduceResponse,
    ProduceResponseTopicProduceResponse,
)
from broker.protocol.types import fits_a_string
from broker.security.acl import CLUSTER_NAME, Operation, ResourceType
from broker.topics import INTERNAL_TOPICS

log = structlog.get_logger("broker.produce")

_BATCH_LENGTH = struct.Struct(">i")
_ATTRIBUTES_AT = 21
_ZSTD = 4
_TRANSACTIONAL = 0x10


def _partition_error(index: int, code: ErrorCode, message: str | None = None, log_start_offset: int = -1,
                     record_errors: list[tuple[int, str]] | None = None) -> ProduceResponsePartitionProduceResponse:
    return {"index": index, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
            "log_start_offset": log_start_offset, "error_message": message,
            "record_errors": [{"batch_index": i, "batch_index_error_message": text} for i, text in record_errors or []]}


async def _produce_partition(ctx: RequestContext, topic: str, index: int, records: bytes | None,
                             acks: int) -> tuple[ProduceResponsePartitionProduceResponse, int | None]:
    """The partition's answer and, after a successful append, the offset following its batch."""
    services = ctx.services
    if topic in INTERNAL_TOPICS:
        return _partition_error(index, ErrorCode.INVALID_TOPIC_EXCEPTION,
                                f"cannot append to internal topic {topic}"), None
    if records is None or len(records) < 61:
        return _partition_error(index, ErrorCode.CORRUPT_MESSAGE, "no record batch"), None
    (batch_length,) = _BATCH_LENGTH.unpack_from(records, 8)
    if batch_length + 12 != len(records):
        return _partition_error(index, ErrorCode.INVALID_RECORD,
                                "a produce request must carry exactly one record batch per partition"), None
    if records[_ATTRIBUTES_AT + 1] & 0x07 == _ZSTD and ctx.api_version < 7:
        return _partition_error(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                "zstd needs Produce v7 or later"), None
    plog = None
    try:
        epoch = ctx.services.cluster.leader_epoch(topic, index)
        isr = ctx.services.cluster.partition_leader(topic, index)[3]
        plog = ctx.services.replicas.partition_log(topic, index)
        if records[_ATTRIBUTES_AT + 1] & _TRANSACTIONAL:
            header = BatchHeader.parse(records)
            refused = services.transactions.check_transactional_write(header.producer_id, header.producer_epoch,
                                                                      topic, index)
            if refused is not None:
                raise refused
        if acks == -1 and len(isr) < plog.config.min_insync_replicas:
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                             f"{len(isr)} in-sync replicas, min.insync.replicas is {plog.config.min_insync_replicas}")
        result = await ctx.services.replicas.append(topic, index, records, epoch)
    except KafkaError as exc:
        # Kafka tells the log start offset with a batch refused for some of its records (its
        # RecordValidationException), and -1 with every other error.
        log_start = plog.log_start_offset if plog is not None and exc.record_errors else -1
        return _partition_error(index, exc.code, exc.message, log_start, exc.record_errors), None
    return {"index": index, "error_code": 0, "base_offset": result.base_offset,
            "log_append_time_ms": result.log_append_time_ms, "log_start_offset": result.log_start_offset,
            "record_errors": [], "error_message": None}, result.last_offset + 1


async def _await_in_sync_replicas(ctx: RequestContext, appended: list[tuple[str, ProduceResponsePartitionProduceResponse, int]],
                                  timeout_s: float) -> None:
    """acks=all: answer each appended partition once the ISR holds its batch, as Kafka's delayed produce does;
    all partitions of the request wait together."""
    errors = await ctx.services.replicas.confirm_in_sync(
        [(topic, entry["index"], next_offset) for topic, entry, next_offset in appended], timeout_s)
    for (_topic, entry, _next_offset), error in zip(appended, errors, strict=True):
        if error != ErrorCode.NONE:
            entry["error_code"] = error


@handler(ApiKey.PRODUCE)
async def produce(ctx: RequestContext, request: dict[str, Any]) -> ProduceResponse | None:
    acks = request["acks"]
    responses: list[ProduceResponseTopicProduceResponse] = []
    appended: list[tuple[str, ProduceResponsePartitionProduceResponse, int]] = []
    transactional_id = request["transactional_id"]
    # a transactional producer needs WRITE on its transactional id, every producer WRITE on each topic
    refused_all = transactional_id is not None and not ctx.allowed(
        Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)
    for topic in request["topic_data"]:
        name = topic["name"]
        refused = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if refused_all
                   else None if ctx.allowed(Operation.WRITE, ResourceType.TOPIC, name)
                   else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        partitions: list[ProduceResponsePartitionProduceResponse] = []
        for part in topic["partition_data"]:
            if acks not in (0, 1, -1):
                partitions.append(_partition_error(part["index"], ErrorCode.INVALID_REQUIRED_ACKS))
                continue
            if refused is not None:
                partitions.append(_partition_error(part["index"], refused))
                continue
            entry, next_offset = await _produce_partition(ctx, name, part["index"], part["records"], acks)
            ctx.services.metrics.produce_answered(name, entry["error_code"])
            partitions.append(entry)
            if next_offset is not None:
                appended.append((name, entry, next_offset))
        responses.append({"name": name, "partition_responses": partitions})
    if acks == 0:
        return None
    if acks == -1 and appended:
        await _await_in_sync_replicas(ctx, appended, request["timeout_ms"] / 1000)
    return {"responses": responses, "throttle_time_ms": 0}


@handler(ApiKey.INIT_PRODUCER_ID)
async def init_producer_id(ctx: RequestContext, request: dict[str, Any]) -> InitProducerIdResponse:
    refused = None
    if request["transactional_id"] is not None:
        if not ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request["transactional_id"]):
            refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not (ctx.allowed(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)
              or ctx.allowed_on_any(Operation.WRITE, ResourceType.TOPIC)):
        # an idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679)
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if (request["producer_id"] == -1) != (request["producer_epoch"] == -1):
        # a producer id without its epoch, or the reverse: Kafka refuses it before asking any coordinator
        refused = ErrorCode.INVALID_REQUEST
    if refused is not None:
        return {"throttle_time_ms": 0, "error_code": refused, "producer_id": -1, "producer_epoch": -1}
    if request["transactional_id"] is not None:
        if not fits_a_string(request["transactional_id"]):
            # invalid UTF-8 made it longer than the transaction log's key can hold: Kafka fails writing that
            # key and answers UNKNOWN_SERVER_ERROR
            return {"throttle_time_ms": 0, "error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "producer_id": -1,
                    "producer_epoch": -1}
        error, producer_id, epoch = await ctx.services.transactions.init_producer_id(
            request["transactional_id"], request["transaction_timeout_ms"], request["producer_id"],
            request["producer_epoch"], fenced_error(ctx))
        return {"throttle_time_ms": 0, "error_code": error, "producer_id": producer_id, "producer_epoch": epoch}
    # An idempotent producer gets a new producer id every time, as Kafka's coordinator answers it: one that
    # names an existing id and epoch (KIP-360, to reset its sequences after an error) is not given that id's
    # next epoch, which would let any client fence another's producer by naming its id.
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": await ctx.services.producer_ids.allocate(),
            "producer_epoch": 0}
