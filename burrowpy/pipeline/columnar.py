"""The replay of one (cluster, topic, partition) as array operations: what ``replay_partition`` computes,
without a Python step per event or per evaluation.

``replay_partition`` (the storage rings and ``burrowpy.evaluator.rules``) stays the definition; this is the
same computation rearranged for numpy, and the parity tests hold the two equal on random histories. It
covers the histories the monitor writes with the default storage setting; for any other input
:func:`replay_columns` answers None and the caller replays event by event:

- ``min_distance_s`` 0: a commit ring then always holds the ``intervals`` commits of highest ``order``
  that storage accepted so far (an append drops the oldest, a back-fill takes its place by order, one
  older than a full ring's oldest is dropped), so the window at a point is a top-N of the commits
  arrived by then, taken from the last few arrivals and checked against everything before them;
- no ``record`` rows (their timestamps are pruned by the rings' state, which arrays do not follow);
- no commit ``order`` seen twice in a group, and a log end offset that never goes backwards (the
  lag-time table restarts then).

Lag in seconds follows the lag-time table of ``replay.OffsetTimeline`` (flat runs kept as their first
and last sample, the newest ``lag_lookup_size`` entries) through index arithmetic over the broker
samples, and the arithmetic of ``burrowpy.evaluator.timelag`` in float64, which is Python's float.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from burrowpy.protocol import NO_LAG, Status

from .history import KIND_BROKER, KIND_COMMIT
from .replay import ReplaySettings

# Arrivals looked at beyond the ring's size when building a window: a commit arriving this many commits
# late (by order) still lands in its place; later ones send the partition to the event-by-event replay.
DISORDER_REACH = 16
# Ages whose thousandths sit this close to a half are rounded by Python's round(), the definition.
_ROUND_DOUBT = 1e-3

STATUS_NAMES = np.array([status.name for status in Status], dtype=object)
_CODE = {status: index for index, status in enumerate(Status)}
_OK, _WARN, _STOP, _STALL, _REWIND = (_CODE[s] for s in (Status.OK, Status.WARN, Status.STOP, Status.STALL,
                                                           Status.REWIND))


class HistoryArrays:
    """History rows (an Arrow table with ``kind``, ``timestamp``, ``offset``, ``order`` and ``group``) as
    numpy arrays, read once for a table that may hold many partitions: ``kind`` as a code (broker, commit,
    other), ``group`` as an index into ``group_names`` (-1 for none), ``order`` with none as 0."""

    __slots__ = ("kind", "timestamp", "offset", "order", "group", "group_names")

    def __init__(self, table: Any) -> None:
        import pyarrow.compute as pc

        kind = table.column("kind")
        is_broker = pc.fill_null(pc.equal(kind, KIND_BROKER), False).to_numpy(zero_copy_only=False)
        is_commit = pc.fill_null(pc.equal(kind, KIND_COMMIT), False).to_numpy(zero_copy_only=False)
        self.kind = np.where(is_broker, _KIND_BROKER, np.where(is_commit, _KIND_COMMIT, _KIND_OTHER))
        self.timestamp = _int64(table.column("timestamp"))
        self.offset = _int64(table.column("offset"))
        self.order = _int64(pc.fill_null(table.column("order"), 0))
        encoded = table.column("group").combine_chunks().dictionary_encode()
        self.group = _int64(pc.fill_null(encoded.indices, -1))
        self.group_names = encoded.dictionary  # an Arrow array: names are taken from it, never made in Python


_KIND_BROKER, _KIND_COMMIT, _KIND_OTHER = 0, 1, 2
# Group indices are shifted by this many bits above a timestamp in one sort key (see ``replay_rows``).
_GROUP_SHIFT = 42


def _int64(column: Any) -> Any:
    return np.asarray(column.to_numpy(), dtype=np.int64) if column.null_count == 0 else \
        np.asarray(column.to_numpy(zero_copy_only=False)).astype(np.int64)


def replay_columns(table: Any, points_s: list[int], settings: ReplaySettings) -> dict[str, Any] | None:
    """Every evaluation of one (cluster, topic, partition)'s history rows (an Arrow table with ``kind``,
    ``timestamp``, ``offset``, ``order`` and ``group``; broker and valid commit rows only) as columns:
    ``group``, ``timestamp``, ``status``, ``current_lag``, ``complete``, ``lag_seconds`` (NaN for none).
    None when the history is not one this path covers (see the module's docstring)."""
    if settings.min_distance_s != 0:
        return None
    arrays = HistoryArrays(table)
    codes = replay_rows(arrays, 0, table.num_rows, points_s, settings)
    if codes is None:
        return None
    names = np.array(arrays.group_names.to_pylist(), dtype=object)
    columns = dict(codes)
    columns["group"] = names[codes["group"]] if len(names) else np.array([], dtype=object)
    columns["status"] = STATUS_NAMES[codes["status"]]
    return columns


def replay_rows(arrays: HistoryArrays, start: int, stop: int, points_s: list[int],
                settings: ReplaySettings) -> dict[str, Any] | None:
    """``replay_columns`` of rows ``start:stop`` of ``arrays`` (one partition's), with ``group`` as indices
    into ``arrays.group_names`` and ``status`` as indices into ``STATUS_NAMES``."""
    if settings.min_distance_s != 0:
        return None
    kind = arrays.kind[start:stop]
    is_broker = kind == _KIND_BROKER
    is_commit = kind == _KIND_COMMIT
    if int(is_broker.sum()) + int(is_commit.sum()) != len(kind):
        return None  # record rows

    timestamp, offset = arrays.timestamp[start:stop], arrays.offset[start:stop]
    broker_ts = timestamp[is_broker]
    broker_off = offset[is_broker]
    order = np.lexsort((broker_off, broker_ts))  # replay order: by time, then offset
    broker_ts, broker_off = broker_ts[order], broker_off[order]
    if len(broker_off) > 1 and bool((broker_off[1:] < broker_off[:-1]).any()):
        return None

    group = arrays.group[start:stop][is_commit]
    if len(group) and (int(group.min()) < 0 or int(group.max()) >= 1 << (62 - _GROUP_SHIFT)):
        return None  # a commit without a group, or too many groups for the sort key below
    commit_ts = timestamp[is_commit]
    commit_off = offset[is_commit]
    commit_order = arrays.order[start:stop][is_commit]

    # Storage drops a commit that comes before any broker offset of its partition.
    newest_broker_index = np.searchsorted(broker_ts, commit_ts, side="right") - 1
    accepted = newest_broker_index >= 0
    group, commit_ts, commit_off, commit_order = (a[accepted] for a in (group, commit_ts, commit_off, commit_order))
    if not len(commit_ts):
        return empty_codes()
    newest_broker_at_commit = broker_off[newest_broker_index[accepted]]

    # Rank every commit by (group, order); a group's ranks are one block, above every earlier group's.
    by_rank = _sort_by_group_and(group, commit_order)
    if by_rank is None:
        by_rank = np.lexsort((commit_order, group))
    if bool(((group[by_rank][1:] == group[by_rank][:-1]) & (commit_order[by_rank][1:] == commit_order[by_rank][:-1])).any()):
        return None
    rank_of = np.empty(len(by_rank), dtype=np.int64)
    rank_of[by_rank] = np.arange(len(by_rank))
    # Arrival (replay) order within each group: by time, then order, then offset.
    arrival = _sort_by_group_and(group, commit_ts, distinct=True)
    if arrival is None:
        arrival = np.lexsort((commit_off, commit_order, commit_ts, group))
    ranks = rank_of[arrival]
    arrival_ts = commit_ts[arrival]
    arrival_group = group[arrival]

    # A commit is appended (and gets a lag) when its order is above every one stored before it.
    running_max = np.maximum.accumulate(ranks)
    before = np.concatenate(([-1], running_max[:-1]))
    appended = ranks > before
    lag_at_arrival = np.where(appended, np.maximum(0, newest_broker_at_commit[arrival] - commit_off[arrival]), NO_LAG)
    lag_by_rank = np.empty(len(ranks), dtype=np.int64)
    lag_by_rank[ranks] = lag_at_arrival
    offset_by_rank = commit_off[by_rank]
    ts_by_rank = commit_ts[by_rank]

    # The (group, point) pairs with at least one commit arrived: how many arrived by then.
    groups_present = arrival_group[np.flatnonzero(np.diff(arrival_group, prepend=-1))]  # sorted: its distinct
    points = np.asarray(points_s, dtype=np.int64)
    points_ms = points * 1000
    base = int(min(commit_ts.min(), points_ms[0])) - 1
    shift = np.int64(1) << np.int64(_GROUP_SHIFT)
    keys = arrival_group * shift + (arrival_ts - base)
    group_start = np.searchsorted(arrival_group, groups_present, side="left")
    group_end = np.searchsorted(arrival_group, groups_present, side="right")
    probe = groups_present[:, None] * shift + (points_ms - base)[None, :]
    arrived = np.clip(np.searchsorted(keys, probe, side="right") - group_start[:, None], 0,
                      (group_end - group_start)[:, None])
    point_index = np.broadcast_to(np.arange(len(points))[None, :], arrived.shape)
    present = arrived > 0
    # Rows by point, then group: the order does not matter to anyone, but it is fixed.
    present_t = present.T
    row_arrived = arrived.T[present_t]
    row_point = point_index.T[present_t]
    row_group_slot = np.broadcast_to(np.arange(len(groups_present))[None, :], present_t.shape)[present_t]
    row_start = group_start[row_group_slot]
    rows = len(row_arrived)

    # Windows: the top ``intervals`` ranks among the last arrivals (a full ring's oldest commit must rank
    # above every commit that arrived before them, or the partition goes the long way).
    size = settings.intervals
    reach = size + DISORDER_REACH
    candidate = (row_start + row_arrived)[:, None] - reach + np.arange(reach)[None, :]
    candidate_valid = candidate >= row_start[:, None]
    candidate_ranks = np.where(candidate_valid, ranks[np.maximum(candidate, 0)], -1)
    window = np.sort(candidate_ranks, axis=1)[:, reach - size:]
    valid = window >= 0
    earlier = candidate[:, 0] - 1
    has_earlier = earlier >= row_start
    if bool((has_earlier & (window[:, 0] <= running_max[np.maximum(earlier, 0)])).any()):
        return None
    safe = np.maximum(window, 0)
    offsets = offset_by_rank[safe]
    lags = np.where(valid, lag_by_rank[safe], NO_LAG)
    stored = valid.sum(axis=1)
    first_column = size - stored
    row_index = np.arange(rows)
    newest_offset = offsets[:, -1]
    first_ts = ts_by_rank[safe[row_index, first_column]]
    last_ts = ts_by_rank[safe[:, -1]]

    # The broker ring at each point: its newest offset and the smallest of its last ``intervals``.
    broker_count = np.searchsorted(broker_ts, points_ms, side="right")
    padded = np.concatenate((np.full(size - 1, np.iinfo(np.int64).max), broker_off))
    ring_min = np.lib.stride_tricks.sliding_window_view(padded, size).min(axis=1)
    row_brokers = broker_count[row_point]
    newest_broker = broker_off[row_brokers - 1]
    current_lag = np.maximum(0, newest_broker - newest_offset)

    complete = np.where(stored == size, 1.0, stored / size)
    judged = (complete >= settings.minimum_complete) & (current_lag > settings.allowed_lag)
    now_ms = points_ms[row_point]
    stopped = (now_ms - last_ts > last_ts - first_ts) & ~(ring_min[row_brokers - 1] <= newest_offset)
    columns = np.arange(size)[None, :]
    pair_valid = valid[:, 1:] & valid[:, :-1]
    # A column for "never went back", so a one-slot ring has one too.
    went_back = np.pad(pair_valid & (offsets[:, 1:] < offsets[:, :-1]), ((0, 0), (0, 1)))
    rewound = went_back.any(axis=1)
    back_at = went_back.argmax(axis=1) + 1
    before_rewind = offsets[row_index, back_at - 1]
    recovered = (valid & (columns >= back_at[:, None]) & (offsets >= before_rewind[:, None])).any(axis=1)
    stored_lag = valid & (lags != NO_LAG)
    always_lagging = ~(stored_lag & (lags >= 0) & (lags <= settings.allowed_lag)).any(axis=1)
    stalled = ~(valid & (offsets != offsets[row_index, first_column][:, None])).any(axis=1)
    highest_before = np.maximum.accumulate(np.where(stored_lag, lags, -1), axis=1)
    decreasing = (stored_lag[:, 1:] & (lags[:, 1:] < highest_before[:, :-1])).any(axis=1)
    status = np.select(
        [~judged, stopped, rewound & ~recovered, always_lagging & stalled, always_lagging & ~decreasing],
        [_OK, _STOP, _REWIND, _STALL, _WARN],
        _OK,
    )

    lag_seconds = np.zeros(rows)
    lagging = np.flatnonzero(current_lag > 0)
    if len(lagging):
        lag_seconds[lagging] = _lag_seconds(
            newest_offset[lagging], now_ms[lagging], row_brokers[lagging], broker_off, broker_ts,
            settings.lag_lookup_size,
        )
    return {
        "group": groups_present[row_group_slot],
        "timestamp": now_ms,
        "status": status,
        "current_lag": current_lag,
        "complete": complete,
        "lag_seconds": lag_seconds,
    }


def _sort_by_group_and(group: Any, values: Any, distinct: bool = False) -> Any:
    """The permutation that sorts by (group, value), as ``np.lexsort((values, group))`` gives it, from one
    sort of one packed key; None when the values span too wide a range to pack (and, with ``distinct``, when
    two rows have the same group and value, whose order lexsort would decide by further keys)."""
    if not len(values):
        return np.arange(0)
    low = int(values.min())
    if int(values.max()) - low >= 1 << _GROUP_SHIFT:
        return None
    key = (group << _GROUP_SHIFT) | (values - low)
    permutation = np.argsort(key, kind="stable")
    if distinct and bool((np.diff(key[permutation]) == 0).any()):
        return None
    return permutation


def empty_codes() -> dict[str, Any]:
    return {"group": np.array([], dtype=np.int64), "timestamp": np.array([], dtype=np.int64),
            "status": np.array([], dtype=np.int64), "current_lag": np.array([], dtype=np.int64),
            "complete": np.array([]), "lag_seconds": np.array([])}


def _lag_seconds(committed: Any, now_ms: Any, brokers: Any, broker_off: Any, broker_ts: Any,
                 table_size: int) -> Any:
    """``partition_lag_seconds`` for lagging rows: ``brokers`` samples read by each row's point (the log
    end above ``committed``). NaN where there is no estimate."""
    samples = len(broker_off)
    index = np.arange(samples)
    run_start = np.concatenate(([True], broker_off[1:] != broker_off[:-1]))
    run_end = np.concatenate((broker_off[1:] != broker_off[:-1], [True]))
    kept = run_start | run_end
    kept_index = np.flatnonzero(kept)
    kept_before = np.concatenate(([0], np.cumsum(kept)))  # kept samples among the first i
    start_of_run = np.maximum.accumulate(np.where(run_start, index, 0))

    newest = brokers - 1
    entries = kept_before[newest] + 1  # the kept samples before the newest, and the newest
    oldest = np.where(entries <= table_size, 0, kept_index[np.maximum(entries - table_size, 0)])
    after = np.searchsorted(broker_off, committed, side="right")  # first sample above the commit

    interpolated = after > oldest
    before = np.maximum(after - 1, 0)
    share = (committed - broker_off[before] + 1) / np.where(interpolated, broker_off[after] - broker_off[before], 1)
    appended = broker_ts[before] + share * (broker_ts[after] - broker_ts[before])

    grew = (broker_off[newest] > broker_off[oldest]) & (broker_ts[newest] > broker_ts[oldest])
    offset_span = np.where(grew, broker_off[newest] - broker_off[oldest], 1)
    ms_per_record = (broker_ts[newest] - broker_ts[oldest]) / offset_span
    extrapolated = broker_ts[oldest] - (broker_off[oldest] - committed) * ms_per_record
    since = start_of_run[newest]
    idle = np.where(since > 0, np.minimum(broker_ts[since], broker_ts[oldest]).astype(np.float64), np.nan)
    appended = np.where(interpolated, appended, np.where(grew, extrapolated, idle))

    age = np.maximum(0.0, now_ms - appended) / 1000.0
    rounded = np.round(age, 3)
    thousandths = age * 1000.0
    doubtful = np.flatnonzero(np.abs(thousandths - np.floor(thousandths) - 0.5) < _ROUND_DOUBT)
    for position in doubtful:
        rounded[position] = round(float(age[position]), 3)
    return rounded
