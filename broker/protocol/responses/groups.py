"""TypedDicts of the groups responses,
generated from ``broker.protocol.messages`` by ``python -m broker.protocol.typed_gen``: do not edit, regenerate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from broker.protocol.types import Buffer, Encoded


class ConsumerGroupDescribeResponseTopicPartitions(TypedDict, total=False):
    topic_id: bytes
    topic_name: str
    partitions: Sequence[int]


class ConsumerGroupDescribeResponseAssignment(TypedDict, total=False):
    topic_partitions: Sequence[ConsumerGroupDescribeResponseTopicPartitions | Encoded]


class ConsumerGroupDescribeResponseMember(TypedDict, total=False):
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: Sequence[str]
    subscribed_topic_regex: str | None
    assignment: ConsumerGroupDescribeResponseAssignment
    target_assignment: ConsumerGroupDescribeResponseAssignment


class ConsumerGroupDescribeResponseDescribedGroup(TypedDict, total=False):
    error_code: int
    error_message: str | None
    group_id: str
    group_state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: Sequence[ConsumerGroupDescribeResponseMember | Encoded]
    authorized_operations: int


class ConsumerGroupDescribeResponse(TypedDict, total=False):
    throttle_time_ms: int
    groups: Sequence[ConsumerGroupDescribeResponseDescribedGroup | Encoded]


class ConsumerGroupHeartbeatResponseTopicPartitions(TypedDict, total=False):
    topic_id: bytes
    partitions: Sequence[int]


class ConsumerGroupHeartbeatResponseAssignment(TypedDict, total=False):
    topic_partitions: Sequence[ConsumerGroupHeartbeatResponseTopicPartitions | Encoded]


class ConsumerGroupHeartbeatResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: ConsumerGroupHeartbeatResponseAssignment | None


class DeleteGroupsResponseDeletableGroupResult(TypedDict, total=False):
    group_id: str
    error_code: int


class DeleteGroupsResponse(TypedDict, total=False):
    throttle_time_ms: int
    results: Sequence[DeleteGroupsResponseDeletableGroupResult | Encoded]


class DescribeGroupsResponseDescribedGroupMember(TypedDict, total=False):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: Buffer
    member_assignment: Buffer


class DescribeGroupsResponseDescribedGroup(TypedDict, total=False):
    error_code: int
    group_id: str
    group_state: str
    protocol_type: str
    protocol_data: str
    members: Sequence[DescribeGroupsResponseDescribedGroupMember | Encoded]
    authorized_operations: int


class DescribeGroupsResponse(TypedDict, total=False):
    throttle_time_ms: int
    groups: Sequence[DescribeGroupsResponseDescribedGroup | Encoded]


class FindCoordinatorResponseCoordinator(TypedDict, total=False):
    key: str
    node_id: int
    host: str
    port: int
    error_code: int
    error_message: str | None


class FindCoordinatorResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    node_id: int
    host: str
    port: int
    coordinators: Sequence[FindCoordinatorResponseCoordinator | Encoded]


class HeartbeatResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int


class JoinGroupResponseMember(TypedDict, total=False):
    member_id: str
    group_instance_id: str | None
    metadata: Buffer


class JoinGroupResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    member_id: str
    members: Sequence[JoinGroupResponseMember | Encoded]


class LeaveGroupResponseMemberResponse(TypedDict, total=False):
    member_id: str
    group_instance_id: str | None
    error_code: int


class LeaveGroupResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    members: Sequence[LeaveGroupResponseMemberResponse | Encoded]


class ListGroupsResponseListedGroup(TypedDict, total=False):
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str


class ListGroupsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    groups: Sequence[ListGroupsResponseListedGroup | Encoded]


class SyncGroupResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    protocol_type: str | None
    protocol_name: str | None
    assignment: Buffer
