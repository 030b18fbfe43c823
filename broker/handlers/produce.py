"""Produce and InitProducerId.

A Produce v3+ partition carries exactly one v2 record batch. The batch stays opaque: the log checks its
header and CRC, patches the base offset and appends the bytes (DESIGN principle 2). Transactions are not
supported: InitProducerId with a transactional id is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
which clients report as fatal instead of retrying forever.
"""

from __future__ import annotations

import struct
from typing import Any

import structlog

from broker.errors import ErrorCode, KafkaError
from broker.handlers.registry import RequestContext, handler
from broker.protocol.api import ApiKey
from broker.topics import INTERNAL_TOPICS

log = structlog.get_logger("broker.produce")

_BATCH_LENGTH = struct.Struct(">i")
_ATTRIBUTES_AT = 21
_ZSTD = 4
_MAX_EPOCH = 32767


def _partition_error(index: int, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"index": index, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
            "log_start_offset": -1, "record_errors": [], "error_message": message}


async def _produce_partition(ctx: RequestContext, topic: str, index: int, records: bytes | None,
                             acks: int) -> dict[str, Any]:
    broker = ctx.broker
    if topic in INTERNAL_TOPICS:
        return _partition_error(index, ErrorCode.INVALID_TOPIC_EXCEPTION, f"cannot append to internal topic {topic}")
    if records is None or len(records) < 61:
        return _partition_error(index, ErrorCode.CORRUPT_MESSAGE, "no record batch")
    (batch_length,) = _BATCH_LENGTH.unpack_from(records, 8)
    if batch_length + 12 != len(records):
        return _partition_error(index, ErrorCode.INVALID_RECORD,
                                "a produce request must carry exactly one record batch per partition")
    if records[_ATTRIBUTES_AT + 1] & 0x07 == _ZSTD and ctx.api_version < 7:
        return _partition_error(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs Produce v7 or later")
    try:
        leader, epoch, _replicas, isr = broker.partition_leader(topic, index)
        if leader != broker.node_id:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        plog = broker.partition_log(topic, index)
        if acks == -1 and len(isr) < plog.config.min_insync_replicas:
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                             f"{len(isr)} in-sync replicas, min.insync.replicas is {plog.config.min_insync_replicas}")
        result = await broker.append(topic, index, records, leader_epoch=epoch)
    except KafkaError as exc:
        return _partition_error(index, exc.code, exc.message)
    return {"index": index, "error_code": 0, "base_offset": result.base_offset,
            "log_append_time_ms": result.log_append_time_ms, "log_start_offset": result.log_start_offset,
            "record_errors": [], "error_message": None}


@handler(ApiKey.PRODUCE)
async def produce(ctx: RequestContext, request: dict[str, Any]) -> dict[str, Any] | None:
    acks = request["acks"]
    responses = []
    for topic in request["topic_data"]:
        name = topic["name"]
        partitions = []
        for part in topic["partition_data"]:
            if acks not in (0, 1, -1):
                partitions.append(_partition_error(part["index"], ErrorCode.INVALID_REQUIRED_ACKS))
                continue
            partitions.append(await _produce_partition(ctx, name, part["index"], part["records"], acks))
        responses.append({"name": name, "partition_responses": partitions})
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time_ms": 0}


@handler(ApiKey.INIT_PRODUCER_ID)
async def init_producer_id(ctx: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    if request["transactional_id"] is not None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    allocator = ctx.broker.producer_ids
    producer_id, epoch = request["producer_id"], request["producer_epoch"]
    if producer_id >= 0 and 0 <= epoch < _MAX_EPOCH:
        # KIP-360: an idempotent producer bumps its epoch to reset sequences after an error.
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": producer_id, "producer_epoch": epoch + 1}
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": allocator.allocate(), "producer_epoch": 0}
