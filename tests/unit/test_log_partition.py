"""PartitionLog: appends, reads, indexes, timestamps, epochs, truncation, DeleteRecords, retention."""

from __future__ import annotations

import os

import pytest
from log_harness import BASE_TS, Clock, all_records, batch, config, keyed_batch

from broker.errors import ErrorCode, KafkaError
from broker.log.index import PENDING_ENTRIES
from broker.log.partition import PartitionLog
from broker.protocol.records import BatchHeader, decode_batch, iter_batches, whole_batches_length


def fill(
    log: PartitionLog, counts: list[int], *, ts_step: int = 10, value_size: int = 20
) -> list[tuple[int, int]]:
    """Append batches of the given record counts; return each batch's (base offset, last offset)."""
    spans = []
    for i, count in enumerate(counts):
        result = log.append(batch(count, ts=BASE_TS + i * ts_step, value=b"v" * value_size), now_ms=BASE_TS)
        spans.append((result.base_offset, result.last_offset))
    return spans


def headers_of(data: bytes) -> list[BatchHeader]:
    assert whole_batches_length(data) == len(data), "read returned a partial batch"
    return [header for _, header in iter_batches(data)]


@pytest.fixture
def clock():
    return Clock()


def test_append_assigns_offsets_across_segment_rolls(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(segment_bytes=600, index_interval_bytes=100), clock)
    counts = [1, 3, 2, 5, 1, 4] * 8
    spans = fill(log, counts)
    expected, next_offset = [], 0
    for count in counts:
        expected.append((next_offset, next_offset + count - 1))
        next_offset += count
    assert spans == expected
    assert log.log_end_offset == log.high_watermark == sum(counts)
    assert log.segment_count > 5
    records = all_records(log)
    assert [r.offset for r in records] == list(range(sum(counts)))
    assert sorted(f[:20] for f in os.listdir(tmp_path / "p") if f.endswith(".log")) == sorted(
        f"{base:020d}" for base in log._bases
    )
    assert log.size_bytes == sum(
        os.path.getsize(tmp_path / "p" / f) for f in os.listdir(tmp_path / "p") if f.endswith(".log")
    )


def test_read_from_every_offset_returns_the_batch_holding_it(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(segment_bytes=700, index_interval_bytes=150), clock)
    spans = fill(log, [1, 4, 2, 3, 1, 1, 6, 2] * 5)
    for offset in range(log.log_end_offset):
        holder = next(span for span in spans if span[0] <= offset <= span[1])
        # KIP-74: one whole batch even when it is bigger than max_bytes.
        one = headers_of(log.read(offset, 1))
        assert [(h.base_offset, h.last_offset) for h in one] == [holder]
        everything = headers_of(log.read(offset, 1 << 20))
        assert everything[0].base_offset == holder[0]
        assert everything[-1].next_offset == log.log_end_offset
        assert [(h.base_offset, h.last_offset) for h in everything] == [s for s in spans if s[1] >= offset]


def test_read_limits_bytes_to_whole_batches(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(segment_bytes=2000), clock)
    fill(log, [2] * 30)
    size = len(batch(2))
    for max_bytes in (size - 1, size, size + 1, 2 * size, 5 * size + 7, 10_000):
        data = log.read(0, max_bytes)
        assert len(data) == max(size, min(max_bytes // size * size, 60 // 2 * size))
        headers_of(data)


def test_read_stops_before_max_offset(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(segment_bytes=500), clock)
    fill(log, [3] * 10)
    data = log.read(0, 1 << 20, max_offset=10)
    assert [h.base_offset for h in headers_of(data)] == [0, 3, 6, 9]
    assert log.read(12, 1 << 20, max_offset=12) == b""
    assert log.read(30, 1 << 20) == b""


@pytest.mark.parametrize("offset", [-1, 11])
def test_read_out_of_range(tmp_path, clock, offset):
    log = PartitionLog(tmp_path / "p", config(), clock)
    fill(log, [5, 5])
    with pytest.raises(KafkaError) as err:
        log.read(offset, 100)
    assert err.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_offset_index_is_sparse(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(index_interval_bytes=1000), clock)
    fill(log, [1] * 200)
    segment = log._segments[-1]
    entries = segment.offset_index.entries()
    batch_size = len(batch(1))
    assert len(entries) == pytest.approx(segment.size / (1000 + batch_size), abs=2)
    # the file gets the entries in groups; a flush writes the rest
    assert os.path.getsize(segment.offset_index.path) == 8 * (len(entries) - len(entries) % PENDING_ENTRIES)
    log.flush()
    assert os.path.getsize(segment.offset_index.path) == 8 * len(entries)
    for offset, position in entries:
        assert BatchHeader.parse(segment.read(position, 61)).base_offset == offset


def test_index_entries_held_in_memory_reach_the_files_on_close_and_are_rebuilt_when_lost(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(index_interval_bytes=100), clock)
    fill(log, [1] * (PENDING_ENTRIES + 5))
    segment = log._segments[-1]
    entries, times = segment.offset_index.entries(), segment.time_index.entries()
    assert len(entries) % PENDING_ENTRIES and os.path.getsize(segment.offset_index.path) < 8 * len(entries)
    log.close()
    reopened = PartitionLog(tmp_path / "p", config(index_interval_bytes=100), clock)
    assert reopened._segments[-1].offset_index.entries() == entries
    assert reopened._segments[-1].time_index.entries()[:len(times)] == times
    fill(reopened, [1] * 3)
    # a process that dies loses the entries not yet written, and its unclean shutdown rebuilds the indexes
    killed = PartitionLog(tmp_path / "p", config(index_interval_bytes=100), clock)
    assert killed._segments[-1].offset_index.entries() == reopened._segments[-1].offset_index.entries()
    for offset in range(reopened.log_end_offset):
        assert BatchHeader.parse(killed.read(offset, 1)).base_offset == offset


def test_roll_by_segment_ms_uses_batch_timestamps(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(segment_ms=1000), clock)
    log.append(batch(1, ts=BASE_TS), now_ms=BASE_TS)
    log.append(batch(1, ts=BASE_TS + 1000), now_ms=BASE_TS)
    assert log.segment_count == 1
    log.append(batch(1, ts=BASE_TS + 1001), now_ms=BASE_TS)
    assert log.segment_count == 2
    assert log._bases == [0, 2]


def test_segment_jitter_rolls_earlier_by_a_share_drawn_per_segment(tmp_path, clock, monkeypatch):
    monkeypatch.setattr("broker.log.partition.random.randrange", lambda upper: upper - 1)
    log = PartitionLog(tmp_path / "p", config(segment_ms=1000, segment_jitter_ms=400), clock)
    log.append(batch(1, ts=BASE_TS), now_ms=BASE_TS)
    log.append(batch(1, ts=BASE_TS + 602), now_ms=BASE_TS + 602)  # past 1000 - 399
    assert log.segment_count == 2
    log.append(batch(1, ts=BASE_TS + 1100), now_ms=BASE_TS + 1100)  # 498 ms into the new segment: not yet
    assert log.segment_count == 2


def test_timestamps_beyond_the_topics_bounds_are_refused(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(message_timestamp_before_max_ms=60_000), clock)
    hour = 3_600_000
    with pytest.raises(KafkaError) as err:
        log.append(batch(3, ts=BASE_TS + hour + 1), now_ms=BASE_TS)  # after.max.ms: one hour by default
    assert err.value.code == ErrorCode.INVALID_TIMESTAMP and [i for i, _ in err.value.record_errors] == [0, 1, 2]
    with pytest.raises(KafkaError) as err:
        log.append(batch(1, ts=BASE_TS - 60_001), now_ms=BASE_TS)
    assert "out of range" in err.value.record_errors[0][1]
    assert log.log_end_offset == 0
    log.append(batch(1, ts=BASE_TS - 60_000), now_ms=BASE_TS)
    log.append(batch(1, ts=BASE_TS + hour), now_ms=BASE_TS)
    assert log.log_end_offset == 2


def test_offset_for_timestamp_and_max_timestamp(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(segment_bytes=500, index_interval_bytes=120), clock)
    stamps = [100, 90, 200, 200, 350, 300, 500, 480, 700, 1000, 999, 1200]
    records_ts = []
    for i, ts in enumerate(stamps):
        log.append(batch(2, ts=BASE_TS + ts), now_ms=BASE_TS)
        records_ts += [(2 * i, BASE_TS + ts), (2 * i + 1, BASE_TS + ts + 1)]
    assert log.segment_count > 2

    def expected(target):
        return next(((o, t) for o, t in records_ts if t >= target), None)

    def check(plog):
        for target in range(BASE_TS + 50, BASE_TS + 1300, 7):
            assert plog.offset_for_timestamp(target) == expected(target), target
        assert plog.max_timestamp() == (23, BASE_TS + 1201)

    check(log)
    log.close()
    check(PartitionLog(tmp_path / "p", config(segment_bytes=500, index_interval_bytes=120), clock))


def test_empty_log_timestamps(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(), clock)
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp() is None
    assert log.read(0, 100) == b""


def test_log_append_time(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(message_timestamp_type="LogAppendTime"), clock)
    result = log.append(batch(3, ts=5), now_ms=BASE_TS + 42)
    assert result.log_append_time_ms == BASE_TS + 42
    header, records = decode_batch(log.read(0, 1000))
    assert header.timestamp_type == 1
    assert [r.timestamp for r in records] == [BASE_TS + 42] * 3
    assert log.offset_for_timestamp(BASE_TS + 40) == (0, BASE_TS + 42)
    assert PartitionLog(tmp_path / "q", config(), clock).append(batch(1), now_ms=BASE_TS).log_append_time_ms == -1


def test_message_too_large(tmp_path, clock):
    data = batch(1, value=b"x" * 500)
    log = PartitionLog(tmp_path / "p", config(max_message_bytes=len(data) - 1), clock)
    with pytest.raises(KafkaError) as err:
        log.append(data)
    assert err.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert log.log_end_offset == 0


def test_invalid_batches_are_refused_before_writing(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(), clock)
    corrupt = bytearray(batch(2))
    corrupt[-1] ^= 0xFF
    with pytest.raises(KafkaError) as err:
        log.append(bytes(corrupt))
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE
    assert log.size_bytes == 0


def test_compacted_topic_refuses_records_without_key(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(cleanup_policy="compact"), clock)
    log.append(keyed_batch([(b"a", b"1")]))
    with pytest.raises(KafkaError) as err:
        log.append(keyed_batch([(b"a", b"1"), (None, b"2")], compression=1))
    assert err.value.code == ErrorCode.INVALID_RECORD


def test_leader_epoch_cache(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(), clock)
    for epoch, count in [(0, 2), (0, 3), (2, 4), (5, 1), (5, 2)]:
        log.append(batch(count), leader_epoch=epoch)
    assert log.leader_epoch_entries() == [(0, 0), (2, 5), (5, 9)]
    table = {-1: (-1, -1), 0: (0, 5), 1: (0, 5), 2: (2, 9), 3: (2, 9), 5: (5, 12), 6: (-1, -1)}
    for epoch, answer in table.items():
        assert log.end_offset_for_epoch(epoch) == answer, epoch
    header = BatchHeader.parse(log.read(9, 100))
    assert header.partition_leader_epoch == 5
    log.close()
    log = PartitionLog(tmp_path / "p", config(), clock)
    assert log.leader_epoch_entries() == [(0, 0), (2, 5), (5, 9)]
    log.truncate_to(7)
    assert log.log_end_offset == 5
    assert log.leader_epoch_entries() == [(0, 0)]
    assert log.end_offset_for_epoch(0) == (0, 5)


def test_delete_records_before(tmp_path, clock):
    cfg = config(segment_bytes=400)
    log = PartitionLog(tmp_path / "p", cfg, clock)
    fill(log, [2] * 20)
    segments_before = log.segment_count
    assert log.delete_records_before(15) == 15
    assert log.log_start_offset == 15
    assert log.segment_count < segments_before
    assert log._segments[0].base_offset <= 15 < log._segments[0].next_offset
    with pytest.raises(KafkaError) as err:
        log.read(14, 100)
    assert err.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert [r.offset for r in all_records(log)] == list(range(15, 40))
    assert log.delete_records_before(3) == 15  # never backwards
    with pytest.raises(KafkaError):
        log.delete_records_before(41)
    log.close()
    log = PartitionLog(tmp_path / "p", cfg, clock)
    assert log.log_start_offset == 15
    assert log.delete_records_before(-1) == 40
    assert log.log_end_offset == 40
    assert log.read(40, 100) == b""
    log.append(batch(1))
    assert all_records(log)[0].offset == 40


def test_truncate_to(tmp_path, clock):
    cfg = config(segment_bytes=300)
    log = PartitionLog(tmp_path / "p", cfg, clock)
    fill(log, [3] * 12)
    log.truncate_to(20)  # inside the batch 18..20: the whole batch goes
    assert log.log_end_offset == log.high_watermark == 18
    assert [r.offset for r in all_records(log)] == list(range(18))
    log.truncate_to(18)
    assert log.log_end_offset == 18
    assert log.append(batch(2)).base_offset == 18
    log.close()
    log = PartitionLog(tmp_path / "p", cfg, clock)
    assert [r.offset for r in all_records(log)] == list(range(20))
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 0, 0)
    assert log.append(batch(1)).base_offset == 0


def test_truncate_below_log_start_restarts_the_log(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(segment_bytes=300), clock)
    fill(log, [3] * 10)
    log.delete_records_before(12)
    log.truncate_to(6)
    assert (log.log_start_offset, log.log_end_offset) == (6, 6)
    assert log.append(batch(1)).base_offset == 6


def test_append_replicated_copies_leader_bytes(tmp_path, clock):
    leader = PartitionLog(tmp_path / "leader", config(segment_bytes=500), clock)
    for epoch in (0, 0, 1, 1, 3):
        leader.append(batch(2), leader_epoch=epoch)
    follower = PartitionLog(tmp_path / "follower", config(segment_bytes=500), clock)
    fetched = leader.read(0, 1 << 20)
    assert follower.append_replicated(fetched[:-5]) == 8  # the truncated last batch is left for later
    assert follower.append_replicated(leader.read(8, 1 << 20)) == 10
    assert follower.read(0, 1 << 20) == leader.read(0, 1 << 20)
    assert follower.leader_epoch_entries() == leader.leader_epoch_entries()
    with pytest.raises(KafkaError) as err:
        follower.append_replicated(leader.read(8, 1 << 20))
    assert err.value.code == ErrorCode.INVALID_RECORD
    corrupt = bytearray(leader.read(8, 1 << 20))
    corrupt[-1] ^= 1
    with pytest.raises(KafkaError) as err:
        PartitionLog(tmp_path / "other", config(), clock).append_replicated(bytes(corrupt))
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE


def test_append_replicated_accepts_offset_gaps(tmp_path, clock):
    source = PartitionLog(tmp_path / "source", config(), clock)
    fill(source, [2, 2, 2])
    source.truncate_to(2)
    gap_batch = bytearray(batch(1))
    gap_batch[0:8] = (100).to_bytes(8, "big")
    follower = PartitionLog(tmp_path / "follower", config(), clock)
    assert follower.append_replicated(source.read(0, 1000) + bytes(gap_batch)) == 101
    assert [r.offset for r in all_records(follower)] == [0, 1, 100]
    assert follower.read(50, 1000) == bytes(gap_batch)


def test_retention_by_time_rolls_and_deletes_the_active_segment_too(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(segment_bytes=300, retention_ms=10_000), clock)
    for i in range(10):
        log.append(batch(2, ts=BASE_TS + i * 1000))
    segments = log.segment_count
    # Segments whose newest record is older than 10 s go, oldest first.
    deleted = log.apply_retention(BASE_TS + 15_500)
    assert deleted >= 1
    assert log.segment_count == segments - deleted
    assert all(s.max_timestamp >= BASE_TS + 5_500 for s in log._segments)
    assert log.log_start_offset == log._segments[0].base_offset > 0
    assert log.apply_retention(BASE_TS + 100_000) == segments - deleted
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (20, 20, 0)
    assert log.append(batch(1)).base_offset == 20


def test_retention_by_bytes(tmp_path, clock):
    size = len(batch(1))
    log = PartitionLog(tmp_path / "p", config(segment_bytes=3 * size, retention_bytes=7 * size), clock)
    fill(log, [1] * 20)
    # Kafka's rule: drop the oldest segment only while what remains is still at least retention.bytes.
    assert log.apply_retention() == 4
    assert log.size_bytes == 8 * size
    assert log.log_start_offset == 12


def test_retention_ignores_compact_only_topics(tmp_path, clock):
    log = PartitionLog(
        tmp_path / "p", config(segment_bytes=200, retention_ms=0, cleanup_policy="compact"), clock
    )
    for i in range(5):
        log.append(keyed_batch([(b"k%d" % i, b"v")], ts=1))
    assert log.apply_retention(BASE_TS) == 0


def test_flush_policy(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(flush_ms=1000), clock)
    assert not log.flush_if_due(BASE_TS)
    log.append(batch(1), now_ms=BASE_TS)
    assert not log.flush_if_due(BASE_TS + 999)
    assert log.flush_if_due(BASE_TS + 1000)
    assert not log.flush_if_due(BASE_TS + 5000)
    eager = PartitionLog(tmp_path / "q", config(flush_messages=2), clock)
    eager.append(batch(1), now_ms=BASE_TS)
    assert eager._unflushed_messages == 1
    eager.append(batch(1), now_ms=BASE_TS)
    assert eager._unflushed_messages == 0


def test_closed_log_refuses_work(tmp_path, clock):
    log = PartitionLog(tmp_path / "p", config(), clock)
    log.close()
    with pytest.raises(KafkaError):
        log.append(batch(1))
    with pytest.raises(KafkaError):
        log.read(0, 10)
