"""The `kafka` consumer module: reads every partition of `__consumer_offsets` and feeds storage.

It reads the whole compacted topic from the oldest offset (or only new records with ``start-latest``;
``backfill-earliest`` then also reads the history up to the starting point once). What each record means
is in :mod:`burrowpy.coordinators.offsets_topic`.

Reading is the monitor's hot path, so this module fetches raw record sets through aiokafka's client
(its connections, TLS and SASL, metadata and protocol classes) and decodes them itself with
:mod:`burrowpy.coordinators.offsets_fastpath` instead of going through aiokafka's consumer and record
objects. Each partition is fetched from its leader, one fetch per leader at a time, and its records are
handed to storage in offset order. Errors that mean stale metadata (a moved leader, an unknown partition,
a lost connection) refresh the metadata and retry the partition after a back-off; an offset out of range
(retention or DeleteRecords moved the log start) starts the partition over from its earliest offset.

Self-reporting differs from Burrow on purpose: Burrow stores a commit for the group ``burrow-NAME`` for
every record it reads, so its window covers only the last few records; we store one per partition per
fetched batch (the position after the batch), so the window spans time and the group's lag is meaningful.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from broker.protocol.api import ApiKey
from burrowpy.config import Section
from burrowpy.context import ApplicationContext
from burrowpy.coordinators.codec_request import (
    CodecRequest,
    NoCommonVersion,
    follow_brokers,
    send_decoded,
    topics_metadata,
)
from burrowpy.coordinators.group_members import ConsumerProtocolMembers
from burrowpy.coordinators.kafka_client import brokers_only_client, client_settings
from burrowpy.coordinators.offsets_fastpath import OffsetsRecordDecoder
from burrowpy.coordinators.offsets_topic import GroupFilter
from burrowpy.protocol import SetConsumerOffset

KEYS = ("class-name", "cluster", "servers", "client-profile", "offsets-topic", "start-latest", "backfill-earliest",
        "group-allowlist", "group-denylist", "group-whitelist", "group-blacklist")

# How long a leader may hold a fetch when nothing new is there. A leader answers as soon as a record arrives (the
# fetch asks for one byte at least), so this bounds only the polls of a quiet topic, one per leader each time: at
# 500 ms (a Java consumer's default) the idle monitor spent 0.06-0.07 s of CPU per 10 s on the polls of four Kafka
# 4.4 leaders at fleet scale, 0.006-0.007 s at 5 s (bench/README.md, "Idle CPU per refresh on Kafka"). A fetch
# is also one request, which the client gives up on after its request timeout: at most half of that.
FETCH_MAX_WAIT_MS = 5000
AIOKAFKA_REQUEST_TIMEOUT_MS = 40_000  # aiokafka's default, when the client profile sets no timeout
# One response. It is held three times over while it is read: aiokafka's stream buffer, the frame taken from it,
# and each partition's records copied out of that; at 16 MiB, reading a fleet's backlog (50,000 partitions) held
# 48 MiB for each leader at once, and what malloc and Python's allocator kept of those transients stayed resident
# (bench/README.md, "The whole monitor's memory at fleet scale"). A leader sends whole record batches, so the
# response is a few batches of the partitions asked; a batch larger than this still comes whole when first.
FETCH_MAX_BYTES = 4 << 20
READ_COMMITTED = 1  # isolation level: records of aborted transactions are flagged by the broker
PARTITION_MAX_BYTES = 1 << 20  # one partition of a response: about 15,000 commits
RETRY_BACKOFF_S = 1.0
# Reading waits while storage has this many requests queued, so a fast read of a large topic holds at most
# about this many decoded requests in memory.
STORAGE_BACKLOG_LIMIT = 2_000
# Requests decoded and handed to storage at a time, about what a storage worker handles in one pass. Storage
# takes each part in before the next is decoded, so requests die young: far less work for the garbage
# collector than a whole fetch's worth alive at once.
HANDOVER_PART = 500
# ListOffsets timestamps
EARLIEST = -2
LATEST = -1
ERROR_NONE = 0
ERROR_OFFSET_OUT_OF_RANGE = 1
START_ATTEMPTS = 10  # ListOffsets rounds start() tries before it gives up on start-latest


def group_filter(section: Section, log: Any) -> GroupFilter:
    """Allow/deny lists, accepting Burrow 1.2's whitelist/blacklist names with a warning."""
    allow = section.get_regex("group-allowlist")
    deny = section.get_regex("group-denylist")
    if section.has("group-whitelist") and allow is None:
        log.warning("group-whitelist is deprecated; use group-allowlist", path=section.path)
        allow = section.get_regex("group-whitelist")
    if section.has("group-blacklist") and deny is None:
        log.warning("group-blacklist is deprecated; use group-denylist", path=section.path)
        deny = section.get_regex("group-blacklist")
    return GroupFilter(allow=allow, deny=deny)


def consumer_basics(name: str, section: Section, ctx: ApplicationContext, keys: tuple[str, ...],
                    class_name: str) -> tuple[str, ApplicationContext, Any, str, list[str]]:
    """What every consumer module starts from: known keys only, its logger, the cluster it feeds (which
    must be a configured cluster module) and its servers."""
    section.check_keys(keys)
    log = ctx.logger.bind(type="module", coordinator="consumer", class_name=class_name, name=name)
    cluster = section.get_str("cluster")
    if cluster not in ctx.config.cluster_names:
        raise section.error("cluster", f"no cluster module named {cluster!r}")
    return name, ctx, log, cluster, section.get_hostports("servers")


@dataclass
class Reading:
    """Where one read of the offsets topic stands (pure bookkeeping, no IO).

    ``positions`` holds the next offset of each partition still being read, EARLIEST until the partition's
    log start is known; ``ends`` (a backfill) the offset where each partition's read stops. A partition is
    in at most one fetch at a time, so its records reach storage in offset order.
    """

    positions: dict[int, int]
    ends: dict[int, int] | None = None
    fetching: set[int] = field(default_factory=set)
    retry_at: dict[int, float] = field(default_factory=dict)  # partition -> loop time before which it waits
    # Bytes asked per partition and fetch. A leader returns a batch larger than this whole only if it is the
    # first of its response, so a partition stuck behind a large batch gets a larger limit until it passes.
    max_bytes: dict[int, int] = field(default_factory=dict)

    def due(self, now: float) -> list[int]:
        """Partitions to fetch now: not in a fetch and not backing off."""
        return [p for p in self.positions if p not in self.fetching and self.retry_at.get(p, 0.0) <= now]

    def next_retry(self) -> float | None:
        waiting = [at for p, at in self.retry_at.items() if p in self.positions and p not in self.fetching]
        return min(waiting) if waiting else None

    def advance(self, partition: int, next_offset: int) -> None:
        """Record where the partition's read goes on; a backfill partition that reached its end is done.

        A partition that moved goes to the end of the order in which the next fetch lists partitions: a
        leader fills a response in that order, so partitions with a backlog take turns instead of the first
        ones starving the others.
        """
        self.retry_at.pop(partition, None)
        if next_offset > self.positions.get(partition, next_offset):
            del self.positions[partition]
            self.positions[partition] = next_offset
        if self.ends is not None and next_offset >= self.ends[partition]:
            self.positions.pop(partition, None)

    def fetch_size(self, partition: int) -> int:
        return self.max_bytes.get(partition, PARTITION_MAX_BYTES)

    def too_small(self, partition: int) -> None:
        """The partition's fetch held only part of a batch: ask for more next time."""
        self.max_bytes[partition] = min(2 * self.fetch_size(partition), max(FETCH_MAX_BYTES, PARTITION_MAX_BYTES))

    def back_off(self, partition: int, now: float) -> None:
        self.retry_at[partition] = now + RETRY_BACKOFF_S

    def restart(self, partition: int) -> None:
        """Read the partition again from its log start (the position fell out of the log)."""
        if partition in self.positions:
            self.positions[partition] = EARLIEST


class KafkaConsumer:
    def __init__(self, name: str, section: Section, ctx: ApplicationContext) -> None:
        self.name, self.ctx, self.log, self.cluster, self.servers = consumer_basics(
            name, section, ctx, KEYS, "kafka")
        self.profile = ctx.config.client_profile(section.get_str("client-profile", ""))
        self.settings = client_settings(self.profile, section)
        self.fetch_max_wait_ms = min(FETCH_MAX_WAIT_MS,
                                     self.settings.get("request_timeout_ms", AIOKAFKA_REQUEST_TIMEOUT_MS) // 2)
        self.offsets_topic = section.get_str("offsets-topic", "__consumer_offsets")
        self.start_latest = section.get_bool("start-latest", False)
        self.backfill_earliest = section.get_bool("backfill-earliest", False)
        self.groups = group_filter(section, self.log)
        self.self_group = f"burrow-{name}"
        self.records_read = 0
        self.records_skipped = 0
        self._decoder = OffsetsRecordDecoder(self.cluster, self.groups)
        self._members = ConsumerProtocolMembers(self.cluster)
        self._topic_ids_asked: set[bytes] = set()
        self._topic_ids: asyncio.Task | None = None
        self._client: Any = None
        self._leaders: dict[int, int] = {}  # the offsets topic's partitions -> their leaders (-1: none)
        self._tasks: list[asyncio.Task] = []
        self._backfill: asyncio.Task | None = None
        self.section = section

    def describe(self) -> dict[str, Any]:
        return {"class-name": "kafka", "cluster": self.cluster, "servers": self.servers,
                "group-allowlist": self.groups.allow.pattern if self.groups.allow else "",
                "zookeeper-path": "", "zookeeper-timeout": 0, "client-profile": self.profile.to_json(),
                "offsets-topic": self.offsets_topic, "start-latest": self.start_latest}

    @property
    def backfilling(self) -> bool:
        """True while a backfill-earliest read of the history before the start is under way."""
        return self._backfill is not None and not self._backfill.done()

    async def start(self) -> None:
        self._client = brokers_only_client(self.servers, self.settings)
        try:
            await self._client.bootstrap()
            partitions = await self._partitions()
            if partitions:
                await self._begin(partitions)
            else:
                # A new cluster creates its offsets topic with the first group; until then there is nothing
                # to read, which is no reason to refuse to start.
                self.log.warning("offsets topic not found yet; waiting for it", topic=self.offsets_topic,
                                 servers=self.servers)
                self._tasks.append(asyncio.create_task(self._wait_for_offsets_topic(),
                                                       name=f"consumer-{self.name}-waiting"))
        except BaseException:
            await self.stop()
            raise

    async def _wait_for_offsets_topic(self) -> None:
        while True:
            await asyncio.sleep(RETRY_BACKOFF_S)
            try:
                partitions = await self._partitions()
            except Exception as error:  # the cluster may be away for a while: keep asking
                self.log.warning("metadata refresh failed", error=repr(error))
                continue
            if partitions:
                await self._begin(partitions)
                return

    async def _begin(self, partitions: list[int]) -> None:
        """Start reading the offsets topic's partitions (from the end with start-latest)."""
        if self.start_latest:
            ends = await self._latest_offsets(partitions)
            main = Reading(positions=ends)
            backfill = {p: end for p, end in ends.items() if end > 0}
            if self.backfill_earliest and backfill:
                self._backfill = asyncio.create_task(
                    self._read(Reading(positions=dict.fromkeys(backfill, EARLIEST), ends=backfill)),
                    name=f"consumer-{self.name}-backfill")
                self._tasks.append(self._backfill)
        else:
            main = Reading(positions=dict.fromkeys(partitions, EARLIEST))
        self._tasks.append(asyncio.create_task(self._read(main), name=f"consumer-{self.name}"))
        self.log.info("started", servers=self.servers, partitions=len(partitions), start_latest=self.start_latest)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()
            self._client = None
        self.log.info("stopped", records_read=self.records_read, records_skipped=self.records_skipped)

    # --- metadata and offsets -------------------------------------------------------------------------

    async def _refresh_metadata(self) -> None:
        """The offsets topic's partitions and leaders, asked for by name (never creating the topic) and decoded off
        the event loop, and the brokers aiokafka connects to, when they changed."""
        answer = await topics_metadata(self._client, [self.offsets_topic])
        self._leaders = {partition["partition_index"]: partition["leader_id"]
                         for topic in answer["topics"] if topic["name"] == self.offsets_topic and topic["error_code"] == 0
                         for partition in topic["partitions"]}
        await follow_brokers(self._client, answer["brokers"])

    async def _partitions(self) -> list[int]:
        await self._refresh_metadata()
        return sorted(self._leaders)

    def _by_leader(self, partitions: list[int]) -> tuple[dict[int, list[int]], list[int]]:
        """The partitions grouped by leader node, and those whose leader is unknown."""
        by_leader: dict[int, list[int]] = defaultdict(list)
        leaderless = []
        for partition in partitions:
            leader = self._leaders.get(partition, -1)
            if leader < 0:
                leaderless.append(partition)
            else:
                by_leader[leader].append(partition)
        return by_leader, leaderless

    async def _list_offsets(self, partitions: list[int], timestamp: int) -> tuple[dict[int, int], list[int]]:
        """ListOffsets (EARLIEST or LATEST) from each partition's leader: (offsets found, partitions failed)."""
        from aiokafka.protocol.offset import OffsetRequest

        by_leader, failed = self._by_leader(partitions)

        async def ask(node: int, wanted: list[int]) -> list[tuple]:
            request = OffsetRequest(-1, 0, [(self.offsets_topic, [(p, timestamp) for p in wanted])])
            response = await self._client.send(node, request)
            return [answer for topic, answers in response.topics if topic == self.offsets_topic
                    for answer in answers]

        found: dict[int, int] = {}
        results = await asyncio.gather(*(ask(node, wanted) for node, wanted in by_leader.items()),
                                       return_exceptions=True)
        for wanted, result in zip(by_leader.values(), results, strict=True):
            if isinstance(result, BaseException):
                self.log.warning("listing offsets failed", error=repr(result), partitions=wanted)
                continue
            for partition, error, *_, offset in result:  # v1+: partition, error, timestamp, offset
                if error == ERROR_NONE and partition in wanted:
                    found[partition] = offset
        failed.extend(p for p in partitions if p not in found and p not in failed)
        return found, failed

    async def _latest_offsets(self, partitions: list[int]) -> dict[int, int]:
        """Every partition's log end, for start-latest; retries on stale metadata, then gives up."""
        ends: dict[int, int] = {}
        missing = partitions
        for _ in range(START_ATTEMPTS):
            found, missing = await self._list_offsets(missing, LATEST)
            ends.update(found)
            if not missing:
                return ends
            await asyncio.sleep(RETRY_BACKOFF_S)
            await self._refresh_metadata()
        raise RuntimeError(f"no latest offset for partitions {missing} of {self.offsets_topic!r}")

    # --- reading --------------------------------------------------------------------------------------

    async def _read(self, reading: Reading) -> None:
        """Fetch until cancelled, or (backfill) until every partition reached its end."""
        loop = asyncio.get_running_loop()
        fetches: dict[asyncio.Task, dict[int, int]] = {}
        stale = False
        try:
            while reading.positions:
                if stale:
                    try:
                        await self._refresh_metadata()
                        stale = False
                    except Exception as exc:
                        self.log.warning("refreshing metadata failed", error=repr(exc))
                due = reading.due(loop.time())
                unresolved = [p for p in due if reading.positions[p] == EARLIEST]
                if unresolved:
                    found, failed = await self._list_offsets(unresolved, EARLIEST)
                    for partition, offset in found.items():
                        reading.advance(partition, offset)
                    for partition in failed:
                        reading.back_off(partition, loop.time())
                    stale = stale or bool(failed)
                    due = reading.due(loop.time())
                by_leader, leaderless = self._by_leader(due)
                for partition in leaderless:
                    reading.back_off(partition, loop.time())
                    stale = True
                for node, partitions in by_leader.items():
                    offsets = {p: reading.positions[p] for p in partitions}
                    reading.fetching.update(offsets)
                    fetches[asyncio.create_task(self._fetch(node, offsets, reading))] = offsets
                retry = reading.next_retry()
                timeout = None if retry is None else max(0.0, retry - loop.time())
                if not fetches:
                    await asyncio.sleep(RETRY_BACKOFF_S if timeout is None else timeout)
                    continue
                done, _ = await asyncio.wait(fetches, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    offsets = fetches.pop(task)
                    reading.fetching.difference_update(offsets)
                    stale = await self._take(reading, offsets, task) or stale
            if reading.ends is not None:
                self.log.info("backfill done", records_read=self.records_read)
        finally:
            for task in fetches:
                task.cancel()
            await asyncio.gather(*fetches, return_exceptions=True)

    async def _fetch(self, node: int, offsets: dict[int, int],
                     reading: Reading) -> list[tuple[int, int, bytes, list[tuple[int, int]] | None]]:
        """One read_committed Fetch from a leader: (partition, error code, raw record set, aborted
        transactions) for each partition. Brokers before Fetch v4 know no transactions (and no isolation)."""
        from aiokafka.protocol.fetch import FetchRequest

        wanted = [(p, offset, reading.fetch_size(p)) for p, offset in offsets.items()]
        request = FetchRequest(self.fetch_max_wait_ms, 1, FETCH_MAX_BYTES, READ_COMMITTED, [(self.offsets_topic, wanted)])
        response = await self._client.send(node, request)
        # Every version's partition entry starts with partition and error code and ends with the records;
        # the aborted transactions come after the high watermark and last stable offset (v4) and the log
        # start offset (v5+).
        version = response.API_VERSION
        aborted_at = None if version < 4 else 4 if version == 4 else 5
        return [(answer[0], answer[1], answer[-1] or b"", answer[aborted_at] if aborted_at else None)
                for topic, answers in response.topics
                if topic == self.offsets_topic for answer in answers if answer[0] in offsets]

    async def _take(self, reading: Reading, offsets: dict[int, int], fetch: asyncio.Task) -> bool:
        """Hand a finished fetch's records to storage; True if the metadata needs a refresh."""
        now = asyncio.get_running_loop().time()
        try:
            answers = fetch.result()
        except Exception as exc:
            self.log.warning("fetching the offsets topic failed; retrying", error=repr(exc), partitions=list(offsets))
            for partition in offsets:
                reading.back_off(partition, now)
            return True
        stale = False
        for partition, error, records, aborted in answers:
            if error == ERROR_OFFSET_OUT_OF_RANGE:
                self.log.info("offset out of range; reading the partition from its earliest offset",
                              partition=partition, offset=offsets[partition])
                reading.restart(partition)
            elif error != ERROR_NONE:
                from aiokafka.errors import for_code

                self.log.warning("fetch error; refreshing metadata", partition=partition, error_code=error,
                                 error=for_code(error).__name__)
                reading.back_off(partition, now)
                stale = True
            elif records:
                await self._hand_over(reading, partition, offsets[partition], records, aborted)
        return stale

    async def _hand_over(self, reading: Reading, partition: int, offset: int, records: bytes,
                         aborted: list[tuple[int, int]] | None = None) -> None:
        """Decode a partition's fetched records and hand them to storage part by part, in offset order,
        without those of ``aborted`` transactions."""
        ends = reading.ends
        parts = self._decoder.decode_parts(records, offset, None if ends is None else ends[partition], HANDOVER_PART,
                                           aborted)
        position = offset
        error = None
        try:
            for part in parts:
                self.ctx.submit_many(part.requests)
                if part.members:
                    self.ctx.submit_many(self._members.apply(part.members))
                    self._resolve_topic_ids()
                self.records_read += part.records
                for record_offset, reason in part.skipped:
                    self.records_skipped += 1
                    self.log.warning("skipped offsets-topic record", partition=partition, offset=record_offset,
                                     reason=reason)
                position = part.next_offset
                await self._wait_for_storage()
        except Exception as exc:  # bytes that cannot be a record set (KafkaError): retried, the log may be repaired
            error = exc
        if position > offset:
            self.ctx.submit(SetConsumerOffset(cluster=self.cluster, group=self.self_group, topic=self.offsets_topic,
                                              partition=partition, offset=position, order=position - 1,
                                              timestamp=int(self.ctx.clock.time() * 1000)))
            reading.advance(partition, position)
        if error is not None:
            self.log.warning("undecodable fetch response; retrying", partition=partition, offset=position,
                             error=repr(error))
            reading.back_off(partition, asyncio.get_running_loop().time())
        elif position == offset:
            reading.too_small(partition)

    def _resolve_topic_ids(self) -> None:
        """Ask the cluster for the names of topic ids that consumer-protocol members are assigned (their
        records name topics by id), unless a question is under way or every unknown id was asked about."""
        unknown = self._members.unknown_topic_ids() - self._topic_ids_asked
        if unknown and (self._topic_ids is None or self._topic_ids.done()):
            self._tasks = [task for task in self._tasks if not task.done()]
            self._topic_ids = asyncio.create_task(self._learn_topic_ids(unknown), name=f"consumer-{self.name}-ids")
            self._tasks.append(self._topic_ids)

    async def _learn_topic_ids(self, unknown: set[bytes]) -> None:
        self._topic_ids_asked |= unknown
        request = CodecRequest(ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False,
                                                 "include_cluster_authorized_operations": False,
                                                 "include_topic_authorized_operations": False}, min_version=10)
        try:
            answer = await send_decoded(self._client, self._client.get_random_node(), request)
        except NoCommonVersion as exc:
            self.log.warning("the cluster names no topic ids (Metadata v10+); owners of consumer-protocol "
                             "groups cannot be shown", reason=str(exc))
            return
        except Exception as exc:  # the cluster may be away for a while: ask again with the next member record
            self.log.warning("asking for topic ids failed", error=repr(exc))
            self._topic_ids_asked -= unknown
            return
        names = {bytes(t["topic_id"]): t["name"] for t in answer["topics"] if t["error_code"] == 0}
        self.ctx.submit_many(self._members.learn_topic_ids(names))

    async def _wait_for_storage(self) -> None:
        """Let storage take in what it was given, and wait while its backlog is large, so memory stays
        bounded (and other tasks, HTTP answers among them, get their turn)."""
        await asyncio.sleep(0)
        while self.ctx.storage.pending() > STORAGE_BACKLOG_LIMIT:
            await asyncio.sleep(0)
