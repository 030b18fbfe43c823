"""Share groups (KIP-932) through Burrow's window rules.

A share group commits no offsets: its progress on a partition is the share-partition start offset, below
which every record is acknowledged, and its lag is what Kafka's ``kafka-share-groups --describe --offsets``
shows (DescribeShareGroupOffsets v1's lag: records of the partition not yet acknowledged). The cluster
module reads both every offset refresh; each reading is kept like a commit in a window of ``intervals``
readings per partition, and :func:`burrowpy.evaluator.rules.evaluate_partition` judges that window as it
judges a consumer group's commits. A start offset that stops moving while records wait therefore makes
the partition STALL once the window is full of that offset (WARN before, while the lag does not shrink),
and STOP when readings stop arriving for longer than the window spans. Each partition's newest reading
also keeps its in-flight records (acquired by a consumer, not yet acknowledged) when the brokers' metrics
give them (:class:`InFlightCounts`): a figure shown, not judged.

Pure: no IO, no clock (``now`` is passed in).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from burrowpy.evaluator.rules import evaluate_partition, group_status
from burrowpy.protocol import ConsumerGroupStatus, ConsumerOffset, PartitionStatus, Status


@dataclass(frozen=True, slots=True)
class SharePartitionOffset:
    """One share-partition as DescribeShareGroupOffsets reports it."""

    topic: str
    partition: int
    start_offset: int
    lag: int | None  # Kafka's (version 1); None or negative when the broker gives none


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    """One member of a share group as ShareGroupDescribe reports it, with the share-partitions it is assigned
    (in a share group several members may be assigned the same partition)."""

    member_id: str
    client_id: str
    host: str
    partitions: frozenset[tuple[str, int]]

    def to_json(self) -> dict[str, str]:
        return {"member_id": self.member_id, "client_id": self.client_id, "host": self.host}


@dataclass(frozen=True, slots=True)
class InFlightCounts:
    """Records in flight per (group, topic, partition) as the brokers' metrics gave them
    (:mod:`burrowpy.coordinators.broker_metrics`); ``complete`` when every endpoint answered."""

    counts: Mapping[tuple[str, str, int], int]
    complete: bool

    def of(self, group: str, topic: str, partition: int) -> int | None:
        """The count, or None when unknown. A share-partition no endpoint reports has none in flight when all
        answered: its leader reports every share-partition it has loaded, and only a loaded one acquires."""
        count = self.counts.get((group, topic, partition))
        if count is None and self.complete:
            return 0
        return count


@dataclass(slots=True)
class _Readings:
    starts: deque[ConsumerOffset]
    log_ends: deque[int]
    in_flight: int | None = None  # the newest reading's; None when unknown or not read


@dataclass(slots=True)
class ShareGroupStatus:
    """A share group's evaluation: Burrow's group status plus what only share groups have."""

    status: ConsumerGroupStatus
    state: str  # the group's state as ListGroups gives it (Empty, Stable, Dead)
    log_ends: dict[tuple[str, int], int | None] = field(default_factory=dict)
    members: list[ShareGroupMember] = field(default_factory=list)

    def problems(self) -> ConsumerGroupStatus:
        """The group's status listing only the partitions worse than OK (what ``/status`` and notifiers show)."""
        return replace(self.status, partitions=[p for p in self.status.partitions if p.status > Status.OK])

    def to_json(self, showall: bool = True) -> dict[str, Any]:
        body = (self.status if showall else self.problems()).to_json()
        body["group_state"] = self.state
        body["members"] = len(self.members)
        in_flight = {(p.topic, p.partition): p.in_flight for p in self.status.partitions}
        for partition in (*body["partitions"], *([body["maxlag"]] if body["maxlag"] else [])):
            key = (partition["topic"], partition["partition"])
            end = partition["end"]
            partition["start_offset"] = end["offset"] if end else None
            partition["log_end_offset"] = self.log_ends.get(key)
            partition["in_flight"] = in_flight.get(key)
            partition["owners"] = [member.to_json() for member in self.members if key in member.partitions]
        return body


def rule_settings(evaluator: Any) -> tuple[int, float]:
    """The evaluator module's ``allowed-lag`` and ``minimum-complete``, which share groups are judged by too."""
    return getattr(evaluator, "allowed_lag", 0), getattr(evaluator, "minimum_complete", 0.0)


def share_lag(reading: SharePartitionOffset, log_end: int | None) -> int:
    """Kafka's lag when it gives one, else what its tool computed before version 1: log end minus start."""
    if reading.lag is not None and reading.lag >= 0:
        return reading.lag
    if log_end is None:
        return 0
    return max(log_end - reading.start_offset, 0)


@dataclass
class ShareGroupWindows:
    """The share groups of one cluster, each partition's readings kept in a window of ``intervals``."""

    cluster: str
    intervals: int = 10
    _groups: dict[str, dict[tuple[str, int], _Readings]] = field(default_factory=dict)
    _states: dict[str, str] = field(default_factory=dict)
    _members: dict[str, list[ShareGroupMember]] = field(default_factory=dict)

    def observe(self, group: str, state: str, readings: Iterable[SharePartitionOffset],
                log_ends: Mapping[tuple[str, int], int], now_ms: int,
                members: Iterable[ShareGroupMember] = (), in_flight: InFlightCounts | None = None) -> None:
        """One reading of a group's share-partitions, its members and (when the brokers' metrics are read)
        their in-flight records; partitions it no longer has state for are dropped. A partition without a
        start offset yet (-1: nothing delivered) is not a reading."""
        partitions = self._groups.setdefault(group, {})
        seen = set()
        for reading in readings:
            if reading.start_offset < 0:
                continue
            key = (reading.topic, reading.partition)
            seen.add(key)
            log_end = log_ends.get(key)
            if log_end is not None:
                # the broker-offset poll came before this reading, and records acknowledged since moved the start
                # offset past it: the log reaches at least as far as the start offset
                log_end = max(log_end, reading.start_offset)
            entry = partitions.get(key)
            if entry is None:
                entry = partitions[key] = _Readings(deque(maxlen=self.intervals), deque(maxlen=self.intervals))
            entry.starts.append(ConsumerOffset(reading.start_offset, now_ms, now_ms, share_lag(reading, log_end)))
            entry.log_ends.append(log_end if log_end is not None else reading.start_offset)
            entry.in_flight = in_flight.of(group, *key) if in_flight is not None else None
        for gone in set(partitions) - seen:
            del partitions[gone]
        self._states[group] = state
        self._members[group] = sorted(members, key=lambda member: member.member_id)

    def retain(self, groups: Iterable[str]) -> None:
        """Forget the groups Kafka no longer lists."""
        keep = set(groups)
        for group in set(self._groups) - keep:
            del self._groups[group]
            self._states.pop(group, None)
            self._members.pop(group, None)

    def groups(self) -> list[str]:
        return sorted(self._groups)

    def evaluate(self, group: str, now_s: float, allowed_lag: int = 0,
                 minimum_complete: float = 0.0) -> ShareGroupStatus | None:
        """The group's status from its windows (None for a group not known); partitions in (topic, partition)
        order, ``maxlag`` the one with the largest lag, the first on ties."""
        partitions = self._groups.get(group)
        if partitions is None:
            return None
        statuses: list[PartitionStatus] = []
        log_ends: dict[tuple[str, int], int | None] = {}
        members = self._members.get(group, [])
        for (topic, partition), entry in sorted(partitions.items()):
            # Burrow's one owner and client id per partition; a share-partition's several are comma-separated
            owners = [member for member in members if (topic, partition) in member.partitions]
            window: list[ConsumerOffset | None] = [None] * (self.intervals - len(entry.starts))
            window.extend(entry.starts)
            lag = entry.starts[-1].lag or 0
            statuses.append(evaluate_partition(window, list(entry.log_ends), lag, now_s, allowed_lag,
                                               minimum_complete, topic=topic, partition=partition,
                                               owner=",".join(member.host for member in owners),
                                               client_id=",".join(member.client_id for member in owners)))
            statuses[-1].in_flight = entry.in_flight
            log_ends[(topic, partition)] = entry.log_ends[-1]
        maxlag = max(statuses, key=lambda status: status.current_lag, default=None)
        complete = (sum(1 for status in statuses if status.complete >= 1.0) / len(statuses)) if statuses else 1.0
        overall = group_status(status.status for status in statuses) if statuses else Status.OK
        result = ConsumerGroupStatus(self.cluster, group, overall, complete, statuses, len(statuses), maxlag,
                                     sum(status.current_lag for status in statuses), kind="share")
        return ShareGroupStatus(result, self._states.get(group, ""), log_ends, members)
