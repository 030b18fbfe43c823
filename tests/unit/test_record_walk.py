"""The produced-batch validator (Kafka's LogValidator rules) and the bounded timestamp read."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.errors import ErrorCode, KafkaError
from broker.protocol import record_walk
from broker.protocol.record_walk import (
    CHUNK,
    RecordChecks,
    record_times,
    timestamp_at_offset,
    validate_records,
)
from broker.protocol.records import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    HEADER_SIZE,
    Record,
    build_batch,
    validate_batch,
)
from burrowpy.coordinators.record_times import timestamp_at
from tests.examples import examples
from tests.forged_batches import relabel, varint, zstd_of

CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]
NOW = 1_700_000_000_000
OPEN = RecordChecks(2**31 - 9, False, None, None, "topic-0")


def plain_records(records: list[Record]) -> bytes:
    """The uncompressed record bytes of a batch holding ``records``."""
    return build_batch(records)[HEADER_SIZE:]


def walk(batch: bytes, checks: RecordChecks = OPEN) -> int:
    return validate_records(batch, validate_batch(batch), checks)


def refusal(batch: bytes, checks: RecordChecks = OPEN) -> KafkaError:
    with pytest.raises(KafkaError) as caught:
        walk(batch, checks)
    return caught.value


records_strategy = st.lists(
    st.tuples(st.integers(-1, 2**40), st.none() | st.binary(max_size=300), st.none() | st.binary(max_size=3000),
              st.lists(st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=50)), max_size=3)),
    min_size=1, max_size=40)


@contextmanager
def vectors_from(records: int) -> Iterator[None]:
    """Uncompressed batches of at least ``records`` records read with numpy rather than walked."""
    kept = record_walk.VECTOR_MIN_RECORDS
    record_walk.VECTOR_MIN_RECORDS = records
    try:
        yield
    finally:
        record_walk.VECTOR_MIN_RECORDS = kept


@contextmanager
def small_chunks(chunk: int, big_record: int) -> Iterator[None]:
    """Decompressed data pulled ``chunk`` bytes at a time, records over ``big_record`` read field by field."""
    kept = record_walk.CHUNK, record_walk.BIG_RECORD
    record_walk.CHUNK, record_walk.BIG_RECORD = chunk, big_record
    try:
        yield
    finally:
        record_walk.CHUNK, record_walk.BIG_RECORD = kept


@settings(max_examples=examples(150, 40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=records_strategy, codec=st.sampled_from(CODECS))
def test_valid_batches_pass_and_give_their_records_largest_timestamp(entries, codec):
    records = [Record(i, ts, key, value, headers) for i, (ts, key, value, headers) in enumerate(entries)]
    batch = build_batch(records, compression=codec)
    for threshold in (1, 2**31):
        with vectors_from(threshold):
            assert walk(batch) == max(record.timestamp for record in records)
    with small_chunks(7, 40):  # records across chunk boundaries, and records read field by field
        assert walk(batch) == max(record.timestamp for record in records)
        assert timestamp_at_offset(batch, len(records) - 1, 2**31) == records[-1].timestamp
    assert timestamp_at_offset(batch, len(records) - 1, 2**31) == records[-1].timestamp


def lie(draw: st.DrawFn) -> bytes:
    """A batch of 1-100 records with one thing wrong in its records (the header's own fields are right)."""
    count = draw(st.integers(1, 100))
    if draw(st.booleans()):  # records of one key and value size: runs of one length, guessed and checked at once
        key, size = draw(st.none() | st.binary(max_size=20)), draw(st.integers(0, 200))
        records = [Record(i, NOW + draw(st.integers(-5, 5)), key, b"v" * size) for i in range(count)]
    else:
        records = [Record(i, NOW + draw(st.integers(-5, 5)), draw(st.none() | st.binary(max_size=20)), b"v" * i)
                   for i in range(count)]
    body = bytearray(build_batch(records)[HEADER_SIZE:])
    kind = draw(st.sampled_from(["byte", "cut", "extend", "count"]))
    if kind == "byte":
        at = draw(st.integers(0, len(body) - 1))
        body[at] = draw(st.integers(0, 255).filter(lambda b: b != body[at]))
    elif kind == "cut":
        del body[draw(st.integers(0, len(body) - 1)):]
    elif kind == "extend":
        body += draw(st.binary(min_size=1, max_size=20))
    header_count = count + (draw(st.sampled_from([-1, 1])) if kind == "count" else 0)
    if header_count < 1:
        header_count = count + 1
    return relabel(build_batch(records), body=bytes(body), records_count=header_count,
                   last_offset_delta=header_count - 1)


@settings(max_examples=examples(300, 60), deadline=None)
@given(data=st.data())
def test_numpy_and_the_walk_agree_on_every_lie(data):
    batch = data.draw(st.composite(lambda draw: lie(draw))())
    answers = []
    for threshold in (1, 2**31):
        with vectors_from(threshold):
            try:
                answers.append(("stored", walk(batch, OPEN._replace(compacted=True))))
            except KafkaError as error:
                answers.append((error.code, error.message, error.record_errors))
    assert answers[0] == answers[1]
    zstd = relabel(batch, body=zstandard.ZstdCompressor().compress(batch[HEADER_SIZE:]), attributes=COMPRESSION_ZSTD)
    for chunks in ((256 * 1024, 1 << 20), (7, 40)):
        with small_chunks(*chunks):
            try:
                answers.append(("stored", walk(zstd, OPEN._replace(compacted=True))))
            except KafkaError as error:
                answers.append((error.code, error.record_errors))
    # the same verdict compressed, in big chunks and small (messages may name other places)
    assert {answer[0] for answer in answers[2:]} == {answers[0][0]}
    assert answers[2] == answers[3]


@pytest.mark.parametrize("codec", CODECS)
def test_a_header_counting_fewer_records_than_present_is_refused(codec):
    two = build_batch([Record(0, NOW, b"a", b"1"), Record(1, NOW, b"b", b"2")], compression=codec)
    error = refusal(relabel(two, records_count=1, last_offset_delta=0))
    assert error.code == ErrorCode.INVALID_RECORD and error.record_errors == []


@pytest.mark.parametrize("codec", CODECS)
def test_a_header_counting_more_records_than_present_is_refused(codec):
    two = build_batch([Record(0, NOW, b"a", b"1"), Record(1, NOW, b"b", b"2")], compression=codec)
    assert refusal(relabel(two, records_count=3, last_offset_delta=2)).code == ErrorCode.INVALID_RECORD


def test_trailing_bytes_after_the_records_are_refused():
    batch = build_batch([Record(0, NOW, b"a", b"1")])
    assert refusal(relabel(batch, body=batch[HEADER_SIZE:] + b"\x00")).code == ErrorCode.INVALID_RECORD


def test_offset_deltas_must_count_the_records():
    gapped = build_batch([Record(0, NOW, b"a", b"1"), Record(2, NOW, b"b", b"2")])
    error = refusal(relabel(gapped, records_count=2, last_offset_delta=1))
    assert error.code == ErrorCode.INVALID_RECORD and "offset delta 2" in error.message


@pytest.mark.parametrize("body", [
    b"\x02\x00",  # a one-byte body: no room for its fields
    b"\x0e\x00\x00\x00\x01\x01\x00\x00\x00",  # length 7, fields of 8 bytes
    b"\x10\x00\x00\x00\x01\x01\x00\x00",  # length 8, fields of 7 bytes then the batch ends
    b"\x0c\x00\x00\x00\x01\x01\x01",  # a negative header count
    b"\x0c\x00\x00\x00\x05\x01\x00",  # a key size of -3
])
def test_records_whose_fields_do_not_add_up_are_refused(body):
    batch = relabel(build_batch([Record(0, NOW, None, None)]), body=body)
    assert refusal(batch).code == ErrorCode.INVALID_RECORD


def test_a_lying_max_timestamp_is_replaced_by_the_records_own():
    year_2100 = 4_102_444_800_000
    batch = relabel(build_batch([Record(0, NOW, b"k", b"v"), Record(1, NOW + 5, b"k", b"v")]),
                    max_timestamp=year_2100)
    assert walk(batch) == NOW + 5


def test_keyless_records_are_refused_on_compacted_topics_with_an_error_for_each():
    batch = build_batch([Record(0, NOW, b"k", b"v"), Record(1, NOW, None, b"v"), Record(2, NOW, None, b"v")])
    error = refusal(batch, OPEN._replace(compacted=True))
    assert error.code == ErrorCode.INVALID_RECORD
    assert [index for index, _ in error.record_errors] == [1, 2]
    assert "Compacted topic cannot accept message without key in topic partition topic-0" in error.record_errors[0][1]


@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_ZSTD])
def test_timestamps_out_of_bounds_are_refused_with_an_error_for_each(codec):
    batch = build_batch([Record(0, NOW - 10_000, b"k", b"v"), Record(1, NOW, b"k", b"v"),
                         Record(2, NOW + 10_000, b"k", b"v"), Record(3, -1, b"k", b"v")], compression=codec)
    error = refusal(batch, OPEN._replace(earliest_ms=NOW - 1000, latest_ms=NOW + 1000))
    assert error.code == ErrorCode.INVALID_TIMESTAMP
    assert [index for index, _ in error.record_errors] == [0, 2]  # no timestamp (-1) is not checked, as in Kafka
    assert error.record_errors[0][1].startswith(f"Timestamp {NOW - 10_000} of message with offset 0 is out of range")


def test_a_decompressed_record_over_the_limit_is_refused_whole():
    batch = build_batch([Record(0, NOW, b"k", b"v" * 2000)], compression=COMPRESSION_GZIP)
    error = refusal(batch, OPEN._replace(max_record_bytes=1000))
    assert error.code == ErrorCode.INVALID_RECORD and error.record_errors == []
    assert walk(build_batch([Record(0, NOW, b"k", b"v" * 2000)]), OPEN._replace(max_record_bytes=1000)) == NOW


@pytest.mark.parametrize("codec", [COMPRESSION_GZIP, COMPRESSION_LZ4, COMPRESSION_ZSTD, COMPRESSION_SNAPPY])
def test_compressed_data_that_does_not_decompress_is_refused(codec):
    """Garbage is CORRUPT_MESSAGE where the codec notices, else the records it yields are not the ones counted."""
    batch = build_batch([Record(0, NOW, b"k", b"v" * 100)], compression=codec)
    body = bytearray(batch[HEADER_SIZE:])
    body[len(body) // 2 :] = b"\xff" * (len(body) - len(body) // 2)
    refused = (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD)
    assert refusal(relabel(batch, body=bytes(body))).code in refused
    assert refusal(relabel(batch, body=bytes(body[: len(body) // 3]))).code in refused
    assert refusal(relabel(batch, body=b"\x00" * 40)).code == ErrorCode.CORRUPT_MESSAGE


def test_a_decompression_bomb_behind_its_counted_records_costs_one_chunk():
    head = plain_records([Record(0, NOW, b"k", b"v")])
    bomb = relabel(build_batch([Record(0, NOW, b"k", b"v")], compression=COMPRESSION_ZSTD),
                   body=zstd_of(head, 1 << 30))
    assert len(bomb) < 64 * 1024
    tracemalloc.start()
    try:
        error = refusal(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert error.code == ErrorCode.INVALID_RECORD
    assert peak < 4 * CHUNK


def test_a_huge_record_within_the_limit_is_walked_without_being_held():
    # one record whose value is 64 MiB of zeros, compressed: legal, and read a chunk at a time
    value_size = 64 << 20
    record_body = b"\x00" + b"\x00" + b"\x00" + b"\x01" + varint(value_size)
    tail = b"\x00"  # no headers
    length = len(record_body) + value_size + len(tail)
    compressor = zstandard.ZstdCompressor(level=1).compressobj()
    body = compressor.compress(varint(length) + record_body)
    zeros = bytes(1 << 20)
    body += b"".join(compressor.compress(zeros) for _ in range(value_size >> 20))
    body += compressor.compress(tail) + compressor.flush()
    batch = relabel(build_batch([Record(0, NOW, None, b"")], compression=COMPRESSION_ZSTD), body=body)
    tracemalloc.start()
    try:
        assert walk(batch) == NOW
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * CHUNK + (1 << 20)
    assert refusal(batch, OPEN._replace(max_record_bytes=1 << 20)).code == ErrorCode.INVALID_RECORD


def test_timestamp_at_offset_stops_at_the_wanted_record():
    records = [Record(i, NOW + i, b"k", b"v") for i in range(3)]
    head = plain_records(records)
    bomb = relabel(build_batch(records, compression=COMPRESSION_ZSTD), body=zstd_of(head, 1 << 30))
    tracemalloc.start()
    try:
        assert timestamp_at_offset(bomb, 1, 1 << 20) == NOW + 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * CHUNK
    compacted = build_batch([Record(0, NOW, b"a", b"1"), Record(5, NOW + 5, b"b", b"2")], last_offset_delta=9)
    assert timestamp_at_offset(compacted, 3, 1 << 20) == NOW + 5
    assert timestamp_at_offset(compacted, 6, 1 << 20) is None
    big = build_batch([Record(0, NOW, b"k", b"v" * 5000)], compression=COMPRESSION_GZIP)
    with pytest.raises(KafkaError):
        timestamp_at_offset(big, 0, 1000)


def test_the_monitors_timestamp_reader_reads_a_bomb_up_to_the_wanted_record():
    records = [Record(10 + i, NOW + i, b"k", b"v") for i in range(3)]
    bomb = relabel(build_batch(records, base_offset=10, compression=COMPRESSION_ZSTD),
                   body=zstd_of(build_batch(records, base_offset=10)[HEADER_SIZE:], 1 << 30))
    tracemalloc.start()
    try:
        assert timestamp_at(bomb, 11) == (NOW + 1, None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * CHUNK
    huge_record = relabel(bomb, body=zstd_of(varint(1 << 30), 1 << 30))
    assert timestamp_at(huge_record, 10) == (None, None)  # beyond the reader's bound: not read


def test_the_compressed_form_of_the_same_records_gives_the_same_answer():
    records = [Record(i, NOW + (i * 37) % 11, b"k%d" % i, b"v" * i) for i in range(50)]
    answers = {codec: walk(build_batch(records, compression=codec)) for codec in CODECS}
    assert set(answers.values()) == {NOW + 10}


def test_zstd_data_of_several_frames_is_read_across_them():
    records = [Record(0, NOW, b"a", b"1"), Record(1, NOW + 1, b"b", b"2")]
    plain = build_batch(records)[HEADER_SIZE:]
    middle = len(plain) // 2
    frames = zstandard.ZstdCompressor().compress(plain[:middle]) + zstandard.ZstdCompressor().compress(plain[middle:])
    assert walk(relabel(build_batch(records, compression=COMPRESSION_ZSTD), body=frames)) == NOW + 1


@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_ZSTD])
def test_a_header_count_beyond_the_record_is_refused_at_once(codec):
    """A record of a few bytes claiming 2**30 headers, with zeros after it that would read as empty headers."""
    body = b"\x0e\x00\x00\x00\x01\x01" + varint(1 << 30) + bytes(1 << 20)
    batch = relabel(build_batch([Record(0, NOW, None, None)]), body=body)
    if codec == COMPRESSION_ZSTD:
        batch = relabel(batch, body=zstd_of(body, 0), attributes=COMPRESSION_ZSTD)
    started = time.process_time()
    assert refusal(batch).code == ErrorCode.INVALID_RECORD
    with small_chunks(7, 4):  # the record read field by field from the stream
        assert refusal(batch).code == ErrorCode.INVALID_RECORD
    with pytest.raises(KafkaError):
        list(record_times(batch, 1 << 20))
    assert time.process_time() - started < 0.5


def test_the_monitors_reader_reads_no_more_than_its_budget_of_a_batch():
    """2**22 records of seven bytes that zstd packs into a few KB, none at the wanted offset: the reader gives
    up past its budget (lag in seconds interpolates) instead of walking all of them."""
    count = 1 << 22
    one = build_batch([Record(0, NOW, None, b"")])[HEADER_SIZE:]
    assert len(one) == 7
    compressor = zstandard.ZstdCompressor(level=1).compressobj()
    block = one * (1 << 16)
    body = b"".join(compressor.compress(block) for _ in range(count >> 16)) + compressor.flush()
    batch = relabel(build_batch([Record(0, NOW, None, b"")], compression=COMPRESSION_ZSTD),
                    body=body, records_count=count, last_offset_delta=count - 1)
    started = time.process_time()
    assert timestamp_at(batch, 5) == (None, None)
    assert time.process_time() - started < 10


@pytest.mark.parametrize("sizes", ["one", "runs", "every"])
def test_record_lengths_guessed_in_runs_give_what_the_walk_gives(sizes):
    # 10,000 records: the offset and timestamp deltas' varints grow at records 64 and 8,192, so even records
    # of one value size come in runs of three lengths; "runs" changes the size every 1,000 records, "every"
    # every record (the guesses give up and the chain is followed)
    def size(i: int) -> int:
        return {"one": 100, "runs": 100 + i // 1000, "every": 100 + i * 7919 % 50}[sizes]

    records = [Record(i, NOW + i, None, b"v" * size(i)) for i in range(10_000)]
    batch = build_batch(records)
    with vectors_from(1):
        assert walk(batch) == NOW + 9_999
    body = bytearray(batch[HEADER_SIZE:])
    at = len(plain_records(records[:5_000]))  # the length field of record 5,000, one record longer than it is
    body[at] += 2
    lying = relabel(batch, body=bytes(body))
    answers = []
    for threshold in (1, 2**31):
        with vectors_from(threshold):
            error = refusal(lying)
            answers.append((error.code, error.message))
    assert answers[0] == answers[1] and answers[0][0] == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize(("count", "size"), [(1000, 10), (1000, 100), (900, 1024), (100, 10_000), (20, 300_000)])
def test_plain_batches_of_one_record_size_are_read_with_numpy_alone(count, size):
    """What producers send most (records of one size, lengths of one to three varint bytes) is read at once:
    the numpy path itself accepts it, rather than giving up and leaving it to the record-by-record walk,
    which gives the same answer at several times the cost (bench/record_walk.py)."""
    batch = build_batch([Record(i, NOW + i, None, b"v" * size) for i in range(count)])
    header = validate_batch(batch)
    assert record_walk._checked_at_once(batch, header.size, record_walk._Walk(header, OPEN)) == NOW + count - 1


def _chain(body: bytes) -> tuple[list[int], list[int]]:
    """Where each record of ``body`` (a batch's record bytes) ends and where its fields start past its length,
    following the lengths one by one."""
    ends, fields, pos = [], [], 0
    while pos < len(body):
        length, after = record_walk._read_varint(body, pos)
        fields.append(HEADER_SIZE + after)
        pos = after + length
        ends.append(HEADER_SIZE + pos)
    return ends, fields


def _padded(records: list[Record], every: int) -> bytes:
    """The records' bytes with every ``every``-th record's length written one byte longer than it need be
    (a continuation byte then a zero: the same length, which Kafka's varint reader takes)."""
    body = plain_records(records)
    out, pos, index = bytearray(), 0, 0
    while pos < len(body):
        length, after = record_walk._read_varint(body, pos)
        field = bytearray(body[pos:after])
        if index % every == every - 1:
            field[-1] |= 0x80
            field.append(0)
        out += field + body[after:after + length]
        pos, index = after + length, index + 1
    return bytes(out)


@pytest.mark.parametrize("sizes", ["one", "runs", "every", "padded"])
def test_record_lengths_guessed_in_runs_say_where_each_records_fields_start(sizes):
    # _record_ends gives both where each record ends and where its fields start (past its length), as the
    # chain of lengths followed one by one gives them; "padded": a length now and then written with a needless
    # continuation byte, which has the value of its run's lengths but not their bytes, so the run stops there
    def size(i: int) -> int:
        return {"every": 100 + i * 7919 % 50, "runs": 100 + i // 300}.get(sizes, 1000)

    records = [Record(i, NOW + i, None, b"v" * size(i)) for i in range(2_000)]
    body = _padded(records, 150) if sizes == "padded" else plain_records(records)
    batch = relabel(build_batch(records), body=body)
    data = record_walk.np.frombuffer(batch, record_walk.np.uint8)
    found = record_walk._record_ends(batch, data, len(batch), len(records))
    assert found is not None
    ends, fields = _chain(body)
    assert found[0].tolist() == ends
    assert found[1].tolist() == fields
    header = validate_batch(batch)
    assert record_walk._checked_at_once(batch, header.size, record_walk._Walk(header, OPEN)) == NOW + 1_999
    with vectors_from(2**31):
        assert walk(batch) == NOW + 1_999
