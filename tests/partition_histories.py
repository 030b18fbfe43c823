"""What property tests of the evaluator draw for a partition besides its commits: the broker's offsets and when
they were read."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

NOW = 1_700_000_000  # seconds: the evaluations' "now" in these tests


def broker_history(draw: Any, offset: int, samples: int) -> tuple[list[int], list[int], int]:
    """``samples`` broker offsets around ``offset`` (the newest commit's, so every way to a lag in seconds is
    taken), never falling, the times (ms) they were read, and the partition's current lag."""
    broker = sorted(max(0, offset + draw(st.integers(-400, 800))) for _ in range(samples))
    read_at = (NOW - 200) * 1000
    times = []
    for _ in broker:
        read_at += draw(st.integers(0, 40_000))
        times.append(read_at)
    current_lag = max(0, broker[-1] - offset) if broker else draw(st.integers(0, 50))
    return broker, times, current_lag
