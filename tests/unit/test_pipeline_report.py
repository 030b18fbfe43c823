"""The human report of the batch job: durations, table order, a well-formed SVG plot."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pandas as pd

from burrowpy.pipeline.report import (
    MAX_TABLE_ROWS,
    format_duration,
    render_markdown,
    render_svg,
    status_runs,
    write_report,
)

SUMMARY = SimpleNamespace(
    events=1234, groups=2, points=3, first_point_s=1_700_000_000, last_point_s=1_700_000_120
)
SVG = "{http://www.w3.org/2000/svg}"


def report_rows(count: int = 2) -> pd.DataFrame:
    rows = []
    for index in range(count):
        rows.append(
            {
                "cluster": "c",
                "group": f"g{index}|x",
                "first_timestamp": 0,
                "last_timestamp": 0,
                "evaluations": 3,
                "seconds_ok": 120 - 60 * (index % 2),
                "seconds_warn": 0,
                "seconds_err": 60 * (index % 2),
                "seconds_stop": 60 * (index % 2),
                "seconds_stall": 0,
                "seconds_rewind": 0,
                "worst_totallag": 10 * index,
                "worst_partition_lag": 5,
                "worst_lag_seconds": 12.4,
                "final_status": "OK",
                "final_totallag": 0,
            }
        )
    return pd.DataFrame(rows)


def timelines() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "cluster": ["c"] * 6,
            "group": ["a"] * 3 + ["b"] * 3,
            "timestamp": [1_700_000_000_000, 1_700_000_060_000, 1_700_000_120_000] * 2,
            "status": ["OK", "ERR", "ERR", "OK", "OK", "WARN"],
            "totallag": [0, 50, 80, 5, 4, 9],
            "max_lag_seconds": [0.0, 10.0, 20.0, 1.0, 1.0, 2.0],
        }
    )


def test_format_duration():
    assert format_duration(0) == "0s"
    assert format_duration(59) == "59s"
    assert format_duration(250) == "4m 10s"
    assert format_duration(3900) == "1h 05m"
    assert format_duration(2 * 86400 + 3 * 3600 + 59) == "2d 03h"


def test_status_runs_merge_equal_neighbours():
    assert status_runs([0, 1, 2, 3], ["OK", "OK", "ERR", "OK"], 4) == [
        (0, 2, "OK"),
        (2, 3, "ERR"),
        (3, 4, "OK"),
    ]
    assert status_runs([], [], 4) == []


def test_markdown_lists_the_worst_groups_first_and_escapes_cells():
    text = render_markdown(SUMMARY, 60, report_rows(), "report.svg")
    assert "1234 events, 2 groups, 3 evaluation points every 1m 00s" in text
    assert "![" in text and "(report.svg)" in text
    table = [line for line in text.splitlines() if line.startswith("| c |")]
    assert table[0].startswith("| c | g1\\|x | OK | 1m 00s | 0s | 1m 00s | 1m 00s |")
    assert table[1].startswith("| c | g0\\|x |")
    assert table[0].endswith("| 10 | 12 |")


def test_markdown_shows_a_dash_where_the_history_cannot_tell_the_lag_in_seconds():
    rows = report_rows()
    rows.loc[1, "worst_lag_seconds"] = float("nan")  # what Spark's max gives over nulls
    table = [line for line in render_markdown(SUMMARY, 60, rows, None).splitlines() if line.startswith("| c |")]
    assert table[0].endswith("| 10 | - |") and table[1].endswith("| 0 | 12 |")


def test_markdown_table_is_capped():
    text = render_markdown(SUMMARY, 60, report_rows(MAX_TABLE_ROWS + 3), None)
    assert sum(1 for line in text.splitlines() if line.startswith("| c |")) == MAX_TABLE_ROWS
    assert "3 more groups are in `lag_report`" in text
    assert "![" not in text


def test_svg_is_well_formed_with_a_line_and_a_status_strip_per_group():
    root = ET.fromstring(render_svg(timelines()))
    assert len(root.findall(f"{SVG}polyline")) == 2
    fills = [rect.get("fill") for rect in root.findall(f"{SVG}rect")]
    assert fills.count("#e53935") == 1  # group a: one ERR run
    assert fills.count("#ffb300") == 1  # group b: one WARN run
    assert any("1: c/a" in (text.text or "") for text in root.findall(f"{SVG}text"))


def test_write_report(tmp_path):
    path = write_report(tmp_path / "out", SUMMARY, 60, report_rows(), timelines())
    assert path.read_text().startswith("# Offset-history evaluation")
    assert (tmp_path / "out" / "report.svg").exists()
    write_report(tmp_path / "empty", SUMMARY, 60, report_rows().iloc[0:0], timelines().iloc[0:0])
    assert not (tmp_path / "empty" / "report.svg").exists()
