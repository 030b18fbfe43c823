"""ACLs: DescribeAcls, CreateAcls, DeleteAcls.

Transcribed from Apache Kafka's JSON message specs (clients/src/main/resources/common/message/), all
versions (v0 knows no pattern type: its ACLs are LITERAL). Field names are the specs' names in snake_case."""

from broker.protocol.schema import Array, Field, Message, Struct

LITERAL = 3


def _filter_fields() -> tuple[Field, ...]:
    return (
        Field("resource_type_filter", "int8", "0+"),
        Field("resource_name_filter", "string", "0+", nullable="0+"),
        Field("pattern_type_filter", "int8", "1+", default=LITERAL),
        Field("principal_filter", "string", "0+", nullable="0+"),
        Field("host_filter", "string", "0+", nullable="0+"),
        Field("operation", "int8", "0+"),
        Field("permission_type", "int8", "0+"),
    )


DESCRIBE_ACLS_REQUEST = Message("DescribeAclsRequest", "request", api_key=29, versions="0-3", flexible="2+",
                                fields=_filter_fields())

DESCRIBE_ACLS_RESPONSE = Message(
    "DescribeAclsResponse",
    "response",
    api_key=29,
    versions="0-3",
    flexible="2+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("resources", versions="0+", type=Array(Struct("DescribeAclsResource", (
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("pattern_type", "int8", "1+", default=LITERAL),
            Field("acls", versions="0+", type=Array(Struct("AclDescription", (
                Field("principal", "string", "0+"),
                Field("host", "string", "0+"),
                Field("operation", "int8", "0+"),
                Field("permission_type", "int8", "0+"),
            )))),
        )))),
    ),
)

CREATE_ACLS_REQUEST = Message(
    "CreateAclsRequest",
    "request",
    api_key=30,
    versions="0-3",
    flexible="2+",
    fields=(
        Field("creations", versions="0+", type=Array(Struct("AclCreation", (
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("resource_pattern_type", "int8", "1+", default=LITERAL),
            Field("principal", "string", "0+"),
            Field("host", "string", "0+"),
            Field("operation", "int8", "0+"),
            Field("permission_type", "int8", "0+"),
        )))),
    ),
)

CREATE_ACLS_RESPONSE = Message(
    "CreateAclsResponse",
    "response",
    api_key=30,
    versions="0-3",
    flexible="2+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("results", versions="0+", type=Array(Struct("AclCreationResult", (
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
        )))),
    ),
)

DELETE_ACLS_REQUEST = Message(
    "DeleteAclsRequest",
    "request",
    api_key=31,
    versions="0-3",
    flexible="2+",
    fields=(
        Field("filters", versions="0+", type=Array(Struct("DeleteAclsFilter", _filter_fields()))),
    ),
)

DELETE_ACLS_RESPONSE = Message(
    "DeleteAclsResponse",
    "response",
    api_key=31,
    versions="0-3",
    flexible="2+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("filter_results", versions="0+", type=Array(Struct("DeleteAclsFilterResult", (
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Field("matching_acls", versions="0+", type=Array(Struct("DeleteAclsMatchingAcl", (
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+"),
                Field("resource_type", "int8", "0+"),
                Field("resource_name", "string", "0+"),
                Field("pattern_type", "int8", "1+", default=LITERAL),
                Field("principal", "string", "0+"),
                Field("host", "string", "0+"),
                Field("operation", "int8", "0+"),
                Field("permission_type", "int8", "0+"),
            )))),
        )))),
    ),
)

MESSAGES = (
    DESCRIBE_ACLS_REQUEST,
    DESCRIBE_ACLS_RESPONSE,
    CREATE_ACLS_REQUEST,
    CREATE_ACLS_RESPONSE,
    DELETE_ACLS_REQUEST,
    DELETE_ACLS_RESPONSE,
)
