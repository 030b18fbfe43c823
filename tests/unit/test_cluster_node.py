"""The cluster node carrying out what the metadata says, on one broker's real logs, replica manager and
transaction coordinator, with no network: the node is built but not started, and its metadata is what the Raft
node would hold after applying the commands (applied here, then announced as Raft announces them)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from file_audit import file_changes
from log_harness import batch

from broker.broker import Broker, ProducerIdAllocator
from broker.cluster.config import ClusterConfig
from broker.cluster.metadata import ClusterMetadata
from broker.cluster.node import ClusterNode
from broker.cluster.view import ReplicatedView
from broker.config import BrokerConfig, Section
from broker.dynamic_config import DynamicBrokerConfigs
from broker.errors import ErrorCode, KafkaError
from broker.log.manager import LogManager
from broker.topics import TRANSACTIONS_TOPIC
from broker.txn.coordinator import TransactionCoordinator

ME, OTHER = 1, 2
SECRET = "0123456789abcdef0123456789abcdef"


def cluster_config() -> ClusterConfig:
    return ClusterConfig.from_section(Section("broker.yaml", "cluster", {
        "secret": SECRET, "raft": {"listen": "127.0.0.1:7001", "peers": {OTHER: "127.0.0.1:7002"}},
        "gossip": {"listen": "127.0.0.1:7101", "seeds": ["127.0.0.1:7102"]}}), ME)


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[ClusterNode]:
    data_dir = tmp_path / "data"
    broker = Broker(BrokerConfig.load(None, data_dir=str(data_dir), node_id=ME,
                                      overrides={"transaction.state.log.num.partitions": 2}))
    broker.logs = LogManager(data_dir / "logs", broker.config.topic_defaults(), auto_high_watermark=False)
    broker.dynamic_configs = DynamicBrokerConfigs(broker.config, persist=False)
    broker.producer_ids = ProducerIdAllocator(data_dir / "producer-ids.json", base=ME << 40)
    broker.transactions = TransactionCoordinator(broker, clustered=True)
    node = ClusterNode(broker, cluster_config())
    broker.cluster = node
    broker.replica_manager = node.replicas
    broker.cluster_view = ReplicatedView(node)
    node.raft.state = ClusterMetadata()
    node.raft.ready = True  # as after catching up with the quorum
    node.raft._quorum_seen_at = float("inf")  # and in touch with its leader for the whole test (no Raft runs here)
    for node_id in (ME, OTHER):
        apply(node, op="register_broker", node_id=node_id, host="127.0.0.1", port=9000 + node_id, rack=None)
    yield node
    await asyncio.gather(*node._group_tasks, return_exceptions=True)
    broker.logs.close()


def apply(node: ClusterNode, **command: Any) -> None:
    """Apply a committed command to the node's metadata and tell the node, as its Raft node does."""
    result = node.metadata.apply(command)
    assert result["error_code"] == 0, result
    node.on_applied(command, result)


async def coordination_of(coordinator: TransactionCoordinator, transactional_id: str, expected: ErrorCode,
                          timeout: float = 5.0) -> None:
    """Wait until DescribeTransactions of the id answers ``expected`` (the partition's load or unload is a
    task of its own)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while (answer := (await coordinator.describe([transactional_id]))[0]["error_code"]) != expected:
        assert asyncio.get_running_loop().time() < deadline, f"still {ErrorCode(answer).name}"
        await asyncio.sleep(0.01)


async def create(node: ClusterNode, name: str, assignments: list[list[int]], topic_id: str) -> None:
    """Create a topic as the metadata says, and wait until its local logs are made (on a thread of their own)."""
    apply(node, op="create_topic", name=name, topic_id=topic_id, partitions=len(assignments),
          replication_factor=len(assignments[0]), configs={"retention.ms": "60000"}, assignments=assignments)
    await node.local_topic_settled(name)


async def test_topics_are_created_led_reconfigured_and_deleted_as_the_metadata_says(node):
    broker = node.broker
    await create(node, "orders", [[ME], [OTHER]], "11" * 16)
    local = broker.logs.topics["orders"]
    assert (local.topic_id, local.partition_count) == (bytes.fromhex("11" * 16), 2)
    assert local.config.retention_ms == 60000
    assert broker.cluster_view.leader_epoch("orders", 0) == 0  # taken up: this broker acts as its leader
    with pytest.raises(KafkaError) as refused:
        broker.cluster_view.leader_epoch("orders", 1)  # another broker's, and no replica here
    assert refused.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    apply(node, op="alter_configs", name="orders", replace=True, configs={"retention.ms": "5000"})
    assert broker.logs.topics["orders"].config.retention_ms == 5000
    apply(node, op="create_partitions", name="orders", count=3, assignments=[[ME]])
    await node.local_topic_settled("orders")
    assert broker.logs.topics["orders"].partition_count == 3 and broker.cluster_view.leader_epoch("orders", 2) == 0
    apply(node, op="delete_topic", name="orders")
    assert "orders" not in broker.logs.topics
    await create(node, "orders", [[ME]], "22" * 16)  # the same name again, a new topic
    assert broker.logs.topics["orders"].topic_id == bytes.fromhex("22" * 16)
    assert node.partition_leader("orders", 0) == (ME, 0, [ME], [ME])


async def test_a_deleted_topics_files_go_off_the_event_loop_before_its_name_is_made_again(node):
    """The metadata's deletion takes the topic out of the local tables at once; its logs are closed and its
    directories renamed on a thread (for 1,000 partitions, 0.1 s and more of the event loop), and a topic of the same
    name the metadata creates meanwhile is made once they are out of the way."""
    broker = node.broker
    await create(node, "orders", [[ME]] * 20, "11" * 16)
    broker.logs.get_log("orders", 3).append(batch(3))
    data = Path(broker.logs.data_dir)
    with file_changes() as changes:  # this thread's: the event loop's
        apply(node, op="delete_topic", name="orders")
        assert "orders" not in broker.logs.topics
        apply(node, op="create_topic", name="orders", topic_id="22" * 16, partitions=2, replication_factor=1,
              configs={}, assignments=[[ME], [ME]])
    assert not changes
    await node.local_topic_settled("orders")
    assert sorted(path.name for path in data.glob("orders-*")) == ["orders-0", "orders-1"]
    assert len([path for path in data.iterdir() if path.name.endswith("-delete")]) == 20
    again = broker.logs.topics["orders"]
    assert again.topic_id == bytes.fromhex("22" * 16) and again.partitions[0].log_end_offset == 0
    assert node.partition_leader("orders", 1) == (ME, 0, [ME], [ME])


async def test_transaction_coordination_follows_the_leadership_of_the_state_partitions(node):
    broker = node.broker
    coordinator: TransactionCoordinator = broker.transactions
    await create(node, "orders", [[ME]], "11" * 16)
    await create(node, TRANSACTIONS_TOPIC, [[ME], [ME]], "33" * 16)
    await coordination_of(coordinator, "t", ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)  # loaded: known to be unknown
    error, producer_id, epoch = await coordinator.init_producer_id("t", 10_000, -1, -1, ErrorCode.PRODUCER_FENCED)
    assert error == ErrorCode.NONE and producer_id >> 40 == ME  # from this broker's range
    assert await coordinator.add_partitions("t", producer_id, epoch, [("orders", 0)], ErrorCode.PRODUCER_FENCED) \
        == {("orders", 0): ErrorCode.NONE}
    # this broker fenced: the partitions it alone replicates have no leader, so it coordinates nothing
    apply(node, op="fence_broker", node_id=ME)
    assert node.partition_leader(TRANSACTIONS_TOPIC, coordinator.partition_for("t"))[0] == -1
    await coordination_of(coordinator, "t", ErrorCode.NOT_COORDINATOR)
    assert await coordinator.end_txn("t", producer_id, epoch, True, ErrorCode.PRODUCER_FENCED) == \
        ErrorCode.NOT_COORDINATOR
    # back: the state is rebuilt from the partition, the open transaction with it
    apply(node, op="register_broker", node_id=ME, host="127.0.0.1", port=9001, rack=None)
    await coordination_of(coordinator, "t", ErrorCode.NONE)
    [described] = await coordinator.describe(["t"])
    assert (described["transaction_state"], described["producer_id"]) == ("Ongoing", producer_id)


async def test_clients_are_told_the_live_brokers_and_the_controller(node):
    assert [b[0] for b in node.live_brokers()] == [ME, OTHER]
    apply(node, op="fence_broker", node_id=OTHER)
    assert [b[0] for b in node.live_brokers()] == [ME]
    assert node.controller_id() == -1  # no Raft leader known: the node is not started
