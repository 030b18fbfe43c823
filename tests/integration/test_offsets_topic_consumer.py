"""The `kafka` consumer module on a real broker: reading `__consumer_offsets` from its start, start-latest with
and without backfill-earliest, a log replaced under the reader (offset out of range after a broker lost its
data), and the offset history of what it read, with the monitor's real storage and cluster module in this
process."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import structlog
from harness import BrokerProcess

from broker.client import KafkaConnection
from broker.groups.hashing import offsets_partition_for
from broker.protocol.api import ApiKey
from burrowpy.config import parse_config
from burrowpy.daemon import Monitor
from burrowpy.pipeline.history import read_history
from burrowpy.protocol import FetchConsumer, FetchConsumers, FetchTopic, SetConsumerOffset

TOPIC = "orders"
PARTITIONS = 3
OFFSETS_PARTITIONS = 50  # the broker's offsets.topic.num.partitions default


async def commit(bootstrap: str, group: str, offsets: dict[int, int], topic: str = TOPIC, metadata: str = "") -> None:
    async with await KafkaConnection.connect(bootstrap, client_id="offsets-topic-test") as connection:
        body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                "topics": [{"name": topic, "partitions": [{"partition_index": p, "committed_offset": o,
                                                           "committed_metadata": metadata}
                                                          for p, o in offsets.items()]}]}
        answer = await connection.request(ApiKey.OFFSET_COMMIT, body)
    assert {p["error_code"] for t in answer["topics"] for p in t["partitions"]} == {0}


async def create_topic(bootstrap: str, partitions: int = PARTITIONS, topic: str = TOPIC) -> None:
    async with await KafkaConnection.connect(bootstrap, client_id="offsets-topic-test") as connection:
        answer = await connection.request(ApiKey.CREATE_TOPICS, {
            "topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1}], "timeout_ms": 30000})
    assert answer["topics"][0]["error_code"] == 0, answer


async def eventually(condition: Callable[[], Awaitable[bool]], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        assert time.monotonic() < deadline, f"{what} not reached within {timeout} s"
        await asyncio.sleep(0.1)


class InProcessMonitor:
    """The monitor's storage, cluster module and consumer module on one broker, in this event loop."""

    def __init__(self, bootstrap: str, history: Path | None = None, cluster_options: dict | None = None,
                 **consumer_options: object) -> None:
        doc = {"httpserver": {"default": {"address": "127.0.0.1:0"}},
               "cluster": {"local": {"class-name": "kafka", "servers": [bootstrap], "offset-refresh": 1,
                                     **(cluster_options or {})}},
               "consumer": {"local": {"class-name": "kafka", "cluster": "local", "servers": [bootstrap],
                                      **consumer_options}}}
        if history is not None:
            doc["history"] = {"dir": str(history), "roll-interval": 3600}
        self.monitor = Monitor(parse_config(doc, "burrowpy.yaml", {}), structlog.get_logger())

    async def __aenter__(self) -> InProcessMonitor:
        await self.monitor.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.monitor.stop()

    @property
    def consumer(self):
        return self.monitor.ctx.modules["consumer"]["local"]

    async def committed(self, group: str) -> dict[int, list[int]]:
        """The offsets stored for each partition of the group's topic (oldest first), {} for an unknown group."""
        ctx = self.monitor.ctx
        topics = await ctx.fetch(FetchConsumer(cluster="local", group=group, reply=ctx.new_reply()))
        if topics is None:
            return {}
        return {p: [entry.offset for entry in partition.offsets if entry is not None]
                for topic, partitions in topics.items() for p, partition in enumerate(partitions)}

    async def has(self, group: str, partition: int, offset: int) -> bool:
        return offset in (await self.committed(group)).get(partition, [])

    async def topic_partitions(self, topic: str) -> int:
        """How many partitions the monitor's broker offsets have for the topic (0 when it knows none)."""
        ctx = self.monitor.ctx
        offsets = await ctx.fetch(FetchTopic(cluster="local", topic=topic, reply=ctx.new_reply()))
        return len(offsets or ())


@pytest.fixture(scope="module")
def bootstrap(broker) -> str:
    asyncio.run(create_topic(broker.bootstrap))
    return broker.bootstrap


async def test_reads_every_commit_from_the_start_and_reports_itself(bootstrap):
    for offset in (5, 6, 7):
        await commit(bootstrap, "from-start", {0: offset, 2: offset * 10})
    async with InProcessMonitor(bootstrap) as monitor:
        await eventually(lambda: monitor.has("from-start", 2, 70), what="the last commit")
        assert (await monitor.committed("from-start"))[0] == [5, 6, 7]
        await commit(bootstrap, "from-start", {1: 3})
        await eventually(lambda: monitor.has("from-start", 1, 3), what="a commit made while reading")
        # The self-report group: one commit per read partition of the offsets topic, at its position.
        partition = offsets_partition_for("from-start", OFFSETS_PARTITIONS)
        ctx = monitor.monitor.ctx
        own = await ctx.fetch(FetchConsumer(cluster="local", group="burrow-local", reply=ctx.new_reply()))
        assert own["__consumer_offsets"][partition].offsets[-1].offset >= 4
        assert monitor.consumer.records_read >= 4 and monitor.consumer.records_skipped == 0


async def test_the_offset_history_records_every_commit_read(bootstrap, tmp_path: Path):
    """The reader hands commits to storage in runs; the history capture beside storage keeps a row for each."""
    offsets = {partition: 40 + partition for partition in range(PARTITIONS)}
    await commit(bootstrap, "historic", offsets)
    await commit(bootstrap, "historic", {0: 50})
    async with InProcessMonitor(bootstrap, history=tmp_path / "history") as monitor:
        await eventually(lambda: monitor.has("historic", 0, 50), what="the second commit")
    rows = [row for row in read_history(tmp_path / "history").to_pylist() if row["group"] == "historic"]
    assert [(row["kind"], row["topic"], row["partition"], row["offset"]) for row in rows] == [
        ("commit", TOPIC, partition, offset) for partition, offset in [*offsets.items(), (0, 50)]]
    assert [row["order"] for row in rows] == sorted(row["order"] for row in rows)


async def test_start_latest_reads_only_new_commits(bootstrap):
    await commit(bootstrap, "latest-old", {0: 1})
    async with InProcessMonitor(bootstrap, **{"start-latest": True}) as monitor:
        await commit(bootstrap, "latest-new", {0: 2})
        await eventually(lambda: monitor.has("latest-new", 0, 2), what="the commit made after the start")
        assert await monitor.committed("latest-old") == {}


async def test_start_latest_with_backfill_reads_the_history_once(bootstrap):
    await commit(bootstrap, "backfill-old", {1: 11})
    async with InProcessMonitor(bootstrap, **{"start-latest": True, "backfill-earliest": True}) as monitor:
        await commit(bootstrap, "backfill-new", {1: 12})
        await eventually(lambda: monitor.has("backfill-new", 1, 12), what="the commit made after the start")
        await eventually(lambda: monitor.has("backfill-old", 1, 11), what="the commit made before the start")

        async def backfill_ended() -> bool:
            return not monitor.consumer.backfilling

        await eventually(backfill_ended, what="the end of the backfill")


async def test_a_replaced_log_is_read_again_from_its_start(tmp_path: Path):
    """A broker that lost its data comes back with shorter logs: the reader's positions are out of range."""
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        await create_topic(broker.bootstrap)
        for offset in range(1, 6):
            await commit(broker.bootstrap, "before", {0: offset})
        # A group of the same offsets-topic partition, committed once after the restart: the new log ends
        # before the reader's position there.
        partition = offsets_partition_for("before", OFFSETS_PARTITIONS)
        after = next(f"after-{n}" for n in range(10_000)
                     if offsets_partition_for(f"after-{n}", OFFSETS_PARTITIONS) == partition)
        async with InProcessMonitor(broker.bootstrap) as monitor:
            await eventually(lambda: monitor.has("before", 0, 5), what="the commits before the restart")
            await asyncio.to_thread(broker.stop)
            shutil.rmtree(broker.data_dir)
            await asyncio.to_thread(broker.start)
            # The topic comes back with one partition more, so the monitor is seen to know the new one: a commit
            # for a topic it holds no broker offsets for is dropped, as Burrow drops it.
            await create_topic(broker.bootstrap, PARTITIONS + 1)

            async def new_topic_known() -> bool:
                return await monitor.topic_partitions(TOPIC) == PARTITIONS + 1

            await eventually(new_topic_known, timeout=60, what="the re-created topic in the monitor")
            await commit(broker.bootstrap, after, {0: 1})
            await eventually(lambda: monitor.has(after, 0, 1), timeout=60, what="the commit in the replaced log")
    finally:
        broker.stop()


async def test_a_backlog_is_read_in_responses_of_at_most_fetch_max_bytes(tmp_path: Path, monkeypatch):
    """The consumer module holds at most 4 MiB of one leader's undecoded records at a time: a backlog of
    about 10 MB on one broker (24 groups, each one commit of 100 partitions with 4 KB of metadata, about 400 KB in
    its offsets-topic partition) comes in several responses, each read whole."""
    from burrowpy.coordinators.consumer_kafka import KafkaConsumer

    held_at_most = 4 << 20  # (16 MiB before: the whole backlog in one response)

    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        await create_topic(broker.bootstrap, 100, "bulky")
        groups = [f"bulky-{n}" for n in range(24)]
        for group in groups:
            await commit(broker.bootstrap, group, dict.fromkeys(range(100), 7), "bulky", "m" * 4000)
        fetch, responses = KafkaConsumer._fetch, []

        async def fetch_observed(*args: Any) -> list:
            answers = await fetch(*args)
            responses.append(sum(len(records) for _, _, records, _ in answers))
            return answers

        monkeypatch.setattr(KafkaConsumer, "_fetch", fetch_observed)
        async with InProcessMonitor(broker.bootstrap) as monitor:
            for group in groups:
                await eventually(lambda group=group: monitor.has(group, 99, 7), what=f"{group}'s commit")
        assert sum(responses) > 2 * held_at_most  # the backlog: more than two responses' worth
        assert 0 < max(responses) <= held_at_most, responses
    finally:
        broker.stop()


async def test_the_modules_aiokafka_clients_hold_the_brokers_and_no_topic(bootstrap):
    """The consumer and cluster modules' aiokafka clients know the brokers, which they connect by, and no topic, also
    after aiokafka's own refresh (which it makes after every broken connection): each of those asked for every topic,
    which at fleet scale was the decode of tens of thousands of partitions on the event loop, kept for nothing. The
    modules read topics themselves, and ``fetch_all_metadata`` (the probe's) still reads them all."""
    async with InProcessMonitor(bootstrap) as monitor:
        await commit(bootstrap, "brokers-only", {0: 1})
        await eventually(lambda: monitor.has("brokers-only", 0, 1), what="the first commit")
        clients = [monitor.consumer._client, monitor.monitor.ctx.modules["cluster"]["local"]._client]
        for client in clients:
            assert await client.force_metadata_update()
            assert client.cluster.brokers()
            assert client.cluster.topics(exclude_internal_topics=False) == set()
        assert TOPIC in (await clients[1].fetch_all_metadata()).topics()
        await commit(bootstrap, "brokers-only", {0: 2})
        await eventually(lambda: monitor.has("brokers-only", 0, 2), what="a commit read after the refreshes")
        assert await monitor.topic_partitions(TOPIC) == PARTITIONS


async def test_the_groups_reaper_deletes_the_groups_kafka_no_longer_lists(tmp_path: Path):
    """``groups-reaper-refresh``: a group in storage that the cluster does not list (its deletion's tombstone never
    read: compacted away while the monitor was down, say; here handed to storage directly) is deleted within a
    refresh or two; the groups the cluster lists, and the module's own, stay. While a broker does not answer
    ListGroups nothing is deleted (its groups would look gone)."""
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        await create_topic(broker.bootstrap)
        await commit(broker.bootstrap, "listed", {0: 3})
        async with InProcessMonitor(broker.bootstrap, cluster_options={"groups-reaper-refresh": 1}) as monitor:
            ctx = monitor.monitor.ctx

            async def groups() -> set[str]:
                return set(await ctx.fetch(FetchConsumers(cluster="local", reply=ctx.new_reply())) or [])

            async def ghost() -> None:
                ctx.submit(SetConsumerOffset(cluster="local", group="ghost", topic=TOPIC, partition=0, offset=1,
                                             order=1, timestamp=int(time.time() * 1000)))

            await eventually(lambda: monitor.has("listed", 0, 3), what="the listed group's commit")
            await ghost()
            await eventually(lambda: monitor.has("ghost", 0, 1), what="the ghost in storage")
            await eventually(lambda: _lacks(groups(), "ghost"), timeout=10, what="the ghost reaped")
            assert {"listed", "burrow-local"} <= await groups()

            broker.stop()
            await ghost()
            cluster = ctx.modules["cluster"]["local"]
            failed = cluster.reaper_failures

            async def two_rounds_failed() -> bool:
                return cluster.reaper_failures >= failed + 2

            await eventually(two_rounds_failed, what="two reaper rounds without the broker")
            assert {"ghost", "listed", "burrow-local"} <= await groups()
            broker.start()
            await eventually(lambda: _lacks(groups(), "ghost"), timeout=30, what="the ghost reaped after the broker's return")
            assert "listed" in await groups()
    finally:
        broker.stop()


async def _lacks(groups: Awaitable[set[str]], group: str) -> bool:
    return group not in await groups
