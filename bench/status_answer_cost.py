"""In process: what one cache-miss ``/status`` (and ``/lag``) of a 1,000-partition group in ERR costs, step by step.

    PYTHONPATH=<tree> .venv/bin/python bench/status_answer_cost.py [--partitions 1000] [--repeat 200]

The group is in the inmemory storage as the monitor keeps it (ten commits per partition through
SetConsumerOffset, three broker offset samples, an owner and a client id per partition), every partition
stopped (its last commit long ago, the broker offsets above it), so the group is ERR and ``/status`` lists
every partition, with a lag in seconds and a forecast that move with the clock. What the caching evaluator
does on a cache miss of a group whose data has not changed (the big groups of ``bench/monitor_loop_stalls.py``'s
live phase) is timed, each step in the thread's CPU time, each repetition at a later clock time (one
millisecond on; 37.1 ms with ``--distinct``) so that no figure is the one before:

- ``evaluation``: ``GroupBasis.at`` (the clock's part of the rules, lag in seconds, the forecasts);
- ``objects``: ``GroupEvaluation.result(showall)`` (the ``PartitionStatus`` objects);
- ``json``: ``status_json`` of that result;
- ``answer``: what the HTTP API's ``_status`` runs on a miss once it has the evaluation (its encoded body), and
  ``miss``: ``evaluation`` and ``answer`` together, the loop's CPU for one cache-miss answer;
- ``after_change``: ``group_basis``, ``evaluation`` and ``answer`` of a new basis each time, the first answer after
  the group's data changed (a basis is made again, and whatever is kept with one made again too).

Medians and p90 over ``--repeat`` repetitions are printed (ms), with the basis's own cost (``group_basis``, once
per change of the group's data) for scale.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from burrowpy.config import parse_config
from burrowpy.context import ApplicationContext
from burrowpy.coordinators.base import Coordinator
from burrowpy.daemon import module_classes, tune_garbage_collector
from burrowpy.evaluator.group import GroupEvaluation, group_basis
from burrowpy.httpserver import api
from burrowpy.httpserver.status_json import status_json
from burrowpy.logging import LogControl
from burrowpy.protocol import FetchConsumer, SetBrokerOffset, SetConsumerOffset, SetConsumerOwner

CLUSTER, GROUP, TOPIC = "local", "fleet-big-00", "fleet-big-topic"


async def stored_group(partitions: int, now_ms: int, distinct: bool = False) -> Any:
    """The group's FetchConsumer answer from the inmemory storage; with ``distinct`` each partition's producer has
    a rate of its own and its offsets were read at a time of its own (so no two partitions have the same lag in
    seconds or forecast)."""
    config = parse_config({"logging": {"level": "warn"}, "storage": {"default": {"class-name": "inmemory"}},
                           "cluster": {CLUSTER: {"class-name": "kafka", "servers": ["127.0.0.1:9"]}}},
                          "bench.yaml", {})
    log_control = LogControl(config.logging, stream=io.StringIO(), name="bench.status_answer_cost")
    ctx = ApplicationContext(config=config, logger=log_control.logger, clock=time, log_control=log_control)
    coordinator = Coordinator("storage", ctx, module_classes()["storage"], default_class="inmemory")
    await coordinator.start()
    storage: Any = coordinator.modules["default"]
    try:
        for sample in range(3):  # a producer that slowed down: offsets above every commit
            for partition in range(partitions):
                if distinct:
                    offset, read_at = 10_000 + (100 + partition) * sample, now_ms - (3 - sample) * 10_000 - 13 * partition
                else:
                    offset, read_at = 10_000 + 100 * sample + partition % 7, now_ms - (3 - sample) * 10_000
                storage.submit(SetBrokerOffset(CLUSTER, TOPIC, partition, partitions, offset, read_at))
            await storage.flush()
        for index in range(10):  # the last commit 20 minutes ago: stopped
            for partition in range(partitions):
                storage.submit(SetConsumerOffset(CLUSTER, GROUP, TOPIC, partition, 9_000 + index * 10 + partition % 5,
                                                 index * partitions + partition,
                                                 now_ms - 1_200_000 - (10 - index) * 10_000))
        for partition in range(partitions):
            storage.submit(SetConsumerOwner(CLUSTER, GROUP, TOPIC, partition, f"/10.0.{partition % 8}.1",
                                            f"consumer-{partition % 8}"))
        await storage.flush()
        reply = asyncio.get_running_loop().create_future()
        storage.submit(FetchConsumer(CLUSTER, GROUP, reply))
        return await reply
    finally:
        await coordinator.stop()
        log_control.close()


def timed(step: Callable[[], Any]) -> tuple[float, Any]:
    started = time.thread_time()
    value = step()
    return time.thread_time() - started, value


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median": round(statistics.median(ordered) * 1000, 3),
            "p90": round(ordered[int(len(ordered) * 0.9) - 1] * 1000, 3)}


def answer_body(evaluation: GroupEvaluation, showall: bool) -> str:
    """The HTTP API's encoded body of a cache miss (api.API._status, from its evaluation on)."""
    return str(api.encoded_status(evaluation, showall))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--distinct", action="store_true", help="no two partitions with the same lag in seconds or "
                        "forecast (by default they share a few, as the fleet's ERR groups do)")
    args = parser.parse_args()
    tune_garbage_collector()
    now_ms = int(time.time()) * 1000
    topics = await stored_group(args.partitions, now_ms, args.distinct)
    basis_times = [timed(lambda: group_basis(topics))[0] for _ in range(10)]
    basis = group_basis(topics)
    results: dict[str, Any] = {"partitions": args.partitions, "repeat": args.repeat, "distinct": args.distinct,
                               "group_basis": summary(basis_times)}
    clock = now_ms / 1000.0 + 0.3719  # a clock's fraction: lags in seconds to the millisecond
    step = 0.0371 if args.distinct else 0.001  # distinct: few figures of one repetition come back in a later one
    for showall, name in ((False, "status"), (True, "lag")):
        steps: dict[str, list[float]] = {"evaluation": [], "objects": [], "json": [], "answer": [], "miss": [],
                                         "after_change": []}
        for _ in range(args.repeat):
            for fresh in (False, True):
                clock += step
                spent, evaluation = timed(lambda: basis.at(CLUSTER, GROUP, clock))  # noqa: B023
                if fresh:  # the answer as the API makes it
                    answer, _ = timed(lambda: answer_body(evaluation, showall))  # noqa: B023
                    steps["answer"].append(answer)
                    steps["miss"].append(spent + answer)
                else:  # the steps one by one
                    steps["evaluation"].append(spent)
                    objects, status = timed(lambda: evaluation.result(showall))  # noqa: B023
                    steps["objects"].append(objects)
                    steps["json"].append(timed(lambda: status_json(status))[0])  # noqa: B023
        for _ in range(max(10, args.repeat // 10)):
            clock += step
            started = time.thread_time()
            answer_body(group_basis(topics).at(CLUSTER, GROUP, clock), showall)
            steps["after_change"].append(time.thread_time() - started)
        assert evaluation.status.name == "ERR" and len(evaluation.result(False).partitions) == args.partitions
        results[name] = {step: summary(samples) for step, samples in steps.items()}
        gc.collect()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
