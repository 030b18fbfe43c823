"""The handlers' replica manager on a single node's real logs, without a server: the log of a partition it
leads with the client's leader epoch checked as Kafka checks it, appends through the broker's, and acks=all
confirmed at once where nothing is replicated."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.cluster.view import SingleNodeView
from broker.errors import ErrorCode, KafkaError
from broker.log.manager import LogManager
from broker.log.partition import AppendResult
from broker.protocol.records import Record, build_batch
from broker.replica_manager import ReplicaManager

ME = 1


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    logs = LogManager(tmp_path / "logs", {}, auto_high_watermark=True)
    logs.create_topic("orders", 2, {})
    yield logs
    logs.close()


def manager(logs: LogManager, appended: list[tuple[str, int, int]] | None = None,
            waited: list[tuple[list[tuple[str, int]], float]] | None = None) -> ReplicaManager:
    def counts(topic: str) -> int | None:
        found = logs.topics.get(topic)
        return None if found is None else found.partition_count

    async def append(topic: str, partition: int, batch: bytes | memoryview, *, leader_epoch: int) -> AppendResult:
        assert appended is not None
        appended.append((topic, partition, leader_epoch))
        return logs.get_log(topic, partition).append(batch, leader_epoch=leader_epoch, now_ms=0)

    async def wait_for_appends(partitions: list[tuple[str, int]], timeout: float) -> None:
        assert waited is not None
        waited.append((partitions, timeout))

    view = SingleNodeView(ME, lambda: None, {}, lambda: ("127.0.0.1", 9092), counts)
    return ReplicaManager(logs, view, None, append, wait_for_appends, lambda: 0.0)


@pytest.mark.parametrize(("topic", "partition", "requested", "code"), [
    ("nope", 0, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ("orders", 2, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ("orders", 0, 1, ErrorCode.UNKNOWN_LEADER_EPOCH),  # the client knows a later epoch than this leader's
])
def test_a_partition_log_is_refused_as_kafka_refuses_it(logs: LogManager, topic: str, partition: int,
                                                       requested: int, code: ErrorCode) -> None:
    with pytest.raises(KafkaError) as refused:
        manager(logs).leader_log(topic, partition, requested)
    assert refused.value.code == code


async def test_appends_go_through_the_broker_and_are_confirmed_at_once_without_replication(logs: LogManager) -> None:
    appended: list[tuple[str, int, int]] = []
    waited: list[tuple[list[tuple[str, int]], float]] = []
    replicas = manager(logs, appended, waited)
    plog, epoch = replicas.leader_log("orders", 1, 0)
    assert plog is logs.get_log("orders", 1) and epoch == 0
    result = await replicas.append("orders", 1, build_batch([Record(offset=0, timestamp=0, key=None,
                                                                    value=b"v")]), epoch)
    assert appended == [("orders", 1, 0)] and result.last_offset == 0
    assert await replicas.confirm_in_sync([("orders", 1, 1)], 5.0) == [ErrorCode.NONE]
    replicas.follower_fetched(2, [("orders", 1, 1, 0)])  # no followers to count: nothing happens
    await replicas.wait_for_appends([("orders", 0)], 0.5)
    assert waited == [([("orders", 0)], 0.5)]
