"""What the dashboard's sampling of every group costs an idle monitor, in process: the evaluator's rounds.

    .venv/bin/python bench/monitor_idle_sampling.py [--groups 2000] [--partitions 50000] [--big-groups 10]
                                                    [--big-partitions 1000] [--repeat 3] [--memory]
                                                    [--serve-logging]

The fleet of ``bench/monitor_fleet_daemon.py`` without Kafka: the groups each consume a topic of their own,
caught up at its end, and ``--big-groups`` groups one topic of ``--big-partitions`` partitions one record
behind, every partition STOP (ERR). Storage (``InMemoryStorage``, every partition with a full window and ten
broker offset samples) and the caching evaluator (expire-cache 0, so every round asks storage again) run as
in the daemon, on a fake clock. CPU seconds (``time.process_time``) of one round of every group's evaluation
(``every_group_evaluation``, what the trend sampler does every 5 s):

- ``from the windows``: every group evaluated from a fresh storage answer (``assess_group`` over a
  FetchConsumer), which is what every round cost before the evaluator kept each group's basis;
- ``first round``: the evaluator's first round (no basis kept yet);
- ``nothing changed``: the next round, 5 s later;
- ``after an idle refresh``: a broker offset refresh that finds every offset where it was (what the cluster
  module stores every offset-refresh while nothing is produced), then a round 5 s later: the big groups'
  topic lags, so its new samples count and those groups are evaluated from their windows again; the
  caught-up topics keep their version;
- ``record-time wants``: storage's search for the record timestamps the groups' commits want
  (``StorageState.record_time_wants``, after every refresh in the daemon): the first, after an idle refresh,
  and after a refresh in which the big groups' topic grew by one record a partition.

The smallest of ``--repeat`` runs of each is printed. Storage and the evaluator log through loggers whose calls
below error do nothing, unless ``--serve-logging``: then through ``burrowpy serve``'s (``LogControl`` at level
info, its output discarded), whose calls below the level cost what they cost the daemon. ``--memory`` instead
measures what the evaluator keeps after its first round (its bases: ``tracemalloc``, which slows the round many
times over).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import io
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from monitor_fleet_daemon import fleet_arguments

from burrowpy.config import LoggingConfig, Section
from burrowpy.evaluator.caching import CachingEvaluator
from burrowpy.evaluator.group import GroupEvaluation, assess_group
from burrowpy.httpserver.ui.trends import every_group_evaluation
from burrowpy.logging import LogControl
from burrowpy.protocol import FetchConsumer, SetBrokerOffset, SetConsumerOffsets
from burrowpy.storage.inmemory import InMemoryStorage
from burrowpy.storage.state import StorageState

CLUSTER = "local"
INTERVALS = 10


class Clock:
    def __init__(self) -> None:
        self.now = float(int(time.time()))

    def time(self) -> float:
        return self.now


class Context:
    """What ``every_group_evaluation`` reads of the application context."""

    def __init__(self, storage: InMemoryStorage, evaluator: CachingEvaluator) -> None:
        self.storage = storage
        self.evaluator = evaluator

    async def fetch(self, request: object) -> object:
        self.storage.submit(request)
        return await request.reply

    @staticmethod
    def new_reply() -> asyncio.Future:
        return asyncio.get_running_loop().create_future()


async def measure(args: argparse.Namespace) -> dict[str, float]:
    clock = Clock()
    with contextlib.ExitStack() as stack:
        log = structlog.get_logger()
        if args.serve_logging:  # serve's loggers, at its default level, writing to nowhere
            control = LogControl(LoggingConfig(level="info"), stream=io.StringIO(), name="burrowpy.bench")
            stack.callback(control.close)
            log = control.logger
        return await measure_with(args, clock, log)


async def measure_with(args: argparse.Namespace, clock: Clock, log: Any) -> dict[str, float]:
    storage = InMemoryStorage("s", Section("bench", "storage.s", {"intervals": INTERVALS}), [CLUSTER], clock, log)
    evaluator = CachingEvaluator("e", Section("bench", "evaluator.e", {"expire-cache": 0}), storage, clock, log)
    small = args.groups - args.big_groups
    per_group = -(-(args.partitions - args.big_partitions) // small)
    plan = {f"fleet-{n:05d}": (f"fleet-topic-{n:05d}", per_group, 0, 0) for n in range(small)}
    plan |= {f"fleet-big-{n:02d}": ("fleet-big-topic", args.big_partitions, INTERVALS, INTERVALS - 1)
             for n in range(args.big_groups)}
    topics = {topic: (partitions, records) for topic, partitions, records, _ in plan.values()}
    state = storage.state  # filled directly: this measures the rounds, not the ingest

    def refresh() -> None:
        now_ms = int(clock.now * 1000)
        for topic, (partitions, records) in topics.items():
            for partition in range(partitions):
                state.add_broker_offset(SetBrokerOffset(CLUSTER, topic, partition, partitions, records, now_ms))

    for _ in range(INTERVALS):
        refresh()
        clock.now += 10
    order = 0
    for round_number in range(INTERVALS):
        for group, (topic, partitions, _, last) in plan.items():
            run: list[int] = []
            for partition in range(partitions):
                order += 1
                run += (partition, last, order, int(clock.now * 1000) - (INTERVALS - round_number) * 5000)
            state.add_consumer_offsets(SetConsumerOffsets(CLUSTER, group, topic, run), int(clock.now))
    await storage.start()
    await evaluator.start()
    ctx = Context(storage, evaluator)
    figures: dict[str, float] = {}

    async def timed(name: str, work: Callable[[], Awaitable[object]]) -> None:
        started = time.process_time()
        await work()
        figures[name] = time.process_time() - started

    def wants_timed(name: str, state: StorageState) -> None:
        started = time.process_time()
        state.record_time_wants(CLUSTER)
        figures[name] = time.process_time() - started

    async def fresh(group: str) -> GroupEvaluation:
        topics_of_group = await ctx.fetch(FetchConsumer(CLUSTER, group, ctx.new_reply()))
        return assess_group(CLUSTER, group, topics_of_group, clock.now)

    async def from_the_windows() -> list[GroupEvaluation]:
        # as every_group_evaluation asks: every group at once, the evaluations kept until all are done
        return await asyncio.gather(*(fresh(group) for group in plan))

    try:
        if args.memory:
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.take_snapshot()
            await every_group_evaluation(ctx)
            evaluator._cache.clear()  # the evaluations of expire-cache: what stays is the bases
            gc.collect()
            kept = tracemalloc.take_snapshot().compare_to(before, "filename")
            tracemalloc.stop()
            figures["kept after the first round, MiB"] = sum(stat.size_diff for stat in kept) / 2**20
            return figures
        await timed("from the windows", from_the_windows)
        await timed("first round", lambda: every_group_evaluation(ctx))
        clock.now += 5
        await timed("nothing changed", lambda: every_group_evaluation(ctx))
        refresh()
        clock.now += 5
        await timed("after an idle refresh", lambda: every_group_evaluation(ctx))
        _, evaluations = await every_group_evaluation(ctx)
        if len(evaluations) != len(plan) or sum(e.status.name == "ERR" for e in evaluations) != args.big_groups:
            raise RuntimeError("the fleet was not evaluated as planned")
        # What storage's workers do after each refresh: the record timestamps the groups' commits want.
        wants_timed("record-time wants, first", state)
        refresh()
        wants_timed("record-time wants, after an idle refresh", state)
        for topic, (partitions, records) in list(topics.items()):
            if records:  # the big groups' topic: one record more in every partition
                topics[topic] = (partitions, records + 1)
        refresh()
        wants_timed("record-time wants, after the big topic grew", state)
    finally:
        await evaluator.stop()
        await storage.stop()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    fleet_arguments(parser)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory", action="store_true", help="measure what the evaluator keeps instead")
    parser.add_argument("--serve-logging", action="store_true",
                        help="storage and the evaluator log through burrowpy serve's loggers (level info) instead "
                             "of loggers whose calls below error do nothing")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))  # errors only
    runs = [asyncio.run(measure(args)) for _ in range(1 if args.memory else args.repeat)]
    print(f"{args.groups:,} groups, {args.partitions:,} partitions ({args.big_groups} groups on "
          f"{args.big_partitions:,} partitions in ERR)"
          + ("" if args.memory else f"; CPU seconds of one round, the smallest of {args.repeat}:"))
    for name in runs[0]:
        print(f"  {name}: {min(run[name] for run in runs):.3f}" + ("" if args.memory else " s"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
