"""Log-log line charts as plain SVG for the benches' cost curves (no plotting library needed to read them)."""

from __future__ import annotations

import math
from pathlib import Path

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


def log_log_chart(path: Path, title: str, x_label: str, series: dict[str, list[tuple[float, float]]]) -> None:
    """One chart: each series is a labelled list of (x, y) points; non-positive values are left out."""
    width, height, margin, legend = 760, 460, 64, 18 * len(series) + 24
    points_by_label = {label: [(x, y) for x, y in points if x > 0 and y > 0] for label, points in series.items()}
    xs = [x for points in points_by_label.values() for x, _ in points]
    ys = [y for points in points_by_label.values() for _, y in points]
    if not xs:
        raise ValueError("nothing to plot")
    x_low, x_high = math.floor(math.log10(min(xs))), max(math.ceil(math.log10(max(xs))), math.floor(math.log10(min(xs))) + 1)
    y_low, y_high = math.floor(math.log10(min(ys))), max(math.ceil(math.log10(max(ys))), math.floor(math.log10(min(ys))) + 1)
    top = margin + legend

    def place(x: float, y: float) -> tuple[float, float]:
        px = margin + (math.log10(x) - x_low) / (x_high - x_low) * (width - 2 * margin)
        py = height - margin - (math.log10(y) - y_low) / (y_high - y_low) * (height - margin - top)
        return px, py

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="12"><rect width="100%" height="100%" fill="white"/>',
             f'<text x="{width / 2}" y="24" text-anchor="middle" font-size="15">{title}</text>']
    for exponent in range(x_low, x_high + 1):
        px, _ = place(10.0**exponent, 10.0**y_low)
        parts.append(f'<line x1="{px:.0f}" y1="{top}" x2="{px:.0f}" y2="{height - margin}" stroke="#ddd"/>'
                     f'<text x="{px:.0f}" y="{height - margin + 16}" text-anchor="middle">{10.0**exponent:g}</text>')
    for exponent in range(y_low, y_high + 1):
        _, py = place(10.0**x_low, 10.0**exponent)
        parts.append(f'<line x1="{margin}" y1="{py:.0f}" x2="{width - margin}" y2="{py:.0f}" stroke="#ddd"/>'
                     f'<text x="{margin - 6}" y="{py + 4:.0f}" text-anchor="end">{10.0**exponent:g}</text>')
    parts.append(f'<text x="{width / 2}" y="{height - 20}" text-anchor="middle">{x_label}</text>')
    for index, (label, points) in enumerate(points_by_label.items()):
        colour = COLOURS[index % len(COLOURS)]
        placed = [place(x, y) for x, y in points]
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="'
                     + " ".join(f"{x:.1f},{y:.1f}" for x, y in placed) + '"/>')
        parts.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>' for x, y in placed)
        parts.append(f'<text x="{margin + 8}" y="{44 + 18 * index}" fill="{colour}">{label}</text>')
    parts.append("</svg>")
    Path(path).write_text("\n".join(parts) + "\n")
