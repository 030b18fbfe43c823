"""What ``burrowpy serve`` imports: jinja2 (9.5 MiB of RSS alone in a bare interpreter, bench/README.md, "The whole
monitor's memory at fleet scale") only when a notifier is configured. Each case in an interpreter of its own, so
that what other tests imported does not count."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Every module of a monitor without notifiers built (configure: nothing connects), then the heavy libraries it
# has in sys.modules.
PROGRAM = """
import asyncio, json, sys
import structlog
from burrowpy.config import parse_config
from burrowpy.daemon import Monitor

doc = {
    "general": {"pidfile": ""},
    "httpserver": {"default": {"address": "127.0.0.1:0"}},
    "storage": {"default": {"class-name": "inmemory"}},
    "evaluator": {"default": {"class-name": "caching"}},
    "cluster": {"local": {"class-name": "kafka", "servers": ["127.0.0.1:9"]}},
    "consumer": {"local": {"class-name": "kafka", "cluster": "local", "servers": ["127.0.0.1:9"]}},
}
if sys.argv[1] == "notifier":
    doc["notifier"] = {"alerts": {"class-name": "null"}}

async def build():
    monitor = Monitor(parse_config(doc, "burrowpy.yaml", {}), structlog.get_logger())
    monitor.configure()
    return sorted(monitor.ctx.modules)

kinds = asyncio.run(build())
print(json.dumps({"kinds": kinds, "jinja2": "jinja2" in sys.modules}))
"""


def built(case: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROGRAM, case], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize(("case", "kinds", "jinja2"), [
    ("plain", ["cluster", "consumer", "evaluator", "storage"], False),
    ("notifier", ["cluster", "consumer", "evaluator", "notifier", "storage"], True),  # the check sees it
])
def test_jinja2_is_imported_only_with_a_notifier(case: str, kinds: list[str], jinja2: bool) -> None:
    assert built(case) == {"kinds": kinds, "jinja2": jinja2}
