"""TypedDicts of the share_groups responses,
generated from ``broker.protocol.messages`` by ``python -m broker.protocol.typed_gen``: do not edit, regenerate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from broker.protocol.types import Encoded


class DescribeShareGroupOffsetsResponsePartition(TypedDict, total=False):
    partition_index: int
    start_offset: int
    leader_epoch: int
    lag: int
    error_code: int
    error_message: str | None


class DescribeShareGroupOffsetsResponseTopic(TypedDict, total=False):
    topic_name: str
    topic_id: bytes
    partitions: Sequence[DescribeShareGroupOffsetsResponsePartition | Encoded]


class DescribeShareGroupOffsetsResponseGroup(TypedDict, total=False):
    group_id: str
    topics: Sequence[DescribeShareGroupOffsetsResponseTopic | Encoded]
    error_code: int
    error_message: str | None


class DescribeShareGroupOffsetsResponse(TypedDict, total=False):
    throttle_time_ms: int
    groups: Sequence[DescribeShareGroupOffsetsResponseGroup | Encoded]


class ShareGroupDescribeResponseTopicPartitions(TypedDict, total=False):
    topic_id: bytes
    topic_name: str
    partitions: Sequence[int]


class ShareGroupDescribeResponseAssignment(TypedDict, total=False):
    topic_partitions: Sequence[ShareGroupDescribeResponseTopicPartitions | Encoded]


class ShareGroupDescribeResponseMember(TypedDict, total=False):
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: Sequence[str]
    assignment: ShareGroupDescribeResponseAssignment


class ShareGroupDescribeResponseGroup(TypedDict, total=False):
    error_code: int
    error_message: str | None
    group_id: str
    group_state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: Sequence[ShareGroupDescribeResponseMember | Encoded]
    authorized_operations: int


class ShareGroupDescribeResponse(TypedDict, total=False):
    throttle_time_ms: int
    groups: Sequence[ShareGroupDescribeResponseGroup | Encoded]
