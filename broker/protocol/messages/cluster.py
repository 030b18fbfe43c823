"""Cluster metadata and version negotiation: ApiVersions, Metadata, DescribeCluster.

Transcribed from Apache Kafka's JSON message specs (clients/src/main/resources/common/message/ and
group-coordinator/src/main/resources/common/message/, trunk of 2024-10-25), restricted to the versions
this codec supports. Field names are the specs' names in snake_case."""

from broker.protocol.schema import Array, Field, Message, Struct

API_VERSIONS_REQUEST = Message(
    "ApiVersionsRequest",
    "request",
    api_key=18,
    versions="0-3",
    flexible="3+",
    fields=(
        Field("client_software_name", "string", "3+"),
        Field("client_software_version", "string", "3+"),
    ),
)

API_VERSIONS_RESPONSE = Message(
    "ApiVersionsResponse",
    "response",
    api_key=18,
    versions="0-3",
    flexible="3+",
    fields=(
        Field("error_code", "int16", "0+"),
        Field("api_keys", versions="0+", type=Array(Struct("ApiVersion", (
            Field("api_key", "int16", "0+"),
            Field("min_version", "int16", "0+"),
            Field("max_version", "int16", "0+"),
        )))),
        Field("throttle_time_ms", "int32", "1+"),
        Field("supported_features", versions="3+", tag=0, type=Array(Struct("SupportedFeatureKey", (
            Field("name", "string", "3+"),
            Field("min_version", "int16", "3+"),
            Field("max_version", "int16", "3+"),
        )))),
        Field("finalized_features_epoch", "int64", "3+", default=-1, tag=1),
        Field("finalized_features", versions="3+", tag=2, type=Array(Struct("FinalizedFeatureKey", (
            Field("name", "string", "3+"),
            Field("max_version_level", "int16", "3+"),
            Field("min_version_level", "int16", "3+"),
        )))),
        Field("zk_migration_ready", "bool", "3+", tag=3, default=False),
    ),
)

METADATA_REQUEST = Message(
    "MetadataRequest",
    "request",
    api_key=3,
    versions="0-12",
    flexible="9+",
    fields=(
        Field("topics", versions="0+", nullable="1+", type=Array(Struct("MetadataRequestTopic", (
            Field("topic_id", "uuid", "10+"),
            Field("name", "string", "0+", nullable="10+"),
        )))),
        Field("allow_auto_topic_creation", "bool", "4+", default=True),
        Field("include_cluster_authorized_operations", "bool", "8-10"),
        Field("include_topic_authorized_operations", "bool", "8+"),
    ),
)

METADATA_RESPONSE = Message(
    "MetadataResponse",
    "response",
    api_key=3,
    versions="0-12",
    flexible="9+",
    fields=(
        Field("throttle_time_ms", "int32", "3+"),
        Field("brokers", versions="0+", type=Array(Struct("MetadataResponseBroker", (
            Field("node_id", "int32", "0+"),
            Field("host", "string", "0+"),
            Field("port", "int32", "0+"),
            Field("rack", "string", "1+", nullable="1+", default=None),
        )))),
        Field("cluster_id", "string", "2+", nullable="2+", default=None),
        Field("controller_id", "int32", "1+", default=-1),
        Field("topics", versions="0+", type=Array(Struct("MetadataResponseTopic", (
            Field("error_code", "int16", "0+"),
            Field("name", "string", "0+", nullable="12+"),
            Field("topic_id", "uuid", "10+"),
            Field("is_internal", "bool", "1+", default=False),
            Field("partitions", versions="0+", type=Array(Struct("MetadataResponsePartition", (
                Field("error_code", "int16", "0+"),
                Field("partition_index", "int32", "0+"),
                Field("leader_id", "int32", "0+"),
                Field("leader_epoch", "int32", "7+", default=-1),
                Field("replica_nodes", Array("int32"), "0+"),
                Field("isr_nodes", Array("int32"), "0+"),
                Field("offline_replicas", Array("int32"), "5+"),
            )))),
            Field("topic_authorized_operations", "int32", "8+", default=-2147483648),
        )))),
        Field("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
    ),
)

DESCRIBE_CLUSTER_REQUEST = Message(
    "DescribeClusterRequest",
    "request",
    api_key=60,
    versions="0-2",
    flexible="0+",
    fields=(
        Field("include_cluster_authorized_operations", "bool", "0+"),
        Field("endpoint_type", "int8", "1+", default=1),
        Field("include_fenced_brokers", "bool", "2+"),
    ),
)

DESCRIBE_CLUSTER_RESPONSE = Message(
    "DescribeClusterResponse",
    "response",
    api_key=60,
    versions="0-2",
    flexible="0+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
        Field("endpoint_type", "int8", "1+", default=1),
        Field("cluster_id", "string", "0+"),
        Field("controller_id", "int32", "0+", default=-1),
        Field("brokers", versions="0+", type=Array(Struct("DescribeClusterBroker", (
            Field("broker_id", "int32", "0+"),
            Field("host", "string", "0+"),
            Field("port", "int32", "0+"),
            Field("rack", "string", "0+", nullable="0+", default=None),
            Field("is_fenced", "bool", "2+"),
        )))),
        Field("cluster_authorized_operations", "int32", "0+", default=-2147483648),
    ),
)

MESSAGES = (
    API_VERSIONS_REQUEST,
    API_VERSIONS_RESPONSE,
    METADATA_REQUEST,
    METADATA_RESPONSE,
    DESCRIBE_CLUSTER_REQUEST,
    DESCRIBE_CLUSTER_RESPONSE,
)
