"""SASL authentication: SaslHandshake, SaslAuthenticate.

Transcribed from Apache Kafka's JSON message specs (clients/src/main/resources/common/message/ and
group-coordinator/src/main/resources/common/message/, trunk of 2024-10-25), restricted to the versions
this codec supports. Field names are the specs' names in snake_case."""

from broker.protocol.schema import Array, Field, Message

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
        Field("session_lifetime_ms", "int64", "1+"),
    ),
)

MESSAGES = (
    SASL_HANDSHAKE_REQUEST,
    SASL_HANDSHAKE_RESPONSE,
    SASL_AUTHENTICATE_REQUEST,
    SASL_AUTHENTICATE_RESPONSE,
)
