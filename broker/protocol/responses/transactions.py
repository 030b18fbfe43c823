"""TypedDicts of the transactions responses,
generated from ``broker.protocol.messages`` by ``python -m broker.protocol.typed_gen``: do not edit, regenerate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from broker.protocol.types import Encoded


class AddOffsetsToTxnResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int


class AddPartitionsToTxnResponsePartitionResult(TypedDict, total=False):
    partition_index: int
    partition_error_code: int


class AddPartitionsToTxnResponseTopicResult(TypedDict, total=False):
    name: str
    results_by_partition: Sequence[AddPartitionsToTxnResponsePartitionResult | Encoded]


class AddPartitionsToTxnResponseResult(TypedDict, total=False):
    transactional_id: str
    topic_results: Sequence[AddPartitionsToTxnResponseTopicResult | Encoded]


class AddPartitionsToTxnResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    results_by_transaction: Sequence[AddPartitionsToTxnResponseResult | Encoded]
    results_by_topic_v3_and_below: Sequence[AddPartitionsToTxnResponseTopicResult | Encoded]


class DescribeTransactionsResponseTopicData(TypedDict, total=False):
    topic: str
    partitions: Sequence[int]


class DescribeTransactionsResponseTransactionState(TypedDict, total=False):
    error_code: int
    transactional_id: str
    transaction_state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    producer_id: int
    producer_epoch: int
    topics: Sequence[DescribeTransactionsResponseTopicData | Encoded]


class DescribeTransactionsResponse(TypedDict, total=False):
    throttle_time_ms: int
    transaction_states: Sequence[DescribeTransactionsResponseTransactionState | Encoded]


class EndTxnResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int


class ListTransactionsResponseTransactionState(TypedDict, total=False):
    transactional_id: str
    producer_id: int
    transaction_state: str


class ListTransactionsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    unknown_state_filters: Sequence[str]
    transaction_states: Sequence[ListTransactionsResponseTransactionState | Encoded]


class TxnOffsetCommitResponsePartition(TypedDict, total=False):
    partition_index: int
    error_code: int


class TxnOffsetCommitResponseTopic(TypedDict, total=False):
    name: str
    partitions: Sequence[TxnOffsetCommitResponsePartition | Encoded]


class TxnOffsetCommitResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: Sequence[TxnOffsetCommitResponseTopic | Encoded]


class WriteTxnMarkersResponseWritableTxnMarkerPartitionResult(TypedDict, total=False):
    partition_index: int
    error_code: int


class WriteTxnMarkersResponseWritableTxnMarkerTopicResult(TypedDict, total=False):
    name: str
    partitions: Sequence[WriteTxnMarkersResponseWritableTxnMarkerPartitionResult | Encoded]


class WriteTxnMarkersResponseWritableTxnMarkerResult(TypedDict, total=False):
    producer_id: int
    topics: Sequence[WriteTxnMarkersResponseWritableTxnMarkerTopicResult | Encoded]


class WriteTxnMarkersResponse(TypedDict, total=False):
    markers: Sequence[WriteTxnMarkersResponseWritableTxnMarkerResult | Encoded]
