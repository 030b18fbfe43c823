"""A group's evaluation (burrow-spec 1.3): every partition through the rules, and the group's figures.

:func:`assess_group` evaluates a FetchConsumer answer into a :class:`GroupEvaluation`, which holds each
topic's outcome as plain columns (a status code, a lag in seconds and its method per partition) and builds
the :class:`~burrowpy.protocol.PartitionStatus` objects only for the partitions an answer lists:
``result(showall=False)``, what ``/status`` and the notifiers of problems read, makes objects for the
partitions worse than OK and for ``maxlag``, not for every partition of the group.

A topic with many partitions whose windows are all full (the steady state of a monitored group) goes
through the rules as arrays, all its partitions at once (:func:`_assess_columns`, numpy); any other topic
goes partition by partition through :func:`burrowpy.evaluator.rules.evaluate_partition`. Both give the
same answer, which the tests hold them to.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import Any, cast

from burrowpy.evaluator.forecast import Forecast, forecast_from_rates, group_forecast, partition_forecast
from burrowpy.evaluator.rules import evaluate_partition, evaluate_window, group_status_of
from burrowpy.evaluator.timelag import CAUGHT_UP, FETCH, INTERPOLATED, partition_lag_seconds
from burrowpy.protocol import (
    COMMIT_STRIDE,
    NO_LAG,
    CommitWindow,
    ConsumerGroupStatus,
    ConsumerPartition,
    ConsumerTopics,
    PartitionStatus,
    Status,
    TopicSnapshot,
    commit_from_values,
)

_OK, _WARN = Status.OK, Status.WARN
_BY_CODE = tuple(Status)  # Status(code) without the Enum call

# Topics with fewer partitions than this go partition by partition: below it the fixed cost of the array
# operations (~100 us) is more than they save. Measured crossover: ~24 partitions for an answer listing
# only the problems, ~50 for one listing every partition (whose objects both paths make).
COLUMNS_FROM = 48

_METHODS = (None, CAUGHT_UP, FETCH, INTERPOLATED)  # the lag-in-seconds method by code (0: no figure)
_NO_FORECAST = (None, None, None)  # (catch_up_forecast, catch_up_seconds, falling_behind_per_second)


class TopicEvaluation:
    """One topic's partitions, evaluated: codes and figures per partition, objects made on demand."""

    __slots__ = ("topic", "codes", "lags", "seconds", "methods", "forecasts", "complete_count", "_built", "_make")

    def __init__(self, topic: str, codes: list[int], lags: list[int],
                 seconds: list[float | None], methods: list[str | None], forecasts: list[Forecast | None],
                 complete_count: int, make: Callable[[list[int], list[PartitionStatus | None]], None] | None = None,
                 built: Sequence[PartitionStatus] | None = None) -> None:
        self.topic = topic
        self.codes = codes
        self.lags = lags
        self.seconds = seconds
        self.methods = methods
        self.forecasts = forecasts
        self.complete_count = complete_count
        self._make = make
        self._built: list[PartitionStatus | None] = list(built) if built is not None else [None] * len(codes)

    def partitions(self, indexes: Sequence[int]) -> list[PartitionStatus]:
        """The status objects of these partitions of the topic (each the same object on every call)."""
        built = self._built
        missing = [index for index in indexes if built[index] is None]
        if missing:
            make = self._make
            assert make is not None  # an evaluation made without make came with every status built
            make(missing, built)
        return cast("list[PartitionStatus]", [built[index] for index in indexes])  # make filled the missing


class GroupEvaluation:
    """The outcome of one evaluation of a group, from which each kind of answer is built once."""

    __slots__ = ("cluster", "group", "status", "complete", "partition_count", "totallag", "max_lag_seconds",
                 "forecast", "topics", "_maxlag", "_results", "answers")

    def __init__(self, cluster: str, group: str, status: Status, complete: float,
                 topics: list[TopicEvaluation] | None = None, partition_count: int = 0,
                 maxlag: tuple[TopicEvaluation, int] | None = None, totallag: int = 0,
                 max_lag_seconds: float | None = None, forecast: Forecast | None = None) -> None:
        self.cluster = cluster
        self.group = group
        self.status = status
        self.complete = complete
        self.topics = topics or []
        self.partition_count = partition_count
        self._maxlag = maxlag
        self.totallag = totallag
        self.max_lag_seconds = max_lag_seconds
        self.forecast = forecast
        self._results: dict[bool, ConsumerGroupStatus] = {}
        # A caller's own forms of a result (the HTTP API's encoded bodies), built once per evaluation: a
        # new evaluation is a new object, so nothing kept here outlives the data it was made from.
        self.answers: dict[Any, Any] = {}

    def result(self, showall: bool = True) -> ConsumerGroupStatus:
        """The group's status listing every partition, or with ``showall`` False only those worse than OK.

        Built once per kind and shared by every caller: read, don't modify.
        """
        result = self._results.get(showall)
        if result is None:
            partitions = []
            for topic in self.topics:
                partitions += topic.partitions(range(len(topic.codes)) if showall else
                                               [index for index, code in enumerate(topic.codes) if code > _OK])
            maxlag = self._maxlag[0].partitions((self._maxlag[1],))[0] if self._maxlag is not None else None
            forecast = self.forecast or _NO_FORECAST
            result = self._results[showall] = ConsumerGroupStatus(
                self.cluster, self.group, self.status, self.complete, partitions, self.partition_count, maxlag,
                self.totallag, self.max_lag_seconds, *forecast)
        return result


def not_found(cluster: str, group: str) -> GroupEvaluation:
    """Burrow's answer for an unknown cluster or group (or one that expired)."""
    return GroupEvaluation(cluster, group, Status.NOTFOUND, 1.0)


def assess_group(cluster: str, group: str, topics: ConsumerTopics, now: float, allowed_lag: int = 0,
                 minimum_complete: float = 0.0, max_lag_seconds: float = 0.0) -> GroupEvaluation:
    """Evaluate every partition of a group as storage returned it (FetchConsumer), spec 1.3.

    Partitions are listed in (topic, partition) order; ``maxlag`` is the partition with the largest
    current lag, the first in that order on ties. The group's status is its worst partition's, with STOP,
    STALL and REWIND counting as ERR (groups only know OK, WARN and ERR).

    Each partition also gets its lag in seconds (:mod:`burrowpy.evaluator.timelag`, from ``now`` with its
    fraction) and the group the largest of them. ``max_lag_seconds`` > 0 is the optional time threshold,
    not Burrow's: an OK partition whose oldest unconsumed record is older than that becomes WARN. Each
    partition gets its catch-up forecast (:mod:`burrowpy.evaluator.forecast`, at ``now``) and the group
    its slowest partition's.
    """
    evaluated = []
    worst = 1
    count = complete_count = totallag = 0
    maxlag: tuple[TopicEvaluation, int] | None = None
    maxlag_lag = 0
    group_seconds: float | None = None
    for topic in sorted(topics):
        parts = topics[topic]
        if not parts:
            continue
        topic_evaluation = None
        if len(parts) >= COLUMNS_FROM:
            topic_evaluation = _assess_columns(topic, parts, now, allowed_lag, max_lag_seconds)
        if topic_evaluation is None:
            topic_evaluation = _assess_each(topic, parts, now, allowed_lag, minimum_complete, max_lag_seconds)
        evaluated.append(topic_evaluation)
        topic_worst = max(topic_evaluation.codes)
        if topic_worst > worst:
            worst = topic_worst
        lags = topic_evaluation.lags
        totallag += sum(lags)
        largest = max(lags)
        if maxlag is None or largest > maxlag_lag:
            maxlag = (topic_evaluation, lags.index(largest))
            maxlag_lag = largest
        count += len(parts)
        complete_count += topic_evaluation.complete_count
        known = [seconds for seconds in topic_evaluation.seconds if seconds is not None]
        if known:
            largest_seconds = max(known)
            if group_seconds is None or largest_seconds > group_seconds:
                group_seconds = largest_seconds
    forecast = group_forecast(forecast for topic_evaluation in evaluated for forecast in topic_evaluation.forecasts)
    return GroupEvaluation(cluster, group, group_status_of(_BY_CODE[worst]),
                           complete_count / count if count else 0.0, evaluated, count, maxlag, totallag,
                           group_seconds, forecast)


def evaluate_group(cluster: str, group: str, topics: ConsumerTopics, now: float, allowed_lag: int = 0,
                   minimum_complete: float = 0.0, showall: bool = True,
                   max_lag_seconds: float = 0.0) -> ConsumerGroupStatus:
    """:func:`assess_group`'s status of the group; with ``showall`` False only partitions worse than OK are
    listed, every other figure still covers all partitions."""
    return assess_group(cluster, group, topics, now, allowed_lag, minimum_complete,
                        max_lag_seconds).result(showall)


# --- partition by partition --------------------------------------------------------------------------


def _assess_each(topic: str, parts: Sequence[ConsumerPartition], now: float, allowed_lag: int,
                 minimum_complete: float, max_lag_seconds: float) -> TopicEvaluation:
    built = []
    now_ms = now * 1000.0
    now_s = int(now)
    for partition_id, partition in enumerate(parts):
        offsets = partition.offsets
        broker_offsets = partition.broker_offsets
        if offsets.__class__ is CommitWindow:  # storage's packed window: positional, no keywords (hot loop)
            status = evaluate_window(offsets, broker_offsets, partition.current_lag, now_s, allowed_lag,
                                     minimum_complete, topic, partition_id, partition.owner, partition.client_id)
        else:
            status = evaluate_partition(offsets, broker_offsets, partition.current_lag, now, allowed_lag,
                                        minimum_complete, topic=topic, partition=partition_id,
                                        owner=partition.owner, client_id=partition.client_id)
        end = status.end
        seconds, method = partition_lag_seconds(end.offset if end is not None else None, broker_offsets,
                                                partition.broker_times, partition.record_time, now_ms,
                                                partition.broker_since)
        status.lag_seconds = seconds
        status.lag_seconds_method = method
        if end is not None:
            commit_offsets: Sequence[int]
            commit_times: Sequence[int]
            if offsets.__class__ is CommitWindow:
                commit_offsets, commit_times = offsets.column(0), offsets.column(1)
            else:
                stored = [commit for commit in offsets if commit is not None]
                commit_offsets, commit_times = [c.offset for c in stored], [c.timestamp for c in stored]
            forecast = partition_forecast(partition.current_lag, commit_offsets, commit_times, broker_offsets,
                                          partition.broker_times, now_ms)
            if forecast is not None:
                status.catch_up_forecast, status.catch_up_seconds, status.falling_behind_per_second = forecast
        if seconds is not None and 0 < max_lag_seconds < seconds and status.status == _OK and end is not None:
            status.status = _WARN
        built.append(status)
    return TopicEvaluation(topic, [status.status.value for status in built],
                           [status.current_lag for status in built], [status.lag_seconds for status in built],
                           [status.lag_seconds_method for status in built],
                           [Forecast(status.catch_up_forecast, status.catch_up_seconds, status.falling_behind_per_second)
                            if status.catch_up_forecast is not None else None for status in built],
                           sum(1 for status in built if status.complete == 1.0), built=built)


# --- all partitions of a topic at once ---------------------------------------------------------------


def _assess_columns(topic: str, parts: Sequence[ConsumerPartition], now: float, allowed_lag: int,
                    max_lag_seconds: float) -> TopicEvaluation | None:
    """The rules of spec 1.5 (in :func:`rules.partition_status`'s order) and lag in seconds on arrays.

    Only for a topic whose partitions all hold a full window of storage's packed commits (so every
    window is complete and has a start and an end); None for any other, which then goes partition by
    partition. Storage's :class:`~burrowpy.protocol.TopicSnapshot` is read as it is; other sequences of
    partitions are packed into one first. numpy is imported here, on the first such topic, so that
    processes that never evaluate a large group (and every command's start-up) do without it.
    """
    snapshot = parts if parts.__class__ is TopicSnapshot else _packed(parts)
    if snapshot is None:
        return None
    intervals = snapshot.intervals
    total = len(snapshot.stored)
    if not intervals or snapshot.stored.count(intervals) != total:
        return None
    import numpy as np

    width = intervals * COMMIT_STRIDE
    slots = np.frombuffer(snapshot.commits, dtype=np.int64).reshape(total, intervals, COMMIT_STRIDE)
    offsets = slots[:, :, 0]
    timestamps = slots[:, :, 1]
    lags = slots[:, :, 3]
    current_lags = snapshot.current_lags
    current = np.array(current_lags, dtype=np.int64)
    codes = np.full(total, 1, dtype=np.int8)  # OK
    newest = offsets[:, -1]

    # Rule 1: a caught-up consumer is OK; the others go on (every window is full, so complete).
    going = current > allowed_lag
    if going.any():
        # Rule 2, STOP: no commit for longer than the window spans, and no recent broker offset at or
        # below the last commit. The broker offsets are read only for the partitions that stopped.
        last = timestamps[:, -1]
        stopped = going & (_whole_seconds_ms(now) - last > last - timestamps[:, 0])
        samples = snapshot.samples[0]
        if samples and snapshot.samples.count(samples) == total:
            # Every partition with as many samples: the smallest of each read from the packed pairs, rather
            # than a partition object made for each stopped one (an ERR group stops them all).
            smallest = np.frombuffer(snapshot.broker, dtype=np.int64).reshape(total, samples, 2)[:, :, 0].min(axis=1)
            stopped &= smallest > newest
        else:
            for index in np.flatnonzero(stopped).tolist():
                broker_offsets = snapshot[index].broker_offsets
                if broker_offsets and min(broker_offsets) <= int(newest[index]):
                    stopped[index] = False
        codes[stopped] = Status.STOP
        going &= ~stopped
        # Rule 3, REWIND: an offset below its predecessor, not recovered by a later commit.
        if intervals > 1:
            drops = offsets[:, 1:] < offsets[:, :-1]
            rewound = going & drops.any(axis=1)
            if rewound.any():
                first = drops.argmax(axis=1) + 1  # the first commit below its predecessor
                before = offsets[np.arange(total), first - 1]
                later = np.arange(intervals)[None, :] >= first[:, None]
                recovered = ((offsets >= before[:, None]) & later).any(axis=1)
                rewound &= ~recovered
                codes[rewound] = Status.REWIND
                going &= ~rewound
        # Rule 4: every stored lag above allowed-lag; then STALL (one offset throughout) or WARN (the stored
        # lags never fall). Commits without a lag (NO_LAG) count neither way.
        stored = lags != NO_LAG
        within = (lags == 0) if allowed_lag == 0 else (stored & (lags >= 0) & (lags <= allowed_lag))
        going &= ~within.any(axis=1)
        stalled = going & (offsets == offsets[:, :1]).all(axis=1)
        codes[stalled] = Status.STALL
        going &= ~stalled
        if intervals > 1:
            # Pairwise never falling is each stored lag at least the largest stored one before it.
            kept = np.where(stored, lags, np.iinfo(np.int64).min)
            highest = np.maximum.accumulate(kept, axis=1)
            falls = stored[:, 1:] & (kept[:, 1:] < highest[:, :-1])
            going &= ~falls.any(axis=1)
        codes[going] = Status.WARN

    seconds, methods = _lag_seconds_columns(np, snapshot, newest, now * 1000.0)
    code_list = codes.tolist()
    if max_lag_seconds > 0:
        for index, value in enumerate(seconds):
            if value is not None and max_lag_seconds < value and code_list[index] == 1:
                code_list[index] = 2  # WARN: the oldest unconsumed record is too old

    forecasts = _forecasts_columns(np, snapshot, offsets, timestamps, now * 1000.0)
    owners, client_ids = snapshot.owners, snapshot.client_ids

    def make(indexes: list[int], built: list[PartitionStatus | None]) -> None:
        many = len(indexes) > 16
        if many:  # an answer listing every partition: every first and last commit in two reads of the arrays
            firsts, lasts = slots[:, 0, :].tolist(), slots[:, -1, :].tolist()
        for index in indexes:
            if many:
                first, last = firsts[index], lasts[index]
            else:
                values = snapshot.window_values(index).tolist()
                first, last = values[:COMMIT_STRIDE], values[width - COMMIT_STRIDE:]
            built[index] = PartitionStatus(topic, index, _BY_CODE[code_list[index]], current_lags[index], 1.0,
                                           commit_from_values(first), commit_from_values(last), owners[index],
                                           client_ids[index], seconds[index], methods[index],
                                           *(forecasts[index] or _NO_FORECAST))

    return TopicEvaluation(topic, code_list, current_lags, seconds, methods, forecasts, total, make=make)


def _packed(parts: Sequence[ConsumerPartition]) -> TopicSnapshot | None:
    """A sequence of partitions whose windows are all storage's packed ones, as one snapshot (what the
    array path reads); None when some window is not packed, or some partition's broker offsets and their
    times differ in number."""
    windows = [part.offsets for part in parts]
    if {window.__class__ for window in windows} != {CommitWindow}:
        return None
    packed = cast("list[CommitWindow]", windows)  # each one's class was just tested
    if len({window.intervals for window in packed}) != 1:
        return None
    broker = array("q")
    for part in parts:
        if len(part.broker_offsets) != len(part.broker_times):
            return None
        for pair in zip(part.broker_offsets, part.broker_times, strict=True):
            broker.extend(pair)
    return TopicSnapshot(packed[0].intervals, b"".join([window.slots for window in packed]),
                         [window.stored for window in packed], broker.tobytes(),
                         [len(part.broker_offsets) for part in parts], [part.broker_since for part in parts],
                         [part.current_lag for part in parts], [part.owner for part in parts],
                         [part.client_id for part in parts], [part.record_time for part in parts])


def _whole_seconds_ms(now: float) -> int:
    """``now`` as the rules read it: whole seconds (Burrow truncates), in ms."""
    return int(now) * 1000


def _lag_seconds_columns(np: Any, snapshot: TopicSnapshot, committed: Any,
                         now_ms: float) -> tuple[list[float | None], list[str | None]]:
    """:func:`timelag.partition_lag_seconds` of every partition of a topic (each has a commit)."""
    total = len(snapshot.stored)
    samples = snapshot.samples[0]
    if not samples or snapshot.samples.count(samples) != total:
        # Some partition without a broker offset, or a different number of samples: one at a time.
        return _lag_seconds_each(snapshot, committed.tolist(), now_ms)
    pairs = np.frombuffer(snapshot.broker, dtype=np.int64).reshape(total, samples, 2)
    caught_up = committed >= pairs[:, -1, 0]
    method = caught_up.astype(np.int8)  # 1: caught up, 0: no figure (yet)
    appended = np.where(caught_up, now_ms, 0.0)  # when the record at the commit was appended, ms
    record_times = snapshot.record_times
    if record_times.count(None) != total:
        known = np.array([value is not None for value in record_times]) & ~caught_up
        method[known] = 2  # the record's own timestamp
        appended[known] = [record_times[index] for index in np.flatnonzero(known).tolist()]
    rest = np.flatnonzero(method == 0)
    if rest.size:
        # Interpolated from the broker offset samples: every remaining partition is behind its newest
        # broker offset, so some sample is above its commit.
        rows = rest.tolist()
        brokers = pairs[rest, :, 0]
        times = pairs[rest, :, 1]
        commits = committed[rest]
        first = (brokers > commits[:, None]).argmax(axis=1)  # the first sample that has the record
        picked = np.arange(len(rows))
        with np.errstate(divide="ignore", invalid="ignore"):
            after_offset, after_time = brokers[picked, first], times[picked, first]
            before_offset, before_time = brokers[picked, first - 1], times[picked, first - 1]
            share = (commits - before_offset + 1) / (after_offset - before_offset)
            between = before_time + share * (after_time - before_time)
            oldest_offset, oldest_time = brokers[:, 0], times[:, 0]
            newest_offset, newest_time = brokers[:, -1], times[:, -1]
            sloped = (newest_offset > oldest_offset) & (newest_time > oldest_time)
            ms_per_record = (newest_time - oldest_time) / (newest_offset - oldest_offset)
            earlier = oldest_time - (oldest_offset - commits) * ms_per_record
        result = np.where(first > 0, between, earlier)
        found = (first > 0) | sloped
        idle = np.flatnonzero(~found).tolist()
        sinces = snapshot.broker_since
        for slot, since in zip(idle, [sinces[rows[slot]] for slot in idle], strict=True):
            # Idle producers: when the newest offset was first read, which the record cannot be younger than.
            if since is not None:
                result[slot] = float(min(since, int(oldest_time[slot])))
                found[slot] = True
        method[rest] = np.where(found, 3, 0)
        appended[rest] = result
    age = now_ms - appended
    codes = method.tolist()
    seconds: list[float | None] = [round(value, 3) if code else None for code, value in
                                   zip(codes, (np.where(age > 0.0, age, 0.0) / 1000.0).tolist(), strict=True)]
    return seconds, list(map(_METHODS.__getitem__, codes))


def _lag_seconds_each(parts: Sequence[ConsumerPartition], committed: Sequence[int],
                      now_ms: float) -> tuple[list[float | None], list[str | None]]:
    figures = [partition_lag_seconds(offset, part.broker_offsets, part.broker_times, part.record_time, now_ms,
                                     part.broker_since) for offset, part in zip(committed, parts, strict=True)]
    return [seconds for seconds, _ in figures], [method for _, method in figures]


def _forecasts_columns(np: Any, snapshot: TopicSnapshot, offsets: Any, timestamps: Any,
                       now_ms: float) -> list[Forecast | None]:
    """:func:`forecast.partition_forecast` of every partition of a topic whose windows are all full: the rates
    on arrays (the same operations in the same order, so the same floats), the verdict partition by
    partition."""
    total = len(snapshot.stored)
    samples = snapshot.samples[0]
    if samples < 2 or snapshot.samples.count(samples) != total or timestamps.shape[1] < 2:
        # Some partition with fewer or more broker samples than the others, or too few for a rate.
        parts = list(snapshot)
        return list(map(partition_forecast, snapshot.current_lags, offsets.tolist(), timestamps.tolist(),
                        [part.broker_offsets for part in parts], [part.broker_times for part in parts],
                        [now_ms] * total))
    pairs = np.frombuffer(snapshot.broker, dtype=np.int64).reshape(total, samples, 2)
    broker_offsets, broker_times = pairs[:, :, 0], pairs[:, :, 1]
    start = np.maximum(timestamps[:, 0], broker_times[:, 0])
    consume = _rates_columns(np, offsets, timestamps, start, now_ms)
    produce = _rates_columns(np, broker_offsets, broker_times, start, now_ms)
    return list(map(forecast_from_rates, snapshot.current_lags, consume, produce))


def _rates_columns(np: Any, values: Any, times: Any, start: Any, now_ms: float) -> list[tuple[float, float] | None]:
    """``forecast._rate_since`` of each row of a series (rows of at least two points, oldest first)."""
    count = times.shape[1]
    rows = np.arange(len(times))
    first, newest = times[:, 0], times[:, -1]
    end = np.where(now_ms - newest > 2 * (newest - first) / (count - 1), now_ms, newest)
    known = (newest > first) & (end > start)
    # The first point at or after start (from the second on), or the newest when none is.
    later = times[:, 1:] >= start[:, None]
    index = np.where(later.any(axis=1), later.argmax(axis=1) + 1, count - 1)
    before_time, after_time = times[rows, index - 1], times[rows, index]
    before_value, after_value = values[rows, index - 1], values[rows, index]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = (start - before_time) / (after_time - before_time)
        between = before_value + share * (after_value - before_value)
        at_start = np.where(later.any(axis=1) & (after_time != before_time), between,
                            np.where(later.any(axis=1), after_value, values[:, -1]))
        rates = (values[:, -1] - at_start) * 1000.0 / (end - start)
    spans = (end - start) / 1000.0
    return [(rate, span) if ok else None
            for rate, span, ok in zip(rates.tolist(), spans.tolist(), known.tolist(), strict=True)]
