"""The consumer protocol's embedded structs: what JoinGroup metadata and SyncGroup assignments
carry for protocol type "consumer" (clients/.../ConsumerProtocol*.json).

Transcribed from Apache Kafka's JSON message specs (clients/src/main/resources/common/message/ and
group-coordinator/src/main/resources/common/message/, trunk of 2024-10-25), restricted to the versions
this codec supports. Field names are the specs' names in snake_case."""

from broker.protocol.schema import Array, Field, Message, Struct

CONSUMER_PROTOCOL_SUBSCRIPTION = Message(
    "ConsumerProtocolSubscription",
    "data",
    versions="0-3",
    flexible="none",
    fields=(
        Field("topics", Array("string"), "0+"),
        Field("user_data", "bytes", "0+", nullable="0+", default=None),
        Field("owned_partitions", versions="1+", type=Array(Struct("TopicPartition", (
            Field("topic", "string", "1+"),
            Field("partitions", Array("int32"), "1+"),
        )))),
        Field("generation_id", "int32", "2+", default=-1),
        Field("rack_id", "string", "3+", nullable="3+", default=None),
    ),
)

CONSUMER_PROTOCOL_ASSIGNMENT = Message(
    "ConsumerProtocolAssignment",
    "data",
    versions="0-3",
    flexible="none",
    fields=(
        Field("assigned_partitions", versions="0+", type=Array(Struct("TopicPartition", (
            Field("topic", "string", "0+"),
            Field("partitions", Array("int32"), "0+"),
        )))),
        Field("user_data", "bytes", "0+", nullable="0+", default=None),
    ),
)

MESSAGES = (
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    CONSUMER_PROTOCOL_ASSIGNMENT,
)
