"""Hostile produced batches against a running broker: each refused with Kafka's code and nothing stored, or
stored with the records' own max timestamp; a decompression bomb costs neither memory nor other clients' time."""

from __future__ import annotations

import asyncio
import time

import pytest
import zstandard
from confluent_kafka import Consumer, TopicPartition

from broker.client import KafkaConnection
from broker.protocol.api import ApiKey
from broker.protocol.records import (
    COMPRESSION_NONE,
    COMPRESSION_ZSTD,
    HEADER_SIZE,
    BatchHeader,
    Record,
    build_batch,
)
from tests.forged_batches import relabel, varint, zstd_of
from tests.integration.burrow_support import proc_status_bytes
from tests.integration.harness import BrokerProcess, unique_name
from tests.integration.test_broker_configs import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.alone]  # asserts answer times

YEAR_2100 = 4_102_444_800_000
GIB = 1 << 30


def now_ms() -> int:
    return int(time.time() * 1000)


async def produce(connection: KafkaConnection, topic: str, batch: bytes) -> dict:
    answer = await connection.request(ApiKey.PRODUCE, {
        "transactional_id": None, "acks": 1, "timeout_ms": 30_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}, version=9)
    return answer["responses"][0]["partition_responses"][0]


async def list_offset(connection: KafkaConnection, topic: str, timestamp: int) -> dict:
    answer = await connection.request(ApiKey.LIST_OFFSETS, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]}, version=7)
    return answer["topics"][0]["partitions"][0]


async def produce_while_probing(bootstrap: str, topic: str, batch: bytes) -> tuple[dict, float, float]:
    """Produce ``batch`` while another connection asks ApiVersions over and over: (the produce answer, the
    seconds it took, the longest an ApiVersions waited)."""
    async with await KafkaConnection.connect(bootstrap) as producer, \
            await KafkaConnection.connect(bootstrap) as prober:
        started = time.monotonic()
        answer = asyncio.ensure_future(produce(producer, topic, batch))
        slowest = 0.0
        while not answer.done():
            asked = time.monotonic()
            await prober.request(ApiKey.API_VERSIONS, {"client_software_name": "probe",
                                                        "client_software_version": "1"}, version=3)
            slowest = max(slowest, time.monotonic() - asked)
        return await answer, time.monotonic() - started, slowest


async def log_end(bootstrap: str, topic: str) -> int:
    async with await KafkaConnection.connect(bootstrap) as connection:
        return (await list_offset(connection, topic, -1))["offset"]


def record_bytes(records: list[Record]) -> bytes:
    return build_batch(records)[HEADER_SIZE:]


@pytest.fixture
def own_broker(tmp_path):
    """A broker of the test's own, so that its peak memory is the test's alone."""
    with BrokerProcess(tmp_path / "data") as process:
        yield process


@pytest.mark.parametrize("case", ["future max timestamp, default limit", "1 MiB max.decompressed.message.bytes"])
def test_a_decompression_bomb_is_refused_with_memory_bounded_and_others_served(own_broker, case):
    broker = own_broker
    topic = unique_name("bomb")
    stamp = now_ms()
    if case.startswith("future"):
        create_topic(broker.bootstrap, topic, {})
        # one counted record, then a GiB of zeros behind it; the header claims a max timestamp in 2100
        body = zstd_of(record_bytes([Record(0, stamp, b"k", b"v")]), GIB)
    else:
        create_topic(broker.bootstrap, topic, {"max.decompressed.message.bytes": str(1 << 20)})
        # one record declaring a GiB value of zeros
        head = b"\x00\x00\x00\x00" + varint(GIB)  # attributes, deltas, null key, value length
        body = zstd_of(varint(len(head) + GIB + 1) + head, GIB) + zstandard.ZstdCompressor().compress(b"\x00")
    bomb = relabel(build_batch([Record(0, stamp, b"k", b"v")], compression=COMPRESSION_ZSTD), body=body,
                   max_timestamp=YEAR_2100)
    assert len(bomb) < 100_000
    peak_before = proc_status_bytes(broker.proc.pid, "VmHWM")
    answer, took, slowest = asyncio.run(produce_while_probing(broker.bootstrap, topic, bomb))
    grown = proc_status_bytes(broker.proc.pid, "VmHWM") - peak_before
    assert answer["error_code"] == 87, answer  # INVALID_RECORD
    assert answer["record_errors"] == []
    assert asyncio.run(log_end(broker.bootstrap, topic)) == 0
    assert grown < 64 << 20, f"the broker's peak RSS grew {grown >> 20} MiB"
    assert took < 3.0 and slowest < 1.0, (took, slowest)  # milliseconds when quiet; 2.7 s before the walk


def test_a_header_claiming_year_2100_is_stored_with_the_records_own_max_timestamp(broker):
    topic = unique_name("future-header")
    create_topic(broker.bootstrap, topic, {})
    stamp = now_ms()
    lying = relabel(build_batch([Record(0, stamp - 5, b"k", b"a"), Record(1, stamp, b"k", b"b")]),
                    max_timestamp=YEAR_2100)

    async def produce_and_ask() -> tuple[dict, dict]:
        async with await KafkaConnection.connect(broker.bootstrap) as connection:
            answer = await produce(connection, topic, lying)
            return answer, await list_offset(connection, topic, -3)  # MAX_TIMESTAMP

    answer, latest = asyncio.run(produce_and_ask())
    assert answer["error_code"] == 0
    assert (latest["offset"], latest["timestamp"]) == (1, stamp)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique_name("g"),
                         "enable.auto.commit": False, "check.crcs": True})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                seen.append((message.offset(), message.timestamp()[1], message.value()))
    finally:
        consumer.close()
    assert seen == [(0, stamp - 5, b"a"), (1, stamp, b"b")]


async def stored_header(bootstrap: str, topic: str) -> BatchHeader:
    async with await KafkaConnection.connect(bootstrap) as connection:
        answer = await connection.request(ApiKey.FETCH, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}, version=11)
    return BatchHeader.parse(bytes(answer["responses"][0]["partitions"][0]["records"]))


def test_the_stored_header_carries_the_records_max_timestamp_and_a_valid_crc(broker):
    topic = unique_name("fixed-header")
    create_topic(broker.bootstrap, topic, {})
    stamp = now_ms()
    lying = relabel(build_batch([Record(0, stamp, b"k", b"v")], compression=COMPRESSION_ZSTD),
                    max_timestamp=YEAR_2100)

    async def run() -> dict:
        async with await KafkaConnection.connect(broker.bootstrap) as connection:
            return await produce(connection, topic, lying)

    assert asyncio.run(run())["error_code"] == 0
    header = asyncio.run(stored_header(broker.bootstrap, topic))
    assert header.max_timestamp == stamp


@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_ZSTD])
def test_a_header_counting_one_record_for_two_is_refused(broker, codec):
    topic = unique_name("miscount")
    create_topic(broker.bootstrap, topic, {})
    stamp = now_ms()
    two = build_batch([Record(0, stamp, b"k", b"a"), Record(1, stamp, b"k", b"b")], compression=codec)
    lying = relabel(two, records_count=1, last_offset_delta=0)

    async def run() -> dict:
        async with await KafkaConnection.connect(broker.bootstrap) as connection:
            return await produce(connection, topic, lying)

    answer = asyncio.run(run())
    assert answer["error_code"] == 87, answer  # INVALID_RECORD
    assert asyncio.run(log_end(broker.bootstrap, topic)) == 0
