"""Benchmark: the Spark batch job on a synthetic history of 10M commits, local[1] against local[2],
and the monitor's single-process evaluator on the same input.

    .venv/bin/python bench/spark_evaluate.py [--commits 10000000] [--masters 'local[1],local[2]']
                                             [--standalone-workers 1,2]

Steps, all on the same history (written once into --work, default a temporary directory):
1. generate the history (SyntheticSpec: groups sharing topics, every behaviour, some disorder), or take the
   one given with ``--reuse-history DIR`` (one written before, e.g. by ``write_synthetic_history`` of the same
   spec), so that runs of two trees alternate on the same input without generating it each time;
2. for each master, a fresh process builds its SparkSession (JVM start-up timed apart) and runs
   ``evaluate_history`` with every output written; the job time excludes the JVM start-up. Then the
   time split: three more jobs writing to Spark's noop sink time the Parquet scan, the scan and the
   shuffle by partition, and those plus every partition's evaluation; the rest of the job is the outputs.
   The job's CPU seconds (driver, JVM and Python workers, from /proc) give rows per CPU second, a figure
   that holds when other work shares the machine and the wall time does not;
3. with ``--standalone-workers``, for each count N a Spark standalone cluster (a master and N one-core
   workers from the installed PySpark, on 127.0.0.1: tests/integration/spark_cluster.py) runs the same job
   through ``spark://``; rows/s per worker core show how the time falls with workers;
4. in this process, the monitor's own path (StorageState + evaluate_group, ``inprocess``) and the
   replay core alone (what each Spark task runs), file by file: each file holds whole topics and the
   state is per partition, so this equals one pass over the whole history with bounded memory.
Rates are input commits per second (and all history rows per second, broker samples included, in all and
per local core).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

from burrowpy.pipeline.history import list_history_files
from burrowpy.pipeline.replay import ReplaySettings, evaluation_points, replay_history
from burrowpy.pipeline.synthetic import SyntheticSpec, write_synthetic_history


def spec_for(
    commits: int, partitions: int, commits_per_partition: int, groups_per_topic: int
) -> SyntheticSpec:
    """The smallest spec that writes at least ``commits`` commit rows."""

    def spec(groups: int) -> SyntheticSpec:
        return SyntheticSpec(
            groups=groups,
            groups_per_topic=groups_per_topic,
            partitions=partitions,
            commits_per_partition=commits_per_partition,
        )

    groups = max(1, commits // (partitions * commits_per_partition))
    while spec(groups).commit_rows < commits:
        groups += 1
    return spec(groups)


def history_stats(directory: Path) -> dict:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    commits = rows = 0
    first, last = None, None
    for path in list_history_files(directory):
        table = pq.read_table(path, columns=["kind", "timestamp"])
        rows += table.num_rows
        commits += pc.sum(pc.equal(table.column("kind"), "commit").cast("int64")).as_py() or 0
        low, high = pc.min_max(table.column("timestamp")).values()
        first = low.as_py() if first is None else min(first, low.as_py())
        last = high.as_py() if last is None else max(last, high.as_py())
    return {"rows": rows, "commits": commits, "first_ms": first, "last_ms": last}


def run_spark_worker(master: str, history: Path, output: Path, step: int, shuffle_partitions: int | None,
                     conf: dict[str, str]) -> dict:
    """In a child process: one SparkSession for ``master`` (``conf`` over the bench's own settings), one timed
    job."""
    from burrowpy.pipeline.evaluate import evaluate_history
    from burrowpy.pipeline.session import build_session

    started = time.perf_counter()
    spark = build_session(master, app_name="burrowpy-bench", shuffle_partitions=shuffle_partitions,
                          conf={"spark.driver.memory": "4g", **conf})
    spark.range(1).count()  # the JVM and a first Python worker are up
    startup_s = time.perf_counter() - started
    started, cpu_before, jit_before = time.perf_counter(), tree_cpu_s(os.getpid()), jit_cpu_s(os.getpid())
    summary = evaluate_history(spark, history, output, ReplaySettings(), step_s=step)
    job_s = time.perf_counter() - started
    job_cpu_s = tree_cpu_s(os.getpid()) - cpu_before
    job_jit_cpu_s = jit_cpu_s(os.getpid()) - jit_before
    split = time_split(spark, history, step)
    spark.stop()
    return {
        "master": master,
        "startup_s": startup_s,
        "job_s": job_s,
        "job_cpu_s": job_cpu_s,
        "jit_cpu_s": job_jit_cpu_s,
        "partition_rows": summary.partition_rows,
        "group_rows": summary.group_rows,
        **split,
    }


def stat_fields(path: Path) -> list[str] | None:
    """The fields of a /proc stat file after the command name; None if the process or thread ended."""
    try:
        return (path / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def process_tree(root: int) -> dict[int, list[str]]:
    """The stat fields of a process and all its live descendants, by pid."""
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := stat_fields(entry)) is not None:
            stats[int(entry.name)] = fields
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, fields in stats.items() if int(fields[1]) == parent and pid not in tree]
        tree.update(children)
        frontier.extend(children)
    return {pid: stats[pid] for pid in tree if pid in stats}


def tree_cpu_s(root: int) -> float:
    """CPU seconds of a process and all its descendants (the driver, Spark's JVM, the Python workers),
    those that ended included: what the job cost whatever else the machine was running."""
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(sum(int(value) for value in fields[11:15]) / ticks for fields in process_tree(root).values())


def jit_cpu_s(root: int) -> float:
    """CPU seconds of the JVM's JIT compiler threads under ``root``: HotSpot compiling Spark's generated
    code, a cost per JVM and per query shape rather than per row. Live threads only: HotSpot retires idle
    compiler threads, and what they spent goes with them, so this is a lower bound."""
    ticks, total = os.sysconf("SC_CLK_TCK"), 0.0
    for pid in process_tree(root):
        for thread in Path(f"/proc/{pid}/task").glob("*"):
            try:
                name = (thread / "comm").read_text()
            except OSError:
                continue
            if name.startswith(("C1 CompilerThre", "C2 CompilerThre")) and (fields := stat_fields(thread)):
                total += sum(int(value) for value in fields[11:13]) / ticks
    return total


def time_split(spark: object, history: Path, step: int) -> dict:
    """Where the job's time goes, from three cumulative jobs that write nothing (Spark's noop sink):
    the Parquet scan, the scan and the shuffle by partition, and those plus the evaluation of every
    partition; the rest of the job is the outputs (the group aggregates, the lag report, the writes)."""
    from pyspark.sql import functions as F

    from burrowpy.pipeline.evaluate import partition_evaluations, read_history_frame

    def timed(frame: object) -> float:
        started = time.perf_counter()
        frame.write.format("noop").mode("overwrite").save()
        return time.perf_counter() - started

    events = read_history_frame(spark, history)
    first_ms, last_ms = events.agg(F.min("timestamp"), F.max("timestamp")).first()
    points = evaluation_points(first_ms, last_ms, step)
    scan_s = timed(events)
    shuffled_s = timed(events.repartition("cluster", "topic", "partition"))
    evaluated_s = timed(partition_evaluations(events, points, ReplaySettings()))
    return {"scan_s": scan_s, "shuffle_s": max(0.0, shuffled_s - scan_s),
            "evaluation_s": max(0.0, evaluated_s - shuffled_s)}


def parse_conf(item: str) -> tuple[str, str]:
    key, equals, value = item.partition("=")
    if not equals or not key.startswith("spark."):
        raise SystemExit(f"--conf takes spark.KEY=VALUE, not {item!r}")
    return key, value


def local_cores(master: str) -> int:
    """Cores of a local master (local, local[N], local[*]); other masters sort last."""
    if master == "local":
        return 1
    if master.startswith("local[") and master.endswith("]"):
        cores = master[len("local[") : -1].split(",")[0]
        return (os.cpu_count() or 1) if cores == "*" else int(cores)
    return 1 << 30


def load() -> str:
    """The 1-minute load average: other work on the machine shows up here and in every figure."""
    return f"load {os.getloadavg()[0]:.1f}"


def spark_run(master: str, history: Path, output: Path, step: int, env: dict[str, str] | None = None,
              shuffle_partitions: int | None = None, conf: dict[str, str] | None = None) -> dict:
    completed = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            master,
            "--history",
            str(history),
            "--output",
            str(output),
            "--step",
            str(step),
            *(["--shuffle-partitions", str(shuffle_partitions)] if shuffle_partitions else []),
            *(f"--conf={key}={value}" for key, value in (conf or {}).items()),
        ],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if completed.returncode != 0:
        raise SystemExit(f"Spark run on {master} failed:\n{completed.stderr[-4000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def file_rows(path: Path) -> list[tuple]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    return list(zip(*(table.column(name).to_pylist() for name in table.column_names), strict=True))


def in_process_runs(history: Path, points: list[int]) -> dict:
    """Time the monitor's storage + evaluator path and the bare replay core, reading excluded."""
    from burrowpy.pipeline.inprocess import replay_through_storage

    storage_s = replay_s = read_s = 0.0
    partition_evaluations = group_evaluations = 0
    for path in list_history_files(history):
        started = time.perf_counter()
        rows = file_rows(path)
        read_s += time.perf_counter() - started
        started = time.perf_counter()
        for result in replay_through_storage(rows, points, ReplaySettings()):
            group_evaluations += 1
            partition_evaluations += len(result.committed)
        storage_s += time.perf_counter() - started
        started = time.perf_counter()
        for _ in replay_history(rows, points, ReplaySettings()):
            pass
        replay_s += time.perf_counter() - started
    return {
        "storage_s": storage_s,
        "replay_s": replay_s,
        "read_s": read_s,
        "partition_evaluations": partition_evaluations,
        "group_evaluations": group_evaluations,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=10_000_000)
    parser.add_argument("--partitions", type=int, default=50, help="partitions per topic")
    parser.add_argument("--commits-per-partition", type=int, default=100)
    parser.add_argument("--groups-per-topic", type=int, default=20)
    parser.add_argument("--step", type=int, default=60, help="seconds between evaluation points")
    parser.add_argument("--masters", default="local[1],local[2]")
    parser.add_argument("--standalone-workers", default="",
                        help="comma-separated worker counts: run on a Spark standalone cluster of each size")
    parser.add_argument("--work", type=Path, help="where the history and outputs go (default: a temp dir)")
    parser.add_argument("--skip-in-process", action="store_true")
    parser.add_argument("--reuse-history", type=Path, metavar="DIR",
                        help="evaluate this history rather than generating one (its spec is not checked)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--history", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--shuffle-partitions", type=int,
                        help="Spark shuffle partitions of the local runs (default: two per core)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for every Spark run (repeatable), e.g. "
                             "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1")
    args = parser.parse_args()
    conf = dict(parse_conf(item) for item in args.conf)

    if args.worker:
        print(json.dumps(run_spark_worker(args.worker, args.history, args.output, args.step,
                                          args.shuffle_partitions, conf)))
        return 0

    with tempfile.TemporaryDirectory(prefix="burrowpy-bench-", dir=args.work) as work_dir:
        work = Path(work_dir)
        spec = spec_for(args.commits, args.partitions, args.commits_per_partition, args.groups_per_topic)
        history = args.reuse_history or work / "history"
        started = time.perf_counter()
        if args.reuse_history is None:
            write_synthetic_history(history, spec, topics_per_file=max(1, 20 // spec.groups_per_topic))
        generate_s = time.perf_counter() - started
        stats = history_stats(history)
        points = evaluation_points(stats["first_ms"], stats["last_ms"], args.step)
        print(
            f"history: {stats['commits']:,} commits + {stats['rows'] - stats['commits']:,} broker samples, "
            f"{spec.groups:,} groups on {spec.topics:,} topics x {spec.partitions} partitions, "
            f"{len(points)} evaluation points every {args.step} s (generated in {generate_s:.0f} s); "
            f"{os.cpu_count()} cores, {load()}",
            flush=True,
        )

        results = []
        for index, master in enumerate(m.strip() for m in args.masters.split(",") if m.strip()):
            run = spark_run(master, history, work / f"out-{index}", args.step,
                            shuffle_partitions=args.shuffle_partitions, conf=conf)
            results.append(run)
            cores = local_cores(master)
            print(
                f"Spark {master}: job {run['job_s']:.1f} s (JVM start-up {run['startup_s']:.1f} s apart), "
                f"{stats['commits'] / run['job_s']:,.0f} commits/s, {stats['rows'] / run['job_s']:,.0f} rows/s, "
                f"{stats['rows'] / run['job_s'] / cores:,.0f} rows/s per core, "
                f"{run['job_cpu_s']:.1f} CPU s ({stats['rows'] / run['job_cpu_s']:,.0f} rows per CPU second; "
                f"JIT compiler threads {run['jit_cpu_s']:.1f} s of it), "
                f"{run['partition_rows']:,} partition statuses; {load()} after",
                flush=True,
            )
            print(f"  split, from separate jobs: scan {run['scan_s']:.1f} s, shuffle {run['shuffle_s']:.1f} s, "
                  f"evaluation {run['evaluation_s']:.1f} s, outputs (aggregates and writes) "
                  f"{max(0.0, run['job_s'] - run['scan_s'] - run['shuffle_s'] - run['evaluation_s']):.1f} s",
                  flush=True)
        if len(results) >= 2:
            by_cores = sorted(results, key=lambda r: local_cores(r["master"]))
            fewest, most = by_cores[0], by_cores[-1]
            print(
                f"scaling: {most['master']} runs {fewest['job_s'] / most['job_s']:.2f}x as fast as "
                f"{fewest['master']}",
                flush=True,
            )

        for count in (int(n) for n in args.standalone_workers.split(",") if n.strip()):
            from spark_cluster import SparkStandalone

            with SparkStandalone(work / f"standalone-{count}", workers=count, memory_per_worker="3g") as cluster:
                # two shuffle partitions per worker core, as local mode has per local core
                run = spark_run(cluster.master_url, history, work / f"out-standalone-{count}",
                                args.step, env=cluster.env(), shuffle_partitions=2 * count, conf=conf)
            rate = stats["rows"] / run["job_s"]
            print(
                f"Spark standalone, {count} one-core worker{'s' * (count > 1)}: job {run['job_s']:.1f} s "
                f"(start-up {run['startup_s']:.1f} s apart), {stats['commits'] / run['job_s']:,.0f} commits/s, "
                f"{rate:,.0f} rows/s, {rate / count:,.0f} rows/s per worker core; {load()} after",
                flush=True,
            )

        if not args.skip_in_process:
            local = in_process_runs(history, points)
            print(
                f"single process, monitor storage + evaluate_group: {local['storage_s']:.1f} s, "
                f"{stats['commits'] / local['storage_s']:,.0f} commits/s, "
                f"{local['partition_evaluations']:,} partition statuses; {load()} after",
                flush=True,
            )
            print(
                f"single process, replay core only (what each Spark task runs): {local['replay_s']:.1f} s, "
                f"{stats['commits'] / local['replay_s']:,.0f} commits/s "
                f"(reading Parquet into tuples, not counted: {local['read_s']:.1f} s)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
