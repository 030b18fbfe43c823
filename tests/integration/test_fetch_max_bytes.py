"""Fetch's response limit (KIP-74): a response never carries more than the request's ``max_bytes``, except that
the first partition with data may return one whole batch larger than the limits. A real client (kafka-python,
which reports the largest response it received) and a request on the wire, against a real broker; and a
follower held to its limit, which must not leave the partitions at the back of its requests waiting."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest
from harness import poll_until, recv_exactly, unique_name, wait_until
from kafka import KafkaConsumer, TopicPartition
from replication_harness import static_pair

from broker.client import KafkaConnection
from broker.protocol.api import ApiKey, decode_response, encode_request
from broker.protocol.records import Record, build_batch

pytestmark = pytest.mark.integration

PARTITIONS = 3
VALUE_BYTES = 400_000  # one record per batch: three batches of ~400 KB, two of which fit in 1 MB
RESPONSE_MAX_BYTES = 1_000_000
PARTITION_MAX_BYTES = 1 << 20
FRAME_OVERHEAD = 1_000  # headers, topic name, partition fields: everything in a response but the records
# the broker's own cap, above RESPONSE_MAX_BYTES's two batches and below three
BROKER_CONFIG = {"fetch.max.bytes": 900_000}


@pytest.fixture(scope="module")
def topic(broker) -> str:
    """A topic whose partitions each hold one batch of one ~400 KB record."""
    name = unique_name("wide")

    async def fill() -> None:
        async with await KafkaConnection.connect(broker.bootstrap) as connection:
            created = await connection.request(ApiKey.CREATE_TOPICS, {"topics": [{
                "name": name, "num_partitions": PARTITIONS, "replication_factor": 1, "assignments": [],
                "configs": []}], "timeout_ms": 10000})
            assert created["topics"][0]["error_code"] == 0, created
            for partition in range(PARTITIONS):
                batch = build_batch([Record(0, 0, None, bytes([partition]) * VALUE_BYTES)])
                answer = await connection.request(ApiKey.PRODUCE, {
                    "transactional_id": None, "acks": 1, "timeout_ms": 10000, "topic_data": [{
                        "name": name, "partition_data": [{"index": partition, "records": batch}]}]})
                assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0, answer

    asyncio.run(fill())
    return name


def fetch_on_the_wire(port: int, topic: str, max_bytes: int) -> tuple[int, list[int]]:
    """One Fetch v11 for every partition from offset 0: the response frame's size and each partition's
    record bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(encode_request(ApiKey.FETCH, 11, 1, "max-bytes-test", {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": PARTITION_MAX_BYTES} for p in range(PARTITIONS)]}]}))
        (size,) = struct.unpack(">i", recv_exactly(sock, 4))
        frame = recv_exactly(sock, size)
    _, answer = decode_response(ApiKey.FETCH, 11, frame)
    parts = sorted(answer["responses"][0]["partitions"], key=lambda p: p["partition_index"])
    assert [p["error_code"] for p in parts] == [0] * PARTITIONS
    return len(frame), [len(p["records"] or b"") for p in parts]


def test_a_response_holds_only_what_fits_in_max_bytes(broker, topic):
    size, records = fetch_on_the_wire(broker.port, topic, RESPONSE_MAX_BYTES)
    batch = records[0]
    assert batch > VALUE_BYTES
    # two whole batches fit; the third would take the response past max_bytes, so it waits for the next fetch
    assert records == [batch, batch, 0]
    assert size <= RESPONSE_MAX_BYTES + FRAME_OVERHEAD


def test_only_the_first_partition_may_exceed_the_limit_by_one_batch(broker, topic):
    size, records = fetch_on_the_wire(broker.port, topic, VALUE_BYTES // 2)
    assert records[0] > VALUE_BYTES and records[1:] == [0] * (PARTITIONS - 1)
    assert size <= records[0] + FRAME_OVERHEAD


def test_the_brokers_fetch_max_bytes_caps_a_request_asking_for_more(broker, topic):
    size, records = fetch_on_the_wire(broker.port, topic, 50 * RESPONSE_MAX_BYTES)
    batch = records[0]
    assert records == [batch, batch, 0]  # the third batch would pass fetch.max.bytes
    assert size <= BROKER_CONFIG["fetch.max.bytes"] + FRAME_OVERHEAD


def test_a_real_consumer_never_gets_a_response_over_fetch_max_bytes(broker, topic):
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, fetch_max_bytes=RESPONSE_MAX_BYTES,
                             max_partition_fetch_bytes=PARTITION_MAX_BYTES, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=1000)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        received: list[bytes] = []

        def all_received() -> bool:
            for records in consumer.poll(timeout_ms=500).values():
                received.extend(record.value for record in records)
            return len(received) == PARTITIONS

        wait_until(all_received, 30, message="every record consumed")
        assert sorted(value[0] for value in received) == list(range(PARTITIONS))
        assert all(len(value) == VALUE_BYTES for value in received)
        largest = next(metric.value() for name, metric in consumer._metrics.metrics.items()
                       if name.name == "fetch-size-max" and "topic" not in name.tags)
        assert VALUE_BYTES < largest <= RESPONSE_MAX_BYTES
    finally:
        consumer.close()


async def test_a_follower_held_to_its_response_limit_replicates_every_partition_in_turn(tmp_path):
    """Each response to a follower carries only what fits (two ~400 KB batches of 1 MB here), so the follower
    puts the partitions that got records at the back of its next request: every partition moves, not the first
    until it has caught up (Kafka's fetcher does the same)."""
    async with static_pair(tmp_path, {"offsets.topic.num.partitions": 1,
                                     "replica.fetch.response.max.bytes": RESPONSE_MAX_BYTES}) as brokers:
        for broker in brokers:
            broker.create_topic("turns", PARTITIONS, {})
        leader, follower = brokers
        batches = 4
        async with await KafkaConnection.connect(f"127.0.0.1:{leader.port}") as connection:
            for partition in range(PARTITIONS):
                leader.lead("turns", partition, 0, [1, 2], [1])
                for _ in range(batches):
                    batch = build_batch([Record(0, 0, None, bytes(VALUE_BYTES))])
                    answer = await connection.request(ApiKey.PRODUCE, {
                        "transactional_id": None, "acks": 1, "timeout_ms": 10000, "topic_data": [{
                            "name": "turns", "partition_data": [{"index": partition, "records": batch}]}]})
                    assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0, answer
        for partition in range(PARTITIONS):
            follower.follow("turns", partition, 0, 1, [1, 2])
        ends = [follower.partition_log("turns", p).log_end_offset for p in range(PARTITIONS)]

        def last_partition_started() -> bool:
            ends[:] = [follower.partition_log("turns", p).log_end_offset for p in range(PARTITIONS)]
            return ends[-1] > 0

        # looked at on every turn of the event loop the brokers share: a fetch round takes several turns (network
        # reads and writes), so none is missed, as poll_until's pauses could miss the few milliseconds of one
        deadline = asyncio.get_running_loop().time() + 20
        while not last_partition_started():
            assert asyncio.get_running_loop().time() < deadline, f"the last partition never started: {ends}"
            await asyncio.sleep(0)
        assert ends[0] < batches, f"the first partition was copied whole before the last began: {ends}"
        await poll_until(lambda: all(follower.partition_log("turns", p).log_end_offset == batches
                                     for p in range(PARTITIONS)), message="every partition replicated")
