"""The short human report of a batch evaluation: Markdown with an SVG plot.

Pure rendering from small pandas frames the job has already collected (the lag report, one row per
group, and the timelines of a few groups), so it is tested without Spark. The plot is written as SVG
by hand: it needs no plotting library and any browser or Markdown viewer shows it.
"""

from __future__ import annotations

import html
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

MAX_TABLE_ROWS = 50
PLOT_WIDTH = 860
PLOT_HEIGHT = 260
MARGIN_LEFT = 70
MARGIN_RIGHT = 20
MARGIN_TOP = 20
STRIP_HEIGHT = 12
MAX_LINE_POINTS = 1000
LINE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
STATUS_COLOURS = {"OK": "#4caf50", "WARN": "#ffb300", "ERR": "#e53935"}


def format_duration(seconds: float) -> str:
    """Seconds as the two largest units, e.g. ``2d 03h``, ``1h 05m``, ``4m 10s``, ``0s``."""
    remaining = int(round(seconds))
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, remaining = divmod(remaining, size)
        if count or parts:
            parts.append(f"{count}{unit}" if not parts else f"{count:02d}{unit}")
        if len(parts) == 2:
            break
    return " ".join(parts) if parts else "0s"


def format_time(timestamp_ms: int) -> str:
    return datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def render_markdown(summary: Any, step_s: int, report_rows: Any, plot_name: str | None) -> str:
    """The report text; ``report_rows`` has the lag report columns, ``plot_name`` the SVG beside it."""
    lines = [
        "# Offset-history evaluation",
        "",
        f"{summary.events} events, {summary.groups} groups, {summary.points} evaluation points every "
        f"{format_duration(step_s)} from {format_time(summary.first_point_s * 1000)} "
        f"to {format_time(summary.last_point_s * 1000)}.",
        "",
    ]
    if plot_name:
        lines += [
            f"![Total lag of the groups with the largest lag, and their status over time]({plot_name})",
            "",
        ]
    ordered = report_rows.sort_values(
        ["seconds_err", "seconds_warn", "worst_totallag", "cluster", "group"],
        ascending=[False, False, False, True, True],
    )
    lines += [
        "Time in each group status, time with a partition stopped, stalled or rewound, worst total lag "
        "(messages) and worst lag in seconds: the age of the oldest unconsumed record, interpolated over the "
        "broker-offset history as the monitor does without record timestamps (- where the history cannot "
        "tell).",
        "",
        "| cluster | group | last status | OK | WARN | ERR | STOP | STALL | REWIND | worst lag | worst lag (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in ordered.head(MAX_TABLE_ROWS).itertuples(index=False):
        lines.append(
            f"| {_cell(row.cluster)} | {_cell(row.group)} | {row.final_status} "
            f"| {format_duration(row.seconds_ok)} | {format_duration(row.seconds_warn)} "
            f"| {format_duration(row.seconds_err)} | {format_duration(row.seconds_stop)} "
            f"| {format_duration(row.seconds_stall)} | {format_duration(row.seconds_rewind)} "
            f"| {int(row.worst_totallag)} | {_seconds(row.worst_lag_seconds)} |"
        )
    if len(ordered) > MAX_TABLE_ROWS:
        lines += ["", f"{len(ordered) - MAX_TABLE_ROWS} more groups are in `lag_report`."]
    return "\n".join(lines) + "\n"


def _seconds(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.0f}"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|")


def render_svg(timelines: Any) -> str:
    """Total lag over time, one line per group, with a strip of its status under the chart.

    ``timelines`` has columns cluster, group, timestamp (ms), status (OK/WARN/ERR), totallag.
    """
    series = [
        (f"{cluster}/{group}", frame.sort_values("timestamp"))
        for (cluster, group), frame in sorted(
            timelines.groupby(["cluster", "group"]), key=lambda item: item[0]
        )
    ]
    chart_bottom = MARGIN_TOP + PLOT_HEIGHT
    strips_top = chart_bottom + 30
    legend_top = strips_top + len(series) * (STRIP_HEIGHT + 6) + 10
    height = legend_top + len(series) * 16 + 10
    width = PLOT_WIDTH
    first = int(timelines["timestamp"].min())
    last = int(timelines["timestamp"].max())
    top_lag = max(1, int(timelines["totallag"].max()))
    plot_width = width - MARGIN_LEFT - MARGIN_RIGHT

    def x_of(timestamp: int) -> float:
        return MARGIN_LEFT + (timestamp - first) * plot_width / max(1, last - first)

    def y_of(lag: int) -> float:
        return chart_bottom - lag * PLOT_HEIGHT / top_lag

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<line x1="{MARGIN_LEFT}" y1="{chart_bottom}" x2="{width - MARGIN_RIGHT}" y2="{chart_bottom}" stroke="black"/>',
        f'<line x1="{MARGIN_LEFT}" y1="{MARGIN_TOP}" x2="{MARGIN_LEFT}" y2="{chart_bottom}" stroke="black"/>',
        f'<text x="{MARGIN_LEFT - 6}" y="{MARGIN_TOP + 4}" text-anchor="end">{top_lag}</text>',
        f'<text x="{MARGIN_LEFT - 6}" y="{chart_bottom}" text-anchor="end">0</text>',
        f'<text x="{MARGIN_LEFT}" y="{chart_bottom + 14}">{format_time(first)}</text>',
        f'<text x="{width - MARGIN_RIGHT}" y="{chart_bottom + 14}" text-anchor="end">{format_time(last)}</text>',
        f'<text x="14" y="{MARGIN_TOP + PLOT_HEIGHT / 2}" transform="rotate(-90 14 {MARGIN_TOP + PLOT_HEIGHT / 2})" '
        f'text-anchor="middle">total lag (messages)</text>',
    ]
    for index, (name, frame) in enumerate(series):
        colour = LINE_COLOURS[index % len(LINE_COLOURS)]
        stride = -(-len(frame) // MAX_LINE_POINTS)
        line = frame.iloc[::stride]
        points = " ".join(
            f"{x_of(t):.1f},{y_of(lag):.1f}"
            for t, lag in zip(line["timestamp"], line["totallag"], strict=True)
        )
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}"/>')
        strip_y = strips_top + index * (STRIP_HEIGHT + 6)
        for start, end, status in status_runs(frame["timestamp"].tolist(), frame["status"].tolist(), last):
            parts.append(
                f'<rect x="{x_of(start):.1f}" y="{strip_y}" width="{max(1.0, x_of(end) - x_of(start)):.1f}" '
                f'height="{STRIP_HEIGHT}" fill="{STATUS_COLOURS.get(status, "#9e9e9e")}"/>'
            )
        parts.append(
            f'<text x="{MARGIN_LEFT - 6}" y="{strip_y + STRIP_HEIGHT - 2}" text-anchor="end" '
            f'fill="{colour}">{index + 1}</text>'
        )
        legend_y = legend_top + index * 16
        parts.append(f'<rect x="{MARGIN_LEFT}" y="{legend_y}" width="10" height="10" fill="{colour}"/>')
        parts.append(
            f'<text x="{MARGIN_LEFT + 16}" y="{legend_y + 9}">{index + 1}: {html.escape(name)}</text>'
        )
    parts.append(
        f'<text x="{width - MARGIN_RIGHT}" y="{strips_top - 6}" text-anchor="end">status: '
        f'<tspan fill="{STATUS_COLOURS["OK"]}">OK</tspan> <tspan fill="{STATUS_COLOURS["WARN"]}">WARN</tspan> '
        f'<tspan fill="{STATUS_COLOURS["ERR"]}">ERR</tspan></text>'
    )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def status_runs(timestamps: list[int], statuses: list[str], end: int) -> list[tuple[int, int, str]]:
    """Consecutive points with the same status as (start, end, status); the last run ends at ``end``."""
    runs: list[tuple[int, int, str]] = []
    for timestamp, status in zip(timestamps, statuses, strict=True):
        if runs and runs[-1][2] == status:
            continue
        if runs:
            runs[-1] = (runs[-1][0], timestamp, runs[-1][2])
        runs.append((timestamp, end, status))
    return runs


def write_report(directory: Path, summary: Any, step_s: int, report_rows: Any, timelines: Any) -> Path:
    """Write ``report.md`` (and ``report.svg`` when there is a timeline) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    plot_name = None
    if len(timelines):
        plot_name = "report.svg"
        (directory / plot_name).write_text(render_svg(timelines))
    path = directory / "report.md"
    path.write_text(render_markdown(summary, step_s, report_rows, plot_name))
    return path
