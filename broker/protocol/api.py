"""The Kafka protocol codec's public entry points.

Bodies are plain dicts and lists. Keys are Kafka's JSON field names converted to snake_case: an underscore
goes before every capital letter that follows a lower-case letter or digit, then everything is lowered
(ThrottleTimeMs -> throttle_time_ms, TopicId -> topic_id, IsrNodes -> isr_nodes). No field name in the
supported specs has an acronym written in capitals, so the rule has no exceptions.

Decoded bodies hold every field of the schema; a field absent from the decoded version has its default
(recursively), so handlers need not branch on versions to read a body. Encoding ignores keys of fields
that exist in other versions but not the encoded one; a key that is a field of no version raises
:class:`UnknownFieldError`. A response or data struct takes the default for a missing key only where Kafka's
spec gives the field a default or the field is tagged; any other missing field of the encoded version raises
:class:`MissingFieldError` (a misspelled or forgotten field of an answer must not go out as zero: an
error_code of 0 is a success). A request takes the default for any missing key. Defaults (what decoding fills in): the spec's default, else None for fields nullable in all their versions, else 0 / 0.0 / False / "" / b"" / the zero
UUID / [] / a dict of defaults. ``bytes`` and ``records`` decode to ``bytes`` (or None); encoding takes
any bytes-like object and copies it only into the frame. UUIDs are 16-byte ``bytes``.

Like Kafka, request decoding ignores bytes after the body (Kafka's generated readers stop where the
schema ends and the request path never checks what is left).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from enum import IntEnum
from typing import Any, cast

from broker.protocol import headers, messages, types
from broker.protocol.headers import RequestHeader
from broker.protocol.schema import FieldError, Message, MissingFieldError, UnknownFieldError
from broker.protocol.types import (
    DecodeError,
    EncodeError,
    ProtocolError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)

__all__ = [
    "SCHEMA_VERSIONS",
    "ApiKey",
    "DecodeError",
    "EncodeError",
    "FieldError",
    "MissingFieldError",
    "ProtocolError",
    "RequestHeader",
    "UnknownApiKeyError",
    "UnknownFieldError",
    "UnsupportedVersionError",
    "decode_request",
    "decode_response",
    "decode_struct",
    "encode_request",
    "encode_response",
    "encode_response_chunks",
    "encode_struct",
    "response_header_version",
]


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_QUORUM = 55
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_DESCRIBE = 77
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    DESCRIBE_SHARE_GROUP_OFFSETS = 90


def _check_schema_tables() -> dict[int, tuple[int, int]]:
    if set(messages.REQUESTS) != set(ApiKey) or set(messages.RESPONSES) != set(ApiKey):
        raise RuntimeError("every ApiKey needs a request and a response schema, and only they")
    ranges = {}
    for key, request in messages.REQUESTS.items():
        response = messages.RESPONSES[key]
        if request.versions != response.versions or request.flexible != response.flexible:
            raise RuntimeError(f"{request.name} and {response.name} disagree on their versions")
        ranges[key] = request.version_range()
    return ranges


SCHEMA_VERSIONS: dict[int, tuple[int, int]] = _check_schema_tables()
"""api_key -> (lowest, highest) version the codec can encode and decode."""

_UNSUPPORTED_VERSION_ERROR_CODE = 35

# What a body decoder can raise besides DecodeError on bytes that do not follow the schema: struct reads
# past the end (struct.error), and invalid values met while building Python objects.
_DECODE_FAILURES = (struct.error, ValueError, IndexError, OverflowError)
# What an encoder raises on a body that does not fit the schema (wrong types, out-of-range integers,
# None where a value is required).
_ENCODE_FAILURES = (struct.error, TypeError, AttributeError, ValueError, OverflowError)


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible response versions, else 0; ApiVersions always uses 0 so that a client can read the
    header (and the error code) whatever version it asked for."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if messages.RESPONSES[api_key].is_flexible(api_version) else 0


def _schema(table: dict[int, Message], api_key: int, api_version: int) -> Message:
    schema = table.get(api_key)
    if schema is None:
        raise UnknownApiKeyError(f"no schema for api key {api_key}")
    if api_version not in schema.versions:
        raise UnsupportedVersionError(f"{schema.name} has no version {api_version} (supported {schema.versions})")
    return schema


def _byte_view(data: types.Buffer) -> memoryview:
    view = memoryview(data)
    return view if view.itemsize == 1 and view.ndim == 1 else view.cast("B")


def _encode_body(schema: Message, version: int, out: list[types.Chunk], body: Mapping[str, Any]) -> None:
    try:
        schema.compiled(version).encode(out, body)
    except EncodeError:
        raise
    except _ENCODE_FAILURES as exc:
        raise EncodeError(f"cannot encode {schema.name} v{version}: {type(exc).__name__}: {exc}") from exc


def _framed(out: list[types.Chunk]) -> bytes:
    """Join chunks whose first element is a placeholder for the int32 size prefix."""
    out[0] = types.INT32.pack(sum(map(len, out)))
    for index, chunk in enumerate(out):
        if type(chunk) is types.FileRegion:
            out[index] = chunk.read()
            if len(out[index]) != len(chunk):
                raise EncodeError(f"log data shrank while being read ({len(out[index])} of {len(chunk)} bytes)")
    return _joined(out)


def _joined(out: list[types.Chunk]) -> bytes:
    """Chunks without a FileRegion, joined: regions are records read from the log, which only a Fetch
    response's body holds, and _framed reads them in first."""
    return b"".join(cast("list[types.Buffer]", out))


def _sized(out: list[types.Chunk]) -> list[types.Chunk]:
    """Chunks whose first element is a placeholder, with the int32 size prefix put in, left unjoined."""
    out[0] = types.INT32.pack(sum(map(len, out)))
    return out


def _decode_body(schema: Message, version: int, buf: memoryview, pos: int, header: RequestHeader | None) -> dict[str, Any]:
    try:
        body, _end = schema.compiled(version).decode(buf, pos)
    except DecodeError as exc:
        exc.header = header
        raise
    except _DECODE_FAILURES as exc:
        raise DecodeError(f"malformed {schema.name} v{version}: {exc}", header) from exc
    return body


def decode_request(frame: types.Buffer) -> tuple[RequestHeader, dict[str, Any]]:
    """Decode one request, given without its 4-byte size prefix.

    Raises DecodeError, UnknownApiKeyError or UnsupportedVersionError (all ProtocolError); the latter two,
    and DecodeErrors found after the header, carry the parsed header in ``.header``.
    """
    with _byte_view(frame) as buf:
        try:
            header, pos = headers.read_request_header_v1(buf)
        except DecodeError:
            raise
        except _DECODE_FAILURES as exc:
            raise DecodeError(f"malformed request header: {exc}") from exc
        schema = messages.REQUESTS.get(header.api_key)
        if schema is None:
            raise UnknownApiKeyError(f"unknown api key {header.api_key}", header)
        version = header.api_version
        if version not in schema.versions:
            raise UnsupportedVersionError(
                f"{schema.name} version {version} is not supported (supported {schema.versions})", header
            )
        if schema.is_flexible(version):
            try:
                pos = types.skip_tagged_fields(buf, pos)
            except DecodeError as exc:
                exc.header = header
                raise
        return header, _decode_body(schema, version, buf, pos, header)


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: dict[str, Any]
) -> bytes:
    """A whole request frame, size prefix included."""
    schema = _schema(messages.REQUESTS, api_key, api_version)
    out: list[types.Chunk] = [b""]
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    header_version = headers.request_header_version(schema.is_flexible(api_version))
    try:
        headers.write_request_header(out, header, header_version)
    except _ENCODE_FAILURES as exc:
        raise EncodeError(f"cannot encode request header {header}: {exc}") from exc
    _encode_body(schema, api_version, out, body)
    return _framed(out)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]) -> bytes:
    """A whole response frame, size prefix included, ready to write to the socket."""
    return _framed(_response_chunks(api_key, api_version, correlation_id, body))


def encode_response_chunks(api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]) -> list[types.Chunk]:
    """The frame of :func:`encode_response` as chunks: bytes-likes and :class:`~types.FileRegion` records,
    which the server sends from their files."""
    return _sized(_response_chunks(api_key, api_version, correlation_id, body))


def _response_chunks(api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]) -> list[types.Chunk]:
    schema = _schema(messages.RESPONSES, api_key, api_version)
    out: list[types.Chunk] = [b""]
    try:
        headers.write_response_header(out, correlation_id, response_header_version(api_key, api_version))
    except _ENCODE_FAILURES as exc:
        raise EncodeError(f"cannot encode response header for correlation id {correlation_id!r}: {exc}") from exc
    _encode_body(schema, api_version, out, body)
    return out


def decode_response(api_key: int, api_version: int, frame: types.Buffer) -> tuple[int, dict[str, Any]]:
    """``(correlation_id, body)`` of a response given without its size prefix.

    An ApiVersions response carrying UNSUPPORTED_VERSION is decoded as v0 whatever version was asked
    for: that is the form brokers answer an ApiVersions request they cannot parse in (KIP-511).
    """
    schema = _schema(messages.RESPONSES, api_key, api_version)
    with _byte_view(frame) as buf:
        try:
            correlation_id, pos = headers.read_response_header(buf, response_header_version(api_key, api_version))
        except DecodeError:
            raise
        except _DECODE_FAILURES as exc:
            raise DecodeError(f"malformed response header: {exc}") from exc
        version = api_version
        if api_key == ApiKey.API_VERSIONS and len(buf) >= pos + 2:
            (error_code,) = types.INT16.unpack_from(buf, pos)
            if error_code == _UNSUPPORTED_VERSION_ERROR_CODE:
                version = 0
        return correlation_id, _decode_body(schema, version, buf, pos, None)


def _data_struct(name: str) -> Message:
    schema = messages.DATA_STRUCTS.get(name)
    if schema is None:
        raise ValueError(f"unknown data struct {name!r}; known: {', '.join(sorted(messages.DATA_STRUCTS))}")
    return schema


def encode_element(api_key: int, api_version: int, path: str, element: Mapping[str, Any]) -> types.Encoded:
    """One element of an array of structs of a response (``path``: the array's field, e.g. ``"topics"``),
    encoded now to be placed in a response body later, where the encoder writes it as it is."""
    schema = _schema(messages.RESPONSES, api_key, api_version)
    encoder = schema.compiled(api_version).element_encoders[f"{schema.name}.{path}"]
    out: list[types.Chunk] = []
    try:
        encoder(out, element)
    except EncodeError:
        raise
    except _ENCODE_FAILURES as exc:
        raise EncodeError(f"cannot encode {schema.name} v{api_version} {path}: {type(exc).__name__}: {exc}") from exc
    return types.Encoded(_joined(out))


def encode_struct(name: str, version: int, body: dict[str, Any]) -> bytes:
    """A data struct ("OffsetCommitValue", "ConsumerProtocolAssignment", ...) prefixed with its int16
    version, as it appears in ``__consumer_offsets`` records and in group member metadata."""
    schema = _data_struct(name)
    if version not in schema.versions:
        raise UnsupportedVersionError(f"{name} has no version {version} (supported {schema.versions})")
    out: list[types.Chunk] = [types.INT16.pack(version)]
    _encode_body(schema, version, out, body)
    return _joined(out)


def decode_struct(name: str, data: types.Buffer) -> tuple[int, dict[str, Any]]:
    """``(version, body)`` of a version-prefixed data struct; bytes after the struct are ignored.

    Raises UnsupportedVersionError for a version outside the schema (callers such as a
    ``__consumer_offsets`` reader skip those records, as Burrow does) and DecodeError for bad bytes.
    """
    schema = _data_struct(name)
    with _byte_view(data) as buf:
        if len(buf) < 2:
            raise DecodeError(f"{name} of {len(buf)} bytes has no version prefix")
        (version,) = types.INT16.unpack_from(buf, 0)
        if version not in schema.versions:
            raise UnsupportedVersionError(f"{name} version {version} is not supported (supported {schema.versions})")
        return version, _decode_body(schema, version, buf, 2, None)
