"""A topic's partitions evaluated all at once (numpy) must agree with the partition-by-partition path."""

from __future__ import annotations

from array import array
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from burrowpy.evaluator import group
from burrowpy.evaluator.group import assess_group, evaluate_group
from burrowpy.protocol import (
    NO_LAG,
    CommitWindow,
    ConsumerPartition,
    SetBrokerOffset,
    SetConsumerOffset,
    SetConsumerOwner,
    SetRecordTimes,
    Status,
    TopicSnapshot,
)
from burrowpy.storage.state import StorageState
from tests.examples import examples
from tests.partition_histories import NOW, broker_history


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
    broker, times, current_lag = broker_history(draw, offset, samples)
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


@settings(deadline=None, max_examples=examples(300, 60))
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
    evaluated = group._columns_basis("t", [part] * 3, 0)
    assert evaluated is not None and evaluated.at(NOW, 0.0).codes == [Status.OK] * 3
    # A window that is not full goes partition by partition.
    short = ConsumerPartition(CommitWindow(window[:25], 10), [6000], 4100)
    assert group._columns_basis("t", [part, short], 0) is None
    assert group._columns_basis("t", [part, ConsumerPartition([], [6000], 0)], 0) is None


def test_each_status_from_the_columns():
    def window(offsets, lags, spacing_s=10, newest_s=NOW - 10):
        slots = array("q")
        for order, (offset, lag) in enumerate(zip(offsets, lags, strict=True)):
            at = (newest_s - (len(offsets) - 1 - order) * spacing_s) * 1000
            slots.extend((offset, at, at, lag, order))
        return CommitWindow(slots, len(offsets))

    def part(offsets, lags, broker, current_lag, **timing):
        return ConsumerPartition(window(offsets, lags, **timing), [broker], current_lag, broker_times=[NOW * 1000])

    parts = [
        part([10, 20, 30, 40, 50], [5, 4, 3, 2, 0], 50, 0),  # caught up: OK
        part([10, 20, 30, 40, 50], [5, 6, 7, 8, 9], 59, 9),  # lag growing: WARN
        part([10, 10, 10, 10, 10], [5, 6, 7, 8, 9], 19, 9),  # STALL
        part([10, 20, 30, 5, 6], [5, 6, 7, 8, 9], 15, 9),  # REWIND
        part([10, 20, 30, 40, 50], [5, 6, 7, 8, 9], 59, 9, newest_s=NOW - 500),  # STOP
        part([10, 20, 30, 40, 50], [9, 8, 7, 6, 5], 55, 5),  # lag falling: OK
        part([10, 20, 30, 5, 30], [5, 6, 7, 8, 9], 39, 9),  # rewound, back: WARN
    ]
    with columns_from(1):
        evaluated = assess_group("c", "g", {"t": parts}, NOW)
    assert evaluated.topics[0].make.__qualname__.startswith("_columns_basis")  # the arrays' path
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


# --- storage's own snapshots ---------------------------------------------------------------------------


def reference_partitions(state, cluster, group, topic):
    """What a fetch answered before snapshots: one ConsumerPartition per partition, made from the rings."""
    cluster_entry = state.clusters[cluster]
    rings = cluster_entry.brokers.get(topic) or []
    answer = []
    for partition_id, entry in enumerate(cluster_entry.groups[group].topics[topic]):
        offsets = entry.ring.window() if entry.ring is not None and len(entry.ring) else []
        broker = rings[partition_id] if partition_id < len(rings) else None
        history, times, since = (broker.values(), broker.times(), broker.since) if broker else ([], [], None)
        current_lag, record_time = 0, None
        if offsets and history:
            committed = entry.ring.newest_offset()
            current_lag = max(0, history[-1] - committed)
            record_time = cluster_entry.record_times.get((topic, partition_id), {}).get(committed)
        answer.append(ConsumerPartition(offsets, history, current_lag, entry.owner, entry.client_id, times, since,
                                        record_time))
    return answer


@st.composite
def storage_histories(draw):
    """A storage state fed broker samples, commits, owners and record times of one group on one topic."""
    partitions = draw(st.integers(1, 60))
    # Usually every partition has broker offsets; sometimes those beyond ``polled`` have none at all.
    polled = draw(st.one_of(st.just(partitions), st.integers(0, partitions)))
    intervals = draw(st.integers(1, 6))
    state = StorageState(["c"], intervals)
    base = (NOW - 1_000) * 1000
    for round_number in range(draw(st.integers(1, 3))):
        for partition in range(polled):
            state.add_broker_offset(SetBrokerOffset("c", "t", partition, polled, 1_000 + round_number * 50
                                                    + draw(st.integers(0, 40)), base + round_number * 30_000))
    # Rounds in which every partition commits (enough of them fill every window), then a few more commits.
    rounds = draw(st.integers(0, intervals + 1))
    committing = [partition for _ in range(rounds) for partition in range(partitions)]
    committing += draw(st.lists(st.integers(0, partitions - 1), max_size=2 * partitions))
    for order, partition in enumerate(committing, 1):
        state.add_consumer_offset(SetConsumerOffset("c", "g", "t", partition, draw(st.integers(900, 1_200)), order,
                                                    base + order * 1_000), NOW)
    for partition in draw(st.lists(st.integers(0, partitions - 1), max_size=3)):
        state.add_consumer_owner(SetConsumerOwner("c", "g", "t", partition, "host-1", "client-1"), NOW)
    state.set_record_times(SetRecordTimes("c", [("t", partition, offset, base) for partition, offset in
                                                draw(st.lists(st.tuples(st.integers(0, partitions - 1),
                                                                        st.integers(900, 1_200)), max_size=5))]))
    return state


@settings(deadline=None, max_examples=examples(150, 40))
@given(storage_histories(), st.integers(0, 3_000), st.sampled_from([0, 5]))
def test_a_fetch_snapshot_reads_as_the_partitions_it_packs(state, later, allowed):
    topics = state.consumer("c", "g", NOW)
    if topics is None or "t" not in topics:
        return  # nothing of the group's kept (commits for partitions the broker does not report are dropped)
    snapshot = topics["t"]
    assert isinstance(snapshot, TopicSnapshot)
    reference = reference_partitions(state, "c", "g", "t")
    assert list(snapshot) == reference and snapshot == reference
    now = NOW + later + 0.25
    with columns_from(1):
        packed = assess_group("c", "g", {"t": state.consumer("c", "g", NOW)["t"]}, now, allowed)
    with columns_from(10**9):
        one_by_one = assess_group("c", "g", {"t": reference}, now, allowed)
    for showall in (True, False):
        assert packed.result(showall) == one_by_one.result(showall)
