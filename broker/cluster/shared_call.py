"""One call of an async action shared by every caller waiting for it, as a log's group commit shares a flush.

A broker catches up with the cluster's metadata by committing a barrier through Raft (see
:meth:`broker.cluster.node.ClusterNode.catch_up`). Ten admin requests about a missing topic arriving together
need one barrier between them, not ten; but a barrier proposed *before* a request arrived proves nothing to it
(it may be committed ahead of the change the request has to see). :class:`SharedCall` gives each caller a
call that starts after the caller arrived: callers that arrive while no call is under way start one, and all
that arrive while one is under way share the next, which starts as soon as the current one is over. At most
one call runs at a time and at most one more waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


class SharedCall:
    """``await shared()`` returns (or raises) what a call of ``action`` that started after it was awaited
    returned (or raised); callers waiting at the same time share one call."""

    def __init__(self, action: Callable[[], Awaitable[Any]]) -> None:
        self._action = action
        self._next: asyncio.Future[Any] | None = None  # the callers of the call that has not started yet
        self._runner: asyncio.Task[None] | None = None
        self.calls = 0  # how many calls of ``action`` have started

    async def __call__(self) -> Any:
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        waiting = self._next
        if self._runner is None:
            self._runner = asyncio.create_task(self._run(), name="shared-call")
        # a caller that gives up (its request's connection closed) leaves the call to the others; a failure
        # that no caller is left to hear of is marked heard by shield
        return await asyncio.shield(waiting)

    async def _run(self) -> None:
        try:
            while self._next is not None:
                waiting, self._next = self._next, None
                self.calls += 1
                try:
                    waiting.set_result(await self._action())
                except asyncio.CancelledError:
                    waiting.cancel()
                    raise
                except Exception as exc:
                    waiting.set_exception(exc)
        finally:
            self._runner = None
            if self._next is not None:  # stopped with callers still waiting for a call
                self._next.cancel()
                self._next = None

    async def close(self) -> None:
        """Stop: the call under way is cancelled, and so are its callers and those waiting for the next."""
        runner = self._runner
        if runner is not None:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)

