"""A topic's partitions evaluated all at once (numpy) must agree with the partition-by-partition path."""

from __future__ import annotations

from array import array
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from burrowpy.evaluator import group
from burrowpy.evaluator.group import assess_group, evaluate_group
from burrowpy.protocol import NO_LAG, CommitWindow, ConsumerPartition, Status

NOW = 1_700_000_000


@contextmanager
def columns_from(partitions):
    saved = group.COLUMNS_FROM
    group.COLUMNS_FROM = partitions
    try:
        yield
    finally:
        group.COLUMNS_FROM = saved


def both_ways(topics, now, allowed=0, minimum=0.0, max_lag_seconds=0.0):
    with columns_from(1):
        columns = assess_group("c", "g", topics, now, allowed, minimum, max_lag_seconds)
    with columns_from(10**9):
        each = assess_group("c", "g", topics, now, allowed, minimum, max_lag_seconds)
    return columns, each


@st.composite
def partitions(draw, intervals, broker_samples):
    """One partition with a full packed window of ``intervals`` commits and its broker history."""
    offset = draw(st.integers(0, 10_000))
    timestamp = (NOW - 3_000) * 1000 + draw(st.integers(0, 600_000))
    slots = array("q")
    for order in range(intervals):
        offset = max(0, offset + draw(st.integers(-300, 600)))  # rewinds and stalls too
        timestamp += draw(st.integers(0, 120_000))
        lag = draw(st.one_of(st.just(NO_LAG), st.integers(0, 5), st.integers(0, 10_000)))
        slots.extend((offset, timestamp, timestamp + 7, lag, order))
    samples = broker_samples if broker_samples is not None else draw(st.integers(0, 4))
    # Broker offsets around the newest commit (so every way to a lag in seconds is taken), never falling.
    broker = sorted(max(0, offset + draw(st.integers(-400, 800))) for _ in range(samples))
    read_at = (NOW - 200) * 1000
    times = []
    for _ in broker:
        read_at += draw(st.integers(0, 40_000))
        times.append(read_at)
    current_lag = max(0, broker[-1] - offset) if broker else draw(st.integers(0, 50))
    record_time = draw(st.one_of(st.none(), st.integers((NOW - 900) * 1000, (NOW + 5) * 1000)))
    since = draw(st.one_of(st.none(), st.integers((NOW - 900) * 1000, NOW * 1000)))
    return ConsumerPartition(CommitWindow(slots, intervals), broker, current_lag,
                             draw(st.sampled_from(["", "host-1"])), "client", times, since, record_time)


@st.composite
def topics(draw):
    intervals = draw(st.integers(1, 12))
    # Usually every partition has as many broker samples (storage polls a topic at once); sometimes not.
    samples = draw(st.one_of(st.integers(0, 6), st.none()))
    count = draw(st.integers(1, 24))
    return {name: draw(st.lists(partitions(intervals, samples), min_size=count, max_size=count))
            for name in draw(st.lists(st.sampled_from(["a", "b", "orders"]), min_size=1, max_size=2, unique=True))}


@settings(deadline=None, max_examples=300)
@given(topics(), st.integers(0, 4_000), st.sampled_from([0, 1, 5, 300]), st.sampled_from([0.0, 30.0, 600.0]))
def test_all_partitions_at_once_agree_with_one_at_a_time(topics, later, allowed, max_lag_seconds):
    now = NOW + later + 0.625
    columns, each = both_ways(topics, now, allowed, 0.0, max_lag_seconds)
    for showall in (True, False):
        assert columns.result(showall) == each.result(showall)


def test_the_columns_are_taken_for_a_topic_of_full_windows():
    """The comparison above is only worth something if the array path really runs."""
    window = array("q")
    for order in range(10):
        window.extend((1000 + order * 100, (NOW - 100 + order * 10) * 1000, NOW * 1000, 5000 - order * 100, order))
    part = ConsumerPartition(CommitWindow(window, 10), [6000], 4100, broker_times=[NOW * 1000])
    evaluated = group._assess_columns("t", [part] * 3, NOW, 0, 0.0)
    assert evaluated is not None and evaluated.codes == [Status.OK] * 3
    # A window that is not full goes partition by partition.
    short = ConsumerPartition(CommitWindow(window[:25], 10), [6000], 4100)
    assert group._assess_columns("t", [part, short], NOW, 0, 0.0) is None
    assert group._assess_columns("t", [part, ConsumerPartition([], [6000], 0)], NOW, 0, 0.0) is None


def test_each_status_from_the_columns():
    def window(offsets, lags, spacing_s=10, newest_s=NOW - 10):
        slots = array("q")
        for order, (offset, lag) in enumerate(zip(offsets, lags, strict=True)):
            at = (newest_s - (len(offsets) - 1 - order) * spacing_s) * 1000
            slots.extend((offset, at, at, lag, order))
        return CommitWindow(slots, len(offsets))

    parts = [
        ConsumerPartition(window([10, 20, 30, 40, 50], [5, 4, 3, 2, 0]), [50], 0),  # caught up: OK
        ConsumerPartition(window([10, 20, 30, 40, 50], [5, 6, 7, 8, 9]), [59], 9),  # lag growing: WARN
        ConsumerPartition(window([10, 10, 10, 10, 10], [5, 6, 7, 8, 9]), [19], 9),  # STALL
        ConsumerPartition(window([10, 20, 30, 5, 6], [5, 6, 7, 8, 9]), [15], 9),  # REWIND
        ConsumerPartition(window([10, 20, 30, 40, 50], [5, 6, 7, 8, 9], newest_s=NOW - 500), [59], 9),  # STOP
        ConsumerPartition(window([10, 20, 30, 40, 50], [9, 8, 7, 6, 5]), [55], 5),  # lag falling: OK
        ConsumerPartition(window([10, 20, 30, 5, 30], [5, 6, 7, 8, 9]), [39], 9),  # rewound, back: WARN
    ]
    with columns_from(1):
        evaluated = assess_group("c", "g", {"t": parts}, NOW)
    assert evaluated.topics[0]._make is not None  # the arrays' path
    assert [p.status for p in evaluated.result().partitions] == [
        Status.OK, Status.WARN, Status.STALL, Status.REWIND, Status.STOP, Status.OK, Status.WARN]
    assert evaluated.status is Status.ERR


def test_the_problem_answer_builds_only_the_partitions_it_lists():
    slots = array("q")
    for order in range(10):
        slots.extend((1000 + order * 100, (NOW - 100 + order * 10) * 1000, NOW * 1000, 5000 - order * 100, order))
    healthy = ConsumerPartition(CommitWindow(slots, 10), [6000], 4100, broker_times=[NOW * 1000])
    stalled_slots = array("q")
    for order in range(10):
        stalled_slots.extend((1000, (NOW - 100 + order * 10) * 1000, NOW * 1000, 5000 + order, order))
    stalled = ConsumerPartition(CommitWindow(stalled_slots, 10), [6009], 5009, broker_times=[NOW * 1000])
    parts = [healthy] * 99 + [stalled]
    evaluated = assess_group("c", "g", {"t": parts}, NOW)
    assert len(parts) >= group.COLUMNS_FROM
    problems = evaluated.result(showall=False)
    assert [(p.partition, p.status) for p in problems.partitions] == [(99, Status.STALL)]
    assert problems.maxlag is problems.partitions[0]  # the largest lag, and the same object
    assert sum(built is not None for built in evaluated.topics[0]._built) == 1
    everything = evaluated.result(showall=True)
    assert len(everything.partitions) == 100 and everything.partitions[99] is problems.partitions[0]
    assert evaluated.result(showall=False) is problems  # built once
    assert (problems.status, problems.partition_count, problems.totallag, problems.complete) == (
        Status.ERR, 100, 99 * 4100 + 5009, 1.0)


@pytest.mark.parametrize("max_lag_seconds", [0.0, 50.0])
def test_the_time_threshold_from_the_columns(max_lag_seconds):
    slots = array("q")
    for order in range(10):
        slots.extend((1000 + order * 100, (NOW - 100 + order * 10) * 1000, NOW * 1000, 5000 - order * 100, order))
    # The record at the commit was written 120 s ago: OK by Burrow's rules, too old for a 50 s threshold.
    part = ConsumerPartition(CommitWindow(slots, 10), [6000], 4100, broker_times=[NOW * 1000],
                             record_time=(NOW - 120) * 1000)
    with columns_from(1):
        status = evaluate_group("c", "g", {"t": [part]}, NOW + 0.5, max_lag_seconds=max_lag_seconds)
    assert status.partitions[0].lag_seconds == 120.5
    assert status.partitions[0].lag_seconds_method == "fetch"
    assert status.status is (Status.WARN if max_lag_seconds else Status.OK)
