"""Share groups (KIP-932) as an administrator reads them: DescribeShareGroupOffsets, what Kafka's
``kafka-share-groups --describe --offsets`` sends to a group's coordinator.

Transcribed from Apache Kafka 4.4's JSON message specs (clients/src/main/resources/common/message/);
version 1 adds each share-partition's lag. Field names are the specs' names in snake_case."""

from broker.protocol.schema import Array, Field, Message, Struct

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
    DESCRIBE_SHARE_GROUP_OFFSETS_REQUEST,
    DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE,
)
