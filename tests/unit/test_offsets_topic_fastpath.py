"""The raw-batch decoder of `__consumer_offsets` gives exactly what record-by-record decoding with the schema
codec (`interpret`) gives: every key and value version, tombstones, garbage, compression, headers, control
batches, message sets v0/v1, partial fetches and offset ranges."""

from __future__ import annotations

import re
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.errors import KafkaError
from broker.protocol.api import encode_struct
from broker.protocol.records import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    HEADER_SIZE,
    Record,
    build_batch,
    decode_records_any,
)
from burrowpy.coordinators import offsets_fastpath
from burrowpy.coordinators.group_members import MEMBER_EVENTS
from burrowpy.coordinators.offsets_fastpath import OffsetsRecordDecoder
from burrowpy.coordinators.offsets_topic import GroupFilter, RecordSkipped, interpret
from burrowpy.protocol import SetConsumerOffset, SetConsumerOffsets, SetDeletePartitionOffsets, one_by_one
from tests.examples import examples

CLUSTER = "c"
ALL = GroupFilter()
CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


def reference(data: bytes, groups: GroupFilter, start: int = 0, end: int | None = None):
    """What record-by-record decoding gives: (storage requests, member events, skipped offsets, records read)."""
    requests, members, skipped, read = [], [], [], 0
    for record in decode_records_any(data, verify_crc=False):
        if record.offset < start or (end is not None and record.offset >= end):
            continue
        read += 1
        try:
            meant = interpret(CLUSTER, record.key, record.value, record.offset, groups)
        except RecordSkipped:
            skipped.append(record.offset)
            continue
        for request in meant:
            (members if isinstance(request, MEMBER_EVENTS) else requests).append(request)
    return requests, members, skipped, read


def fast(data: bytes, groups: GroupFilter, start: int = 0, end: int | None = None):
    decoded = OffsetsRecordDecoder(CLUSTER, groups).decode(data, start, end)
    return one_by_one(decoded.requests), decoded.members, [offset for offset, _ in decoded.skipped], decoded.records


# --- strategies: the records a `__consumer_offsets` partition can hold, and broken ones ----------------------


def offset_key(version: int, group: str, topic: str, partition: int) -> bytes:
    return encode_struct("OffsetCommitKey", version, {"group": group, "topic": topic, "partition": partition})


@st.composite
def offset_values(draw) -> bytes | None:
    choice = draw(st.sampled_from(["value", "value", "value", "null", "empty"]))
    if choice == "null":
        return None
    if choice == "empty":
        return b""
    body = {"offset": draw(INT64), "leader_epoch": draw(INT32), "commit_timestamp": draw(INT64),
            "expire_timestamp": draw(INT64), "metadata": draw(st.sampled_from(["", "", "m", "x" * 200, "é"]))}
    return encode_struct("OffsetCommitValue", draw(st.integers(0, 4)), body)


def group_metadata(group: str, topic: str, members: int, version: int) -> tuple[bytes, bytes]:
    assignment = encode_struct("ConsumerProtocolAssignment", 0,
                               {"assigned_partitions": [{"topic": topic, "partitions": [0, 1]}], "user_data": None})
    value = encode_struct("GroupMetadataValue", version, {
        "protocol_type": "consumer", "generation": 1, "protocol": "range", "leader": "m0",
        "members": [{"member_id": f"m{n}", "group_instance_id": None, "client_id": f"c{n}", "client_host": "/h",
                     "rebalance_timeout": 1, "session_timeout": 1, "subscription": b"", "assignment": assignment}
                    for n in range(members)]})
    return encode_struct("GroupMetadataKey", 2, {"group": group}), value


def damaged(draw, data: bytes) -> bytes:
    """Truncated, extended or with one byte changed: what a broken producer or disk could leave."""
    how = draw(st.sampled_from(["truncate", "extend", "flip"]))
    if how == "truncate":
        return data[: draw(st.integers(0, max(0, len(data) - 1)))]
    if how == "extend":
        return data + draw(st.binary(min_size=1, max_size=8))
    if not data:
        return b"\x00"
    index = draw(st.integers(0, len(data) - 1))
    return data[:index] + bytes([draw(st.integers(0, 255))]) + data[index + 1 :]


@st.composite
def key_values(draw) -> tuple[bytes | None, bytes | None]:
    group = draw(st.sampled_from(["app-1", "app-2", "other", "app-1-test", "", "gr\u00fcn", "g" * 70]))
    topic = draw(st.sampled_from(["t", "orders", "", "t" * 80]))
    kind = draw(st.sampled_from(["commit"] * 6 + ["group", "group tombstone", "damaged key", "damaged value",
                                                    "garbage", "null key", "unknown key version", "consumer member",
                                                    "consumer member tombstone", "new coordinator record"]))
    key = offset_key(draw(st.integers(0, 1)), group, topic, draw(INT32))
    if kind == "commit":
        return key, draw(offset_values())
    if kind == "group":
        return group_metadata(group, topic, draw(st.integers(0, 2)), draw(st.integers(0, 4)))
    if kind == "group tombstone":
        return encode_struct("GroupMetadataKey", 2, {"group": group}), None
    if kind in ("consumer member", "consumer member tombstone"):
        record_type = draw(st.sampled_from([5, 8]))
        name = "ConsumerGroupMemberMetadata" if record_type == 5 else "ConsumerGroupCurrentMemberAssignment"
        member_key = encode_struct(name + "Key", record_type, {"group_id": group, "member_id": "m-1"})
        if kind == "consumer member tombstone":
            return member_key, None
        value = (encode_struct(name + "Value", 0, {"instance_id": None, "rack_id": None, "client_id": "c",
                                                   "client_host": "/h", "subscribed_topic_names": [topic],
                                                   "subscribed_topic_regex": None, "server_assignor": None})
                 if record_type == 5 else
                 encode_struct(name + "Value", 0, {"member_epoch": 1, "previous_member_epoch": 0, "state": 0,
                                                   "assigned_partitions": [{"topic_id": bytes(range(16)),
                                                                            "partitions": [0, 1]}],
                                                   "partitions_pending_revocation": []}))
        return member_key, value
    if kind == "new coordinator record":  # a group epoch, a target assignment, a share or streams group record
        record_type = draw(st.sampled_from([3, 4, 6, 7, 11, 16, 17, 23]))
        return struct.pack(">h", record_type) + encode_struct("GroupMetadataKey", 2, {"group": group})[2:], \
            draw(st.one_of(st.none(), st.binary(max_size=30)))
    if kind == "damaged key":
        return damaged(draw, key), draw(offset_values())
    if kind == "damaged value":
        value = draw(offset_values()) or encode_struct("OffsetCommitValue", 3, {"offset": 1, "metadata": "", "commit_timestamp": 2})
        return key, damaged(draw, value)
    if kind == "garbage":
        return draw(st.binary(max_size=40)), draw(st.one_of(st.none(), st.binary(max_size=40)))
    if kind == "null key":
        return None, draw(offset_values())
    # record types no Kafka writes (3-23 are the new group coordinator's)
    return struct.pack(">h", draw(st.sampled_from([-1, 24, 256, 32767]))) + key[2:], draw(offset_values())


@st.composite
def record_sets(draw) -> bytes:
    """Concatenated batches as a fetch returns them: random compression, control batches, record headers,
    gaps left by compaction."""
    out = bytearray()
    offset = draw(st.integers(0, 10**12))
    for _ in range(draw(st.integers(1, 4))):
        records = []
        base_offset = offset
        for key, value in draw(st.lists(key_values(), min_size=1, max_size=12)):
            headers = [("h", b"v")] if draw(st.integers(0, 9)) == 0 else []
            records.append(Record(offset, 1_700_000_000_000, key, value, headers))
            offset += draw(st.sampled_from([1, 1, 1, 2, 70]))
        control = draw(st.integers(0, 9)) == 0
        out += build_batch(records, base_offset=base_offset, compression=draw(st.sampled_from(CODECS)),
                           is_control=control)
    return bytes(out)


FILTERS = [ALL, GroupFilter(allow=re.compile("^app-")), GroupFilter(deny=re.compile("-test$")),
           GroupFilter(allow=re.compile("^app-"), deny=re.compile("-test$"))]


@settings(deadline=None, max_examples=examples(300, 60))
@given(data=record_sets(), groups=st.sampled_from(FILTERS))
def test_fast_path_gives_what_the_schema_codec_gives(data, groups):
    assert fast(data, groups) == reference(data, groups)


@settings(deadline=None, max_examples=examples(100, 25))
@given(data=record_sets(), cut=st.integers(0, 10**6), start_at=st.integers(0, 40), length=st.integers(0, 40))
def test_partial_fetches_and_offset_ranges(data, cut, start_at, length):
    """A fetch may start inside a batch and end inside another; a backfill stops at its end offset."""
    (first,) = struct.unpack_from(">q", data)  # the first batch's base offset
    start, end = first + start_at, first + start_at + length
    truncated = data[: cut % (len(data) + 1)]
    assert fast(truncated, ALL, start, end) == reference(truncated, ALL, start, end)
    assert fast(truncated, ALL, start) == reference(truncated, ALL, start)


def variants(data: bytes) -> list[bytes]:
    """Every truncation of ``data``, and ``data`` with each byte set to 0x00, 0x7F, 0x80 and 0xFF."""
    out = [data[:length] for length in range(len(data))]
    out += [data[:i] + bytes([b]) + data[i + 1 :] for i in range(len(data)) for b in (0x00, 0x7F, 0x80, 0xFF)]
    return out


def one_batch_each(pairs: list[tuple[bytes | None, bytes | None]]) -> bytes:
    """A batch per record, so that a record the fast path gets wrong cannot hide behind a batch fallback."""
    return b"".join(build_batch([Record(n, 0, key, value, [])], base_offset=n) for n, (key, value) in enumerate(pairs))


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("metadata", ["", "meta"])
def test_every_truncation_and_damaged_byte_of_a_value(version, metadata):
    """The precompiled layouts stop exactly where the schema codec stops (lengths, expire timestamp, tags)."""
    value = encode_struct("OffsetCommitValue", version, {"offset": 3, "leader_epoch": 4, "metadata": metadata,
                                                          "commit_timestamp": 1 << 8, "expire_timestamp": 6})
    key = offset_key(1, "g", "t", 0)
    data = one_batch_each([(key, damaged_value) for damaged_value in [value, *variants(value)]])
    assert fast(data, ALL) == reference(data, ALL)


# An offset commit value as Apache Kafka 4.4 writes it: v4, empty metadata, the topic id in a tagged field.
KAFKA_4_VALUE = bytes.fromhex("000400000000000000030000000001000001a20e3a4f86010010043d7ceb231449a08fd7a31015c01a23")


@pytest.mark.parametrize("value", [KAFKA_4_VALUE, KAFKA_4_VALUE[:23] + b"\x00"], ids=["topic-id-tag", "no-tags"])
def test_every_truncation_and_damaged_byte_of_a_kafka_4_value(value):
    """The inline v4 layout (empty metadata; no tags, or only the topic id) stops where the schema codec does."""
    key = offset_key(1, "g", "t", 0)
    data = one_batch_each([(key, damaged_value) for damaged_value in [value, *variants(value)]])
    assert fast(data, ALL) == reference(data, ALL)


@pytest.mark.parametrize("version", [0, 1])
def test_every_truncation_and_damaged_byte_of_a_key(version):
    key = offset_key(version, "group", "topic", 258)
    data = one_batch_each([(damaged_key, commit_value()) for damaged_key in [key, *variants(key)]])
    assert fast(data, ALL) == reference(data, ALL)


@settings(deadline=None, max_examples=examples(50, 15))
@given(data=record_sets(), part_size=st.integers(1, 8))
def test_parts_add_up_to_the_whole(data, part_size):
    """Handed over part by part, the requests are the same and in the same order; positions only grow; a
    part ends at the first batch boundary after ``part_size`` records."""
    decoder = OffsetsRecordDecoder(CLUSTER, ALL)
    whole = decoder.decode(data, 0)
    parts = list(decoder.decode_parts(data, 0, None, part_size))
    assert [r for part in parts for r in part.requests] == whole.requests
    assert [s for part in parts for s in part.skipped] == whole.skipped
    assert sum(part.records for part in parts) == whole.records
    positions = [part.next_offset for part in parts]
    assert positions == sorted(positions) and positions[-1] == whole.next_offset
    assert all(part.records >= part_size for part in parts[:-1])


# --- positions ---------------------------------------------------------------------------------------------


def commit_value(offset: int = 5, timestamp: int = 1000) -> bytes:
    return encode_struct("OffsetCommitValue", 3, {"offset": offset, "metadata": "", "commit_timestamp": timestamp})


def commit_batch(base_offset: int, count: int, **options) -> bytes:
    records = [Record(base_offset + n, 0, offset_key(1, "g", "t", n), commit_value(n), []) for n in range(count)]
    return build_batch(records, base_offset=base_offset, **options)


def test_next_offset_is_after_the_last_whole_batch():
    data = commit_batch(10, 3) + commit_batch(13, 2)
    decoder = OffsetsRecordDecoder(CLUSTER, ALL)
    assert decoder.decode(data, 10).next_offset == 15
    assert decoder.decode(data[:-1], 10).next_offset == 13  # the partial tail is read by the next fetch
    assert decoder.decode(data[: HEADER_SIZE - 1], 10).next_offset == 10
    assert decoder.decode(b"", 10).next_offset == 10


def test_compacted_batches_and_control_batches_still_move_the_position():
    """Compaction keeps a batch's last offset delta; a control batch (transaction marker) holds no commits."""
    compacted = build_batch([Record(20, 0, offset_key(1, "g", "t", 0), commit_value(), [])], base_offset=20,
                            last_offset_delta=9)
    marker = build_batch([Record(30, 0, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [])], base_offset=30,
                         is_control=True)
    decoded = OffsetsRecordDecoder(CLUSTER, ALL).decode(compacted + marker, 20)
    assert decoded.next_offset == 31 and decoded.records == 1
    assert one_by_one(decoded.requests) == [SetConsumerOffset(CLUSTER, "g", "t", 0, 5, 20, 1000)]


def test_a_fetch_starting_inside_a_batch_passes_over_the_earlier_records():
    decoded = OffsetsRecordDecoder(CLUSTER, ALL).decode(commit_batch(100, 5), 103)
    assert [r.order for r in one_by_one(decoded.requests)] == [103, 104] and decoded.records == 2


# --- what the fast path takes itself ---------------------------------------------------------------------------


def test_offset_commits_tombstones_and_filters():
    only_app = GroupFilter(allow=re.compile("^app-"))
    records = [Record(0, 0, offset_key(0, "app-1", "t", 7), commit_value(42, 99), []),
               Record(1, 0, offset_key(1, "app-1", "t", 7), None, []),
               Record(2, 0, offset_key(1, "other", "t", 7), commit_value(), []),
               Record(3, 0, offset_key(1, "other", "t", 7), None, [])]
    decoded = OffsetsRecordDecoder(CLUSTER, only_app).decode(build_batch(records), 0)
    assert one_by_one(decoded.requests) == [SetConsumerOffset(CLUSTER, "app-1", "t", 7, 42, 0, 99),
                                SetDeletePartitionOffsets(CLUSTER, "app-1", "t", 7)]
    assert decoded.records == 4 and decoded.skipped == []


def test_commits_of_one_group_and_topic_in_a_row_come_as_one_run():
    """A run goes on while group and topic stay (past records the filter drops), and ends at anything else:
    another group or topic, a tombstone, a record for the schema codec, the end of the batch."""
    only_app = GroupFilter(allow=re.compile("^app"))
    records = [(offset_key(1, "app", "t", 0), commit_value(10, 1)), (offset_key(1, "app", "t", 1), commit_value(11, 2)),
               (offset_key(1, "other", "t", 0), commit_value()), (offset_key(0, "app", "t", 2), commit_value(12, 3)),
               (offset_key(1, "app", "u", 0), commit_value(13, 4)), (offset_key(1, "app", "u", 0), None),
               (offset_key(1, "app", "u", 1), commit_value(14, 5)), (b"\x00\x05junk", commit_value()),
               (offset_key(1, "app", "u", 2), commit_value(15, 6))]
    first = build_batch([Record(n, 0, key, value, []) for n, (key, value) in enumerate(records)])
    second = build_batch([Record(9, 0, offset_key(1, "app", "u", 3), commit_value(16, 7), [])], base_offset=9)
    decoded = OffsetsRecordDecoder(CLUSTER, only_app).decode(first + second, 0)
    assert decoded.requests == [SetConsumerOffsets(CLUSTER, "app", "t", [0, 10, 0, 1, 1, 11, 1, 2, 2, 12, 3, 3]),
                                SetConsumerOffsets(CLUSTER, "app", "u", [0, 13, 4, 4]),
                                SetDeletePartitionOffsets(CLUSTER, "app", "u", 0),
                                SetConsumerOffsets(CLUSTER, "app", "u", [1, 14, 6, 5]),
                                SetConsumerOffsets(CLUSTER, "app", "u", [2, 15, 8, 6]),
                                SetConsumerOffsets(CLUSTER, "app", "u", [3, 16, 9, 7])]
    assert [offset for offset, _ in decoded.skipped] == [7]


def test_the_key_cache_starts_over_when_full(monkeypatch):
    monkeypatch.setattr(offsets_fastpath, "KEY_CACHE_LIMIT", 2)
    decoder = OffsetsRecordDecoder(CLUSTER, ALL)
    records = [Record(n, 0, offset_key(1, f"g{n % 5}", "t", n), commit_value(n), []) for n in range(10)]
    decoded = decoder.decode(build_batch(records), 0)
    assert [(r.group, r.partition) for r in one_by_one(decoded.requests)] == [(f"g{n % 5}", n) for n in range(10)]
    assert len(decoder._keys) <= 2


def test_the_key_cache_holds_one_entry_per_group_and_topic():
    """At fleet scale a key per partition was 10.6 MiB (59,800 keys): the cache keeps a key but its partition,
    and reads the partition from each record's key."""
    decoder = OffsetsRecordDecoder(CLUSTER, ALL)
    records = [Record(n, 0, offset_key(version, group, topic, partition), commit_value(partition), [])
               for n, (version, group, topic, partition) in enumerate(
                   (version, group, topic, partition) for version in (0, 1) for group in ("a", "b")
                   for topic in ("t", "u") for partition in (0, 1, 2, 300, 70_000, -1))]
    data = build_batch(records)
    assert fast(data, ALL) == reference(data, ALL)
    decoded = decoder.decode(data, 0)
    assert len(one_by_one(decoded.requests)) == len(records)
    assert len(decoder._keys) == 8  # two key versions, two groups, two topics


def test_a_key_with_bytes_after_its_partition_is_read_as_the_codec_reads_it():
    """Such a key is not cached (its prefix would not end where its partition begins); read beside whole keys
    of the same group and topic, and keys exactly four bytes longer, each gives what the schema codec gives."""
    whole = offset_key(1, "g", "t", 7)
    keys = [whole, whole + b"\x00\x00\x00\x09", whole + b"\x00\x00\x00\x0a", offset_key(1, "g", "t", 8),
            whole + b"\x01", whole + b"\x02", whole[:-4] + b"\x00\x00\x01\x00" + b"\x00\x00\x00\x02",
            offset_key(1, "g", "t", 9)]
    for data in (one_batch_each([(key, commit_value(n)) for n, key in enumerate(keys)]),
                 build_batch([Record(n, 0, key, commit_value(n), []) for n, key in enumerate(keys)])):
        assert fast(data, ALL) == reference(data, ALL)


# --- what goes elsewhere -------------------------------------------------------------------------------------


def legacy_message(offset: int, magic: int, key: bytes | None, value: bytes | None, timestamp: int = 7) -> bytes:
    """One entry of a message set v0/v1, as brokers before 0.11 stored `__consumer_offsets`."""
    def sized(data: bytes | None) -> bytes:
        return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data

    body = bytes([magic, 0]) + (struct.pack(">q", timestamp) if magic == 1 else b"") + sized(key) + sized(value)
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


@pytest.mark.parametrize("magic", [0, 1])
def test_message_sets_v0_v1(magic):
    data = (legacy_message(4, magic, offset_key(0, "g", "t", 1), encode_struct("OffsetCommitValue", 0, {
                "offset": 9, "metadata": "", "commit_timestamp": 77}))
            + legacy_message(5, magic, offset_key(0, "g", "t", 1), None))
    decoded = OffsetsRecordDecoder(CLUSTER, ALL).decode(data, 4)
    assert one_by_one(decoded.requests) == [SetConsumerOffset(CLUSTER, "g", "t", 1, 9, 4, 77),
                                SetDeletePartitionOffsets(CLUSTER, "g", "t", 1)]
    assert decoded.next_offset == 6 and decoded.records == 2


def test_unknown_versions_are_skipped_with_the_codecs_reason():
    records = [Record(0, 0, b"\x00\x18abc", commit_value(), []),
               Record(1, 0, offset_key(1, "g", "t", 0), b"\x00\x09" + bytes(30), [])]
    decoded = OffsetsRecordDecoder(CLUSTER, ALL).decode(build_batch(records), 0)
    assert one_by_one(decoded.requests) == [] and [offset for offset, _ in decoded.skipped] == [0, 1]
    assert "unknown key version 24" in decoded.skipped[0][1]
    assert "version 9" in decoded.skipped[1][1]


def test_a_batch_that_cannot_be_decompressed_is_skipped_and_passed():
    batch = bytearray(commit_batch(50, 3, compression=COMPRESSION_ZSTD))
    batch[HEADER_SIZE:] = b"\xff" * (len(batch) - HEADER_SIZE)
    decoded = OffsetsRecordDecoder(CLUSTER, ALL).decode(bytes(batch) + commit_batch(53, 1), 50)
    assert [offset for offset, _ in decoded.skipped] == [50] and "zstd" in decoded.skipped[0][1]
    assert [r.order for r in one_by_one(decoded.requests)] == [53] and decoded.next_offset == 54


def test_a_batch_whose_records_overrun_it_is_skipped():
    batch = bytearray(commit_batch(0, 2))
    struct.pack_into(">i", batch, HEADER_SIZE - 4, 3)  # the header claims a third record
    decoded = OffsetsRecordDecoder(CLUSTER, ALL).decode(bytes(batch) + commit_batch(2, 1), 0)
    assert [offset for offset, _ in decoded.skipped] == [0]
    assert [r.order for r in one_by_one(decoded.requests)] == [2] and decoded.next_offset == 3


def test_a_record_whose_header_count_runs_past_it_skips_the_batch():
    batch = bytearray(commit_batch(0, 1))
    batch[-1] = 2  # the record's last byte, its header count, now says one header, which is not there
    decoded = OffsetsRecordDecoder(CLUSTER, ALL).decode(bytes(batch), 0)
    assert one_by_one(decoded.requests) == [] and [offset for offset, _ in decoded.skipped] == [0]


@pytest.mark.parametrize("magic", [3, 255])
def test_an_impossible_magic_byte_is_an_error(magic):
    batch = bytearray(commit_batch(0, 1))
    batch[16] = magic
    with pytest.raises(KafkaError):
        OffsetsRecordDecoder(CLUSTER, ALL).decode(bytes(batch), 0)


# --- transactions (read_committed) --------------------------------------------------------------------------


def group_commit(offset: int, group: str, committed: int, producer_id: int | None = None) -> bytes:
    """One offset commit of ``group``, in a transactional batch of ``producer_id`` if given."""
    record = Record(offset, 0, offset_key(1, group, "t", 0), commit_value(committed), [])
    if producer_id is None:
        return build_batch([record], base_offset=offset)
    return build_batch([record], base_offset=offset, producer_id=producer_id, producer_epoch=0, base_sequence=0,
                       is_transactional=True)


def marker(offset: int, producer_id: int, commit: bool) -> bytes:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    return build_batch([Record(offset, 0, key, b"\x00\x00\x00\x00\x00\x00", [])], base_offset=offset,
                       producer_id=producer_id, producer_epoch=0, is_transactional=True, is_control=True)


def test_commits_of_aborted_transactions_never_reach_storage():
    """As Kafka's read_committed consumer reads: a producer's batches from the first offset of an aborted
    transaction up to its ABORT marker are dropped; its committed transactions and other producers' stay."""
    data = (group_commit(0, "before", 1, producer_id=7) + marker(1, 7, commit=True)  # pid 7 commits once
            + group_commit(2, "rolled-back", 2, producer_id=7) + group_commit(3, "kept", 3, producer_id=8)
            + group_commit(4, "rolled-back", 4, producer_id=7) + marker(5, 7, commit=False)
            + marker(6, 8, commit=True) + group_commit(7, "plain", 7) + group_commit(8, "after", 8, producer_id=7)
            + marker(9, 7, commit=True))
    decoder = OffsetsRecordDecoder(CLUSTER, ALL)
    committed = list(decoder.decode_parts(data, 0, None, None, aborted=[(7, 2)]))[0]
    assert [(r.group, r.offset) for r in one_by_one(committed.requests)] == [("before", 1), ("kept", 3), ("plain", 7),
                                                                  ("after", 8)]
    assert committed.next_offset == 10
    # read_uncommitted (no list): every commit, as Burrow reads them
    assert [r.group for r in one_by_one(decoder.decode(data, 0).requests)] == ["before", "rolled-back", "kept", "rolled-back",
                                                                   "plain", "after"]
