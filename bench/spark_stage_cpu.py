"""Benchmark: the Spark job's steps one by one, wall and CPU (the JVM's and the Python workers' apart).

    PYTHONPATH=<tree> .venv/bin/python bench/spark_stage_cpu.py HISTORY_DIR [--output DIR] [--master 'local[2]']

HISTORY_DIR: a history (e.g. the one ``bench/spark_evaluate.py --work DIR`` writes, or
``write_synthetic_history`` of its spec). In one SparkSession: the bounds job, the shuffle by partition to Spark's
noop sink, the evaluation of every partition to the noop sink twice (the first pays the JIT compiler and the
Python workers' start, the second is the stage's own cost), then the outputs of ``evaluate_history`` in its order:
``partition_status`` written (the evaluation again plus the Parquet write, and since w13/2 the tasks' partial
group figures; since w15 the tasks write the statuses themselves with pyarrow, not Spark's writer), the group
figures combined from those partials (before w13/2: read back and aggregated) and written, the lag report, its ``toPandas`` and the timelines. CPU from /proc: the JVM's threads, and the Python
workers alive at the end of the step (Spark reuses them, so that is all of them in local mode).
PYTHONPATH picks the tree whose pipeline runs (a tree from before w12/2 has the same functions).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_evaluate import process_tree  # noqa: E402

from burrowpy.pipeline import evaluate  # noqa: E402
from burrowpy.pipeline.replay import ReplaySettings, evaluation_points  # noqa: E402
from burrowpy.pipeline.session import build_session  # noqa: E402


def cpu_split() -> tuple[float, float]:
    """CPU seconds so far of the JVM and of the other processes under this one (the Python workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    jvm = python = 0.0
    for pid, fields in process_tree(os.getpid()).items():
        if pid == os.getpid():
            continue
        own = sum(int(value) for value in fields[11:13]) / ticks
        try:
            command = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if command == "java":
            jvm += own
        else:
            python += own
    return jvm, python


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("history", type=Path)
    parser.add_argument("--output", type=Path, help="where the outputs go (default: a temporary directory)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--step", type=int, default=60)
    args = parser.parse_args()
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    spark = build_session(args.master, app_name="burrowpy-bench", conf={"spark.driver.memory": "4g"})
    spark.range(1).count()
    with tempfile.TemporaryDirectory(prefix="burrowpy-stages-") as temporary:
        out = str(args.output or temporary)
        last = [time.perf_counter(), *cpu_split()]

        def step(label: str) -> None:
            now, jvm, python = time.perf_counter(), *cpu_split()
            print(f"{label}: wall {now - last[0]:.1f} s, JVM {jvm - last[1]:.1f} CPU s, Python workers "
                  f"{python - last[2]:.1f} CPU s; load {os.getloadavg()[0]:.1f}", flush=True)
            last[:] = [time.perf_counter(), *cpu_split()]

        settings = ReplaySettings()
        events = evaluate.read_history_frame(spark, args.history)
        bounds = events.agg(F.count(F.lit(1)), F.min("timestamp"), F.max("timestamp")).first()
        points = evaluation_points(bounds[1], bounds[2], args.step)
        step(f"bounds ({bounds[0]:,} rows)")
        events.repartition("cluster", "topic", "partition").write.format("noop").mode("overwrite").save()
        step("scan and shuffle by partition, noop sink")
        for label in ("evaluation, noop sink (first)", "evaluation, noop sink (again)"):
            evaluate.partition_evaluations(events, points, settings).write.format("noop").mode("overwrite").save()
            step(label)
        # Since w13/2 the group figures are taken in the evaluation's pass and combined from the tasks'
        # partials; an older tree reads the partition statuses back.
        partials_dir = f"{out}/_group_partials" if hasattr(evaluate, "combine_group_partials") else None
        # Since w15 the tasks write the partition statuses themselves (pyarrow); before, Spark's writer did.
        by_tasks = hasattr(evaluate, "write_partition_statuses")
        if partials_dir is not None:
            shutil.rmtree(partials_dir, ignore_errors=True)
            os.makedirs(partials_dir)
        if by_tasks:
            evaluate.write_partition_statuses(events, points, settings, f"{out}/partition_status", partials_dir)
        else:
            partitions = (evaluate.partition_evaluations(events, points, settings, partials_dir)
                          if partials_dir is not None else evaluate.partition_evaluations(events, points, settings))
            partitions.select(*evaluate.PARTITION_STATUS_COLUMNS).write.mode("overwrite").parquet(
                f"{out}/partition_status")
        step("evaluation and partition_status written" + (" by the tasks" if by_tasks else " by Spark")
             + (" (and the group partials)" if partials_dir else ""))
        if partials_dir is not None:
            groups = evaluate.combine_group_partials(
                spark.read.schema(evaluate.GROUP_PARTIAL_SCHEMA).parquet(partials_dir))
        else:
            groups = evaluate.group_evaluations(spark.read.parquet(f"{out}/partition_status"))
        groups = groups.persist(StorageLevel.MEMORY_AND_DISK)
        groups.select(*evaluate.GROUP_STATUS_COLUMNS).write.mode("overwrite").parquet(f"{out}/group_status")
        step("group partials combined and group_status written" if partials_dir
             else "group aggregation read back and group_status written")
        evaluate.lag_report(groups, args.step).write.mode("overwrite").parquet(f"{out}/lag_report")
        step("lag_report written")
        rows = spark.read.parquet(f"{out}/lag_report").toPandas()
        top = rows.sort_values(["worst_totallag", "cluster", "group"], ascending=[False, True, True])
        chosen = spark.createDataFrame(top.head(5)[["cluster", "group"]], schema="cluster string, `group` string")
        groups.join(chosen, ["cluster", "group"]).select("cluster", "group", "timestamp", "status", "totallag",
                                                         "max_lag_seconds").toPandas()
        step("lag report toPandas and timelines")
        groups.unpersist()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
