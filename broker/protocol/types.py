"""Primitive wire types of the Kafka protocol, and the errors raised when input does not follow them.

Readers take ``(buf, pos)`` and return ``(value, new_pos)``. ``buf`` is a ``memoryview`` of the frame (the
codec wraps its input once), so slicing is free and each string or blob is copied exactly once, into the
value handed back. Every reader checks bounds and raises :class:`DecodeError`; the struct module raises
``struct.error`` for fixed-width reads past the end, which the codec's entry points turn into DecodeError.

Writers append chunks to a list ``out`` that the caller joins once when the frame is complete, so a large
records blob given as a ``memoryview`` is copied only into the final frame. A records blob may also be a
:class:`FileRegion`, bytes still in log files: the server sends those straight from the file to the socket
(``sendfile``), and joining a frame reads them in.

Layouts (kafka-protocol.md section 1): big-endian fixed-width integers; ``string`` = int16 length + UTF-8
(-1 = null); ``bytes``/``records`` = int32 length (-1 = null); compact forms (flexible versions) carry an
unsigned varint of length + 1 (0 = null); arrays carry an int32 count (-1 = null) or, compact, uvarint
count + 1; ``uuid`` is 16 raw bytes. ``varint``/``varlong`` are zigzag-encoded and appear inside record
batches only.
"""

from __future__ import annotations

import base64
import os
import struct
import weakref
from collections.abc import Callable
from typing import Any, final

Buffer = bytes | bytearray | memoryview


class Encoded(bytes):
    """One element of an array of structs, already encoded (:func:`broker.protocol.api.encode_element`): the
    encoder writes its bytes as they are. Lets a handler reuse the encoding of an element that has not
    changed since the last answer (Metadata's topic entries)."""

    __slots__ = ()


@final  # so that a type() test narrows it out (_byte_view)
class FileRegion:
    """Bytes of files, as ``(fd, position, length)`` pieces, to be sent without copying them through Python.

    The region owns its descriptors (duplicates of the log's, so a segment closed or deleted meanwhile
    stays readable) and closes them once sent or read, or when it is garbage collected unsent; then it calls
    ``closed`` with their number (the log's budget of open files counts them).
    """

    __slots__ = ("pieces", "_length", "_closer", "__weakref__")

    def __init__(self, pieces: list[tuple[int, int, int]], closed: Callable[[int], None] | None = None) -> None:
        self.pieces = pieces
        self._length = sum(length for _fd, _position, length in pieces)
        self._closer = weakref.finalize(self, _close_all, [fd for fd, _position, _length in pieces], closed)

    def __len__(self) -> int:
        return self._length

    def read(self) -> bytes:
        """The region's bytes (short if a file shrank meanwhile), then closed."""
        try:
            return b"".join(os.pread(fd, length, position) for fd, position, length in self.pieces)
        finally:
            self.close()

    def close(self) -> None:
        self._closer()


# One piece of a frame being encoded: the writers append these to their ``out`` list.
Chunk = bytes | bytearray | memoryview | FileRegion


def _close_all(fds: list[int], closed: Callable[[int], None] | None) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    if closed is not None:
        closed(len(fds))


class ProtocolError(Exception):
    """Input that is not a valid Kafka request/response for the codec.

    ``header`` is the parsed request header when the error was found after the header was read.
    """

    def __init__(self, message: str, header: Any = None) -> None:
        super().__init__(message)
        self.header = header


class DecodeError(ProtocolError):
    """Truncated, malformed or otherwise undecodable bytes."""


class UnknownApiKeyError(ProtocolError):
    """A request whose api_key the codec has no schema for."""


class UnsupportedVersionError(ProtocolError):
    """An api_key (or data struct) the codec knows, at a version outside its schema's range."""


class EncodeError(ValueError):
    """A body that cannot be encoded: a value of the wrong type, out of range, or null where not nullable.

    This is a bug in the code building the body, not bad input from the network, so it is not a
    ProtocolError.
    """


class StringTooLongError(EncodeError):
    """A string longer than the 32767 bytes an int16 length can announce.

    Not always a bug: a request's string of invalid UTF-8 decodes with U+FFFD in place of each bad byte
    (as Java's does) and so can be up to three times as long when a response carries it back.
    """


INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")

# struct format characters of the fixed-width schema types; the compiler merges runs of adjacent
# fixed-width fields into one struct format so a partition entry is read with one unpack call.
FIXED_FORMATS: dict[str, str] = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "uint32": "I",
    "float64": "d",
    "bool": "?",
}

UUID_SIZE = 16
ZERO_UUID = bytes(UUID_SIZE)


def uuid_text(raw: bytes) -> str:
    """A Uuid as Kafka writes it (its tools, meta.properties): URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def uuid_from_text(text: str) -> bytes:
    """The inverse of :func:`uuid_text`; ValueError unless ``text`` is 16 bytes so written."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != UUID_SIZE:
        raise ValueError(f"{text!r} is not a Uuid")
    return raw

NULL_INT16_LENGTH = INT16.pack(-1)
NULL_INT32_LENGTH = INT32.pack(-1)
NULL_COMPACT_LENGTH = b"\x00"
EMPTY_TAGGED_FIELDS = b"\x00"

# Unsigned varints below 128 are one byte; lengths and counts are nearly always that small.
SMALL_UVARINTS = tuple(bytes((n,)) for n in range(128))

_MAX_UVARINT32_BYTES = 5


def _truncated(what: str, pos: int, needed: int, buf: Buffer) -> DecodeError:
    return DecodeError(f"{what} at byte {pos} needs {needed} bytes, {len(buf) - pos} left")


# ----- unsigned and zigzag varints ---------------------------------------------------------------


def uvarint_bytes(value: int) -> bytes:
    """The unsigned-varint encoding of ``value`` (0 <= value < 2**32)."""
    if 0 <= value < 128:
        return SMALL_UVARINTS[value]
    if value < 0 or value >= 1 << 32:
        raise EncodeError(f"unsigned varint out of range: {value}")
    return _varint_bytes(value)


def _varint_bytes(value: int) -> bytes:
    encoded = bytearray()
    while value >= 0x80:
        encoded.append((value & 0x7F) | 0x80)
        value >>= 7
    encoded.append(value)
    return bytes(encoded)


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 32 bits (5 bytes), as Kafka's readUnsignedVarint."""
    if pos < len(buf):
        byte = buf[pos]
        if byte < 0x80:
            return byte, pos + 1
    return _read_multibyte_uvarint(buf, pos)


def _read_multibyte_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(buf)
    for index in range(pos, pos + _MAX_UVARINT32_BYTES):
        if index >= end:
            raise _truncated("unsigned varint", pos, index - pos + 1, buf)
        byte = buf[index]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if result >= 1 << 32:
                raise DecodeError(f"unsigned varint at byte {pos} exceeds 32 bits")
            return result, index + 1
        shift += 7
    raise DecodeError(f"unsigned varint at byte {pos} is longer than {_MAX_UVARINT32_BYTES} bytes")


def _read_unsigned_varlong(buf: Buffer, pos: int, max_bytes: int, what: str) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(buf)
    for index in range(pos, pos + max_bytes):
        if index >= end:
            raise _truncated(what, pos, index - pos + 1, buf)
        byte = buf[index]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, index + 1
        shift += 7
    raise DecodeError(f"{what} at byte {pos} is longer than {max_bytes} bytes")


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """A zigzag-encoded signed 32-bit varint (record fields)."""
    raw, pos = _read_unsigned_varlong(buf, pos, 5, "varint")
    if raw >= 1 << 32:
        raise DecodeError("varint exceeds 32 bits")
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """A zigzag-encoded signed 64-bit varint (record fields)."""
    raw, pos = _read_unsigned_varlong(buf, pos, 10, "varlong")
    if raw >= 1 << 64:
        raise DecodeError("varlong exceeds 64 bits")
    return (raw >> 1) ^ -(raw & 1), pos


def varint_bytes(value: int) -> bytes:
    """The zigzag varint encoding of a signed 32-bit value."""
    if not -(1 << 31) <= value < 1 << 31:
        raise EncodeError(f"varint out of range: {value}")
    return _varint_bytes(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def varlong_bytes(value: int) -> bytes:
    """The zigzag varint encoding of a signed 64-bit value."""
    if not -(1 << 63) <= value < 1 << 63:
        raise EncodeError(f"varlong out of range: {value}")
    return _varint_bytes(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


# ----- lengths ----------------------------------------------------------------------------------


def read_array_length(buf: Buffer, pos: int) -> tuple[int, int]:
    """An int32 element count; -1 means null. Like Kafka, a count larger than the bytes left is rejected
    before anything is allocated (every element takes at least one byte, except empty structs)."""
    (count,) = INT32.unpack_from(buf, pos)
    pos += 4
    if count < -1:
        raise DecodeError(f"negative array length {count} at byte {pos - 4}")
    if count > len(buf) - pos:
        raise DecodeError(f"array of {count} elements at byte {pos - 4} but only {len(buf) - pos} bytes left")
    return count, pos


def read_compact_array_length(buf: Buffer, pos: int) -> tuple[int, int]:
    """A compact element count (uvarint count + 1); -1 means null."""
    start = pos
    raw, pos = read_uvarint(buf, pos)
    count = raw - 1
    if count > len(buf) - pos:
        raise DecodeError(f"array of {count} elements at byte {start} but only {len(buf) - pos} bytes left")
    return count, pos


def array_length_bytes(count: int) -> bytes:
    return INT32.pack(count)


def _sized_readers(size: struct.Struct, what: str, take: Callable[[Buffer, int, int, str], tuple[Any, int]]
                   ) -> tuple[Callable[[Buffer, int], tuple[Any, int]], ...]:
    """The four readers of a ``what`` (plain, nullable, compact, compact nullable): a length in ``size`` (or a
    varint of length + 1 when compact; -1 or 0 for null) before the bytes, handed back as ``take`` makes them."""
    compact_what = f"compact {what}"
    unpack, width = size.unpack_from, size.size

    def read(buf: Buffer, pos: int) -> tuple[Any, int]:
        (length,) = unpack(buf, pos)
        if length < 0:
            raise DecodeError(f"null or negative-length non-nullable {what} at byte {pos}")
        return take(buf, pos + width, length, what)

    def read_nullable(buf: Buffer, pos: int) -> tuple[Any, int]:
        (length,) = unpack(buf, pos)
        if length < 0:
            if length == -1:
                return None, pos + width
            raise DecodeError(f"negative {what} length {length} at byte {pos}")
        return take(buf, pos + width, length, what)

    def read_compact(buf: Buffer, pos: int) -> tuple[Any, int]:
        start = pos
        raw, pos = read_uvarint(buf, pos)
        if raw == 0:
            raise DecodeError(f"null non-nullable {compact_what} at byte {start}")
        return take(buf, pos, raw - 1, compact_what)

    def read_compact_nullable(buf: Buffer, pos: int) -> tuple[Any, int]:
        raw, pos = read_uvarint(buf, pos)
        if raw == 0:
            return None, pos
        return take(buf, pos, raw - 1, compact_what)

    return read, read_nullable, read_compact, read_compact_nullable


# ----- strings ----------------------------------------------------------------------------------
MAX_STRING_BYTES = 0x7FFF
# Invalid UTF-8 is replaced (U+FFFD), not rejected: Kafka decodes strings with Java's String
# constructor, which does the same, so a client Kafka accepts is accepted here too.


def _slice_text(buf: Buffer, pos: int, length: int, what: str) -> tuple[str, int]:
    end = pos + length
    if end > len(buf):
        raise _truncated(what, pos, length, buf)
    return str(buf[pos:end], "utf-8", "replace"), end


read_string, read_nullable_string, read_compact_string, read_compact_nullable_string = _sized_readers(
    INT16, "string", _slice_text)


def fits_a_string(value: str) -> bool:
    """True if ``value`` can be written as a string (a request's string may not: see StringTooLongError)."""
    return len(value) <= MAX_STRING_BYTES // 3 or len(value.encode()) <= MAX_STRING_BYTES


def write_string(out: list[Chunk], value: str) -> None:
    encoded = value.encode()
    if len(encoded) > MAX_STRING_BYTES:
        raise StringTooLongError(f"a string of {len(encoded)} bytes is longer than a string can be "
                                 f"({MAX_STRING_BYTES})")
    out.append(INT16.pack(len(encoded)))
    out.append(encoded)


def write_nullable_string(out: list[Chunk], value: str | None) -> None:
    if value is None:
        out.append(NULL_INT16_LENGTH)
    else:
        write_string(out, value)


def write_compact_string(out: list[Chunk], value: str) -> None:
    encoded = value.encode()
    out.append(uvarint_bytes(len(encoded) + 1))
    out.append(encoded)


def write_compact_nullable_string(out: list[Chunk], value: str | None) -> None:
    if value is None:
        out.append(NULL_COMPACT_LENGTH)
    else:
        write_compact_string(out, value)


# ----- bytes and records ------------------------------------------------------------------------
# Both decode to ``bytes`` (one copy out of the frame) and encode from any bytes-like object without
# copying it until the frame is joined. ``records`` shares these readers and writers: only the
# schema type differs, except in requests, where a records blob decodes to a ``memoryview`` of the
# frame (the ``*_records_view`` readers): a Produce request's batches go to the log without a copy.


def _slice_bytes(buf: Buffer, pos: int, length: int, what: str) -> tuple[bytes, int]:
    end = pos + length
    if end > len(buf):
        raise _truncated(what, pos, length, buf)
    return bytes(buf[pos:end]), end


def _slice_view(buf: Buffer, pos: int, length: int, what: str) -> tuple[memoryview, int]:
    end = pos + length
    if end > len(buf):
        raise _truncated(what, pos, length, buf)
    return memoryview(buf)[pos:end], end


read_bytes, read_nullable_bytes, read_compact_bytes, read_compact_nullable_bytes = _sized_readers(
    INT32, "bytes", _slice_bytes)
(read_records_view, read_nullable_records_view, read_compact_records_view,
 read_compact_nullable_records_view) = _sized_readers(INT32, "bytes", _slice_view)


def _byte_view(value: Buffer | FileRegion) -> bytes | memoryview | FileRegion:
    """``value`` as something whose len() is its size in bytes, without copying it."""
    if type(value) is bytes or type(value) is FileRegion:
        return value
    view = memoryview(value)
    if view.itemsize != 1 or view.ndim != 1:
        view = view.cast("B")
    return view


def write_bytes(out: list[Chunk], value: Buffer | FileRegion) -> None:
    data = _byte_view(value)
    out.append(INT32.pack(len(data)))
    out.append(data)


def write_nullable_bytes(out: list[Chunk], value: Buffer | FileRegion | None) -> None:
    if value is None:
        out.append(NULL_INT32_LENGTH)
    else:
        write_bytes(out, value)


def write_compact_bytes(out: list[Chunk], value: Buffer | FileRegion) -> None:
    data = _byte_view(value)
    out.append(uvarint_bytes(len(data) + 1))
    out.append(data)


def write_compact_nullable_bytes(out: list[Chunk], value: Buffer | FileRegion | None) -> None:
    if value is None:
        out.append(NULL_COMPACT_LENGTH)
    else:
        write_compact_bytes(out, value)


# ----- uuid -------------------------------------------------------------------------------------


def read_uuid(buf: Buffer, pos: int) -> tuple[bytes, int]:
    return _slice_bytes(buf, pos, UUID_SIZE, "uuid")


def write_uuid(out: list[Chunk], value: bytes) -> None:
    if len(value) != UUID_SIZE:
        raise EncodeError(f"a uuid is {UUID_SIZE} bytes, got {len(value)}")
    out.append(bytes(value))


# ----- tagged fields ----------------------------------------------------------------------------


def read_tag_header(buf: Buffer, pos: int) -> tuple[int, int, int]:
    """One tagged field's ``(tag, start of its value, end of its value)``."""
    tag, pos = read_uvarint(buf, pos)
    size, pos = read_uvarint(buf, pos)
    end = pos + size
    if end > len(buf):
        raise _truncated(f"tagged field {tag}", pos, size, buf)
    return tag, pos, end


def skip_tagged_fields(buf: Buffer, pos: int) -> int:
    """Skip a tagged-field section whose tags are all unknown to the reader."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, _start, pos = read_tag_header(buf, pos)
    return pos
