"""Handing the offsets topic's requests to storage in bulk (`submit_many`) does what submitting them one by one
does: same storage contents, same order per group, the same history rows."""

from __future__ import annotations

import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from burrowpy.config import Config, Section
from burrowpy.context import ApplicationContext
from burrowpy.pipeline.history import HistoryWriter, read_history
from burrowpy.protocol import (
    FetchConsumer,
    SetBrokerOffset,
    SetConsumerOffset,
    SetDeleteGroup,
    SetDeletePartitionOffsets,
)
from burrowpy.storage.inmemory import InMemoryStorage

CLUSTER = "local"
NOW_S = 1_700_000_000
GROUPS = ["a", "b", "c", "d"]


class FixedClock:
    def time(self) -> float:
        return float(NOW_S)


def new_storage(workers: int) -> InMemoryStorage:
    section = Section("test", "storage.default", {"workers": workers, "intervals": 3})
    return InMemoryStorage("default", section, [CLUSTER], FixedClock(), structlog.get_logger())


@st.composite
def request_streams(draw) -> list:
    """What a reader hands over: runs of one group's commits, tombstones and group deletions in between."""
    stream = []
    order = 0
    for _ in range(draw(st.integers(1, 12))):
        group = draw(st.sampled_from(GROUPS))
        for _ in range(draw(st.integers(1, 6))):
            order += 1
            kind = draw(st.sampled_from(["commit"] * 8 + ["tombstone", "delete group"]))
            partition = draw(st.integers(0, 2))
            if kind == "commit":
                stream.append(SetConsumerOffset(CLUSTER, group, "t", partition, draw(st.integers(0, 100)), order,
                                                NOW_S * 1000 - draw(st.integers(0, 10_000))))
            elif kind == "tombstone":
                stream.append(SetDeletePartitionOffsets(CLUSTER, group, "t", partition))
            else:
                stream.append(SetDeleteGroup(CLUSTER, group))
    return stream


async def stored(requests: list, workers: int, in_bulk: bool) -> dict:
    storage = new_storage(workers)
    await storage.start()
    try:
        for partition in range(3):
            storage.submit(SetBrokerOffset(CLUSTER, "t", partition, 3, 100, NOW_S * 1000))
        # The topic's worker is not the groups', and storage orders requests within a worker only: without this
        # the commits coming first would hang on how far each worker gets in a turn.
        await storage.flush()
        if in_bulk:
            storage.submit_many(requests)
        else:
            for request in requests:
                storage.submit(request)
        await storage.flush()
        contents = {}
        for group in GROUPS:
            fetch = FetchConsumer(CLUSTER, group, ApplicationContext.new_reply())
            storage.submit(fetch)
            contents[group] = await fetch.reply
        return contents
    finally:
        await storage.stop()


@settings(deadline=None, max_examples=60)
@given(requests=request_streams(), workers=st.sampled_from([1, 3, 20]))
async def test_submit_many_stores_what_submit_stores(requests, workers):
    assert await stored(requests, workers, in_bulk=True) == await stored(requests, workers, in_bulk=False)


async def test_submit_many_through_the_context_records_history_in_order(tmp_path):
    storage = new_storage(4)
    await storage.start()
    history = HistoryWriter(tmp_path, clock=FixedClock().time)
    ctx = ApplicationContext(config=Config(file="t.yaml"), logger=structlog.get_logger(), storage=storage,
                             history=history)
    try:
        ctx.submit(SetBrokerOffset(CLUSTER, "t", 0, 1, 100, NOW_S * 1000))
        ctx.submit_many([SetConsumerOffset(CLUSTER, group, "t", 0, offset, offset, NOW_S * 1000)
                         for offset, group in enumerate(["a", "a", "b", "a"])])
        await storage.flush()
        assert storage.pending() == 0
    finally:
        history.close()
        await storage.stop()
    rows = read_history(tmp_path).to_pylist()
    assert [(row["kind"], row["group"], row["order"]) for row in rows] == [
        ("broker", None, None), ("commit", "a", 0), ("commit", "a", 1), ("commit", "b", 2), ("commit", "a", 3)]
    assert storage.state.consumer(CLUSTER, "a", NOW_S)["t"][0].offsets[-1].offset == 3
