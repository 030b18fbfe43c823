"""A cluster at rest answers the same bytes at every reading: topic health and the cluster module's Metadata
pass decode only answers that changed, the offset refresh only the topics whose offsets changed, and what they
make of them is what a full reading makes.

The whole monitor runs in this process (``burrowpy.daemon.Monitor``) against our broker, and against two Apache
Kafka 4.x nodes, whose Metadata answers each name a live broker chosen at random as the controller (the only
bytes in which a KRaft cluster's answers at rest differ); topic health is read by hand
(``TopicHealthReader.read``, as the cluster module's loop reads it) between changes made with real clients, and
every decode of an answer in our codec (``LaterAnswer.decode``) is counted, by API."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import structlog
from burrow_support import in_process_config
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from harness import free_port, unique_name
from kafka_harness import KafkaCluster

from broker.protocol.api import ApiKey, decode_response
from burrowpy.config import parse_config
from burrowpy.coordinators import codec_request
from burrowpy.coordinators.topic_health import ClusterHealth, TopicHealthReader
from burrowpy.daemon import Monitor

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def two_kafka_nodes(tmp_path_factory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("kafka-two"), nodes=2) as cluster:
        yield cluster


def figures(health: ClusterHealth) -> dict[str, Any]:
    """What a reading says, but when it was read."""
    return {"live": health.live_brokers, "min_isr": dict(health.min_isr),
            "topics": {name: list(rows) for name, rows in health.topics.items()}}


def count_decodes(monkeypatch) -> Counter[int]:
    """Every decode of an answer in our codec from now on, by API."""
    decodes: Counter[int] = Counter()
    decode = codec_request.LaterAnswer.decode

    def counted(answer: codec_request.LaterAnswer) -> dict[str, Any]:
        decodes[answer.api_key] += 1
        return decode(answer)

    monkeypatch.setattr(codec_request.LaterAnswer, "decode", counted)
    return decodes


@contextlib.asynccontextmanager
async def read_by_hand(bootstrap: str) -> AsyncIterator[tuple[Any, TopicHealthReader]]:
    """The whole monitor in this process, its own health loop and offset polls out of the way (the test reads by
    hand): its cluster module, and a topic-health reader sharing the module's Metadata readings."""
    config = in_process_config(bootstrap, free_port(), **{"offset-refresh": 3600, "topic-refresh": 3600,
                                                          "topic-health-refresh": 0})
    monitor = Monitor(parse_config(config, "burrowpy.yaml", {}), structlog.get_logger())
    await monitor.start()
    try:
        cluster = monitor.ctx.modules["cluster"]["local"]
        yield cluster, TopicHealthReader(cluster._client, cluster.log, cluster._metadata)
    finally:
        await monitor.stop()


async def test_unchanged_answers_are_not_decoded_again_and_changes_are_read(broker, monkeypatch, tmp_path):
    topic, other = unique_name("at-rest"), unique_name("created-later")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 3, 1)]).values():
        await asyncio.to_thread(future.result, 30)
    decodes = count_decodes(monkeypatch)
    async with read_by_hand(broker.bootstrap) as (cluster, reader):
        first = await reader.read(1000)
        assert [row.size_bytes for row in first.topics[topic]] == [0, 0, 0]
        decodes.clear()
        leaders_before = cluster.leaders

        # nothing the readers use changed (the disk's free bytes did: DescribeLogDirs from version 4 on carries
        # them, and another process writes to the disk at any time): the brokers are asked again, nothing is
        # decoded, the figures are the first reading's
        written = tmp_path / "disk-writer"  # the broker's data is on this disk too (tmp_path_factory)
        with open(written, "wb") as out:
            out.write(b"\1" * (8 << 20))
            out.flush()
            os.fsync(out.fileno())
        second = await reader.read(2000)
        assert second.read_at_ms == 2000 and figures(second) == figures(first)
        await cluster.poll_once()  # takes the reading topic health made: the same answer, not gone through again
        assert cluster.leaders is leaders_before
        assert decodes == Counter(), decodes
        assert [cluster.log_ends[(topic, index)] for index in range(3)] == [0, 0, 0]

        # records written: the sizes and the DescribeLogDirs answer change, the Metadata answer does not
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for index in range(3):
            producer.produce(topic, b"x" * 100, partition=index)
        assert await asyncio.to_thread(producer.flush, 30) == 0
        third = await reader.read(3000)
        assert all(row.size_bytes > 0 for row in third.topics[topic]), third.topics[topic]
        assert [row.low_watermark for row in third.topics[topic]] == [0, 0, 0]
        assert decodes[ApiKey.METADATA] == 0 and decodes[ApiKey.DESCRIBE_LOG_DIRS] >= 1, decodes
        # and the offset refresh reads the topic's new log ends (its part of the ListOffsets answer changed)
        await cluster.poll_once()
        assert [cluster.log_ends[(topic, index)] for index in range(3)] == [1, 1, 1]
        await cluster.poll_once()  # the same answer again: the log ends stay
        assert [cluster.log_ends[(topic, index)] for index in range(3)] == [1, 1, 1]

        # the log start moved: the earliest offsets change, the rest does not
        deleted = await asyncio.to_thread(admin.delete_records, [TopicPartition(topic, 1, 1)])
        for future in deleted.values():
            await asyncio.to_thread(future.result, 30)
        fourth = await reader.read(4000)
        assert [row.low_watermark for row in fourth.topics[topic]] == [0, 1, 0]
        assert fourth.topics[topic][0] is third.topics[topic][0]  # an unchanged row is the last reading's

        # a topic created: the Metadata answer changes, and is decoded (once, for both readers)
        for future in admin.create_topics([NewTopic(other, 2, 1)]).values():
            await asyncio.to_thread(future.result, 30)
        decodes.clear()
        fifth = await reader.read(5000)
        assert len(fifth.topics[other]) == 2
        await cluster.poll_once()
        assert cluster.topics[other] == 2 and cluster.leaders is not leaders_before
        assert decodes[ApiKey.METADATA] == 1, decodes


async def test_kraft_answers_naming_another_controller_are_not_decoded_again(two_kafka_nodes, monkeypatch):
    """Readings are taken until two of the answers named different controllers (each names one of the two nodes at
    random): after the first reading nothing is decoded again, by topic health or by the cluster module's pass."""
    topic = unique_name("kraft-at-rest")
    admin = AdminClient({"bootstrap.servers": two_kafka_nodes.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 4, 1)]).values():
        await asyncio.to_thread(future.result, 30)
    decodes = count_decodes(monkeypatch)
    controllers: list[int] = []  # the controller each Metadata answer named
    ask = codec_request._metadata_answer

    async def noted(*args: Any) -> codec_request.LaterAnswer:
        answer = await ask(*args)
        controllers.append(decode_response(ApiKey.METADATA, answer.api_version, answer.frame)[1]["controller_id"])
        return answer

    monkeypatch.setattr(codec_request, "_metadata_answer", noted)
    async with read_by_hand(two_kafka_nodes.servers[0].bootstrap) as (cluster, reader):
        first = await reader.read(1000)
        await cluster.poll_once()
        assert len(first.topics[topic]) == 4 and len(first.live_brokers) == 2
        leaders_before = cluster.leaders
        decodes.clear()
        named = set(controllers[-1:])
        deadline = time.monotonic() + 60
        while len(named) < 2 and time.monotonic() < deadline:
            reading = await reader.read(2000)
            named.add(controllers[-1])
            assert figures(reading) == figures(first)
            await cluster.poll_once()  # takes topic health's reading
        assert named == {server.node_id for server in two_kafka_nodes.servers}, controllers
        assert decodes == Counter(), (decodes, controllers)
        assert cluster.leaders is leaders_before
