"""Topic and broker health of a cluster, as KMinion reads it: replicas, ISR, leader, low watermark and size
on disk of every partition, and the cluster's counts of under-replicated, under-min-ISR and offline
partitions.

One reading asks any live broker for Metadata (every topic: leader, replicas, ISR, offline replicas, and
the live brokers) and for the topics' ``min.insync.replicas`` (DescribeConfigs), every live broker for the
sizes of the replicas it hosts (DescribeLogDirs), and every leader for its partitions' earliest offsets
(ListOffsets, timestamp -2). A request that fails leaves its figures unknown (None) in that reading and
is logged; the others still count.

The flags follow Kafka's ``kafka-topics --describe`` options: under-replicated when the ISR is smaller than
the replica list, under-min-ISR when there is no leader or the ISR is smaller than the topic's
``min.insync.replicas``, offline (``--unavailable-partitions``) when there is no leader or the leader is not
a live broker.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.protocol.api import ApiKey
from burrowpy.coordinators.codec_request import (
    REQUEST_TIMEOUT_S,
    CodecRequest,
    LaterAnswer,
    MetadataReader,
    MetadataReading,
    answer_digest,
    send_undecoded,
)
from burrowpy.coordinators.list_offsets import (
    LIST_OFFSETS,
    LatestOffsetsAnswer,
    LatestOffsetsRequest,
    answered_topics,
)

TOPIC_RESOURCE = 2  # DescribeConfigs resource type of a topic
MIN_ISR = "min.insync.replicas"
EARLIEST = -2  # ListOffsets timestamp of the log start offset
SLICE = 2000  # partitions gone through between two yields to the event loop
# DescribeLogDirs at version 3 at most (Kafka 4 knows 1 and up): version 4 adds each log dir's total and usable
# bytes, which topic health does not read and which change at every reading (any process's writes to the disk),
# so that no answer would be the last one's (the reading's figures are then made again, a fleet's at rest too).
LOG_DIRS_MAX_VERSION = 3


@dataclass(frozen=True, slots=True)
class PartitionHealth:
    leader: int  # -1 without a leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    low_watermark: int | None = None
    size_bytes: int | None = None  # the leader's replica, else the largest one reported

    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    def under_min_isr(self, min_isr: int | None) -> bool:
        return self.leader < 0 or (min_isr is not None and len(self.isr) < min_isr)

    def offline(self, live_brokers: frozenset[int]) -> bool:
        return self.leader < 0 or self.leader not in live_brokers


@dataclass(frozen=True)
class ClusterHealth:
    """One reading of a cluster's topics."""

    read_at_ms: int
    live_brokers: frozenset[int]
    topics: Mapping[str, Sequence[PartitionHealth]]  # partitions by index
    min_isr: Mapping[str, int] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """The cluster's under-replicated, under-min-ISR and offline partitions."""
        counts = {"under_replicated": 0, "under_min_isr": 0, "offline": 0}
        for topic, partitions in self.topics.items():
            for partition in partitions:
                counts["under_replicated"] += partition.under_replicated()
                counts["under_min_isr"] += partition.under_min_isr(self.min_isr.get(topic))
                counts["offline"] += partition.offline(self.live_brokers)
        return counts

    def topic_json(self, topic: str, high_watermarks: Sequence[int | None],
                   produce_rates: Sequence[float | None]) -> dict[str, Any] | None:
        """The topic's figures for ``GET /v3/kafka/{cluster}/topic/{topic}``; None for a topic not read. The
        high watermarks and produce rates come from the cluster module's offset polls, by partition."""
        partitions = self.topics.get(topic)
        if partitions is None:
            return None
        min_isr = self.min_isr.get(topic)
        rows = []
        for index, partition in enumerate(partitions):
            rows.append({
                "partition": index,
                "leader": partition.leader,
                "replicas": list(partition.replicas),
                "isr": list(partition.isr),
                "offline_replicas": list(partition.offline_replicas),
                "high_watermark": high_watermarks[index] if index < len(high_watermarks) else None,
                "low_watermark": partition.low_watermark,
                "produce_rate": produce_rates[index] if index < len(produce_rates) else None,
                "size_bytes": partition.size_bytes,
                "under_replicated": partition.under_replicated(),
                "under_min_isr": partition.under_min_isr(min_isr),
                "offline": partition.offline(self.live_brokers),
            })
        sizes = [row["size_bytes"] for row in rows]
        rates = [row["produce_rate"] for row in rows]
        return {
            "read_at": self.read_at_ms,
            "min_insync_replicas": min_isr,
            "size_bytes": sum(sizes) if rows and None not in sizes else None,
            "produce_rate": sum(rates) if rows and None not in rates else None,
            "under_replicated": sum(row["under_replicated"] for row in rows),
            "under_min_isr": sum(row["under_min_isr"] for row in rows),
            "offline": sum(row["offline"] for row in rows),
            "partitions": rows,
        }


def _partition_index(partition: dict[str, Any]) -> int:
    return partition["partition_index"]  # type: ignore[no-any-return]


class _Shape:
    """What topic health takes from one Metadata answer (known by its digest): the live brokers, each topic's
    partitions (leader, replicas, ISR and offline replicas, by index; their other figures are another reading's,
    not used) and one earliest-offsets request per leader."""

    __slots__ = ("digest", "earliest", "live", "topics")

    def __init__(self, digest: bytes, live: frozenset[int], topics: Mapping[str, Sequence[PartitionHealth]]) -> None:
        self.digest, self.live, self.topics = digest, live, topics
        by_leader: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        for name, partitions in topics.items():
            for index, partition in enumerate(partitions):
                if partition.leader in live:
                    by_leader[partition.leader][name].append(index)
        self.earliest = {leader: LatestOffsetsRequest(sorted(by_leader[leader].items()), EARLIEST)
                         for leader in sorted(by_leader)}


class TopicHealthReader:
    def __init__(self, client: Any, log: Any, metadata: MetadataReader | None = None) -> None:
        """``metadata``: the cluster's shared Metadata readings (the cluster module's refresh takes them too); a
        reading asks for a new one, or joins one in flight, started at most one request's time before.

        Every reading asks the brokers again, but decodes only what changed: a Metadata answer equal to the last
        one (by :func:`~burrowpy.coordinators.codec_request.answer_digest`) is not decoded again, its partitions
        are the last reading's; and when every answer of a reading equals the last reading's, that reading's
        figures are this one's (a fleet at rest answers the same megabytes every time)."""
        self._client = client
        self._metadata = metadata if metadata is not None else MetadataReader(client)
        self._log = log
        self._told: dict[str, dict[str, int]] = {}  # per-topic errors last logged, by what was asked
        self._shape: _Shape | None = None
        # the digests of the last reading's answers and its figures, when that reading logged no failure
        self._last: tuple[tuple[bytes | None, ...], ClusterHealth] | None = None
        self._failures = 0  # failures logged so far

    def _tell_changed(self, what: str, errors: dict[str, int]) -> None:
        """Log a request's per-topic errors when they differ from the last reading's: a topic the monitor may
        not describe would otherwise be logged at every reading."""
        if errors != self._told.get(what, {}):
            self._told[what] = errors
            if errors:
                self._log.warning(f"{what} failed for some topics", error_codes=errors)
            else:
                self._log.info(f"{what} answers for every topic again")

    async def _shape_of(self, reading: MetadataReading) -> _Shape:
        if self._shape is not None and self._shape.digest == reading.digest:
            return self._shape  # the answer gone through last time, byte for byte
        metadata = await reading.metadata()
        live = frozenset(broker["node_id"] for broker in metadata["brokers"])
        self._tell_changed("Metadata", {topic["name"]: topic["error_code"] for topic in metadata["topics"]
                                        if topic["error_code"]})
        # One tuple of each replica list, ISR and offline list however many partitions share it: a cluster has few
        # distinct ones (a fleet of 50,000 partitions on one broker has one), and two tuples of their own per
        # partition were most of a reading's memory with the rows' dicts (before slots).
        shared: dict[tuple[int, ...], tuple[int, ...]] = {(): ()}
        share = shared.setdefault
        topics: dict[str, list[PartitionHealth]] = {}
        done = 0
        for topic in metadata["topics"]:
            if topic["error_code"]:
                continue
            partitions = topic["partitions"]
            # Brokers list a topic's partitions in order: sorted only when they are not.
            if [partition["partition_index"] for partition in partitions] != list(range(len(partitions))):
                partitions = sorted(partitions, key=_partition_index)
            done += len(partitions)
            if done >= SLICE:  # the loop to others between slices of a fleet's partitions
                done = 0
                await asyncio.sleep(0)
            rows = topics[topic["name"]] = []
            for partition in partitions:
                replicas, isr = tuple(partition["replica_nodes"]), tuple(partition["isr_nodes"])
                offline = tuple(partition.get("offline_replicas") or ())
                rows.append(PartitionHealth(partition["leader_id"], share(replicas, replicas), share(isr, isr),
                                            share(offline, offline)))
        self._shape = _Shape(reading.digest, live, topics)
        return self._shape

    async def read(self, now_ms: int) -> ClusterHealth:
        shape = await self._shape_of(await self._metadata.read())
        live = shape.live
        names = sorted(shape.topics)
        configs, log_dirs, earliest = await asyncio.gather(
            self._ask_min_isr(names, live), self._ask_sizes(live), self._ask_earliest(shape))
        digests = (shape.digest, *(_digest(answer) for answer in (configs, *log_dirs.values(), *earliest.values())))
        last = self._last
        if last is not None and None not in digests and last[0] == digests:
            # every answer as the last reading's, which logged no failure: its figures, read now
            return ClusterHealth(now_ms, live, last[1].topics, last[1].min_isr)
        self._last = None
        failures_before = self._failures
        min_isr, sizes, earliest_offsets = await asyncio.gather(
            self._min_isr(configs), self._sizes(log_dirs), self._earliest(earliest))
        topics: dict[str, list[PartitionHealth]] = {}
        done = 0
        no_sizes: dict[int, dict[int, int]] = {}
        no_earliest: dict[int, int] = {}
        size: int | None
        for name, partitions in shape.topics.items():
            done += len(partitions)
            if done >= SLICE:  # the loop to others between slices of a fleet's partitions
                done = 0
                await asyncio.sleep(0)
            rows = topics[name] = []
            topic_sizes, topic_earliest = sizes.get(name, no_sizes), earliest_offsets.get(name, no_earliest)
            for index, partition in enumerate(partitions):
                leader = partition.leader
                replica_sizes = topic_sizes.get(index)
                if replica_sizes is None:
                    size = None
                else:  # the leader's replica, else the largest one reported
                    size = replica_sizes.get(leader)
                    if size is None:
                        size = max(replica_sizes.values(), default=None)
                low = topic_earliest.get(index)
                if partition.low_watermark == low and partition.size_bytes == size:
                    rows.append(partition)  # (frozen: the last reading's row is this one's)
                else:
                    rows.append(PartitionHealth(leader, partition.replicas, partition.isr, partition.offline_replicas,
                                                low, size))
        health = ClusterHealth(now_ms, live, topics, min_isr)
        if self._shape is shape:
            shape.topics = topics  # this reading's rows: the next reading's with the same figures are them
        if self._failures == failures_before and None not in digests:
            self._last = (digests, health)
        return health

    # --- the requests of a reading (asked), then what their answers say (read) ---------------------------------

    async def _ask_min_isr(self, topics: list[str], live: frozenset[int]) -> LaterAnswer | BaseException | None:
        if not topics or not live:
            return None
        try:
            request = CodecRequest(ApiKey.DESCRIBE_CONFIGS, {
                "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": topic,
                               "configuration_keys": [MIN_ISR]} for topic in topics]})
            return await send_undecoded(self._client, random.choice(sorted(live)), request)
        except Exception as exc:
            return exc

    async def _min_isr(self, asked: LaterAnswer | BaseException | None) -> dict[str, int]:
        if asked is None:
            return {}
        if isinstance(asked, BaseException):
            self._failed("reading min.insync.replicas failed", error=repr(asked))
            return {}
        answer = await asyncio.to_thread(asked.decode)
        found: dict[str, int] = {}
        for result in answer["results"]:
            for config in result["configs"] if not result["error_code"] else ():
                if config["name"] == MIN_ISR and config["value"] is not None:
                    found[result["resource_name"]] = int(config["value"])
        self._tell_changed("DescribeConfigs", {result["resource_name"]: result["error_code"]
                                               for result in answer["results"] if result["error_code"]})
        return found

    async def _ask_sizes(self, live: frozenset[int]) -> dict[int, LaterAnswer | BaseException]:
        nodes = sorted(live)
        answers = await asyncio.gather(*(send_undecoded(self._client, node, CodecRequest(
            ApiKey.DESCRIBE_LOG_DIRS, {"topics": None}, max_version=LOG_DIRS_MAX_VERSION)) for node in nodes),
            return_exceptions=True)
        return dict(zip(nodes, answers, strict=True))

    async def _sizes(self, asked: dict[int, LaterAnswer | BaseException]) -> dict[str, dict[int, dict[int, int]]]:
        """Each partition's replica sizes by broker, by topic and partition index."""
        sizes: dict[str, dict[int, dict[int, int]]] = defaultdict(dict)
        for node, frame in asked.items():
            answer = frame if isinstance(frame, BaseException) else await asyncio.to_thread(frame.decode)
            if isinstance(answer, BaseException) or answer.get("error_code"):
                self._failed("DescribeLogDirs failed", broker=node,
                             error=repr(answer) if isinstance(answer, BaseException) else answer["error_code"])
                continue
            for log_dir in answer["results"]:
                if log_dir["error_code"]:
                    self._failed("log dir unreadable", broker=node, log_dir=log_dir["log_dir"],
                                 error_code=log_dir["error_code"])
                    continue
                done = 0
                for topic in log_dir["topics"]:
                    done += len(topic["partitions"])
                    if done >= SLICE:
                        done = 0
                        await asyncio.sleep(0)
                    topic_sizes = sizes[topic["name"]]
                    for partition in topic["partitions"]:
                        if not partition.get("is_future_key"):  # a move's target copy is not the replica yet
                            index = partition["partition_index"]
                            by_node = topic_sizes.get(index)
                            if by_node is None:
                                topic_sizes[index] = {node: partition["partition_size"]}
                            else:
                                by_node[node] = partition["partition_size"]
        return sizes

    async def _ask_earliest(self, shape: _Shape) -> dict[int, Any]:
        """Each leader's ListOffsets (earliest) answer, or what it failed with."""
        async def ask(leader: int, request: LatestOffsetsRequest) -> Any:
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                return await self._client.send(leader, request)

        leaders = list(shape.earliest)
        answers = await asyncio.gather(*(ask(leader, shape.earliest[leader]) for leader in leaders),
                                       return_exceptions=True)
        return dict(zip(leaders, answers, strict=True))

    async def _earliest(self, asked: dict[int, Any]) -> dict[str, dict[int, int]]:
        # the cluster module's ListOffsets, read a topic at a time (the codec's took a fleet's in one stretch)
        earliest: dict[str, dict[int, int]] = {}
        done = 0
        for leader, answer in asked.items():
            if isinstance(answer, BaseException):
                self._failed("ListOffsets (earliest) failed", broker=leader, error=repr(answer))
                continue
            for topic in answered_topics(answer):
                topic_earliest = earliest.setdefault(topic.topic, {})
                for index, offset in zip(topic.partitions, topic.offsets, strict=True):
                    if offset >= 0:
                        topic_earliest[index] = offset
                done += len(topic.partitions)
                if done >= SLICE:
                    done = 0
                    await asyncio.sleep(0)
        return earliest

    def _failed(self, event: str, **fields: Any) -> None:
        self._failures += 1
        self._log.warning(event, **fields)


def _digest(answer: Any) -> bytes | None:
    """The digest of an answer's frame (ours, or the hand-read ListOffsets'); None for a failure or an answer in
    aiokafka's structs (a broker knowing only ListOffsets version 0), which are not compared."""
    if isinstance(answer, LaterAnswer):
        return answer.digest()
    if isinstance(answer, LatestOffsetsAnswer):
        return answer_digest(LIST_OFFSETS, answer.version, answer.frame)
    return None
