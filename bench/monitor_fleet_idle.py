"""The idle ``burrowpy serve``'s CPU per offset refresh at fleet scale, against a Kafka fleet kept running between
runs, so that before/after runs of two trees alternate on one fleet (``bench/monitor_fleet_daemon.py`` makes a
new fleet and runs Burrow too: about 12 minutes a run with four Kafka nodes).

    .venv/bin/python bench/monitor_fleet_idle.py hold DIR [--kafka-nodes 4] [--kafka-heap 2g]
    PYTHONPATH=<tree> .venv/bin/python bench/monitor_fleet_idle.py measure DIR [--refreshes 6] [--settle 0]
                                                                    [--profile PROFILE_DIR] [--our-broker BROKER_DIR]

``hold`` starts ``--kafka-nodes`` Apache Kafka 4.4 nodes in DIR (one replica per partition, spread over them),
makes ``monitor_fleet_daemon``'s fleet on them (2,000 groups, 50,750 partitions, 10 groups in ERR: the same
``Fleet``, topics, records and commits), writes their bootstrap servers to DIR/bootstrap and keeps them until it
is stopped (Ctrl-C or SIGTERM, which stop Kafka).

``measure`` runs ``burrowpy serve`` (the tree on ``PYTHONPATH``: the ``burrowpy`` script imports the installed
checkout's otherwise) configured as ``monitor_fleet_daemon`` configures it, on DIR's fleet (or, with
``--our-broker``, on our own broker holding the fleet in BROKER_DIR, as ``monitor_loop_stalls --broker-dir`` keeps
it), waits until every group shows a full window, then counts its CPU over ``--refreshes`` idle offset-refresh
periods, as ``monitor_fleet_daemon`` does (the window begins as soon as every group shows: the daemon's first
refreeze of the collector, a minute after its start, falls in it), or from ``--settle`` seconds after the start if
later. Printed: CPU seconds per refresh period, and each thread's share (the event loop's thread is the first, the
others are the thread pool's: decodes of large answers). With ``--profile``, py-spy samples the idle window (raw
collapsed stacks; py-spy costs the monitor some CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from pathlib import Path

from monitor_fleet_daemon import (
    INTERVALS,
    JVM_OPTS,
    OFFSETS_PARTITIONS,
    BurrowpyProcess,
    Fleet,
    KafkaCluster,
    MonitorSettings,
    fill,
    fleet_on_our_broker,
    idle_cpu,
    prepare_topics,
    raise_file_limit,
    start_and_fill,
)


def fleet() -> Fleet:
    return Fleet.generate(2000, 50_000, 10, 1000)


def hold(directory: Path, nodes: int, heap: str) -> None:
    made = fleet()
    raise_file_limit(-(-made.partitions // nodes) + 2_000, "--kafka-nodes")
    jvm_opts = [f"-Xms{heap}", f"-Xmx{heap}", *(o for o in JVM_OPTS if not o.startswith(("-Xms", "-Xmx")))]
    one_replica = {key: "1" for key in ("offsets.topic.replication.factor", "default.replication.factor",
                                        "transaction.state.log.replication.factor",
                                        "share.coordinator.state.topic.replication.factor")}
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with KafkaCluster(directory / "kafka", nodes=nodes, jvm_opts=jvm_opts,
                      config={"offsets.topic.num.partitions": OFFSETS_PARTITIONS, **one_replica}) as kafka:
        began = time.monotonic()
        prepare_topics(kafka.bootstrap, made.topics)
        asyncio.run(fill(kafka.bootstrap, made.groups, INTERVALS, 16, made.markers))
        (directory / "bootstrap").write_text(kafka.bootstrap)
        print(f"fleet made in {time.monotonic() - began:.1f} s; bootstrap {kafka.bootstrap}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()


def threads_cpu(pid: int) -> dict[int, float]:
    """Each thread's user + system CPU seconds so far."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            text = (task / "stat").read_text()
            fields = text[text.rindex(")") + 2:].split()
            found[int(task.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found


def measure(directory: Path, refreshes: int, settle: float, profile: Path | None, our_broker: Path | None) -> None:
    made = fleet()
    with contextlib.ExitStack() as stack:
        if our_broker is not None:
            bootstrap = stack.enter_context(fleet_on_our_broker(made, our_broker)).bootstrap
        else:
            bootstrap = (directory / "bootstrap").read_text()
        settings = MonitorSettings(bootstrap, intervals=INTERVALS, expire_cache=1)
        work = directory / f"burrowpy-{time.strftime('%H%M%S')}"
        work.mkdir()
        monitor = BurrowpyProcess(work, settings)
        stack.callback(monitor.stop)
        phase = start_and_fill(monitor, made, 900)
        time.sleep(max(0.0, settle - phase.every_group_s))
        before = threads_cpu(monitor.pid)
        per_refresh = idle_cpu(monitor, settings, refreshes, profile)
        after = threads_cpu(monitor.pid)
    print(f"PYTHONPATH={os.environ.get('PYTHONPATH', '')} {'our broker' if our_broker else 'Kafka'}: every group "
          f"after {phase.every_group_s:.1f} s, idle window from {max(settle, phase.every_group_s):.0f} s: "
          f"{per_refresh:.3f} s CPU per refresh; load {os.getloadavg()[0]:.2f}")
    shares = sorted(((after[tid] - before.get(tid, 0.0)) / refreshes, tid) for tid in after)
    print("  threads (s per refresh): " + ", ".join(f"{spent:.3f}" for spent, tid in reversed(shares) if spent > 0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    holding = commands.add_parser("hold", help="make the fleet on Kafka nodes and keep them")
    holding.add_argument("directory", type=Path)
    holding.add_argument("--kafka-nodes", type=int, default=4)
    holding.add_argument("--kafka-heap", default="2g")
    measuring = commands.add_parser("measure", help="burrowpy serve's idle CPU on the held fleet")
    measuring.add_argument("directory", type=Path)
    measuring.add_argument("--refreshes", type=int, default=6)
    measuring.add_argument("--settle", type=float, default=0.0,
                           help="the idle window starts this many seconds after the monitor's start at the earliest")
    measuring.add_argument("--profile", type=Path, help="directory for py-spy samples of the idle window")
    measuring.add_argument("--our-broker", type=Path, help="our broker holding the fleet in this directory instead")
    args = parser.parse_args()
    if args.command == "hold":
        args.directory.mkdir(parents=True)
        hold(args.directory, args.kafka_nodes, args.kafka_heap)
    else:
        measure(args.directory, args.refreshes, args.settle, args.profile, args.our_broker)
    return 0


if __name__ == "__main__":
    sys.exit(main())
