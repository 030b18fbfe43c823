"""Share groups (KIP-932) as an administrator reads them: DescribeShareGroupOffsets and ShareGroupDescribe,
what Kafka's ``kafka-share-groups --describe --offsets`` and ``--members`` send to a group's coordinator.

Transcribed from Apache Kafka 4.4's JSON message specs (clients/src/main/resources/common/message/);
DescribeShareGroupOffsets version 1 adds each share-partition's lag; ShareGroupDescribe starts at version 1
(version 0 was Kafka 4.0's early access, removed in 4.1). Field names are the specs' names in snake_case."""

from broker.protocol.messages.groups import _DESCRIBED_ASSIGNMENT
from broker.protocol.schema import Array, Field, Message, Struct

SHARE_GROUP_DESCRIBE_REQUEST = Message(
    "ShareGroupDescribeRequest",
    "request",
    api_key=77,
    versions="1",
    flexible="1+",
    fields=(
        Field("group_ids", Array("string"), "1+"),
        Field("include_authorized_operations", "bool", "1+"),
    ),
)

SHARE_GROUP_DESCRIBE_RESPONSE = Message(
    "ShareGroupDescribeResponse",
    "response",
    api_key=77,
    versions="1",
    flexible="1+",
    fields=(
        Field("throttle_time_ms", "int32", "1+"),
        Field("groups", versions="1+", type=Array(Struct("ShareGroupDescribeResponseGroup", (
            Field("error_code", "int16", "1+"),
            Field("error_message", "string", "1+", nullable="1+", default=None),
            Field("group_id", "string", "1+"),
            Field("group_state", "string", "1+"),
            Field("group_epoch", "int32", "1+"),
            Field("assignment_epoch", "int32", "1+"),
            Field("assignor_name", "string", "1+"),
            Field("members", versions="1+", type=Array(Struct("ShareGroupDescribeResponseMember", (
                Field("member_id", "string", "1+"),
                Field("rack_id", "string", "1+", nullable="1+", default=None),
                Field("member_epoch", "int32", "1+"),
                Field("client_id", "string", "1+"),
                Field("client_host", "string", "1+"),
                Field("subscribed_topic_names", Array("string"), "1+"),
                Field("assignment", _DESCRIBED_ASSIGNMENT, "1+"),
            )))),
            Field("authorized_operations", "int32", "1+", default=-(2**31)),
        )))),
    ),
)

DESCRIBE_SHARE_GROUP_OFFSETS_REQUEST = Message(
    "DescribeShareGroupOffsetsRequest",
    "request",
    api_key=90,
    versions="0-1",
    flexible="0+",
    fields=(
        Field("groups", versions="0+", type=Array(Struct("DescribeShareGroupOffsetsRequestGroup", (
            Field("group_id", "string", "0+"),
            # null asks for every topic-partition the group has state for
            Field("topics", versions="0+", nullable="0+", type=Array(Struct("DescribeShareGroupOffsetsRequestTopic", (
                Field("topic_name", "string", "0+"),
                Field("partitions", Array("int32"), "0+"),
            )))),
        )))),
    ),
)

DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE = Message(
    "DescribeShareGroupOffsetsResponse",
    "response",
    api_key=90,
    versions="0-1",
    flexible="0+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("groups", versions="0+", type=Array(Struct("DescribeShareGroupOffsetsResponseGroup", (
            Field("group_id", "string", "0+"),
            Field("topics", versions="0+", type=Array(Struct("DescribeShareGroupOffsetsResponseTopic", (
                Field("topic_name", "string", "0+"),
                Field("topic_id", "uuid", "0+"),
                Field("partitions", versions="0+", type=Array(Struct("DescribeShareGroupOffsetsResponsePartition", (
                    Field("partition_index", "int32", "0+"),
                    Field("start_offset", "int64", "0+"),
                    Field("leader_epoch", "int32", "0+"),
                    Field("lag", "int64", "1+", default=-1),
                    Field("error_code", "int16", "0+"),
                    Field("error_message", "string", "0+", nullable="0+", default=None),
                )))),
            )))),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+", default=None),
        )))),
    ),
)

MESSAGES = (
    SHARE_GROUP_DESCRIBE_REQUEST,
    SHARE_GROUP_DESCRIBE_RESPONSE,
    DESCRIBE_SHARE_GROUP_OFFSETS_REQUEST,
    DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE,
)
