"""`burrowpy spark evaluate` on a real Spark standalone cluster (a master and two one-core workers started
from the installed PySpark on 127.0.0.1): the same statuses as the monitor's in-memory evaluator (which local
mode is held to in test_pipeline_evaluate.py), computed by the workers.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from spark_cluster import EXECUTOR_JVM_CONF, SparkStandalone

from burrowpy.pipeline.history import read_history
from burrowpy.pipeline.inprocess import statuses_through_storage
from burrowpy.pipeline.replay import ReplaySettings, evaluation_points
from burrowpy.pipeline.synthetic import SyntheticSpec, write_synthetic_history
from burrowpy.protocol import Status

pytestmark = pytest.mark.integration

SPEC = SyntheticSpec(groups=10, groups_per_topic=2, partitions=4, commits_per_partition=40, disorder=0.03)
STEP_S = 120


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with SparkStandalone(tmp_path_factory.mktemp("spark-cluster"), workers=2) as running:
        yield running


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    directory = tmp_path_factory.mktemp("history")
    write_synthetic_history(directory, SPEC, topics_per_file=2)
    return directory


def evaluate(history: Path, output: Path, master: str, env: dict[str, str] | None = None) -> str:
    completed = subprocess.run(
        [sys.executable, "-m", "burrowpy.cli", "spark", "evaluate", "--input", str(history), "--output",
         str(output), "--step", str(STEP_S), "--master", master, "--shuffle-partitions", "4",
         "--conf", EXECUTOR_JVM_CONF],
        capture_output=True, text=True, timeout=300, env=env)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


def test_cluster_results_equal_the_in_memory_evaluator(cluster, history, tmp_path):
    # A second Spark job in local mode would cost ~40 s; the in-memory evaluator is the reference both modes
    # are held to, so the cluster's results are compared with it directly.
    evaluate(history, tmp_path, cluster.master_url, env=cluster.env())
    table = read_history(history)
    events = list(zip(*(table.column(name).to_pylist() for name in table.column_names), strict=True))
    points = evaluation_points(min(r[6] for r in events), max(r[6] for r in events), STEP_S)
    expected_partitions, expected_groups = statuses_through_storage(events, points, ReplaySettings())
    partitions = {
        (r["cluster"], r["group"], r["topic"], r["partition"], r["timestamp"]): (
            Status[r["status"]], r["current_lag"], r["complete"])
        for r in pq.read_table(tmp_path / "partition_status").to_pylist()
    }
    groups = {
        (r["cluster"], r["group"], r["timestamp"]): (Status[r["status"]], r["totallag"])
        for r in pq.read_table(tmp_path / "group_status").to_pylist()
    }
    assert expected_partitions and partitions == expected_partitions
    assert groups == expected_groups
    assert pq.read_table(tmp_path / "lag_report").num_rows == SPEC.groups
    # The work was done by the workers: each ran an executor for the application.
    for number in range(cluster.workers):
        executors = list((cluster.directory / f"work-{number}").glob("app-*/*/stderr"))
        assert executors, f"worker {number} ran no executor"
