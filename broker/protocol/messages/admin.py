"""Topic and configuration administration: CreateTopics, DeleteTopics, CreatePartitions,
DeleteRecords, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, client quotas, AlterPartitionReassignments,
ListPartitionReassignments.

Transcribed from Apache Kafka's JSON message specs (clients/src/main/resources/common/message/ and
group-coordinator/src/main/resources/common/message/, trunk of 2024-10-25), restricted to the versions
this codec supports. Field names are the specs' names in snake_case."""

from broker.protocol.schema import Array, Field, Message, Struct

CREATE_TOPICS_REQUEST = Message(
    "CreateTopicsRequest",
    "request",
    api_key=19,
    versions="0-7",
    flexible="5+",
    fields=(
        Field("topics", versions="0+", type=Array(Struct("CreatableTopic", (
            Field("name", "string", "0+"),
            Field("num_partitions", "int32", "0+"),
            Field("replication_factor", "int16", "0+"),
            Field("assignments", versions="0+", type=Array(Struct("CreatableReplicaAssignment", (
                Field("partition_index", "int32", "0+"),
                Field("broker_ids", Array("int32"), "0+"),
            )))),
            Field("configs", versions="0+", type=Array(Struct("CreatableTopicConfig", (
                Field("name", "string", "0+"),
                Field("value", "string", "0+", nullable="0+"),
            )))),
        )))),
        Field("timeout_ms", "int32", "0+", default=60000),
        Field("validate_only", "bool", "1+", default=False),
    ),
)

CREATE_TOPICS_RESPONSE = Message(
    "CreateTopicsResponse",
    "response",
    api_key=19,
    versions="0-7",
    flexible="5+",
    fields=(
        Field("throttle_time_ms", "int32", "2+"),
        Field("topics", versions="0+", type=Array(Struct("CreatableTopicResult", (
            Field("name", "string", "0+"),
            Field("topic_id", "uuid", "7+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "1+", nullable="0+"),
            Field("topic_config_error_code", "int16", "5+", tag=0),
            Field("num_partitions", "int32", "5+", default=-1),
            Field("replication_factor", "int16", "5+", default=-1),
            Field("configs", versions="5+", nullable="5+", type=Array(Struct("CreatableTopicConfigs", (
                Field("name", "string", "5+"),
                Field("value", "string", "5+", nullable="5+"),
                Field("read_only", "bool", "5+"),
                Field("config_source", "int8", "5+", default=-1),
                Field("is_sensitive", "bool", "5+"),
            )))),
        )))),
    ),
)

DELETE_TOPICS_REQUEST = Message(
    "DeleteTopicsRequest",
    "request",
    api_key=20,
    versions="0-6",
    flexible="4+",
    fields=(
        Field("topics", versions="6+", type=Array(Struct("DeleteTopicState", (
            Field("name", "string", "6+", nullable="6+", default=None),
            Field("topic_id", "uuid", "6+"),
        )))),
        Field("topic_names", Array("string"), "0-5"),
        Field("timeout_ms", "int32", "0+"),
    ),
)

DELETE_TOPICS_RESPONSE = Message(
    "DeleteTopicsResponse",
    "response",
    api_key=20,
    versions="0-6",
    flexible="4+",
    fields=(
        Field("throttle_time_ms", "int32", "1+"),
        Field("responses", versions="0+", type=Array(Struct("DeletableTopicResult", (
            Field("name", "string", "0+", nullable="6+"),
            Field("topic_id", "uuid", "6+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "5+", nullable="5+", default=None),
        )))),
    ),
)

CREATE_PARTITIONS_REQUEST = Message(
    "CreatePartitionsRequest",
    "request",
    api_key=37,
    versions="0-3",
    flexible="2+",
    fields=(
        Field("topics", versions="0+", type=Array(Struct("CreatePartitionsTopic", (
            Field("name", "string", "0+"),
            Field("count", "int32", "0+"),
            Field("assignments", versions="0+", nullable="0+", type=Array(Struct("CreatePartitionsAssignment", (
                Field("broker_ids", Array("int32"), "0+"),
            )))),
        )))),
        Field("timeout_ms", "int32", "0+"),
        Field("validate_only", "bool", "0+"),
    ),
)

CREATE_PARTITIONS_RESPONSE = Message(
    "CreatePartitionsResponse",
    "response",
    api_key=37,
    versions="0-3",
    flexible="2+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("results", versions="0+", type=Array(Struct("CreatePartitionsTopicResult", (
            Field("name", "string", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+", default=None),
        )))),
    ),
)

DELETE_RECORDS_REQUEST = Message(
    "DeleteRecordsRequest",
    "request",
    api_key=21,
    versions="0-2",
    flexible="2+",
    fields=(
        Field("topics", versions="0+", type=Array(Struct("DeleteRecordsTopic", (
            Field("name", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("DeleteRecordsPartition", (
                Field("partition_index", "int32", "0+"),
                Field("offset", "int64", "0+"),
            )))),
        )))),
        Field("timeout_ms", "int32", "0+"),
    ),
)

DELETE_RECORDS_RESPONSE = Message(
    "DeleteRecordsResponse",
    "response",
    api_key=21,
    versions="0-2",
    flexible="2+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("topics", versions="0+", type=Array(Struct("DeleteRecordsTopicResult", (
            Field("name", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("DeleteRecordsPartitionResult", (
                Field("partition_index", "int32", "0+"),
                Field("low_watermark", "int64", "0+"),
                Field("error_code", "int16", "0+"),
            )))),
        )))),
    ),
)

DESCRIBE_CONFIGS_REQUEST = Message(
    "DescribeConfigsRequest",
    "request",
    api_key=32,
    versions="0-4",
    flexible="4+",
    fields=(
        Field("resources", versions="0+", type=Array(Struct("DescribeConfigsResource", (
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("configuration_keys", Array("string"), "0+", nullable="0+"),
        )))),
        Field("include_synonyms", "bool", "1+", default=False),
        Field("include_documentation", "bool", "3+", default=False),
    ),
)

DESCRIBE_CONFIGS_RESPONSE = Message(
    "DescribeConfigsResponse",
    "response",
    api_key=32,
    versions="0-4",
    flexible="4+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("results", versions="0+", type=Array(Struct("DescribeConfigsResult", (
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("configs", versions="0+", type=Array(Struct("DescribeConfigsResourceResult", (
                Field("name", "string", "0+"),
                Field("value", "string", "0+", nullable="0+"),
                Field("read_only", "bool", "0+"),
                Field("is_default", "bool", "0"),
                Field("config_source", "int8", "1+", default=-1),
                Field("is_sensitive", "bool", "0+"),
                Field("synonyms", versions="1+", type=Array(Struct("DescribeConfigsSynonym", (
                    Field("name", "string", "1+"),
                    Field("value", "string", "1+", nullable="0+"),
                    Field("source", "int8", "1+"),
                )))),
                Field("config_type", "int8", "3+", default=0),
                Field("documentation", "string", "3+", nullable="0+"),
            )))),
        )))),
    ),
)

ALTER_CONFIGS_REQUEST = Message(
    "AlterConfigsRequest",
    "request",
    api_key=33,
    versions="0-2",
    flexible="2+",
    fields=(
        Field("resources", versions="0+", type=Array(Struct("AlterConfigsResource", (
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("configs", versions="0+", type=Array(Struct("AlterableConfig", (
                Field("name", "string", "0+"),
                Field("value", "string", "0+", nullable="0+"),
            )))),
        )))),
        Field("validate_only", "bool", "0+"),
    ),
)

ALTER_CONFIGS_RESPONSE = Message(
    "AlterConfigsResponse",
    "response",
    api_key=33,
    versions="0-2",
    flexible="2+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("responses", versions="0+", type=Array(Struct("AlterConfigsResourceResponse", (
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
        )))),
    ),
)

INCREMENTAL_ALTER_CONFIGS_REQUEST = Message(
    "IncrementalAlterConfigsRequest",
    "request",
    api_key=44,
    versions="0-1",
    flexible="1+",
    fields=(
        Field("resources", versions="0+", type=Array(Struct("AlterConfigsResource", (
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("configs", versions="0+", type=Array(Struct("AlterableConfig", (
                Field("name", "string", "0+"),
                Field("config_operation", "int8", "0+"),
                Field("value", "string", "0+", nullable="0+"),
            )))),
        )))),
        Field("validate_only", "bool", "0+"),
    ),
)

INCREMENTAL_ALTER_CONFIGS_RESPONSE = Message(
    "IncrementalAlterConfigsResponse",
    "response",
    api_key=44,
    versions="0-1",
    flexible="1+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("responses", versions="0+", type=Array(Struct("AlterConfigsResourceResponse", (
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
        )))),
    ),
)

DESCRIBE_CLIENT_QUOTAS_REQUEST = Message(
    "DescribeClientQuotasRequest",
    "request",
    api_key=48,
    versions="0-1",
    flexible="1+",
    fields=(
        Field("components", versions="0+", type=Array(Struct("ComponentData", (
            Field("entity_type", "string", "0+"),
            Field("match_type", "int8", "0+"),
            Field("match", "string", "0+", nullable="0+"),
        )))),
        Field("strict", "bool", "0+"),
    ),
)

DESCRIBE_CLIENT_QUOTAS_RESPONSE = Message(
    "DescribeClientQuotasResponse",
    "response",
    api_key=48,
    versions="0-1",
    flexible="1+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("entries", versions="0+", nullable="0+", type=Array(Struct("EntryData", (
            Field("entity", versions="0+", type=Array(Struct("EntityData", (
                Field("entity_type", "string", "0+"),
                Field("entity_name", "string", "0+", nullable="0+"),
            )))),
            Field("values", versions="0+", type=Array(Struct("ValueData", (
                Field("key", "string", "0+"),
                Field("value", "float64", "0+"),
            )))),
        )))),
    ),
)

ALTER_CLIENT_QUOTAS_REQUEST = Message(
    "AlterClientQuotasRequest",
    "request",
    api_key=49,
    versions="0-1",
    flexible="1+",
    fields=(
        Field("entries", versions="0+", type=Array(Struct("EntryData", (
            Field("entity", versions="0+", type=Array(Struct("EntityData", (
                Field("entity_type", "string", "0+"),
                Field("entity_name", "string", "0+", nullable="0+"),
            )))),
            Field("ops", versions="0+", type=Array(Struct("OpData", (
                Field("key", "string", "0+"),
                Field("value", "float64", "0+"),
                Field("remove", "bool", "0+"),
            )))),
        )))),
        Field("validate_only", "bool", "0+"),
    ),
)

ALTER_CLIENT_QUOTAS_RESPONSE = Message(
    "AlterClientQuotasResponse",
    "response",
    api_key=49,
    versions="0-1",
    flexible="1+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("entries", versions="0+", type=Array(Struct("EntryData", (
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Field("entity", versions="0+", type=Array(Struct("EntityData", (
                Field("entity_type", "string", "0+"),
                Field("entity_name", "string", "0+", nullable="0+"),
            )))),
        )))),
    ),
)

ALTER_PARTITION_REASSIGNMENTS_REQUEST = Message(
    "AlterPartitionReassignmentsRequest",
    "request",
    api_key=45,
    versions="0",
    flexible="0+",
    fields=(
        Field("timeout_ms", "int32", "0+", default=60000),
        Field("topics", versions="0+", type=Array(Struct("ReassignableTopic", (
            Field("name", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("ReassignablePartition", (
                Field("partition_index", "int32", "0+"),
                Field("replicas", Array("int32"), "0+", nullable="0+", default=None),
            )))),
        )))),
    ),
)

ALTER_PARTITION_REASSIGNMENTS_RESPONSE = Message(
    "AlterPartitionReassignmentsResponse",
    "response",
    api_key=45,
    versions="0",
    flexible="0+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("responses", versions="0+", type=Array(Struct("ReassignableTopicResponse", (
            Field("name", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("ReassignablePartitionResponse", (
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+"),
            )))),
        )))),
    ),
)

LIST_PARTITION_REASSIGNMENTS_REQUEST = Message(
    "ListPartitionReassignmentsRequest",
    "request",
    api_key=46,
    versions="0",
    flexible="0+",
    fields=(
        Field("timeout_ms", "int32", "0+", default=60000),
        Field("topics", versions="0+", nullable="0+", type=Array(Struct("ListPartitionReassignmentsTopics", (
            Field("name", "string", "0+"),
            Field("partition_indexes", Array("int32"), "0+"),
        ))), default=None),
    ),
)

LIST_PARTITION_REASSIGNMENTS_RESPONSE = Message(
    "ListPartitionReassignmentsResponse",
    "response",
    api_key=46,
    versions="0",
    flexible="0+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("topics", versions="0+", type=Array(Struct("OngoingTopicReassignment", (
            Field("name", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("OngoingPartitionReassignment", (
                Field("partition_index", "int32", "0+"),
                Field("replicas", Array("int32"), "0+"),
                Field("adding_replicas", Array("int32"), "0+"),
                Field("removing_replicas", Array("int32"), "0+"),
            )))),
        )))),
    ),
)

MESSAGES = (
    DESCRIBE_CLIENT_QUOTAS_REQUEST,
    DESCRIBE_CLIENT_QUOTAS_RESPONSE,
    ALTER_CLIENT_QUOTAS_REQUEST,
    ALTER_CLIENT_QUOTAS_RESPONSE,
    CREATE_TOPICS_REQUEST,
    CREATE_TOPICS_RESPONSE,
    DELETE_TOPICS_REQUEST,
    DELETE_TOPICS_RESPONSE,
    CREATE_PARTITIONS_REQUEST,
    CREATE_PARTITIONS_RESPONSE,
    DELETE_RECORDS_REQUEST,
    DELETE_RECORDS_RESPONSE,
    DESCRIBE_CONFIGS_REQUEST,
    DESCRIBE_CONFIGS_RESPONSE,
    ALTER_CONFIGS_REQUEST,
    ALTER_CONFIGS_RESPONSE,
    INCREMENTAL_ALTER_CONFIGS_REQUEST,
    INCREMENTAL_ALTER_CONFIGS_RESPONSE,
    ALTER_PARTITION_REASSIGNMENTS_REQUEST,
    ALTER_PARTITION_REASSIGNMENTS_RESPONSE,
    LIST_PARTITION_REASSIGNMENTS_REQUEST,
    LIST_PARTITION_REASSIGNMENTS_RESPONSE,
)
