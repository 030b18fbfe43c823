"""Partition leadership: ElectLeaders.

Transcribed from Apache Kafka's JSON message specs (clients/src/main/resources/common/message/, trunk of
2024-10-25). Field names are the specs' names in snake_case."""

from broker.protocol.schema import Array, Field, Message, Struct

ELECT_LEADERS_REQUEST = Message(
    "ElectLeadersRequest",
    "request",
    api_key=43,
    versions="0-2",
    flexible="2+",
    fields=(
        Field("election_type", "int8", "1+"),
        Field("topic_partitions", versions="0+", nullable="0+", type=Array(Struct("TopicPartitions", (
            Field("topic", "string", "0+"),
            Field("partitions", Array("int32"), "0+"),
        )))),
        Field("timeout_ms", "int32", "0+", default=60000),
    ),
)

ELECT_LEADERS_RESPONSE = Message(
    "ElectLeadersResponse",
    "response",
    api_key=43,
    versions="0-2",
    flexible="2+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "1+"),
        Field("replica_election_results", versions="0+", type=Array(Struct("ReplicaElectionResult", (
            Field("topic", "string", "0+"),
            Field("partition_result", versions="0+", type=Array(Struct("PartitionResult", (
                Field("partition_id", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+"),
            )))),
        )))),
    ),
)

MESSAGES = (ELECT_LEADERS_REQUEST, ELECT_LEADERS_RESPONSE)
