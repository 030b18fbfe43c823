"""unclean.leader.election.enable in a cluster of our brokers, as Kafka has it: when no in-sync replica of a
partition is alive, a topic that allows it is led again by a live out-of-sync replica (losing what only
the old leader had), while a topic that does not stays offline until an in-sync replica returns.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from cluster_harness import BrokerCluster
from harness import wait_until

from broker.client import KafkaConnection
from broker.protocol.api import ApiKey
from broker.protocol.records import Record, build_batch, decode_records_any, iter_batches

pytestmark = pytest.mark.integration

UNCLEAN, CLEAN = "unclean-allowed", "unclean-refused"


async def _request(bootstrap: str, api: int, body: dict[str, Any], version: int | None = None) -> dict[str, Any]:
    async with await KafkaConnection.connect(bootstrap, timeout=30) as connection:
        return await connection.request(api, body, version=version)


def create_on_brokers_1_and_2(bootstrap: str, name: str, unclean: bool) -> None:
    answer = asyncio.run(_request(bootstrap, ApiKey.CREATE_TOPICS, {"topics": [{
        "name": name, "num_partitions": -1, "replication_factor": -1,
        "assignments": [{"partition_index": 0, "broker_ids": [1, 2]}],
        "configs": [{"name": "unclean.leader.election.enable", "value": str(unclean).lower()}]}],
        "timeout_ms": 30000}))
    assert answer["topics"][0]["error_code"] == 0, answer


def produce(bootstrap: str, topic: str, values: list[bytes], acks: int = 1) -> int:
    batch = build_batch([Record(n, 1_700_000_000_000, b"k", value) for n, value in enumerate(values)])
    answer = asyncio.run(_request(bootstrap, ApiKey.PRODUCE, {
        "transactional_id": None, "acks": acks, "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}, 9))
    return answer["responses"][0]["partition_responses"][0]["error_code"]


def log_end(bootstrap: str, topic: str) -> int | None:
    """The partition's end offset as its leader at ``bootstrap`` answers it; None while it does not lead."""
    answer = asyncio.run(_request(bootstrap, ApiKey.LIST_OFFSETS, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}, 7))
    partition = answer["topics"][0]["partitions"][0]
    return None if partition["error_code"] else partition["offset"]


def values(bootstrap: str, topic: str) -> list[bytes] | None:
    """Every record value of partition 0, read from its leader at ``bootstrap``; None while it does not lead."""
    answer = asyncio.run(_request(bootstrap, ApiKey.FETCH, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                     "last_fetched_epoch": -1, "log_start_offset": -1,
                                                     "partition_max_bytes": 1 << 20}]}]}, 11))
    partition = answer["responses"][0]["partitions"][0]
    if partition["error_code"]:
        return None
    data = partition["records"]
    return [r.value for pos, header in iter_batches(data)
            for r in decode_records_any(data[pos:pos + header.batch_length + 12])]


def test_a_live_out_of_sync_replica_takes_over_only_where_allowed(tmp_path):
    cluster = BrokerCluster(tmp_path / "cluster")
    try:
        cluster.start()
        for name, unclean in ((UNCLEAN, True), (CLEAN, False)):
            create_on_brokers_1_and_2(cluster.brokers[3].bootstrap, name, unclean)
        cluster.wait_healthy()
        for name in (UNCLEAN, CLEAN):
            assert produce(cluster.brokers[1].bootstrap, name, [b"both have it"], acks=-1) == 0

        cluster.kill(2)  # broker 1 goes on alone: the ISR shrinks to [1]
        wait_until(lambda: all(cluster.partitions(n, 3)[0]["isr_nodes"] == [1] for n in (UNCLEAN, CLEAN)), 30,
                   message="the ISR to shrink to broker 1")
        for name in (UNCLEAN, CLEAN):
            assert produce(cluster.brokers[1].bootstrap, name, [b"only broker 1 has it"]) == 0
        cluster.kill(1)  # the last in-sync replica is gone (and the Raft quorum with it, until 2 returns)
        cluster.restart(2)

        def leaders() -> dict[str, int]:
            return {n: cluster.partitions(n, 3)[0]["leader_id"] for n in (UNCLEAN, CLEAN)}

        wait_until(lambda: leaders()[UNCLEAN] == 2, 60, message="broker 2 to lead the unclean topic")
        assert leaders()[CLEAN] == -1  # waits for broker 1, its only in-sync replica
        assert cluster.partitions(UNCLEAN, 3)[0]["isr_nodes"] == [2]
        # the record only broker 1 had is lost
        wait_until(lambda: log_end(cluster.brokers[2].bootstrap, UNCLEAN) is not None, 30,
                   message="broker 2 to take up the leadership")
        assert log_end(cluster.brokers[2].bootstrap, UNCLEAN) == 1
        assert produce(cluster.brokers[2].bootstrap, UNCLEAN, [b"after the unclean election"]) == 0

        cluster.restart(1)  # the old leader returns, truncates to broker 2's log and joins the ISR
        wait_until(lambda: sorted(cluster.partitions(UNCLEAN, 3)[0]["isr_nodes"]) == [1, 2], 60,
                   message="broker 1 to rejoin the unclean topic's ISR")
        # broker 1, the preferred replica, leads again with broker 2's history: its own last record is gone
        wait_until(lambda: leaders()[UNCLEAN] == 1 and values(cluster.brokers[1].bootstrap, UNCLEAN) is not None,
                   60, message="broker 1 to lead the unclean topic again")
        assert values(cluster.brokers[1].bootstrap, UNCLEAN) == [b"both have it", b"after the unclean election"]
        wait_until(lambda: leaders()[CLEAN] == 1, 60, message="broker 1 to lead the clean topic again")
        # nothing lost where unclean election was refused
        wait_until(lambda: log_end(cluster.brokers[1].bootstrap, CLEAN) is not None, 30,
                   message="broker 1 to take up the leadership")
        assert log_end(cluster.brokers[1].bootstrap, CLEAN) == 2
    finally:
        cluster.stop()
