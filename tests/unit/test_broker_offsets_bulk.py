"""A topic's broker offsets handed over in one request (SetBrokerOffsets, the cluster module's refresh) mean what
a SetBrokerOffset per partition, in order, means: the same rings, the same drops, and the topic's versions
moving exactly when one request per partition moves them. Through StorageState and through InMemoryStorage's
workers (which count such a request as its partitions), and through history capture (a row per partition)."""

from __future__ import annotations

import asyncio

import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from burrowpy.config import Section
from burrowpy.protocol import FetchTopic, SetBrokerOffset, SetBrokerOffsets, SetDeleteTopic
from burrowpy.storage.inmemory import InMemoryStorage
from burrowpy.storage.state import StorageState

CLUSTER = "local"
NOW_MS = 1_700_000_000_000


class Clock:
    @staticmethod
    def time() -> float:
        return NOW_MS / 1000


def rings(state: StorageState) -> dict[str, list[tuple[list[int], int]]]:
    cluster = state.clusters[CLUSTER]
    return {topic: [(list(ring._samples), ring.since) for ring in topic_rings]
            for topic, topic_rings in cluster.brokers.items()}


def versions(state: StorageState) -> dict[str, tuple[int, int]]:
    return {topic: (v.newest, v.samples) for topic, v in state.clusters[CLUSTER].versions.items()}


REFRESH = st.tuples(
    st.sampled_from(["a", "b"]),  # topic
    st.one_of(st.none(), st.integers(0, 6)),  # partition count; None: a topic the metadata does not list
    st.lists(st.tuples(st.integers(-1, 8), st.integers(0, 3)), max_size=8),  # (partition, offset)
    st.sampled_from([CLUSTER, CLUSTER, "unknown"]),
)


@settings(max_examples=300, deadline=None)
@given(refreshes=st.lists(REFRESH, max_size=12), intervals=st.integers(1, 3))
def test_one_request_per_topic_is_one_per_partition(refreshes, intervals):
    bulk, single = StorageState([CLUSTER], intervals), StorageState([CLUSTER], intervals)
    for step, (topic, count, entries, cluster) in enumerate(refreshes):
        timestamp = NOW_MS + step * 10_000
        request = SetBrokerOffsets(cluster, topic, count, [p for p, _ in entries], [o for _, o in entries], timestamp)
        before_bulk, before_single = versions(bulk), versions(single)
        dropped = bulk.add_broker_offsets(request)
        expected = []
        for index, (partition, offset) in enumerate(entries):
            one_count = partition + 1 if count is None else count  # unlisted: each partition counts as the last
            reason = single.add_broker_offset(SetBrokerOffset(cluster, topic, partition, one_count, offset, timestamp))
            if reason is not None:
                expected.append((index, reason))
        assert dropped == expected
        assert rings(bulk) == rings(single)
        after_bulk, after_single = versions(bulk), versions(single)
        assert after_bulk.keys() == after_single.keys()
        for name in after_single:
            for field in (0, 1):  # newest, samples: moved in the one exactly when moved in the other
                moved_single = before_single.get(name, (None, None))[field] != after_single[name][field]
                moved_bulk = before_bulk.get(name, (None, None))[field] != after_bulk[name][field]
                assert moved_bulk == moved_single, (name, field)


async def test_storage_workers_take_a_topic_in_order_with_its_delete():
    storage = InMemoryStorage("s", Section("test", "storage.s", {"intervals": 2, "workers": 3}), [CLUSTER],
                              Clock(), structlog.get_logger())
    await storage.start()
    try:
        storage.submit(SetBrokerOffsets(CLUSTER, "t", 3, [0, 1, 2], [5, 6, 7], NOW_MS))
        assert storage.pending() == 3  # a topic's offsets count as its partitions
        storage.submit(SetDeleteTopic(CLUSTER, "t"))
        storage.submit(SetBrokerOffsets(CLUSTER, "t", 2, [1, 0], [9, 8], NOW_MS + 10_000))
        reply = asyncio.get_running_loop().create_future()
        storage.submit(FetchTopic(CLUSTER, "t", reply))
        assert await reply == [8, 9]
        assert storage.pending() == 0
    finally:
        await storage.stop()


def test_history_keeps_a_row_per_partition(tmp_path):
    from burrowpy.pipeline.history import HistoryWriter

    single, bulk = HistoryWriter(tmp_path / "single", 3600, lambda: 0.0), HistoryWriter(tmp_path / "bulk", 3600, lambda: 0.0)
    request = SetBrokerOffsets(CLUSTER, "t", 4, [3, 0, 2], [30, 0, 20], NOW_MS)
    bulk.record(request)
    for one in request.each():
        single.record(one)
    assert bulk._columns == single._columns and bulk.buffered_rows == 3
    single.close()
    bulk.close()


async def test_the_workers_together_handle_a_bounded_number_of_requests_per_turn():
    """Every worker with a backlog runs a pass in each turn of the event loop: the passes are a shared budget
    (``_TURN``), so a refresh of thousands of partitions is spread over turns, with the sockets read between."""
    from burrowpy.storage.inmemory import _TURN

    storage = InMemoryStorage("s", Section("test", "storage.s", {"intervals": 2}), [CLUSTER], Clock(),
                              structlog.get_logger())  # the default 20 workers
    await storage.start()
    try:
        for topic in range(400):
            for partition in range(10):
                storage.submit(SetBrokerOffset(CLUSTER, f"t{topic}", partition, 10, 5, NOW_MS))
        left = [storage.pending()]
        while left[-1]:
            await asyncio.sleep(0)
            left.append(storage.pending())
    finally:
        await storage.stop()
    handled = [before - after for before, after in zip(left, left[1:], strict=False)]
    assert left[0] == 4000 and sum(handled) == 4000
    assert max(handled) <= _TURN, handled
