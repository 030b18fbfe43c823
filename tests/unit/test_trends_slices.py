"""The trend sampler's round asks for the groups' evaluations a slice at a time: at no moment are more than
``EVALUATION_SLICE`` of them waiting on storage, so one turn of the event loop never runs thousands of them
(before, every group's task was made ready at once). Real storage and evaluator; the answers are every group's."""

from __future__ import annotations

import asyncio

import structlog

from burrowpy.config import Section, parse_config
from burrowpy.context import ApplicationContext
from burrowpy.evaluator.caching import CachingEvaluator
from burrowpy.httpserver.ui.trends import EVALUATION_SLICE, every_group_evaluation
from burrowpy.protocol import SetBrokerOffset, SetConsumerOffset, Status
from burrowpy.storage.inmemory import InMemoryStorage

CLUSTER = "local"
GROUPS = 6 * EVALUATION_SLICE
NOW = 1_700_000_000


class Clock:
    @staticmethod
    def time() -> float:
        return float(NOW)


async def test_a_round_asks_a_slice_of_the_groups_at_a_time():
    log = structlog.get_logger()
    ctx = ApplicationContext(config=parse_config({}, "burrowpy.yaml", {}), logger=log, clock=Clock())
    storage = InMemoryStorage("s", Section("test", "storage.s", {}), [CLUSTER], ctx.clock, log)
    ctx.storage = storage
    ctx.evaluator = evaluator = CachingEvaluator("e", Section("test", "evaluator.e", {}), storage, ctx.clock, log)
    await storage.start()
    try:
        for n in range(GROUPS):
            storage.submit(SetBrokerOffset(CLUSTER, f"topic-{n}", 0, 1, 10, NOW * 1000))
        await storage.flush()
        for n in range(GROUPS):
            storage.submit(SetConsumerOffset(CLUSTER, f"group-{n:04d}", f"topic-{n}", 0, 10, n, NOW * 1000))
        await storage.flush()
        waiting: list[int] = []
        done = asyncio.Event()

        async def watch() -> None:  # between turns of the loop: the requests storage has not answered yet
            while not done.is_set():
                waiting.append(storage.pending())
                await asyncio.sleep(0)

        watcher = asyncio.create_task(watch())
        _, evaluations = await every_group_evaluation(ctx)
        done.set()
        await watcher
        await evaluator.stop()
    finally:
        await storage.stop()
    assert [e.group for e in evaluations] == [f"group-{n:04d}" for n in range(GROUPS)]
    assert all(e.status == Status.OK for e in evaluations)
    assert 0 < max(waiting) <= EVALUATION_SLICE
