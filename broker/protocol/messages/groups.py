"""Classic consumer-group membership: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, ListGroups, DescribeGroups, DeleteGroups.

Transcribed from Apache Kafka's JSON message specs (clients/src/main/resources/common/message/ and
group-coordinator/src/main/resources/common/message/, trunk of 2024-10-25), restricted to the versions
this codec supports. Field names are the specs' names in snake_case."""

from broker.protocol.schema import Array, Field, Message, Struct

FIND_COORDINATOR_REQUEST = Message(
    "FindCoordinatorRequest",
    "request",
    api_key=10,
    versions="0-4",
    flexible="3+",
    fields=(
        Field("key", "string", "0-3"),
        Field("key_type", "int8", "1+", default=0),
        Field("coordinator_keys", Array("string"), "4+"),
    ),
)

FIND_COORDINATOR_RESPONSE = Message(
    "FindCoordinatorResponse",
    "response",
    api_key=10,
    versions="0-4",
    flexible="3+",
    fields=(
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0-3"),
        Field("error_message", "string", "1-3", nullable="1-3"),
        Field("node_id", "int32", "0-3"),
        Field("host", "string", "0-3"),
        Field("port", "int32", "0-3"),
        Field("coordinators", versions="4+", type=Array(Struct("Coordinator", (
            Field("key", "string", "4+"),
            Field("node_id", "int32", "4+"),
            Field("host", "string", "4+"),
            Field("port", "int32", "4+"),
            Field("error_code", "int16", "4+"),
            Field("error_message", "string", "4+", nullable="4+"),
        )))),
    ),
)

JOIN_GROUP_REQUEST = Message(
    "JoinGroupRequest",
    "request",
    api_key=11,
    versions="0-7",
    flexible="6+",
    fields=(
        Field("group_id", "string", "0+"),
        Field("session_timeout_ms", "int32", "0+"),
        Field("rebalance_timeout_ms", "int32", "1+", default=-1),
        Field("member_id", "string", "0+"),
        Field("group_instance_id", "string", "5+", nullable="5+", default=None),
        Field("protocol_type", "string", "0+"),
        Field("protocols", versions="0+", type=Array(Struct("JoinGroupRequestProtocol", (
            Field("name", "string", "0+"),
            Field("metadata", "bytes", "0+"),
        )))),
    ),
)

JOIN_GROUP_RESPONSE = Message(
    "JoinGroupResponse",
    "response",
    api_key=11,
    versions="0-7",
    flexible="6+",
    fields=(
        Field("throttle_time_ms", "int32", "2+"),
        Field("error_code", "int16", "0+"),
        Field("generation_id", "int32", "0+", default=-1),
        Field("protocol_type", "string", "7+", nullable="7+", default=None),
        Field("protocol_name", "string", "0+", nullable="7+"),
        Field("leader", "string", "0+"),
        Field("member_id", "string", "0+"),
        Field("members", versions="0+", type=Array(Struct("JoinGroupResponseMember", (
            Field("member_id", "string", "0+"),
            Field("group_instance_id", "string", "5+", nullable="5+", default=None),
            Field("metadata", "bytes", "0+"),
        )))),
    ),
)

SYNC_GROUP_REQUEST = Message(
    "SyncGroupRequest",
    "request",
    api_key=14,
    versions="0-5",
    flexible="4+",
    fields=(
        Field("group_id", "string", "0+"),
        Field("generation_id", "int32", "0+"),
        Field("member_id", "string", "0+"),
        Field("group_instance_id", "string", "3+", nullable="3+", default=None),
        Field("protocol_type", "string", "5+", nullable="5+", default=None),
        Field("protocol_name", "string", "5+", nullable="5+", default=None),
        Field("assignments", versions="0+", type=Array(Struct("SyncGroupRequestAssignment", (
            Field("member_id", "string", "0+"),
            Field("assignment", "bytes", "0+"),
        )))),
    ),
)

SYNC_GROUP_RESPONSE = Message(
    "SyncGroupResponse",
    "response",
    api_key=14,
    versions="0-5",
    flexible="4+",
    fields=(
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
        Field("protocol_type", "string", "5+", nullable="5+", default=None),
        Field("protocol_name", "string", "5+", nullable="5+", default=None),
        Field("assignment", "bytes", "0+"),
    ),
)

HEARTBEAT_REQUEST = Message(
    "HeartbeatRequest",
    "request",
    api_key=12,
    versions="0-4",
    flexible="4+",
    fields=(
        Field("group_id", "string", "0+"),
        Field("generation_id", "int32", "0+"),
        Field("member_id", "string", "0+"),
        Field("group_instance_id", "string", "3+", nullable="3+", default=None),
    ),
)

HEARTBEAT_RESPONSE = Message(
    "HeartbeatResponse",
    "response",
    api_key=12,
    versions="0-4",
    flexible="4+",
    fields=(
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
    ),
)

LEAVE_GROUP_REQUEST = Message(
    "LeaveGroupRequest",
    "request",
    api_key=13,
    versions="0-5",
    flexible="4+",
    fields=(
        Field("group_id", "string", "0+"),
        Field("member_id", "string", "0-2"),
        Field("members", versions="3+", type=Array(Struct("MemberIdentity", (
            Field("member_id", "string", "3+"),
            Field("group_instance_id", "string", "3+", nullable="3+", default=None),
            Field("reason", "string", "5+", nullable="5+", default=None),
        )))),
    ),
)

LEAVE_GROUP_RESPONSE = Message(
    "LeaveGroupResponse",
    "response",
    api_key=13,
    versions="0-5",
    flexible="4+",
    fields=(
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
        Field("members", versions="3+", type=Array(Struct("MemberResponse", (
            Field("member_id", "string", "3+"),
            Field("group_instance_id", "string", "3+", nullable="3+"),
            Field("error_code", "int16", "3+"),
        )))),
    ),
)

LIST_GROUPS_REQUEST = Message(
    "ListGroupsRequest",
    "request",
    api_key=16,
    versions="0-5",
    flexible="3+",
    fields=(
        Field("states_filter", Array("string"), "4+"),
        Field("types_filter", Array("string"), "5+"),
    ),
)

LIST_GROUPS_RESPONSE = Message(
    "ListGroupsResponse",
    "response",
    api_key=16,
    versions="0-5",
    flexible="3+",
    fields=(
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
        Field("groups", versions="0+", type=Array(Struct("ListedGroup", (
            Field("group_id", "string", "0+"),
            Field("protocol_type", "string", "0+"),
            Field("group_state", "string", "4+"),
            Field("group_type", "string", "5+"),
        )))),
    ),
)

DESCRIBE_GROUPS_REQUEST = Message(
    "DescribeGroupsRequest",
    "request",
    api_key=15,
    versions="0-5",
    flexible="5+",
    fields=(
        Field("groups", Array("string"), "0+"),
        Field("include_authorized_operations", "bool", "3+"),
    ),
)

DESCRIBE_GROUPS_RESPONSE = Message(
    "DescribeGroupsResponse",
    "response",
    api_key=15,
    versions="0-5",
    flexible="5+",
    fields=(
        Field("throttle_time_ms", "int32", "1+"),
        Field("groups", versions="0+", type=Array(Struct("DescribedGroup", (
            Field("error_code", "int16", "0+"),
            Field("group_id", "string", "0+"),
            Field("group_state", "string", "0+"),
            Field("protocol_type", "string", "0+"),
            Field("protocol_data", "string", "0+"),
            Field("members", versions="0+", type=Array(Struct("DescribedGroupMember", (
                Field("member_id", "string", "0+"),
                Field("group_instance_id", "string", "4+", nullable="4+", default=None),
                Field("client_id", "string", "0+"),
                Field("client_host", "string", "0+"),
                Field("member_metadata", "bytes", "0+"),
                Field("member_assignment", "bytes", "0+"),
            )))),
            Field("authorized_operations", "int32", "3+", default=-2147483648),
        )))),
    ),
)

DELETE_GROUPS_REQUEST = Message(
    "DeleteGroupsRequest",
    "request",
    api_key=42,
    versions="0-2",
    flexible="2+",
    fields=(
        Field("groups_names", Array("string"), "0+"),
    ),
)

DELETE_GROUPS_RESPONSE = Message(
    "DeleteGroupsResponse",
    "response",
    api_key=42,
    versions="0-2",
    flexible="2+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("results", versions="0+", type=Array(Struct("DeletableGroupResult", (
            Field("group_id", "string", "0+"),
            Field("error_code", "int16", "0+"),
        )))),
    ),
)

# --- the consumer group protocol (KIP-848) ------------------------------------------------------------------

_TOPIC_PARTITIONS = Struct("TopicPartitions", (
    Field("topic_id", "uuid", "0+"),
    Field("partitions", Array("int32"), "0+"),
))

CONSUMER_GROUP_HEARTBEAT_REQUEST = Message(
    "ConsumerGroupHeartbeatRequest",
    "request",
    api_key=68,
    versions="0-1",
    flexible="0+",
    fields=(
        Field("group_id", "string", "0+"),
        Field("member_id", "string", "0+"),
        Field("member_epoch", "int32", "0+"),
        Field("instance_id", "string", "0+", nullable="0+", default=None),
        Field("rack_id", "string", "0+", nullable="0+", default=None),
        Field("rebalance_timeout_ms", "int32", "0+", default=-1),
        Field("subscribed_topic_names", Array("string"), "0+", nullable="0+", default=None),
        Field("subscribed_topic_regex", "string", "1+", nullable="1+", default=None),
        Field("server_assignor", "string", "0+", nullable="0+", default=None),
        Field("topic_partitions", Array(_TOPIC_PARTITIONS), "0+", nullable="0+", default=None),
    ),
)

CONSUMER_GROUP_HEARTBEAT_RESPONSE = Message(
    "ConsumerGroupHeartbeatResponse",
    "response",
    api_key=68,
    versions="0-1",
    flexible="0+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
        Field("member_id", "string", "0+", nullable="0+", default=None),
        Field("member_epoch", "int32", "0+"),
        Field("heartbeat_interval_ms", "int32", "0+"),
        Field("assignment", Struct("Assignment", (
            Field("topic_partitions", Array(_TOPIC_PARTITIONS), "0+"),
        )), "0+", nullable="0+", default=None),
    ),
)

CONSUMER_GROUP_DESCRIBE_REQUEST = Message(
    "ConsumerGroupDescribeRequest",
    "request",
    api_key=69,
    versions="0",
    flexible="0+",
    fields=(
        Field("group_ids", Array("string"), "0+"),
        Field("include_authorized_operations", "bool", "0+"),
    ),
)

_DESCRIBED_ASSIGNMENT = Struct("Assignment", (
    Field("topic_partitions", Array(Struct("TopicPartitions", (
        Field("topic_id", "uuid", "0+"),
        Field("topic_name", "string", "0+"),
        Field("partitions", Array("int32"), "0+"),
    ))), "0+"),
))

CONSUMER_GROUP_DESCRIBE_RESPONSE = Message(
    "ConsumerGroupDescribeResponse",
    "response",
    api_key=69,
    versions="0",
    flexible="0+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("groups", versions="0+", type=Array(Struct("DescribedGroup", (
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+", default=None),
            Field("group_id", "string", "0+"),
            Field("group_state", "string", "0+"),
            Field("group_epoch", "int32", "0+"),
            Field("assignment_epoch", "int32", "0+"),
            Field("assignor_name", "string", "0+"),
            Field("members", versions="0+", type=Array(Struct("Member", (
                Field("member_id", "string", "0+"),
                Field("instance_id", "string", "0+", nullable="0+", default=None),
                Field("rack_id", "string", "0+", nullable="0+", default=None),
                Field("member_epoch", "int32", "0+"),
                Field("client_id", "string", "0+"),
                Field("client_host", "string", "0+"),
                Field("subscribed_topic_names", Array("string"), "0+"),
                Field("subscribed_topic_regex", "string", "0+", nullable="0+", default=None),
                Field("assignment", _DESCRIBED_ASSIGNMENT, "0+"),
                Field("target_assignment", _DESCRIBED_ASSIGNMENT, "0+"),
            )))),
            Field("authorized_operations", "int32", "0+", default=-(2**31)),
        )))),
    ),
)

MESSAGES = (
    CONSUMER_GROUP_HEARTBEAT_REQUEST,
    CONSUMER_GROUP_HEARTBEAT_RESPONSE,
    CONSUMER_GROUP_DESCRIBE_REQUEST,
    CONSUMER_GROUP_DESCRIBE_RESPONSE,
    FIND_COORDINATOR_REQUEST,
    FIND_COORDINATOR_RESPONSE,
    JOIN_GROUP_REQUEST,
    JOIN_GROUP_RESPONSE,
    SYNC_GROUP_REQUEST,
    SYNC_GROUP_RESPONSE,
    HEARTBEAT_REQUEST,
    HEARTBEAT_RESPONSE,
    LEAVE_GROUP_REQUEST,
    LEAVE_GROUP_RESPONSE,
    LIST_GROUPS_REQUEST,
    LIST_GROUPS_RESPONSE,
    DESCRIBE_GROUPS_REQUEST,
    DESCRIBE_GROUPS_RESPONSE,
    DELETE_GROUPS_REQUEST,
    DELETE_GROUPS_RESPONSE,
)
