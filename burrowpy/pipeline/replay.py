"""Replaying a history through the monitor's own storage ring and rules.

This is the pure core of the batch job (no Spark, no IO) and its definition. The Spark job runs, for each
(cluster, topic, partition) in its tasks' ``mapInArrow`` calls, the same replay as array operations
(``columnar.replay_columns``, held equal to this by the parity tests) or, for histories that path does not
cover, ``replay_partition``; ``replay_history`` runs this replay over a whole history in one process, which
is what the parity test and the benchmark compare Spark with.

Replay order. A history row does not say when the monitor received it, only the event's timestamp,
so events are replayed in the order of their ``Event`` tuples: by timestamp, broker samples before commits with
the same timestamp (a commit is measured against the freshest broker offset of its instant), commits
by ``order`` (their position in the source log), then by offset so that the result never depends on
file or partition order.

Evaluation points. Points are whole seconds (the evaluator's ``now`` is in seconds), ``step_s`` apart,
from the second of the first event up to the first point at or after the last event. The state at
point ``p`` is the state after every event with ``timestamp <= p * 1000``. A partition of a group is
reported at every point from its first stored commit on.

What is not replayed: ``expire-group`` (a history keeps every group; the monitor expires groups to
bound its memory) and partitions that a group never committed to (storage creates them empty from the
broker partition count, which the history format does not carry; they would always be OK).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from burrowpy.evaluator.rules import evaluate_partition
from burrowpy.evaluator.timelag import partition_lag_seconds
from burrowpy.protocol import Status
from burrowpy.storage.ring import BrokerRing, CommitOutcome, CommitRing

from .history import KIND_BROKER, KIND_COMMIT, KIND_RECORD

BROKER_RANK = 0
COMMIT_RANK = 1
RECORD_RANK = 2  # a record's timestamp, read for lag in seconds: a fact about the log, in any order


@dataclass(frozen=True, slots=True)
class ReplaySettings:
    intervals: int = 10  # storage `intervals`: commit ring and broker-offset history size
    min_distance_s: int = 0  # storage `min-distance`
    allowed_lag: int = 0  # evaluator `allowed-lag`
    minimum_complete: float = 0.0  # evaluator `minimum-complete`
    lag_lookup_size: int = 60  # broker (offset, time) samples kept per partition for lag in seconds


# An event of one (cluster, topic, partition), as a tuple whose natural order is the replay order:
# (timestamp ms, BROKER_RANK, COMMIT_RANK or RECORD_RANK, order (-1 but for commits), offset, group or None).
# A record event's timestamp is the record's own.
Event = tuple[int, int, int, int, "str | None"]


def broker_event(timestamp: int, offset: int) -> Event:
    return (timestamp, BROKER_RANK, -1, offset, None)


def commit_event(timestamp: int, offset: int, order: int, group: str) -> Event:
    return (timestamp, COMMIT_RANK, order, offset, group)


def history_event(kind: str, timestamp: int, offset: int, order: int | None, group: str | None) -> Event:
    """The replay event of a history row."""
    if kind == KIND_BROKER:
        return broker_event(timestamp, offset)
    if kind == KIND_RECORD:
        return (timestamp, RECORD_RANK, -1, offset, None)
    if kind != KIND_COMMIT or group is None or order is None:
        raise ValueError(f"not a history event: kind={kind!r} group={group!r} order={order!r}")
    return commit_event(timestamp, offset, order, group)


class PartitionEvaluation(NamedTuple):  # a tuple: millions are made per job, and tuples are cheap
    group: str
    timestamp: int  # the evaluation point, ms
    status: Status
    current_lag: int
    complete: float
    lag_seconds: float | None  # None when the history does not tell when the record was appended


def column_events(
    kinds: list[str], timestamps: list[int], offsets: list[int], orders: list[Any], groups: list[str | None]
) -> list[Event]:
    """The replay events of history rows given as columns (broker, record and valid commit rows only).

    ``order`` may arrive as floats (pandas turns a column with nulls into floats), hence the int().
    """
    return [
        (timestamp, COMMIT_RANK, int(order), offset, group)
        if kind == KIND_COMMIT
        else (timestamp, RECORD_RANK if kind == KIND_RECORD else BROKER_RANK, -1, offset, None)
        for kind, timestamp, offset, order, group in zip(
            kinds, timestamps, offsets, orders, groups, strict=True
        )
    ]


def frame_events(frame: Any) -> list[Event]:
    """The replay events of a pandas frame of history rows (what Spark hands a grouped pandas function)."""
    return column_events(
        frame["kind"].tolist(),
        frame["timestamp"].tolist(),
        frame["offset"].tolist(),
        frame["order"].tolist(),
        frame["group"].tolist(),
    )


def evaluation_points(first_ms: int, last_ms: int, step_s: int) -> list[int]:
    """Evaluation points in seconds: from the first event's second, every step, to cover the last event."""
    if step_s <= 0:
        raise ValueError("step must be a positive number of seconds")
    if last_ms < first_ms:
        raise ValueError("last event is before the first")
    first_s = first_ms // 1000
    span_ms = last_ms - first_s * 1000
    count = -(-span_ms // (step_s * 1000)) + 1  # ceiling division: the last point is at or after last_ms
    return [first_s + k * step_s for k in range(count)]


class OffsetTimeline:
    """Recent (log-end offset, time) samples of a partition, to estimate how old a committed offset is.

    The pipeline's lag in seconds is the daemon's (:mod:`burrowpy.evaluator.timelag`, the same definition
    and code): the record's timestamp where the history captured it (``record`` rows), else interpolated,
    over a longer table than storage's window. Flat runs keep only their first and last sample
    (the last one brackets the next append); ``since`` is when the newest offset was first seen.
    """

    def __init__(self, size: int) -> None:
        if size < 2:
            raise ValueError("lag lookup needs at least two samples")
        self.size = size
        self.offsets: list[int] = []
        self.times: list[int] = []
        self.since: int | None = None

    def add(self, offset: int, timestamp_ms: int) -> None:
        offsets, times = self.offsets, self.times
        if offsets and offset < offsets[-1]:
            # The log end went backwards (topic recreated): older samples describe another log.
            offsets.clear()
            times.clear()
            self.since = None
        elif offsets and offset != offsets[-1]:
            self.since = timestamp_ms
        if len(offsets) >= 2 and offsets[-1] == offset and offsets[-2] == offset:
            times[-1] = timestamp_ms
            return
        offsets.append(offset)
        times.append(timestamp_ms)
        if len(offsets) > self.size:
            del offsets[0]
            del times[0]

    def lag_seconds(self, committed: int, now_ms: int, record_time_ms: int | None = None) -> float | None:
        """Seconds since the record at ``committed`` was appended (its own timestamp when the history has
        it); 0 when caught up, None if unknown."""
        return partition_lag_seconds(committed, self.offsets, self.times, record_time_ms, now_ms, self.since)[0]


@dataclass(slots=True)
class PartitionState:
    """What the monitor's storage holds for one partition of one cluster, plus the lag-time lookup."""

    settings: ReplaySettings
    broker: BrokerRing = field(init=False)
    timeline: OffsetTimeline = field(init=False)
    commits: dict[str, CommitRing] = field(default_factory=dict)
    # offset -> timestamp of the record there, for offsets groups sit at (record rows of the history)
    record_times: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.broker = BrokerRing(self.settings.intervals)
        self.timeline = OffsetTimeline(self.settings.lag_lookup_size)

    def add_broker_offset(self, offset: int, timestamp_ms: int) -> None:
        self.broker.add(offset)
        self.timeline.add(offset, timestamp_ms)

    def add_commit(self, group: str, offset: int, order: int, timestamp_ms: int) -> CommitOutcome:
        """Store a commit as storage would; falsy if storage drops it (no broker offset yet, stale order)."""
        current_broker_offset = self.broker.newest()
        if current_broker_offset is None:
            return CommitOutcome.DROPPED
        ring = self.commits.get(group)
        if ring is None:
            ring = self.commits[group] = CommitRing(self.settings.intervals)
        observed_ms = timestamp_ms // 1000 * 1000  # storage records observation times in whole seconds
        return ring.add(
            offset,
            order,
            timestamp_ms,
            observed_ms,
            current_broker_offset,
            self.settings.min_distance_s * 1000,
        )

    def apply(self, event: Event) -> None:
        timestamp, rank, order, offset, group = event
        if rank == BROKER_RANK:
            self.add_broker_offset(offset, timestamp)
        elif rank == RECORD_RANK:
            self.record_times[offset] = timestamp
        else:
            self.add_commit(group, offset, order, timestamp)  # type: ignore[arg-type]  # commits have a group

    def evaluate(self, now_s: int) -> Iterator[PartitionEvaluation]:
        """Every group's status at ``now_s``, as the evaluator would compute it from a storage fetch."""
        settings = self.settings
        broker_offsets = self.broker.values()
        newest_broker = self.broker.newest()
        now_ms = now_s * 1000
        record_times = self.record_times
        if len(record_times) > 4 * max(len(self.commits), 1):
            # Keep the timestamps of records some group may still sit at (none goes back before its newest).
            oldest = min((ring.newest_offset() or 0 for ring in self.commits.values()), default=0)
            self.record_times = record_times = {o: t for o, t in record_times.items() if o >= oldest}
        for group, ring in self.commits.items():
            newest = ring.newest()
            if newest is None or newest_broker is None:
                current_lag = 0
            else:
                current_lag = max(0, newest_broker - newest.offset)
            result = evaluate_partition(
                ring.window(),
                broker_offsets,
                current_lag,
                now_s,
                allowed_lag=settings.allowed_lag,
                minimum_complete=settings.minimum_complete,
            )
            lag_seconds = (self.timeline.lag_seconds(newest.offset, now_ms, record_times.get(newest.offset))
                           if current_lag and newest else 0.0)
            yield PartitionEvaluation(group, now_ms, result.status, current_lag, result.complete, lag_seconds)


def replay_partition(
    events: Iterable[Event], points_s: list[int], settings: ReplaySettings
) -> Iterator[PartitionEvaluation]:
    """Replay one (cluster, topic, partition)'s events in replay order, evaluating at every point."""
    ordered = sorted(events)
    state = PartitionState(settings)
    position = 0
    for point in points_s:
        limit_ms = point * 1000
        while position < len(ordered) and ordered[position][0] <= limit_ms:
            state.apply(ordered[position])
            position += 1
        yield from state.evaluate(point)


@dataclass(frozen=True, slots=True)
class HistoryEvaluation:
    cluster: str
    group: str
    topic: str
    partition: int
    evaluation: PartitionEvaluation


def replay_history(
    rows: Iterable[tuple], points_s: list[int], settings: ReplaySettings
) -> Iterator[HistoryEvaluation]:
    """The in-process path: ``rows`` are history tuples in HISTORY_COLUMNS order, in any order."""
    by_partition: dict[tuple[str, str, int], list[Event]] = {}
    for kind, cluster, group, topic, partition, offset, timestamp, order in rows:
        by_partition.setdefault((cluster, topic, partition), []).append(
            history_event(kind, timestamp, offset, order, group)
        )
    for (cluster, topic, partition), events in by_partition.items():
        for evaluation in replay_partition(events, points_s, settings):
            yield HistoryEvaluation(cluster, evaluation.group, topic, partition, evaluation)
