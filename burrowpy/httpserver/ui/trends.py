"""A short in-memory history of every group's status, for the dashboard's charts and trend lines.

Storage keeps only the last ``intervals`` commits of a partition, which for a group committing every second
is a few seconds of past. The dashboard wants the last hour, so the recorder asks the evaluator for every
group's status every ``interval`` seconds and keeps ``retention`` seconds of (time, total lag, largest lag
in seconds, status) per group: four numbers a sample in typed arrays, about 25 bytes, so an hour at 5 s
is 20 to 39 KB a group (measured; the arrays are trimmed by halves). A group that leaves the group
listing (deleted, expired) is forgotten at the next sample.
"""

from __future__ import annotations

import asyncio
import math
from array import array
from typing import Any

from burrowpy.context import ApplicationContext
from burrowpy.evaluator.group import GroupEvaluation
from burrowpy.protocol import ConsumerGroupStatus, FetchClusters, FetchConsumers, Status

SAMPLE_INTERVAL = 5.0
RETENTION = 3600.0


# Groups whose evaluations are asked for at once. All of a fleet's at once would make thousands of tasks ready
# in one turn of the event loop, which runs them all before it reads a socket again; in slices of this many,
# a request arriving meanwhile waits for one slice's work at most, and the evaluator hands the loop back within
# a slice too (caching.EVALUATION_STEP: every 2 ms of evaluations).
EVALUATION_SLICE = 50


async def every_group_evaluation(ctx: ApplicationContext) -> tuple[list[str], list[GroupEvaluation]]:
    """The clusters, and the evaluation of every group storage knows in them, ordered by cluster and group."""
    clusters = sorted(await ctx.fetch(FetchClusters(reply=ctx.new_reply())) or [])
    found: list[GroupEvaluation] = []
    for cluster in clusters:
        groups = sorted(await ctx.fetch(FetchConsumers(cluster=cluster, reply=ctx.new_reply())) or [])
        for start in range(0, len(groups), EVALUATION_SLICE):
            # One storage request a slice (the evaluator's evaluations), not a task and a request a group.
            evaluations = await ctx.evaluator.evaluations(cluster, groups[start:start + EVALUATION_SLICE])
            found.extend(evaluation for evaluation in evaluations if evaluation.status != Status.NOTFOUND)
    return clusters, found


async def every_group_status(ctx: ApplicationContext) -> tuple[list[str], list[ConsumerGroupStatus]]:
    """The clusters, and the status of every group storage knows in them (partitions worse than OK only),
    ordered by cluster and group."""
    clusters, evaluations = await every_group_evaluation(ctx)
    return clusters, [evaluation.result(False) for evaluation in evaluations]


class GroupSeries:
    """The samples of one group, oldest first, at most ``capacity`` of them."""

    __slots__ = ("capacity", "times", "total_lag", "max_lag_seconds", "statuses")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.times = array("d")
        self.total_lag = array("q")
        self.max_lag_seconds = array("d")  # NaN where the group had no figure
        self.statuses = array("b")

    def append(self, when: float, total_lag: int, max_lag_seconds: float | None, status: Status) -> None:
        self.times.append(when)
        self.total_lag.append(total_lag)
        self.max_lag_seconds.append(math.nan if max_lag_seconds is None else max_lag_seconds)
        self.statuses.append(int(status))
        # Trimming in halves keeps appends amortised O(1) while memory stays under twice the capacity.
        if len(self.times) >= 2 * self.capacity:
            for column in (self.times, self.total_lag, self.max_lag_seconds, self.statuses):
                del column[:len(column) - self.capacity]

    def recent_total_lag(self, count: int) -> list[int]:
        return list(self.total_lag[-min(count, self.capacity):])

    def to_json(self, since: float | None = None) -> dict[str, list[Any]]:
        start = len(self.times) - self.capacity if len(self.times) > self.capacity else 0
        if since is not None:
            while start < len(self.times) and self.times[start] <= since:
                start += 1
        return {
            "time": list(self.times[start:]),
            "totallag": list(self.total_lag[start:]),
            "max_lag_seconds": [None if math.isnan(v) else v for v in self.max_lag_seconds[start:]],
            "status": [Status.name_of(s) for s in self.statuses[start:]],
        }


class GroupTrends:
    """Samples every group of every cluster on a timer; :meth:`sample` does one round (tests call it)."""

    def __init__(self, ctx: ApplicationContext, interval: float = SAMPLE_INTERVAL,
                 retention: float = RETENTION) -> None:
        self.ctx = ctx
        self.interval = interval
        self.retention = retention
        self._capacity = max(2, math.ceil(retention / interval))
        self._series: dict[tuple[str, str], GroupSeries] = {}
        self._task: asyncio.Task | None = None
        self._log = ctx.logger.bind(type="module", coordinator="httpserver", name="trends")

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        # Before the cluster and consumer modules have started there is nothing to sample.
        await self.ctx.app_ready.wait()
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.sample()
            except Exception:
                # A failed round leaves a gap in the charts; the next round tries again.
                self._log.exception("sampling group statuses failed")

    async def sample(self) -> None:
        now = self.ctx.clock.time()
        seen: set[tuple[str, str]] = set()
        # The figures alone: an ERR group of 1,000 partitions would otherwise build an answer for each.
        _, evaluations = await every_group_evaluation(self.ctx)
        for evaluation in evaluations:
            key = (evaluation.cluster, evaluation.group)
            seen.add(key)
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = GroupSeries(self._capacity)
            series.append(now, evaluation.totallag, evaluation.max_lag_seconds, evaluation.status)
        for key in self._series.keys() - seen:
            del self._series[key]

    def series(self, cluster: str, group: str) -> GroupSeries | None:
        return self._series.get((cluster, group))
