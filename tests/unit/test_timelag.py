"""Lag in seconds: the definition (burrowpy.evaluator.timelag), storage's part, the optional WARN rule, and
reading a record's timestamp out of fetched record batches."""

import pytest

from broker.protocol.records import (
    COMPRESSION_GZIP,
    TIMESTAMP_LOG_APPEND_TIME,
    Record,
    build_batch,
)
from burrowpy.coordinators.record_times import fetch_body, timestamp_at
from burrowpy.evaluator.group import evaluate_group
from burrowpy.evaluator.timelag import partition_lag_seconds, record_time_from_samples
from burrowpy.protocol import (
    ConsumerOffset,
    ConsumerPartition,
    SetBrokerOffset,
    SetConsumerOffset,
    SetRecordTimes,
    Status,
)
from burrowpy.storage.ring import BrokerRing
from burrowpy.storage.state import StorageState

NOW_S = 1_700_000_000
NOW_MS = NOW_S * 1000

# --- the definition ---------------------------------------------------------------------------------


def test_caught_up_is_zero_whatever_else_is_known():
    assert partition_lag_seconds(500, [100, 500], [NOW_MS - 10_000, NOW_MS], NOW_MS - 99_000, NOW_MS) == (
        0.0, "caught_up")


def test_a_fetched_record_time_is_used_as_it_is():
    assert partition_lag_seconds(100, [100, 500], [0, 1], NOW_MS - 12_345, NOW_MS) == (12.345, "fetch")


def test_a_record_stamped_ahead_of_the_monitors_clock_is_never_negative():
    assert partition_lag_seconds(100, [500], [NOW_MS], NOW_MS + 5_000, NOW_MS) == (0.0, "fetch")


def test_nothing_to_go_on_gives_no_figure():
    assert partition_lag_seconds(None, [500], [NOW_MS], None, NOW_MS) == (None, None)
    assert partition_lag_seconds(100, [], [], None, NOW_MS) == (None, None)
    # One broker sample ever, already past the commit: when that record was written is unknown.
    assert partition_lag_seconds(100, [500], [NOW_MS], None, NOW_MS) == (None, None)


def test_interpolation_between_the_samples_around_the_record():
    # 100 records appended between t-60 s and t-40 s; offset 149 is the 50th of them, appended at t-50 s.
    offsets, times = [100, 200, 200], [NOW_MS - 60_000, NOW_MS - 40_000, NOW_MS - 20_000]
    assert record_time_from_samples(149, offsets, times) == NOW_MS - 50_000
    assert partition_lag_seconds(149, offsets, times, None, NOW_MS) == (50.0, "interpolated")
    # The first record after a sample counts as one of the interval's records, the last one at its end.
    assert record_time_from_samples(100, offsets, times) == NOW_MS - 59_800
    assert record_time_from_samples(199, offsets, times) == NOW_MS - 40_000


def test_before_the_window_the_produce_rate_extrapolates():
    # 10 records a second over the window: offset 0 is 10 s older than offset 100, the oldest sample's.
    offsets, times = [100, 200, 300], [NOW_MS - 30_000, NOW_MS - 20_000, NOW_MS - 10_000]
    assert record_time_from_samples(0, offsets, times) == NOW_MS - 40_000


def test_idle_producers_keep_the_age_growing():
    """The flaw of interpolating over a rate: here the age keeps growing while nothing is produced."""
    ring = BrokerRing(3)
    ring.add(100, NOW_MS - 100_000)
    ring.add(200, NOW_MS - 90_000)  # the last records were written by then
    for step in range(1, 6):  # producers idle: the same offset sample after sample
        ring.add(200, NOW_MS - 90_000 + step * 10_000)
    assert ring.values() == [200, 200, 200] and ring.since == NOW_MS - 90_000
    ages = [partition_lag_seconds(150, ring.values(), ring.times(), None, NOW_MS + later, ring.since)[0]
            for later in (0, 60_000, 600_000)]
    assert ages == [90.0, 150.0, 690.0]


def test_broker_ring_keeps_times_in_the_order_of_its_offsets():
    ring = BrokerRing(3)
    for index, offset in enumerate((10, 20, 30, 40, 50)):
        ring.add(offset, 1000 + index)
    assert ring.values() == [30, 40, 50]
    assert ring.times() == [1002, 1003, 1004]
    assert ring.since == 1004
    first = BrokerRing(2)
    first.add(7, 5)
    first.add(7, 6)
    assert first.since is None  # the first offset ever read: its age is unknown


# --- storage -------------------------------------------------------------------------------------------


def storage_with_groups() -> StorageState:
    state = StorageState(["c"], intervals=3)
    for index, offset in enumerate((100, 200)):
        state.add_broker_offset(SetBrokerOffset("c", "t", 0, 2, offset, NOW_MS - 20_000 + index * 10_000))
    state.add_broker_offset(SetBrokerOffset("c", "t", 1, 2, 50, NOW_MS - 10_000))
    state.add_consumer_offset(SetConsumerOffset("c", "behind", "t", 0, 120, 1, NOW_MS - 5_000), NOW_S)
    state.add_consumer_offset(SetConsumerOffset("c", "behind", "t", 1, 50, 2, NOW_MS - 5_000), NOW_S)
    state.add_consumer_offset(SetConsumerOffset("c", "other", "t", 0, 150, 3, NOW_MS - 5_000), NOW_S)
    return state


def test_storage_wants_the_records_groups_sit_at_behind_the_broker():
    state = storage_with_groups()
    # t:1 is caught up (50 of 50): nothing to read there.
    assert state.record_time_wants("c") == [("t", 0, 120), ("t", 0, 150)]
    assert state.record_time_wants("nowhere") is None


def test_stored_record_times_reach_the_evaluation_and_are_forgotten_when_nobody_sits_there():
    state = storage_with_groups()
    state.set_record_times(SetRecordTimes("c", [("t", 0, 120, NOW_MS - 17_000), ("t", 0, 150, None)]))
    assert state.record_time_wants("c") == []  # known, even the one that is gone
    behind = state.consumer("c", "behind", NOW_S)["t"][0]
    assert (behind.record_time, behind.broker_offsets, behind.broker_times) == (
        NOW_MS - 17_000, [100, 200], [NOW_MS - 20_000, NOW_MS - 10_000])
    status = evaluate_group("c", "behind", state.consumer("c", "behind", NOW_S), NOW_S + 0.5)
    assert [(p.lag_seconds, p.lag_seconds_method) for p in status.partitions] == [(17.5, "fetch"),
                                                                                  (0.0, "caught_up")]
    assert status.max_lag_seconds == 17.5
    other = evaluate_group("c", "other", state.consumer("c", "other", NOW_S), NOW_S)
    # The record at 150 is gone: interpolated, the 51st of 100 records appended over 10 s.
    assert other.partitions[0].lag_seconds_method == "interpolated"
    assert other.partitions[0].lag_seconds == pytest.approx(14.9)

    state.add_consumer_offset(SetConsumerOffset("c", "behind", "t", 0, 130, 4, NOW_MS), NOW_S)
    assert state.record_time_wants("c") == [("t", 0, 130)]
    assert state.clusters["c"].record_times == {("t", 0): {150: None}}  # 120: nobody is there any more
    assert state.set_record_times(SetRecordTimes("nowhere", [])) == "unknown cluster"


# --- the optional rule ------------------------------------------------------------------------------------


def healthy_but_old(lag_seconds_ago: int) -> dict:
    """A consumer making progress (OK by Burrow's rules) on a partition whose records are old."""
    commits = [ConsumerOffset(1000 + i * 100, NOW_MS - 100_000 + i * 10_000, NOW_MS, 95 - i * 5, i) for i in range(10)]
    return {"t": [ConsumerPartition(commits, [1950], 50, record_time=NOW_MS - lag_seconds_ago * 1000)]}


def test_max_lag_seconds_warns_only_when_set_and_exceeded():
    assert evaluate_group("c", "g", healthy_but_old(120), NOW_S).status == Status.OK
    assert evaluate_group("c", "g", healthy_but_old(120), NOW_S, max_lag_seconds=300).status == Status.OK
    warned = evaluate_group("c", "g", healthy_but_old(120), NOW_S, max_lag_seconds=60, showall=False)
    assert warned.status == Status.WARN
    assert [(p.status, p.lag_seconds) for p in warned.partitions] == [(Status.WARN, 120.0)]


async def test_the_caching_evaluator_takes_per_group_thresholds(tmp_path):
    from burrowpy.config import ConfigError, Section
    from burrowpy.evaluator.caching import CachingEvaluator

    class Log:
        def bind(self, **_):
            return self

    def evaluator(**keys):
        return CachingEvaluator("e", Section(str(tmp_path / "b.yaml"), "evaluator.e", keys), None, None, Log())

    chosen = evaluator(**{"max-lag-seconds": 600, "max-lag-seconds-groups": {"^pay": 30, "^p": 45}})
    assert [chosen.max_lag_seconds_for(g) for g in ("payments", "prices", "audit")] == [30, 45, 600]
    assert evaluator().max_lag_seconds_for("any") == 0
    with pytest.raises(ConfigError, match="max-lag-seconds-groups.\\(: needs a regular expression"):
        evaluator(**{"max-lag-seconds-groups": {"(": 5}})
    with pytest.raises(ConfigError, match="max-lag-seconds: must be 0"):
        evaluator(**{"max-lag-seconds": -1})


# --- reading a record's time from fetched data ------------------------------------------------------------


def records(first: int, count: int, first_time: int) -> list[Record]:
    return [Record(first + i, first_time + i * 1000, None, b"v", []) for i in range(count)]


def test_the_record_at_the_offset_inside_a_batch():
    data = build_batch(records(10, 5, 7_000), base_offset=10) + build_batch(records(15, 5, 50_000), base_offset=15)
    assert timestamp_at(data, 12) == (9_000, None)
    assert timestamp_at(data, 16) == (51_000, None)
    compressed = build_batch(records(10, 5, 7_000), base_offset=10, compression=COMPRESSION_GZIP)
    assert timestamp_at(compressed, 13) == (10_000, None)


def test_log_append_time_batches_answer_with_the_brokers_time():
    batch = build_batch(records(0, 3, 1_000), timestamp_type=TIMESTAMP_LOG_APPEND_TIME, max_timestamp=99_000)
    assert timestamp_at(batch, 1) == (99_000, None)


def test_a_batch_cut_short_asks_for_its_whole_size_unless_the_record_opens_it():
    whole = build_batch(records(10, 50, 7_000), base_offset=10)
    cut = whole[:100]
    assert timestamp_at(cut, 10) == (7_000, None)  # the first record's time is in the header
    assert timestamp_at(cut, 30) == (None, len(whole))
    assert timestamp_at(b"", 10) == (None, None)


def test_control_batches_are_skipped():
    marker = build_batch([Record(5, 4_000, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [])], base_offset=5,
                         is_control=True, is_transactional=True, producer_id=1, producer_epoch=0)
    data = marker + build_batch(records(6, 2, 8_000), base_offset=6)
    assert timestamp_at(data, 5) == (8_000, None)


def test_the_fetch_asks_each_partition_for_a_bounded_amount():
    body = fetch_body([("a", 0, 5), ("a", 1, 7), ("b", 0, 9)], 4096)
    assert body["max_bytes"] == 3 * 4096 and body["min_bytes"] == 0 and body["isolation_level"] == 0
    assert [(t["topic"], [(p["partition"], p["fetch_offset"], p["partition_max_bytes"]) for p in t["partitions"]])
            for t in body["topics"]] == [("a", [(0, 5, 4096), (1, 7, 4096)]), ("b", [(0, 9, 4096)])]
