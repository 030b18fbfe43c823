"""The cluster module's figures per partition (leaders, newest broker offsets): a mapping of ``(topic, partition)``
held as a list per topic, which at fleet scale is a tenth of the memory of a dict keyed by tuples."""

from __future__ import annotations

import asyncio
import tracemalloc

import pytest
import structlog

from burrowpy.config import parse_config
from burrowpy.coordinators.cluster_kafka import partition_leaders
from burrowpy.coordinators.list_offsets import TopicOffsets
from burrowpy.coordinators.partition_map import PartitionMap
from burrowpy.daemon import Monitor

TOPICS, PARTITIONS = 2000, 25  # the fleet of bench/monitor_loop_stalls.py has 2,000 topics of about 25
# A dict keyed by (topic, partition) tuples held 120-160 bytes per partition; a list per topic holds a pointer and
# its share of the list's header and over-allocation.
MOST_BYTES_PER_PARTITION = 40


def test_reads_as_the_dict_it_stands_for():
    figures = PartitionMap({("a", 0): 5, ("a", 2): 7})
    figures.set("b", [1], [9])
    as_dict = {("a", 0): 5, ("a", 2): 7, ("b", 1): 9}
    assert figures == as_dict and dict(figures) == as_dict and len(figures) == 3
    assert figures[("a", 2)] == 7 and figures.get(("a", 1)) is None and figures.get(("c", 0), -1) == -1
    assert figures.get(("a", -1)) is None and figures.get(("a", 3)) is None
    with pytest.raises(KeyError):
        figures[("b", 0)]
    figures.set("a", [2, 3], [8, 0])  # a figure changed, one added (0 is a figure, not a gap)
    figures.drop("b")
    assert figures == {("a", 0): 5, ("a", 2): 8, ("a", 3): 0}
    # equal maps however they were filled: a topic without figures, or filled out of order, is the same
    other = PartitionMap()
    other.set("a", [3, 0, 2], [0, 5, 8])
    other.set("b", [], [])
    assert other == figures and other != PartitionMap({("a", 0): 5})
    with pytest.raises(ValueError):
        figures.set("a", [-1], [1])


def traced_growth(make) -> tuple[object, int]:
    """What ``make()`` returns and the memory it left allocated (tracemalloc)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        made = make()
        return made, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_the_leaders_of_a_fleet_hold_no_tuple_per_partition():
    metadata = {"brokers": [], "topics": [
        {"name": f"topic-{index}", "error_code": 0, "partitions": [
            {"partition_index": partition, "leader_id": 1} for partition in range(PARTITIONS)]}
        for index in range(TOPICS)]}
    (_, leaders, _), held = traced_growth(lambda: partition_leaders(metadata, PartitionMap()))
    assert len(leaders) == TOPICS * PARTITIONS
    assert held / (TOPICS * PARTITIONS) < MOST_BYTES_PER_PARTITION


def test_the_log_ends_of_a_fleet_hold_no_tuple_per_partition():
    """The cluster module as ``burrowpy serve`` configures it (nothing connects), handed a fleet's ListOffsets
    answers: what it keeps of them (and the storage requests it queues) per partition."""
    doc = {
        "general": {"pidfile": ""},
        "storage": {"default": {"class-name": "inmemory"}},
        "cluster": {"local": {"class-name": "kafka", "servers": ["127.0.0.1:9"]}},
    }
    answers = [TopicOffsets(f"topic-{index}", list(range(PARTITIONS)),
                            [1_000_000 + index * PARTITIONS + partition for partition in range(PARTITIONS)], [])
               for index in range(TOPICS)]

    async def hand() -> int:
        monitor = Monitor(parse_config(doc, "burrowpy.yaml", {}), structlog.get_logger())
        monitor.configure()
        cluster = monitor.ctx.modules["cluster"]["local"]
        storage = monitor.ctx.storage
        await storage.start()  # its workers are tasks: they take the requests only once this test awaits
        try:
            def store() -> None:
                for answer in answers:
                    cluster._store_offsets(answer, 1000)

            _, held = traced_growth(store)
        finally:
            await storage.stop()
        assert cluster.log_ends[("topic-7", 3)] == 1_000_000 + 7 * PARTITIONS + 3
        assert len(cluster.log_ends) == TOPICS * PARTITIONS
        return held

    held = asyncio.run(hand())
    assert held / (TOPICS * PARTITIONS) < MOST_BYTES_PER_PARTITION
