"""The monitor at fleet scale: memory and CPU of the storage and evaluator as groups and partitions grow.

    .venv/bin/python bench/monitor_fleet.py [--groups 10,100,1000,10000] [--partitions-per-group 10]
                                            [--intervals 10] [--commit-interval 5] [--plot bench/fleet.svg]
                                            [--ingest-rate COMMITS_PER_S]

Each size runs in a fresh Python process (so its resident set is its own): G groups, each on its own topic
of ``--partitions-per-group`` partitions (10,000 groups x 10 = 100,000 monitored partitions), through the
storage state and the evaluator the monitor runs (``StorageState``, ``evaluate_group``), no Kafka:

1. broker offsets for every partition, then commits until every partition has a full window
   (``--intervals`` commits each, one run of a group's commits per round as the offsets reader hands them
   over): time and commits/s of the storage alone (no decoding);
2. RSS growth over the empty process, per monitored partition (what the storage and its objects cost in
   a running process, interpreter overheads included);
3. one broker-offset refresh of every partition (what the cluster module stores every ``offset-refresh``,
   30 s by default): CPU seconds;
4. evaluating every group once (what a /metrics scrape or a notifier pass asks for): CPU seconds;
5. the commit rate such a fleet sends when every consumer commits every ``--commit-interval`` seconds
   (Java's auto-commit default is 5 s) and, given ``--ingest-rate`` (the end-to-end commits/s of
   ``bench/monitor_ingest.py``: fetching and decoding ``__consumer_offsets`` included), the share of that
   one monitor process would spend on it.

Prints a table and, with ``--plot``, an SVG of the cost curves (log-log: time and memory against size).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from svgplot import log_log_chart

CLUSTER = "fleet"


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def measure(groups: int, partitions_per_group: int, intervals: int) -> dict:
    """One size, in this process (run by the parent in a fresh one)."""
    import gc

    from burrowpy.evaluator.group import evaluate_group
    from burrowpy.protocol import SetBrokerOffset, SetConsumerOffsets
    from burrowpy.storage.state import StorageState

    gc.collect()
    empty = rss_bytes()
    state = StorageState([CLUSTER], intervals)
    topics = [f"topic-{number:05d}" for number in range(groups)]
    names = [f"group-{number:05d}" for number in range(groups)]
    now_ms = int(time.time() * 1000)
    now_s = now_ms // 1000
    base_ms = now_ms - intervals * 60_000

    def refresh(offset: int) -> None:
        for topic in topics:
            for partition in range(partitions_per_group):
                state.add_broker_offset(SetBrokerOffset(CLUSTER, topic, partition, partitions_per_group,
                                                        offset, now_ms))

    refresh(intervals * 1000)
    commits = 0
    started = time.perf_counter()
    order = 0
    for round_number in range(intervals):
        committed, timestamp = (round_number + 1) * 1000 - 10, base_ms + round_number * 60_000
        for group, topic in zip(names, topics, strict=True):
            # One OffsetCommit of the group's partitions: one run, as the offsets reader hands it to storage.
            commits_of_group = []
            for partition in range(partitions_per_group):
                order += 1
                commits_of_group += (partition, committed, order, timestamp)
            state.add_consumer_offsets(SetConsumerOffsets(CLUSTER, group, topic, commits_of_group), now_s)
        commits += groups * partitions_per_group
    fill_s = time.perf_counter() - started
    gc.collect()
    filled = rss_bytes()

    started = time.process_time()
    refresh(intervals * 1000 + 500)
    refresh_cpu_s = time.process_time() - started
    if state.topic_offsets(CLUSTER, topics[-1]) != [intervals * 1000 + 500] * partitions_per_group:
        raise RuntimeError("the broker offset refresh was not stored")

    started = time.process_time()
    for group in names:
        topics_of_group = state.consumer(CLUSTER, group, now_s)
        evaluate_group(CLUSTER, group, topics_of_group, now_s)
    evaluate_cpu_s = time.process_time() - started
    monitored = groups * partitions_per_group
    return {"groups": groups, "partitions": monitored, "commits": commits, "fill_s": fill_s,
            "commits_per_s": commits / fill_s, "rss_bytes": filled, "bytes_per_partition": (filled - empty) / monitored,
            "refresh_cpu_s": refresh_cpu_s, "evaluate_cpu_s": evaluate_cpu_s}


def plot(results: list[dict], path: Path) -> None:
    partitions = [r["partitions"] for r in results]
    log_log_chart(path, "Monitor cost against fleet size (one process)", "monitored partitions", {
        "fill, storage only (s)": list(zip(partitions, (r["fill_s"] for r in results), strict=True)),
        "broker-offset refresh CPU (s)": list(zip(partitions, (r["refresh_cpu_s"] for r in results), strict=True)),
        "evaluate every group CPU (s)": list(zip(partitions, (r["evaluate_cpu_s"] for r in results), strict=True)),
        "RSS (MiB)": list(zip(partitions, (r["rss_bytes"] / 2**20 for r in results), strict=True)),
    })


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", default="10,100,1000,10000", help="comma-separated group counts")
    parser.add_argument("--partitions-per-group", type=int, default=10)
    parser.add_argument("--intervals", type=int, default=10)
    parser.add_argument("--commit-interval", type=float, default=5.0, help="seconds between a consumer's commits")
    parser.add_argument("--plot", type=Path, help="write the cost curves as SVG here")
    parser.add_argument("--ingest-rate", type=float,
                        help="end-to-end commits/s of one monitor process (from bench/monitor_ingest.py)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.partitions_per_group, args.intervals)))
        return 0

    print(f"$ {' '.join([os.path.relpath(sys.executable), *sys.argv])}")
    results = []
    for groups in (int(n) for n in args.groups.split(",")):
        completed = subprocess.run([sys.executable, __file__, "--one", str(groups), "--partitions-per-group",
                                    str(args.partitions_per_group), "--intervals", str(args.intervals)],
                                   capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            raise SystemExit(f"{groups} groups failed:\n{completed.stderr[-3000:]}")
        results.append(json.loads(completed.stdout.splitlines()[-1]))
        result = results[-1]
        print(f"{result['groups']:,} groups: {result['partitions']:,} partitions measured", flush=True)

    print()
    print(f"| groups | partitions | fill, storage only (commits/s) | RSS | bytes/partition | broker refresh CPU | "
          f"evaluate every group CPU | commits/s at one per {args.commit_interval:g} s | share of one process |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        needed = r["partitions"] / args.commit_interval
        share = f"{needed / args.ingest_rate:.0%}" if args.ingest_rate else "(give --ingest-rate)"
        print(f"| {r['groups']:,} | {r['partitions']:,} | {r['fill_s']:.1f} s ({r['commits_per_s']:,.0f}) | "
              f"{r['rss_bytes'] / 2**20:,.0f} MiB | {r['bytes_per_partition']:,.0f} | {r['refresh_cpu_s']:.2f} s | "
              f"{r['evaluate_cpu_s']:.2f} s | {needed:,.0f} | {share} |")
    if args.plot:
        plot(results, args.plot)
        print(f"\ncost curves: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
