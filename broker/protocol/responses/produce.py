"""TypedDicts of the produce responses,
generated from ``broker.protocol.messages`` by ``python -m broker.protocol.typed_gen``: do not edit, regenerate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from broker.protocol.types import Encoded


class InitProducerIdResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    producer_id: int
    producer_epoch: int


class ProduceResponseBatchIndexAndErrorMessage(TypedDict, total=False):
    batch_index: int
    batch_index_error_message: str | None


class ProduceResponsePartitionProduceResponse(TypedDict, total=False):
    index: int
    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    record_errors: Sequence[ProduceResponseBatchIndexAndErrorMessage | Encoded]
    error_message: str | None


class ProduceResponseTopicProduceResponse(TypedDict, total=False):
    name: str
    partition_responses: Sequence[ProduceResponsePartitionProduceResponse | Encoded]


class ProduceResponse(TypedDict, total=False):
    responses: Sequence[ProduceResponseTopicProduceResponse | Encoded]
    throttle_time_ms: int
