"""The streaming job's per-partition state (pure part) and the `spark` subcommand's arguments."""

from __future__ import annotations

import argparse
import pickle

import pandas as pd
import pytest

from burrowpy.pipeline import cli
from burrowpy.pipeline.replay import PartitionState, ReplaySettings
from burrowpy.pipeline.stream import LiveState, StreamSettings
from burrowpy.protocol import Status

T0 = 1_700_000_000_000


def frame(rows: list[tuple]) -> pd.DataFrame:
    """History-shaped micro-batch rows: (kind, group, offset, timestamp ms, order)."""
    return pd.DataFrame(
        {
            "kind": [r[0] for r in rows],
            "cluster": "c",
            "group": [r[1] for r in rows],
            "topic": "t",
            "partition": pd.Series([0] * len(rows), dtype="int32"),
            "offset": [r[2] for r in rows],
            "timestamp": [r[3] for r in rows],
            "order": pd.Series([r[4] for r in rows], dtype="float64"),  # nulls arrive as NaN
        }
    )


def test_changes_are_sent_once_and_stop_appears_with_time():
    live = LiveState(PartitionState(ReplaySettings(intervals=3)))
    newest = live.take_in(
        frame(
            [
                ("commit", "g", 100, T0 + 2_000, 2),
                ("broker", None, 100, T0, None),
                ("commit", "g", 90, T0 + 1_000, 1),
            ]
        )
    )
    assert newest == (T0 + 2_000) // 1000
    assert [(c.group, c.status) for c in live.changes(newest)] == [("g", Status.OK)]
    assert live.changes(newest) == []  # nothing changed
    # the log end moves on: three samples push the caught-up one out of the 3-slot broker history
    live.take_in(frame([("broker", None, 100 + 10 * s, T0 + s * 1000, None) for s in (3, 4, 5)]))
    # lag now, but not silent for longer than the window (commits 1 s apart) yet
    assert live.changes((T0 + 3_000) // 1000) == []
    [stopped] = live.changes((T0 + 4_000) // 1000)
    assert (stopped.status, stopped.current_lag) == (Status.STOP, 50)


def test_evaluation_time_never_goes_back():
    live = LiveState(PartitionState(ReplaySettings()))
    live.take_in(frame([("broker", None, 10, T0, None), ("commit", "g", 5, T0, 1)]))
    live.changes((T0 + 100_000) // 1000)
    [late] = live.partition.evaluate(live.evaluated_at_s)
    assert live.changes(T0 // 1000) == []  # an older "now" is ignored
    assert live.evaluated_at_s == late.timestamp // 1000


def test_groups_without_commits_for_expire_group_are_forgotten():
    live = LiveState(PartitionState(ReplaySettings()))
    live.take_in(
        frame(
            [
                ("broker", None, 10, T0, None),
                ("commit", "old", 5, T0, 1),
                ("commit", "new", 6, T0 + 50_000, 2),
            ]
        )
    )
    assert {c.group for c in live.changes(T0 // 1000 + 60, expire_group_s=100)} == {"old", "new"}
    live.changes(T0 // 1000 + 120, expire_group_s=100)
    assert set(live.partition.commits) == {"new"} and set(live.last_status) == {"new"}


def test_state_survives_pickling():
    live = LiveState(PartitionState(ReplaySettings(intervals=2)))
    live.take_in(frame([("broker", None, 10, T0, None), ("commit", "g", 5, T0, 1)]))
    live.changes(T0 // 1000)
    copy = pickle.loads(pickle.dumps(live))
    assert copy.last_status == live.last_status
    assert [o.offset for o in copy.partition.commits["g"].entries() if o] == [5]
    assert copy.partition.broker.values() == [10]


def test_stream_timeout_is_at_least_a_second():
    assert StreamSettings("b", "o", "c", trigger_s=0.2).evaluation_timeout_ms == 1000
    assert StreamSettings("b", "o", "c", trigger_s=5).evaluation_timeout_ms == 5000
    assert StreamSettings("b", "o", "c").expire_group_s == 604800


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(argv)


def test_evaluate_arguments():
    args = parse(
        [
            "evaluate",
            "--input",
            "h",
            "--output",
            "o",
            "--intervals",
            "5",
            "--step",
            "30",
            "--min-distance",
            "2",
            "--allowed-lag",
            "7",
            "--minimum-complete",
            "0.5",
            "--master",
            "local[1]",
            "--conf",
            "spark.x=1",
        ]
    )
    assert (args.spark_job, args.input, args.output, args.step, args.master) == (
        "evaluate",
        "h",
        "o",
        30,
        "local[1]",
    )
    assert cli.replay_settings(args) == ReplaySettings(
        intervals=5, min_distance_s=2, allowed_lag=7, minimum_complete=0.5
    )
    assert cli.spark_conf(args.conf) == {"spark.x": "1"}
    defaults = parse(["evaluate", "--input", "h", "--output", "o"])
    assert (defaults.step, defaults.master, cli.replay_settings(defaults)) == (
        60,
        "local[*]",
        ReplaySettings(),
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["evaluate", "--input", "h"],
        ["evaluate", "--input", "h", "--output", "o", "--step", "0"],
        ["evaluate", "--input", "h", "--output", "o", "--intervals", "-1"],
        ["stream", "--output", "o"],
        ["stream", "--bootstrap-server", "b", "--output", "o", "--trigger", "0"],
    ],
)
def test_bad_arguments_are_refused(argv, capsys):
    with pytest.raises(SystemExit):
        parse(argv)


def test_bad_conf_is_refused(capsys):
    args = parse(["evaluate", "--input", "h", "--output", "o", "--conf", "novalue"])
    assert cli.run(args) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
