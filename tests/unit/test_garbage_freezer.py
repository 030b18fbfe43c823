"""The daemon's GarbageFreezer: live state out of the collector's full passes, cyclic garbage still collected."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Iterator

import pytest
import structlog

from burrowpy.daemon import GarbageFreezer
from burrowpy.storage.ring import BrokerRing, CommitRing
from burrowpy.storage.state import PartitionEntry


class Cycle:
    """An object that refers to itself: only the collector frees it, never reference counting."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the collector is the whole test process's


def walked(obj: object) -> bool:
    """Whether a full pass goes over ``obj`` (gc.get_objects lists generations 0-2, not the frozen)."""
    return any(candidate is obj for candidate in gc.get_objects())


def test_refreeze_takes_the_live_per_partition_state_out_of_full_passes() -> None:
    entry = PartitionEntry()
    entry.ring = CommitRing(10)
    broker = BrokerRing(10)
    assert walked(entry) and walked(entry.ring) and walked(broker)  # else the check below proves nothing

    GarbageFreezer(structlog.get_logger()).refreeze()

    assert gc.get_freeze_count() > 0
    assert not walked(entry) and not walked(entry.ring) and not walked(broker)
    entry.ring.add(5, 1, 1000, 1000, 10)  # frozen objects work as before
    assert entry.ring.newest_offset() == 5


def test_cyclic_garbage_frozen_is_collected_at_the_next_refreeze() -> None:
    freezer = GarbageFreezer(structlog.get_logger())
    cycle = Cycle()
    gone = weakref.ref(cycle)
    freezer.refreeze()
    del cycle
    gc.collect()
    assert gone() is not None  # frozen: no pass frees it (what the refreeze is for)

    freezer.refreeze()

    assert gone() is None


def test_garbage_from_before_the_freeze_is_not_frozen() -> None:
    cycle = Cycle()
    gone = weakref.ref(cycle)
    del cycle
    GarbageFreezer(structlog.get_logger()).refreeze()
    assert gone() is None


def test_the_freezer_refreezes_on_its_schedule_and_stop_gives_everything_back() -> None:
    async def run() -> tuple[int, int]:
        freezer = GarbageFreezer(structlog.get_logger(), first_s=0, period_s=0.01)
        freezer.start()
        deadline = time.monotonic() + 10
        while freezer.refreezes < 3:
            assert time.monotonic() < deadline, f"{freezer.refreezes} refreezes in 10 s"
            await asyncio.sleep(0.01)
        frozen = gc.get_freeze_count()
        await freezer.stop()
        return frozen, gc.get_freeze_count()

    frozen, after_stop = asyncio.run(run())
    assert frozen > 0
    assert after_stop == 0
