"""The `burrowpy` command line: a subcommand imports its own module only."""

from __future__ import annotations

import subprocess
import sys

import pytest

from burrowpy.cli import SUBCOMMANDS


def modules_loaded_by(*argv: str) -> tuple[set[str], str]:
    """The subcommand modules in sys.modules after parsing ``argv`` (in a fresh interpreter), and its output."""
    script = (
        "import sys\n"
        "from burrowpy import cli\n"
        "try:\n"
        f"    cli.parser_for({list(argv)!r}).parse_args({list(argv)!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(' '.join(m for m, _ in cli.SUBCOMMANDS.values() if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    lines = done.stdout.splitlines()
    return set(lines[-1].split()), done.stdout + done.stderr


@pytest.mark.parametrize("command", ["serve", "topics"])
def test_a_subcommand_imports_its_module_and_no_other(command):
    loaded, output = modules_loaded_by(command, "--help")
    assert loaded == {SUBCOMMANDS[command][0]}, output
    assert f"usage: burrowpy {command}" in output


def test_the_top_level_help_lists_every_subcommand():
    _, output = modules_loaded_by("--help")
    for name, (_, help_text) in SUBCOMMANDS.items():
        assert name in output and help_text.split()[0] in output


def test_main_parses_a_subcommands_own_options():
    done = subprocess.run([sys.executable, "-m", "burrowpy.cli", "serve", "--config", "/nonexistent/burrow.yaml"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "/nonexistent/burrow.yaml" in done.stderr
