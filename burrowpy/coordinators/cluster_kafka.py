"""The `kafka` cluster module: broker offsets by polling, as Burrow's cluster module does.

Every ``offset-refresh`` seconds it asks each partition leader for the latest offset of its partitions
(one ListOffsets per broker, :mod:`~burrowpy.coordinators.list_offsets`) and sends each topic's offsets to
storage (SetBrokerOffsets of up to 50 partitions: what a SetBrokerOffset per partition means). Its topics and leaders
come from the cluster's whole-cluster Metadata readings (:class:`~burrowpy.coordinators.codec_request.MetadataReader`,
shared with topic health): a poll takes any reading newer than its own, and one ``topic-refresh`` seconds after the
one it holds was started, makes a new one if none came meanwhile; topics that disappeared are deleted from storage. With
``groups-reaper-refresh`` > 0, groups that Kafka no longer lists are deleted from storage.

Not Burrow's: after each poll it reads the timestamps of the records groups sit at, for lag in seconds
(:mod:`burrowpy.coordinators.record_times`): at most ``time-lag-reads`` partitions per broker per poll,
0 turns the reads off (lag in seconds is then interpolated from broker offset samples). After each poll it
also reads the cluster's share groups (:mod:`burrowpy.coordinators.share_groups`) into windows of
``share-group-intervals`` readings per share-partition (:mod:`burrowpy.evaluator.share`), with their
in-flight records from the brokers' Prometheus endpoints listed in ``broker-metrics``
(:mod:`burrowpy.coordinators.broker_metrics`; unknown without them). Every
``topic-health-refresh`` seconds (0: never) it reads the topics' replicas, ISR, leaders, low watermarks and
sizes on disk (:mod:`burrowpy.coordinators.topic_health`) into ``health``.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

from broker.protocol.api import ApiKey
from burrowpy.config import Section, http_urls
from burrowpy.context import ApplicationContext
from burrowpy.coordinators import probe
from burrowpy.coordinators.codec_request import (
    CodecRequest,
    MetadataReader,
    MetadataReading,
    follow_brokers,
    send_decoded,
)
from burrowpy.coordinators.kafka_client import brokers_only_client, client_settings
from burrowpy.coordinators.list_offsets import LatestOffsetsRequest, TopicOffsets, answered_topics
from burrowpy.coordinators.partition_map import PartitionMap
from burrowpy.coordinators.record_times import RecordTimeReader
from burrowpy.coordinators.share_groups import ShareGroupReader
from burrowpy.coordinators.topic_health import ClusterHealth, TopicHealthReader
from burrowpy.evaluator.share import ShareGroupWindows
from burrowpy.protocol import (
    FetchConsumers,
    FetchRecordTimeWants,
    FetchTopicRates,
    SetBrokerOffsets,
    SetDeleteGroup,
    SetDeleteTopic,
    SetRecordTimes,
)

# Partitions of the ListOffsets answers handed to storage between two yields to the event loop.
REFRESH_SLICE = 2000
# Partitions of a topic per storage request: storage handles a request in one step, and about a thousand
# partitions' worth of requests in one turn of the event loop (``storage.inmemory._TURN``).
STORAGE_CHUNK = 50

KEYS = ("class-name", "servers", "client-profile", "offset-refresh", "topic-refresh", "groups-reaper-refresh",
        "time-lag-reads", "share-group-intervals", "broker-metrics", "topic-health-refresh", *probe.KEYS)


class KafkaCluster:
    def __init__(self, name: str, section: Section, ctx: ApplicationContext) -> None:
        section.check_keys(KEYS)
        self.name = name
        self.ctx = ctx
        self.log = ctx.logger.bind(type="module", coordinator="cluster", class_name="kafka", name=name)
        self.servers = section.get_hostports("servers")
        self.profile_name = section.get_str("client-profile", "")
        self.profile = ctx.config.client_profile(self.profile_name)
        self.settings = client_settings(self.profile, section)
        self.offset_refresh = section.get_int("offset-refresh", 10, minimum=1)
        self.topic_refresh = section.get_int("topic-refresh", 60, minimum=1)
        self.reaper_refresh = section.get_int("groups-reaper-refresh", 0, minimum=0)
        self.reaper_failures = 0  # rounds of the groups reaper that deleted nothing: the cluster did not answer
        self.time_lag_reads = section.get_int("time-lag-reads", 1000, minimum=0)
        self.probe_settings = probe.ProbeSettings.from_section(name, section)
        self.probe: probe.EndToEndProbe | None = None
        self._record_times: RecordTimeReader | None = None
        self.share_groups = ShareGroupWindows(name, section.get_int("share-group-intervals", 10, minimum=1))
        self._share_reader: ShareGroupReader | None = None
        self.broker_metrics = http_urls(section, "broker-metrics")
        self._metrics_scraper: Any = None
        self.health_refresh = section.get_int("topic-health-refresh", 30, minimum=0)
        self.health: ClusterHealth | None = None  # the latest reading of the topics' health
        # the newest broker offset of each partition, and its leader (a list per topic: at fleet scale dicts keyed by
        # (topic, partition) were ~5 MiB each)
        self.log_ends = PartitionMap()
        self.topics: dict[str, int] = {}  # topic -> partition count
        self.leaders = PartitionMap()
        self._client: Any = None
        self._tasks: list[asyncio.Task] = []
        self._refresh_metadata = True  # the next poll reads metadata: a reading started after the ``_due_after``-th
        self._due_after = 0
        self._metadata: MetadataReader | None = None  # the cluster's Metadata readings, shared with topic health
        self._applied_started: float | None = None  # when the reading topics and leaders come from was started
        # the digest of the Metadata answer topics and leaders come from (an answer with the same one is not gone
        # through again), its leaderless partitions and its brokers
        self._applied_digest: bytes | None = None
        self._leaderless: list[tuple[str, int]] = []
        self._brokers: list[dict[str, Any]] = []
        self._requests: dict[int, LatestOffsetsRequest] = {}  # the ListOffsets of each leader, for these leaders:
        self._requests_for: PartitionMap | None = None

    def describe(self) -> dict[str, Any]:
        return {"class-name": "kafka", "servers": self.servers, "client-profile": self.profile.to_json(),
                "topic-refresh": self.topic_refresh, "offset-refresh": self.offset_refresh,
                **({"probe": True, **self.probe_settings.to_json()} if self.probe_settings is not None else {})}

    async def start(self) -> None:
        self._client = brokers_only_client(self.servers, self.settings)
        await self._client.bootstrap()
        self._metadata = MetadataReader(self._client)
        if self.time_lag_reads:
            self._record_times = RecordTimeReader(self._client, self.log, self.time_lag_reads)
        if self.broker_metrics:
            self._metrics_scraper = self._broker_metrics_scraper()
        self._share_reader = ShareGroupReader(self._client, self.share_groups, self.log, self._metrics_scraper)
        await self.poll_once()
        await self._read_share_groups()
        self._tasks.append(asyncio.create_task(self._offset_loop(), name=f"cluster-{self.name}-offsets"))
        self._tasks.append(asyncio.create_task(self._topic_timer(), name=f"cluster-{self.name}-topics"))
        if self.health_refresh:
            self._tasks.append(asyncio.create_task(self._health_loop(TopicHealthReader(self._client, self.log, self._metadata)),
                                                   name=f"cluster-{self.name}-health"))
        if self.probe_settings is not None:
            self.probe = probe.EndToEndProbe(self.name, self.servers, self.settings, self.probe_settings,
                                             self.ctx.clock, self.log)
            self._tasks.append(asyncio.create_task(self.probe.run(self._client), name=f"cluster-{self.name}-probe"))
        if self.reaper_refresh > 0:
            self._tasks.append(asyncio.create_task(self._reaper_loop(), name=f"cluster-{self.name}-reaper"))
        self.log.info("started", servers=self.servers)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self.probe is not None:
            await self.probe.stop()
        if self._client is not None:
            await self._client.close()
        if self._metrics_scraper is not None:
            await self._metrics_scraper.close()
        self.log.info("stopped")

    def _broker_metrics_scraper(self) -> Any:
        import aiohttp

        from burrowpy.coordinators.broker_metrics import BrokerMetricsScraper

        # The client profile's timeouts, as for the brokers themselves; a scrape never outlasts the poll it
        # belongs to, so a hung endpoint cannot hold the share-group readings back.
        timeout = aiohttp.ClientTimeout(total=self.offset_refresh, sock_connect=self.profile.dial_timeout,
                                        sock_read=self.profile.read_timeout)
        return BrokerMetricsScraper(self.broker_metrics, timeout, self.log)

    # --- loops ----------------------------------------------------------------------------------------

    async def _offset_loop(self) -> None:
        while True:
            await asyncio.sleep(self.offset_refresh)
            try:
                await self.poll_once()
            except Exception as exc:
                self.log.warning("offset refresh failed", error=repr(exc))
                self._metadata_due()
                continue
            try:
                await self.read_record_times()
            except Exception as exc:
                self.log.warning("reading record timestamps failed", error=repr(exc))
            await self._read_share_groups()

    async def _read_share_groups(self) -> None:
        assert self._share_reader is not None
        try:
            await self._share_reader.read(self.log_ends, int(self.ctx.clock.time() * 1000))
        except Exception as exc:
            self.log.warning("reading share groups failed", error=repr(exc))

    async def _health_loop(self, reader: TopicHealthReader) -> None:
        while True:
            try:
                self.health = await reader.read(int(self.ctx.clock.time() * 1000))
            except Exception as exc:
                # the previous reading stays: its read_at tells how old it is
                self.log.warning("reading topic health failed", error=repr(exc))
            await asyncio.sleep(self.health_refresh)

    def _metadata_due(self) -> None:
        """The next poll reads metadata: a reading started from now on (the one in flight was asked before)."""
        assert self._metadata is not None
        self._refresh_metadata, self._due_after = True, self._metadata.started

    async def _topic_timer(self) -> None:
        """Metadata is due ``topic-refresh`` seconds after the reading the topics and leaders come from was started.
        Topic health's readings count: a poll takes a reading newer than its own (:meth:`poll_once`), so with
        ``topic-health-refresh`` below ``topic-refresh`` the cluster module makes none of its own. Either way the
        metadata a poll goes by was asked at most ``topic-refresh`` + ``offset-refresh`` seconds (and a poll's
        time) before, as when the cluster module read it every ``topic-refresh`` seconds itself."""
        loop = asyncio.get_running_loop()
        while True:
            applied = self._applied_started
            wait = self.topic_refresh if applied is None else applied + self.topic_refresh - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
                continue  # a newer reading may have been taken meanwhile
            self._metadata_due()
            await asyncio.sleep(self.topic_refresh)

    async def _reaper_loop(self) -> None:
        while True:
            await asyncio.sleep(self.reaper_refresh)
            try:
                await self.reap_groups()
            except Exception as exc:
                self.reaper_failures += 1
                self.log.warning("groups reaper failed", error=repr(exc))

    # --- work -----------------------------------------------------------------------------------------

    async def refresh_metadata(self) -> None:
        """Every topic's partition count and leaders, from a Metadata reading started since metadata was due
        (one topic health started counts), gone through off the event loop (at fleet scale the answer lists tens of
        thousands of partitions)."""
        assert self._metadata is not None
        await self._apply(await self._metadata.take(self._due_after))

    async def _apply(self, reading: MetadataReading) -> None:
        """Topics and leaders from ``reading`` (nothing to do when it is the answer applied last time, byte for
        byte: at fleet scale an unchanged cluster's Metadata is tens of thousands of partitions). aiokafka's own metadata, which it refreshes only when a connection
        breaks (:data:`~burrowpy.coordinators.kafka_client.BROKERS_ONLY_METADATA_AGE_MS`), is refreshed too when
        the brokers read here are not the ones it knows: it holds their addresses."""
        if reading.digest != self._applied_digest:
            metadata = await reading.metadata()
            topics, leaders, leaderless = await asyncio.to_thread(partition_leaders, metadata, self.leaders)
            for gone in sorted(set(self.topics) - set(topics)):
                self.log.info("topic deleted", topic=gone)
                self.log_ends.drop(gone)
                self.ctx.submit(SetDeleteTopic(cluster=self.name, topic=gone))
            self.topics, self.leaders, self._leaderless = topics, leaders, leaderless
            self._brokers, self._applied_digest = metadata["brokers"], reading.digest
        # else the answer applied last time, byte for byte: the same topics, leaders and brokers
        for topic, partition in self._leaderless:
            self.log.warning("partition has no leader", topic=topic, partition=partition)
        self._refresh_metadata, self._applied_started = False, reading.started
        if await follow_brokers(self._client, self._brokers):
            self.log.info("brokers changed", brokers=sorted(broker["node_id"] for broker in self._brokers))

    async def poll_once(self) -> None:
        """Refresh metadata if due (or take a newer reading topic health made), then send one ListOffsets (latest) per leader broker, and hand each topic of
        the answers to storage in requests of :data:`STORAGE_CHUNK` partitions. The answers are read a topic at a time, giving the event loop
        to others every :data:`REFRESH_SLICE` partitions or so: at fleet scale they list tens of thousands."""
        assert self._metadata is not None
        if self._refresh_metadata:
            await self.refresh_metadata()
        elif (unseen := self._metadata.take_unseen()) is not None:
            await self._apply(unseen)
        requests = self._offset_requests()
        results = await asyncio.gather(*(self._client.send(leader, request) for leader, request in requests.items()),
                                       return_exceptions=True)
        now_ms = int(self.ctx.clock.time() * 1000)
        handed = 0
        for leader, response in zip(requests, results, strict=True):
            if isinstance(response, BaseException):
                self.log.warning("ListOffsets failed", broker=leader, error=repr(response))
                self._metadata_due()
                continue
            for answer in answered_topics(response):
                self._store_offsets(answer, now_ms)
                handed += len(answer.partitions) + 1
                if handed >= REFRESH_SLICE:
                    handed = 0
                    await asyncio.sleep(0)

    def _offset_requests(self) -> dict[int, LatestOffsetsRequest]:
        """One request per leader for the partitions it leads; the same ones until the leaders change."""
        if self._requests_for is not self.leaders:
            by_leader: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
            for topic, row in self.leaders.by_topic():
                for partition, leader in enumerate(row):
                    if leader is not None:
                        by_leader[leader][topic].append(partition)
            self._requests = {leader: LatestOffsetsRequest(list(topics.items())) for leader, topics in by_leader.items()}
            self._requests_for = self.leaders
        return self._requests

    def _store_offsets(self, answer: TopicOffsets, now_ms: int) -> None:
        """Storage is handed every offset of every refresh (a broker ring records each refresh, moved or not);
        ``log_ends`` is left as it is for a topic whose answer is the last one's, which it holds already."""
        topic = answer.topic
        for partition, error_code in answer.errors:
            self.log.warning("partition offset error", topic=topic, partition=partition, error_code=error_code)
            self._metadata_due()
        partitions, offsets = answer.partitions, answer.offsets
        if offsets and min(offsets) < 0:
            kept = [(partition, offset) for partition, offset in zip(partitions, offsets, strict=True) if offset >= 0]
            partitions, offsets = [p for p, _ in kept], [o for _, o in kept]
        if not partitions:
            return
        if not answer.same_as_last:  # (a request's memo lives as long as the leaders, and so the topics, it was made for)
            self.log_ends.set(topic, partitions, offsets)
        count = self.topics.get(topic)  # None: not in the metadata, each partition counts as the topic's last
        if len(partitions) <= STORAGE_CHUNK:  # most topics: the answer's lists as they are, no copies
            self.ctx.submit(SetBrokerOffsets(cluster=self.name, topic=topic, partition_count=count,
                                             partitions=partitions, offsets=offsets, timestamp=now_ms))
            return
        for start in range(0, len(partitions), STORAGE_CHUNK):
            self.ctx.submit(SetBrokerOffsets(cluster=self.name, topic=topic, partition_count=count,
                                             partitions=partitions[start:start + STORAGE_CHUNK],
                                             offsets=offsets[start:start + STORAGE_CHUNK], timestamp=now_ms))

    async def read_record_times(self) -> None:
        """Read the record timestamps storage wants for lag in seconds, after a poll."""
        if self._record_times is None:
            return
        wants = await self.ctx.fetch(FetchRecordTimeWants(cluster=self.name, reply=self.ctx.new_reply()))
        if not wants:
            return
        answers = await self._record_times.read(wants, self.leaders)
        if answers:
            self.ctx.submit(SetRecordTimes(cluster=self.name, times=answers))

    async def produce_rates(self, topic: str) -> list[float | None]:
        """Each partition's produce rate over the storage window, by partition index."""
        return await self.ctx.fetch(FetchTopicRates(cluster=self.name, topic=topic, reply=self.ctx.new_reply())) or []

    async def topic_health(self, topic: str) -> dict[str, Any] | None:
        """The topic's health figures (:meth:`ClusterHealth.topic_json`), None before a reading has it."""
        if self.health is None or topic not in self.health.topics:
            return None
        count = len(self.health.topics[topic])
        return self.health.topic_json(topic, [self.log_ends.get((topic, index)) for index in range(count)],
                                      await self.produce_rates(topic))

    async def listed_groups(self) -> set[str]:
        """Every group the cluster lists (ListGroups to each broker: a broker lists the groups it coordinates).
        Raises when a broker does not answer or answers an error: its groups would look gone."""
        nodes = [broker.nodeId for broker in self._client.cluster.brokers()]
        if not nodes:
            raise RuntimeError("no broker known")
        answers = await asyncio.gather(*(send_decoded(self._client, node, CodecRequest(ApiKey.LIST_GROUPS, {}))
                                         for node in nodes))
        listed: set[str] = set()
        for node, answer in zip(nodes, answers, strict=True):
            if answer["error_code"]:
                raise RuntimeError(f"broker {node} answered ListGroups with error code {answer['error_code']}")
            listed.update(group["group_id"] for group in answer["groups"])
        return listed

    async def reap_groups(self) -> None:
        """Delete from storage the groups the cluster no longer lists (but this module's own), as Burrow's groups
        reaper does: a group deleted while the monitor could not read its tombstone."""
        listed = await self.listed_groups()
        known = await self.ctx.fetch(FetchConsumers(cluster=self.name, reply=self.ctx.new_reply())) or []
        own = f"burrow-{self.name}"
        for group in known:
            if group not in listed and group != own:
                self.log.info("reaping group Kafka no longer lists", group=group)
                self.ctx.submit(SetDeleteGroup(cluster=self.name, group=group))


def partition_leaders(metadata: dict[str, Any], previous: PartitionMap
                      ) -> tuple[dict[str, int], PartitionMap, list[tuple[str, int]]]:
    """From a Metadata answer: each topic's partition count, each partition's leader, and the partitions without
    one. A topic answered with an error is left out, as if absent (it is being created or deleted). Leaders
    equal to ``previous`` are ``previous`` itself, whose ListOffsets requests are then kept, not made again."""
    topics: dict[str, int] = {}
    leaders = PartitionMap()
    leaderless: list[tuple[str, int]] = []
    for topic in metadata["topics"]:
        if topic["error_code"]:
            continue
        name = topic["name"]
        topics[name] = len(topic["partitions"])
        indexes: list[int] = []
        led_by: list[int] = []
        for partition in topic["partitions"]:
            if partition["leader_id"] < 0:
                leaderless.append((name, partition["partition_index"]))
            else:
                indexes.append(partition["partition_index"])
                led_by.append(partition["leader_id"])
        leaders.set(name, indexes, led_by)
    return topics, previous if leaders == previous else leaders, leaderless
