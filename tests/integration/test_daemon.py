"""The monitor's lifecycle: Burrow's start and stop order, readiness, failures, history capture."""

from __future__ import annotations

import pytest
import structlog

from burrowpy.config import parse_config
from burrowpy.daemon import Monitor, acquire_pidfile, module_classes
from burrowpy.protocol import SetBrokerOffset, SetConsumerOffset, SetDeleteGroup


class Recorder:
    """A module class that records its lifecycle in a shared journal, so the test sees the global order."""

    def __init__(self, journal: list[str], fail_on_start: bool = False) -> None:
        self.journal = journal
        self.fail_on_start = fail_on_start

    def __call__(self, name, section, ctx):
        recorder = self

        class Module:
            def describe(self):
                return {"class-name": section.get_str("class-name", "")}

            async def start(self):
                recorder.journal.append(f"start {section.path} ready={ctx.app_ready.is_set()}")
                if recorder.fail_on_start:
                    raise RuntimeError("cannot reach Kafka")

            async def stop(self):
                recorder.journal.append(f"stop {section.path}")

            def submit(self, request):
                recorder.journal.append(f"submit {type(request).__name__}")

        return Module()


CONFIG = {
    "httpserver": {"api": {"address": "127.0.0.1:0"}},
    "cluster": {"a": {"class-name": "fake"}, "b": {"class-name": "fake"}},
    "consumer": {"a": {"class-name": "fake", "cluster": "a"}},
}


def classes(journal, failing_kind=None):
    return {
        kind: {
            "fake": Recorder(journal, fail_on_start=kind == failing_kind),
            "inmemory": Recorder(journal),
            "caching": Recorder(journal),
        }
        for kind in ("storage", "evaluator", "cluster", "consumer")
    }


async def test_start_and_stop_in_burrows_order():
    journal: list[str] = []
    monitor = Monitor(
        parse_config(CONFIG, "burrowpy.yaml", {}), structlog.get_logger(), classes=classes(journal)
    )
    await monitor.start()
    assert monitor.ctx.app_ready.is_set()
    assert journal == [
        "start storage.default ready=False",
        "start evaluator.default ready=False",
        "start cluster.a ready=False",
        "start cluster.b ready=False",
        "start consumer.a ready=False",
    ]
    assert monitor.http.addresses["api"][0][1] > 0  # the HTTP server started between evaluator and cluster
    journal.clear()
    await monitor.stop()
    assert not monitor.ctx.app_ready.is_set()
    assert journal == [
        "stop consumer.a",
        "stop cluster.b",
        "stop cluster.a",
        "stop evaluator.default",
        "stop storage.default",
    ]
    assert monitor.http.addresses == {}


async def test_a_module_failing_to_start_stops_what_started_and_raises():
    journal: list[str] = []
    monitor = Monitor(
        parse_config(CONFIG, "burrowpy.yaml", {}),
        structlog.get_logger(),
        classes=classes(journal, failing_kind="cluster"),
    )
    with pytest.raises(RuntimeError, match="cannot reach Kafka"):
        await monitor.start()
    assert journal == [
        "start storage.default ready=False",
        "start evaluator.default ready=False",
        "start cluster.a ready=False",
        "stop evaluator.default",
        "stop storage.default",
    ]
    assert not monitor.ctx.app_ready.is_set() and monitor.http.addresses == {}


async def test_module_requests_are_teed_to_history_capture(tmp_path):
    pytest.importorskip("pyarrow")
    from burrowpy.pipeline.history import read_history

    journal: list[str] = []
    config = parse_config(
        {**CONFIG, "history": {"dir": str(tmp_path / "history"), "roll-interval": 60}}, "burrowpy.yaml", {}
    )
    monitor = Monitor(config, structlog.get_logger(), classes=classes(journal))
    await monitor.start()
    monitor.ctx.submit(SetBrokerOffset("a", "orders", 0, 1, 100, 1_700_000_000_000))
    monitor.ctx.submit(SetConsumerOffset("a", "g", "orders", 0, 90, 7, 1_700_000_000_500))
    monitor.ctx.submit(SetDeleteGroup("a", "g"))
    await monitor.stop()  # closing the writer writes the buffered events
    assert [line for line in journal if line.startswith("submit")] == [
        "submit SetBrokerOffset",
        "submit SetConsumerOffset",
        "submit SetDeleteGroup",
    ]
    rows = sorted(read_history(tmp_path / "history").to_pylist(), key=lambda row: row["kind"])
    assert [(row["kind"], row["group"], row["offset"]) for row in rows] == [
        ("broker", None, 100),
        ("commit", "g", 90),
    ]


async def test_notifiers_are_wired_with_the_registry_and_listed_for_config():
    journal: list[str] = []
    config = parse_config({**CONFIG, "notifier": {"quiet": {"class-name": "null"}}}, "burrowpy.yaml", {})
    monitor = Monitor(config, structlog.get_logger(), classes=classes(journal))
    monitor.configure()
    assert list(monitor.ctx.modules["notifier"]) == ["quiet"]
    assert monitor.zookeeper is None and monitor.ctx.zookeeper is None  # no zookeeper block: no lock
    assert any(metric.name.startswith("burrowpy_notifier") for metric in monitor.ctx.registry.collect())
    order = [name for name, _ in monitor._coordinators]
    assert order == ["storage", "evaluator", "httpserver", "notifier", "cluster", "consumer"]


def test_the_module_table_names_every_shipped_class():
    table = module_classes()
    assert {kind: sorted(names) for kind, names in table.items()} == {
        "storage": ["inmemory"],
        "evaluator": ["caching"],
        "cluster": ["kafka"],
        "consumer": ["kafka", "kafka_zk"],
    }


def test_pidfile_refuses_a_live_process_and_replaces_a_stale_one(tmp_path):
    import os
    import subprocess
    import sys

    pidfile = tmp_path / "burrow.pid"
    assert acquire_pidfile(str(pidfile)) is None and pidfile.read_text() == str(os.getpid())
    assert acquire_pidfile(str(pidfile)) is None  # our own pid (a restarted container) is fine
    with subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    ) as other:
        pidfile.write_text(str(other.pid))
        assert "names running process" in acquire_pidfile(str(pidfile))
        other.stdin.close()
    pidfile.write_text(str(other.pid))  # that process has exited now
    assert acquire_pidfile(str(pidfile)) is None and pidfile.read_text() == str(os.getpid())
    pidfile.write_text("garbage")
    assert "cannot interpret" in acquire_pidfile(str(pidfile))
    assert "cannot write" in acquire_pidfile(str(tmp_path / "missing-dir" / "burrow.pid"))


def test_serve_sets_the_daemons_garbage_collector_thresholds(tmp_path):
    """`burrowpy serve` runs with GC_THRESHOLDS (bench/README.md, /status latency); checked in a child
    process, so this test process keeps its own collector settings."""
    import gc
    import subprocess
    import sys

    from burrowpy.daemon import GC_THRESHOLDS

    assert gc.get_threshold() != GC_THRESHOLDS  # else the check below proves nothing
    script = (
        "import argparse, gc, sys\n"
        "from burrowpy import daemon\n"
        f"status = daemon.run(argparse.Namespace(config={str(tmp_path / 'missing.yaml')!r}, config_dir=None))\n"
        "print(status, *gc.get_threshold())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["1", *map(str, GC_THRESHOLDS)], done.stderr


BURST = r"""
import argparse, sys
from pathlib import Path
from burrowpy import daemon

def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")

status = daemon.run(argparse.Namespace(config=sys.argv[1], config_dir=None))
first = bytearray(1 << 20)  # (untuned glibc: freeing a mapped block raises its mmap threshold to that size)
del first
before = rss_mib()
large, kept = [], []
for _ in range(64):  # a burst of large transient blocks (fetch responses), each followed by a small survivor
    block = bytearray(1 << 20)
    for at in range(0, len(block), 4096):  # every page touched
        block[at] = 1
    large.append(block)
    kept.append(bytearray(4096))
during = rss_mib()
del large, block
print(status, round(during - before), round(rss_mib() - before))
"""


def test_serve_tunes_malloc_so_a_burst_of_large_blocks_is_given_back(tmp_path):
    """`burrowpy serve` fixes glibc's mmap threshold (daemon.tune_malloc): 64 MiB of 1 MiB blocks allocated between
    small survivors and freed are given back to the system, not kept in the heap behind the survivors. In a child
    process (malloc's settings are the process's), without the MALLOC_* variables that would override them."""
    import os
    import subprocess
    import sys

    env = {key: value for key, value in os.environ.items() if not key.startswith("MALLOC_")}
    done = subprocess.run([sys.executable, "-c", BURST, str(tmp_path / "missing.yaml")], capture_output=True,
                          text=True, timeout=60, env=env)
    status, during, after = (int(word) for word in done.stdout.split())
    assert status == 1 and during >= 60, done.stdout + done.stderr  # the burst was resident
    assert after < 8, done.stdout  # and given back


YOUNG = r"""
import argparse, gc, os, signal, sys, threading, time
from burrowpy import daemon

frozen = []

def watch() -> None:
    # the freezer's first refreeze comes a minute after the start: anything frozen sooner is the young collector's
    deadline = time.monotonic() + 30
    while not gc.get_freeze_count() and time.monotonic() < deadline:
        time.sleep(0.01)
    frozen.append(gc.get_freeze_count())
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=watch, daemon=True).start()
status = daemon.run(argparse.Namespace(config=sys.argv[1], config_dir=None))
print(status, frozen[0], gc.get_freeze_count())
"""


def test_serve_runs_the_young_collector_and_gives_its_frozen_objects_back_when_stopped(tmp_path):
    """`burrowpy serve` paces the collector's young passes and freezes their survivors (daemon.YoungCollector):
    objects are frozen within seconds of the start, before the freezer's first refreeze, and none is left frozen once
    serve has stopped on SIGTERM. In a child process (the collector is the process's)."""
    import os
    import subprocess
    import sys

    from harness import ROOT, free_port

    (tmp_path / "burrowpy.yaml").write_text(
        f'logging: {{filename: burrowpy.log}}\nhttpserver: {{default: {{address: "127.0.0.1:{free_port()}"}}}}\n'
        'storage: {default: {intervals: 10}}\n')
    done = subprocess.run([sys.executable, "-c", YOUNG, str(tmp_path / "burrowpy.yaml")], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)]))})  # this checkout's code
    status, frozen, left = (int(word) for word in done.stdout.split())
    assert status == 0, done.stdout + done.stderr
    assert frozen > 0, done.stdout  # frozen within 30 s of the start
    assert left == 0
