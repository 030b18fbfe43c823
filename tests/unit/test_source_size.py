"""No source file of the project grows past a size one can hold in mind (issue 32, "smaller rooms"): a module
over the limit is split along its seams, as the group machine, the partition log and the generated response
types were."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("broker", "burrowpy")
MAX_LINES = 800


def files_over(limit: int, root: Path = REPO) -> dict[str, int]:
    """Every .py file of the packages under ``root`` with more than ``limit`` lines, with its line count."""
    sizes = {str(path.relative_to(root)): len(path.read_text().splitlines())
             for package in PACKAGES for path in (root / package).rglob("*.py")}
    assert len(sizes) > 100, f"found only {len(sizes)} source files under {root}"
    return {name: lines for name, lines in sizes.items() if lines > limit}


def test_no_source_file_is_over_800_lines():
    assert files_over(MAX_LINES) == {}, f"split these modules along their seams (at most {MAX_LINES} lines each)"
