"""The columnar replay equals the event-by-event replay (the storage rings and the pure rules) on the
histories it covers, and declines the others."""

from __future__ import annotations

import math

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from burrowpy.pipeline.columnar import DISORDER_REACH, replay_columns
from burrowpy.pipeline.history import read_history
from burrowpy.pipeline.replay import ReplaySettings, evaluation_points, history_event, replay_partition
from burrowpy.pipeline.synthetic import SyntheticSpec, write_synthetic_history

T0 = 1_700_000_000_000


def partition_table(rows: list[tuple]) -> pa.Table:
    """(kind, group, offset, timestamp, order) rows of one partition as the Spark job hands them over."""
    kinds, groups, offsets, timestamps, orders = zip(*rows, strict=True) if rows else ((),) * 5
    return pa.table({
        "kind": pa.array(kinds, pa.string()),
        "timestamp": pa.array(timestamps, pa.int64()),
        "offset": pa.array(offsets, pa.int64()),
        "order": pa.array(orders, pa.int64()),
        "group": pa.array(groups, pa.string()),
    })


def by_events(rows: list[tuple], points: list[int], rules: ReplaySettings) -> list[tuple]:
    events = [history_event(kind, timestamp, offset, order, group) for kind, group, offset, timestamp, order in rows]
    return sorted(
        (e.group, e.timestamp, e.status.name, e.current_lag, e.complete, e.lag_seconds)
        for e in replay_partition(events, points, rules)
    )


def by_columns(rows: list[tuple], points: list[int], rules: ReplaySettings) -> list[tuple] | None:
    columns = replay_columns(partition_table(rows), points, rules)
    if columns is None:
        return None
    return sorted(
        (group, int(timestamp), status, int(lag), float(complete), None if math.isnan(seconds) else float(seconds))
        for group, timestamp, status, lag, complete, seconds in zip(
            *(columns[name] for name in ("group", "timestamp", "status", "current_lag", "complete", "lag_seconds")),
            strict=True,
        )
    )


@st.composite
def partition_histories(draw: st.DrawFn) -> list[tuple]:
    """Broker samples whose log end never goes back, and commits of two groups with distinct orders
    arriving in any order (some before the first sample, some at the same instant as one)."""
    samples = draw(st.integers(0, 25))
    times = sorted(draw(st.lists(st.integers(0, 40), min_size=samples, max_size=samples)))
    ends = sorted(draw(st.lists(st.integers(0, 80), min_size=samples, max_size=samples)))
    rows = [("broker", None, end, T0 + s * 1000, None) for s, end in zip(times, ends, strict=True)]
    for group in ("g1", "g2"):
        count = draw(st.integers(0, DISORDER_REACH))
        orders = draw(st.lists(st.integers(0, 200), min_size=count, max_size=count, unique=True))
        for order in orders:
            rows.append(("commit", group, draw(st.integers(0, 80)), T0 + draw(st.integers(0, 40)) * 1000, order))
    return draw(st.permutations(rows))


@settings(deadline=None, max_examples=200)
@given(
    rows=partition_histories(),
    intervals=st.integers(1, 6),
    allowed_lag=st.sampled_from([0, 5]),
    minimum_complete=st.sampled_from([0.0, 0.5]),
    lookup=st.integers(2, 6),
    step=st.integers(1, 7),
)
def test_columns_equal_events(rows, intervals, allowed_lag, minimum_complete, lookup, step):
    rules = ReplaySettings(intervals=intervals, allowed_lag=allowed_lag, minimum_complete=minimum_complete,
                           lag_lookup_size=lookup)
    timestamps = [r[3] for r in rows] or [T0]
    points = evaluation_points(min(timestamps), max(timestamps), step)
    # No group has more commits than the window's reach, so any disorder is covered (longer histories
    # with a little disorder: the synthetic test below).
    assert by_columns(rows, points, rules) == by_events(rows, points, rules)


def test_a_synthetic_history_takes_the_columnar_path_and_equals_the_events(tmp_path):
    spec = SyntheticSpec(groups=6, groups_per_topic=3, partitions=2, commits_per_partition=60, disorder=0.05)
    write_synthetic_history(tmp_path, spec)
    table = read_history(tmp_path)
    seen = set()
    for topic in set(table.column("topic").to_pylist()):
        for partition in range(spec.partitions):
            part = table.filter(pa.compute.and_(pa.compute.equal(table.column("topic"), topic),
                                                pa.compute.equal(table.column("partition"), partition)))
            rows = list(zip(*(part.column(n).to_pylist() for n in ("kind", "group", "offset", "timestamp", "order")),
                            strict=True))
            points = evaluation_points(min(r[3] for r in rows), max(r[3] for r in rows), 60)
            got = by_columns(rows, points, ReplaySettings())
            assert got is not None and got == by_events(rows, points, ReplaySettings())
            seen.update(status for _, _, status, *_ in got)
    assert seen == {"OK", "WARN", "STOP", "STALL", "REWIND"}


def test_histories_outside_the_columnar_path_are_declined():
    rows = [("broker", None, 10, T0, None), ("commit", "g", 5, T0 + 1000, 1)]
    points = [T0 // 1000 + 2]
    assert by_columns(rows, points, ReplaySettings()) is not None
    assert by_columns(rows, points, ReplaySettings(min_distance_s=1)) is None
    assert by_columns([*rows, ("record", None, 5, T0, None)], points, ReplaySettings()) is None
    assert by_columns([*rows, ("commit", "g", 6, T0 + 1500, 1)], points, ReplaySettings()) is None  # order twice
    assert by_columns([*rows, ("broker", None, 9, T0 + 500, None)], points, ReplaySettings()) is None  # log shrank
    # A commit 40 arrivals early by order: still in the ring, beyond the arrivals a window looks at.
    early = [("broker", None, 100, T0, None), ("commit", "g", 50, T0 + 500, 1000)]
    early += [("commit", "g", o, T0 + 1000 + o, o) for o in range(40)]
    assert by_columns(early, [T0 // 1000 + 6], ReplaySettings()) is None
    assert by_columns(early[:10], [T0 // 1000 + 6], ReplaySettings()) == by_events(early[:10], [T0 // 1000 + 6],
                                                                                  ReplaySettings())


def test_commits_of_a_group_at_one_instant_arrive_by_order_whatever_the_rows_order():
    """Two commits of a group in the same millisecond arrive by order (the replay order), so both are appended
    with their lag; handed over the other way round, the later one first, the result is the same. (In a
    window of lags 5 then 2 the lag went down: OK; had the first been taken as a back-fill without a lag, WARN.)"""
    rows = [("broker", None, 7, T0, None), ("broker", None, 10, T0 + 500, None),
            ("commit", "g", 8, T0 + 1000, 2), ("commit", "g", 5, T0 + 1000, 1)]
    points = [T0 // 1000 + 2]
    expected = by_events(rows, points, ReplaySettings())
    assert [status for _, _, status, *_ in expected] == ["OK"]
    assert by_columns(rows, points, ReplaySettings()) == expected
    assert by_columns(rows[::-1], points, ReplaySettings()) == expected
