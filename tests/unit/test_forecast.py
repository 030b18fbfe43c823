"""Catch-up forecast (burrowpy.evaluator.forecast): the partition's rates and state, the group's fold, and
the figures reaching the evaluation of a group."""

import math
import random

from hypothesis import given
from hypothesis import strategies as st

from burrowpy.evaluator.forecast import (
    CATCHING_UP,
    CAUGHT_UP,
    FALLING_BEHIND,
    KEEPING_PACE,
    PACE_TOLERANCE,
    Forecast,
    group_forecast,
    partition_forecast,
)
from burrowpy.evaluator.group import evaluate_group
from burrowpy.protocol import ConsumerOffset, ConsumerPartition

NOW_MS = 1_700_000_000_000


def steady(rate: int, start: int, gap_ms: int, count: int, end_ms: float) -> tuple[list[int], list[int]]:
    """``count`` samples ``gap_ms`` apart ending at ``end_ms`` of a series growing at ``rate`` per second."""
    times = [int(end_ms - gap_ms * (count - 1 - index)) for index in range(count)]
    return [start + rate * (time - times[0]) // 1000 for time in times], times


rates = st.integers(min_value=0, max_value=5_000)
gaps = st.integers(min_value=1, max_value=30).map(lambda seconds: seconds * 1000)
counts = st.integers(min_value=2, max_value=20)


@given(consume=rates, produce=rates, commit_gap=gaps, sample_gap=gaps, commits=counts, samples=counts,
       lag=st.integers(min_value=1, max_value=10**9))
def test_steady_rates_give_the_state_and_the_time_the_rates_say(consume, produce, commit_gap, sample_gap, commits,
                                                                samples, lag):
    commit_offsets, commit_times = steady(consume, 1_000, commit_gap, commits, NOW_MS)
    broker_offsets, broker_times = steady(produce, 5_000, sample_gap, samples, NOW_MS)
    forecast = partition_forecast(lag, commit_offsets, commit_times, broker_offsets, broker_times, NOW_MS)
    produce_seconds = (NOW_MS - max(commit_times[0], broker_times[0])) / 1000
    net = consume - produce
    tolerance = PACE_TOLERANCE * max(consume, produce) + math.sqrt(produce / produce_seconds)
    if abs(net) < tolerance - 0.01 or consume == produce:
        assert forecast == Forecast(KEEPING_PACE)
    elif net > tolerance + 0.01:
        assert forecast.state == CATCHING_UP and forecast.falling_behind_per_second is None
        assert abs(forecast.catch_up_seconds - lag / net) <= lag / net * 1e-6 + 0.001
    elif net < -tolerance - 0.01:
        assert forecast == Forecast(FALLING_BEHIND, None, -net)


@given(consume=rates, produce=rates, lag=st.integers(min_value=-5, max_value=0))
def test_no_lag_is_caught_up_whatever_the_rates(consume, produce, lag):
    commit_offsets, commit_times = steady(consume, 0, 1_000, 5, NOW_MS)
    broker_offsets, broker_times = steady(produce, 0, 1_000, 5, NOW_MS)
    assert partition_forecast(lag, commit_offsets, commit_times, broker_offsets, broker_times, NOW_MS) == Forecast(
        CAUGHT_UP, 0.0)
    assert partition_forecast(lag, [], [], [], [], NOW_MS) == Forecast(CAUGHT_UP, 0.0)


def test_no_rate_yet_without_two_points_of_each_series():
    assert partition_forecast(10, [5], [NOW_MS], [15, 20], [NOW_MS - 1000, NOW_MS], NOW_MS) is None
    assert partition_forecast(10, [1, 5], [NOW_MS - 1000, NOW_MS], [15], [NOW_MS], NOW_MS) is None
    # Two commits in the same millisecond say nothing about a rate.
    assert partition_forecast(10, [1, 5], [NOW_MS, NOW_MS], [10, 15], [NOW_MS - 1000, NOW_MS], NOW_MS) is None


def test_the_span_starts_where_both_series_are_known():
    # Commits every 10 s from t-100 s, broker samples only from t-45 s: the consumer's position at t-45 s is
    # read between its commits (offset 550), so it consumed 450 in 45 s while the log grew by 225.
    commits = [100 * n for n in range(11)], [NOW_MS - 100_000 + 10_000 * n for n in range(11)]
    broker = [1275, 1300, 1350, 1400, 1450, 1500], [NOW_MS - 45_000 + 10_000 * n - (5_000 if n else 0)
                                                   for n in range(6)]
    forecast = partition_forecast(500, *commits, *broker, NOW_MS)
    assert forecast == Forecast(CATCHING_UP, 100.0)


def test_a_difference_random_arrivals_could_make_is_keeping_pace():
    # Consuming 8 % slower than records arrive, over 10 s: at 100/s that is within 5 % plus sqrt(100/10)
    # records/s of noise, at 10,000/s it is a trend.
    def forecast(produce: int) -> Forecast | None:
        commit_offsets, commit_times = steady(produce * 92 // 100, 0, 1_000, 11, NOW_MS)
        broker_offsets, broker_times = steady(produce, 50, 1_000, 11, NOW_MS)
        return partition_forecast(500, commit_offsets, commit_times, broker_offsets, broker_times, NOW_MS)

    assert forecast(100) == Forecast(KEEPING_PACE)
    assert forecast(10_000) == Forecast(FALLING_BEHIND, None, 800.0)


@given(stopped_for_s=st.integers(min_value=20, max_value=3_600))
def test_a_consumer_that_stopped_committing_falls_behind_as_the_clock_goes_on(stopped_for_s):
    # It kept pace at 10/s, committing every second, then stopped; the producers go on at 10/s. Once it has
    # missed its beat (no commit for more than twice its average gap) its rate is counted up to now: since
    # the oldest broker sample it consumed nothing.
    now = NOW_MS + stopped_for_s * 1000
    commit_offsets, commit_times = steady(10, 0, 1_000, 10, NOW_MS)
    broker_offsets, broker_times = steady(10, 5, 1_000, 20, now)
    lag = broker_offsets[-1] - commit_offsets[-1]
    forecast = partition_forecast(lag, commit_offsets, commit_times, broker_offsets, broker_times, now)
    assert forecast == Forecast(FALLING_BEHIND, None, 10.0)


def test_a_commit_a_little_late_is_not_yet_a_stop():
    commit_offsets, commit_times = steady(10, 0, 1_000, 10, NOW_MS)
    broker_offsets, broker_times = steady(10, 5, 1_000, 10, NOW_MS + 1_000)
    on_time = partition_forecast(20, commit_offsets, commit_times, broker_offsets, broker_times, NOW_MS + 2_000)
    assert on_time == Forecast(KEEPING_PACE)
    # Missed its beat: from the span's start (t-8 s) to now (t+2.5 s) it consumed 80 records, 7.6/s.
    late = partition_forecast(20, commit_offsets, commit_times, broker_offsets, broker_times, NOW_MS + 2_500)
    assert late == Forecast(FALLING_BEHIND, None, round(10 - 80 / 10.5, 3))


@given(st.lists(st.one_of(st.none(), st.builds(Forecast, st.just(CAUGHT_UP), st.just(0.0), st.none()),
                          st.builds(Forecast, st.just(CATCHING_UP), st.floats(0.001, 1e6), st.none()),
                          st.builds(Forecast, st.just(KEEPING_PACE), st.none(), st.none()),
                          st.builds(Forecast, st.just(FALLING_BEHIND), st.none(), st.floats(0.001, 1e6))),
                max_size=12), st.randoms(use_true_random=False))
def test_the_group_is_its_slowest_partition_in_any_order(forecasts, rng: random.Random):
    group = group_forecast(forecasts)
    shuffled = list(forecasts)
    rng.shuffle(shuffled)
    assert group_forecast(shuffled) == group
    states = {forecast.state if forecast else None for forecast in forecasts}
    if not forecasts:
        assert group is None
    elif FALLING_BEHIND in states:
        behind = [f.falling_behind_per_second for f in forecasts if f and f.state == FALLING_BEHIND]
        assert group.state == FALLING_BEHIND and group.catch_up_seconds is None
        assert abs(group.falling_behind_per_second - sum(behind)) <= 0.001
    elif KEEPING_PACE in states:
        assert group == Forecast(KEEPING_PACE)
    elif None in states:
        assert group is None
    elif CATCHING_UP in states:
        assert group == Forecast(CATCHING_UP, max(f.catch_up_seconds for f in forecasts))
    else:
        assert group == Forecast(CAUGHT_UP, 0.0)


def partition(lag: int, consume: int, produce: int) -> ConsumerPartition:
    """A partition with 11 commits and broker samples a second apart, at these rates."""
    commit_offsets, commit_times = steady(consume, 0, 1_000, 11, NOW_MS)
    broker_offsets, broker_times = steady(produce, 1_000, 1_000, 11, NOW_MS)
    return ConsumerPartition([ConsumerOffset(offset, time, time, None)
                              for offset, time in zip(commit_offsets, commit_times, strict=True)],
                             broker_offsets, lag, broker_times=broker_times)


def test_the_evaluation_carries_each_partitions_forecast_and_the_groups():
    ahead, behind = partition(400, 100, 20), partition(900, 10, 50)
    status = evaluate_group("c", "g", {"t": [ahead, behind]}, NOW_MS / 1000)
    first, second = status.partitions
    assert (first.catch_up_forecast, first.catch_up_seconds, first.falling_behind_per_second) == (
        CATCHING_UP, 5.0, None)
    assert (second.catch_up_forecast, second.catch_up_seconds, second.falling_behind_per_second) == (
        FALLING_BEHIND, None, 40.0)
    assert (status.catch_up_forecast, status.catch_up_seconds, status.falling_behind_per_second) == (
        FALLING_BEHIND, None, 40.0)
    assert status.to_json()["partitions"][0]["catch_up_seconds"] == 5.0
    assert status.to_json()["falling_behind_per_second"] == 40.0
