"""The single-node cluster view and the Metadata handler's cache, without a server: a single node is the
whole cluster (it leads everything, is its own controller, has no quorum), and the cache's generation moves
with the local topics and the view."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.cluster.view import SingleNodeView, committed_leader
from broker.errors import ErrorCode, KafkaError
from broker.handlers.metadata_cache import MetadataCache
from broker.log.manager import LogManager
from broker.protocol.types import Encoded

ME = 3


def view(counts: dict[str, int], endpoints: dict[str, tuple[str, int]] | None = None) -> SingleNodeView:
    return SingleNodeView(ME, lambda: "rack-a", endpoints or {}, lambda: ("broker.example", 9092), counts.get)


def test_a_single_node_is_the_whole_cluster() -> None:
    alone = view({"orders": 2}, {"INTERNAL": ("10.0.0.3", 9093)})
    assert alone.live_brokers() == [(ME, "broker.example", 9092, "rack-a")]
    assert alone.live_brokers("INTERNAL") == [(ME, "10.0.0.3", 9093, "rack-a")]
    assert alone.live_brokers("UNKNOWN") == [(ME, "broker.example", 9092, "rack-a")]
    assert alone.controller_id() == ME and alone.broker_epoch(ME) is None
    assert alone.partition_leader("orders", 1) == (ME, 0, [ME], [ME])
    assert alone.leader_epoch("orders", 1) == 0 and committed_leader(alone, "orders", 1) == ME
    assert alone.caught_up and alone.metadata_version() == 0 and alone.quorum is None
    assert alone.reassignments(None) == {}
    assert alone.fenced_brokers() == [] and alone.seen_alive(ME) and not alone.seen_alive(4)


async def test_a_single_node_stays_registered_and_knows_no_other_broker() -> None:
    await view({}).unregister_broker(ME)  # running, so registered again at once: nothing changes
    with pytest.raises(KafkaError) as refused:
        await view({}).unregister_broker(4)
    assert (refused.value.code, refused.value.message) == (ErrorCode.BROKER_ID_NOT_REGISTERED,
                                                           "Broker ID 4 is not currently registered")


@pytest.mark.parametrize(("topic", "partition", "replicas", "code", "message"), [
    ("nope", 0, [ME], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope."),
    ("orders", 2, [ME], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition orders:2."),
    ("orders", 0, None, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "no reassignment of orders-0 is in progress"),
    ("orders", 0, [ME, 4], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "brokers [4] are not registered"),
])
async def test_a_single_node_refuses_every_reassignment_but_to_itself(topic: str, partition: int,
                                                                     replicas: list[int] | None, code: ErrorCode,
                                                                     message: str) -> None:
    with pytest.raises(KafkaError) as refused:
        await view({"orders": 2}).reassign(topic, partition, replicas)
    assert (refused.value.code, refused.value.message) == (code, message)


async def test_a_reassignment_to_the_node_itself_is_accepted() -> None:
    await view({"orders": 2}).reassign("orders", 1, [ME])


def test_the_metadata_cache_keeps_entries_while_they_hold(tmp_path: Path) -> None:
    logs = LogManager(tmp_path / "logs", {}, auto_high_watermark=True)
    try:
        cache = MetadataCache(logs, view({}))
        before = cache.generation()
        logs.create_topic("orders", 1, {})
        assert cache.generation() != before  # a new topic: every-topic answers made before no longer hold
        assert cache.entry(("orders", 12), "said") is None
        cache.keep_entry(("orders", 12), "said", Encoded(b"entry"))
        assert cache.entry(("orders", 12), "said") == b"entry"
        assert cache.entry(("orders", 12), "changed") is None  # its leaders or ISR changed since
        cache.keep_topic_list("key", [Encoded(b"entry")])
        assert cache.topic_list("key") == [b"entry"] and cache.topic_list("other") is None
    finally:
        logs.close()
