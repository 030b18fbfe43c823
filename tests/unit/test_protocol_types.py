"""Primitive wire types: varints, strings, bytes, lengths, tagged-field skipping."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol import types
from broker.protocol.types import DecodeError, EncodeError

QUICK = settings(max_examples=60, deadline=None)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_unsigned_varint_vectors(value, encoded):
    assert types.uvarint_bytes(value) == encoded
    assert types.read_uvarint(encoded, 0) == (value, len(encoded))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_zigzag_varint_vectors(value, encoded):
    assert types.varint_bytes(value) == encoded
    assert types.read_varint(encoded, 0) == (value, len(encoded))


@QUICK
@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(value):
    encoded = types.varint_bytes(value)
    assert types.read_varint(b"\xee" + encoded, 1) == (value, 1 + len(encoded))


@QUICK
@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value):
    encoded = types.varlong_bytes(value)
    assert len(encoded) <= 10
    assert types.read_varlong(encoded, 0) == (value, len(encoded))


@QUICK
@given(st.integers(0, 2**32 - 1))
def test_uvarint_round_trip(value):
    assert types.read_uvarint(types.uvarint_bytes(value), 0) == (value, len(types.uvarint_bytes(value)))


@pytest.mark.parametrize(
    "data",
    [b"", b"\x80", b"\xff\xff\xff\xff\xff\x01", b"\xff\xff\xff\xff\x1f"],
    ids=["empty", "truncated", "six-bytes", "over-32-bits"],
)
def test_bad_unsigned_varints(data):
    with pytest.raises(DecodeError):
        types.read_uvarint(data, 0)


def test_out_of_range_varints_cannot_be_encoded():
    for encode, value in [
        (types.uvarint_bytes, -1),
        (types.uvarint_bytes, 2**32),
        (types.varint_bytes, 2**31),
        (types.varlong_bytes, -(2**63) - 1),
    ]:
        with pytest.raises(EncodeError):
            encode(value)


def test_strings():
    assert types.read_string(b"\x00\x02hi!", 0) == ("hi", 4)
    assert types.read_nullable_string(b"\xff\xff", 0) == (None, 2)
    assert types.read_compact_string(b"\x03hi", 0) == ("hi", 3)
    assert types.read_compact_nullable_string(b"\x00", 0) == (None, 1)
    with pytest.raises(DecodeError):
        types.read_string(b"\xff\xff", 0)
    with pytest.raises(DecodeError):
        types.read_nullable_string(b"\xff\xfe", 0)
    with pytest.raises(DecodeError):
        types.read_compact_string(b"\x00", 0)
    with pytest.raises(DecodeError):
        types.read_string(b"\x00\x05hi", 0)
    with pytest.raises(DecodeError):
        types.read_compact_string(b"\x05hi", 0)


def test_invalid_utf8_is_replaced_as_java_does():
    assert types.read_string(b"\x00\x02\xffa", 0) == ("\ufffda", 4)


def test_string_writers():
    out: list = []
    types.write_string(out, "é")
    types.write_nullable_string(out, None)
    types.write_compact_string(out, "ab")
    types.write_compact_nullable_string(out, None)
    assert b"".join(out) == b"\x00\x02\xc3\xa9" + b"\xff\xff" + b"\x03ab" + b"\x00"


def test_bytes_readers_and_writers():
    assert types.read_bytes(b"\x00\x00\x00\x02ab", 0) == (b"ab", 6)
    assert types.read_nullable_bytes(b"\xff\xff\xff\xff", 0) == (None, 4)
    assert types.read_compact_nullable_bytes(b"\x00", 0) == (None, 1)
    with pytest.raises(DecodeError):
        types.read_bytes(b"\x00\x00\x00\x09ab", 0)
    with pytest.raises(DecodeError):
        types.read_compact_bytes(b"\x00", 0)
    blob = bytearray(b"xyz")
    out: list = []
    types.write_bytes(out, memoryview(blob))
    types.write_compact_bytes(out, b"q")
    blob[0:1] = b"X"  # the writer kept a view, not a copy: the change shows in the joined frame
    assert b"".join(out) == b"\x00\x00\x00\x03Xyz\x02q"


def test_wide_memoryviews_are_measured_in_bytes():
    import array

    words = array.array("i", [1, 2])
    out: list = []
    types.write_bytes(out, memoryview(words))
    assert b"".join(out)[:4] == b"\x00\x00\x00\x08"


def test_array_lengths_are_checked_against_the_bytes_left():
    assert types.read_array_length(b"\xff\xff\xff\xff", 0) == (-1, 4)
    assert types.read_array_length(b"\x00\x00\x00\x01x", 0) == (1, 4)
    with pytest.raises(DecodeError):
        types.read_array_length(b"\x7f\xff\xff\xff", 0)
    with pytest.raises(DecodeError):
        types.read_array_length(b"\xff\xff\xff\xfe", 0)
    assert types.read_compact_array_length(b"\x00", 0) == (-1, 1)
    with pytest.raises(DecodeError):
        types.read_compact_array_length(b"\x05\x00", 0)


def test_uuid():
    assert types.read_uuid(bytes(range(16)), 0) == (bytes(range(16)), 16)
    with pytest.raises(DecodeError):
        types.read_uuid(bytes(15), 0)
    with pytest.raises(EncodeError):
        types.write_uuid([], b"\x00" * 15)


def test_skip_tagged_fields():
    section = b"\x02" + b"\x01\x02ab" + b"\x09\x00"
    assert types.skip_tagged_fields(section + b"rest", 0) == len(section)
    with pytest.raises(DecodeError):
        types.skip_tagged_fields(b"\x01\x01\x05ab", 0)
