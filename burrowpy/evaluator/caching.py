"""The ``caching`` evaluator module: group status from storage through the rules, cached (burrow-spec 1.1-1.2).

A group's status is computed from one storage answer (FetchConsumerIfChanged) with
:func:`group.group_basis` and :meth:`group.GroupBasis.at`, and kept for ``expire-cache`` seconds,
whether the group was found or not, so the HTTP API, ``/metrics`` and the notifier asking about the same
group share one evaluation. What is kept is the evaluation itself; the answer listing every partition and
the one listing only the problems (``/status``) are each built from it when first asked for, so a
``/status`` makes objects only for the partitions it lists. Concurrent requests for a group that is being
evaluated wait for that evaluation instead of starting another.

Past ``expire-cache`` the group is evaluated again at the new time, but from its basis (everything that does
not read the clock) when storage says that nothing it was made from has changed since: then storage copies
nothing and the windows are not gone through again, while the figures that move with the clock (STOP, lag
in seconds, forecasts) are those of a fresh evaluation. A broker offset refresh that moved nothing but the
samples of a lagging topic (the same newest offsets, read again) makes storage answer those samples alone
(SamplesMoved): the topic's basis is made again from the columns it kept and the new samples
(:meth:`GroupBasis.resampled`), as from a whole answer, without storage copying the commits. The dashboard's trend
sampler asks for every group every few seconds; an idle fleet's groups are thus evaluated from their windows once
per change. It asks through
:meth:`CachingEvaluator.evaluations`, which puts the groups it has no result for in one storage request
(FetchConsumersIfChanged) rather than a task and a request each: that round trip per group was most of what a
round cost an idle fleet. The answer's groups are then evaluated a few milliseconds of work at a time
(``EVALUATION_STEP``), the loop handed back in between so that requests are read meanwhile, all at the clock's
reading taken when the answer came.

Unlike Burrow the cache key is the (cluster, group) pair, not ``cluster + " " + group``, so cluster
names containing a space work.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from time import perf_counter
from typing import Any

from broker.config_loading import Section
from burrowpy.evaluator.group import GroupBasis, GroupEvaluation, group_basis, not_found
from burrowpy.protocol import (
    ConsumerGroupStatus,
    EvaluatorRequest,
    FetchConsumerIfChanged,
    FetchConsumersIfChanged,
    SamplesMoved,
)

# A group's basis is kept this long (seconds) after it was last used, or expire-cache if longer: long enough
# for the dashboard's sampling rounds (every 5 s by default) to find it, short enough that the bases of
# groups nobody asks about any more do not stay in memory.
BASIS_KEPT = 120.0
# Expired results and unused bases are swept out at most this often (seconds), or every expire-cache if longer: a
# sweep goes through every group's entries, and what it forgets is never answered from anyway (expiry is checked
# on each use).
SWEEP_EVERY = 10.0
# evaluations hands the event loop back between groups once it has evaluated groups for this long (seconds of
# work, perf_counter's): the trend sampler's slice of 50 groups cost up to 21 ms in one stretch, during which no
# request was read. A group's own evaluation is never split.
EVALUATION_STEP = 0.002

CONFIG_KEYS = ("class-name", "expire-cache", "minimum-complete", "allowed-lag", "max-lag-seconds",
               "max-lag-seconds-groups")


class CachingEvaluator:
    """Evaluator module ``caching``; reads groups from ``storage`` (anything with ``submit(request)``)."""

    class_name = "caching"

    def __init__(self, name: str, section: Section, storage: Any, clock: Any, logger: Any) -> None:
        section.check_keys(CONFIG_KEYS)
        self.name = name
        self._storage = storage
        self._clock = clock
        self._log = logger.bind(evaluator=name)
        self.expire_cache = section.get_int("expire-cache", 10, minimum=0)
        self.allowed_lag = section.get_int("allowed-lag", 0, minimum=0)
        self.minimum_complete = section.get_float("minimum-complete", 0.0)
        if not 0.0 <= self.minimum_complete <= 1.0:
            raise section.error("minimum-complete", f"must be between 0 and 1, got {self.minimum_complete}")
        # The optional time rule (not Burrow's, off by default): WARN when the oldest unconsumed record of
        # a partition is older than this many seconds. Per-group values by regex, first match wins.
        self.max_lag_seconds = section.get_float("max-lag-seconds", 0.0)
        if self.max_lag_seconds < 0:
            raise section.error("max-lag-seconds", f"must be 0 (off) or more, got {self.max_lag_seconds}")
        self.group_max_lag_seconds: list[tuple[re.Pattern[str], float]] = []
        for pattern, value in section.get_map("max-lag-seconds-groups", {}).items():
            key = f"max-lag-seconds-groups.{pattern}"
            try:
                seconds = float(value)
                regex = re.compile(pattern)
            except (ValueError, re.error) as exc:
                raise section.error(key, f"needs a regular expression and a number of seconds: {exc}") from None
            if seconds < 0:
                raise section.error(key, f"must be 0 (off) or more, got {seconds}")
            self.group_max_lag_seconds.append((regex, seconds))
        # (cluster, group) -> (expiry time in clock seconds, the group's evaluation)
        self._cache: dict[tuple[str, str], tuple[float, GroupEvaluation]] = {}
        # (cluster, group) -> (storage's version of the group's data, its basis, when last used)
        self._bases: dict[tuple[str, str], tuple[Any, GroupBasis, float]] = {}
        # (cluster, group) -> the evaluation under way: a task of its own, or a future of a batch (evaluations)
        self._evaluating: dict[tuple[str, str], asyncio.Future[GroupEvaluation]] = {}
        self._answering: set[asyncio.Task[Any]] = set()
        self._next_sweep = 0.0

    def describe(self) -> dict[str, Any]:
        """The module block of ``/v3/config/evaluator/NAME``."""
        return {"class-name": self.class_name, "expire-cache": self.expire_cache}

    def max_lag_seconds_for(self, group: str) -> float:
        """The time threshold of a group: its first matching per-group value, else the default (0 = off)."""
        for regex, seconds in self.group_max_lag_seconds:
            if regex.search(group):
                return seconds
        return self.max_lag_seconds

    async def start(self) -> None:
        self._log.info("starting", expire_cache=self.expire_cache)

    async def stop(self) -> None:
        self._log.info("stopping")
        pending = [*self._evaluating.values(), *self._answering]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        self._evaluating.clear()  # a batch cancelled before it began leaves its futures there
        self._cache.clear()
        self._bases.clear()

    async def evaluate(self, cluster: str, group: str, showall: bool) -> ConsumerGroupStatus:
        """The group's status; with ``showall`` False only partitions worse than OK are listed.

        The result (and the status objects in it) may be shared with other callers: read, don't modify.
        """
        return (await self.evaluation(cluster, group)).result(showall)

    async def evaluation(self, cluster: str, group: str) -> GroupEvaluation:
        """The group's evaluation, shared as :meth:`evaluate`'s: its figures (status, total lag, lag in
        seconds) are read without building any partition's answer."""
        key = (cluster, group)
        cached = self._cache.get(key)
        if cached is not None and cached[0] > self._clock.time():
            evaluation = cached[1]
        else:
            task = self._evaluating.get(key)
            if task is None:
                task = self._evaluating[key] = asyncio.create_task(self._evaluate_fresh(cluster, group))
                task.add_done_callback(lambda _: self._evaluating.pop(key, None))
            # Shielded: a caller that gives up must not cancel the evaluation others are waiting for.
            evaluation = await asyncio.shield(task)
        return evaluation

    async def evaluations(self, cluster: str, groups: Sequence[str]) -> list[GroupEvaluation]:
        """:meth:`evaluation` of each group, in order. The groups with neither a result nor an evaluation under way
        are asked of storage in one request (FetchConsumersIfChanged) and evaluated as :meth:`evaluation` would,
        each shared with its concurrent callers the same way; their evaluation hands the loop back every
        ``EVALUATION_STEP`` seconds of work."""
        now = self._clock.time()
        loop = asyncio.get_running_loop()
        found: list[GroupEvaluation | asyncio.Future[GroupEvaluation]] = []
        asked: list[str] = []
        futures: list[asyncio.Future[GroupEvaluation]] = []
        evaluating = self._evaluating
        for group in groups:
            key = (cluster, group)
            cached = self._cache.get(key)
            if cached is not None and cached[0] > now:
                found.append(cached[1])
                continue
            future = evaluating.get(key)
            if future is None:
                # Taken out of _evaluating by _evaluate_fresh_many once set (not by a done callback: one handle
                # less for the loop to run per group, thousands per sampler round).
                future = evaluating[key] = loop.create_future()
                asked.append(group)
                futures.append(future)
            found.append(future)
        if asked:
            task = asyncio.create_task(self._evaluate_fresh_many(cluster, asked, futures))
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)
        results: list[GroupEvaluation] = []
        for item in found:
            if isinstance(item, asyncio.Future):
                # Shielded as in evaluation; most are done by the time the first is, and are read as they are.
                results.append(item.result() if item.done() else await asyncio.shield(item))
            else:
                results.append(item)
        return results

    def submit(self, request: EvaluatorRequest) -> None:
        """Channel-style entry point: answer ``request.reply`` with the group's status."""
        task = asyncio.create_task(self._answer(request))
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    async def _answer(self, request: EvaluatorRequest) -> None:
        try:
            status = await self.evaluate(request.cluster, request.group, request.showall)
        except Exception as exc:
            if not request.reply.done():
                request.reply.set_exception(exc)
            return
        if not request.reply.done():
            request.reply.set_result(status)

    async def _evaluate_fresh(self, cluster: str, group: str) -> GroupEvaluation:
        known = self._bases.get((cluster, group))
        reply = asyncio.get_running_loop().create_future()
        # Evaluations of one group do not overlap (see evaluation), so the basis is still the one asked with.
        self._storage.submit(FetchConsumerIfChanged(cluster, group, known[0] if known is not None else None, reply))
        answer = await reply
        return self._evaluated(cluster, group, known, answer, self._clock.time())

    async def _evaluate_fresh_many(self, cluster: str, groups: list[str],
                                   futures: list[asyncio.Future[GroupEvaluation]]) -> None:
        """:meth:`_evaluate_fresh` of each group, from one storage request; each result set on its future, which is
        then no longer the evaluation under way (``_evaluating``)."""
        evaluating = self._evaluating
        try:
            kept = [self._bases.get((cluster, group)) for group in groups]
            reply = asyncio.get_running_loop().create_future()
            self._storage.submit(FetchConsumersIfChanged(cluster, groups, [known[0] if known is not None else None
                                                                          for known in kept], reply))
            answers = await reply
            # Every group at the one instant, as if evaluated in one go, though the loop is handed back between
            # groups every EVALUATION_STEP seconds of work (perf_counter's, not the clock's).
            now = self._clock.time()
            step_ends = perf_counter() + EVALUATION_STEP
            for index, (group, known, future) in enumerate(zip(groups, kept, futures, strict=True)):
                answer, answers[index] = answers[index], None  # storage's copy let go once evaluated, not at the end
                if not future.done():
                    try:
                        future.set_result(self._evaluated(cluster, group, known, answer, now))
                    except Exception as exc:  # that group's callers are told; the other groups are not held up
                        future.set_exception(exc)
                if evaluating.get(key := (cluster, group)) is future:
                    del evaluating[key]
                del answer
                if perf_counter() >= step_ends and index + 1 < len(groups):
                    await asyncio.sleep(0)
                    step_ends = perf_counter() + EVALUATION_STEP
        except asyncio.CancelledError:
            for future in futures:
                future.cancel()
            raise
        except Exception as exc:
            for future in futures:
                if not future.done():
                    future.set_exception(exc)
        finally:
            for group, future in zip(groups, futures, strict=True):
                if evaluating.get(key := (cluster, group)) is future:
                    del evaluating[key]

    def _evaluated(self, cluster: str, group: str, known: tuple[Any, GroupBasis, float] | None, answer: Any,
                   now: float) -> GroupEvaluation:
        """The group's evaluation at ``now`` from storage's answer to FetchConsumerIfChanged with ``known``'s
        version, kept in the cache; the basis kept for the next."""
        key = (cluster, group)
        if answer is None:
            self._bases.pop(key, None)
            evaluation = not_found(cluster, group)
        else:
            version, topics = answer
            if topics is None:
                assert known is not None  # storage leaves the partitions out only for the version it was given
                basis = known[1]
            elif topics.__class__ is SamplesMoved:
                assert known is not None  # storage answers samples alone only against the version it was given
                basis = known[1].resampled(topics)
            else:
                basis = group_basis(topics, self.allowed_lag, self.minimum_complete)
            self._bases[key] = (version, basis, now)
            evaluation = basis.at(cluster, group, now, self.max_lag_seconds_for(group))
        self._log.debug("evaluation result", cluster=cluster, group=group, status=evaluation.status.name,
                        complete=evaluation.complete, totallag=evaluation.totallag,
                        partition_count=evaluation.partition_count)
        if now >= self._next_sweep:
            self._sweep(now)
        self._cache[(cluster, group)] = (now + self.expire_cache, evaluation)
        return evaluation

    def _sweep(self, now: float) -> None:
        """Forget expired results, so groups nobody asks about any more do not stay in memory."""
        for key in [key for key, (expiry, _) in self._cache.items() if expiry <= now]:
            del self._cache[key]
        unused_since = now - max(self.expire_cache, BASIS_KEPT)
        for key in [key for key, (_, _, used) in self._bases.items() if used <= unused_since]:
            del self._bases[key]
        self._next_sweep = now + max(self.expire_cache, SWEEP_EVERY)
