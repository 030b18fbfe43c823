"""TypedDicts of the offsets responses,
generated from ``broker.protocol.messages`` by ``python -m broker.protocol.typed_gen``: do not edit, regenerate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from broker.protocol.types import Encoded


class OffsetCommitResponsePartition(TypedDict, total=False):
    partition_index: int
    error_code: int


class OffsetCommitResponseTopic(TypedDict, total=False):
    name: str
    partitions: Sequence[OffsetCommitResponsePartition | Encoded]


class OffsetCommitResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: Sequence[OffsetCommitResponseTopic | Encoded]


class OffsetDeleteResponsePartition(TypedDict, total=False):
    partition_index: int
    error_code: int


class OffsetDeleteResponseTopic(TypedDict, total=False):
    name: str
    partitions: Sequence[OffsetDeleteResponsePartition | Encoded]


class OffsetDeleteResponse(TypedDict, total=False):
    error_code: int
    throttle_time_ms: int
    topics: Sequence[OffsetDeleteResponseTopic | Encoded]


class OffsetFetchResponsePartition(TypedDict, total=False):
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    metadata: str | None
    error_code: int


class OffsetFetchResponseTopic(TypedDict, total=False):
    name: str
    partitions: Sequence[OffsetFetchResponsePartition | Encoded]


class OffsetFetchResponsePartitions(TypedDict, total=False):
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    metadata: str | None
    error_code: int


class OffsetFetchResponseTopics(TypedDict, total=False):
    name: str
    partitions: Sequence[OffsetFetchResponsePartitions | Encoded]


class OffsetFetchResponseGroup(TypedDict, total=False):
    group_id: str
    topics: Sequence[OffsetFetchResponseTopics | Encoded]
    error_code: int


class OffsetFetchResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: Sequence[OffsetFetchResponseTopic | Encoded]
    error_code: int
    groups: Sequence[OffsetFetchResponseGroup | Encoded]
