"""The replica fetcher's broker configs at work in a three-broker cluster of real processes."""

from __future__ import annotations

import asyncio
import time

import pytest
from cluster_harness import BrokerCluster

from broker.client import KafkaConnection
from broker.protocol.api import ApiKey
from broker.protocol.records import Record, build_batch

pytestmark = pytest.mark.integration

WAIT_MS = 1500


@pytest.fixture
def held_fetches(tmp_path):
    """Followers that ask for more than a small produce brings: the leader holds each of their fetches for
    replica.fetch.wait.max.ms, as Kafka's does."""
    cluster = BrokerCluster(tmp_path, settings={"replica.fetch.min.bytes": 1 << 20, "replica.fetch.wait.max.ms": WAIT_MS})
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def test_acks_all_waits_for_the_follower_fetch_the_leader_holds(held_fetches):
    """A record is committed once the followers have fetched it and fetched again; with their fetches held at
    the leader until replica.fetch.wait.max.ms ends, each acks=all produce after the first waits about that long
    (with Kafka's defaults, 1 byte and 500 ms, a fetch returns as soon as the record is there)."""
    cluster = held_fetches
    assert cluster.create_topic(1, "held", 1, 3)["error_code"] == 0
    cluster.wait_healthy()
    leader = cluster.partitions("held")[0]["leader_id"]

    async def produce_in_turn(count: int) -> list[float]:
        took = []
        async with await KafkaConnection.connect(cluster.brokers[leader].bootstrap) as connection:
            for index in range(count):
                batch = build_batch([Record(0, int(time.time() * 1000), None, f"record {index}".encode())])
                started = time.monotonic()
                answer = await connection.request(ApiKey.PRODUCE, {
                    "acks": -1, "timeout_ms": 10000,
                    "topic_data": [{"name": "held", "partition_data": [{"index": 0, "records": batch}]}]})
                took.append(time.monotonic() - started)
                assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0, answer
        return took

    took = asyncio.run(produce_in_turn(4))
    # the first may meet a fetch that has waited a while already; each later one meets the fetch a follower
    # sent as the previous was committed
    assert all(seconds >= 0.6 * WAIT_MS / 1000 for seconds in took[1:]), took
    assert sorted(cluster.partitions("held")[0]["isr_nodes"]) == [1, 2, 3]
