"""Keys and values of the records in ``__consumer_offsets`` (group-coordinator/.../*.json);
see kafka-protocol.md section 5 for which versions Kafka writes and Burrow reads.

Transcribed from Apache Kafka's JSON message specs (clients/src/main/resources/common/message/ and
group-coordinator/src/main/resources/common/message/, trunk of 2024-10-25), restricted to the versions
this codec supports. Field names are the specs' names in snake_case."""

from broker.protocol.schema import Array, Field, Message, Struct

OFFSET_COMMIT_KEY = Message(
    "OffsetCommitKey",
    "data",
    versions="0-1",
    flexible="none",
    fields=(
        Field("group", "string", "0-1"),
        Field("topic", "string", "0-1"),
        Field("partition", "int32", "0-1"),
    ),
)

OFFSET_COMMIT_VALUE = Message(
    "OffsetCommitValue",
    "data",
    versions="0-4",
    flexible="4+",
    fields=(
        Field("offset", "int64", "0+"),
        Field("leader_epoch", "int32", "3+", default=-1),
        Field("metadata", "string", "0+"),
        Field("commit_timestamp", "int64", "0+"),
        Field("expire_timestamp", "int64", "1", default=-1),
    ),
)

GROUP_METADATA_KEY = Message(
    "GroupMetadataKey",
    "data",
    versions="2",
    flexible="none",
    fields=(
        Field("group", "string", "2"),
    ),
)

GROUP_METADATA_VALUE = Message(
    "GroupMetadataValue",
    "data",
    versions="0-4",
    flexible="4+",
    fields=(
        Field("protocol_type", "string", "0+"),
        Field("generation", "int32", "0+"),
        Field("protocol", "string", "0+", nullable="0+"),
        Field("leader", "string", "0+", nullable="0+"),
        Field("current_state_timestamp", "int64", "2+", default=-1),
        Field("members", versions="0+", type=Array(Struct("MemberMetadata", (
            Field("member_id", "string", "0+"),
            Field("group_instance_id", "string", "3+", nullable="3+"),
            Field("client_id", "string", "0+"),
            Field("client_host", "string", "0+"),
            Field("rebalance_timeout", "int32", "1+", default=-1),
            Field("session_timeout", "int32", "0+"),
            Field("subscription", "bytes", "0+"),
            Field("assignment", "bytes", "0+"),
        )))),
    ),
)

MESSAGES = (
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
)
