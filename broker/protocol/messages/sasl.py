"""SASL authentication: SaslHandshake, SaslAuthenticate.

Transcribed from Apache Kafka's JSON message specs (clients/src/main/resources/common/message/ and
group-coordinator/src/main/resources/common/message/, trunk of 2024-10-25), restricted to the versions
this codec supports. Field names are the specs' names in snake_case."""

from broker.protocol.schema import Array, Field, Message, Struct

SASL_HANDSHAKE_REQUEST = Message(
    "SaslHandshakeRequest",
    "request",
    api_key=17,
    versions="0-1",
    flexible="none",
    fields=(
        Field("mechanism", "string", "0+"),
    ),
)

SASL_HANDSHAKE_RESPONSE = Message(
    "SaslHandshakeResponse",
    "response",
    api_key=17,
    versions="0-1",
    flexible="none",
    fields=(
        Field("error_code", "int16", "0+"),
        Field("mechanisms", Array("string"), "0+"),
    ),
)

SASL_AUTHENTICATE_REQUEST = Message(
    "SaslAuthenticateRequest",
    "request",
    api_key=36,
    versions="0-2",
    flexible="2+",
    fields=(
        Field("auth_bytes", "bytes", "0+"),
    ),
)

SASL_AUTHENTICATE_RESPONSE = Message(
    "SaslAuthenticateResponse",
    "response",
    api_key=36,
    versions="0-2",
    flexible="2+",
    fields=(
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("auth_bytes", "bytes", "0+"),
        Field("session_lifetime_ms", "int64", "1+", default=0),
    ),
)

DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST = Message(
    "DescribeUserScramCredentialsRequest",
    "request",
    api_key=50,
    versions="0",
    flexible="0+",
    fields=(
        Field("users", versions="0+", nullable="0+", type=Array(Struct("UserName", (
            Field("name", "string", "0+"),
        )))),
    ),
)

DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE = Message(
    "DescribeUserScramCredentialsResponse",
    "response",
    api_key=50,
    versions="0",
    flexible="0+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("results", versions="0+", type=Array(Struct("DescribeUserScramCredentialsResult", (
            Field("user", "string", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Field("credential_infos", versions="0+", type=Array(Struct("CredentialInfo", (
                Field("mechanism", "int8", "0+"),
                Field("iterations", "int32", "0+"),
            )))),
        )))),
    ),
)

ALTER_USER_SCRAM_CREDENTIALS_REQUEST = Message(
    "AlterUserScramCredentialsRequest",
    "request",
    api_key=51,
    versions="0",
    flexible="0+",
    fields=(
        Field("deletions", versions="0+", type=Array(Struct("ScramCredentialDeletion", (
            Field("name", "string", "0+"),
            Field("mechanism", "int8", "0+"),
        )))),
        Field("upsertions", versions="0+", type=Array(Struct("ScramCredentialUpsertion", (
            Field("name", "string", "0+"),
            Field("mechanism", "int8", "0+"),
            Field("iterations", "int32", "0+"),
            Field("salt", "bytes", "0+"),
            Field("salted_password", "bytes", "0+"),
        )))),
    ),
)

ALTER_USER_SCRAM_CREDENTIALS_RESPONSE = Message(
    "AlterUserScramCredentialsResponse",
    "response",
    api_key=51,
    versions="0",
    flexible="0+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("results", versions="0+", type=Array(Struct("AlterUserScramCredentialsResult", (
            Field("user", "string", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
        )))),
    ),
)

MESSAGES = (
    DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST,
    DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE,
    ALTER_USER_SCRAM_CREDENTIALS_REQUEST,
    ALTER_USER_SCRAM_CREDENTIALS_RESPONSE,
    SASL_HANDSHAKE_REQUEST,
    SASL_HANDSHAKE_RESPONSE,
    SASL_AUTHENTICATE_REQUEST,
    SASL_AUTHENTICATE_RESPONSE,
)
