"""Benchmark: what one Spark task's Python side costs per partition, in this process (no Spark, no JVM).

    PYTHONPATH=<tree> .venv/bin/python bench/spark_replay_cost.py [--partitions 200] [--runs 5] [--profile]

(PYTHONPATH: the tree whose pipeline is timed; a tree from before w12/2 has no ``replay_arrow_batches`` and
times the rest.)

The history is the synthetic one of ``bench/spark_evaluate.py`` at its 10M-commit shape (20 groups on
each topic of 50 partitions, 100 commits per partition, broker samples every 30 s, 101 evaluation points),
generated in memory for just enough topics. Each (cluster, topic, partition) is an Arrow table of the
history columns, its rows in no particular order (shuffled, seeded), as Spark's ``applyInArrow`` handed it over
before w12/2; for ``replay_arrow_batches`` the same tables one after another in 10,000-row record batches. Timed, CPU seconds (``time.process_time``) over ``--partitions`` partitions, best and
median of ``--runs``:

- ``replay_arrow_batches``: the ``mapInArrow`` body the Spark job runs since w12/2: the partitions' rows
  in order, in record batches of 10,000 rows (Spark's ``maxRecordsPerBatch``), Arrow batches out;
- ``replay_arrow_group``: the ``applyInArrow`` body of before, one call per partition, Arrow table in,
  Arrow table out;
- ``replay_columns``: the numpy replay of one partition alone (the Arrow columns read in, numpy out);
  ``replay_arrow_group`` minus this is building its Arrow answer.

With ``--profile``, a cProfile of one pass of ``replay_arrow_batches``, the 25 costliest functions by own time.
Per-partition figures times 5,450 partitions estimate the 10M job's Python side (CPU, not wall).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
from importlib import import_module
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from burrowpy.pipeline.columnar import replay_columns
from burrowpy.pipeline.evaluate import replay_arrow_group
from burrowpy.pipeline.replay import ReplaySettings, evaluation_points
from burrowpy.pipeline.synthetic import SyntheticSpec, synthetic_tables

# A tree from before w12/2 (PYTHONPATH=<tree>) has only the per-partition body.
replay_arrow_batches: Any = getattr(import_module("burrowpy.pipeline.evaluate"), "replay_arrow_batches", None)

PARTITIONS_OF_10M = 5_450


def partition_tables(count: int, seed: int = 11) -> tuple[list[tuple[tuple, Any]], list[int]]:
    """``count`` partitions of the 10M-shaped synthetic history as (key, Arrow table) pairs, rows shuffled."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    spec = SyntheticSpec(groups=20 * -(-count // 50), groups_per_topic=20, partitions=50, commits_per_partition=100)
    table = pa.concat_tables(list(synthetic_tables(spec)))
    rng = np.random.default_rng(seed)
    first, last = pc.min_max(table.column("timestamp")).values()
    points = evaluation_points(first.as_py(), last.as_py(), 60)
    keys = sorted(set(zip(table.column("topic").to_pylist(), table.column("partition").to_pylist(), strict=True)))
    out = []
    topic, partition = table.column("topic"), table.column("partition")
    for name, number in keys[:count]:
        part = table.filter(pc.and_(pc.equal(topic, name), pc.equal(partition, number)))
        part = part.take(pa.array(rng.permutation(part.num_rows)))
        key = (pa.scalar(spec.cluster), pa.scalar(name), pa.scalar(number, pa.int32()))
        out.append((key, part))
    return out, points


def timed(fn: Any, runs: int) -> list[float]:
    spent = []
    for _ in range(runs):
        started = time.process_time()
        fn()
        spent.append(time.process_time() - started)
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    parts, points = partition_tables(args.partitions)
    settings = ReplaySettings()
    rows_in = sum(t.num_rows for _, t in parts)
    rows_out = sum(replay_arrow_group(points, settings, k, t).num_rows for k, t in parts)
    print(f"{len(parts)} partitions, {rows_in:,} history rows in, {rows_out:,} partition statuses out, "
          f"{len(points)} points; load {os.getloadavg()[0]:.1f}", flush=True)

    def whole() -> None:
        for key, table in parts:
            replay_arrow_group(points, settings, key, table)

    import pyarrow as pa

    stream = pa.concat_tables([table for _, table in parts]).combine_chunks().to_batches(max_chunksize=10_000)

    def batched() -> None:
        for _ in replay_arrow_batches(points, settings, iter(stream)):
            pass

    def numpy_only() -> None:
        for _, table in parts:
            replay_columns(table, points, settings)

    rows: list[tuple[str, list[float]]] = []
    if replay_arrow_batches is not None:
        batched_rows = sum(batch.num_rows for batch in replay_arrow_batches(points, settings, iter(stream)))
        assert batched_rows == rows_out, (batched_rows, rows_out)
        rows.append(("replay_arrow_batches (the partitions in 10,000-row batches in and out)",
                     timed(batched, args.runs)))
    whole_s = timed(whole, args.runs)
    numpy_s = timed(numpy_only, args.runs)
    rows += [("replay_arrow_group (a call per partition, Arrow in, Arrow out)", whole_s),
             ("replay_columns (Arrow in, numpy out)", numpy_s)]
    for label, spent in rows:
        best, median = min(spent), statistics.median(spent)
        print(f"{label}: best {best:.3f} CPU s, median {median:.3f} ({best / len(parts) * 1e3:.2f} ms a partition, "
              f"{best / len(parts) * PARTITIONS_OF_10M:.1f} CPU s for the 10M history's {PARTITIONS_OF_10M:,})",
              flush=True)
    print(f"the Arrow answer built from the columns: {min(whole_s) - min(numpy_s):.3f} CPU s (best minus best); "
          f"load {os.getloadavg()[0]:.1f}", flush=True)

    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(batched if replay_arrow_batches is not None else whole)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
