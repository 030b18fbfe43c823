"""Record batches: header parsing, validation, offset patching, codecs, and cross-checks with kafka-python."""

from __future__ import annotations

import struct
import zlib

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from broker.errors import ErrorCode, KafkaError
from broker.protocol.records import (
    HEADER_SIZE,
    BatchHeader,
    Record,
    build_batch,
    crc_of,
    decode_batch,
    decode_records_any,
    iter_batches,
    patch_batch,
    validate_batch,
    whole_batches_length,
)

CODECS = [0, 1, 2, 3, 4]
KAFKA_PYTHON_CODECS = [0, 1, 3, 4]  # kafka-python has no snappy library here


def sample_records(n: int = 3, base_ts: int = 1_700_000_000_000, base_offset: int = 0) -> list[Record]:
    return [
        Record(
            base_offset + i,
            base_ts + i * 7,
            f"key-{i}".encode() if i % 3 else None,
            b"value " * (i + 1),
            [("h", b"x"), ("n", None)],
        )
        for i in range(n)
    ]


def with_crc_fixed(data: bytearray) -> bytes:
    struct.pack_into(">I", data, 17, crc_of(data, 0, len(data)))
    return bytes(data)


records_strategy = st.lists(
    st.builds(
        lambda ts, key, value, headers: (ts, key, value, headers),
        st.integers(min_value=-1, max_value=2**50),
        st.none() | st.binary(max_size=40),
        st.none() | st.binary(max_size=200),
        st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3),
    ),
    min_size=1,
    max_size=12,
)


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    fields=records_strategy,
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(min_value=0, max_value=2**40),
    producer=st.sampled_from([(-1, -1, -1), (7, 2, 0), (2**40, 32767, 2**31 - 3)]),
)
def test_build_decode_round_trip(fields, codec, base_offset, producer):
    records = [
        Record(base_offset + i, ts, key, value, headers) for i, (ts, key, value, headers) in enumerate(fields)
    ]
    pid, epoch, seq = producer
    data = build_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    header = validate_batch(data)
    assert header.base_offset == base_offset
    assert header.records_count == len(records)
    assert header.last_offset == base_offset + len(records) - 1
    assert header.compression == codec
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == producer
    decoded_header, decoded = decode_batch(data)
    assert decoded_header == header
    assert decoded == records


def test_header_properties():
    records = [Record(10 + i, 1000, None, b"v") for i in range(4)]
    data = build_batch(records, base_offset=10, producer_id=3, producer_epoch=1, base_sequence=2**31 - 2)
    header = BatchHeader.parse(data)
    assert header.size == len(data)
    assert (header.last_offset, header.next_offset) == (13, 14)
    # Sequences wrap at INT32_MAX: 2**31-2, 2**31-1, 0, 1.
    assert header.last_sequence == 1
    assert not header.is_control and not header.is_transactional and header.delete_horizon_ms is None


@pytest.mark.parametrize("codec", KAFKA_PYTHON_CODECS)
def test_kafka_python_batches_validate_and_decode(codec):
    builder = DefaultRecordBatchBuilder(2, codec, False, 42, 3, 17, 1 << 20)
    for i in range(20):
        builder.append(
            i, 1_600_000_000_000 + i, b"k%d" % i if i % 2 else None, b"payload-" * 50, [("trace", b"abc")]
        )
    data = bytes(builder.build())
    header = validate_batch(data)
    assert header.compression == codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 17)
    _, records = decode_batch(data)
    assert len(records) == 20
    assert records[5] == Record(5, 1_600_000_000_005, b"k5", b"payload-" * 50, [("trace", b"abc")])
    assert records[4].key is None


@pytest.mark.parametrize("codec", KAFKA_PYTHON_CODECS)
def test_our_batches_decode_with_kafka_python(codec):
    records = [
        Record(100 + i, 1_650_000_000_000 + i, b"key", b"v" * 300 if i != 2 else None, [("a", b"b")])
        for i in range(5)
    ]
    data = build_batch(records, base_offset=100, compression=codec)
    batch = MemoryRecords(data).next_batch()
    assert batch.validate_crc()
    assert batch.compression_type == codec
    theirs = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert theirs == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


def test_snappy_raw_and_xerial_framing_decode():
    payload_records = sample_records(6)
    raw = build_batch(payload_records, compression=2)
    header, records = decode_batch(raw)
    assert records == payload_records
    # Rewrap the same records the way Java's snappy-java stream writes them: 16-byte header, then
    # [int32 length][raw block] per block.
    plain = bytearray(build_batch(payload_records))
    body = bytes(plain[HEADER_SIZE:])
    blocks = [body[:50], body[50:]]
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for block in blocks:
        compressed = bytes(cramjam.snappy.compress_raw(block))
        framed += struct.pack(">i", len(compressed)) + compressed
    xerial = bytearray(plain[:HEADER_SIZE]) + framed
    struct.pack_into(">i", xerial, 8, len(xerial) - 12)
    struct.pack_into(">h", xerial, 21, 2)
    assert decode_batch(with_crc_fixed(xerial))[1] == payload_records


def test_empty_batch_and_overrides():
    data = build_batch(
        [],
        base_offset=50,
        producer_id=9,
        producer_epoch=0,
        base_sequence=10,
        last_offset_delta=4,
        max_timestamp=1234,
    )
    header, records = decode_batch(data)
    assert records == []
    assert (header.records_count, header.last_offset, header.max_timestamp) == (0, 54, 1234)


def test_delete_horizon_keeps_record_timestamps():
    records = sample_records(3)
    data = build_batch(records, delete_horizon_ms=5_000_000_000_000)
    header, decoded = decode_batch(data)
    assert header.delete_horizon_ms == 5_000_000_000_000
    assert decoded == records


# --- validation --------------------------------------------------------------------------------------------


def good_batch() -> bytearray:
    return bytearray(build_batch(sample_records(3), producer_id=5, producer_epoch=0, base_sequence=0))


def mutated(change) -> bytes:
    data = good_batch()
    change(data)
    return with_crc_fixed(data)


@pytest.mark.parametrize(
    "data, code",
    [
        (b"", ErrorCode.INVALID_RECORD),
        (bytes(good_batch()[:10]), ErrorCode.CORRUPT_MESSAGE),
        (bytes(good_batch()[:40]), ErrorCode.CORRUPT_MESSAGE),
        (bytes(good_batch()[:-1]), ErrorCode.CORRUPT_MESSAGE),
        (bytes(good_batch()) + bytes(good_batch()), ErrorCode.INVALID_RECORD),
        (mutated(lambda d: d.__setitem__(16, 1)), ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
        (mutated(lambda d: d.__setitem__(16, 0)), ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
        (mutated(lambda d: d.__setitem__(16, 3)), ErrorCode.CORRUPT_MESSAGE),
        (mutated(lambda d: struct.pack_into(">i", d, 8, 20)), ErrorCode.CORRUPT_MESSAGE),
        (mutated(lambda d: struct.pack_into(">i", d, 23, 5)), ErrorCode.INVALID_RECORD),
        (mutated(lambda d: struct.pack_into(">i", d, 23, -1)), ErrorCode.INVALID_RECORD),
        (
            mutated(lambda d: struct.pack_into(">ii", d, 23, -1, 0) or struct.pack_into(">i", d, 57, 0)),
            ErrorCode.INVALID_RECORD,
        ),
        (mutated(lambda d: struct.pack_into(">h", d, 21, 0x20)), ErrorCode.INVALID_RECORD),
        (mutated(lambda d: struct.pack_into(">i", d, 53, -1)), ErrorCode.INVALID_RECORD),
        (mutated(lambda d: struct.pack_into(">h", d, 21, 0x08)), ErrorCode.INVALID_TIMESTAMP),
        (mutated(lambda d: struct.pack_into(">h", d, 21, 6)), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    ],
    ids=[
        "empty",
        "shorter-than-magic",
        "shorter-than-header",
        "truncated",
        "two-batches",
        "magic-1",
        "magic-0",
        "magic-3",
        "length-too-small",
        "delta-vs-count",
        "negative-delta",
        "zero-count",
        "control-batch",
        "idempotent-without-sequence",
        "client-log-append-time",
        "unknown-codec",
    ],
)
def test_validate_batch_rejects(data, code):
    with pytest.raises(KafkaError) as err:
        validate_batch(data)
    assert err.value.code == code


def test_validate_batch_detects_every_flipped_checksummed_byte():
    data = good_batch()
    for position in range(17, len(data)):
        corrupt = bytearray(data)
        corrupt[position] ^= 0x40
        with pytest.raises(KafkaError) as err:
            validate_batch(bytes(corrupt))
        assert err.value.code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD), position


def test_validate_accepts_memoryview():
    data = good_batch()
    assert validate_batch(memoryview(bytes(data))).records_count == 3


# --- patching ------------------------------------------------------------------------------------------------


def test_patch_batch_sets_offsets_and_epoch_without_touching_crc():
    data = bytearray(b"x" * 5) + good_batch()
    crc_before = BatchHeader.parse(data, 5).crc
    patch_batch(data, 5, 1000, 7)
    header = BatchHeader.parse(data, 5)
    assert (header.base_offset, header.partition_leader_epoch, header.crc) == (1000, 7, crc_before)
    header2, records = decode_batch(bytes(data[5:]))
    assert [r.offset for r in records] == [1000, 1001, 1002]


def test_patch_batch_log_append_time():
    data = good_batch()
    patch_batch(data, 0, 20, 1, log_append_time_ms=1_999_999_999_999)
    header, records = decode_batch(bytes(data))  # the CRC was recomputed
    assert header.timestamp_type == 1
    assert header.max_timestamp == 1_999_999_999_999
    assert all(r.timestamp == 1_999_999_999_999 for r in records)
    their_batch = MemoryRecords(bytes(data)).next_batch()
    assert their_batch.validate_crc() and their_batch.timestamp_type == 1


# --- iteration -----------------------------------------------------------------------------------------------


def test_iter_batches_stops_at_every_truncation_point():
    batches = [build_batch(sample_records(i + 1, base_offset=i * 10), base_offset=i * 10) for i in range(3)]
    stream = b"".join(batches)
    boundaries = [0, len(batches[0]), len(batches[0]) + len(batches[1]), len(stream)]
    for cut in range(len(stream) + 1):
        found = list(iter_batches(stream[:cut]))
        complete = max(b for b in boundaries if b <= cut)
        assert [pos for pos, _ in found] == [b for b in boundaries[:-1] if b < complete]
        assert whole_batches_length(stream[:cut]) == complete


def test_iter_batches_rejects_impossible_batches():
    data = bytearray(build_batch(sample_records(2)))
    data[16] = 1
    with pytest.raises(KafkaError) as err:
        list(iter_batches(bytes(data)))
    assert err.value.code == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


# --- legacy message sets -------------------------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 3])
def test_legacy_message_sets_from_kafka_python(magic, codec):
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i in range(5):
        builder.append(i, 1_500_000_000_000 + i if magic else None, b"k%d" % i, b"value-%d" % i)
    data = bytearray(builder.build())
    if codec and magic == 1:
        # A broker assigned offsets 100..104: the v1 wrapper carries the last one, inner offsets are relative.
        struct.pack_into(">q", data, 0, 104)
        expected_offsets = list(range(100, 105))
    else:
        expected_offsets = list(range(5))
    records = decode_records_any(bytes(data))
    assert [r.offset for r in records] == expected_offsets
    assert [r.value for r in records] == [b"value-%d" % i for i in range(5)]
    assert [r.timestamp for r in records] == (
        [1_500_000_000_000 + i for i in range(5)] if magic else [-1] * 5
    )


def test_legacy_v1_log_append_time_wrapper():
    builder = LegacyRecordBatchBuilder(1, 1, 1 << 20)
    for i in range(3):
        builder.append(i, 1000 + i, None, b"v")
    data = bytearray(builder.build())
    data[17] |= 0x08  # wrapper attributes: LogAppendTime
    struct.pack_into(">q", data, 18, 77_777)  # wrapper timestamp
    struct.pack_into(">I", data, 12, zlib.crc32(bytes(data[16:])))
    assert [r.timestamp for r in decode_records_any(bytes(data))] == [77_777] * 3


def test_legacy_crc_is_checked():
    builder = LegacyRecordBatchBuilder(1, 0, 1 << 20)
    builder.append(0, 1000, b"k", b"v")
    data = bytearray(builder.build())
    data[-1] ^= 1
    with pytest.raises(KafkaError) as err:
        decode_records_any(bytes(data))
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE


def test_decode_records_any_mixes_formats_skips_control_and_truncated_tail():
    legacy = LegacyRecordBatchBuilder(1, 0, 1 << 20)
    legacy.append(0, 1000, b"old", b"legacy")
    control = build_batch(
        [Record(1, 1000, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")], base_offset=1, is_control=True
    )
    modern = build_batch([Record(2, 2000, b"new", b"v2")], base_offset=2, compression=4)
    stream = bytes(legacy.build()) + control + modern
    assert [(r.offset, r.key) for r in decode_records_any(stream)] == [(0, b"old"), (2, b"new")]
    assert [(r.offset, r.key) for r in decode_records_any(stream[:-3])] == [(0, b"old")]


@settings(deadline=None, max_examples=150)
@given(garbage=st.binary(min_size=1, max_size=80), codec=st.sampled_from([0, 1]))
def test_malformed_records_raise_kafka_error(garbage, codec):
    """Garbage inside a batch whose CRC is right is CORRUPT_MESSAGE, never an IndexError or the like."""
    plain = bytearray(build_batch([], base_offset=0))
    body = garbage
    if codec:
        compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
        body = compressor.compress(garbage) + compressor.flush()
    data = plain + body
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">h", data, 21, codec)
    struct.pack_into(">i", data, 57, 3)
    try:
        decode_batch(with_crc_fixed(data))
    except KafkaError as err:
        assert err.code == ErrorCode.CORRUPT_MESSAGE
