"""How many examples the heaviest property tests try. The default run tries a share of a test's full count;
hypothesis draws a fresh share each run (and replays any failure it saved), so the runs add up.
``BURROWPY_FULL_EXAMPLES=1`` tries the full count, as a change to the code such a property covers deserves."""

from __future__ import annotations

import os

FULL = os.environ.get("BURROWPY_FULL_EXAMPLES", "") not in ("", "0")


def examples(full: int, default: int) -> int:
    """``full`` with BURROWPY_FULL_EXAMPLES set, else ``default``."""
    return full if FULL else default
