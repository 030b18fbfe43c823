"""The partition flags of topic health, counted as Kafka's ``kafka-topics --describe`` options count them."""

from __future__ import annotations

from burrowpy.coordinators.topic_health import ClusterHealth, PartitionHealth

LIVE = frozenset({1, 2})


def test_flags_follow_kafka_topics_describe():
    healthy = PartitionHealth(1, (1, 2), (1, 2))
    shrunk = PartitionHealth(1, (1, 2), (1,))
    leaderless = PartitionHealth(-1, (3,), (3,))
    led_by_a_dead_broker = PartitionHealth(3, (3, 1), (3, 1))  # Metadata not yet updated after its loss
    assert [p.under_replicated() for p in (healthy, shrunk, leaderless, led_by_a_dead_broker)] == \
        [False, True, False, False]
    assert [p.offline(LIVE) for p in (healthy, shrunk, leaderless, led_by_a_dead_broker)] == \
        [False, False, True, True]
    assert [p.under_min_isr(2) for p in (healthy, shrunk, leaderless)] == [False, True, True]
    # min.insync.replicas unknown (DescribeConfigs refused): only a partition without a leader is under it
    assert [p.under_min_isr(None) for p in (healthy, shrunk, leaderless)] == [False, False, True]


def test_cluster_counts_use_each_topics_min_isr():
    health = ClusterHealth(0, LIVE, {
        "strict": [PartitionHealth(1, (1, 2), (1,)), PartitionHealth(2, (1, 2), (1, 2))],
        "lenient": [PartitionHealth(1, (1, 2), (1,)), PartitionHealth(-1, (3,), (3,))],
    }, {"strict": 2, "lenient": 1})
    assert health.counts() == {"under_replicated": 2, "under_min_isr": 2, "offline": 1}


def test_topic_json_sums_only_when_every_partition_is_known():
    health = ClusterHealth(5, LIVE, {"t": [PartitionHealth(1, (1,), (1,), size_bytes=10),
                                           PartitionHealth(2, (2,), (2,))]}, {})
    body = health.topic_json("t", [7], [1.5, 2.5])
    assert (body["size_bytes"], body["produce_rate"], body["min_insync_replicas"]) == (None, 4.0, None)
    assert [(p["high_watermark"], p["size_bytes"]) for p in body["partitions"]] == [(7, 10), (None, None)]
    assert health.topic_json("other", [], []) is None


def test_a_partitions_row_has_no_dict_of_its_own():
    """A reading holds a row per partition (50,000 at fleet scale): slots, not an instance dict per row."""
    import sys

    row = PartitionHealth(1, (1, 2), (1, 2), (), 0, 100)
    assert not hasattr(row, "__dict__")
    assert sys.getsizeof(row) <= 96
