"""The replica fetcher's broker configs at work: in a three-broker cluster of real processes, and between two
brokers in the test's event loop (replication_harness.StaticClusterBroker, leadership assigned by hand)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import time

import pytest
from cluster_harness import BrokerCluster
from harness import poll_until, wait_until
from replication_harness import static_pair

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

    def led_by_its_leader() -> int | None:
        """The leader, once its own metadata names it with every replica in sync (another broker's view may be
        ahead of it)."""
        leader = cluster.partitions("held")[0]["leader_id"]
        own = cluster.partitions("held", leader)[0]
        return leader if own["leader_id"] == leader and sorted(own["isr_nodes"]) == [1, 2, 3] else None

    leader = wait_until(led_by_its_leader, 30, message="the leader to know it leads the partition")

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


def follower_connections(leader_port: int) -> list[str]:
    """What ``ss -tmn`` shows of each connection to ``leader_port`` (its memory: ``rb`` is the receive buffer,
    twice what was asked for on Linux)."""
    shown = subprocess.run(["ss", "-Htmn", "state", "established", f"( dport = :{leader_port} )"],
                           capture_output=True, text=True, check=True).stdout
    return re.findall(r"skmem:\([^)]*\)", shown)


async def test_num_replica_fetchers_spreads_partitions_over_connections_and_changes_at_run_time(tmp_path):
    """num.replica.fetchers 2: the follower copies the leader's partitions over two connections, each with the
    configured replica.socket.receive.buffer.bytes; set to 1 while it runs (IncrementalAlterConfigs, as Kafka
    allows), the partitions move to one fetcher and keep replicating."""
    async with static_pair(tmp_path, {"offsets.topic.num.partitions": 1, "num.replica.fetchers": 2,
                                     "replica.socket.receive.buffer.bytes": 24576}) as brokers:
        for broker in brokers:
            broker.create_topic("spread", 2, {})
        leader, follower = brokers
        for partition in range(2):  # Kafka's spread puts partition 0 of "spread" on fetcher 1, partition 1 on 0
            leader.lead("spread", partition, 0, [1, 2], [1])

        async def produce_to_both(text: str) -> None:
            async with await KafkaConnection.connect(f"127.0.0.1:{leader.port}") as connection:
                for partition in range(2):
                    answer = await connection.request(ApiKey.PRODUCE, {
                        "acks": 1, "timeout_ms": 10000, "topic_data": [{"name": "spread", "partition_data": [
                            {"index": partition, "records": build_batch([Record(0, 0, None, text.encode())])}]}]})
                    assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0, answer

        def replicated(count: int) -> bool:
            return all(follower.partition_log("spread", p).log_end_offset == count for p in range(2))

        await produce_to_both("before")
        for partition in range(2):
            follower.follow("spread", partition, 0, 1, [1, 2])
        await poll_until(lambda: replicated(1), message="both partitions on the follower")
        connections = await poll_until(lambda: (found := follower_connections(leader.port)) and len(found) == 2
                                       and found, message="two fetcher connections")
        assert all(",rb49152," in memory for memory in connections), connections

        async with await KafkaConnection.connect(f"127.0.0.1:{follower.port}") as connection:
            answer = await connection.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, {"resources": [
                {"resource_type": 4, "resource_name": "2", "configs": [
                    {"name": "num.replica.fetchers", "config_operation": 0, "value": "1"}]}],
                "validate_only": False}, version=1)
        assert answer["responses"][0]["error_code"] == 0, answer
        await poll_until(lambda: len(follower_connections(leader.port)) == 1, message="one fetcher connection")
        await produce_to_both("after")
        await poll_until(lambda: replicated(2), message="both partitions replicated by the one fetcher")
        assert len(follower_connections(leader.port)) == 1
