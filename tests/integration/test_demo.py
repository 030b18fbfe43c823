"""`burrowpy demo` (what `make run` starts) shows OK, WARN and STOP groups through the HTTP API within a minute."""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.request

import pytest
from harness import BURROWPY, ROOT, free_port, wait_until

pytestmark = pytest.mark.integration


def group_status(base: str, group: str) -> tuple[str, list[str]] | None:
    try:
        with urllib.request.urlopen(f"{base}/v3/kafka/local/consumer/{group}/status", timeout=5) as reply:
            body = json.load(reply)
    except OSError:
        return None
    return body["status"]["status"], [p["status"] for p in body["status"]["partitions"]]


def test_demo_shows_real_statuses_within_a_minute(tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([BURROWPY, "demo", "--http", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data"),
                             "--duration", "150"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=(tmp_path / "stderr").open("w"), text=True)
    try:
        expected = {"demo-healthy": ("OK", set()), "demo-lagging": ("WARN", {"WARN"}),
                    "demo-stopped": ("ERR", {"STOP"})}
        seen: dict[str, tuple[str, list[str]] | None] = {}

        def all_as_expected() -> bool:
            for group in expected:
                seen[group] = group_status(base, group)
            return all(seen[g] is not None and (seen[g][0], set(seen[g][1])) == want
                       for g, want in expected.items())

        wait_until(all_as_expected, 100, interval=1, message=f"demo statuses (last seen {seen})")
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert f"HTTP API on {base}" in out
    # stopped with Ctrl-C, it says nothing about its own tasks
    for text in (out, (tmp_path / "stderr").read_text()):
        assert "Traceback" not in text and "never retrieved" not in text, text[-3000:]
