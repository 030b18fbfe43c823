"""A history evaluated by the monitor's own in-memory path, in one process, for comparison with Spark.

The monitor's storage state (``burrowpy.storage.state.StorageState``) takes in every event of the
history in replay order, and at every evaluation point each group is fetched and evaluated by
``burrowpy.evaluator.rules.evaluate_group``, exactly as the daemon's caching evaluator would. The
parity test holds the Spark job to these results and the benchmark times this path against Spark.

Storage settings that the batch job does not replay are neutralised: groups never expire, and
partition counts come from the highest partition seen per topic (the history does not carry them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from burrowpy.evaluator.group import evaluate_group
from burrowpy.protocol import ConsumerGroupStatus, SetBrokerOffset, SetConsumerOffset, SetRecordTimes, Status
from burrowpy.storage.state import StorageState

from .history import KIND_BROKER, KIND_RECORD
from .replay import ReplaySettings, history_event

NEVER_EXPIRE_S = 10**12


@dataclass(frozen=True, slots=True)
class GroupAtPoint:
    point_s: int
    status: ConsumerGroupStatus
    committed: frozenset[
        tuple[str, int]
    ]  # (topic, partition) that have commits; the others are storage padding


def replay_through_storage(
    rows: Iterable[tuple], points_s: list[int], settings: ReplaySettings
) -> Iterator[GroupAtPoint]:
    """Every group at every point; ``rows`` are history tuples in HISTORY_COLUMNS order."""
    rows = list(rows)
    partition_counts: dict[tuple[str, str], int] = {}
    for row in rows:
        key = (row[1], row[3])
        partition_counts[key] = max(partition_counts.get(key, 0), row[4] + 1)
    state = StorageState(
        {cluster for cluster, _ in partition_counts},
        intervals=settings.intervals,
        expire_group_s=NEVER_EXPIRE_S,
        min_distance_s=settings.min_distance_s,
    )
    ordered = sorted(rows, key=lambda r: history_event(r[0], r[6], r[5], r[7], r[2]))
    position = 0
    for point in points_s:
        limit_ms = point * 1000
        while position < len(ordered) and ordered[position][6] <= limit_ms:
            kind, cluster, group, topic, partition, offset, timestamp, order = ordered[position]
            if kind == KIND_BROKER:
                state.add_broker_offset(
                    SetBrokerOffset(
                        cluster, topic, partition, partition_counts[(cluster, topic)], offset, timestamp
                    )
                )
            elif kind == KIND_RECORD:
                state.set_record_times(SetRecordTimes(cluster, [(topic, partition, offset, timestamp)]))
            else:
                state.add_consumer_offset(
                    SetConsumerOffset(cluster, group, topic, partition, offset, order, timestamp),
                    timestamp // 1000,
                )
            position += 1
        for cluster in state.cluster_names():
            for group in state.consumer_names(cluster) or []:
                topics = state.consumer(cluster, group, point)
                if topics is None:
                    continue
                status = evaluate_group(
                    cluster, group, topics, point, settings.allowed_lag, settings.minimum_complete
                )
                committed = frozenset(
                    (topic, index)
                    for topic, partitions in topics.items()
                    for index, partition in enumerate(partitions)
                    if partition.offsets
                )
                yield GroupAtPoint(point, status, committed)


PartitionKey = tuple[str, str, str, int, int]  # cluster, group, topic, partition, point (ms)
GroupKey = tuple[str, str, int]  # cluster, group, point (ms)


def statuses_through_storage(
    rows: Iterable[tuple], points_s: list[int], settings: ReplaySettings
) -> tuple[dict[PartitionKey, tuple[Status, int, float]], dict[GroupKey, tuple[Status, int]]]:
    """(status, current_lag, complete) per committed partition and (status, totallag) per group, by point."""
    partitions: dict[PartitionKey, tuple[Status, int, float]] = {}
    groups: dict[GroupKey, tuple[Status, int]] = {}
    for result in replay_through_storage(rows, points_s, settings):
        status = result.status
        point_ms = result.point_s * 1000
        groups[(status.cluster, status.group, point_ms)] = (status.status, status.totallag)
        for partition in status.partitions:
            if (partition.topic, partition.partition) in result.committed:
                partitions[(status.cluster, status.group, partition.topic, partition.partition, point_ms)] = (
                    partition.status,
                    partition.current_lag,
                    partition.complete,
                )
    return partitions, groups
