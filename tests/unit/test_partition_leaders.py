"""The cluster module's reading of a Metadata answer: partition counts, leaders, the partitions without one."""

from __future__ import annotations

from burrowpy.coordinators.cluster_kafka import partition_leaders


def metadata(*topics: tuple[str, int, list[int]]) -> dict:
    return {"brokers": [], "topics": [
        {"name": name, "error_code": error, "partitions": [
            {"partition_index": index, "leader_id": leader} for index, leader in enumerate(leaders)]}
        for name, error, leaders in topics]}


def test_counts_leaders_and_the_partitions_without_one():
    topics, leaders, leaderless = partition_leaders(metadata(("a", 0, [1, -1, 2]), ("b", 0, [])), {})
    assert topics == {"a": 3, "b": 0}
    assert leaders == {("a", 0): 1, ("a", 2): 2}
    assert leaderless == [("a", 1)]


def test_a_topic_answered_with_an_error_is_left_out():
    # LEADER_NOT_AVAILABLE (5) while it is being created: as if absent, as aiokafka's reading had it
    topics, leaders, _ = partition_leaders(metadata(("a", 5, []), ("b", 0, [3])), {})
    assert topics == {"b": 1} and leaders == {("b", 0): 3}


def test_unchanged_leaders_are_the_previous_mapping_itself():
    """Its ListOffsets requests are kept (``_offset_requests`` compares identity), not built and encoded again."""
    _, previous, _ = partition_leaders(metadata(("a", 0, [1, 2])), {})
    _, same, _ = partition_leaders(metadata(("a", 0, [1, 2])), previous)
    _, moved, _ = partition_leaders(metadata(("a", 0, [1, 1])), previous)
    assert same is previous
    assert moved is not previous and moved == {("a", 0): 1, ("a", 1): 1}
