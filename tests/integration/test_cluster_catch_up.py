"""A broker of a cluster catching up with the metadata (ClusterNode.catch_up): a broker in process, a cluster of
one with real Raft and gossip on 127.0.0.1, its reconciling watched from the outside."""

from __future__ import annotations

import asyncio
import json

import pytest
from cluster_harness import FAST_CLUSTER, SECRET, free_udp_port
from harness import free_port, poll_until

from broker.broker import Broker
from broker.cluster.node import ClusterTopicAdmin
from broker.config import BrokerConfig

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def broker(tmp_path):
    cluster = {"secret": SECRET,
               "raft": {"listen": f"127.0.0.1:{free_port()}", "peers": {}, **FAST_CLUSTER["raft"]},
               "gossip": {"listen": f"127.0.0.1:{free_udp_port()}", "seeds": [], **FAST_CLUSTER["gossip"]},
               "controller": FAST_CLUSTER["controller"]}
    path = tmp_path / "broker.yaml"
    path.write_text(json.dumps({"offsets.topic.replication.factor": 1, "default.replication.factor": 1,
                                "transaction.state.log.replication.factor": 1, "cluster": cluster}))
    config = BrokerConfig.load(path, listen=f"127.0.0.1:{free_port()}", data_dir=str(tmp_path / "data"), node_id=1)
    started = Broker(config)
    await started.start()
    yield started
    await started.stop()


async def test_barriers_reconcile_nothing_while_a_change_does(broker):
    node = broker.cluster
    await poll_until(lambda: node.raft.ready and node.metadata.brokers.get(1), message="the broker registered")
    # Which command (its op, and the topic it names) was being applied whenever the broker reconciled.
    applied: list[str] = []
    applying: list[tuple[str, str | None]] = []
    reconciled_after: list[tuple[str, str | None]] = []
    on_applied, reconcile = node.on_applied, node.reconcile

    def watched_on_applied(command, result) -> None:
        applied.append(command["op"])
        applying.append((command["op"], command.get("name")))
        try:
            on_applied(command, result)
        finally:
            applying.pop()

    def watched_reconcile() -> None:
        if applying:
            reconciled_after.append(applying[-1])
        reconcile()

    node.on_applied, node.reconcile = watched_on_applied, watched_reconcile
    await asyncio.gather(*(node.catch_up() for _ in range(5)))
    await ClusterTopicAdmin(node).create_topic("after-the-barriers", 2, {}, 1)
    # commands apply in order: once the topic's creation was reconciled, every barrier before it was applied
    await poll_until(lambda: ("create_topic", "after-the-barriers") in reconciled_after,
                     message="the topic's creation reconciled")
    assert 1 <= applied.count("barrier") <= 2  # five callers at once share one barrier, or two
    assert [op for op, _ in reconciled_after if op == "barrier"] == []
    assert broker.partition_log("after-the-barriers", 1) is not None
