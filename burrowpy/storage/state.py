"""The in-memory storage's data and the rules for changing and reading it (burrow-spec 3.3-3.7).

Pure and synchronous: every method takes the current time when it needs it and returns either a
result or, for changes, ``None`` on success and a short reason when the request was dropped (the
module logs it). :class:`~burrowpy.storage.inmemory.InMemoryStorage` runs this behind its asyncio
workers; the Spark pipeline can replay history through it in-process.

Differences from Burrow, on purpose:
- an owner message creates the partition entry but no commit ring, so a partition without commits
  always shows ``offsets: []`` and complete 0 (Burrow shows ``intervals`` nulls and complete 1/len);
- requests that would crash Burrow (a broker offset for a partition beyond the partition count, a
  consumer partition the broker no longer reports) are dropped or answered without broker data;
- a group known only from its owners (a consumer joined but has not committed yet) lives for
  ``expire-group`` after its last owner update; Burrow deletes it, owners included, on the first fetch,
  so a /metrics scrape between a join and the first commit wiped the owners until the next rebalance;
- offset tombstones (:class:`SetDeletePartitionOffsets`) forget that partition's commits, then the
  topic if none of its partitions has commits left, then the group if it has no topics left, so groups
  deleted from Kafka disappear here too (Burrow issue #818).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any

from burrowpy.protocol import (
    COMMIT_STRIDE,
    ClearConsumerOwners,
    ConsumerTopics,
    SamplesMoved,
    SetBrokerOffset,
    SetBrokerOffsets,
    SetConsumerOffset,
    SetConsumerOffsets,
    SetConsumerOwner,
    SetDeleteGroup,
    SetDeletePartitionOffsets,
    SetDeleteTopic,
    SetRecordTimes,
    TopicSamples,
    TopicSnapshot,
)
from burrowpy.storage.ring import BrokerRing, CommitOutcome, CommitRing

_APPENDED = CommitOutcome.APPENDED  # a plain constant: Enum member lookups cost on the per-commit path


class _Numbers:
    """The version numbers: every change takes the next, never used before; ``last`` is the latest taken, so a
    ``last`` that has not moved means that nothing changed anywhere since."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last = 0

    def __iter__(self) -> _Numbers:
        return self

    def __next__(self) -> int:
        self.last += 1
        return self.last


# Every change to a group or to a topic's broker offsets or record times takes the next number, so equal numbers
# mean unchanged data (see StorageState.consumer_if_changed).
_VERSIONS = _Numbers()
_DUPLICATE = "duplicate, or older than everything in a full window"


class PartitionEntry:
    """One partition of one group: its commits (None until the first one) and current owner."""

    __slots__ = ("ring", "owner", "client_id")

    def __init__(self) -> None:
        self.ring: CommitRing | None = None
        self.owner = ""
        self.client_id = ""


class GroupEntry:
    __slots__ = ("topics", "last_commit", "last_owner_update", "version", "caught_up", "checked")

    def __init__(self) -> None:
        self.topics: dict[str, list[PartitionEntry]] = {}
        self.last_commit = 0  # timestamp (ms) of the latest appended commit
        self.last_owner_update = 0  # when owners were last set (ms); with last_commit, drives expiry
        self.version = next(_VERSIONS)  # a new number on every change of its commits, owners or topics
        # (version, {topic: (the topic's newest-offsets version, whether every partition has caught up)}):
        # the answer holds while neither number changes (StorageState._group_version).
        self.caught_up: tuple[int, dict[str, tuple[int, bool]]] = (0, {})
        # (_VERSIONS.last, the group's version then): the version holds while no number has been taken since.
        self.checked: tuple[int, list[Any]] = (-1, [])


class TopicVersions:
    """The numbers a topic's broker data takes on each change (from ``_VERSIONS``)."""

    __slots__ = ("samples", "newest", "record_times", "copied")

    def __init__(self) -> None:
        self.samples = next(_VERSIONS)  # any broker offset sample added
        self.newest = self.samples  # some partition's newest broker offset changed, or the partition count
        self.record_times = 0  # the record timestamps kept for the topic's partitions
        # (samples version, partitions, the copy) of the last TopicSamples made (StorageState._topic_samples):
        # the groups consuming one topic share one copy of its samples per refresh.
        self.copied: tuple[int, int, TopicSamples] | None = None


# What a walk's check of which topics changed (WantsWalk.changed_topics) goes through between two steps: topics
# or groups (a check costs ~1 us; a fleet of 2,000 groups has as many topics).
_CHECKS_PER_STEP = 256


class WantsWalk:
    """What :meth:`StorageState.record_time_wants` found at its last call, and the inputs it was found from.

    A topic's wants and known timestamps depend on its newest broker offsets (``TopicVersions.newest``), the
    timestamps given for it (``touched``) and the commits of the groups that consume it (a group's ``version``
    and topics): a topic none of these moved for is not gone through again.
    """

    __slots__ = ("topics", "groups", "wanted", "touched")

    def __init__(self) -> None:
        self.topics: dict[str, int] = {}  # the newest broker offsets' version at the last walk
        self.groups: dict[str, tuple[int, tuple[str, ...]]] = {}  # (version, topics) at the last walk
        self.wanted: dict[str, set[tuple[str, int, int]]] = {}  # by topic, only topics that want something
        self.touched: set[str] = set()  # topics given record timestamps since the last walk

    def changed_topics(self, cluster: ClusterEntry, touched: set[str]) -> Generator[None, None, set[str]]:
        """The topics whose inputs moved since they were last checked (``touched``: those given timestamps), in
        steps of ``_CHECKS_PER_STEP`` topics or groups; each input is recorded as it is checked, so one that moves
        after its check (between steps, or while the walk goes on) is found moved by the next walk."""
        # A topic deleted is also left by every group that had it, which the groups' versions tell.
        dirty = set(touched)
        seen_topics, seen_groups, groups = self.topics, self.groups, cluster.groups
        checked = 0
        for topic, versions in list(cluster.versions.items()):
            if seen_topics.get(topic) != versions.newest:
                dirty.add(topic)
                seen_topics[topic] = versions.newest
            checked += 1
            if not checked % _CHECKS_PER_STEP:
                yield
        for topic in [topic for topic in seen_topics if topic not in cluster.versions]:
            del seen_topics[topic]
        for name in list(seen_groups):
            if name not in groups:
                dirty.update(seen_groups.pop(name)[1])
            checked += 1
            if not checked % _CHECKS_PER_STEP:
                yield
        for name, group in list(groups.items()):
            seen = seen_groups.get(name)
            if seen is None or seen[0] != group.version:
                if seen is not None:
                    dirty.update(seen[1])  # the topics it had (it may have left one)
                dirty.update(group.topics)
                seen_groups[name] = (group.version, tuple(group.topics))
            checked += 1
            if not checked % _CHECKS_PER_STEP:
                yield
        return dirty

    def forget(self) -> None:
        """Forget what was checked: the next walk goes through every topic (a walk given up halfway)."""
        self.topics, self.groups = {}, {}

    def walked(self, wanted: dict[str, set[tuple[str, int, int]]]) -> None:
        for topic, wants in wanted.items():
            if wants:
                self.wanted[topic] = wants
            else:
                self.wanted.pop(topic, None)


class ClusterEntry:
    __slots__ = ("brokers", "groups", "record_times", "versions", "wants")

    def __init__(self) -> None:
        self.brokers: dict[str, list[BrokerRing]] = {}
        self.versions: dict[str, TopicVersions] = {}  # by topic, for each topic in brokers
        self.groups: dict[str, GroupEntry] = {}
        # (topic, partition) -> {offset: timestamp ms of the record there, None when it is gone}: the
        # records at groups' committed offsets, for lag in seconds. Only offsets some group sits at are kept.
        self.record_times: dict[tuple[str, int], dict[int, int | None]] = {}
        self.wants = WantsWalk()


class StorageState:
    """Broker offset history and consumer commits of a fixed set of clusters."""

    def __init__(self, clusters: Iterable[str], intervals: int = 10, expire_group_s: int = 604800,
                 min_distance_s: int = 0, accept_group: Callable[[str], bool] | None = None) -> None:
        self.intervals = intervals
        self.expire_group_s = expire_group_s
        self.min_distance_ms = min_distance_s * 1000
        self.accept_group = accept_group or (lambda group: True)
        self._filters_groups = accept_group is not None  # spares the per-commit call when nothing is filtered
        self.clusters: dict[str, ClusterEntry] = {name: ClusterEntry() for name in clusters}
        # Every commit stored within one second shares one observed-at int: 32 bytes per ring slot.
        self._observed = (-1, 0)

    # --- broker offsets ------------------------------------------------------------------------------

    def add_broker_offset(self, request: SetBrokerOffset) -> str | None:
        cluster = self.clusters.get(request.cluster)
        if cluster is None:
            return "unknown cluster"
        if request.partition < 0:
            return "negative partition"
        rings = cluster.brokers.get(request.topic)
        known = len(rings) if rings is not None else 0
        if request.partition >= max(known, request.partition_count):
            return "partition beyond the topic's partition count"
        if rings is None:
            rings = cluster.brokers[request.topic] = []
            cluster.versions[request.topic] = TopicVersions()
        versions = cluster.versions[request.topic]
        ring = rings[request.partition] if request.partition < len(rings) else None
        if ring is None or ring.newest() != request.offset or len(rings) < request.partition_count:
            versions.newest = next(_VERSIONS)
        while len(rings) < request.partition_count:
            rings.append(BrokerRing(self.intervals))
        rings[request.partition].add(request.offset, request.timestamp)
        versions.samples = next(_VERSIONS)
        return None

    def add_broker_offsets(self, request: SetBrokerOffsets) -> list[tuple[int, str]]:
        """:meth:`add_broker_offset` of each partition of the request, in order, with the topic's lookups done
        once; the (index, reason) of each partition dropped. The topic's versions take one new number each
        (only their equality is ever compared), not one per partition."""
        cluster = self.clusters.get(request.cluster)
        if cluster is None:
            return [(index, "unknown cluster") for index in range(len(request.partitions))]
        dropped: list[tuple[int, str]] = []
        given = request.partition_count
        count = -1 if given is None else given
        timestamp = request.timestamp
        rings = cluster.brokers.get(request.topic)
        partitions = request.partitions
        if (rings is not None and given is not None and len(rings) >= given and partitions
                and min(partitions) >= 0 and max(partitions) < len(rings)):
            # Every refresh but a topic's first and its growth: a known topic, each partition one it has. What the
            # loop below does then, without its tests of each partition: none is dropped and no ring is added.
            newest_moved = False
            for partition, offset in zip(partitions, request.offsets, strict=True):
                if rings[partition].add_moved(offset, timestamp):
                    newest_moved = True
            versions = cluster.versions[request.topic]
            if newest_moved:
                versions.newest = next(_VERSIONS)
            versions.samples = next(_VERSIONS)
            return dropped
        newest_moved = added = False
        for index, (partition, offset) in enumerate(zip(request.partitions, request.offsets, strict=True)):
            if partition < 0:
                dropped.append((index, "negative partition"))
                continue
            if given is None:  # a topic the metadata does not list: the partition counts as its last
                count = partition + 1
            known = len(rings) if rings is not None else 0
            if partition >= (known if known > count else count):
                dropped.append((index, "partition beyond the topic's partition count"))
                continue
            if rings is None:
                rings = cluster.brokers[request.topic] = []
                cluster.versions[request.topic] = TopicVersions()
            if partition < len(rings):
                ring = rings[partition]
                if not newest_moved and (ring.newest() != offset or len(rings) < count):
                    newest_moved = True
            else:
                newest_moved = True
            while len(rings) < count:
                rings.append(BrokerRing(self.intervals))
            rings[partition].add(offset, timestamp)
            added = True
        if added:
            versions = cluster.versions[request.topic]
            if newest_moved:
                versions.newest = next(_VERSIONS)
            versions.samples = next(_VERSIONS)
        return dropped

    # --- record timestamps (lag in seconds) -------------------------------------------------------------

    def record_time_wants(self, cluster_name: str) -> list[tuple[str, int, int]] | None:
        """The committed offsets whose record timestamp is wanted (behind the broker, not known yet).

        Known timestamps no group sits at any more are forgotten on the way, which bounds the cache by
        the number of group partitions. Only the topics whose inputs changed since the last call are gone
        through again (:class:`WantsWalk`): the others' wants and known timestamps are still what they were.
        """
        steps = self.record_time_wants_in_steps(cluster_name)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]

    def record_time_wants_in_steps(self, cluster_name: str) -> Generator[None, None,
                                                                            list[tuple[str, int, int]] | None]:
        """:meth:`record_time_wants` one group at a time: a step after each group gone through, the answer the
        generator's value. Other requests may be handled between steps (storage's workers do, a walk of a
        fleet under ingest being tens of ms): the walk goes through the groups there were at its start, as they
        are when reached, and what changes meanwhile (commits, broker offsets, timestamps given) makes the
        topics it touches go through the next walk again, so that walk's answer is a whole walk's."""
        cluster = self.clusters.get(cluster_name)
        if cluster is None:
            return None
        walk = cluster.wants
        touched, walk.touched = walk.touched, set()  # given from now on: for the next walk
        finished = False
        try:
            dirty = yield from walk.changed_topics(cluster, touched)
            if dirty:
                wanted: dict[str, set[tuple[str, int, int]]] = {topic: set() for topic in dirty}
                kept: dict[tuple[str, int], dict[int, int | None]] = {}
                known = cluster.record_times
                for group in list(cluster.groups.values()):
                    yield
                    self._group_wants(cluster, group, dirty, known, wanted, kept)
                yield
                known = cluster.record_times  # (the same dict unless another walk ended meanwhile)
                for topic in {key[0] for key, times in known.items() if key[0] in dirty and kept.get(key) != times}:
                    self._record_times_changed(cluster, topic)
                kept.update((key, times) for key, times in known.items() if key[0] not in dirty)
                cluster.record_times = kept
                walk.walked(wanted)
            finished = True
        finally:
            if not finished:  # given up halfway: what it checked is not gone through yet
                walk.forget()
                walk.touched |= touched
        return sorted(want for wants in walk.wanted.values() for want in wants)

    @staticmethod
    def _group_wants(cluster: ClusterEntry, group: GroupEntry, dirty: set[str],
                     known: dict[tuple[str, int], dict[int, int | None]],
                     wanted: dict[str, set[tuple[str, int, int]]],
                     kept: dict[tuple[str, int], dict[int, int | None]]) -> None:
        """One group's part of a walk (record_time_wants_in_steps)."""
        for topic, entries in group.topics.items():
            if topic not in dirty:
                continue
            rings = cluster.brokers.get(topic)
            if rings is None:
                continue
            for partition, entry in enumerate(entries):
                committed = entry.ring.newest_offset() if entry.ring is not None else None
                if committed is None or partition >= len(rings):
                    continue
                broker_offset = rings[partition].newest()
                if broker_offset is None or committed >= broker_offset:
                    continue
                times = known.get((topic, partition))
                if times is not None and committed in times:
                    kept.setdefault((topic, partition), {})[committed] = times[committed]
                else:
                    wanted[topic].add((topic, partition, committed))

    @staticmethod
    def _record_times_changed(cluster: ClusterEntry, topic: str) -> None:
        versions = cluster.versions.get(topic)
        if versions is not None:
            versions.record_times = next(_VERSIONS)

    def set_record_times(self, request: SetRecordTimes) -> str | None:
        cluster = self.clusters.get(request.cluster)
        if cluster is None:
            return "unknown cluster"
        for topic, partition, offset, timestamp in request.times:
            cluster.record_times.setdefault((topic, partition), {})[offset] = timestamp
        for topic in {topic for topic, *_ in request.times}:
            self._record_times_changed(cluster, topic)
            cluster.wants.touched.add(topic)
        return None

    def _broker_position(self, cluster: ClusterEntry, topic: str, partition: int) -> tuple[int, int] | str:
        """(newest broker offset, partition count), or why a consumer request must be dropped."""
        rings = cluster.brokers.get(topic)
        if rings is None:
            return "no broker data for the topic"
        if partition < 0:
            return "negative partition"
        if partition >= len(rings):
            return "partition unknown to the brokers"
        newest = rings[partition].newest()
        if newest is None:
            return "no broker offset for the partition yet"
        return newest, len(rings)

    def _drop_reason(self, cluster: ClusterEntry, topic: str, partition: int) -> str:
        """Why a commit to a partition without a newest broker offset is dropped."""
        reason = self._broker_position(cluster, topic, partition)
        assert isinstance(reason, str)  # without a newest offset there is no position
        return reason

    # --- consumer groups -----------------------------------------------------------------------------

    def _partition_entry(self, group: GroupEntry, topic: str, partition: int, count: int) -> PartitionEntry:
        """The group's entry for a partition, extending the topic's list up to the partition count."""
        entries = group.topics.get(topic)
        if entries is None:
            entries = group.topics[topic] = []
        if partition >= len(entries):
            # Every partition the brokers know gets an entry, so uncommitted partitions show up and
            # lower the group's completeness.
            entries.extend(PartitionEntry() for _ in range(len(entries), count))
        return entries[partition]

    def add_consumer_offset(self, request: SetConsumerOffset, now_s: int) -> str | None:
        """Store one commit (from ZooKeeper, or the reader's own position): None, or why it was dropped.
        :meth:`add_consumer_offsets` does the same for many; this one is written out for a single commit,
        which a run of one would take twice as long over."""
        cluster = self.clusters.get(request.cluster)
        if cluster is None:
            return "unknown cluster"
        timestamp = request.timestamp
        if timestamp < (now_s - self.expire_group_s) * 1000:
            return "old offset"
        group_name = request.group
        if self._filters_groups and not self.accept_group(group_name):
            return "group not accepted by the allow/deny lists"
        topic = request.topic
        partition = request.partition
        rings = cluster.brokers.get(topic)
        if rings is None or not 0 <= partition < len(rings) or (broker_offset := rings[partition].newest()) is None:
            return self._drop_reason(cluster, topic, partition)
        group = cluster.groups.get(group_name)
        if group is None:
            group = cluster.groups[group_name] = GroupEntry()
        entries = group.topics.get(topic)
        entry = (entries[partition] if entries is not None and partition < len(entries)
                 else self._partition_entry(group, topic, partition, len(rings)))
        ring = entry.ring
        if ring is None:
            ring = entry.ring = CommitRing(self.intervals)
        outcome = ring.add(request.offset, request.order, timestamp, self._observed_ms(now_s), broker_offset,
                           self.min_distance_ms)
        if outcome is _APPENDED:
            group.last_commit = timestamp
        elif not outcome:
            return _DUPLICATE
        group.version = next(_VERSIONS)
        return None

    def _observed_ms(self, now_s: int) -> int:
        """``now_s`` in ms, as the one int object every commit stored within that second shares."""
        observed = self._observed
        if observed[0] != now_s:
            observed = self._observed = (now_s, now_s * 1000)
        return observed[1]

    def add_consumer_offsets(self, run: SetConsumerOffsets, now_s: int) -> list[tuple[int, str]]:
        """Store a run of commits of one group to one topic, in order: the (index, reason) of each commit
        dropped, none when all were stored. Each commit is judged as :meth:`add_consumer_offset` judges one.

        Every commit read from ``__consumer_offsets`` comes through here, so the cluster, group, topic and
        broker history are looked up once per run and the loop over its commits is written out.
        """
        cluster = self.clusters.get(run.cluster)
        if cluster is None:
            return [(index, "unknown cluster") for index in range(len(run))]
        dropped: list[tuple[int, str]] = []
        oldest_ms = (now_s - self.expire_group_s) * 1000
        group_name = run.group
        topic = run.topic
        accepted = not self._filters_groups or self.accept_group(group_name)
        rings: Sequence[BrokerRing] = cluster.brokers.get(topic) or ()
        broker_count = len(rings)
        group = cluster.groups.get(group_name)
        entries = group.topics.get(topic) if group is not None else None
        observed_ms = self._observed_ms(now_s)
        intervals, min_distance_ms = self.intervals, self.min_distance_ms
        for index, (partition, offset, order, timestamp) in enumerate(run.each()):
            if timestamp < oldest_ms:
                dropped.append((index, "old offset"))
                continue
            if not accepted:
                dropped.append((index, "group not accepted by the allow/deny lists"))
                continue
            broker_offset = rings[partition].newest() if 0 <= partition < broker_count else None
            if broker_offset is None:
                dropped.append((index, self._drop_reason(cluster, topic, partition)))
                continue
            # group is None only while entries is: testing both lets the checker see group set below
            if entries is None or group is None or partition >= len(entries):
                if group is None:
                    group = cluster.groups[group_name] = GroupEntry()
                entry = self._partition_entry(group, topic, partition, broker_count)
                entries = group.topics[topic]
            else:
                entry = entries[partition]
            ring = entry.ring
            if ring is None:
                ring = entry.ring = CommitRing(intervals)
            outcome = ring.add(offset, order, timestamp, observed_ms, broker_offset, min_distance_ms)
            if outcome is _APPENDED:
                group.last_commit = timestamp
            elif not outcome:
                dropped.append((index, _DUPLICATE))
        if group is not None and len(dropped) < len(run):  # every commit not dropped was stored
            group.version = next(_VERSIONS)
        return dropped

    def add_consumer_owner(self, request: SetConsumerOwner, now_s: int) -> str | None:
        cluster = self.clusters.get(request.cluster)
        if cluster is None:
            return "unknown cluster"
        if not self.accept_group(request.group):
            return "group not accepted by the allow/deny lists"
        # Like Burrow, the group exists from its first owner message on, even without commits; unlike
        # Burrow, owner updates keep it alive (see the module docstring).
        group = cluster.groups.get(request.group)
        if group is None:
            group = cluster.groups[request.group] = GroupEntry()
        group.last_owner_update = now_s * 1000
        position = self._broker_position(cluster, request.topic, request.partition)
        if isinstance(position, str):
            return position
        entry = self._partition_entry(group, request.topic, request.partition, position[1])
        entry.owner = request.owner
        entry.client_id = request.client_id
        group.version = next(_VERSIONS)
        return None

    def clear_consumer_owners(self, request: ClearConsumerOwners) -> str | None:
        cluster = self.clusters.get(request.cluster)
        if cluster is None:
            return "unknown cluster"
        if not self.accept_group(request.group):
            return "group not accepted by the allow/deny lists"
        group = cluster.groups.get(request.group)
        if group is None:
            return "unknown group"
        for entries in group.topics.values():
            for entry in entries:
                entry.owner = ""
                entry.client_id = ""
        group.version = next(_VERSIONS)
        return None

    def delete_topic(self, request: SetDeleteTopic) -> str | None:
        cluster = self.clusters.get(request.cluster)
        if cluster is None:
            return "unknown cluster"
        # Groups left without topics stay (status OK, no partitions) until they expire, as in Burrow.
        for group in cluster.groups.values():
            if group.topics.pop(request.topic, None) is not None:
                group.version = next(_VERSIONS)
        cluster.brokers.pop(request.topic, None)
        cluster.versions.pop(request.topic, None)
        return None

    def delete_group(self, request: SetDeleteGroup) -> str | None:
        cluster = self.clusters.get(request.cluster)
        if cluster is None:
            return "unknown cluster"
        group = cluster.groups.get(request.group)
        if group is not None and request.topic:
            group.topics.pop(request.topic, None)
            group.version = next(_VERSIONS)
            if not group.topics:
                del cluster.groups[request.group]
        else:
            cluster.groups.pop(request.group, None)
        return None

    def delete_partition_offsets(self, request: SetDeletePartitionOffsets) -> str | None:
        cluster = self.clusters.get(request.cluster)
        if cluster is None:
            return "unknown cluster"
        group = cluster.groups.get(request.group)
        entries = group.topics.get(request.topic) if group is not None else None
        if group is None or entries is None or not 0 <= request.partition < len(entries):
            return "no commits stored for the partition"
        entries[request.partition].ring = None
        group.version = next(_VERSIONS)
        if all(entry.ring is None for entry in entries):
            del group.topics[request.topic]
            if not group.topics:
                del cluster.groups[request.group]
        return None

    # --- fetches: None means an unknown cluster (or topic/group where it applies) -------------------

    def cluster_names(self) -> list[str]:
        return sorted(self.clusters)

    def consumer_names(self, cluster_name: str) -> list[str] | None:
        cluster = self.clusters.get(cluster_name)
        return None if cluster is None else sorted(cluster.groups)

    def topic_names(self, cluster_name: str) -> list[str] | None:
        cluster = self.clusters.get(cluster_name)
        return None if cluster is None else sorted(cluster.brokers)

    def topic_offsets(self, cluster_name: str, topic: str) -> list[int] | None:
        """The newest broker offset of each partition that has one (so indexes shift past gaps)."""
        cluster = self.clusters.get(cluster_name)
        rings = cluster.brokers.get(topic) if cluster is not None else None
        if rings is None:
            return None
        return [newest for newest in (ring.newest() for ring in rings) if newest is not None]

    def topic_rates(self, cluster_name: str, topic: str) -> list[float | None] | None:
        """Each partition's produce rate over its window, by partition index."""
        cluster = self.clusters.get(cluster_name)
        rings = cluster.brokers.get(topic) if cluster is not None else None
        return None if rings is None else [ring.rate() for ring in rings]

    def consumers_of_topic(self, cluster_name: str, topic: str) -> list[str] | None:
        cluster = self.clusters.get(cluster_name)
        if cluster is None:
            return None
        return sorted(name for name, group in cluster.groups.items() if topic in group.topics)

    def consumer(self, cluster_name: str, group_name: str, now_s: int) -> ConsumerTopics | None:
        """A group's partitions with broker history and current lag; an expired group is purged."""
        cluster = self.clusters.get(cluster_name)
        group = self._live_group(cluster, group_name, now_s)
        return None if cluster is None or group is None else self._consumer_topics(cluster, group)

    def consumer_if_changed(self, cluster_name: str, group_name: str, now_s: int,
                            known: Any) -> tuple[Any, ConsumerTopics | SamplesMoved | None] | None:
        """:meth:`consumer` for a caller that may have evaluated the group before: (the version of everything
        an evaluation of the group reads, its partitions), and no partitions (nothing copied) when that
        version is ``known``, the one of an earlier answer. None for an unknown or expired group.

        The version of a topic whose every partition has caught up (or has no commit) is that of its newest
        broker offsets alone: such partitions are OK, with no lag, lag in seconds 0 and caught up, whatever
        the older samples and the record timestamps; so an idle fleet's evaluations stay valid across the
        broker offset refreshes that change nothing but the samples' times.

        The version of any other topic is (its newest broker offsets' version, its record timestamps', its
        samples'). When the samples are all that moved since ``known`` (a refresh that found the same newest
        offsets: commits, owners, newest offsets and record timestamps as they were), the answer is only the
        samples of the topics whose samples moved (:class:`~burrowpy.protocol.SamplesMoved`), which with the
        known answer's other columns make the snapshots a whole answer would be.
        """
        cluster = self.clusters.get(cluster_name)
        group = self._live_group(cluster, group_name, now_s)
        if cluster is None or group is None:
            return None
        checked = group.checked
        if checked[0] == _VERSIONS.last:
            # Nothing changed anywhere since the version was made: an idle fleet's sampler round between two
            # refreshes goes through no group's topics.
            version = checked[1]
        else:
            version = self._group_version(cluster, group)
            group.checked = (_VERSIONS.last, version)
        if version == known:
            return version, None
        moved = self._samples_moved(cluster, group, known, version)
        return version, moved if moved is not None else self._consumer_topics(cluster, group)

    def _samples_moved(self, cluster: ClusterEntry, group: GroupEntry, known: Any,
                       version: list[Any]) -> SamplesMoved | None:
        """The samples of the topics whose samples alone moved from ``known`` to ``version``; None when anything
        else moved (or ``known`` is no version of this group's)."""
        if (known.__class__ is not list or len(known) != len(version) or known[0] != version[0]
                or len(version) != len(group.topics) + 1):
            return None
        moved = SamplesMoved()
        for (topic, entries), was, now in zip(group.topics.items(), known[1:], version[1:], strict=True):
            if was == now:
                continue
            # Only a lagging topic's entry is a triple; its first two (newest offsets, record timestamps) held.
            if was.__class__ is not tuple or now.__class__ is not tuple or was[:2] != now[:2]:
                return None
            moved[topic] = self._topic_samples(cluster, topic, len(entries))
        return moved

    @staticmethod
    def _topic_samples(cluster: ClusterEntry, topic: str, count: int) -> TopicSamples:
        """The broker samples of the first ``count`` partitions of ``topic``, as :meth:`_consumer_topics` copies
        them into a group's snapshot; one copy per samples version, shared by the groups that ask."""
        rings = cluster.brokers[topic]
        versions = cluster.versions[topic]
        copied = versions.copied
        if copied is not None and copied[0] == versions.samples and copied[1] == count:
            return copied[2]
        used = rings[:count]
        missing = count - len(used)
        samples = TopicSamples(b"".join([ring.packed for ring in used]),
                               [len(ring.packed) >> 1 for ring in used] + [0] * missing,
                               [ring.since for ring in used] + [None] * missing)
        versions.copied = (versions.samples, count, samples)
        return samples

    def _live_group(self, cluster: ClusterEntry | None, group_name: str, now_s: int) -> GroupEntry | None:
        """The group, unless it is unknown or expired (then purged)."""
        group = cluster.groups.get(group_name) if cluster is not None else None
        if cluster is None or group is None:
            return None
        if (now_s - self.expire_group_s) * 1000 > max(group.last_commit, group.last_owner_update):
            del cluster.groups[group_name]
            return None
        return group

    @staticmethod
    def _group_version(cluster: ClusterEntry, group: GroupEntry) -> list[Any]:
        version: list[Any] = [group.version]
        if group.caught_up[0] != group.version:
            group.caught_up = (group.version, {})
        known = group.caught_up[1]
        for topic, entries in group.topics.items():
            rings = cluster.brokers.get(topic)
            versions = cluster.versions.get(topic)
            if rings is None or versions is None:
                version.append(None)
                continue
            seen = known.get(topic)
            if seen is not None and seen[0] == versions.newest:
                caught_up = seen[1]
            else:
                caught_up = True
                # zip ends with the shorter: partitions the brokers do not know have no lag either
                for entry, broker_ring in zip(entries, rings, strict=False):
                    packed = entry.ring.packed if entry.ring is not None else None
                    if packed:
                        pairs = broker_ring.packed
                        if pairs and packed[len(packed) - COMMIT_STRIDE] < pairs[len(pairs) - 2]:
                            caught_up = False
                            break
                known[topic] = (versions.newest, caught_up)
            # Two kinds of entry, which never compare equal: a number, or a triple (_samples_moved reads it).
            version.append(versions.newest if caught_up else (versions.newest, versions.record_times,
                                                                versions.samples))
        return version

    def _consumer_topics(self, cluster: ClusterEntry, group: GroupEntry) -> ConsumerTopics:
        topics: ConsumerTopics = {}
        record_times = cluster.record_times
        for topic in sorted(group.topics):
            rings = cluster.brokers.get(topic) or ()
            broker_count = len(rings)
            entries = group.topics[topic]
            commit_arrays = []
            stored = []
            broker_arrays = []
            samples = []
            sinces = []
            lags = []
            times: list[int | None] = [None] * len(entries)
            # Copies of the live rings, all joined below: nothing a later commit changes is shared.
            for partition_id, entry in enumerate(entries):
                ring = entry.ring
                packed = ring.packed if ring is not None else None
                if packed:
                    commit_arrays.append(packed)
                    stored.append(len(packed) // COMMIT_STRIDE)
                else:
                    stored.append(0)
                current_lag = 0
                if partition_id < broker_count:
                    broker_ring = rings[partition_id]
                    pairs = broker_ring.packed
                    broker_arrays.append(pairs)
                    samples.append(len(pairs) >> 1)
                    sinces.append(broker_ring.since)
                    if packed and pairs:
                        committed = packed[len(packed) - COMMIT_STRIDE]
                        current_lag = pairs[len(pairs) - 2] - committed
                        if current_lag < 0:
                            current_lag = 0
                        if record_times:
                            known = record_times.get((topic, partition_id))
                            if known is not None:
                                times[partition_id] = known.get(committed)
                else:
                    samples.append(0)
                    sinces.append(None)
                lags.append(current_lag)
            topics[topic] = TopicSnapshot(self.intervals, b"".join(commit_arrays), stored, b"".join(broker_arrays),
                                          samples, sinces, lags, [entry.owner for entry in entries],
                                          [entry.client_id for entry in entries], times)
        return topics
