"""The whole monitor at fleet scale: ``burrowpy serve`` and the current Burrow on one Apache Kafka 4.4 holding
a generated fleet.

    .venv/bin/python bench/monitor_fleet_daemon.py [--groups 2000] [--partitions 50000] [--big-groups 10]
                                                   [--refreshes 6] [--live 60] [--kafka-heap 3g]
                                                   [--kafka-nodes 1] [--keep DIR]

One run, one Kafka (a single KRaft node from the test peers, or ``--kafka-nodes`` of them with one replica per
partition: a node keeps every partition's log file open, and the full fleet needs more descriptors than one
process may have here; this machine's full-scale run used four), one fleet, both monitors configured alike
(``MonitorSettings``: a 10-commit window, offset-refresh 10 s, expire-cache 1 s):

1. Fleet. ``--groups`` groups: ``--big-groups`` of them consume one topic of ``--big-partitions``
   partitions holding ten records per partition, the others each a topic of their own sharing the rest of
   ``--partitions``, with no records (caught-up consumers of idle topics: on this machine Kafka 4.4 spends
   about 30 ms of a loaded core on the first record of each partition, which would take half an hour for
   50,000). Topics are created 100 per CreateTopics request. Every group commits every partition ten times
   (one OffsetCommit per group and round, through broker/client.py): the fleet's groups at the log's end,
   so OK without lag; the big groups one record behind, then never again, so each is ERR with every
   partition STOP and ``/status`` lists all its partitions. Then one marker group per
   ``__consumer_offsets`` partition commits once.
2. Each monitor alone (the other not running), burrowpy first: the time from its start until every marker
   shows (every commit read) and until a sweep of every group's ``/status`` finds each with a full window
   (complete 1) and its expected lag; the sweep's own cost (a second sweep, everything already there).
   Then it stays idle (nothing commits, nobody asks) for ``--refreshes`` offset-refresh periods: its CPU
   over that span divided by the periods is its CPU per broker-offset refresh period: everything an idle
   monitor does, which for Burrow is the ListOffsets of every partition into storage, and for burrowpy
   also reading the timestamps of the records groups sit at (lag in seconds) and the dashboard's sampling
   of every group's status every 5 s.
3. Both monitors together, started again, and once both show every group: ``--live`` seconds of live
   ingest, every fleet group committing all its partitions every ``--commit-interval`` seconds (the
   consumers' auto-commit), while a client in a process of its own asks each big group's ``/status`` and
   ``/lag`` of both monitors in turn, every request a cache miss (a group is asked again only after
   expire-cache has passed). Together so that both see the same commits and the same load from whatever
   else runs on the machine at the same moments; CPU is counted per process, so sharing the cores does not
   move it, while latencies are each taken under both monitors' ingest.

Peak RSS is the process's VmHWM at the end of each phase (the larger one reported). Results go to
``bench/results/monitor_fleet_daemon-<UTC time>.json``; the table is printed (``--table FILE`` prints
it again from a results file).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The helpers that start Kafka, a ZooKeeper and the two monitors alike are the integration tests' own.
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from burrow_support import (  # noqa: E402
    CURRENT_BURROW_BINARY,
    BurrowProcess,
    BurrowpyProcess,
    MonitorProcess,
    MonitorSettings,
    current_burrow_version,
)
from harness import BrokerProcess  # noqa: E402
from kafka_harness import JVM_OPTS, KafkaCluster, KafkaServer  # noqa: E402
from monitor_ingest import (  # noqa: E402
    BURROWS,
    OFFSETS_PARTITIONS,
    POLL_INTERVAL,
    CoordinatorConnections,
    cpu_seconds,
    fill,
    group_complete,
    group_coordinators,
    marker_groups,
    marker_seen,
    prepare_topics,
    wait_for_each,
)
from monitor_status_http import percentiles  # noqa: E402
from zk import ZooKeeperServer  # noqa: E402

RESULTS = ROOT / "bench" / "results"
INTERVALS = 10
BIG_TOPIC = "fleet-big-topic"
# Kafka 4.4 keeps every partition's active log file open, empty or not (its indexes are mapped, not held open):
# a node of 50,000 partitions needs more descriptors than a process may have on this machine (20,000), and
# ran out of them creating the 19,913th (2026-11-28); --kafka-nodes spreads the partitions
FILES_PER_PARTITION = 1

CLIENT = r"""
import http.client, json, sys, time
ports, groups, partitions, duration, gap = json.loads(sys.argv[1]), sys.argv[2].split(","), int(sys.argv[3]), \
    float(sys.argv[4]), float(sys.argv[5])
connections = {name: http.client.HTTPConnection("127.0.0.1", port) for name, port in ports.items()}
times = {name: {"status": [], "lag": []} for name in ports}
ends = time.monotonic() + duration
cycle = 0
while time.monotonic() < ends:
    began = time.monotonic()
    kind = ("status", "lag")[cycle % 2]
    names = list(ports) if cycle % 4 < 2 else list(ports)[::-1]
    for group in groups:
        for name in names:
            start = time.perf_counter()
            connections[name].request("GET", f"/v3/kafka/local/consumer/{group}/{kind}")
            response = connections[name].getresponse()
            body = response.read()
            elapsed = time.perf_counter() - start
            answer = json.loads(body)
            listed = answer.get("status", {}).get("partitions") or []
            if response.status != 200 or answer["error"] or answer["status"]["status"] not in ("WARN", "ERR") \
                    or len(listed) != partitions:
                raise SystemExit(f"{name} {group}/{kind}: {response.status}, {len(listed)} partitions listed, "
                                 f"{body[:300]!r}")
            times[name][kind].append(elapsed)
    cycle += 1
    # a group is asked again only once its cached status has expired: every answer is evaluated anew
    time.sleep(max(0.0, began + gap - time.monotonic()))
print(json.dumps(times))
"""


@dataclass
class Fleet:
    """Which group commits which topic of how many partitions up to which offset, and each topic's records per
    partition."""

    groups: dict[str, tuple[str, int, int]]
    records: dict[str, int]
    big: list[str]
    markers: list[str] = field(default_factory=lambda: marker_groups(OFFSETS_PARTITIONS))

    @classmethod
    def generate(cls, groups: int, partitions: int, big_groups: int, big_partitions: int) -> Fleet:
        small = groups - big_groups
        per_group = -(-(partitions - big_partitions) // small)  # rounded up: at least --partitions in all
        plan = {f"fleet-{n:05d}": (f"fleet-topic-{n:05d}", per_group, 0) for n in range(small)}
        big = [f"fleet-big-{n:02d}" for n in range(big_groups)]
        plan |= dict.fromkeys(big, (BIG_TOPIC, big_partitions, INTERVALS - 1))
        records = {topic: 0 for topic, _, _ in plan.values()} | {BIG_TOPIC: INTERVALS}
        return cls(plan, records, big)

    @property
    def topics(self) -> dict[str, tuple[int, int]]:
        return {topic: (partitions, self.records[topic]) for topic, partitions, _ in self.groups.values()}

    @property
    def partitions(self) -> int:
        return sum(partitions for partitions, _ in self.topics.values())

    def complete(self, monitor: MonitorProcess, group: str) -> bool:
        topic, partitions, last = self.groups[group]
        return group_complete(monitor, group, partitions, lag=partitions * (self.records[topic] - last))


@dataclass
class Phase:
    """One monitor's figures from one phase."""

    startup_s: float = 0.0
    markers_s: float = 0.0
    every_group_s: float = 0.0
    sweep_s: float = 0.0
    peak_rss_bytes: int = 0
    rss_bytes: int = 0
    startup_cpu_s: float = 0.0
    extra: dict = field(default_factory=dict)


def raise_file_limit(needed: int, remedy: str) -> None:
    """Kafka inherits this process's limit on open files: raise it to what the fleet needs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, max(hard, needed)))
    except (ValueError, OSError) as error:
        raise SystemExit(f"Kafka needs about {needed} open files for this fleet; the limit is {soft} (hard {hard}) "
                         f"and could not be raised ({error}): run with a higher `ulimit -n`, more {remedy} or a smaller "
                         "fleet") from error


def start_and_fill(monitor: MonitorProcess, fleet: Fleet, timeout: float) -> Phase:
    """Start the monitor; time until it shows every marker, then every group with a full window."""
    phase = Phase()
    started = time.monotonic()
    monitor.start(timeout)
    phase.startup_s = time.monotonic() - started
    wait_for_each(monitor, fleet.markers, lambda group: marker_seen(monitor, group), timeout)
    phase.markers_s = time.monotonic() - started
    names = list(fleet.groups)
    wait_for_each(monitor, names, lambda group: fleet.complete(monitor, group), timeout)
    phase.every_group_s = time.monotonic() - started
    phase.startup_cpu_s = cpu_seconds(monitor.pid)
    swept = time.monotonic()
    if not all(fleet.complete(monitor, group) for group in names):
        raise RuntimeError(f"{monitor.name}: a group lost its full window")
    phase.sweep_s = time.monotonic() - swept
    return phase


def py_spy(monitor: MonitorProcess, profile: Path | None, what: str, seconds: float) -> subprocess.Popen | None:
    """With ``--profile``, sample burrowpy's stacks for ``seconds`` with py-spy (raw collapsed stacks, one file
    per phase); the caller waits for it."""
    if profile is None or not isinstance(monitor, BurrowpyProcess):
        return None
    profile.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "--nonblocking", "--format", "raw",
                             "--duration", str(int(seconds)), "--pid", str(monitor.pid),
                             "--output", str(profile / f"burrowpy-{what}.txt")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def idle_cpu(monitor: MonitorProcess, settings: MonitorSettings, refreshes: int, profile: Path | None) -> float:
    """CPU seconds per offset-refresh period while nothing commits and nobody asks."""
    sampler = py_spy(monitor, profile, "idle", refreshes * settings.offset_refresh)
    before = cpu_seconds(monitor.pid)
    ends = time.monotonic() + refreshes * settings.offset_refresh
    while time.monotonic() < ends:
        if monitor.process is None or monitor.process.poll() is not None:
            raise RuntimeError(f"{monitor.name} exited:\n{monitor.log_tail()}")
        time.sleep(min(POLL_INTERVAL * 10, max(0.0, ends - time.monotonic())))
    spent = cpu_seconds(monitor.pid) - before
    if sampler is not None:
        sampler.wait(60)
    return spent / refreshes


def finish(monitor: MonitorProcess, phase: Phase) -> None:
    phase.rss_bytes = monitor.rss_bytes()
    phase.peak_rss_bytes = monitor.peak_rss_bytes()


async def live_commits(bootstrap: str, fleet: Fleet, interval: float, connections: int, stop: asyncio.Event,
                       sent: list[int]) -> None:
    """Every fleet group commits all its partitions (at the log's end) once per ``interval``, the groups spread
    evenly over it, until ``stop`` is set; ``sent[0]`` counts the partitions committed."""
    committing = [group for group in fleet.groups if group not in fleet.big]
    coordinators = await group_coordinators(bootstrap, committing)

    async def committer(own: list[str]) -> None:
        async with CoordinatorConnections(coordinators, "fleet-bench") as connections_of_own:
            began = time.monotonic()
            for number, group in enumerate(itertools.cycle(own)):
                if stop.is_set():
                    return
                topic, partitions, last = fleet.groups[group]
                await connections_of_own.commit(group, topic, dict.fromkeys(range(partitions), last))
                sent[0] += partitions
                due = began + (number + 1) * interval / len(own)
                await asyncio.sleep(max(0.0, due - time.monotonic()))

    await asyncio.gather(*(committer(committing[i::connections]) for i in range(connections)))


async def live_phase(bootstrap: str, fleet: Fleet, monitors: list[MonitorProcess], settings: MonitorSettings,
                     seconds: float, interval: float, connections: int, profile: Path | None,
                     ) -> tuple[dict, dict, float]:
    """Live ingest while the client times both monitors; returns times, CPU seconds per monitor, commits/s."""
    samplers = [py_spy(monitor, profile, "live", seconds) for monitor in monitors]
    stop, sent = asyncio.Event(), [0]
    cpu_before = {monitor.name: cpu_seconds(monitor.pid) for monitor in monitors}
    ingest = asyncio.create_task(live_commits(bootstrap, fleet, interval, connections, stop, sent))
    began = time.monotonic()
    try:
        partitions = fleet.groups[fleet.big[0]][1]
        client = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CLIENT, json.dumps({m.name: m.port for m in monitors}), ",".join(fleet.big),
            str(partitions), str(seconds), str(settings.expire_cache + 0.1), stdout=asyncio.subprocess.PIPE)
        output, _ = await client.communicate()
        if client.returncode:
            raise RuntimeError(f"the HTTP client failed (exit status {client.returncode})")
    finally:
        stop.set()
        await ingest
        for sampler in samplers:
            if sampler is not None:
                sampler.wait(60)
    elapsed = time.monotonic() - began
    cpu = {monitor.name: cpu_seconds(monitor.pid) - cpu_before[monitor.name] for monitor in monitors}
    return json.loads(output), cpu, sent[0] / elapsed


@contextlib.contextmanager
def fleet_on_our_broker(fleet: Fleet, directory: Path | None, connections: int = 16) -> Iterator[BrokerProcess]:
    """Our broker, a process of its own, holding ``fleet`` (topics made, every group's commits written): in
    ``directory`` when given, which an earlier run with the same fleet leaves ready (its data is used as it is),
    else in a temporary directory. Stopped on the way out."""
    with tempfile.TemporaryDirectory(prefix="fleet-") as tmp:
        where = directory or Path(tmp)
        made = (where / "data").exists()
        where.mkdir(parents=True, exist_ok=True)
        broker = BrokerProcess(where / "data", extra_config={
            "max.partitions": fleet.partitions + 1000, "offsets.topic.num.partitions": OFFSETS_PARTITIONS})
        broker.launch()
        try:
            broker.wait_ready(timeout=600)  # a broker of 50,000 partitions loads them first
            if not made:
                began = time.monotonic()
                prepare_topics(broker.bootstrap, fleet.topics)
                asyncio.run(fill(broker.bootstrap, fleet.groups, INTERVALS, connections, fleet.markers))
                print(f"fleet made on the broker: {time.monotonic() - began:.1f} s", flush=True)
            yield broker
        finally:
            broker.stop()


def fleet_arguments(parser: argparse.ArgumentParser) -> None:
    """The fleet's shape (:meth:`Fleet.generate`), the same options in every bench that builds it."""
    parser.add_argument("--groups", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=50_000, help="partitions of all the groups' topics")
    parser.add_argument("--big-groups", type=int, default=10, help="groups in ERR, on one large topic")
    parser.add_argument("--big-partitions", type=int, default=1000, help="partitions of the big groups' topic")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    fleet_arguments(parser)
    parser.add_argument("--connections", type=int, default=16, help="connections committing")
    parser.add_argument("--refreshes", type=int, default=6, help="idle offset-refresh periods whose CPU is counted")
    parser.add_argument("--live", type=float, default=60.0, help="seconds of live ingest while timing requests")
    parser.add_argument("--commit-interval", type=float, default=5.0, help="seconds between a group's live commits")
    parser.add_argument("--kafka-heap", default="3g", help="Kafka's JVM heap (-Xms and -Xmx), of each node")
    parser.add_argument("--kafka-nodes", type=int, default=1,
                        help="Kafka nodes holding the fleet (every topic with one replica, spread over them): a "
                             "node holds an open file per partition, and a process may be limited to fewer")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a monitor may take to show the fleet")
    parser.add_argument("--profile", type=Path,
                        help="directory for py-spy samples of burrowpy while idle and under live ingest (they cost "
                             "it some CPU: not for the figures)")
    parser.add_argument("--results", type=Path, help="results file (default: bench/results/monitor_fleet_daemon-<UTC time>.json)")
    parser.add_argument("--keep", type=Path, help="work in this new directory and keep it (Kafka's, ZooKeeper's and "
                        "the monitors' logs) instead of a temporary one")
    parser.add_argument("--table", type=Path, help="print the table of an earlier results file and stop")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return 0
    # a SIGTERM (timeout, a CI runner) unwinds the context managers, which stop Kafka, ZooKeeper and the monitors
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not 0 < args.big_groups < args.groups:
        parser.error("--big-groups must be at least 1 and fewer than --groups")
    if args.partitions <= args.big_partitions:
        parser.error("--partitions must leave partitions for the groups that are not big")
    if current_burrow_version() is None:
        parser.error(f"{CURRENT_BURROW_BINARY} is missing (make install builds it)")
    fleet = Fleet.generate(args.groups, args.partitions, args.big_groups, args.big_partitions)
    per_node = -(-sum(partitions for partitions, _ in fleet.topics.values()) // args.kafka_nodes)
    raise_file_limit(per_node * FILES_PER_PARTITION + 2_000, "--kafka-nodes")
    binary, _, kafka_version = BURROWS["current"]
    began_at = datetime.now(UTC)
    load_before = os.getloadavg()

    print(f"$ {shlex.join([os.path.relpath(sys.executable), *sys.argv])}")
    print(f"fleet: {len(fleet.groups):,} groups, {fleet.partitions:,} partitions ({args.big_groups} groups on "
          f"{args.big_partitions:,} partitions in ERR), load {load_before[0]:.2f}", flush=True)
    settings = MonitorSettings("", intervals=INTERVALS, expire_cache=1)
    results: dict = {"command": shlex.join(["bench/monitor_fleet_daemon.py", *sys.argv[1:]]),
                     "date": began_at.isoformat(timespec="seconds"), "groups": len(fleet.groups),
                     "partitions": fleet.partitions, "big_groups": args.big_groups,
                     "big_partitions": args.big_partitions, "intervals": INTERVALS,
                     "offset_refresh_s": settings.offset_refresh, "expire_cache_s": settings.expire_cache,
                     "burrow": current_burrow_version(), "load_before": load_before}
    if args.keep:
        args.keep.mkdir(parents=True)  # a new one: a run never mixes its files with an earlier run's
    with (contextlib.nullcontext(str(args.keep)) if args.keep
          else tempfile.TemporaryDirectory(prefix="monitor-fleet-")) as tmp:
        directory = Path(tmp)
        heap = [f"-Xms{args.kafka_heap}", f"-Xmx{args.kafka_heap}"]
        jvm_opts = [*heap, *(o for o in JVM_OPTS if not o.startswith(("-Xms", "-Xmx")))]
        kafka: KafkaServer | KafkaCluster
        if args.kafka_nodes == 1:
            kafka = KafkaServer(directory / "kafka", config={"offsets.topic.num.partitions": OFFSETS_PARTITIONS},
                                jvm_opts=jvm_opts)
        else:
            one_replica = {key: "1" for key in ("offsets.topic.replication.factor", "default.replication.factor",
                                                "transaction.state.log.replication.factor",
                                                "share.coordinator.state.topic.replication.factor")}
            kafka = KafkaCluster(directory / "kafka", nodes=args.kafka_nodes, jvm_opts=jvm_opts,
                                 config={"offsets.topic.num.partitions": OFFSETS_PARTITIONS, **one_replica})
        with kafka, ZooKeeperServer(directory / "zookeeper") as zookeeper:
            settings = MonitorSettings(kafka.bootstrap, intervals=INTERVALS, expire_cache=1)
            clock = time.monotonic()
            prepare_topics(kafka.bootstrap, fleet.topics)
            results["topics_s"] = time.monotonic() - clock
            print(f"{len(fleet.topics):,} topics created and records written: {results['topics_s']:.1f} s", flush=True)
            clock = time.monotonic()
            asyncio.run(fill(kafka.bootstrap, fleet.groups, INTERVALS, args.connections, fleet.markers))
            results["fill_s"] = time.monotonic() - clock
            print(f"{fleet.partitions * INTERVALS:,} commits: {results['fill_s']:.1f} s", flush=True)

            def monitors(phase: str) -> list[MonitorProcess]:
                burrow = BurrowProcess(directory / f"burrow-{phase}", settings, zookeeper=zookeeper.hosts,
                                       kafka_version=kafka_version, binary=binary)
                burrow.name = f"Burrow {current_burrow_version()}"
                return [BurrowpyProcess(directory / f"burrowpy-{phase}", settings), burrow]

            alone: dict[str, Phase] = {}
            for monitor in monitors("alone"):
                try:
                    phase = alone[monitor.name] = start_and_fill(monitor, fleet, args.timeout)
                    phase.extra["cpu_per_refresh_s"] = idle_cpu(monitor, settings, args.refreshes, args.profile)
                    finish(monitor, phase)
                finally:
                    monitor.stop()
                print(f"{monitor.name} alone: every group after {phase.every_group_s:.1f} s, "
                      f"{phase.extra['cpu_per_refresh_s']:.3f} s CPU per refresh, "
                      f"peak RSS {phase.peak_rss_bytes / 2**20:,.0f} MiB", flush=True)

            together: dict[str, Phase] = {}
            pair = monitors("together")
            try:
                for monitor in pair:
                    monitor.start(args.timeout)
                for monitor in pair:
                    together[monitor.name] = Phase()
                    wait_for_each(monitor, list(fleet.groups), lambda group, m=monitor: fleet.complete(m, group),
                                  args.timeout)
                times, cpu, commits_per_s = asyncio.run(live_phase(
                    kafka.bootstrap, fleet, pair, settings, args.live, args.commit_interval, args.connections,
                    args.profile))
                for monitor in pair:
                    finish(monitor, together[monitor.name])
            finally:
                for monitor in pair:
                    monitor.stop()

    load_after = os.getloadavg()
    results["load_after"] = load_after
    results["live_commits_per_s"] = commits_per_s
    results["monitors"] = {}
    for name, phase in alone.items():
        results["monitors"][name] = {
            "alone": {key: value for key, value in vars(phase).items() if key != "extra"} | phase.extra,
            "together": {"peak_rss_bytes": together[name].peak_rss_bytes, "rss_bytes": together[name].rss_bytes,
                         "live_cpu_s": cpu[name], "live_s": args.live,
                         "status": percentiles(times[name]["status"]), "lag": percentiles(times[name]["lag"])},
            "peak_rss_bytes": max(phase.peak_rss_bytes, together[name].peak_rss_bytes)}
    path = args.results or RESULTS / f"monitor_fleet_daemon-{began_at:%Y-%m-%dT%H%M}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")
    print()
    print(table(results))
    print(f"\nload average {load_before[0]:.2f} before, {load_after[0]:.2f} after; results: "
          f"{os.path.relpath(path, ROOT)}")
    return 0


def table(results: dict) -> str:
    """The README's table from a results file."""
    lines = ["| monitor | every group with a full window (all commits read) | sweep of every /status | "
             "peak RSS | CPU per offset refresh | CPU under live ingest | /status p50 / p99 | /lag p50 / p99 |",
             "|---|---|---|---|---|---|---|---|"]
    for name, figures in results["monitors"].items():
        alone, together = figures["alone"], figures["together"]
        lines.append(
            f"| {name} | {alone['every_group_s']:.1f} s ({alone['markers_s']:.1f} s) | {alone['sweep_s']:.1f} s | "
            f"{figures['peak_rss_bytes'] / 2**20:,.0f} MiB | {alone['cpu_per_refresh_s']:.3f} s | "
            f"{together['live_cpu_s'] / together['live_s']:.0%} of a core | "
            f"{together['status']['p50_ms']:.1f} / {together['status']['p99_ms']:.1f} ms | "
            f"{together['lag']['p50_ms']:.1f} / {together['lag']['p99_ms']:.1f} ms |")
    names = list(results["monitors"])
    ours, burrow = (results["monitors"][name] for name in names)
    lines.append("")
    lines.append(f"{names[1]} / burrowpy: peak RSS {burrow['peak_rss_bytes'] / ours['peak_rss_bytes']:.2f}x, "
                 f"CPU per refresh {burrow['alone']['cpu_per_refresh_s'] / ours['alone']['cpu_per_refresh_s']:.2f}x, "
                 f"CPU under live ingest {burrow['together']['live_cpu_s'] / ours['together']['live_cpu_s']:.2f}x, "
                 f"time to every group {burrow['alone']['every_group_s'] / ours['alone']['every_group_s']:.2f}x")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
