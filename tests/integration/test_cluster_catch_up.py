"""A broker of a cluster catching up with the metadata (ClusterNode.catch_up): a broker in process, a cluster of
one with real Raft and gossip on 127.0.0.1, its reconciling watched from the outside."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

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

    def watched_reconcile(*limit: int) -> bool:
        if applying:
            reconciled_after.append(applying[-1])
        return reconcile(*limit)

    node.on_applied, node.reconcile = watched_on_applied, watched_reconcile
    await asyncio.gather(*(node.catch_up() for _ in range(5)))
    await ClusterTopicAdmin(node).create_topic("after-the-barriers", 2, {}, 1)
    # commands apply in order: once the topic's creation was reconciled, every barrier before it was applied
    await poll_until(lambda: ("create_topic", "after-the-barriers") in reconciled_after,
                     message="the topic's creation reconciled")
    assert 1 <= applied.count("barrier") <= 2  # five callers at once share one barrier, or two
    assert [op for op, _ in reconciled_after if op == "barrier"] == []
    assert broker.partition_log("after-the-barriers", 1) is not None


async def test_a_topics_partitions_are_made_off_the_event_loop_and_answered_once_on_disk(broker):
    """Making a partition's directory and files waits on the file system's journal: a new topic of many
    partitions, made where the metadata is applied (the event loop), held every connection of the broker.
    They are made on a thread; CreateTopics and CreatePartitions are answered once they and the topic file
    are on disk, and the partitions take up their roles then."""
    node = broker.cluster
    await poll_until(lambda: node.raft.ready and node.metadata.brokers.get(1), message="the broker registered")
    logs = broker.logs
    loop_thread = threading.current_thread()
    made_on: list[tuple[str, str, bool]] = []  # (what, topic, on the event loop's thread)
    create_topic, add_partitions = logs.create_topic, logs.add_partitions

    def watched_create_topic(name, *args, **kwargs):
        made_on.append(("create", name, threading.current_thread() is loop_thread))
        return create_topic(name, *args, **kwargs)

    def watched_add_partitions(name, *args, **kwargs):
        made_on.append(("add", name, threading.current_thread() is loop_thread))
        return add_partitions(name, *args, **kwargs)

    logs.create_topic, logs.add_partitions = watched_create_topic, watched_add_partitions
    admin = ClusterTopicAdmin(node)
    await admin.create_topic("made-aside", 3, {}, 1)
    topic = logs.topics["made-aside"]
    assert topic.saved.done() and topic.partition_count == 3
    assert all((Path(logs.data_dir) / f"made-aside-{p}").is_dir() for p in range(3))
    await admin.create_partitions("made-aside", 5)
    assert logs.topics["made-aside"].saved.done() and logs.topics["made-aside"].partition_count == 5
    assert [made for made in made_on if made[1] == "made-aside"] == [("create", "made-aside", False),
                                                                     ("add", "made-aside", False)]
    assert not any(on_loop for _what, _name, on_loop in made_on), made_on
    for partition in range(5):
        await poll_until(lambda p=partition: broker.cluster_view.leader_epoch("made-aside", p) == 0,
                         message=f"made-aside-{partition} led here")
