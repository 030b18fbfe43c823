"""`burrowpy spark evaluate` on a real Spark standalone cluster (a master and two one-core workers started
from the installed PySpark on 127.0.0.1): the same results as local mode, computed by the workers.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from spark_cluster import SparkStandalone

from burrowpy.pipeline.synthetic import SyntheticSpec, write_synthetic_history

pytestmark = pytest.mark.integration

SPEC = SyntheticSpec(groups=10, groups_per_topic=2, partitions=4, commits_per_partition=40, disorder=0.03)
OUTPUTS = ("partition_status", "group_status", "lag_report")


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
         str(output), "--step", "120", "--master", master, "--shuffle-partitions", "4"],
        capture_output=True, text=True, timeout=300, env=env)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


def rows(output: Path, name: str) -> list[tuple]:
    table = pq.read_table(output / name)
    return sorted(tuple(row.values()) for row in table.to_pylist())


def test_cluster_results_equal_local_mode(cluster, history, tmp_path):
    on_cluster = tmp_path / "cluster"
    evaluate(history, on_cluster, cluster.master_url, env=cluster.env())
    local = tmp_path / "local"
    evaluate(history, local, "local[2]")
    for name in OUTPUTS:
        assert rows(on_cluster, name) == rows(local, name), name
    assert len(rows(on_cluster, "lag_report")) == SPEC.groups
    # The work was done by the workers: each ran an executor for the application.
    for number in range(cluster.workers):
        executors = list((cluster.directory / f"work-{number}").glob("app-*/*/stderr"))
        assert executors, f"worker {number} ran no executor"
