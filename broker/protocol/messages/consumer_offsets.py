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

def _member_key(name: str, record_type: int) -> Message:
    """The key of a per-member record of a consumer-protocol group: its version is the record type."""
    version = str(record_type)
    return Message(name, "data", versions=version, flexible="none", fields=(
        Field("group_id", "string", version),
        Field("member_id", "string", version),
    ))


# Groups on the consumer protocol (KIP-848) keep each member in two records keyed by group and member id:
# its metadata (type 5) and its current assignment (type 8).
CONSUMER_GROUP_MEMBER_METADATA_KEY = _member_key("ConsumerGroupMemberMetadataKey", 5)

# Its tagged field 0, ClassicMemberMetadata (a nullable struct, for classic members of such a group), is
# outside this codec's schema language: decoding skips it as an unknown tag.
CONSUMER_GROUP_MEMBER_METADATA_VALUE = Message(
    "ConsumerGroupMemberMetadataValue",
    "data",
    versions="0",
    flexible="0+",
    fields=(
        Field("instance_id", "string", "0+", nullable="0+"),
        Field("rack_id", "string", "0+", nullable="0+"),
        Field("client_id", "string", "0+"),
        Field("client_host", "string", "0+"),
        Field("subscribed_topic_names", versions="0+", type=Array("string")),
        Field("subscribed_topic_regex", "string", "0+", nullable="0+"),
        Field("rebalance_timeout_ms", "int32", "0+", default=-1),
        Field("server_assignor", "string", "0+", nullable="0+"),
    ),
)

CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = _member_key("ConsumerGroupCurrentMemberAssignmentKey", 8)

_TOPIC_PARTITIONS = Struct("TopicPartitions", (
    Field("topic_id", "uuid", "0+"),
    Field("partitions", versions="0+", type=Array("int32")),
    # KIP-1251 (Kafka 4.3+): the member epoch since which each of ``partitions`` is held, in the same order;
    # empty (and then not written) in records of older brokers.
    Field("assignment_epochs", versions="0+", tag=0, type=Array("int32")),
))

CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = Message(
    "ConsumerGroupCurrentMemberAssignmentValue",
    "data",
    versions="0",
    flexible="0+",
    fields=(
        Field("member_epoch", "int32", "0+"),
        Field("previous_member_epoch", "int32", "0+"),
        Field("state", "int8", "0+"),
        Field("assigned_partitions", versions="0+", type=Array(_TOPIC_PARTITIONS)),
        Field("partitions_pending_revocation", versions="0+", type=Array(_TOPIC_PARTITIONS)),
    ),
)

def _group_key(name: str, record_type: int) -> Message:
    """The key of a group-wide record of a consumer-protocol group: its version is the record type."""
    version = str(record_type)
    return Message(name, "data", versions=version, flexible="none", fields=(Field("group_id", "string", version),))


CONSUMER_GROUP_METADATA_KEY = _group_key("ConsumerGroupMetadataKey", 3)
CONSUMER_GROUP_METADATA_VALUE = Message(
    "ConsumerGroupMetadataValue", "data", versions="0", flexible="0+",
    fields=(Field("epoch", "int32", "0+"),),
)
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = _group_key("ConsumerGroupTargetAssignmentMetadataKey", 6)
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = Message(
    "ConsumerGroupTargetAssignmentMetadataValue", "data", versions="0", flexible="0+",
    fields=(Field("assignment_epoch", "int32", "0+"),),
)
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = _member_key("ConsumerGroupTargetAssignmentMemberKey", 7)
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = Message(
    "ConsumerGroupTargetAssignmentMemberValue", "data", versions="0", flexible="0+",
    fields=(Field("topic_partitions", Array(Struct("TopicPartition", (
        Field("topic_id", "uuid", "0+"),
        Field("partitions", Array("int32"), "0+"),
    ))), "0+"),),
)

MESSAGES = (
    CONSUMER_GROUP_METADATA_KEY,
    CONSUMER_GROUP_METADATA_VALUE,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    CONSUMER_GROUP_MEMBER_METADATA_KEY,
    CONSUMER_GROUP_MEMBER_METADATA_VALUE,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
)
