"""`burrowpy demo` (what `make run` starts) shows OK, WARN and STOP groups through the HTTP API within a minute."""

from __future__ import annotations

import json
import os
import re
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

        def probed() -> bool:  # the demo runs end-to-end probes on its broker
            with urllib.request.urlopen(f"{base}/v3/kafka/local/probe", timeout=5) as reply:
                brokers = json.load(reply)["probe"]["brokers"]
            return len(brokers) == 1 and brokers[0]["success_ratio"] == 1.0 and brokers[0]["commit_seconds"] is not None

        wait_until(probed, 30, interval=1, message="the demo's probes succeeding")
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert f"HTTP API on {base}" in out
    assert (tmp_path / "data").is_dir()  # a data directory given is kept
    # stopped with Ctrl-C, it says nothing about its own tasks
    for text in (out, (tmp_path / "stderr").read_text()):
        assert "Traceback" not in text and "never retrieved" not in text, text[-3000:]


def test_a_data_directory_of_its_own_is_removed_when_the_demo_stops(tmp_path):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    proc = subprocess.Popen([BURROWPY, "demo", "--http", f"127.0.0.1:{free_port()}", "--duration", "30"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "TMPDIR": str(temporary)})
    try:
        lines = []
        for line in proc.stdout:  # the demo prints its addresses once it is up
            lines.append(line)
            if "data in" in line:
                break
        found = re.search(r"\(data in ([^,)]+)(, removed when the demo stops)?\)", "".join(lines))
        assert found, lines
        data_dir = found.group(1)
        assert os.path.dirname(data_dir) == str(temporary) and os.listdir(data_dir)  # the broker's files
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()  # leave nothing running; the test fails below on the kill's return code
            proc.communicate()
    assert proc.returncode == 0
    assert os.listdir(temporary) == []
    assert found.group(2), "the demo says that it removes the directory"
