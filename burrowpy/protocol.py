"""Types shared by every part of the monitor.

This module imports nothing from the rest of burrowpy: storage, evaluator, HTTP server, notifiers and
the Spark pipeline all speak in these types. JSON shapes follow Burrow's v3 API exactly (field names,
status strings), see ``to_json`` methods.
"""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, NamedTuple


class Status(IntEnum):
    """Burrow's status constants, ordered. Partitions use OK..REWIND (no ERR), groups NOTFOUND..ERR."""

    NOTFOUND = 0
    OK = 1
    WARN = 2
    ERR = 3
    STOP = 4
    STALL = 5
    REWIND = 6

    def __str__(self) -> str:
        return self.name

    @classmethod
    def name_of(cls, value: int) -> str:
        """The JSON string for a status value; Burrow prints UNKNOWN for anything out of range."""
        try:
            return cls(value).name
        except ValueError:
            return "UNKNOWN"


class ConsumerOffset(NamedTuple):
    """One stored consumer commit. ``order`` is its position in the source log and is never serialized.

    A tuple, so that a packed commit becomes one with a single C-level call (:meth:`CommitWindow.commit`).
    """

    offset: int
    timestamp: int  # commit time, ms since the epoch
    observed_at: int  # when the monitor stored it, ms (second granularity)
    lag: int | None
    order: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "timestamp": self.timestamp, "observedAt": self.observed_at, "lag": self.lag}


_new_tuple = tuple.__new__

# A commit ring stores each commit as COMMIT_STRIDE int64 values in one array, in this order:
# offset, timestamp, observed_at, lag (NO_LAG when the commit has none), order.
COMMIT_STRIDE = 5
NO_LAG = -1


def commit_from_values(values: Sequence[int]) -> ConsumerOffset:
    """The commit of one slot's ``COMMIT_STRIDE`` packed values."""
    if values[3] == NO_LAG:
        return ConsumerOffset(values[0], values[1], values[2], None, values[4])
    return _new_tuple(ConsumerOffset, values)


def unpack_commit(packed: Sequence[int], start: int) -> ConsumerOffset:
    """The commit packed at ``start`` of a commit ring's values (the array itself, or its ``tolist()``)."""
    return commit_from_values(packed[start:start + COMMIT_STRIDE])


class CommitWindow(Sequence):
    """A snapshot of one partition's commit ring: ``intervals`` slots oldest to newest, ``None`` for the
    empty (oldest) ones, or no slots at all if the partition was never committed.

    The commits stay packed (see ``COMMIT_STRIDE``) and become :class:`ConsumerOffset` objects only when
    an item is read; the evaluation rules read whole columns instead (:meth:`column`), which is what
    keeps a monitored partition small and its evaluation cheap.
    """

    __slots__ = ("slots", "intervals", "stored")

    def __init__(self, slots: array, intervals: int) -> None:
        self.slots = slots
        self.stored = len(slots) // COMMIT_STRIDE  # commits held (the newest slots)
        self.intervals = intervals if self.stored else 0

    def __len__(self) -> int:
        return self.intervals

    def commit(self, number: int) -> ConsumerOffset:
        """The ``number``-th stored commit (0 the oldest), as an object."""
        return unpack_commit(self.slots, number * COMMIT_STRIDE)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.intervals))]
        if index < 0:
            index += self.intervals
        if not 0 <= index < self.intervals:
            raise IndexError("commit window index out of range")
        number = index - (self.intervals - self.stored)
        return self.commit(number) if number >= 0 else None

    def __iter__(self) -> Iterator[ConsumerOffset | None]:
        for _ in range(self.intervals - self.stored):
            yield None
        for number in range(self.stored):
            yield self.commit(number)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"CommitWindow({list(self)!r})"

    def column(self, field_number: int) -> array:
        """One field (0 offset, 1 timestamp, 2 observed_at, 3 lag, 4 order) of every stored commit."""
        return self.slots[field_number::COMMIT_STRIDE]


@dataclass(slots=True)
class PartitionStatus:
    topic: str
    partition: int
    status: Status
    current_lag: int
    complete: float
    start: ConsumerOffset | None = None
    end: ConsumerOffset | None = None
    owner: str = ""
    client_id: str = ""
    # Age of the oldest unconsumed record and how it was found (burrowpy.evaluator.timelag); not Burrow's.
    lag_seconds: float | None = None
    lag_seconds_method: str | None = None
    # Catch-up forecast from the window's rates (burrowpy.evaluator.forecast); not Burrow's.
    catch_up_forecast: str | None = None
    catch_up_seconds: float | None = None
    falling_behind_per_second: float | None = None
    # A share-partition's records acquired and not yet acknowledged (burrowpy.evaluator.share), None when
    # unknown; not Burrow's, so a consumer group's JSON never has the key.
    in_flight: int | None = None

    def to_json(self) -> dict[str, Any]:
        body = {
            "topic": self.topic,
            "partition": self.partition,
            "owner": self.owner,
            "client_id": self.client_id,
            "status": self.status.name,
            "start": self.start.to_json() if self.start else None,
            "end": self.end.to_json() if self.end else None,
            "current_lag": self.current_lag,
            "complete": self.complete,
            "lag_seconds": self.lag_seconds,
            "lag_seconds_method": self.lag_seconds_method,
            "catch_up_forecast": self.catch_up_forecast,
            "catch_up_seconds": self.catch_up_seconds,
            "falling_behind_per_second": self.falling_behind_per_second,
        }
        if self.in_flight is not None:
            body["in_flight"] = self.in_flight
        return body


@dataclass(slots=True)
class ConsumerGroupStatus:
    cluster: str
    group: str
    status: Status
    complete: float
    partitions: list[PartitionStatus] = field(default_factory=list)
    partition_count: int = 0
    maxlag: PartitionStatus | None = None
    totallag: int = 0
    max_lag_seconds: float | None = None  # the largest partition lag_seconds; not Burrow's
    # The slowest partition's catch-up forecast (burrowpy.evaluator.forecast.group_forecast); not Burrow's.
    catch_up_forecast: str | None = None
    catch_up_seconds: float | None = None
    falling_behind_per_second: float | None = None
    # "share" for a share group's (burrowpy.evaluator.share), which notifier templates tell apart; not Burrow's.
    kind: str = "consumer"

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "group": self.group,
            "status": self.status.name,
            "complete": self.complete,
            "partitions": [p.to_json() for p in self.partitions],
            "partition_count": self.partition_count,
            "maxlag": self.maxlag.to_json() if self.maxlag else None,
            "totallag": self.totallag,
            "max_lag_seconds": self.max_lag_seconds,
            "catch_up_forecast": self.catch_up_forecast,
            "catch_up_seconds": self.catch_up_seconds,
            "falling_behind_per_second": self.falling_behind_per_second,
        }


@dataclass(slots=True)
class ConsumerPartition:
    """Storage's view of one partition of a group (FetchConsumer), before evaluation."""

    offsets: Sequence[ConsumerOffset | None]  # the full ring oldest -> newest, or [] if never committed
    broker_offsets: list[int]  # broker offset history oldest -> newest
    current_lag: int
    owner: str = ""
    client_id: str = ""
    broker_times: list[int] = field(default_factory=list)  # when each broker offset was read, ms
    broker_since: int | None = None  # since when the newest broker offset has not changed, ms (if known)
    record_time: int | None = None  # timestamp (ms) of the record at the newest commit, when fetched

    def to_json(self) -> dict[str, Any]:
        return {
            "offsets": [o.to_json() if o else None for o in self.offsets],
            "owner": self.owner,
            "client_id": self.client_id,
            "current-lag": self.current_lag,
        }


class TopicSnapshot(Sequence):
    """One topic of a group as storage copies it for a fetch: a sequence of :class:`ConsumerPartition`
    (partition ids are the indexes) kept packed, each partition's object made only when it is read.

    ``commits`` holds every partition's commit ring back to back (``stored[i]`` commits of ``COMMIT_STRIDE``
    int64 each, oldest first; 0 for a partition never committed) and ``broker`` every partition's broker
    offset samples ((offset, read time ms) int64 pairs, ``samples[i]`` of them, oldest first); the other
    figures are lists by partition. The evaluator reads the packed columns of a large topic directly
    (:mod:`burrowpy.evaluator.group`), so a fetch of a thousand partitions makes two joins and a few
    lists instead of thousands of objects. Equal to any sequence of the same partitions.
    """

    __slots__ = ("intervals", "commits", "stored", "broker", "samples", "broker_since", "current_lags", "owners",
                 "client_ids", "record_times", "_made", "_commit_starts", "_sample_starts")

    def __init__(self, intervals: int, commits: bytes, stored: list[int], broker: bytes, samples: list[int],
                 broker_since: list[int | None], current_lags: list[int], owners: list[str], client_ids: list[str],
                 record_times: list[int | None]) -> None:
        self.intervals = intervals
        self.commits = commits
        self.stored = stored
        self.broker = broker
        self.samples = samples
        self.broker_since = broker_since
        self.current_lags = current_lags
        self.owners = owners
        self.client_ids = client_ids
        self.record_times = record_times
        self._made: list[ConsumerPartition | None] = [None] * len(stored)
        self._commit_starts: list[int] | None = None
        self._sample_starts: list[int] | None = None

    def __len__(self) -> int:
        return len(self.stored)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self.stored)))]
        if index < 0:
            index += len(self.stored)
        if not 0 <= index < len(self.stored):
            raise IndexError("topic snapshot index out of range")
        made = self._made[index]
        if made is None:
            made = self._made[index] = self._make(index)
        return made

    def __iter__(self) -> Iterator[ConsumerPartition]:
        for index in range(len(self.stored)):
            yield self[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return list(self) == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"TopicSnapshot({list(self)!r})"

    def window_values(self, index: int) -> array:
        """Partition ``index``'s stored commits, packed (``stored[index] * COMMIT_STRIDE`` values)."""
        if self._commit_starts is None:
            self._commit_starts = _starts(self.stored, COMMIT_STRIDE * 8)
        start = self._commit_starts[index]
        values = array("q")
        values.frombytes(self.commits[start:start + self.stored[index] * COMMIT_STRIDE * 8])
        return values

    def _make(self, index: int) -> ConsumerPartition:
        stored = self.stored[index]
        offsets = CommitWindow(self.window_values(index), self.intervals) if stored else []
        if self._sample_starts is None:
            self._sample_starts = _starts(self.samples, 16)
        start = self._sample_starts[index]
        pairs = array("q")
        pairs.frombytes(self.broker[start:start + self.samples[index] * 16])
        return ConsumerPartition(offsets, pairs[0::2].tolist(), self.current_lags[index], self.owners[index],
                                 self.client_ids[index], pairs[1::2].tolist(), self.broker_since[index],
                                 self.record_times[index])


def _starts(counts: list[int], size: int) -> list[int]:
    """Where each of a run of packed items begins, in bytes, given how many of ``size`` bytes each has."""
    starts = [0] * len(counts)
    position = 0
    for number, count in enumerate(counts):
        starts[number] = position
        position += count * size
    return starts


# What a FetchConsumer answers: topic -> its partitions (storage answers TopicSnapshot; any sequence of
# ConsumerPartition does for the evaluator).
ConsumerTopics = dict[str, Sequence[ConsumerPartition]]


class TopicSamples(NamedTuple):
    """A topic's broker offset samples as :class:`TopicSnapshot` holds them (its ``broker``, ``samples`` and
    ``broker_since``), for the partitions of one group's snapshot of it."""

    broker: bytes
    samples: list[int]
    broker_since: list[int | None]


class SamplesMoved(dict[str, TopicSamples]):
    """FetchConsumerIfChanged's partitions when nothing but broker offset samples moved since the ``known``
    version: only the samples of the topics whose samples moved (the newest broker offsets, commits, owners and
    record timestamps are those of the known version's answer), topic -> :class:`TopicSamples`."""

    __slots__ = ()


# --- storage requests ------------------------------------------------------------------------------
# Set requests have no reply. Fetch requests carry a future that storage resolves once, with None when
# the cluster (or group/topic) is unknown; callers map None to 404.


@dataclass(slots=True)
class SetBrokerOffset:
    cluster: str
    topic: str
    partition: int
    partition_count: int
    offset: int
    timestamp: int  # ms


@dataclass(slots=True)
class SetBrokerOffsets:
    """The latest offsets of partitions of one topic read at one time (from one ListOffsets answer): means
    what a :class:`SetBrokerOffset` per partition, in this order, means. The cluster module's refresh hands a
    topic over in a few such requests instead of one per partition; storage takes each in one step. A
    ``partition_count`` of None is a topic the metadata does not list: each partition then counts as the
    topic's last (its count is ``partition + 1``), as Burrow does."""

    cluster: str
    topic: str
    partition_count: int | None
    partitions: list[int]
    offsets: list[int]  # by index, as partitions
    timestamp: int  # ms

    def __len__(self) -> int:
        return len(self.partitions)

    def one(self, index: int) -> SetBrokerOffset:
        """The request of one of the partitions, by index."""
        partition = self.partitions[index]
        count = partition + 1 if self.partition_count is None else self.partition_count
        return SetBrokerOffset(self.cluster, self.topic, partition, count, self.offsets[index], self.timestamp)

    def each(self) -> Iterator[SetBrokerOffset]:
        return (self.one(index) for index in range(len(self.partitions)))


@dataclass(slots=True)
class SetConsumerOffset:
    cluster: str
    group: str
    topic: str
    partition: int
    offset: int
    order: int
    timestamp: int  # commit time, ms


# A run of commits (SetConsumerOffsets) keeps each commit as RUN_STRIDE ints in one list, in this order:
# partition, offset, order, timestamp.
RUN_STRIDE = 4


@dataclass(slots=True)
class SetConsumerOffsets:
    """Commits of one group to one topic, in the order they were read: what ``__consumer_offsets`` holds
    for one OffsetCommit, whose commits lie together in the log. Storage takes such a run with one lookup
    of the group and topic instead of one per commit; each commit means what a :class:`SetConsumerOffset`
    with the same fields means."""

    cluster: str
    group: str
    topic: str
    commits: list[int]  # RUN_STRIDE ints per commit: partition, offset, order, timestamp (ms)

    def __len__(self) -> int:
        return len(self.commits) // RUN_STRIDE

    def each(self) -> Iterator[tuple[int, int, int, int]]:
        """(partition, offset, order, timestamp) of each commit, in order."""
        values = iter(self.commits)
        return zip(values, values, values, values, strict=False)  # a run holds whole commits only

    def commit(self, index: int) -> SetConsumerOffset:
        """The run's ``index``-th commit as a request of its own."""
        at = index * RUN_STRIDE
        partition, offset, order, timestamp = self.commits[at:at + RUN_STRIDE]
        return SetConsumerOffset(self.cluster, self.group, self.topic, partition, offset, order, timestamp)


def in_runs(requests: Iterable[Any]) -> list[Any]:
    """The requests with each stretch of consecutive commits of one group to one topic joined into a run;
    the inverse of :func:`one_by_one`."""
    joined: list[Any] = []
    for request in requests:
        if type(request) is not SetConsumerOffset:
            joined.append(request)
            continue
        last = joined[-1] if joined else None
        if type(last) is not SetConsumerOffsets or (last.cluster, last.group, last.topic) != (
                request.cluster, request.group, request.topic):
            last = SetConsumerOffsets(request.cluster, request.group, request.topic, [])
            joined.append(last)
        last.commits += (request.partition, request.offset, request.order, request.timestamp)
    return joined


def one_by_one(requests: Iterable[Any]) -> list[Any]:
    """The requests with every run of commits replaced by its commits, one request each."""
    single: list[Any] = []
    for request in requests:
        if type(request) is SetConsumerOffsets:
            single.extend(SetConsumerOffset(request.cluster, request.group, request.topic, *commit)
                          for commit in request.each())
        else:
            single.append(request)
    return single


@dataclass(slots=True)
class SetConsumerOwner:
    cluster: str
    group: str
    topic: str
    partition: int
    owner: str
    client_id: str


@dataclass(slots=True)
class SetDeleteTopic:
    cluster: str
    topic: str


@dataclass(slots=True)
class SetDeleteGroup:
    cluster: str
    group: str
    topic: str | None = None


@dataclass(slots=True)
class SetDeletePartitionOffsets:
    """An offset tombstone on ``__consumer_offsets``: forget that partition's commits (Burrow ignores these)."""

    cluster: str
    group: str
    topic: str
    partition: int


@dataclass(slots=True)
class ClearConsumerOwners:
    cluster: str
    group: str


@dataclass(slots=True)
class FetchClusters:
    reply: asyncio.Future


@dataclass(slots=True)
class FetchConsumers:
    cluster: str
    reply: asyncio.Future


@dataclass(slots=True)
class FetchTopics:
    cluster: str
    reply: asyncio.Future


@dataclass(slots=True)
class FetchTopic:
    cluster: str
    topic: str
    reply: asyncio.Future


@dataclass(slots=True)
class FetchTopicRates:
    """Not Burrow's: each partition's produce rate over the window (records/s, None without one yet)."""

    cluster: str
    topic: str
    reply: asyncio.Future


@dataclass(slots=True)
class FetchConsumer:
    cluster: str
    group: str
    reply: asyncio.Future


@dataclass(slots=True)
class FetchConsumerIfChanged:
    """FetchConsumer for an evaluator that keeps what it made of an earlier answer: the reply is None for an
    unknown group, else (version, partitions), the partitions None (not copied) when the version is still
    ``known`` (an earlier reply's version; None the first time), and a :class:`SamplesMoved` (only the samples
    that moved) when nothing else did since ``known``."""

    cluster: str
    group: str
    known: Any
    reply: asyncio.Future


@dataclass(slots=True)
class FetchConsumersIfChanged:
    """FetchConsumerIfChanged of many groups of one cluster in one request (the trend sampler's rounds): the reply
    is the list of each group's answer, in the order of ``groups``, each given the version in ``known`` at the same
    index. Storage answers each group on the worker of that group, after every request about it submitted before,
    as it answers FetchConsumerIfChanged."""

    cluster: str
    groups: list[str]
    known: list[Any]
    reply: asyncio.Future


@dataclass(slots=True)
class FetchConsumersForTopic:
    cluster: str
    topic: str
    reply: asyncio.Future


@dataclass(slots=True)
class FetchRecordTimeWants:
    """Which (topic, partition, offset) records' timestamps a cluster module should read for lag in seconds.

    Answered with a list of those triples: the newest committed offset of every group partition that is
    behind its broker offset and whose record timestamp is not known yet.
    """

    cluster: str
    reply: asyncio.Future


@dataclass(slots=True)
class SetRecordTimes:
    """Record timestamps a cluster module read: (topic, partition, offset, timestamp ms or None if gone)."""

    cluster: str
    times: list[tuple[str, int, int, int | None]]


# The requests about one group, which storage handles in the order they were submitted.
GROUP_SCOPED_REQUESTS = (SetConsumerOffset, SetConsumerOffsets, SetConsumerOwner, SetDeleteGroup,
                         SetDeletePartitionOffsets, ClearConsumerOwners, FetchConsumer, FetchConsumerIfChanged)


@dataclass(slots=True)
class EvaluatorRequest:
    cluster: str
    group: str
    showall: bool
    reply: asyncio.Future
