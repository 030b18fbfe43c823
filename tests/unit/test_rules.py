"""Burrow's evaluation rules: the upstream rule cases (spec 1.6) and partition/group evaluation."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from burrowpy.evaluator import rules
from burrowpy.evaluator.group import assess_group, evaluate_group
from burrowpy.evaluator.rules import evaluate_partition
from burrowpy.protocol import NO_LAG, CommitWindow, ConsumerOffset, ConsumerPartition, Status
from tests.examples import examples


def commits(*rows):
    """(offset, timestamp_ms, lag) rows -> ConsumerOffsets with increasing order."""
    return [ConsumerOffset(offset, ts, 0, lag, order) for order, (offset, ts, lag) in enumerate(rows, 1)]


def five(offsets, lags):
    return commits(
        *[(o, ts, lag) for o, ts, lag in zip(offsets, range(100000, 500001, 100000), lags, strict=True)]
    )


STEADY = [1000, 2000, 3000, 4000, 5000]
CONSTANT = [1000] * 5
REWOUND = [1000, 2000, 3000, 2000, 4000]
NOT_RECOVERED = [1000, 2000, 3000, 2000, 2500]
ZERO_LAG_15 = commits(
    *[
        (792748079 + i, ts, 0)
        for i, ts in enumerate(
            [
                1512224618356,
                1512224619362,
                1512224620366,
                1512224621367,
                1512224622370,
                1512224623373,
                1512224624378,
                1512224625379,
                1512224626383,
                1512224627383,
                1512224628383,
                1512224629388,
                1512224630391,
                1512224631394,
                1512224632397,
            ]
        )
    ]
)
NULL_LAGS = [
    ConsumerOffset(offset, ts, 0, lag, order)
    for offset, ts, lag, order in [
        (1000, 100000, 0, 10),
        (1500, 150000, None, 15),
        (2000, 200000, 50, 20),
        (2500, 250000, None, 25),
        (3000, 300000, 100, 30),
        (3500, 350000, None, 35),
        (4000, 400000, 150, 40),
        (4500, 450000, None, 45),
        (5000, 500000, 200, 50),
        (5500, 550000, None, 55),
    ]
]
ALLOWED = [
    ConsumerOffset(1000, 100000, 0, 2, 1),
    ConsumerOffset(2000, 200000, 0, 1, 2),
    ConsumerOffset(2000, 300000, 0, 1, 2),
]

# (offsets, broker offsets, current lag, now s, allowed lag,
#  lag always nonzero, rewind index, stopped, stalled, lag not decreasing, recent lag zero, status)
RULE_CASES = [
    (five(STEADY, [0, 50, 100, 150, 200]), [5200], 200, 600, 0, False, -1, False, False, True, False, "OK"),
    (five(STEADY, [0, 50, 100, 150, 200]), [5200], 200, 900, 0, False, -1, False, False, True, False, "OK"),
    (five(STEADY, [0, 50, 100, 150, 200]), [5200], 200, 1000, 0, False, -1, True, False, True, False, "STOP"),
    (
        five(STEADY, [50, 100, 150, 200, 250]),
        [5250],
        250,
        1000,
        0,
        True,
        -1,
        True,
        False,
        True,
        False,
        "STOP",
    ),
    (five(CONSTANT, [0, 50, 100, 150, 200]), [1200], 200, 600, 0, False, -1, False, True, True, False, "OK"),
    (
        five(CONSTANT, [100, 150, 200, 250, 300]),
        [1300],
        300,
        600,
        0,
        True,
        -1,
        False,
        True,
        True,
        False,
        "STALL",
    ),
    (five(CONSTANT, [100] * 5), [1100], 100, 600, 0, True, -1, False, True, True, False, "STALL"),
    (
        five(REWOUND, [100, 150, 200, 1250, 300]),
        [4300],
        300,
        600,
        0,
        True,
        3,
        False,
        False,
        False,
        False,
        "OK",
    ),
    (five(STEADY, [50, 100, 150, 200, 250]), [5250], 0, 1000, 0, True, -1, True, False, True, False, "OK"),
    (
        ZERO_LAG_15,
        [792749024, 792749000, 792748800, 792748600, 792748500],
        931,
        1512224650,
        0,
        False,
        -1,
        True,
        False,
        True,
        False,
        "STOP",
    ),
    (
        ZERO_LAG_15,
        [792748094, 792748093, 792748093, 792748093],
        1,
        1512224650,
        0,
        False,
        -1,
        True,
        False,
        True,
        True,
        "OK",
    ),
    (NULL_LAGS, [5700], 200, 600, 0, False, -1, False, False, True, False, "OK"),
    (ALLOWED, [2001], 1, 550, 1, False, -1, True, False, False, False, "OK"),
    (
        five(CONSTANT, [100, 150, 200, 250, 300]),
        [1300],
        300,
        600,
        99,
        True,
        -1,
        False,
        True,
        True,
        False,
        "STALL",
    ),
    (
        five(REWOUND, [100, 150, 200, 1250, 300]),
        [4300],
        300,
        600,
        99,
        True,
        3,
        False,
        False,
        False,
        False,
        "OK",
    ),
    (
        five(NOT_RECOVERED, [100, 150, 200, 1250, 300]),
        [4300],
        300,
        600,
        0,
        True,
        3,
        False,
        False,
        False,
        False,
        "REWIND",
    ),
]


@pytest.mark.parametrize("case", RULE_CASES, ids=[f"upstream-{i}" for i in range(len(RULE_CASES))])
def test_upstream_rule_case(case):
    (
        offsets,
        brokers,
        current_lag,
        now,
        allowed,
        always_nonzero,
        rewind,
        stopped,
        stalled,
        not_decreasing,
        recent_zero,
        status,
    ) = case
    columns = rules.columns_of(offsets)
    assert rules.is_lag_always_nonzero(columns, allowed) is always_nonzero
    assert rules.rewind_index(columns) == rewind
    assert (now * 1000 > rules.stop_time(columns)) is stopped
    assert rules.is_stalled(columns) is stalled
    assert rules.is_lag_not_decreasing(columns) is not_decreasing
    assert rules.is_recent_lag_zero(columns, brokers) is recent_zero
    assert rules.partition_status(columns, brokers, current_lag, now, allowed).name == status
    # The public entry point gives the same answer on a full window.
    result = evaluate_partition(offsets, brokers, current_lag, now, allowed)
    assert result.status.name == status
    assert result.complete == 1.0
    assert result.start is offsets[0] and result.end is offsets[-1]


@pytest.mark.parametrize("case", RULE_CASES, ids=[f"upstream-dicts-{i}" for i in range(len(RULE_CASES))])
def test_upstream_rule_case_with_mappings(case):
    offsets, brokers, current_lag, now, allowed = case[:5]
    as_dicts = [{"offset": o.offset, "timestamp": o.timestamp, "lag": o.lag} for o in offsets]
    result = evaluate_partition(as_dicts, brokers, current_lag, now, allowed_lag=allowed)
    assert result.status.name == case[-1]
    assert result.start.offset == offsets[0].offset and result.start["offset"] == offsets[0].offset
    assert result.end["timestamp"] == offsets[-1].timestamp and result.end.lag == offsets[-1].lag


def test_never_committed_partition_is_ok_and_not_complete():
    result = evaluate_partition([], [100], 50, 1000)
    assert (result.status, result.complete, result.start, result.end) == (Status.OK, 0.0, None, None)


def test_leading_empty_slots_lower_completeness():
    window = [None] * 5 + five(STEADY, [50, 100, 150, 200, 250])
    result = evaluate_partition(window, [5250], 250, 1000)
    assert result.complete == 0.5
    assert result.status is Status.STOP
    assert result.start.offset == 1000 and result.end.offset == 5000


def test_minimum_complete_skips_the_rules_for_incomplete_windows():
    window = [None] * 5 + five(STEADY, [50, 100, 150, 200, 250])
    assert evaluate_partition(window, [5250], 250, 1000, minimum_complete=0.6).status is Status.OK
    assert evaluate_partition(window, [5250], 250, 1000, minimum_complete=0.5).status is Status.STOP


@pytest.mark.parametrize("current_lag", [0, 1, 500])
def test_all_empty_slots_quirk_does_not_crash(current_lag):
    result = evaluate_partition([None] * 10, [100], current_lag, 1000)
    assert result.status is Status.OK
    assert result.complete == pytest.approx(0.1)
    assert result.start is None and result.end is None


def test_empty_slots_after_the_first_commit_are_skipped():
    window = five(STEADY, [50, 100, 150, 200, 250])
    window.insert(2, None)
    result = evaluate_partition(window, [5250], 250, 1000)
    assert result.complete == 1.0
    assert result.status is Status.STOP


def test_now_is_truncated_to_whole_seconds():
    window = five(STEADY, [0, 50, 100, 150, 200])
    # 900.9 s is 900 s for Burrow: 400 s since the last commit is not more than the 400 s window.
    assert evaluate_partition(window, [5200], 200, 900.9).status is Status.OK
    assert evaluate_partition(window, [5200], 200, 901).status is Status.STOP


def test_a_commit_without_timestamp_is_a_clear_error():
    with pytest.raises(ValueError, match="timestamp"):
        evaluate_partition([{"offset": 1}], [2], 1, 10)


# --- groups -------------------------------------------------------------------------------------------

NOW = 1_700_000_000


def ring_partition(count, intervals=10, broker=4321):
    """Storage's view of a ring with ``count`` commits (offsets 1000.., 10 s apart, the last 10 s ago)."""
    start = NOW * 1000 - 100000
    entries = [
        ConsumerOffset(1000 + i * 100, start + i * 10000, NOW * 1000, broker - 1000 - i * 100, 10 + i)
        for i in range(count)
    ]
    newest = entries[-1].offset
    return ConsumerPartition([None] * (intervals - count) + entries, [broker], max(0, broker - newest))


def test_group_with_a_full_ring_is_ok():
    status = evaluate_group("c", "g", {"t": [ring_partition(10)]}, NOW, showall=True)
    assert (status.status, status.complete, status.partition_count, status.totallag) == (
        Status.OK,
        1.0,
        1,
        2421,
    )
    assert len(status.partitions) == 1
    assert len(evaluate_group("c", "g", {"t": [ring_partition(10)]}, NOW, showall=False).partitions) == 0


def test_group_with_a_half_ring_is_err():
    status = evaluate_group("c", "g", {"t": [ring_partition(5)]}, NOW, showall=False)
    assert (status.status, status.complete, status.partition_count, status.totallag) == (
        Status.ERR,
        0.0,
        1,
        2921,
    )
    [partition] = status.partitions
    assert (partition.status, partition.complete) == (Status.STOP, 0.5)
    assert status.maxlag.start.offset == 1000 and status.maxlag.end.offset == 1400


def test_group_without_topics_is_ok_with_nothing_complete():
    status = evaluate_group("c", "g", {}, NOW)
    assert (
        status.status,
        status.complete,
        status.partitions,
        status.partition_count,
        status.maxlag,
        status.totallag,
    ) == (Status.OK, 0.0, [], 0, None, 0)


def test_group_lists_partitions_in_order_and_attaches_identity():
    lagging = ring_partition(10, broker=9000)
    topics = {"b": [ConsumerPartition([], [], 0, "host-1", "client-1"), lagging], "a": [ring_partition(10)]}
    status = evaluate_group("c", "g", topics, NOW)
    assert [(p.topic, p.partition) for p in status.partitions] == [("a", 0), ("b", 0), ("b", 1)]
    assert (status.partitions[1].owner, status.partitions[1].client_id) == ("host-1", "client-1")
    assert status.partition_count == 3
    assert status.complete == pytest.approx(2 / 3)
    assert status.totallag == 2421 + 0 + 7100
    assert (status.maxlag.topic, status.maxlag.partition) == ("b", 1)


def test_group_warn_stays_warn_and_worse_partitions_make_it_err():
    warn = ConsumerPartition(five(STEADY, [50, 100, 150, 200, 250]), [5300], 300)
    stall = ConsumerPartition(five(CONSTANT, [100, 150, 200, 250, 300]), [1300], 300)
    assert evaluate_group("c", "g", {"t": [warn]}, 600).status is Status.WARN
    status = evaluate_group("c", "g", {"t": [warn, stall]}, 600, showall=False)
    assert status.status is Status.ERR
    assert [p.status for p in status.partitions] == [Status.WARN, Status.STALL]


def test_group_passes_allowed_lag_and_minimum_complete_through():
    stall = ConsumerPartition(five(CONSTANT, [100, 150, 200, 250, 300]), [1300], 300)
    assert evaluate_group("c", "g", {"t": [stall]}, 600, allowed_lag=300).status is Status.OK
    half = ConsumerPartition([None] * 5 + five(CONSTANT, [100, 150, 200, 250, 300]), [1300], 300)
    assert evaluate_group("c", "g", {"t": [half]}, 600, minimum_complete=0.6).status is Status.OK
    assert evaluate_group("c", "g", {"t": [half]}, 600, minimum_complete=0.5).status is Status.ERR


@settings(deadline=None, max_examples=examples(60, 20))
@given(st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=12))
def test_maxlag_is_the_first_partition_with_the_largest_lag(lags):
    topics = {"t": [ConsumerPartition([], [], lag) for lag in lags]}
    status = evaluate_group("c", "g", topics, NOW)
    assert status.maxlag.partition == lags.index(max(lags))
    assert status.totallag == sum(lags)


def test_the_problems_answer_keeps_every_group_figure():
    warn = ConsumerPartition(five(STEADY, [50, 100, 150, 200, 250]), [5300], 300)
    evaluation = assess_group("c", "g", {"t": [ring_partition(10), warn]}, 600)
    full, filtered = evaluation.result(showall=True), evaluation.result(showall=False)
    assert [p.partition for p in filtered.partitions] == [1]
    assert len(full.partitions) == 2
    assert (
        filtered.status,
        filtered.complete,
        filtered.partition_count,
        filtered.maxlag,
        filtered.totallag,
    ) == (full.status, full.complete, full.partition_count, full.maxlag, full.totallag)


def test_group_status_json_shape():
    status = evaluate_group("c", "g", {"t": [ring_partition(5)]}, NOW)
    document = status.to_json()
    assert list(document) == [
        "cluster",
        "group",
        "status",
        "complete",
        "partitions",
        "partition_count",
        "maxlag",
        "totallag",
        "max_lag_seconds",  # burrowpy's additions: Burrow's fields first, unchanged
        "catch_up_forecast",
        "catch_up_seconds",
        "falling_behind_per_second",
    ]
    assert document["status"] == "ERR" and document["complete"] == 0.0
    partition = document["partitions"][0]
    assert list(partition) == [
        "topic",
        "partition",
        "owner",
        "client_id",
        "status",
        "start",
        "end",
        "current_lag",
        "complete",
        "lag_seconds",
        "lag_seconds_method",
        "catch_up_forecast",
        "catch_up_seconds",
        "falling_behind_per_second",
    ]
    assert partition["status"] == "STOP" and partition["owner"] == "" and partition["current_lag"] == 2921
    assert partition["start"] == {
        "offset": 1000,
        "timestamp": NOW * 1000 - 100000,
        "observedAt": NOW * 1000,
        "lag": 3321,
    }
    assert document["maxlag"] == partition


def test_a_commit_given_as_a_mapping_is_still_a_consumer_offset_by_position():
    """Mappings become OffsetViews, read by key like the mapping and by position like any ConsumerOffset."""
    view = rules.OffsetView.from_mapping({"offset": 40, "timestamp": 1000, "observedAt": 2000, "lag": 3, "order": 7})
    assert view["offset"] == 40 and view["observedAt"] == 2000
    assert (view[0], view[3], view[-1]) == (40, 3, 7)
    assert view[:2] == (40, 1000)


@st.composite
def packed_windows(draw):
    """A window as storage packs it (CommitWindow) and the same commits as a list with leading Nones."""
    intervals = draw(st.integers(1, 12))
    stored = draw(st.integers(0, intervals))
    offset = draw(st.integers(0, 10_000))
    timestamp = draw(st.integers(1_000_000, 2_000_000))
    items = []
    for order in range(stored):
        offset = max(0, offset + draw(st.integers(-300, 600)))  # rewinds and stalls too
        timestamp += draw(st.integers(0, 60_000))
        lag = draw(st.one_of(st.none(), st.integers(0, 5), st.integers(0, 10_000)))
        items.append(ConsumerOffset(offset, timestamp, timestamp + 7, lag, order))
    slots = array("q")
    for item in items:
        slots.extend((item.offset, item.timestamp, item.observed_at, NO_LAG if item.lag is None else item.lag,
                      item.order))
    listed = [None] * (intervals - stored) + items if items else []
    return CommitWindow(slots, intervals), listed


@settings(deadline=None, max_examples=examples(400, 100))
@given(packed_windows(), st.lists(st.integers(0, 20_000), max_size=4), st.integers(0, 3_000),
       st.integers(1_000, 3_000), st.sampled_from([0, 1, 5]), st.sampled_from([0.0, 0.5, 1.0]))
def test_a_packed_window_evaluates_as_its_commits_do(windows, brokers, current_lag, now, allowed, minimum):
    """Storage's packed windows take their own path through the rules; it must agree with the commits'."""
    window, listed = windows
    packed = evaluate_partition(window, brokers, current_lag, now + 0.75, allowed, minimum, topic="t",
                                partition=3, owner="o", client_id="c")
    plain = evaluate_partition(listed, brokers, current_lag, now + 0.75, allowed, minimum, topic="t",
                               partition=3, owner="o", client_id="c")
    assert packed == plain
    # and the group evaluation, which calls the packed path itself, lists the same partition
    group = evaluate_group("c", "g", {"t": [ConsumerPartition(window, brokers, current_lag, "o", "c")]},
                           now + 0.75, allowed, minimum)
    partition = group.partitions[0]
    assert (partition.status, partition.start, partition.end, partition.complete) == (
        plain.status, plain.start, plain.end, plain.complete)
