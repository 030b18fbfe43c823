"""Monitor storage and evaluator: memory per partition, ingest rate, /status evaluation latency.

    .venv/bin/python bench/monitor_storage.py [--commits 1000000] [--groups 100] [--partitions 1000]

Three figures, each next to a reference measured in the same run:
- memory per monitored partition with a full 10-slot commit ring (tracemalloc over the storage's
  data), next to the bytes the raw figures need (5 int64 per commit);
- SetConsumerOffset ingest rate through the inmemory module (``submit``, and ``put`` with Burrow's
  queue-depth 1 and with 1000), next to the pure StorageState with no workers at all; and both for the
  same commits in runs of one group's (SetConsumerOffsets, ``submit_many``), as the offsets reader hands
  them over;
- latency of a ``/status``-equivalent evaluation of one 1,000-partition group: FetchConsumer through
  the storage workers + rules (cache miss; ``/status`` lists only the partitions worse than OK, the
  ``showall`` figure is ``/lag``'s, every partition listed), a cache hit, and the JSON encoding the HTTP
  server adds (its Go-compatible encoder, ``burrowpy.httpserver.gojson``);
  once with Python's default garbage collector thresholds, once with those ``burrowpy serve`` sets.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import time
import tracemalloc

import structlog

from burrowpy.config import Section
from burrowpy.daemon import tune_garbage_collector
from burrowpy.evaluator.caching import CachingEvaluator
from burrowpy.httpserver import gojson
from burrowpy.protocol import SetBrokerOffset, SetConsumerOffset, in_runs
from burrowpy.storage.inmemory import InMemoryStorage
from burrowpy.storage.state import StorageState

CLUSTER = "local"
TOPIC = "orders"


class WallClock:
    def time(self) -> float:
        return time.time()


def quiet_logger():
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    return structlog.get_logger()


def commit_stream(commits: int, groups: int, partitions: int, now_ms: int) -> list[SetConsumerOffset]:
    """Commits spread over ``groups`` groups x ``partitions`` partitions, in log order like __consumer_offsets."""
    stream = []
    for order in range(commits):
        slot = order % (groups * partitions)
        rnd = order // (groups * partitions)
        stream.append(SetConsumerOffset(CLUSTER, f"group-{slot // partitions}", TOPIC, slot % partitions,
                                        rnd * 100, order, now_ms - 600_000 + rnd * 1000))
    return stream


def broker_offsets(partitions: int, offset: int) -> list[SetBrokerOffset]:
    return [SetBrokerOffset(CLUSTER, TOPIC, p, partitions, offset, 0) for p in range(partitions)]


def memory_per_partition(partitions: int, intervals: int = 10) -> dict:
    now_s = int(time.time())
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    state = StorageState([CLUSTER], intervals)
    for request in broker_offsets(partitions, 10**9):
        state.add_broker_offset(request)
    for request in commit_stream(partitions * intervals, 1, partitions, now_s * 1000):
        state.add_consumer_offset(request, now_s)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    per_partition = (after - before) / partitions
    return {"partitions": partitions, "bytes_per_partition": round(per_partition),
            "raw_figures_bytes_per_partition": intervals * 5 * 8 + intervals * 8,
            "note": "includes the partition's broker history ring (shared by all groups of the topic)"}


def pure_state_rate(stream: list[SetConsumerOffset], partitions: int, runs: bool = False) -> float:
    """Commits per second into a StorageState alone: one request each, or (``runs``) in runs of one group's
    commits, as the offsets reader hands them over (the stream turned into runs before the clock starts)."""
    state = StorageState([CLUSTER])
    for request in broker_offsets(partitions, 10**9):
        state.add_broker_offset(request)
    now_s = int(time.time())
    if runs:
        joined = in_runs(stream)
        start = time.perf_counter()
        for run in joined:
            state.add_consumer_offsets(run, now_s)
    else:
        start = time.perf_counter()
        for request in stream:
            state.add_consumer_offset(request, now_s)
    return len(stream) / (time.perf_counter() - start)


async def module_rate(stream: list[SetConsumerOffset], partitions: int, how: str, queue_depth: int,
                      logger) -> float:
    section = Section("bench", "storage.default", {"queue-depth": queue_depth})
    storage = InMemoryStorage("default", section, [CLUSTER], WallClock(), logger)
    await storage.start()
    for request in broker_offsets(partitions, 10**9):
        storage.submit(request)
    await storage.flush()
    requests = in_runs(stream) if how == "runs" else stream
    start = time.perf_counter()
    if how == "runs":
        storage.submit_many(requests)
    elif how == "submit":
        for request in stream:
            storage.submit(request)
    else:
        for request in stream:
            await storage.put(request)
    await storage.flush()
    elapsed = time.perf_counter() - start
    await storage.stop()
    return len(stream) / elapsed


def percentiles(samples: list[float]) -> dict:
    samples = sorted(samples)
    return {"p50_ms": round(statistics.median(samples) * 1000, 3),
            "p99_ms": round(samples[int(len(samples) * 0.99) - 1] * 1000, 3)}


async def status_latency(partitions: int, rounds: int, logger) -> dict:
    clock = WallClock()
    storage = InMemoryStorage("default", Section("bench", "storage.default", {}), [CLUSTER], clock, logger)
    await storage.start()
    for request in broker_offsets(partitions, 10**9):
        storage.submit(request)
    await storage.flush()
    # Ten commits per partition, 10 s apart up to 10 s ago, lag shrinking: every partition is OK, which
    # is the longest path through the rules.
    now_ms = int(clock.time()) * 1000
    for index in range(10):
        for partition in range(partitions):
            storage.submit(SetConsumerOffset(CLUSTER, "group-0", TOPIC, partition, 10**8 + index * 100,
                                             index * partitions + partition, now_ms - (10 - index) * 10_000))
    await storage.flush()

    uncached = CachingEvaluator("default", Section("bench", "evaluator.default", {"expire-cache": 0}), storage,
                                clock, logger)
    cached = CachingEvaluator("default", Section("bench", "evaluator.default", {"expire-cache": 3600}), storage,
                              clock, logger)
    miss, miss_all, hit, encode = [], [], [], []
    for _ in range(rounds):
        # What /status asks for (only the partitions worse than OK listed), and what /lag asks for (all).
        start = time.perf_counter()
        await uncached.evaluate(CLUSTER, "group-0", False)
        miss.append(time.perf_counter() - start)
        start = time.perf_counter()
        status = await uncached.evaluate(CLUSTER, "group-0", True)
        miss_all.append(time.perf_counter() - start)
        start = time.perf_counter()
        await cached.evaluate(CLUSTER, "group-0", False)
        hit.append(time.perf_counter() - start)
        start = time.perf_counter()
        gojson.dumps({"error": False, "status": status.to_json()})  # the API's own encoder
        encode.append(time.perf_counter() - start)
    await storage.stop()
    assert status.partition_count == partitions
    return {"partitions": partitions, "status": status.status.name,
            "evaluate_cache_miss": percentiles(miss), "evaluate_cache_miss_showall": percentiles(miss_all),
            "evaluate_cache_hit": percentiles(hit),
            "json_encode_showall": percentiles(encode)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1000, help="partitions per group (and of the topic)")
    parser.add_argument("--rounds", type=int, default=200, help="evaluations timed for the latency figures")
    args = parser.parse_args()
    logger = quiet_logger()

    results: dict = {"memory": memory_per_partition(args.partitions * 10)}
    stream = commit_stream(args.commits, args.groups, args.partitions, int(time.time()) * 1000)
    results["ingest_commits_per_s"] = {
        "pure_state_no_workers": round(pure_state_rate(stream, args.partitions)),
        "pure_state_no_workers_runs": round(pure_state_rate(stream, args.partitions, runs=True)),
        "module_submit": round(await module_rate(stream, args.partitions, "submit", 1, logger)),
        "module_submit_many_runs": round(await module_rate(stream, args.partitions, "runs", 1, logger)),
        "module_put_queue_depth_1000": round(await module_rate(stream, args.partitions, "put", 1000, logger)),
        "module_put_queue_depth_1": round(await module_rate(stream[: len(stream) // 10], args.partitions, "put", 1,
                                                            logger)),
        "commits": args.commits, "groups": args.groups, "partitions_per_group": args.partitions,
    }
    # The million requests above are garbage now; left alive they would make every full garbage collection
    # during the latency rounds walk them, a pause that belongs to this script, not to the monitor.
    del stream
    gc.collect()
    # Twice: with Python's default collector thresholds and with the ones `burrowpy serve` sets.
    default_thresholds = gc.get_threshold()
    results["status_latency_python_default_gc"] = await status_latency(args.partitions, args.rounds, logger)
    tune_garbage_collector()
    gc.collect()
    results["status_latency"] = await status_latency(args.partitions, args.rounds, logger)
    results["status_latency"]["gc_thresholds"] = list(gc.get_threshold())
    results["status_latency_python_default_gc"]["gc_thresholds"] = list(default_thresholds)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
