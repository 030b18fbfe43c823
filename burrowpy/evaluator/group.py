"""A group's evaluation (burrow-spec 1.3): every partition through the rules, and the group's figures.

:func:`assess_group` evaluates a FetchConsumer answer into a :class:`GroupEvaluation`, which holds each
topic's outcome as plain columns (a status code, a lag in seconds and its method per partition) and builds
the :class:`~burrowpy.protocol.PartitionStatus` objects only for the partitions an answer lists:
``result(showall=False)``, what ``/status`` and the notifiers of problems read, makes objects for the
partitions worse than OK and for ``maxlag``, not for every partition of the group.

It does so in two steps: :func:`group_basis` takes the group through everything that does not read the
clock (:class:`GroupBasis`), and :meth:`GroupBasis.at` finishes it at a time, so that a group whose data has
not changed since is evaluated again without going through its windows again
(:mod:`burrowpy.evaluator.caching`).

A topic with many partitions whose windows are all full (the steady state of a monitored group) goes
through the rules as arrays, all its partitions at once (:func:`_columns_basis`, numpy); any other topic
goes partition by partition through :func:`burrowpy.evaluator.rules.window_verdict`. Both give the
same answer, which the tests hold them to.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any, cast

from burrowpy.evaluator.forecast import (
    Forecast,
    ForecastBasis,
    each_rounded,
    forecast_at,
    forecast_basis,
    forecasts_from_rate_columns,
    group_forecast,
)
from burrowpy.evaluator.rules import NEVER, group_status_of, window_verdict
from burrowpy.evaluator.timelag import CAUGHT_UP, FETCH, INTERPOLATED, lag_seconds_at, partition_appended
from burrowpy.protocol import (
    COMMIT_STRIDE,
    NO_LAG,
    CommitWindow,
    ConsumerGroupStatus,
    ConsumerOffset,
    ConsumerPartition,
    ConsumerTopics,
    PartitionStatus,
    SamplesMoved,
    Status,
    TopicSamples,
    TopicSnapshot,
    commit_from_values,
)

_OK = Status.OK
_OK_CODE, _WARN_CODE, _STOP_CODE = Status.OK.value, Status.WARN.value, Status.STOP.value
_BY_CODE = tuple(Status)  # Status(code) without the Enum call

# Topics with fewer partitions than this go partition by partition: below it the fixed cost of the array
# operations (~100 us) is more than they save. Measured crossover: ~24 partitions for an answer listing
# only the problems, ~50 for one listing every partition (whose objects both paths make).
COLUMNS_FROM = 48

_METHODS = (None, CAUGHT_UP, FETCH, INTERPOLATED)  # the lag-in-seconds method by code (0: no figure)
_NO_FORECAST = (None, None, None)  # (catch_up_forecast, catch_up_seconds, falling_behind_per_second)


class TopicBasis:
    """One topic's partitions through everything that does not read the clock (:func:`group_basis`).

    STOP is the only rule that reads the clock; lag in seconds is the age of a record whose time is known
    here; a forecast moves with the clock only once a series has missed its beat. So these columns hold
    each partition's status as long as it has not stopped and when it stops, and ``clock`` what lag in
    seconds and the forecasts are finished from at a time (:meth:`at`).
    """

    __slots__ = ("topic", "codes", "stops", "lags", "methods", "complete_count", "make", "fields", "clock", "_fixed",
                 "source")

    def __init__(self, topic: str, codes: list[int], stops: list[tuple[int, int]], lags: list[int],
                 methods: list[str | None], complete_count: int,
                 make: Callable[[TopicEvaluation, list[int], list[PartitionStatus | None]], None],
                 fields: PartitionFields, clock: _EachClock | _ColumnsClock) -> None:
        self.topic = topic
        self.codes = codes  # while not stopped, before the max-lag-seconds WARN
        self.stops = stops  # (index, time in ms after which it has stopped) of each partition that can stop
        self.lags = lags
        self.methods = methods
        self.complete_count = complete_count
        self.make = make  # fills in the status objects of these partitions from an evaluation of the topic
        self.fields = fields
        self.clock = clock
        self._fixed: TopicEvaluation | None = None
        # What the basis was made from but the broker offset samples (_topic_basis), kept for a topic that lags
        # (storage answers such a topic's samples alone after a refresh that moved nothing else: resampled).
        self.source: _Source | None = None

    def resampled(self, samples: TopicSamples) -> TopicBasis:
        """The basis :func:`group_basis` makes from the answer this one was made from with these samples in
        place of its broker offset samples (storage's :class:`~burrowpy.protocol.SamplesMoved`)."""
        source = self.source
        if source is None:
            raise ValueError(f"the basis of topic {self.topic!r} kept nothing to take new samples into")
        return _topic_basis(self.topic, source.snapshot(samples), source.allowed_lag, source.minimum_complete)

    @property
    def clock_free(self) -> bool:
        """Nothing can stop, no record's age grows, no forecast a clock changes (a topic whose consumers have
        caught up): every evaluation is the same, so the first is kept and shared."""
        return not self.stops and self.clock.clock_free

    def at(self, now: float, max_lag_seconds: float) -> TopicEvaluation:
        """The topic evaluated at ``now`` (seconds)."""
        if self._fixed is not None:
            return self._fixed  # lag in seconds is 0 or unknown throughout: max-lag-seconds changes nothing
        codes = self.codes
        whole_ms = int(now) * 1000  # the rules read whole seconds (Burrow truncates)
        stopped = [index for index, after in self.stops if whole_ms > after]
        if stopped:
            codes = codes.copy()
            for index in stopped:
                codes[index] = _STOP_CODE
        seconds, forecasts = self.clock.figures(now * 1000.0)
        if max_lag_seconds > 0:
            for index, value in enumerate(seconds):
                if value is not None and max_lag_seconds < value and codes[index] == _OK_CODE:
                    if codes is self.codes:
                        codes = codes.copy()
                    codes[index] = _WARN_CODE  # the oldest unconsumed record is too old
        evaluation = TopicEvaluation(self, codes, seconds, forecasts)
        if self.clock_free:
            self._fixed = evaluation
        return evaluation


PartitionColumns = tuple[list[str], list[str], list[float], list[ConsumerOffset | None], list[ConsumerOffset | None]]


class PartitionFields:
    """What a topic's partitions show in an answer that no clock moves, for a writer that encodes an answer
    from the evaluation's columns rather than from status objects (``burrowpy.httpserver.status_json``).

    :meth:`read` gives every partition's owner, client id, complete, first and last commit (as the status
    objects have them); ``encoded`` is the writer's to keep what it made of them (and of the basis's topic,
    lags and methods), shared by every evaluation of one basis and let go with it. Neither holds the basis.
    A module function and its arguments rather than a closure: a basis is made for every group that committed,
    and each closure is a function and cells more for the collector's young passes to walk.
    """

    __slots__ = ("_read", "_args", "encoded")

    def __init__(self, read: Callable[..., PartitionColumns], *args: Any) -> None:
        self._read = read
        self._args = args
        self.encoded: Any = None

    def read(self) -> PartitionColumns:
        return self._read(*self._args)


class _EachClock:
    """Lag in seconds and the forecasts of a topic's partitions, one by one (:func:`_each_basis`)."""

    __slots__ = ("appended", "methods", "forecasts", "clock_free")

    def __init__(self, appended: list[float | None], methods: list[str | None],
                 forecasts: list[ForecastBasis | Forecast | None]) -> None:
        self.appended = appended  # when the record at each commit was appended (timelag.partition_appended)
        self.methods = methods
        self.forecasts = forecasts
        self.clock_free = (appended.count(None) == len(appended)
                           and not any(forecast.__class__ is ForecastBasis for forecast in forecasts))

    def figures(self, now_ms: float) -> tuple[list[float | None], list[Forecast | None]]:
        seconds = list(map(lag_seconds_at, self.appended, self.methods, repeat(now_ms)))
        forecasts = [forecast_at(forecast, now_ms) if forecast.__class__ is ForecastBasis else forecast
                     for forecast in self.forecasts]
        return seconds, forecasts  # type: ignore[return-value]


class TopicEvaluation:
    """One topic's partitions, evaluated: codes and figures per partition, objects made on demand."""

    # The basis's make, not the basis: a clock-free basis keeps its one evaluation (TopicBasis._fixed), and an
    # evaluation holding its basis made a reference cycle of the two, which only the collector's full passes
    # freed: under ingest thousands of bases a minute, the most of what those passes walked (bench/README.md,
    # "Under live ingest: where the wait comes from").
    __slots__ = ("make", "fields", "topic", "codes", "lags", "seconds", "methods", "forecasts", "complete_count",
                 "_built")

    def __init__(self, basis: TopicBasis, codes: list[int], seconds: list[float | None],
                 forecasts: list[Forecast | None]) -> None:
        self.make = basis.make
        self.fields = basis.fields
        self.topic = basis.topic
        self.codes = codes
        self.lags = basis.lags
        self.seconds = seconds
        self.methods = basis.methods
        self.forecasts = forecasts
        self.complete_count = basis.complete_count
        self._built: list[PartitionStatus | None] = [None] * len(codes)

    def partitions(self, indexes: Sequence[int]) -> list[PartitionStatus]:
        """The status objects of these partitions of the topic (each the same object on every call)."""
        built = self._built
        missing = [index for index in indexes if built[index] is None]
        if missing:
            self.make(self, missing, built)
        return cast("list[PartitionStatus]", [built[index] for index in indexes])  # make filled the missing


class GroupEvaluation:
    """The outcome of one evaluation of a group, from which each kind of answer is built once."""

    __slots__ = ("cluster", "group", "status", "complete", "partition_count", "totallag", "max_lag_seconds",
                 "forecast", "topics", "maxlag_at", "_results", "answers")

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
        self.maxlag_at = maxlag  # (topic evaluation, partition) of the largest current lag
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
            maxlag = self.maxlag_at[0].partitions((self.maxlag_at[1],))[0] if self.maxlag_at is not None else None
            forecast = self.forecast or _NO_FORECAST
            result = self._results[showall] = ConsumerGroupStatus(
                self.cluster, self.group, self.status, self.complete, partitions, self.partition_count, maxlag,
                self.totallag, self.max_lag_seconds, *forecast)
        return result


class _Source:
    """A storage snapshot of a topic without its broker offset samples (:attr:`TopicBasis.source`), and the
    rules' settings the basis was made with."""

    __slots__ = ("intervals", "commits", "stored", "current_lags", "owners", "client_ids", "record_times",
                 "allowed_lag", "minimum_complete")

    def __init__(self, snapshot: TopicSnapshot, allowed_lag: int, minimum_complete: float) -> None:
        self.intervals = snapshot.intervals
        self.commits = snapshot.commits
        self.stored = snapshot.stored
        self.current_lags = snapshot.current_lags
        self.owners = snapshot.owners
        self.client_ids = snapshot.client_ids
        self.record_times = snapshot.record_times
        self.allowed_lag = allowed_lag
        self.minimum_complete = minimum_complete

    def snapshot(self, samples: TopicSamples) -> TopicSnapshot:
        return TopicSnapshot(self.intervals, self.commits, self.stored, samples.broker, samples.samples,
                             samples.broker_since, self.current_lags, self.owners, self.client_ids, self.record_times)


class GroupBasis:
    """A group's partitions through everything that does not read the clock: :meth:`at` evaluates it at any
    time, as :func:`assess_group` would from the same storage answer."""

    __slots__ = ("topics", "partition_count", "complete", "totallag", "maxlag", "_fixed")

    def __init__(self, topics: list[TopicBasis]) -> None:
        self.topics = topics
        count = complete_count = totallag = 0
        maxlag: tuple[int, int] | None = None
        maxlag_lag = 0
        for number, topic in enumerate(topics):
            lags = topic.lags
            totallag += sum(lags)
            largest = max(lags)
            if maxlag is None or largest > maxlag_lag:
                maxlag = (number, lags.index(largest))
                maxlag_lag = largest
            count += len(lags)
            complete_count += topic.complete_count
        self.partition_count = count
        self.complete = complete_count / count if count else 0.0
        self.totallag = totallag
        self.maxlag = maxlag  # (topic number, partition) of the largest current lag, the first on ties
        # The evaluation of a group whose every topic is clock-free, kept and shared (as TopicBasis does).
        self._fixed: GroupEvaluation | None = None

    def resampled(self, moved: SamplesMoved) -> GroupBasis:
        """The basis of the answer this one was made from with the samples of storage's ``moved`` in place: the
        topics whose samples moved made again from their kept columns (:meth:`TopicBasis.resampled`), without
        storage copying the commits; the others shared."""
        return GroupBasis([topic if (samples := moved.get(topic.topic)) is None else topic.resampled(samples)
                           for topic in self.topics])

    def at(self, cluster: str, group: str, now: float, max_lag_seconds: float = 0.0) -> GroupEvaluation:
        fixed = self._fixed
        if fixed is not None and fixed.cluster == cluster and fixed.group == group:
            return fixed
        worst = 1
        group_seconds: float | None = None
        evaluated = [topic.at(now, max_lag_seconds) for topic in self.topics]
        for topic_evaluation in evaluated:
            topic_worst = max(topic_evaluation.codes)
            if topic_worst > worst:
                worst = topic_worst
            known = [seconds for seconds in topic_evaluation.seconds if seconds is not None]
            if known:
                largest_seconds = max(known)
                if group_seconds is None or largest_seconds > group_seconds:
                    group_seconds = largest_seconds
        forecast = group_forecast(forecast for topic_evaluation in evaluated
                                  for forecast in topic_evaluation.forecasts)
        maxlag = (evaluated[self.maxlag[0]], self.maxlag[1]) if self.maxlag is not None else None
        evaluation = GroupEvaluation(cluster, group, group_status_of(_BY_CODE[worst]), self.complete, evaluated,
                                     self.partition_count, maxlag, self.totallag, group_seconds, forecast)
        if all(topic.clock_free for topic in self.topics):
            self._fixed = evaluation
        return evaluation


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
    return group_basis(topics, allowed_lag, minimum_complete).at(cluster, group, now, max_lag_seconds)


def group_basis(topics: ConsumerTopics, allowed_lag: int = 0, minimum_complete: float = 0.0) -> GroupBasis:
    """:func:`assess_group` without the clock: what it evaluates a group at any time from."""
    return GroupBasis([_topic_basis(topic, topics[topic], allowed_lag, minimum_complete)
                       for topic in sorted(topics) if topics[topic]])


def _topic_basis(topic: str, parts: Sequence[ConsumerPartition], allowed_lag: int,
                 minimum_complete: float) -> TopicBasis:
    """One topic of :func:`group_basis` (a topic with partitions)."""
    basis = None
    if len(parts) >= COLUMNS_FROM:
        basis = _columns_basis(topic, parts, allowed_lag)
    if basis is None:
        basis = _each_basis(topic, parts, allowed_lag, minimum_complete)
    if parts.__class__ is TopicSnapshot and max(basis.lags) > 0:
        # Storage's copy of a lagging topic: kept without its samples, which a refresh may move alone.
        basis.source = _Source(cast("TopicSnapshot", parts), allowed_lag, minimum_complete)
    return basis


def evaluate_group(cluster: str, group: str, topics: ConsumerTopics, now: float, allowed_lag: int = 0,
                   minimum_complete: float = 0.0, showall: bool = True,
                   max_lag_seconds: float = 0.0) -> ConsumerGroupStatus:
    """:func:`assess_group`'s status of the group; with ``showall`` False only partitions worse than OK are
    listed, every other figure still covers all partitions."""
    return assess_group(cluster, group, topics, now, allowed_lag, minimum_complete,
                        max_lag_seconds).result(showall)


# --- partition by partition --------------------------------------------------------------------------


def _each_basis(topic: str, parts: Sequence[ConsumerPartition], allowed_lag: int,
                minimum_complete: float) -> TopicBasis:
    codes, stops, lags, appended, methods, forecasts = [], [], [], [], [], []
    completes, owners, client_ids = [], [], []
    # Each partition's first and last commit, kept while the basis is (for the partition objects an answer
    # lists): storage's packed windows as their values (two commits' worth a partition in one array, a
    # tenth of the objects' memory), other commits as the objects themselves.
    bounds = array("q")
    at: list[int | tuple[ConsumerOffset | None, ConsumerOffset | None]] = []
    for partition_id, partition in enumerate(parts):
        offsets = partition.offsets
        broker_offsets = partition.broker_offsets
        current_lag = partition.current_lag
        verdict = window_verdict(offsets, broker_offsets, current_lag, allowed_lag, minimum_complete)
        end = verdict.end
        codes.append(verdict.status.value)
        if verdict.stop_after != NEVER:
            stops.append((partition_id, verdict.stop_after))
        lags.append(current_lag)
        completes.append(verdict.complete)
        if offsets.__class__ is CommitWindow and end is not None:
            at.append(len(bounds))
            slots = offsets.slots
            bounds += slots[:COMMIT_STRIDE]
            bounds += slots[len(slots) - COMMIT_STRIDE:]
        else:
            at.append((verdict.start, end))
        owners.append(partition.owner)
        client_ids.append(partition.client_id)
        when, method = partition_appended(end.offset if end is not None else None, broker_offsets,
                                          partition.broker_times, partition.record_time, partition.broker_since)
        appended.append(when)
        methods.append(method)
        forecast = None
        if end is not None:
            commit_offsets: Sequence[int]
            commit_times: Sequence[int]
            if offsets.__class__ is CommitWindow:
                commit_offsets, commit_times = offsets.column(0), offsets.column(1)
            else:
                stored = [commit for commit in offsets if commit is not None]
                commit_offsets, commit_times = [c.offset for c in stored], [c.timestamp for c in stored]
            forecast = forecast_basis(current_lag, commit_offsets, commit_times, broker_offsets,
                                      partition.broker_times)
        forecasts.append(forecast)

    def make(evaluation: TopicEvaluation, indexes: list[int], built: list[PartitionStatus | None]) -> None:
        codes, seconds, forecasts = evaluation.codes, evaluation.seconds, evaluation.forecasts
        for index in indexes:
            start, end = _each_commits(at, bounds, index)
            built[index] = PartitionStatus(topic, index, _BY_CODE[codes[index]], lags[index], completes[index],
                                           start, end, owners[index], client_ids[index],
                                           seconds[index], methods[index], *(forecasts[index] or _NO_FORECAST))

    return TopicBasis(topic, codes, stops, lags, methods, sum(1 for complete in completes if complete == 1.0),
                      make, PartitionFields(_each_fields, owners, client_ids, completes, at, bounds),
                      _EachClock(appended, methods, forecasts))


def _each_commits(at: list[int | tuple[ConsumerOffset | None, ConsumerOffset | None]], bounds: array[int], index: int
                  ) -> tuple[ConsumerOffset | None, ConsumerOffset | None]:
    """A partition's first and last commit as :func:`_each_basis` keeps them."""
    where = at[index]
    if isinstance(where, int):
        values = bounds[where:where + 2 * COMMIT_STRIDE].tolist()
        return commit_from_values(values[:COMMIT_STRIDE]), commit_from_values(values[COMMIT_STRIDE:])
    return where


def _each_fields(owners: list[str], client_ids: list[str], completes: list[float],
                 at: list[int | tuple[ConsumerOffset | None, ConsumerOffset | None]], bounds: array[int]) -> PartitionColumns:
    starts, ends = zip(*[_each_commits(at, bounds, index) for index in range(len(at))], strict=True)
    return owners, client_ids, completes, list(starts), list(ends)


# --- all partitions of a topic at once ---------------------------------------------------------------


def _columns_basis(topic: str, parts: Sequence[ConsumerPartition], allowed_lag: int) -> TopicBasis | None:
    """The rules of spec 1.5 (in :func:`rules.partition_verdict`'s order), lag in seconds and the forecasts on
    arrays, without the clock (:class:`TopicBasis`).

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
    stops: list[tuple[int, int]] = []
    if going.any():
        # Rule 2, STOP: no commit for longer than the window spans (after stop_time), and no recent broker
        # offset at or below the last commit. Only the first reads the clock: the other rules' codes hold
        # until the partition stops, which TopicBasis.at tells.
        last = timestamps[:, -1]
        can_stop = going.copy()
        samples = snapshot.samples[0]
        if samples and snapshot.samples.count(samples) == total:
            # Every partition with as many samples: the smallest of each read from the packed pairs, rather
            # than a partition object made for each (an ERR group can stop them all).
            smallest = np.frombuffer(snapshot.broker, dtype=np.int64).reshape(total, samples, 2)[:, :, 0].min(axis=1)
            can_stop &= smallest > newest
        else:
            for index in np.flatnonzero(can_stop).tolist():
                broker_offsets = snapshot[index].broker_offsets
                if broker_offsets and min(broker_offsets) <= int(newest[index]):
                    can_stop[index] = False
        stopping = np.flatnonzero(can_stop)
        stops = list(zip(stopping.tolist(), (2 * last - timestamps[:, 0])[stopping].tolist(), strict=True))
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

    appended, method_codes = _appended_columns(np, snapshot, newest)
    methods = list(map(_METHODS.__getitem__, method_codes.tolist()))
    clock = _ColumnsClock(np, appended, method_codes, current_lags, *_forecasts_columns(np, snapshot, offsets, timestamps))
    owners, client_ids = snapshot.owners, snapshot.client_ids
    # Each partition's first and last commit, copied: the basis is kept, the rest of storage's copy is not.
    bounds = slots[:, [0, -1], :]

    def make(evaluation: TopicEvaluation, indexes: list[int], built: list[PartitionStatus | None]) -> None:
        codes, seconds, forecasts = evaluation.codes, evaluation.seconds, evaluation.forecasts
        many = len(indexes) > 16
        if many:  # an answer listing every partition: every first and last commit in two reads of the arrays
            firsts, lasts = bounds[:, 0, :].tolist(), bounds[:, 1, :].tolist()
        for index in indexes:
            if many:
                first, last = firsts[index], lasts[index]
            else:
                first, last = bounds[index].tolist()
            built[index] = PartitionStatus(topic, index, _BY_CODE[codes[index]], current_lags[index], 1.0,
                                           commit_from_values(first), commit_from_values(last), owners[index],
                                           client_ids[index], seconds[index], methods[index],
                                           *(forecasts[index] or _NO_FORECAST))

    return TopicBasis(topic, codes.tolist(), stops, current_lags, methods, total, make,
                      PartitionFields(_columns_fields, owners, client_ids, bounds), clock)


def _columns_fields(owners: list[str], client_ids: list[str], bounds: Any) -> PartitionColumns:
    """:class:`PartitionFields` of :func:`_columns_basis` (every window full: complete 1)."""
    return (owners, client_ids, [1.0] * len(owners), list(map(commit_from_values, bounds[:, 0, :].tolist())),
            list(map(commit_from_values, bounds[:, 1, :].tolist())))


class _ColumnsClock:
    """Lag in seconds and the forecasts of a topic's partitions on arrays (:func:`_columns_basis`)."""

    __slots__ = ("np", "appended", "method_codes", "current_lags", "start", "consume", "produce", "forecasts",
                 "clock_free")

    def __init__(self, np: Any, appended: Any, method_codes: Any, current_lags: list[int], start: Any,
                 consume: tuple[Any, ...] | None, produce: tuple[Any, ...] | None,
                 forecasts: list[ForecastBasis | Forecast | None] | None) -> None:
        self.np = np
        self.appended = appended  # ms, where method_codes is 2 or 3 (see _appended_columns)
        self.method_codes = method_codes
        self.current_lags = current_lags
        # Both series of every partition (_series_columns), measured from start; or else the forecasts one by
        # one (forecast_basis).
        self.start, self.consume, self.produce, self.forecasts = start, consume, produce, forecasts
        self.clock_free = bool((method_codes <= 1).all()) and (
            not any(forecast.__class__ is ForecastBasis for forecast in forecasts) if forecasts is not None
            else max(current_lags) <= 0)

    def figures(self, now_ms: float) -> tuple[list[float | None], list[Forecast | None]]:
        np = self.np
        codes = self.method_codes
        age = now_ms - np.where(codes == 1, now_ms, self.appended)  # caught up: the record is appended now
        seconds: list[float | None] = each_rounded(np, np.where(age > 0.0, age, 0.0) / 1000.0, float)
        if not codes.all():
            for index in np.flatnonzero(codes == 0).tolist():
                seconds[index] = None  # no figure
        forecasts: list[Forecast | None]
        if self.forecasts is not None:
            forecasts = [forecast_at(forecast, now_ms) if isinstance(forecast, ForecastBasis) else forecast
                         for forecast in self.forecasts]
        else:
            forecasts = forecasts_from_rate_columns(np, self.current_lags, _rates_at(np, self.consume, self.start, now_ms),
                                                    _rates_at(np, self.produce, self.start, now_ms))
        return seconds, forecasts


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


def _appended_columns(np: Any, snapshot: TopicSnapshot, committed: Any) -> tuple[Any, Any]:
    """:func:`timelag.partition_appended` of every partition of a topic (each has a commit), as two arrays: when
    the record at the commit was appended (ms) and the method's code (``_METHODS``; the time is read for 2
    and 3 only)."""
    total = len(snapshot.stored)
    samples = snapshot.samples[0]
    if not samples or snapshot.samples.count(samples) != total:
        # Some partition without a broker offset, or a different number of samples: one at a time.
        return _appended_each(np, snapshot, committed.tolist())
    pairs = np.frombuffer(snapshot.broker, dtype=np.int64).reshape(total, samples, 2)
    caught_up = committed >= pairs[:, -1, 0]
    method = caught_up.astype(np.int8)  # 1: caught up, 0: no figure (yet)
    appended = np.zeros(total)  # when the record at the commit was appended, ms
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
    return appended, method


def _appended_each(np: Any, parts: Sequence[ConsumerPartition], committed: Sequence[int]) -> tuple[Any, Any]:
    figures = [partition_appended(offset, part.broker_offsets, part.broker_times, part.record_time, part.broker_since)
               for offset, part in zip(committed, parts, strict=True)]
    return (np.array([appended or 0.0 for appended, _ in figures]),
            np.array([_METHODS.index(method) for _, method in figures], dtype=np.int8))


def _forecasts_columns(np: Any, snapshot: TopicSnapshot, offsets: Any, timestamps: Any) -> tuple[
        Any, tuple[Any, ...] | None, tuple[Any, ...] | None, list[ForecastBasis | Forecast | None] | None]:
    """What :class:`_ColumnsClock` finishes the forecasts of a topic whose windows are all full from: (start,
    both series on arrays, None), or (None, None, None, each partition's :func:`forecast.forecast_basis`)."""
    total = len(snapshot.stored)
    samples = snapshot.samples[0]
    if samples < 2 or snapshot.samples.count(samples) != total or timestamps.shape[1] < 2:
        # Some partition with fewer or more broker samples than the others, or too few for a rate.
        parts = list(snapshot)
        return None, None, None, list(map(forecast_basis, snapshot.current_lags, offsets.tolist(), timestamps.tolist(),
                                          [part.broker_offsets for part in parts], [part.broker_times for part in parts]))
    pairs = np.frombuffer(snapshot.broker, dtype=np.int64).reshape(total, samples, 2)
    broker_offsets, broker_times = pairs[:, :, 0], pairs[:, :, 1]
    start = np.maximum(timestamps[:, 0], broker_times[:, 0])
    return start, _series_columns(np, offsets, timestamps, start), _series_columns(np, broker_offsets, broker_times,
                                                                                  start), None


def _series_columns(np: Any, values: Any, times: Any, start: Any) -> tuple[Any, ...]:
    """``forecast.series_basis`` of each row of a series (rows of at least two points, oldest first), as arrays:
    (first time, newest time, beat, grown)."""
    count = times.shape[1]
    rows = np.arange(len(times))
    first, newest = times[:, 0].copy(), times[:, -1].copy()  # copies: views would keep storage's copy alive
    beat = 2 * (newest - first) / (count - 1)
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
        grown = values[:, -1] - at_start
    return first, newest, beat, grown


def _rates_at(np: Any, series: Any, start: Any, now_ms: float) -> tuple[Any, Any, Any]:
    """``forecast.rate_at`` of each row of :func:`_series_columns`' arrays: (per second, over seconds, known)."""
    first, newest, beat, grown = series
    end = np.where(now_ms - newest > beat, now_ms, newest)
    known = (newest > first) & (end > start)
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = grown * 1000.0 / (end - start)
    return rates, (end - start) / 1000.0, known
