"""Issue 32's "smaller rooms": no source file of the product grows past 800 lines (split it along a seam)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 800


def test_no_source_file_is_over_800_lines():
    sizes = {str(path.relative_to(ROOT)): len(path.read_text().splitlines())
             for folder in ("broker", "burrowpy") for path in (ROOT / folder).rglob("*.py")}
    assert len(sizes) > 100, "the product's sources were not found"
    assert {name: lines for name, lines in sizes.items() if lines > LIMIT} == {}
