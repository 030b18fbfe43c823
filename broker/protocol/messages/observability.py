"""What operators' tools ask a cluster about itself: DescribeLogDirs, DescribeQuorum, DescribeProducers,
DescribeTopicPartitions; and how they change its quorum and membership: AddRaftVoter, RemoveRaftVoter (KIP-853),
UnregisterBroker.

Transcribed from Apache Kafka 4.4's JSON message specs (clients/src/main/resources/common/message/),
restricted to the versions this codec supports. Field names are the specs' names in snake_case."""

from broker.protocol.schema import Array, Field, Message, Struct

DESCRIBE_LOG_DIRS_REQUEST = Message(
    "DescribeLogDirsRequest",
    "request",
    api_key=35,
    versions="0-5",
    flexible="2+",
    fields=(
        Field("topics", versions="0+", nullable="0+", type=Array(Struct("DescribableLogDirTopic", (
            Field("topic", "string", "0+"),
            Field("partitions", Array("int32"), "0+"),
        )))),
    ),
)

DESCRIBE_LOG_DIRS_RESPONSE = Message(
    "DescribeLogDirsResponse",
    "response",
    api_key=35,
    versions="0-5",
    flexible="2+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "3+"),
        Field("results", versions="0+", type=Array(Struct("DescribeLogDirsResult", (
            Field("error_code", "int16", "0+"),
            Field("log_dir", "string", "0+"),
            Field("topics", versions="0+", type=Array(Struct("DescribeLogDirsTopic", (
                Field("name", "string", "0+"),
                Field("partitions", versions="0+", type=Array(Struct("DescribeLogDirsPartition", (
                    Field("partition_index", "int32", "0+"),
                    Field("partition_size", "int64", "0+"),
                    Field("offset_lag", "int64", "0+"),
                    Field("is_future_key", "bool", "0+"),
                )))),
            )))),
            Field("total_bytes", "int64", "4+", default=-1),
            Field("usable_bytes", "int64", "4+", default=-1),
            Field("is_cordoned", "bool", "5+", default=False),
        )))),
    ),
)

DESCRIBE_QUORUM_REQUEST = Message(
    "DescribeQuorumRequest",
    "request",
    api_key=55,
    versions="0-2",
    flexible="0+",
    fields=(
        Field("topics", versions="0+", type=Array(Struct("TopicData", (
            Field("topic_name", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("PartitionData", (
                Field("partition_index", "int32", "0+"),
            )))),
        )))),
    ),
)

_REPLICA_STATE = Struct("ReplicaState", (
    Field("replica_id", "int32", "0+"),
    Field("replica_directory_id", "uuid", "2+"),
    Field("log_end_offset", "int64", "0+"),
    Field("last_fetch_timestamp", "int64", "1+", default=-1),
    Field("last_caught_up_timestamp", "int64", "1+", default=-1),
))

DESCRIBE_QUORUM_RESPONSE = Message(
    "DescribeQuorumResponse",
    "response",
    api_key=55,
    versions="0-2",
    flexible="0+",
    fields=(
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "2+", nullable="2+"),
        Field("topics", versions="0+", type=Array(Struct("TopicData", (
            Field("topic_name", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("PartitionData", (
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "2+", nullable="2+"),
                Field("leader_id", "int32", "0+"),
                Field("leader_epoch", "int32", "0+"),
                Field("high_watermark", "int64", "0+"),
                Field("current_voters", Array(_REPLICA_STATE), "0+"),
                Field("observers", Array(_REPLICA_STATE), "0+"),
            )))),
        )))),
        Field("nodes", versions="2+", type=Array(Struct("Node", (
            Field("node_id", "int32", "2+"),
            Field("listeners", versions="2+", type=Array(Struct("Listener", (
                Field("name", "string", "2+"),
                Field("host", "string", "2+"),
                Field("port", "uint16", "2+"),
            )))),
        )))),
    ),
)

DESCRIBE_PRODUCERS_REQUEST = Message(
    "DescribeProducersRequest",
    "request",
    api_key=61,
    versions="0",
    flexible="0+",
    fields=(
        Field("topics", versions="0+", type=Array(Struct("TopicRequest", (
            Field("name", "string", "0+"),
            Field("partition_indexes", Array("int32"), "0+"),
        )))),
    ),
)

DESCRIBE_PRODUCERS_RESPONSE = Message(
    "DescribeProducersResponse",
    "response",
    api_key=61,
    versions="0",
    flexible="0+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("topics", versions="0+", type=Array(Struct("TopicResponse", (
            Field("name", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("PartitionResponse", (
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+", default=None),
                Field("active_producers", versions="0+", type=Array(Struct("ProducerState", (
                    Field("producer_id", "int64", "0+"),
                    Field("producer_epoch", "int32", "0+"),
                    Field("last_sequence", "int32", "0+", default=-1),
                    Field("last_timestamp", "int64", "0+", default=-1),
                    Field("coordinator_epoch", "int32", "0+"),
                    Field("current_txn_start_offset", "int64", "0+", default=-1),
                )))),
            )))),
        )))),
    ),
)

_CURSOR_FIELDS = (
    Field("topic_name", "string", "0+"),
    Field("partition_index", "int32", "0+"),
)

DESCRIBE_TOPIC_PARTITIONS_REQUEST = Message(
    "DescribeTopicPartitionsRequest",
    "request",
    api_key=75,
    versions="0",
    flexible="0+",
    fields=(
        Field("topics", versions="0+", type=Array(Struct("TopicRequest", (
            Field("name", "string", "0+"),
        )))),
        Field("response_partition_limit", "int32", "0+", default=2000),
        Field("cursor", Struct("Cursor", _CURSOR_FIELDS), "0+", nullable="0+", default=None),
    ),
)

DESCRIBE_TOPIC_PARTITIONS_RESPONSE = Message(
    "DescribeTopicPartitionsResponse",
    "response",
    api_key=75,
    versions="0",
    flexible="0+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("topics", versions="0+", type=Array(Struct("DescribeTopicPartitionsResponseTopic", (
            Field("error_code", "int16", "0+"),
            Field("name", "string", "0+", nullable="0+"),
            Field("topic_id", "uuid", "0+"),
            Field("is_internal", "bool", "0+", default=False),
            Field("partitions", versions="0+", type=Array(Struct("DescribeTopicPartitionsResponsePartition", (
                Field("error_code", "int16", "0+"),
                Field("partition_index", "int32", "0+"),
                Field("leader_id", "int32", "0+"),
                Field("leader_epoch", "int32", "0+", default=-1),
                Field("replica_nodes", Array("int32"), "0+"),
                Field("isr_nodes", Array("int32"), "0+"),
                Field("eligible_leader_replicas", Array("int32"), "0+", nullable="0+", default=None),
                Field("last_known_elr", Array("int32"), "0+", nullable="0+", default=None),
                Field("offline_replicas", Array("int32"), "0+"),
            )))),
            Field("topic_authorized_operations", "int32", "0+", default=-2147483648),
        )))),
        Field("next_cursor", Struct("Cursor", _CURSOR_FIELDS), "0+", nullable="0+", default=None),
    ),
)

_CHANGE_RESPONSE_FIELDS = (
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("error_message", "string", "0+", nullable="0+", default=None),
)

ADD_RAFT_VOTER_REQUEST = Message(
    "AddRaftVoterRequest",
    "request",
    api_key=80,
    versions="0-1",
    flexible="0+",
    fields=(
        Field("cluster_id", "string", "0+", nullable="0+"),
        Field("timeout_ms", "int32", "0+"),
        Field("voter_id", "int32", "0+"),
        Field("voter_directory_id", "uuid", "0+"),
        Field("listeners", versions="0+", type=Array(Struct("Listener", (
            Field("name", "string", "0+"),
            Field("host", "string", "0+"),
            Field("port", "uint16", "0+"),
        )))),
        Field("ack_when_committed", "bool", "1+", default=True),
    ),
)

ADD_RAFT_VOTER_RESPONSE = Message("AddRaftVoterResponse", "response", api_key=80, versions="0-1", flexible="0+",
                                  fields=_CHANGE_RESPONSE_FIELDS)

REMOVE_RAFT_VOTER_REQUEST = Message(
    "RemoveRaftVoterRequest",
    "request",
    api_key=81,
    versions="0",
    flexible="0+",
    fields=(
        Field("cluster_id", "string", "0+", nullable="0+"),
        Field("voter_id", "int32", "0+"),
        Field("voter_directory_id", "uuid", "0+"),
    ),
)

REMOVE_RAFT_VOTER_RESPONSE = Message("RemoveRaftVoterResponse", "response", api_key=81, versions="0",
                                     flexible="0+", fields=_CHANGE_RESPONSE_FIELDS)

UNREGISTER_BROKER_REQUEST = Message("UnregisterBrokerRequest", "request", api_key=64, versions="0", flexible="0+",
                                    fields=(Field("broker_id", "int32", "0+"),))

UNREGISTER_BROKER_RESPONSE = Message("UnregisterBrokerResponse", "response", api_key=64, versions="0",
                                     flexible="0+", fields=_CHANGE_RESPONSE_FIELDS)

MESSAGES = (
    DESCRIBE_LOG_DIRS_REQUEST,
    DESCRIBE_LOG_DIRS_RESPONSE,
    DESCRIBE_QUORUM_REQUEST,
    DESCRIBE_QUORUM_RESPONSE,
    DESCRIBE_PRODUCERS_REQUEST,
    DESCRIBE_PRODUCERS_RESPONSE,
    DESCRIBE_TOPIC_PARTITIONS_REQUEST,
    DESCRIBE_TOPIC_PARTITIONS_RESPONSE,
    ADD_RAFT_VOTER_REQUEST,
    ADD_RAFT_VOTER_RESPONSE,
    REMOVE_RAFT_VOTER_REQUEST,
    REMOVE_RAFT_VOTER_RESPONSE,
    UNREGISTER_BROKER_REQUEST,
    UNREGISTER_BROKER_RESPONSE,
)
