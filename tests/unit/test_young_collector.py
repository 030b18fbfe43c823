"""The daemon's YoungCollector: the collector's young passes paced by time, bounded under the ingest's churn."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from burrowpy.daemon import GC_THRESHOLDS, GarbageFreezer, YoungCollector

OLD = 300_000  # old objects, frozen as the daemon's freezer freezes the monitor's state
REPLACED_PER_KEPT = 20  # old objects freed for each new one kept beyond them (ingest: storage's replaced entries)
BATCH = 500  # objects replaced between two turns of the loop
RATE = 150_000  # objects made per second: the ingest's young generation grew by 100,000-200,000 a second


class Cycle:
    """An object that refers to itself: only the collector frees it, never reference counting."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def collector_as_the_daemon_sets_it() -> Iterator[None]:
    thresholds = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    gc.unfreeze()
    gc.collect()
    yield
    gc.unfreeze()  # the collector is the whole test process's
    gc.set_threshold(*thresholds)


async def churn(seconds_per_batch: float) -> None:
    """The ingest's shape: old objects freed (reference counting) as new ones are made in their place, and a few
    more kept, ``BATCH`` at a time at ``RATE`` objects a second (the clock paces the load, nothing waits on it)."""
    gc.disable()  # (no pass while the old objects are made: they are not the ingest's)
    old: list[Any] = [[index] for index in range(OLD)]
    gc.freeze()
    gc.enable()
    kept: list[Any] = []
    started = time.monotonic()
    for batch, first in enumerate(range(0, OLD, BATCH)):
        for index in range(first, first + BATCH):
            old[index] = [index]  # the old list freed: CPython counts it against the new one
            if index % REPLACED_PER_KEPT == 0:
                kept.append([index])
        await asyncio.sleep(max(0.0, started + (batch + 1) * seconds_per_batch - time.monotonic()))


def longest_young_pass(young: YoungCollector | None) -> tuple[int, int]:
    """The most objects a generation-0 or generation-1 pass walked while :func:`churn` ran, and how many passes."""
    walked: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] < 2:
            walked.append(sum(len(gc.get_objects(generation)) for generation in range(info["generation"] + 1)))

    async def run() -> None:
        if young is not None:
            young.start()
        try:
            await churn(BATCH / RATE)
        finally:
            if young is not None:
                await young.stop()

    gc.callbacks.append(count)
    try:
        asyncio.run(run())
    finally:
        gc.callbacks.remove(count)
    return max(walked, default=0), len(walked)


def test_under_churn_the_paced_young_passes_stay_short_and_unpaced_ones_do_not() -> None:
    paced, paced_passes = longest_young_pass(YoungCollector())
    unpaced, unpaced_passes = longest_young_pass(None)
    # unpaced: a pass every 10,000 objects kept beyond those freed, each walking the 200,000 made meanwhile
    assert unpaced > 150_000, (unpaced, unpaced_passes)
    # paced: at most 0.1 s of them (YOUNG_INTERVAL_MAX_S), 15,000, or what a millisecond of a pass walks
    assert paced < 40_000, (paced, paced_passes)


def test_a_paced_pass_collects_young_cyclic_garbage() -> None:
    young = YoungCollector()
    cycle = Cycle()
    gone = weakref.ref(cycle)
    del cycle

    young.collect()

    assert gone() is None
    assert young.passes == 1


def survivors_in_generation_1(young: YoungCollector) -> int:
    """Objects left in generation 1 after five paced passes, each surviving by a thousand (the ingest's objects
    live seconds)."""
    kept: list[Any] = []
    for _ in range(5):
        kept += [[index] for index in range(1000)]
        young.collect()
    return len(gc.get_objects(generation=1))


def test_what_survives_a_paced_pass_is_frozen_not_piled_up_for_generation_1() -> None:
    piled = survivors_in_generation_1(YoungCollector(freeze_survivors=False))
    gc.collect()
    frozen_before = gc.get_freeze_count()
    left = survivors_in_generation_1(YoungCollector())
    assert piled >= 5000, piled  # each paced pass counts towards generation 1's pass, which would walk them all
    assert left < 100, left
    assert gc.get_freeze_count() >= frozen_before + 5000
    assert not gc.get_objects(generation=2)  # nor promoted towards a full pass


def test_a_cycle_among_frozen_survivors_waits_for_the_refreeze() -> None:
    young = YoungCollector()
    survivor = Cycle()
    gone = weakref.ref(survivor)
    young.collect()
    del survivor  # now cyclic garbage, frozen
    young.collect()
    gc.collect()
    assert gone() is not None

    GarbageFreezer(structlog.get_logger()).refreeze()

    assert gone() is None


def test_the_interval_follows_the_passes_cost_between_its_bounds() -> None:
    young = YoungCollector(target_s=0.001, min_interval_s=0.01, max_interval_s=0.1)
    young.interval_s = 0.05
    young.collect()  # next to nothing young: far under the target
    assert young.interval_s == pytest.approx(0.1)
    young.collect()
    assert young.interval_s == pytest.approx(0.1)  # not past its bound

    gc.disable()  # the young generation as large as made, no pass of the collector's own before the paced one
    try:
        heap = [[index] for index in range(300_000)]  # well over a millisecond to walk
        spent = young.collect()
        assert spent > 0.002, spent  # (else the halving below is not what is tested)
        assert young.interval_s == pytest.approx(0.05)  # halved, not more at once
        for _ in range(5):
            heap += [[index] for index in range(300_000)]
            young.collect()
        assert young.interval_s == pytest.approx(0.01)  # not under its bound
    finally:
        gc.enable()
    del heap


def test_start_and_stop_on_the_loop() -> None:
    async def run() -> None:
        young = YoungCollector(min_interval_s=0.001, max_interval_s=0.001)
        young.start()
        deadline = time.monotonic() + 10
        while young.passes < 3:
            assert time.monotonic() < deadline, f"{young.passes} paced passes in 10 s"
            await asyncio.sleep(0.01)
        await young.stop()
        assert not [task for task in asyncio.all_tasks() if task.get_name() == "young-collector"]

    asyncio.run(run())
