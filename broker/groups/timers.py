"""Keyed deadlines for the pure group machine: set, replace, cancel, and expire the ones that are due.

The machine never sleeps; its asyncio shell asks for :meth:`Deadlines.next_deadline` and calls the
machine's ``tick()`` then, which hands the due keys to :meth:`Deadlines.expire`. A key has at most one
deadline: setting it again replaces the old one.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class Deadlines(Generic[K]):
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, K]] = []
        self._live: dict[K, tuple[int, int]] = {}  # key -> (deadline, sequence) of its live entry
        self._sequence = itertools.count()

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: K) -> bool:
        return key in self._live

    def get(self, key: K) -> int | None:
        entry = self._live.get(key)
        return entry[0] if entry else None

    def set(self, key: K, deadline: int) -> None:
        entry = (deadline, next(self._sequence))
        self._live[key] = entry
        heapq.heappush(self._heap, (*entry, key))

    def cancel(self, key: K) -> None:
        self._live.pop(key, None)

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def expire(self, now: int, handle: Callable[[K], None]) -> None:
        """Call ``handle(key)`` for every key due at ``now``, earliest first (set order breaks ties).

        A key is no longer pending when handled. Keys that a handler cancels or re-sets before their turn
        are not handled (their deadline changed); keys set during this call wait for the next one, so a
        zero timeout cannot loop forever.
        """
        due = []
        while self._heap and self._heap[0][0] <= now:
            deadline, sequence, key = heapq.heappop(self._heap)
            if self._live.get(key) == (deadline, sequence):
                due.append((key, (deadline, sequence)))
        for key, entry in due:
            if self._live.get(key) == entry:
                del self._live[key]
                handle(key)

    def _drop_stale(self) -> None:
        while self._heap:
            deadline, sequence, key = self._heap[0]
            if self._live.get(key) == (deadline, sequence):
                return
            heapq.heappop(self._heap)
