"""The log's open files, counted broker-wide and held under a budget (``log.max.open.files``).

Two kinds of descriptors count:

* a partition's cached ones: its segment files and index files, opened on first use and kept open between
  uses. Opening one past the budget takes the cached descriptors back from the partitions used least
  recently (they open them again when next used), so that many partitions written and read in turn do not
  mean as many open files;
* loans: a duplicate held for one use outside the partition's lock (a Fetch's region until it is sent, a
  flush's fsync). A loan the budget has no room for is refused, and the caller does without (copies the bytes,
  or works under the lock on the cached descriptor).

Taking a partition's descriptors back needs its lock: a partition whose lock is busy is passed over (its
descriptors are in use), and so is the one opening, so nothing ever waits here. The budget is exceeded only
when every cached descriptor is in use at that moment, by as many as are.
"""

from __future__ import annotations

import resource
import threading
from collections import OrderedDict
from typing import Protocol

# What the budget is without a setting: this share of the process's open-file limit (the rest for connections,
# the Raft journal, sockets between brokers).
DEFAULT_SHARE = 0.5


class DescriptorOwner(Protocol):
    def release_descriptors_if_idle(self) -> bool:
        """Close every cached descriptor unless the owner is in use; whether it did."""


def default_budget() -> int:
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(int(soft * DEFAULT_SHARE), 1) if soft != resource.RLIM_INFINITY else 1 << 20


class DescriptorBudget:
    """Thread-safe: partitions open and close descriptors from the event loop and from worker threads."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = default_budget() if limit is None or limit <= 0 else limit
        self._lock = threading.Lock()
        self._open = 0  # cached descriptors and loans
        self._cached: OrderedDict[DescriptorOwner, int] = OrderedDict()  # owner -> its cached ones, least recent first
        self._reclaiming = threading.local()

    @property
    def open(self) -> int:
        return self._open

    def account(self, owner: DescriptorOwner) -> DescriptorAccount:
        return DescriptorAccount(self, owner)

    def opened(self, owner: DescriptorOwner) -> None:
        with self._lock:
            self._open += 1
            self._cached[owner] = self._cached.get(owner, 0) + 1
            self._cached.move_to_end(owner)
            over = self._open > self.limit
        if over:
            self._reclaim(0, owner)

    def closed(self, owner: DescriptorOwner) -> None:
        with self._lock:
            self._open -= 1
            left = self._cached.get(owner, 0) - 1
            if left > 0:
                self._cached[owner] = left
            else:
                self._cached.pop(owner, None)

    def borrow(self, count: int, owner: DescriptorOwner, *, refusable: bool = True) -> bool:
        """Reserve ``count`` descriptors for a loan, taking cached ones back if needed; False if there is no room
        (not ``refusable``: counted even then, for a loan its holder cannot do without)."""
        if count <= 0:
            return True
        if self._take(count, refusable):
            return True
        self._reclaim(count, owner)
        return self._take(count, refusable)

    def give_back(self, count: int) -> None:
        with self._lock:
            self._open -= count

    def _take(self, count: int, refusable: bool = True) -> bool:
        with self._lock:
            if refusable and self._open + count > self.limit:
                return False
            self._open += count
            return True

    def _reclaim(self, wanted: int, opener: DescriptorOwner) -> None:
        """Take cached descriptors back, least recently used first, until ``wanted`` more fit. Not again on a
        thread already doing it (an index's pending entries, written as it is released, open its file)."""
        if getattr(self._reclaiming, "active", False):
            return
        self._reclaiming.active = True
        try:
            with self._lock:
                candidates = [owner for owner in self._cached if owner is not opener]
            for owner in candidates:
                if self._open + wanted <= self.limit:
                    return
                owner.release_descriptors_if_idle()
        finally:
            self._reclaiming.active = False


class DescriptorAccount:
    """One owner's dealings with the budget (what its segments and indexes call)."""

    __slots__ = ("budget", "owner")

    def __init__(self, budget: DescriptorBudget, owner: DescriptorOwner) -> None:
        self.budget = budget
        self.owner = owner

    def opened(self) -> None:
        self.budget.opened(self.owner)

    def closed(self) -> None:
        self.budget.closed(self.owner)

    def borrow(self, count: int, *, refusable: bool = True) -> bool:
        return self.budget.borrow(count, self.owner, refusable=refusable)

    def give_back(self, count: int) -> None:
        self.budget.give_back(count)
