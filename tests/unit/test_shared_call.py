"""SharedCall: callers waiting at the same time share one call, and no caller is answered by a call that
started before it arrived (the rule that makes a shared Raft barrier a valid catch-up for each of them)."""

from __future__ import annotations

import asyncio

import pytest

from broker.cluster.shared_call import SharedCall


class Gate:
    """An action whose calls each wait for the test to let them finish; it records when each started."""

    def __init__(self) -> None:
        self.started: list[asyncio.Event] = []
        self.release: list[asyncio.Event] = []
        self.errors: dict[int, Exception] = {}

    async def __call__(self) -> int:
        number = len(self.started)
        started, release = asyncio.Event(), asyncio.Event()
        self.started.append(started)
        self.release.append(release)
        started.set()
        await release.wait()
        if number in self.errors:
            raise self.errors[number]
        return number

    async def wait_started(self, number: int) -> None:
        while len(self.started) <= number:
            await asyncio.sleep(0)

    async def finish(self, number: int) -> None:
        """Once call ``number`` has started, let it end."""
        await self.wait_started(number)
        self.release[number].set()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_callers_arriving_during_a_call_share_the_next_one_and_never_the_current():
    gate = Gate()
    shared = SharedCall(gate)
    first = asyncio.create_task(shared())
    await gate.wait_started(0)
    # these arrive while call 0 is under way: call 0 cannot answer them
    later = [asyncio.create_task(shared()) for _ in range(10)]
    await settle()
    assert shared.calls == 1
    gate.release[0].set()
    assert await first == 0
    await gate.wait_started(1)
    assert not any(task.done() for task in later)  # call 0 is over, but they wait for call 1
    gate.release[1].set()
    assert await asyncio.gather(*later) == [1] * 10
    assert shared.calls == 2


async def test_callers_arriving_before_a_call_starts_share_it():
    gate = Gate()
    shared = SharedCall(gate)
    callers = [asyncio.create_task(shared()) for _ in range(5)]  # all wait before the first call starts
    await gate.finish(0)
    assert await asyncio.gather(*callers) == [0] * 5
    assert shared.calls == 1
    # a caller after that starts a call of its own
    alone = asyncio.create_task(shared())
    await gate.finish(1)
    assert await alone == 1


async def test_a_failed_call_fails_its_callers_only():
    gate = Gate()
    gate.errors[0] = RuntimeError("no quorum")
    shared = SharedCall(gate)
    first = asyncio.create_task(shared())
    await gate.wait_started(0)
    second = asyncio.create_task(shared())
    await settle()
    gate.release[0].set()
    with pytest.raises(RuntimeError, match="no quorum"):
        await first
    await gate.finish(1)
    assert await second == 1


async def test_a_caller_that_gives_up_leaves_the_call_to_the_others():
    gate = Gate()
    shared = SharedCall(gate)
    leaving, staying = asyncio.create_task(shared()), asyncio.create_task(shared())
    await gate.wait_started(0)
    leaving.cancel()
    await settle()
    assert leaving.cancelled() and not staying.done()
    gate.release[0].set()
    assert await staying == 0


async def test_close_cancels_the_call_under_way_and_its_callers():
    gate = Gate()
    shared = SharedCall(gate)
    first = asyncio.create_task(shared())
    await gate.wait_started(0)
    waiting_for_next = asyncio.create_task(shared())
    await settle()
    await shared.close()
    for task in (first, waiting_for_next):
        with pytest.raises(asyncio.CancelledError):
            await task
    # usable again afterwards (a broker's node restarted in the same process)
    again = asyncio.create_task(shared())
    await gate.finish(1)
    assert await again == 1
