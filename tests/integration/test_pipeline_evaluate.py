"""The Spark batch job in local mode: parity with the monitor's in-memory path, outputs, CLI.

One SparkSession (local[2] on 127.0.0.1) serves the whole module; histories are small.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from burrowpy.pipeline.evaluate import (
    GROUP_STATUS_COLUMNS,
    LAG_REPORT_COLUMNS,
    PARTITION_STATUS_COLUMNS,
    HistoryError,
    evaluate_history,
)
from burrowpy.pipeline.history import HistoryWriter, read_history
from burrowpy.pipeline.inprocess import statuses_through_storage
from burrowpy.pipeline.replay import ReplaySettings, evaluation_points
from burrowpy.pipeline.session import build_session
from burrowpy.pipeline.synthetic import SyntheticSpec, write_synthetic_history
from burrowpy.protocol import SetBrokerOffset, SetConsumerOffset, SetRecordTimes, Status

pytestmark = pytest.mark.integration

# 15 groups (three per topic) x 4 partitions x 60 rounds: about 3,300 commits (the stopping groups are
# silent a while).
SPEC = SyntheticSpec(groups=15, groups_per_topic=3, partitions=4, commits_per_partition=60, disorder=0.03)


@pytest.fixture(scope="module")
def spark():
    return build_session("local[2]", app_name="burrowpy-tests", shuffle_partitions=4)


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    directory = tmp_path_factory.mktemp("history")
    write_synthetic_history(directory, SPEC, topics_per_file=4)
    return directory


def history_rows(directory) -> list[tuple]:
    table = read_history(directory)
    return list(zip(*(table.column(name).to_pylist() for name in table.column_names), strict=True))


def read_output(path) -> list[dict]:
    return pq.read_table(path).to_pylist()


@pytest.mark.parametrize(
    "settings",
    [ReplaySettings(), ReplaySettings(intervals=5, min_distance_s=90, allowed_lag=30, minimum_complete=0.5)],
    ids=["defaults", "tuned"],
)
def test_spark_equals_the_in_memory_evaluator(spark, history, tmp_path, settings):
    rows = history_rows(history)
    assert 3000 <= sum(1 for r in rows if r[0] == "commit") <= 5000
    summary = evaluate_history(spark, history, tmp_path, settings, step_s=60)
    points = evaluation_points(min(r[6] for r in rows), max(r[6] for r in rows), 60)
    assert summary.points == len(points) and summary.events == len(rows)

    expected_partitions, expected_groups = statuses_through_storage(rows, points, settings)
    spark_partitions = {
        (r["cluster"], r["group"], r["topic"], r["partition"], r["timestamp"]): (
            Status[r["status"]],
            r["current_lag"],
            r["complete"],
        )
        for r in read_output(tmp_path / "partition_status")
    }
    spark_groups = {
        (r["cluster"], r["group"], r["timestamp"]): (Status[r["status"]], r["totallag"])
        for r in read_output(tmp_path / "group_status")
    }
    assert summary.partition_rows == len(spark_partitions) == len(expected_partitions)
    assert spark_partitions == expected_partitions
    assert spark_groups == expected_groups
    if settings == ReplaySettings():
        seen = Counter(status for status, _, _ in spark_partitions.values())
        assert set(seen) == {Status.OK, Status.WARN, Status.STOP, Status.STALL, Status.REWIND}


def test_outputs_and_lag_report(spark, history, tmp_path):
    evaluate_history(spark, history, tmp_path, ReplaySettings(), step_s=60)
    assert pq.read_schema(next((tmp_path / "partition_status").glob("*.parquet"))).names == list(
        PARTITION_STATUS_COLUMNS
    )
    assert pq.read_schema(next((tmp_path / "group_status").glob("*.parquet"))).names == list(
        GROUP_STATUS_COLUMNS
    )
    report = {r["group"]: r for r in read_output(tmp_path / "lag_report")}
    assert len(report) == SPEC.groups
    for row in report.values():
        assert list(row) == list(LAG_REPORT_COLUMNS)
        assert row["seconds_ok"] + row["seconds_warn"] + row["seconds_err"] == row["evaluations"] * 60
    healthy = report["group-00000-healthy"]
    assert healthy["seconds_err"] == healthy["seconds_warn"] == 0
    stopping = report["group-00002-stopping"]
    assert stopping["seconds_stop"] > 0 and stopping["final_status"] == "OK"
    lagging = report["group-00001-lagging"]
    # half the produce rate for an hour: the oldest unread message is about half an hour old, plus up to
    # one commit interval (60 s) since the last commit
    assert 1500 < lagging["worst_lag_seconds"] <= 1860
    assert report["group-00003-stalling"]["seconds_stall"] > 0
    assert report["group-00004-rewinding"]["seconds_rewind"] > 0
    # each partition status carries its lag in seconds; a group's worst is the largest of its partitions'
    worst: dict[str, float] = {}
    for row in read_output(tmp_path / "partition_status"):
        if row["lag_seconds"] is not None:
            worst[row["group"]] = max(worst.get(row["group"], 0.0), row["lag_seconds"])
    assert worst["group-00001-lagging"] == lagging["worst_lag_seconds"]
    assert {group: row["worst_lag_seconds"] for group, row in report.items()} == {
        group: worst.get(group) for group in report}
    text = (tmp_path / "report.md").read_text()
    assert "group-00003-stalling" in text and "(report.svg)" in text
    assert (tmp_path / "report.svg").read_text().startswith("<svg")


def test_history_written_by_the_monitor_writer_is_evaluated(spark, tmp_path):
    """HistoryWriter output read by Spark: commits before the first broker offset are dropped, as storage does."""
    t0 = 1_700_000_000_000
    with HistoryWriter(tmp_path / "history", roll_interval_s=60, clock=lambda: t0 / 1000) as writer:
        writer.record(SetConsumerOffset("c", "g", "t", 0, offset=5, order=0, timestamp=t0 - 5000))
        for second in range(0, 300, 10):
            writer.record(SetBrokerOffset("c", "t", 0, 1, offset=100 + second, timestamp=t0 + second * 1000))
        for index, second in enumerate(range(15, 100, 10)):
            writer.record(
                SetConsumerOffset(
                    "c", "g", "t", 0, offset=100 + second - 5, order=index + 1, timestamp=t0 + second * 1000
                )
            )
    evaluate_history(spark, tmp_path / "history", tmp_path / "out", ReplaySettings(), step_s=30)
    rows = sorted(read_output(tmp_path / "out" / "partition_status"), key=lambda r: r["timestamp"])
    # points from t0 - 5 s every 30 s; order 0 came before any broker offset and was dropped, so the
    # partition is first reported at t0 + 25 s with two commits (complete 0.2)
    assert rows[0]["timestamp"] == t0 + 25_000
    assert rows[0]["complete"] == pytest.approx(0.2)
    assert rows[-1]["status"] == "STOP"


def test_record_timestamps_the_monitor_read_give_the_exact_lag_in_seconds(spark, tmp_path):
    """Record rows (timestamps the monitor read for lag in seconds) reach the Spark replay: the lag in seconds is
    the record's age, where broker samples alone would interpolate another figure."""
    t0 = 1_700_000_000_000
    with HistoryWriter(tmp_path / "history", roll_interval_s=60, clock=lambda: t0 / 1000) as writer:
        for second in range(0, 100, 10):
            writer.record(SetBrokerOffset("c", "t", 0, 1, offset=1000 + second, timestamp=t0 + second * 1000))
        writer.record(SetConsumerOffset("c", "g", "t", 0, offset=1020, order=1, timestamp=t0 + 50_000))
        writer.record(SetRecordTimes("c", [("t", 0, 1020, t0 - 600_000)]))  # written ten minutes before t0
    evaluate_history(spark, tmp_path / "history", tmp_path / "out", ReplaySettings(), step_s=30)
    [report] = read_output(tmp_path / "out" / "lag_report")
    # the worst age: at the last evaluation point, the record being 10 minutes older than t0
    assert report["worst_lag_seconds"] == pytest.approx((report["last_timestamp"] - t0 + 600_000) / 1000)


def test_history_without_commits_and_with_foreign_rows(spark, tmp_path):
    """Only broker samples (plus rows no writer should produce): no statuses, a report without a plot."""
    t0 = 1_700_000_000_000
    table = pa.table(
        {
            "kind": ["broker", "broker", "owner", "commit"],
            "cluster": ["c"] * 4,
            "group": [None, None, "g", "g"],
            "topic": ["t"] * 4,
            "partition": pa.array([0, 0, 0, 0], pa.int32()),
            "offset": [1, 2, 3, 4],
            "timestamp": [t0, t0 + 60_000, t0, t0],
            "order": pa.array([None, None, 1, None], pa.int64()),
        }
    )
    (tmp_path / "history").mkdir()
    pq.write_table(table, tmp_path / "history" / "history-0000000000000-000000.parquet")
    summary = evaluate_history(spark, tmp_path / "history", tmp_path / "out", ReplaySettings(), step_s=60)
    assert (summary.events, summary.points, summary.partition_rows, summary.groups) == (4, 2, 0, 0)
    assert "0 groups" in (tmp_path / "out" / "report.md").read_text()
    assert not (tmp_path / "out" / "report.svg").exists()


def test_empty_or_missing_history(spark, tmp_path):
    with pytest.raises(HistoryError):
        evaluate_history(spark, tmp_path / "missing", tmp_path / "out")
    empty = tmp_path / "empty"
    empty.mkdir()
    pq.write_table(
        pa.table({"kind": pa.array([], pa.string())}), empty / "history-0000000000000-000000.parquet"
    )
    with pytest.raises(HistoryError):
        evaluate_history(spark, empty, tmp_path / "out")


def test_cli_evaluate(history, tmp_path):
    """The `spark evaluate` subcommand end to end, in its own process and its own Spark."""
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "burrowpy.cli",
            "spark",
            "evaluate",
            "--input",
            str(history),
            "--output",
            str(tmp_path),
            "--step",
            "300",
            "--intervals",
            "5",
            "--master",
            "local[1]",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "evaluation points" in completed.stdout
    rows = history_rows(history)
    first_commit = min(r[6] for r in rows if r[0] == "commit")
    points = evaluation_points(min(r[6] for r in rows), max(r[6] for r in rows), 300)
    assert {r["timestamp"] for r in read_output(tmp_path / "group_status")} == {
        p * 1000 for p in points if p * 1000 >= first_commit
    }
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "burrowpy.cli",
            "spark",
            "evaluate",
            "--input",
            str(tmp_path / "nope"),
            "--output",
            str(tmp_path / "o"),
            "--master",
            "local[1]",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert bad.returncode == 1 and "does not exist" in bad.stderr
