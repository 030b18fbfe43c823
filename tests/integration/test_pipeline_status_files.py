"""The partition statuses of a local output written by the Spark tasks themselves (pyarrow's Parquet writer,
``written_partition_evaluations``): what Spark reads back equals what its own writer gives for the same
frame, schema included; a task run again counts once; nothing of an earlier run or of a failed task is left
to read.

One SparkSession (local[2] on 127.0.0.1) serves the module.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.errors import PySparkException

from burrowpy.pipeline.evaluate import (
    PARTITION_STATUS_COLUMNS,
    evaluate_history,
    partition_evaluations,
    read_history_frame,
    write_partition_statuses,
    written_partition_evaluations,
)
from burrowpy.pipeline.replay import ReplaySettings, evaluation_points
from burrowpy.pipeline.session import build_session
from burrowpy.pipeline.synthetic import SyntheticSpec, write_synthetic_history

pytestmark = pytest.mark.integration

# Enough partitions that every one of the four shuffle partitions gets some (and chunks of several).
SPEC = SyntheticSpec(groups=6, groups_per_topic=2, partitions=5, commits_per_partition=30, disorder=0.03)
SETTINGS = ReplaySettings()


@pytest.fixture(scope="module")
def spark():
    session = build_session("local[2]", app_name="burrowpy-tests", shuffle_partitions=4)
    # Four tasks, each with some partitions, however small the history (AQE would make them one); the session
    # is shared with other modules, so the setting is put back.
    key = "spark.sql.adaptive.coalescePartitions.enabled"
    before = session.conf.get(key)
    session.conf.set(key, "false")
    yield session
    session.conf.set(key, before)


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    directory = tmp_path_factory.mktemp("history")
    write_synthetic_history(directory, SPEC, topics_per_file=2)
    return directory


def evaluation_input(spark, history) -> tuple:
    events = read_history_frame(spark, history)
    first, last = (row for row in events.selectExpr("min(timestamp)", "max(timestamp)").first())
    return events, evaluation_points(first, last, 60)


def visible_files(directory: Path) -> list[str]:
    """The files Spark's readers take (names starting with a dot or an underscore are passed over)."""
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith((".", "_")))


def rows_of(frame) -> Counter:
    return Counter(tuple(row) for row in frame.collect())


def test_the_tasks_files_read_back_as_sparks_own_writer_writes_them(spark, history, tmp_path):
    summary = evaluate_history(spark, history, tmp_path / "out", SETTINGS, step_s=60)
    written = tmp_path / "out" / "partition_status"
    files = visible_files(written)
    assert (written / "_SUCCESS").exists() and len(files) == 4
    for name in files:
        assert pq.ParquetFile(written / name).metadata.created_by.startswith("parquet-cpp-arrow")
        assert name.startswith("part-") and name.endswith(".snappy.parquet")
        assert {pq.ParquetFile(written / name).metadata.row_group(0).column(i).compression
                for i in range(len(PARTITION_STATUS_COLUMNS))} == {"SNAPPY"}

    # Spark's own writer, the same frame
    events, points = evaluation_input(spark, history)
    partition_evaluations(events, points, SETTINGS).select(*PARTITION_STATUS_COLUMNS) \
        .write.mode("overwrite").parquet(str(tmp_path / "spark"))
    assert pq.ParquetFile(next((tmp_path / "spark").glob("part-*.parquet"))).metadata.created_by.startswith(
        "parquet-mr")

    ours, sparks = spark.read.parquet(str(written)), spark.read.parquet(str(tmp_path / "spark"))
    assert ours.schema == sparks.schema
    assert dict(ours.dtypes)["timestamp"] == "bigint" and ours.columns == list(PARTITION_STATUS_COLUMNS)
    expected = rows_of(sparks)
    assert rows_of(ours) == expected
    assert summary.partition_rows == sum(expected.values()) > 500


def test_no_statuses_read_back_as_sparks_empty_output(spark, tmp_path):
    t0 = 1_700_000_000_000
    (tmp_path / "history").mkdir()
    pq.write_table(pa.table({
        "kind": ["broker", "broker"], "cluster": ["c"] * 2, "group": pa.array([None, None], pa.string()),
        "topic": ["t"] * 2, "partition": pa.array([0, 0], pa.int32()), "offset": [1, 2],
        "timestamp": [t0, t0 + 60_000], "order": pa.array([None, None], pa.int64()),
    }), tmp_path / "history" / "history-0000000000000-000000.parquet")
    assert evaluate_history(spark, tmp_path / "history", tmp_path / "out").partition_rows == 0
    events, points = evaluation_input(spark, tmp_path / "history")
    partition_evaluations(events, points, SETTINGS).select(*PARTITION_STATUS_COLUMNS) \
        .write.mode("overwrite").parquet(str(tmp_path / "spark"))
    ours = spark.read.parquet(str(tmp_path / "out" / "partition_status"))
    assert ours.schema == spark.read.parquet(str(tmp_path / "spark")).schema
    assert ours.count() == 0


def test_a_task_run_again_counts_once(spark, history, tmp_path):
    events, points = evaluation_input(spark, history)
    status_dir = tmp_path / "status"
    status_dir.mkdir()
    frame = written_partition_evaluations(events, points, SETTINGS, str(status_dir))
    first = frame.collect()
    files = visible_files(status_dir)
    assert len(first) == len(files) == 4
    second = frame.collect()  # every task again, the same job's names: each file replaced, none added
    assert sorted(first) == sorted(second)
    assert visible_files(status_dir) == files and not [p for p in status_dir.iterdir() if p.name.startswith(".")]
    assert spark.read.parquet(str(status_dir)).count() == sum(row["rows"] for row in first)


def test_files_of_an_earlier_run_are_removed(spark, history, tmp_path):
    status_dir = tmp_path / "out" / "partition_status"
    status_dir.mkdir(parents=True)
    stale = pa.table({name: pa.array([], pa.string()) for name in PARTITION_STATUS_COLUMNS})
    pq.write_table(stale, status_dir / "part-00009-earlier.snappy.parquet")
    (status_dir / ".part-00001-earlier.snappy.parquet.0123").write_bytes(b"half")
    summary = evaluate_history(spark, history, tmp_path / "out", SETTINGS, step_s=60)
    assert not [p.name for p in status_dir.iterdir() if "earlier" in p.name]
    assert len(visible_files(status_dir)) == 4 and (status_dir / "_SUCCESS").exists()
    assert spark.read.parquet(str(status_dir)).count() == summary.partition_rows


def test_a_failed_task_leaves_no_file_to_read(spark, history, tmp_path):
    # Every task fails at its end, its statuses written whole under their dot name (the partials'
    # directory does not exist): none is renamed, and the job's output directory is removed.
    events, points = evaluation_input(spark, history)
    status_dir = tmp_path / "status"
    status_dir.mkdir()
    missing = str(tmp_path / "no-such-directory")
    with pytest.raises(PySparkException):
        written_partition_evaluations(events, points, SETTINGS, str(status_dir), missing).collect()
    assert visible_files(status_dir) == []
    with pytest.raises(PySparkException):
        write_partition_statuses(events, points, SETTINGS, str(tmp_path / "out"), missing)
    assert not (tmp_path / "out").exists()
