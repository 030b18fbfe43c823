"""Committed group offsets: OffsetCommit, OffsetFetch, OffsetDelete.

Transcribed from Apache Kafka's JSON message specs (clients/src/main/resources/common/message/ and
group-coordinator/src/main/resources/common/message/, trunk of 2024-10-25), restricted to the versions
this codec supports. Field names are the specs' names in snake_case."""

from broker.protocol.schema import Array, Field, Message, Struct

OFFSET_COMMIT_REQUEST = Message(
    "OffsetCommitRequest",
    "request",
    api_key=8,
    versions="0-9",
    flexible="8+",
    fields=(
        Field("group_id", "string", "0+"),
        Field("generation_id_or_member_epoch", "int32", "1+", default=-1),
        Field("member_id", "string", "1+"),
        Field("group_instance_id", "string", "7+", nullable="7+", default=None),
        Field("retention_time_ms", "int64", "2-4", default=-1),
        Field("topics", versions="0+", type=Array(Struct("OffsetCommitRequestTopic", (
            Field("name", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("OffsetCommitRequestPartition", (
                Field("partition_index", "int32", "0+"),
                Field("committed_offset", "int64", "0+"),
                Field("committed_leader_epoch", "int32", "6+", default=-1),
                Field("commit_timestamp", "int64", "1", default=-1),
                Field("committed_metadata", "string", "0+", nullable="0+"),
            )))),
        )))),
    ),
)

OFFSET_COMMIT_RESPONSE = Message(
    "OffsetCommitResponse",
    "response",
    api_key=8,
    versions="0-9",
    flexible="8+",
    fields=(
        Field("throttle_time_ms", "int32", "3+"),
        Field("topics", versions="0+", type=Array(Struct("OffsetCommitResponseTopic", (
            Field("name", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("OffsetCommitResponsePartition", (
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
            )))),
        )))),
    ),
)

OFFSET_FETCH_REQUEST = Message(
    "OffsetFetchRequest",
    "request",
    api_key=9,
    versions="0-9",
    flexible="6+",
    fields=(
        Field("group_id", "string", "0-7"),
        Field("topics", versions="0-7", nullable="2-7", type=Array(Struct("OffsetFetchRequestTopic", (
            Field("name", "string", "0-7"),
            Field("partition_indexes", Array("int32"), "0-7"),
        )))),
        Field("groups", versions="8+", type=Array(Struct("OffsetFetchRequestGroup", (
            Field("group_id", "string", "8+"),
            Field("member_id", "string", "9+", nullable="9+", default=None),
            Field("member_epoch", "int32", "9+", default=-1),
            Field("topics", versions="8+", nullable="8+", type=Array(Struct("OffsetFetchRequestTopics", (
                Field("name", "string", "8+"),
                Field("partition_indexes", Array("int32"), "8+"),
            )))),
        )))),
        Field("require_stable", "bool", "7+", default=False),
    ),
)

OFFSET_FETCH_RESPONSE = Message(
    "OffsetFetchResponse",
    "response",
    api_key=9,
    versions="0-9",
    flexible="6+",
    fields=(
        Field("throttle_time_ms", "int32", "3+"),
        Field("topics", versions="0-7", type=Array(Struct("OffsetFetchResponseTopic", (
            Field("name", "string", "0-7"),
            Field("partitions", versions="0-7", type=Array(Struct("OffsetFetchResponsePartition", (
                Field("partition_index", "int32", "0-7"),
                Field("committed_offset", "int64", "0-7"),
                Field("committed_leader_epoch", "int32", "5-7", default=-1),
                Field("metadata", "string", "0-7", nullable="0-7"),
                Field("error_code", "int16", "0-7"),
            )))),
        )))),
        Field("error_code", "int16", "2-7", default=0),
        Field("groups", versions="8+", type=Array(Struct("OffsetFetchResponseGroup", (
            Field("group_id", "string", "8+"),
            Field("topics", versions="8+", type=Array(Struct("OffsetFetchResponseTopics", (
                Field("name", "string", "8+"),
                Field("partitions", versions="8+", type=Array(Struct("OffsetFetchResponsePartitions", (
                    Field("partition_index", "int32", "8+"),
                    Field("committed_offset", "int64", "8+"),
                    Field("committed_leader_epoch", "int32", "8+", default=-1),
                    Field("metadata", "string", "8+", nullable="8+"),
                    Field("error_code", "int16", "8+"),
                )))),
            )))),
            Field("error_code", "int16", "8+", default=0),
        )))),
    ),
)

OFFSET_DELETE_REQUEST = Message(
    "OffsetDeleteRequest",
    "request",
    api_key=47,
    versions="0",
    flexible="none",
    fields=(
        Field("group_id", "string", "0+"),
        Field("topics", versions="0+", type=Array(Struct("OffsetDeleteRequestTopic", (
            Field("name", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("OffsetDeleteRequestPartition", (
                Field("partition_index", "int32", "0+"),
            )))),
        )))),
    ),
)

OFFSET_DELETE_RESPONSE = Message(
    "OffsetDeleteResponse",
    "response",
    api_key=47,
    versions="0",
    flexible="none",
    fields=(
        Field("error_code", "int16", "0+"),
        Field("throttle_time_ms", "int32", "0+"),
        Field("topics", versions="0+", type=Array(Struct("OffsetDeleteResponseTopic", (
            Field("name", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("OffsetDeleteResponsePartition", (
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
            )))),
        )))),
    ),
)

MESSAGES = (
    OFFSET_COMMIT_REQUEST,
    OFFSET_COMMIT_RESPONSE,
    OFFSET_FETCH_REQUEST,
    OFFSET_FETCH_RESPONSE,
    OFFSET_DELETE_REQUEST,
    OFFSET_DELETE_RESPONSE,
)
