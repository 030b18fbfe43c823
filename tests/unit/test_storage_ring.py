"""The commit and broker rings: Burrow's storage cases (spec 3.4) and property tests against models."""

from __future__ import annotations

import sys
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from burrowpy.storage.ring import COMMIT_STRIDE, BrokerRing, CommitOutcome, CommitRing
from tests.examples import examples

NOW_MS = 1_700_000_000_000


def replay(intervals, broker, inputs, min_distance_ms=0):
    ring = CommitRing(intervals)
    for offset, order, timestamp in inputs:
        ring.add(offset, order, timestamp, NOW_MS, broker, min_distance_ms)
    return ring


def stored(ring):
    return [(e.offset, e.order, e.timestamp, e.lag) for e in ring.entries() if e is not None]


TEN = [(1000 * i, 10 * i, 100000 * i) for i in range(1, 11)]
TEN_LAGS = [(1000 * i, 10 * i, 100000 * i, 10000 - 1000 * i) for i in range(1, 11)]

# Burrow's storage table (inmemory_test.go), all with a 10-slot ring and min-distance 1 s:
# (broker offset, inputs (offset, order, timestamp), stored entries (offset, order, timestamp, lag))
STORAGE_CASES = {
    "appends": (
        5000,
        [(1000 * i, i, 100000 * i) for i in range(1, 6)],
        [(1000 * i, i, 100000 * i, 5000 - 1000 * i) for i in range(1, 6)],
    ),
    "prepends-until-full": (
        5000,
        [(1000, 20, 100000), (2000, 30, 200000), (3000, 15, 300000)]
        + [(900 - 100 * k, 14 - k, 300000) for k in range(9)],
        [(300 + 100 * k, 8 + k, 300000, None) for k in range(7)]
        + [(3000, 15, 300000, None), (1000, 20, 100000, 4000), (2000, 30, 200000, 3000)],
    ),
    "insert-between": (
        5000,
        [(1000, 20, 100000), (2000, 30, 300000), (3000, 40, 400000), (1500, 25, 200000)],
        [
            (1000, 20, 100000, 4000),
            (1500, 25, 200000, None),
            (2000, 30, 300000, 3000),
            (3000, 40, 400000, 2000),
        ],
    ),
    "insert-into-full-ring": (
        10000,
        TEN + [(5500, 55, 550000)],
        TEN_LAGS[1:5] + [(5500, 55, 550000, None)] + TEN_LAGS[5:],
    ),
    "replace-oldest-of-full-ring": (
        10000,
        TEN + [(1500, 15, 150000)],
        [(1500, 15, 150000, None)] + TEN_LAGS[1:],
    ),
    "merge-into-newest": (
        10000,
        TEN[:5] + [(6000, 60, 500001)],
        [(1000 * i, 10 * i, 100000 * i, 10000 - 1000 * i) for i in range(1, 5)] + [(6000, 60, 500000, 4000)],
    ),
    "merge-into-previous": (
        10000,
        TEN[:5] + [(4500, 45, 400001)],
        [(1000 * i, 10 * i, 100000 * i, 10000 - 1000 * i) for i in range(1, 4)]
        + [(4500, 45, 400000, None), (5000, 50, 500000, 5000)],
    ),
}


@pytest.mark.parametrize("name", list(STORAGE_CASES))
def test_upstream_storage_case(name):
    broker, inputs, expected = STORAGE_CASES[name]
    ring = replay(10, broker, inputs, min_distance_ms=1000)
    assert stored(ring) == expected
    assert all(e.observed_at == NOW_MS for e in ring.entries() if e is not None)


def test_full_ring_keeps_the_last_ten_appends_with_their_lag():
    # Burrow's addConsumerOffset case: ten commits 10 s apart, then an eleventh pushes the oldest out.
    base = NOW_MS - 100000
    inputs = [(1000 + i * 100, 500 + i, base + i * 10000) for i in range(10)] + [(2000, 1000, base + 100000)]
    ring = replay(10, 4321, inputs, min_distance_ms=1000)
    entries = ring.entries()
    assert len(entries) == 10
    assert [(e.offset, e.timestamp, e.lag) for e in entries] == [
        (1100 + i * 100, base + 10000 + i * 10000, 4321 - 1100 - i * 100) for i in range(9)
    ] + [(2000, base + 100000, 2321)]


def test_a_full_ring_holds_no_spare_room():
    """Appends grow the ring's array with room to spare (54 values for 50 at 10 slots): once full, and after,
    it is the 50 values' size (at fleet scale 60,000 rings, 1.8 MiB)."""
    exact = sys.getsizeof(array("q", [0] * 10 * COMMIT_STRIDE))
    ring = CommitRing(10)
    for offset, order, timestamp in TEN:
        ring.add(offset, order, timestamp, NOW_MS, 10000)
    assert sys.getsizeof(ring.packed) == exact
    for offset, order, timestamp in TEN:  # an oldest commit's place taken, ten times over
        ring.add(offset + 20000, order + 200, timestamp + 2000000, NOW_MS, 40000)
        assert sys.getsizeof(ring.packed) == exact
    assert [e[0] for e in stored(ring)] == [offset + 20000 for offset, _, _ in TEN]


def test_a_full_broker_ring_holds_no_spare_room():
    """As a commit ring's: 25 values for 20 at ten slots while appending, then the 20 values' size."""
    exact = sys.getsizeof(array("q", [0] * 20))
    ring = BrokerRing(10)
    for offset in range(10):
        ring.add(offset, 1000 * offset)
    assert sys.getsizeof(ring.packed) == exact
    for offset in range(10, 30):
        ring.add(offset, 1000 * offset)
        assert sys.getsizeof(ring.packed) == exact
    assert ring.values() == list(range(20, 30)) and ring.times() == [1000 * offset for offset in range(20, 30)]


def test_commit_closer_than_min_distance_replaces_the_newest():
    # Burrow's MinDistance case: the eleventh commit comes 90.001 s after the first, 1 ms after the tenth.
    base = NOW_MS - 100000
    ring = replay(10, 4321, [(1000 + i * 100, 500 + i, base + i * 10000) for i in range(10)], 1000)
    assert ring.add(2000, 1000, base + 90001, NOW_MS, 4321, 1000) is CommitOutcome.APPENDED
    assert [(e.offset, e.timestamp, e.lag) for e in ring.entries()] == [
        (1000 + i * 100, base + i * 10000, 4321 - 1000 - i * 100) for i in range(9)
    ] + [(2000, base + 90000, 2321)]


def test_entries_pad_empty_slots_and_never_written_is_empty():
    ring = CommitRing(4)
    assert ring.entries() == [] and ring.newest() is None and len(ring) == 0
    assert ring.add(10, 1, 1000, NOW_MS, 15) is CommitOutcome.APPENDED
    entries = ring.entries()
    assert entries[:3] == [None, None, None] and entries[3].offset == 10 and entries[3].lag == 5
    assert ring.newest() == entries[3] and ring.newest_offset() == 10


def test_duplicates_and_backfill_into_full_ring_are_dropped():
    ring = replay(3, 100, [(10, 1, 1000), (20, 2, 2000), (30, 3, 3000)])
    assert ring.add(20, 2, 2000, NOW_MS, 100) is CommitOutcome.DROPPED
    assert ring.add(5, 1, 500, NOW_MS, 100) is CommitOutcome.DROPPED
    assert ring.add(30, 3, 3000, NOW_MS, 100) is CommitOutcome.DROPPED
    assert not CommitOutcome.DROPPED
    assert stored(ring) == [(10, 1, 1000, 90), (20, 2, 2000, 80), (30, 3, 3000, 70)]


def test_same_offset_with_a_new_order_is_stored_and_lag_never_negative():
    ring = replay(5, 100, [(150, 1, 1000), (150, 2, 2000)])
    assert stored(ring) == [(150, 1, 1000, 0), (150, 2, 2000, 0)]


def test_rings_need_a_slot():
    with pytest.raises(ValueError):
        CommitRing(0)
    with pytest.raises(ValueError):
        BrokerRing(0)


# --- property tests ------------------------------------------------------------------------------------


class GoRingModel:
    """Burrow's algorithm written the way Burrow's code works: slots in a circle and a pointer to the oldest.

    Independent of CommitRing's list representation, so the property test compares two constructions.
    """

    def __init__(self, intervals):
        self.slots = [None] * intervals
        self.pointer = 0
        self.n = intervals

    def prev(self, i):
        return (i - 1) % self.n

    def add(self, offset, order, timestamp, now_ms, broker, min_distance_ms):
        slots, oldest = self.slots, self.pointer
        newest = self.prev(oldest)
        insert_at, extend_at = None, oldest  # append unless decided otherwise
        if slots[newest] is not None:
            if slots[oldest] is not None and slots[oldest]["order"] >= order:
                return False
            if slots[newest]["order"] >= order:
                dest = oldest
                while True:
                    before = self.prev(dest)
                    if slots[before] is None or before == oldest:
                        insert_at, extend_at = before, None
                        break
                    if slots[before]["order"] < order:
                        insert_at, extend_at = dest, oldest
                        break
                    if slots[before]["order"] == order:
                        return False
                    dest = before
        appended = insert_at is None
        lag = max(0, broker - offset) if appended else None
        target = insert_at if insert_at is not None else extend_at
        before = slots[self.prev(target)]
        if (
            before is not None
            and before["order"] < order
            and timestamp - before["timestamp"] < min_distance_ms
        ):
            timestamp = before["timestamp"]
            insert_at, extend_at = self.prev(target), None
        if insert_at is not None and extend_at is not None:
            to = extend_at
            while to != insert_at:
                slots[to] = slots[self.prev(to)]
                slots[self.prev(to)] = None
                to = self.prev(to)
        slots[insert_at if insert_at is not None else extend_at] = {
            "offset": offset,
            "order": order,
            "timestamp": timestamp,
            "lag": lag,
        }
        if extend_at is not None:
            self.pointer = (extend_at + 1) % self.n
        return True

    def entries(self):
        ordered = [self.slots[(self.pointer + i) % self.n] for i in range(self.n)]
        if all(slot is None for slot in ordered):
            return []
        return [None if s is None else (s["offset"], s["order"], s["timestamp"], s["lag"]) for s in ordered]


commit_streams = st.lists(
    st.tuples(st.integers(0, 10_000), st.integers(0, 40), st.integers(0, 20_000), st.integers(0, 12_000)),
    max_size=40,
)


@settings(deadline=None, max_examples=examples(300, 80))
@given(st.integers(1, 6), st.sampled_from([0, 1000, 5000]), commit_streams)
def test_ring_matches_burrows_circular_algorithm(intervals, min_distance_ms, stream):
    ring, model = CommitRing(intervals), GoRingModel(intervals)
    for offset, order, timestamp, broker in stream:
        outcome = ring.add(offset, order, timestamp, NOW_MS, broker, min_distance_ms)
        assert bool(outcome) == model.add(offset, order, timestamp, NOW_MS, broker, min_distance_ms)
        assert [
            None if e is None else (e.offset, e.order, e.timestamp, e.lag) for e in ring.entries()
        ] == model.entries()


@settings(deadline=None, max_examples=examples(300, 80))
@given(
    st.integers(1, 8),
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 10_000), st.integers(0, 12_000)), max_size=50),
)
def test_ring_keeps_the_newest_orders_with_lag_only_for_appends(intervals, stream):
    """Without merges (timestamps follow the order), the ring holds the `intervals` largest distinct orders
    ever seen, sorted, and a commit has a lag exactly when it was the newest seen when it arrived."""
    ring = CommitRing(intervals)
    seen: dict[int, tuple] = {}
    newest_seen = None
    for order, offset, broker in stream:
        outcome = ring.add(offset, order, order * 1000, NOW_MS, broker, 0)
        if order in seen:
            assert outcome is CommitOutcome.DROPPED
            continue
        if len(seen) >= intervals and order < min(sorted(seen)[-intervals:]):
            assert outcome is CommitOutcome.DROPPED
            continue
        appended = newest_seen is None or order > newest_seen
        assert outcome is (CommitOutcome.APPENDED if appended else CommitOutcome.INSERTED)
        seen[order] = (offset, max(0, broker - offset) if appended else None)
        newest_seen = order if appended else newest_seen
    expected = [(seen[o][0], o, seen[o][1]) for o in sorted(seen)[-intervals:]]
    assert [(e.offset, e.order, e.lag) for e in ring.entries() if e is not None] == expected
    entries = ring.entries()
    assert len(entries) in (0, intervals)
    assert entries[: intervals - len(expected)] == [None] * (intervals - len(expected)) if entries else True


@settings(deadline=None, max_examples=examples(200, 60))
@given(st.integers(1, 8), st.lists(st.integers(0, 1 << 40), max_size=30))
def test_broker_ring_keeps_the_last_values(intervals, values):
    ring = BrokerRing(intervals)
    for number, value in enumerate(values):
        ring.add(value, 1000 * number)
    assert ring.values() == values[-intervals:]
    times = [1000 * number for number in range(len(values))]
    assert ring.times() == times[-intervals:]
    assert ring.newest() == (values[-1] if values else None)
    # since: when the newest value was first read, once any value has changed
    changes = [number for number in range(1, len(values)) if values[number] != values[number - 1]]
    assert ring.since == (1000 * changes[-1] if changes else None)


def test_broker_ring_rate_is_the_growth_over_its_window():
    ring = BrokerRing(3)
    assert ring.rate() is None
    ring.add(100, 1_000)
    assert ring.rate() is None  # one sample: no rate yet
    ring.add(100, 1_000)
    assert ring.rate() is None  # two samples at one time
    ring.add(400, 4_000)
    assert ring.rate() == 100.0  # 300 records in 3 s
    ring.add(400, 5_000)
    assert ring.rate() == 75.0  # the first sample left the window: 300 records from 1 s to 5 s
    ring.add(0, 6_000)
    assert ring.rate() is None  # the log went back (truncated or re-created): no rate spans that
