"""The `kafka` consumer module: reads every partition of `__consumer_offsets` and feeds storage.

It reads the whole compacted topic from the oldest offset (or only new records with ``start-latest``;
``backfill-earliest`` then also reads the history up to the starting point once). What each record means
is in :mod:`burrowpy.coordinators.offsets_topic`.

Self-reporting differs from Burrow on purpose: Burrow stores a commit for the group ``burrow-NAME`` for
every record it reads, so its window covers only the last few records; we store one per partition per
fetched batch (the position after the batch), so the window spans time and the group's lag is meaningful.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from burrowpy.config import Section
from burrowpy.context import ApplicationContext
from burrowpy.coordinators.kafka_client import client_settings
from burrowpy.coordinators.offsets_topic import GroupFilter, RecordSkipped, interpret
from burrowpy.protocol import SetConsumerOffset

KEYS = ("class-name", "cluster", "servers", "client-profile", "offsets-topic", "start-latest", "backfill-earliest",
        "group-allowlist", "group-denylist", "group-whitelist", "group-blacklist")
FETCH_MAX_RECORDS = 5000


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


class KafkaConsumer:
    def __init__(self, name: str, section: Section, ctx: ApplicationContext) -> None:
        self.name, self.ctx, self.log, self.cluster, self.servers = consumer_basics(
            name, section, ctx, KEYS, "kafka")
        self.profile = ctx.config.client_profile(section.get_str("client-profile", ""))
        self.settings = client_settings(self.profile, section)
        self.offsets_topic = section.get_str("offsets-topic", "__consumer_offsets")
        self.start_latest = section.get_bool("start-latest", False)
        self.backfill_earliest = section.get_bool("backfill-earliest", False)
        self.groups = group_filter(section, self.log)
        self.self_group = f"burrow-{name}"
        self.records_read = 0
        self.records_skipped = 0
        self._consumers: list[Any] = []
        self._tasks: list[asyncio.Task] = []
        self.section = section

    def describe(self) -> dict[str, Any]:
        return {"class-name": "kafka", "cluster": self.cluster, "servers": self.servers,
                "group-allowlist": self.groups.allow.pattern if self.groups.allow else "",
                "zookeeper-path": "", "zookeeper-timeout": 0, "client-profile": self.profile.to_json(),
                "offsets-topic": self.offsets_topic, "start-latest": self.start_latest}

    async def _new_consumer(self) -> Any:
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer(bootstrap_servers=self.servers, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest", max_partition_fetch_bytes=4 << 20,
                                    fetch_max_bytes=64 << 20, check_crcs=False, **self.settings)
        await consumer.start()
        self._consumers.append(consumer)
        return consumer

    async def start(self) -> None:
        from aiokafka.structs import TopicPartition

        consumer = await self._new_consumer()
        # Fresh metadata of every topic: the consumer's own cache and topics() leave internal topics out.
        metadata = await consumer._client.fetch_all_metadata()
        partitions = metadata.partitions_for_topic(self.offsets_topic)
        if not partitions:
            await self.stop()
            raise RuntimeError(f"topic {self.offsets_topic!r} not found on {self.servers}")
        assigned = [TopicPartition(self.offsets_topic, p) for p in sorted(partitions)]
        consumer.assign(assigned)
        if self.start_latest:
            ends = await consumer.end_offsets(assigned)
            await consumer.seek_to_end(*assigned)
            if self.backfill_earliest:
                backfill = await self._new_consumer()
                todo = {tp: end for tp, end in ends.items() if end > 0}
                if todo:
                    backfill.assign(list(todo))
                    await backfill.seek_to_beginning(*todo)
                    self._tasks.append(asyncio.create_task(self._read(backfill, stop_at=todo),
                                                           name=f"consumer-{self.name}-backfill"))
        else:
            await consumer.seek_to_beginning(*assigned)
        self._tasks.append(asyncio.create_task(self._read(consumer), name=f"consumer-{self.name}"))
        self.log.info("started", servers=self.servers, partitions=len(assigned), start_latest=self.start_latest)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for consumer in self._consumers:
            with contextlib.suppress(Exception):
                await consumer.stop()
        self._consumers.clear()
        self.log.info("stopped", records_read=self.records_read, records_skipped=self.records_skipped)

    async def _read(self, consumer: Any, stop_at: dict | None = None) -> None:
        """Read until cancelled, or (backfill) until every partition reached its starting end offset."""
        remaining = dict(stop_at) if stop_at is not None else None
        while remaining is None or remaining:
            try:
                batches = await consumer.getmany(timeout_ms=1000, max_records=FETCH_MAX_RECORDS)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.log.warning("reading the offsets topic failed; retrying", error=repr(exc))
                await asyncio.sleep(1)
                continue
            for tp, records in batches.items():
                if remaining is not None:
                    end = remaining.get(tp)
                    if end is None:
                        continue
                    records = [r for r in records if r.offset < end]
                    if not records or records[-1].offset >= end - 1:
                        remaining.pop(tp, None)
                        consumer.pause(tp)
                if records:
                    self._take(tp.partition, records)
            await asyncio.sleep(0)

    def _take(self, partition: int, records: list[Any]) -> None:
        submit = self.ctx.submit
        for record in records:
            try:
                for request in interpret(self.cluster, record.key, record.value, record.offset, self.groups):
                    submit(request)
            except RecordSkipped as exc:
                self.records_skipped += 1
                self.log.warning("skipped offsets-topic record", partition=partition, offset=record.offset,
                                 reason=str(exc))
        self.records_read += len(records)
        last = records[-1].offset
        submit(SetConsumerOffset(cluster=self.cluster, group=self.self_group, topic=self.offsets_topic,
                                 partition=partition, offset=last + 1, order=last,
                                 timestamp=int(self.ctx.clock.time() * 1000)))
