"""The `burrowpy` command line: a subcommand imports its own module only; a broker refuses a sample config."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from broker.cluster.keys import HOW_TO_MAKE_ONE
from burrowpy.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[2]


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


def test_the_broker_refuses_to_start_on_a_sample_unchanged(tmp_path):
    sample = ROOT / "config" / "cluster-3" / "broker-1.yaml"
    result = subprocess.run([str(Path(sys.executable).with_name("burrowpy")), "broker", "--config", str(sample)],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{sample}: cluster.secret: is the sample's placeholder" in result.stderr
    assert HOW_TO_MAKE_ONE in result.stderr and list(tmp_path.iterdir()) == []


def test_a_metrics_address_in_use_stops_the_broker_before_it_starts(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "broker.yaml"
        config.write_text(f"metrics.listen: 127.0.0.1:{port}\n")
        result = subprocess.run([str(Path(sys.executable).with_name("burrowpy")), "broker", "--listen", "127.0.0.1:0",
                                 "--data-dir", str(tmp_path / "data"), "--config", str(config)],
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"burrowpy broker: metrics.listen: cannot listen on 127.0.0.1:{port}: " in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "data").exists()
