"""The replay core of the batch job: evaluation points, replay order, lag in seconds, and equality with
the monitor's own storage state and evaluator on random histories."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from burrowpy.evaluator.rules import group_status
from burrowpy.pipeline.inprocess import statuses_through_storage
from burrowpy.pipeline.replay import (
    OffsetTimeline,
    PartitionState,
    ReplaySettings,
    broker_event,
    commit_event,
    evaluation_points,
    history_event,
    replay_history,
    replay_partition,
)
from burrowpy.protocol import Status

T0 = 1_700_000_000_000  # ms, a whole second


# --- evaluation points --------------------------------------------------------------------------------


def test_points_cover_first_to_last_event():
    assert evaluation_points(T0, T0, 60) == [T0 // 1000]
    assert evaluation_points(T0 + 500, T0 + 60_000, 60) == [T0 // 1000, T0 // 1000 + 60]
    # the last point is the first at or after the last event
    assert evaluation_points(T0, T0 + 60_001, 60) == [T0 // 1000 + k * 60 for k in range(3)]


def test_points_reject_bad_input():
    with pytest.raises(ValueError):
        evaluation_points(T0, T0, 0)
    with pytest.raises(ValueError):
        evaluation_points(T0, T0 - 1, 60)


# --- replay order -------------------------------------------------------------------------------------


def test_history_event_order():
    broker = history_event("broker", T0, 50, None, None)
    commit = history_event("commit", T0, 40, 3, "g")
    earlier_commit = history_event("commit", T0 - 1, 45, 9, "g")
    assert sorted([commit, broker, earlier_commit]) == [earlier_commit, broker, commit]
    with pytest.raises(ValueError):
        history_event("commit", T0, 1, None, "g")
    with pytest.raises(ValueError):
        history_event("owner", T0, 1, 1, "g")


def test_a_commit_before_any_broker_offset_is_dropped_as_storage_drops_it():
    state = PartitionState(ReplaySettings())
    assert not state.add_commit("g", 10, 1, T0)
    assert list(state.evaluate(T0 // 1000)) == []
    state.add_broker_offset(20, T0)
    assert state.add_commit("g", 10, 2, T0)
    [evaluation] = state.evaluate(T0 // 1000)
    assert (evaluation.group, evaluation.current_lag, evaluation.complete) == ("g", 10, 0.1)


def test_a_commit_and_a_broker_sample_at_the_same_time_broker_first():
    """The commit is measured against the sample of its own instant, whatever the input order."""
    events = [commit_event(T0, 90, 1, "g"), broker_event(T0, 100), broker_event(T0 - 1000, 10)]
    [evaluation] = replay_partition(events, [T0 // 1000], ReplaySettings())
    assert evaluation.current_lag == 10


# --- statuses over time -------------------------------------------------------------------------------


def scripted(
    commits: list[tuple[int, int]], broker: list[tuple[int, int]], points: list[int], **rule_settings
) -> list[Status]:
    """Statuses at ``points`` (seconds after T0) for commits (second, offset) and samples (second, offset)."""
    events = [broker_event(T0 + s * 1000, o) for s, o in broker]
    events += [commit_event(T0 + s * 1000, o, order, "g") for order, (s, o) in enumerate(commits)]
    return [
        e.status
        for e in replay_partition(events, [T0 // 1000 + p for p in points], ReplaySettings(**rule_settings))
    ]


def test_ok_warn_stop_stall_rewind():
    samples = [(s, 1000 + 10 * s) for s in range(0, 1000, 10)]
    # a consumer that keeps up
    assert scripted([(s, 1000 + 10 * s) for s in range(5, 100, 10)], samples, [100]) == [Status.OK]
    # lag grows at every commit
    assert scripted([(s, 900 + 5 * s) for s in range(5, 100, 10)], samples, [100]) == [Status.WARN]
    # commits stop with lag: STOP once the silence is longer than the window
    stopping = [(s, 1000 + 10 * s - 50) for s in range(5, 100, 10)]
    assert scripted(stopping, samples, [100, 180, 300]) == [Status.OK, Status.OK, Status.STOP]
    # the same offset again and again
    assert scripted([(s, 900) for s in range(5, 100, 10)], samples, [100]) == [Status.STALL]
    # ... unless one of its commits had no lag
    assert scripted([(s, 1100) for s in range(5, 100, 10)], samples, [100]) == [Status.OK]
    # back to an older offset, never recovered
    rewind = [(s, 1000 + 10 * s - 50) for s in range(5, 50, 10)] + [
        (s, 1000 + 10 * s - 800) for s in range(55, 100, 10)
    ]
    assert scripted(rewind, samples, [100]) == [Status.REWIND]


def test_allowed_lag_and_minimum_complete_reach_the_rules():
    samples = [(s, 1000 + 10 * s) for s in range(0, 200, 10)]
    stalled = [(s, 900) for s in range(5, 100, 10)]
    assert scripted(stalled, samples, [100], allowed_lag=10**6) == [Status.OK]
    assert scripted(stalled[:3], samples, [30], minimum_complete=0.5) == [Status.OK]
    assert scripted(stalled[:3], samples, [30]) == [Status.STALL]


def test_group_status_folds_like_burrow():
    assert group_status([]) == Status.OK
    assert group_status([Status.OK, Status.WARN]) == Status.WARN
    assert group_status([Status.WARN, Status.STOP, Status.OK]) == Status.ERR
    assert group_status([Status.REWIND, Status.WARN]) == Status.ERR


# --- lag in seconds -----------------------------------------------------------------------------------


def test_lag_seconds_interpolates_when_the_log_end_passed_the_commit():
    timeline = OffsetTimeline(60)
    for second, offset in [(0, 100), (10, 200), (20, 300)]:
        timeline.add(offset, T0 + second * 1000)
    # 150 is the 51st of the 100 records appended between 0 s and 10 s: at 5.1 s
    assert timeline.lag_seconds(150, T0 + 30_000) == pytest.approx(24.9)
    assert timeline.lag_seconds(300, T0 + 30_000) == 0.0  # caught up
    # older than the table: 50 records before the first sample at 10 records a second
    assert timeline.lag_seconds(50, T0 + 30_000) == pytest.approx(35.0)


def test_lag_seconds_flat_runs_keep_their_last_sample():
    timeline = OffsetTimeline(60)
    for second, offset in [(0, 100), (10, 100), (20, 100), (30, 200)]:
        timeline.add(offset, T0 + second * 1000)
    assert timeline.offsets == [100, 100, 200]
    assert timeline.times == [T0, T0 + 20_000, T0 + 30_000]
    # nothing was produced between 0 s and 20 s: offset 150 was written at 25.1 s
    assert timeline.lag_seconds(150, T0 + 40_000) == pytest.approx(14.9)
    assert timeline.since == T0 + 30_000


def test_lag_seconds_table_is_bounded_and_resets_when_the_log_shrinks():
    timeline = OffsetTimeline(3)
    for index in range(10):
        timeline.add(index * 10, T0 + index * 1000)
    assert timeline.offsets == [70, 80, 90]
    timeline.add(5, T0 + 20_000)
    assert timeline.offsets == [5] and timeline.since is None
    assert timeline.lag_seconds(2, T0 + 30_000) is None  # only ever seen at 5: when 2 was written is unknown
    with pytest.raises(ValueError):
        OffsetTimeline(1)


def test_evaluation_reports_lag_seconds_only_with_lag():
    events = [broker_event(T0 + s * 1000, 1000 + 10 * s) for s in range(0, 100, 10)]
    events.append(commit_event(T0 + 50_000, 1200, 1, "g"))
    [evaluation] = replay_partition(events, [T0 // 1000 + 95], ReplaySettings())
    assert evaluation.current_lag == 1900 - 1200
    assert evaluation.lag_seconds == pytest.approx(95 - 20.1)  # the log end passed 1200 at 20.1 s
    events.append(commit_event(T0 + 96_000, 1900, 2, "g"))
    [caught_up] = replay_partition(events, [T0 // 1000 + 99], ReplaySettings())
    assert (caught_up.current_lag, caught_up.lag_seconds) == (0, 0.0)


def test_record_rows_give_the_exact_age_as_the_daemon_reads_it():
    """A history captured by the daemon holds the timestamps it read of the records groups sat at."""
    events = [broker_event(T0 + s * 1000, 1000 + 10 * s) for s in range(0, 100, 10)]
    events.append(commit_event(T0 + 50_000, 1200, 1, "g"))
    events.append(history_event("record", T0 + 12_345, 1200, None, None))  # the record's own time
    [evaluation] = replay_partition(events, [T0 // 1000 + 95], ReplaySettings())
    assert evaluation.lag_seconds == pytest.approx(95 - 12.345)
    rows = [("broker", "c", None, "t", 0, 1000 + 10 * s, T0 + s * 1000, None) for s in range(0, 100, 10)]
    rows += [("commit", "c", "g", "t", 0, 1200, T0 + 50_000, 1), ("record", "c", None, "t", 0, 1200, T0 + 12_345, None)]
    [through_history] = replay_history(rows, [T0 // 1000 + 95], ReplaySettings())
    assert through_history.evaluation.lag_seconds == pytest.approx(95 - 12.345)


# --- equal to the monitor's storage and evaluator on random histories -------------------------------
# Partition rows must match one to one; group status and totallag folded from them (as the Spark job
# folds them) must match evaluate_group's.


history_rows = st.lists(
    st.one_of(
        st.tuples(
            st.just("broker"),
            st.just("c"),
            st.none(),
            st.sampled_from(["t", "u"]),
            st.integers(0, 1),
            st.integers(0, 60),
            st.integers(0, 30).map(lambda s: T0 + s * 1000),
            st.none(),
        ),
        st.tuples(
            st.just("commit"),
            st.just("c"),
            st.sampled_from(["g1", "g2"]),
            st.sampled_from(["t", "u"]),
            st.integers(0, 1),
            st.integers(0, 60),
            st.integers(0, 30).map(lambda s: T0 + s * 1000),
            st.integers(0, 25),
        ),
    ),
    min_size=1,
    max_size=60,
)


@settings(deadline=None, max_examples=150)
@given(
    rows=history_rows,
    intervals=st.integers(1, 4),
    min_distance=st.sampled_from([0, 2]),
    allowed_lag=st.sampled_from([0, 5]),
    step=st.integers(1, 7),
)
def test_replay_equals_storage_state_and_evaluator(rows, intervals, min_distance, allowed_lag, step):
    rules = ReplaySettings(intervals=intervals, min_distance_s=min_distance, allowed_lag=allowed_lag)
    timestamps = [r[6] for r in rows]
    points = evaluation_points(min(timestamps), max(timestamps), step)
    replayed = {
        (h.cluster, h.group, h.topic, h.partition, h.evaluation.timestamp): (
            h.evaluation.status,
            h.evaluation.current_lag,
            h.evaluation.complete,
        )
        for h in replay_history(rows, points, rules)
    }
    partitions, groups = statuses_through_storage(rows, points, rules)
    assert replayed == partitions
    by_group = defaultdict(list)
    for (cluster, group, _, _, point), (status, current_lag, _) in replayed.items():
        by_group[(cluster, group, point)].append((status, current_lag))
    assert {
        key: (group_status(s for s, _ in parts), sum(lag for _, lag in parts))
        for key, parts in by_group.items()
    } == groups
