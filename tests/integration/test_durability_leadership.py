"""A broker leads a partition, or names its leader to clients, only from metadata the Raft quorum committed,
once it has caught up with it.

The operator's scenario of issue 30: three brokers, RF 3, ``min.insync.replicas`` 2, an idempotent
``acks=all`` producer recording every acknowledgement. Both followers are paused (SIGSTOP) and the leader is
killed (kill -9) and started again: its Raft cannot reach a quorum, so all it knows is the journal it replayed,
and it must not acknowledge anything. The followers then return without it and elect a new leader from the
ISR; after the old leader rejoins, every acknowledged record is there, once, in the order it was produced.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from cluster_harness import BrokerCluster
from harness import wait_until

from broker.client import KafkaConnection
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey
from broker.protocol.records import decode_records_any, iter_batches

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "durable"


class RecordingProducer:
    """An idempotent acks=all producer that records each acknowledged value, in the order acknowledged."""

    def __init__(self, bootstrap: str, message_timeout_ms: int) -> None:
        self.acknowledged: list[bytes] = []
        self.failed: list[bytes] = []
        self._producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "message.timeout.ms": message_timeout_ms, "socket.timeout.ms": 1000,
            "topic.metadata.refresh.interval.ms": 500, "retry.backoff.ms": 100, "linger.ms": 5})

    def _report(self, error: Any, message: Any) -> None:
        (self.failed if error is not None else self.acknowledged).append(message.value())

    def produce(self, values: list[bytes], timeout: float) -> None:
        """Send ``values`` to partition 0 and wait until each has its delivery report (or fail after ``timeout``)."""
        reported = len(self.acknowledged) + len(self.failed) + len(values)
        for value in values:
            self._producer.produce(TOPIC, value=value, partition=0, on_delivery=self._report)
        wait_until(lambda: self._producer.poll(0.1) >= 0 and len(self.acknowledged) + len(self.failed) >= reported,
                   timeout, message=f"delivery reports for {len(values)} records")


def _leader(cluster: BrokerCluster, asked: int) -> tuple[int, int]:
    partition = cluster.partitions(TOPIC, asked)[0]
    return partition["leader_id"], partition["leader_epoch"]


async def _fetch(connection: KafkaConnection, offset: int) -> dict[str, Any]:
    answer = await connection.request(ApiKey.FETCH, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic": TOPIC, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}, version=11)
    return answer["responses"][0]["partitions"][0]


async def _read_errors(bootstrap: str) -> tuple[int, int]:
    """The error codes of a consumer's Fetch and ListOffsets (latest) for partition 0 at ``bootstrap``."""
    async with await KafkaConnection.connect(bootstrap, timeout=10) as connection:
        fetched = await _fetch(connection, 0)
        offsets = await connection.request(ApiKey.LIST_OFFSETS, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    return fetched["error_code"], offsets["topics"][0]["partitions"][0]["error_code"]


async def _read_all(bootstrap: str) -> list[bytes] | None:
    """Every record value of partition 0 up to its high watermark, from its leader at ``bootstrap``; None while
    that broker does not serve it as leader."""
    values: list[bytes] = []
    offset = 0
    async with await KafkaConnection.connect(bootstrap, timeout=10) as connection:
        while True:
            partition = await _fetch(connection, offset)
            if partition["error_code"]:
                return None
            data = bytes(partition["records"])
            for pos, header in iter_batches(data):
                for record in decode_records_any(data[pos:pos + header.batch_length + 12]):
                    if record.offset >= offset:
                        values.append(record.value)
                        offset = record.offset + 1
            if offset >= partition["high_watermark"]:
                return values


def read_from_leader(cluster: BrokerCluster, asked: int) -> list[bytes]:
    def attempt() -> list[bytes] | None:
        leader, _epoch = _leader(cluster, asked)
        return None if leader < 0 else asyncio.run(_read_all(cluster.brokers[leader].bootstrap))

    return wait_until(attempt, 30, interval=0.2, message="a leader to serve the partition")


def assert_every_acknowledged_record_once_in_order(log: list[bytes], acknowledged: list[bytes]) -> None:
    missing = [value for value in acknowledged if value not in log]
    assert not missing, f"{len(missing)} acknowledged records lost: {missing[:5]}"
    twice = [value for value in acknowledged if log.count(value) > 1]
    assert not twice, f"records stored twice: {twice[:5]}"
    positions = [log.index(value) for value in acknowledged]
    assert positions == sorted(positions), "acknowledged records out of order"


def test_a_leader_restarted_without_its_quorum_acknowledges_nothing(tmp_path):
    cluster = BrokerCluster(tmp_path / "cluster", settings={"min.insync.replicas": 2})
    try:
        cluster.start()
        assert cluster.create_topic(1, TOPIC, 1, 3)["error_code"] == 0
        cluster.wait_healthy()
        leader, epoch = _leader(cluster, 1)
        followers = [i for i in cluster.ids if i != leader]

        producer = RecordingProducer(cluster.bootstrap, message_timeout_ms=6000)
        producer.produce([f"before-{i}".encode() for i in range(100)], timeout=20)
        assert len(producer.acknowledged) == 100, producer.failed[:5]

        # pysyncobj saves how far its journal is committed within a second after that changes: as after any
        # operator's pause, the leader's journal must know the topic is committed, so that the restarted leader
        # replays it. Any save from now on does; one more commit makes sure there is one.
        produced = time.time()
        assert cluster.create_topic(leader, "one-more-commit", 1, 1)["error_code"] == 0
        journal_meta = cluster.brokers[leader].data_dir / "raft" / "raft.journal.meta"
        wait_until(lambda: journal_meta.stat().st_mtime > produced, 10, message="the Raft journal's commit index saved")
        for follower in followers:
            cluster.pause(follower)
        cluster.kill(leader)
        cluster.restart(leader)
        # Its Raft cannot reach a quorum: whatever it is sent must fail (checked at the end, after what counts most).
        producer.produce([f"restarted-{i}".encode() for i in range(20)], timeout=20)
        acknowledged_alone = [value for value in producer.acknowledged if value.startswith(b"restarted-")]
        read_errors_alone = asyncio.run(_read_errors(cluster.brokers[leader].bootstrap))
        named_alone = cluster.partitions(TOPIC, leader)[0]

        # The followers return without the old leader and elect one of them.
        cluster.kill(leader)
        for follower in followers:
            cluster.resume(follower)
        wait_until(lambda: _leader(cluster, followers[0])[0] in followers
                   and _leader(cluster, followers[0])[1] > epoch, 30, interval=0.2,
                   message="a follower to be elected leader")
        after = RecordingProducer(",".join(cluster.brokers[i].bootstrap for i in followers), message_timeout_ms=20000)
        after.produce([f"after-{i}".encode() for i in range(20)], timeout=30)
        assert len(after.acknowledged) == 20, after.failed[:5]

        # The old leader rejoins, gives up whatever only it had, and the replicas agree again.
        cluster.restart(leader)
        cluster.wait_healthy()
        log = read_from_leader(cluster, leader)
        assert_every_acknowledged_record_once_in_order(log, producer.acknowledged + after.acknowledged)
        assert acknowledged_alone == [], f"{len(acknowledged_alone)} records acknowledged by a leader without its quorum"
        # Nor did it answer reads or offsets as the leader, from a view that may have been out of date.
        assert read_errors_alone == (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        # Nor did it point clients at the leader its replayed journal names, which may be out of date.
        assert (named_alone["leader_id"], named_alone["error_code"]) == (-1, ErrorCode.LEADER_NOT_AVAILABLE), named_alone
    finally:
        for node_id in cluster.ids:
            cluster.resume(node_id)
        cluster.stop()
