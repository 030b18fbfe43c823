"""`__consumer_offsets` layouts byte for byte (kafka-protocol.md section 5), and the group -> partition hash."""

from __future__ import annotations

import struct

import pytest
from group_harness import subscription
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.groups.hashing import java_string_hash, kafka_abs, offsets_partition_for
from broker.groups.offsets import OffsetAndMetadata
from broker.protocol import consumer_offsets
from broker.protocol.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataRecord,
    MemberRecord,
    OffsetCommitKey,
    OffsetsRecordError,
)


def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def i64(n: int) -> bytes:
    return struct.pack(">q", n)


def string(s: str | None) -> bytes:
    if s is None:
        return i16(-1)
    raw = s.encode()
    return i16(len(raw)) + raw


def blob(b: bytes) -> bytes:
    return i32(len(b)) + b


MEMBER = MemberRecord(
    member_id="rdkafka-1",
    group_instance_id="host-a",
    client_id="rdkafka",
    client_host="/10.0.0.7",
    rebalance_timeout_ms=300000,
    session_timeout_ms=45000,
    subscription=b"\x00\x00sub",
    assignment=b"\x00\x00asg",
)
GROUP = GroupMetadataRecord(
    protocol_type="consumer",
    generation=7,
    protocol="range",
    leader="rdkafka-1",
    current_state_timestamp=1_700_000_000_123,
    members=(MEMBER,),
)


# --- hashing ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group", "hash_code", "partition"),
    [
        ("", 0, 0),
        ("foo", 101574, 24),
        ("my-group", -1906497762, 12),
        ("test-group", 627841412, 12),
        ("polygenelubricants", -2147483648, 0),
        ("group-é", None, 33),
        ("g😀", None, 32),
    ],
)
def test_partition_vectors(group, hash_code, partition):
    if hash_code is not None:
        assert java_string_hash(group) == hash_code
    assert offsets_partition_for(group, 50) == partition


def test_kafka_abs_maps_int_min_to_zero():
    assert kafka_abs(-(2**31)) == 0 and kafka_abs(-5) == 5 and kafka_abs(5) == 5


@settings(deadline=None, max_examples=200)
@given(st.text())
def test_hash_is_a_signed_int32_and_partition_in_range(group):
    h = java_string_hash(group)
    assert -(2**31) <= h < 2**31
    assert 0 <= offsets_partition_for(group, 50) < 50


def test_hash_of_a_surrogate_pair_uses_utf16_code_units():
    # U+1F600 is the pair D83D DE00 in UTF-16
    assert java_string_hash("😀") == (31 * 0xD83D + 0xDE00)


# --- offset commits -----------------------------------------------------------------------------------------


def test_offset_commit_key_v1():
    assert consumer_offsets.offset_commit_key("grp", "orders", 7) == i16(1) + string("grp") + string("orders") + i32(7)


def test_offset_commit_value_v3():
    value = consumer_offsets.offset_commit_value(
        OffsetAndMetadata(offset=1234, leader_epoch=5, metadata="meta", commit_timestamp=1_700_000_000_999)
    )
    assert value == i16(3) + i64(1234) + i32(5) + string("meta") + i64(1_700_000_000_999)


def test_offset_commit_value_v1_when_the_commit_sets_an_expire_time():
    value = consumer_offsets.offset_commit_value(
        OffsetAndMetadata(
            offset=42, leader_epoch=5, metadata="", commit_timestamp=1000, expire_timestamp=61000
        )
    )
    assert value == i16(1) + i64(42) + string("") + i64(1000) + i64(61000)


def test_offset_commit_round_trip_and_old_versions():
    committed = OffsetAndMetadata(offset=9, leader_epoch=3, metadata="x", commit_timestamp=77)
    assert consumer_offsets.decode_offset_commit_value(consumer_offsets.offset_commit_value(committed)) == committed
    assert consumer_offsets.decode_key(consumer_offsets.offset_commit_key("g", "t", 1)) == OffsetCommitKey("g", "t", 1)
    key_v0 = i16(0) + string("g") + string("t") + i32(1)
    assert consumer_offsets.decode_key(key_v0) == OffsetCommitKey("g", "t", 1)
    value_v0 = i16(0) + i64(9) + string("x") + i64(77)
    assert consumer_offsets.decode_offset_commit_value(value_v0) == OffsetAndMetadata(9, -1, "x", 77)
    value_v1 = i16(1) + i64(9) + string("x") + i64(77) + i64(177)
    assert consumer_offsets.decode_offset_commit_value(value_v1) == OffsetAndMetadata(9, -1, "x", 77, 177)


# --- group metadata -----------------------------------------------------------------------------------------


def test_group_metadata_key_v2():
    assert consumer_offsets.group_metadata_key("grp") == i16(2) + string("grp")
    assert consumer_offsets.decode_key(i16(2) + string("grp")) == GroupMetadataKey("grp")


def member_v3() -> bytes:
    return (
        string("rdkafka-1")
        + string("host-a")
        + string("rdkafka")
        + string("/10.0.0.7")
        + i32(300000)
        + i32(45000)
        + blob(b"\x00\x00sub")
        + blob(b"\x00\x00asg")
    )


def test_group_metadata_value_v3_with_a_member():
    expected = (
        i16(3)
        + string("consumer")
        + i32(7)
        + string("range")
        + string("rdkafka-1")
        + i64(1_700_000_000_123)
        + i32(1)
        + member_v3()
    )
    assert consumer_offsets.group_metadata_value(GROUP, 3) == expected
    assert consumer_offsets.decode_group_metadata_value(expected) == GROUP


def test_group_metadata_value_v1_for_burrow_1_2_1():
    expected = (
        i16(1)
        + string("consumer")
        + i32(7)
        + string("range")
        + string("rdkafka-1")
        + i32(1)
        + string("rdkafka-1")
        + string("rdkafka")
        + string("/10.0.0.7")
        + i32(300000)
        + i32(45000)
        + blob(b"\x00\x00sub")
        + blob(b"\x00\x00asg")
    )
    assert consumer_offsets.group_metadata_value(GROUP, 1) == expected
    decoded = consumer_offsets.decode_group_metadata_value(expected)
    assert decoded.current_state_timestamp == -1 and decoded.members[0].group_instance_id is None
    assert decoded.members[0].rebalance_timeout_ms == 300000


def test_group_metadata_value_v0_and_v2():
    v0 = consumer_offsets.group_metadata_value(GROUP, 0)
    assert v0 == (
        i16(0)
        + string("consumer")
        + i32(7)
        + string("range")
        + string("rdkafka-1")
        + i32(1)
        + string("rdkafka-1")
        + string("rdkafka")
        + string("/10.0.0.7")
        + i32(45000)
        + blob(b"\x00\x00sub")
        + blob(b"\x00\x00asg")
    )
    assert consumer_offsets.decode_group_metadata_value(v0).members[0].rebalance_timeout_ms == 45000
    v2 = consumer_offsets.group_metadata_value(GROUP, 2)
    assert v2[:2] == i16(2) and i64(1_700_000_000_123) in v2


def test_empty_group_value_has_null_protocol_and_leader():
    empty = GroupMetadataRecord("consumer", 8, None, None, 5000)
    assert consumer_offsets.group_metadata_value(empty, 3) == (
        i16(3) + string("consumer") + i32(8) + string(None) + string(None) + i64(5000) + i32(0)
    )


def test_group_value_version_must_be_known():
    with pytest.raises(ValueError):
        consumer_offsets.group_metadata_value(GROUP, 4)


def test_unknown_and_bad_records():
    assert consumer_offsets.decode_key(i16(4) + b"whatever") is None  # partition metadata of KIP-848 groups: not kept
    assert consumer_offsets.decode_key(i16(9) + b"whatever") is None  # a record type of the future
    with pytest.raises(OffsetsRecordError):
        consumer_offsets.decode_key(i16(5) + b"whatever")  # a consumer group member's key, but not its layout
    with pytest.raises(OffsetsRecordError):
        consumer_offsets.decode_key(b"\x00")
    with pytest.raises(OffsetsRecordError):
        consumer_offsets.decode_key(i16(1) + string("g"))  # truncated
    with pytest.raises(OffsetsRecordError):
        consumer_offsets.decode_group_metadata_value(i16(3) + string("consumer"))


def test_subscription_topics():
    assert consumer_offsets.subscription_topics(subscription("a", "b")) == frozenset({"a", "b"})
    with pytest.raises(OffsetsRecordError):
        consumer_offsets.subscription_topics(b"\x00\x00\x00")
