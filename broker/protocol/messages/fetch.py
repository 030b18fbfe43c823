"""Reading records and locating offsets: Fetch, ListOffsets, OffsetForLeaderEpoch.

Transcribed from Apache Kafka's JSON message specs (clients/src/main/resources/common/message/ and
group-coordinator/src/main/resources/common/message/, trunk of 2024-10-25), restricted to the versions
this codec supports. Field names are the specs' names in snake_case."""

from broker.protocol.schema import Array, Field, Message, Struct

FETCH_REQUEST = Message(
    "FetchRequest",
    "request",
    api_key=1,
    versions="0-12",
    flexible="12+",
    fields=(
        Field("cluster_id", "string", "12+", nullable="12+", tag=0, default=None),
        Field("replica_id", "int32", "0-14", default=-1),
        Field("max_wait_ms", "int32", "0+"),
        Field("min_bytes", "int32", "0+"),
        Field("max_bytes", "int32", "3+", default=2147483647),
        Field("isolation_level", "int8", "4+", default=0),
        Field("session_id", "int32", "7+", default=0),
        Field("session_epoch", "int32", "7+", default=-1),
        Field("topics", versions="0+", type=Array(Struct("FetchTopic", (
            Field("topic", "string", "0-12"),
            Field("partitions", versions="0+", type=Array(Struct("FetchPartition", (
                Field("partition", "int32", "0+"),
                Field("current_leader_epoch", "int32", "9+", default=-1),
                Field("fetch_offset", "int64", "0+"),
                Field("last_fetched_epoch", "int32", "12+", default=-1),
                Field("log_start_offset", "int64", "5+", default=-1),
                Field("partition_max_bytes", "int32", "0+"),
            )))),
        )))),
        Field("forgotten_topics_data", versions="7+", type=Array(Struct("ForgottenTopic", (
            Field("topic", "string", "7-12"),
            Field("partitions", Array("int32"), "7+"),
        )))),
        Field("rack_id", "string", "11+"),
    ),
)

FETCH_RESPONSE = Message(
    "FetchResponse",
    "response",
    api_key=1,
    versions="0-12",
    flexible="12+",
    fields=(
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "7+"),
        Field("session_id", "int32", "7+", default=0),
        Field("responses", versions="0+", type=Array(Struct("FetchableTopicResponse", (
            Field("topic", "string", "0-12"),
            Field("partitions", versions="0+", type=Array(Struct("PartitionData", (
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("high_watermark", "int64", "0+"),
                Field("last_stable_offset", "int64", "4+", default=-1),
                Field("log_start_offset", "int64", "5+", default=-1),
                Field("diverging_epoch", versions="12+", tag=0, type=Struct("EpochEndOffset", (
                    Field("epoch", "int32", "12+", default=-1),
                    Field("end_offset", "int64", "12+", default=-1),
                ))),
                Field("current_leader", versions="12+", tag=1, type=Struct("LeaderIdAndEpoch", (
                    Field("leader_id", "int32", "12+", default=-1),
                    Field("leader_epoch", "int32", "12+", default=-1),
                ))),
                Field("snapshot_id", versions="12+", tag=2, type=Struct("SnapshotId", (
                    Field("end_offset", "int64", "0+", default=-1),
                    Field("epoch", "int32", "0+", default=-1),
                ))),
                Field("aborted_transactions", versions="4+", nullable="4+", type=Array(Struct("AbortedTransaction", (
                    Field("producer_id", "int64", "4+"),
                    Field("first_offset", "int64", "4+"),
                )))),
                Field("preferred_read_replica", "int32", "11+", default=-1),
                Field("records", "records", "0+", nullable="0+"),
            )))),
        )))),
    ),
)

LIST_OFFSETS_REQUEST = Message(
    "ListOffsetsRequest",
    "request",
    api_key=2,
    versions="0-7",
    flexible="6+",
    fields=(
        Field("replica_id", "int32", "0+"),
        Field("isolation_level", "int8", "2+"),
        Field("topics", versions="0+", type=Array(Struct("ListOffsetsTopic", (
            Field("name", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("ListOffsetsPartition", (
                Field("partition_index", "int32", "0+"),
                Field("current_leader_epoch", "int32", "4+", default=-1),
                Field("timestamp", "int64", "0+"),
                Field("max_num_offsets", "int32", "0", default=1),
            )))),
        )))),
    ),
)

LIST_OFFSETS_RESPONSE = Message(
    "ListOffsetsResponse",
    "response",
    api_key=2,
    versions="0-7",
    flexible="6+",
    fields=(
        Field("throttle_time_ms", "int32", "2+"),
        Field("topics", versions="0+", type=Array(Struct("ListOffsetsTopicResponse", (
            Field("name", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("ListOffsetsPartitionResponse", (
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("old_style_offsets", Array("int64"), "0"),
                Field("timestamp", "int64", "1+", default=-1),
                Field("offset", "int64", "1+", default=-1),
                Field("leader_epoch", "int32", "4+", default=-1),
            )))),
        )))),
    ),
)

OFFSET_FOR_LEADER_EPOCH_REQUEST = Message(
    "OffsetForLeaderEpochRequest",
    "request",
    api_key=23,
    versions="0-4",
    flexible="4+",
    fields=(
        Field("replica_id", "int32", "3+", default=-2),
        Field("topics", versions="0+", type=Array(Struct("OffsetForLeaderTopic", (
            Field("topic", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("OffsetForLeaderPartition", (
                Field("partition", "int32", "0+"),
                Field("current_leader_epoch", "int32", "2+", default=-1),
                Field("leader_epoch", "int32", "0+"),
            )))),
        )))),
    ),
)

OFFSET_FOR_LEADER_EPOCH_RESPONSE = Message(
    "OffsetForLeaderEpochResponse",
    "response",
    api_key=23,
    versions="0-4",
    flexible="4+",
    fields=(
        Field("throttle_time_ms", "int32", "2+"),
        Field("topics", versions="0+", type=Array(Struct("OffsetForLeaderTopicResult", (
            Field("topic", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("EpochEndOffset", (
                Field("error_code", "int16", "0+"),
                Field("partition", "int32", "0+"),
                Field("leader_epoch", "int32", "1+", default=-1),
                Field("end_offset", "int64", "0+", default=-1),
            )))),
        )))),
    ),
)

MESSAGES = (
    FETCH_REQUEST,
    FETCH_RESPONSE,
    LIST_OFFSETS_REQUEST,
    LIST_OFFSETS_RESPONSE,
    OFFSET_FOR_LEADER_EPOCH_REQUEST,
    OFFSET_FOR_LEADER_EPOCH_RESPONSE,
)
