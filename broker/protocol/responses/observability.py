"""TypedDicts of the observability responses,
generated from ``broker.protocol.messages`` by ``python -m broker.protocol.typed_gen``: do not edit, regenerate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from broker.protocol.types import Encoded


class AddRaftVoterResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None


class DescribeLogDirsResponsePartition(TypedDict, total=False):
    partition_index: int
    partition_size: int
    offset_lag: int
    is_future_key: bool


class DescribeLogDirsResponseTopic(TypedDict, total=False):
    name: str
    partitions: Sequence[DescribeLogDirsResponsePartition | Encoded]


class DescribeLogDirsResponseResult(TypedDict, total=False):
    error_code: int
    log_dir: str
    topics: Sequence[DescribeLogDirsResponseTopic | Encoded]
    total_bytes: int
    usable_bytes: int
    is_cordoned: bool


class DescribeLogDirsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    results: Sequence[DescribeLogDirsResponseResult | Encoded]


class DescribeProducersResponseProducerState(TypedDict, total=False):
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class DescribeProducersResponsePartitionResponse(TypedDict, total=False):
    partition_index: int
    error_code: int
    error_message: str | None
    active_producers: Sequence[DescribeProducersResponseProducerState | Encoded]


class DescribeProducersResponseTopicResponse(TypedDict, total=False):
    name: str
    partitions: Sequence[DescribeProducersResponsePartitionResponse | Encoded]


class DescribeProducersResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: Sequence[DescribeProducersResponseTopicResponse | Encoded]


class DescribeQuorumResponseReplicaState(TypedDict, total=False):
    replica_id: int
    replica_directory_id: bytes
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


class DescribeQuorumResponsePartitionData(TypedDict, total=False):
    partition_index: int
    error_code: int
    error_message: str | None
    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: Sequence[DescribeQuorumResponseReplicaState | Encoded]
    observers: Sequence[DescribeQuorumResponseReplicaState | Encoded]


class DescribeQuorumResponseTopicData(TypedDict, total=False):
    topic_name: str
    partitions: Sequence[DescribeQuorumResponsePartitionData | Encoded]


class DescribeQuorumResponseListener(TypedDict, total=False):
    name: str
    host: str
    port: int


class DescribeQuorumResponseNode(TypedDict, total=False):
    node_id: int
    listeners: Sequence[DescribeQuorumResponseListener | Encoded]


class DescribeQuorumResponse(TypedDict, total=False):
    error_code: int
    error_message: str | None
    topics: Sequence[DescribeQuorumResponseTopicData | Encoded]
    nodes: Sequence[DescribeQuorumResponseNode | Encoded]


class DescribeTopicPartitionsResponsePartition(TypedDict, total=False):
    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: Sequence[int]
    isr_nodes: Sequence[int]
    eligible_leader_replicas: Sequence[int] | None
    last_known_elr: Sequence[int] | None
    offline_replicas: Sequence[int]


class DescribeTopicPartitionsResponseTopic(TypedDict, total=False):
    error_code: int
    name: str | None
    topic_id: bytes
    is_internal: bool
    partitions: Sequence[DescribeTopicPartitionsResponsePartition | Encoded]
    topic_authorized_operations: int


class DescribeTopicPartitionsResponseCursor(TypedDict, total=False):
    topic_name: str
    partition_index: int


class DescribeTopicPartitionsResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: Sequence[DescribeTopicPartitionsResponseTopic | Encoded]
    next_cursor: DescribeTopicPartitionsResponseCursor | None


class RemoveRaftVoterResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None


class UnregisterBrokerResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
