"""Request and response headers (Kafka's RequestHeader.json and ResponseHeader.json).

Request header v1 = api_key, api_version, correlation_id, client_id; v2 (flexible requests) adds a
tagged-field section. client_id stays a classic int16-length string in v2, so that any broker can read the
header of any request, whatever its version. Response header v0 = correlation_id; v1 (flexible
responses) adds a tagged-field section. Which header version goes with which API version is decided by
``broker.protocol.api`` (ApiVersions responses always use v0).

Field names follow the dataclass below rather than Kafka's ``request_api_key``/``request_api_version``.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.protocol import types
from broker.protocol.schema import Field, Message

REQUEST_HEADER = Message(
    "RequestHeader",
    "header",
    versions="1-2",
    flexible="2+",
    fields=(
        Field("api_key", "int16", "0+"),
        Field("api_version", "int16", "0+"),
        Field("correlation_id", "int32", "0+"),
        Field("client_id", "string", "1+", nullable="1+", compact="none"),
    ),
)

RESPONSE_HEADER = Message(
    "ResponseHeader",
    "header",
    versions="0-1",
    flexible="1+",
    fields=(Field("correlation_id", "int32", "0+"),),
)

_REQUEST_HEADER_FIXED_PART = 8  # api_key, api_version, correlation_id


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def request_header_version(flexible: bool) -> int:
    return 2 if flexible else 1


def read_request_header_v1(buf: types.Buffer) -> tuple[RequestHeader, int]:
    """The v1 part of a request header (v2 continues with a tagged-field section after it).

    Reading v1 first is what lets the caller look up the api_key and version before deciding whether a
    tagged section follows.
    """
    if len(buf) < _REQUEST_HEADER_FIXED_PART:
        raise types.DecodeError(f"request of {len(buf)} bytes is shorter than a request header")
    fields, pos = REQUEST_HEADER.compiled(1).decode(buf, 0)
    return RequestHeader(**fields), pos


def write_request_header(out: list[types.Chunk], header: RequestHeader, version: int) -> None:
    body = {
        "api_key": header.api_key,
        "api_version": header.api_version,
        "correlation_id": header.correlation_id,
        "client_id": header.client_id,
    }
    REQUEST_HEADER.compiled(version).encode(out, body)


def write_response_header(out: list[types.Chunk], correlation_id: int, version: int) -> None:
    RESPONSE_HEADER.compiled(version).encode(out, {"correlation_id": correlation_id})


def read_response_header(buf: types.Buffer, version: int) -> tuple[int, int]:
    """``(correlation_id, position of the body)``."""
    fields, pos = RESPONSE_HEADER.compiled(version).decode(buf, 0)
    return fields["correlation_id"], pos
