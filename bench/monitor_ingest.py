"""Monitor ingest: how fast burrowpy and Burrow (the current one and Debian's 1.2.1) take in a full
``__consumer_offsets``.

    .venv/bin/python bench/monitor_ingest.py [--commits 1000000] [--groups 100] [--partitions 100]
                                             [--connections 4] [--burrow current,1.2.1|none] [--kafka]

One run, one broker (``burrowpy broker`` on a fresh data dir, or with ``--kafka`` a real Apache Kafka 4.4
node from the test peers), one data set:

1. Fill. A topic ``ingest`` with ``--partitions`` partitions gets ``rounds`` records per partition, then
   ``--groups`` groups each commit every partition ``rounds`` times (offsets 1..rounds), one OffsetCommit
   request per group and round carrying all partitions, over ``--connections`` connections through
   broker/client.py. ``commits = groups x partitions x rounds``. Then one marker group per
   ``__consumer_offsets`` partition commits once, after everything else was acknowledged.
2. Ingest, once per monitor, one monitor at a time (the others are not running): start the monitor
   (``burrowpy serve``, the current Burrow built by ``make install``, Debian's ``/usr/bin/Burrow`` 1.2.1;
   generated configs with the same settings) and time from the
   process start until its HTTP API shows every commit: first every marker group (each
   ``__consumer_offsets`` partition is read in order, so a visible marker means its partition was read to
   the end), then every group's ``/status`` with a full window and no lag on every partition, which only
   its last commits give. Commits/s = commits / that time. Memory: the process's resident set (VmRSS) at
   that moment and its peak (VmHWM). The HTTP questions are asked one at a time, ten a second at most
   while waiting, so that measuring adds little work.

Every monitor reads the whole topic from its oldest offset, as they do on every start. The time includes
each process's start-up (reported separately: until its HTTP API answers).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The helpers that start a broker, a ZooKeeper and the two monitors alike are the integration tests' own.
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from burrow_support import (  # noqa: E402
    BURROW_BINARY,
    CURRENT_BURROW_BINARY,
    BurrowProcess,
    BurrowpyProcess,
    MonitorProcess,
    MonitorSettings,
    current_burrow_version,
)
from harness import BrokerProcess  # noqa: E402
from kafka_harness import KafkaServer  # noqa: E402
from zk import ZooKeeperServer  # noqa: E402

from broker.client import KafkaConnection  # noqa: E402
from broker.groups.hashing import offsets_partition_for  # noqa: E402
from broker.protocol.api import ApiKey  # noqa: E402

TOPIC = "ingest"
MARKER_TOPIC = "ingest-done"
OFFSETS_PARTITIONS = 50  # the broker's offsets.topic.num.partitions default
POLL_INTERVAL = 0.1
INTERVALS = 10  # the monitors' default window
COORDINATOR_NOT_READY = {14, 15, 16}
# seconds a new Apache Kafka may take to create and load its offsets topic (over a minute on a loaded machine)
COORDINATOR_TIMEOUT = 300
# Burrow binaries by --burrow name: (binary, Sarama's kafka-version for our broker, for Apache Kafka 4.4)
BURROWS = {"current": (CURRENT_BURROW_BINARY, "4.0.0", "4.0.0"), "1.2.1": (BURROW_BINARY, "0.10.0", None)}


@dataclass
class IngestResult:
    name: str
    startup_s: float
    elapsed_s: float
    rss_bytes: int
    peak_rss_bytes: int
    cpu_s: float  # the monitor's user + system CPU time
    broker_cpu_s: float  # the broker's, over the same span (it serves the monitor's fetches)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far, from /proc/PID/stat."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()  # the command name may contain spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def marker_groups(partitions: int) -> list[str]:
    """One group name per ``__consumer_offsets`` partition (Kafka's placement: Java hash of the name)."""
    chosen: dict[int, str] = {}
    for number in itertools.count():
        name = f"ingest-done-{number}"
        chosen.setdefault(offsets_partition_for(name, partitions), name)
        if len(chosen) == partitions:
            return [chosen[p] for p in range(partitions)]
    raise AssertionError("unreachable: itertools.count() does not end")


def prepare_topics(bootstrap: str, topics: dict[str, tuple[int, int]], batch: int = 100) -> None:
    """Create ``topics`` (name: partitions, records per partition) and the marker topic, ``batch`` topics per
    CreateTopics request, then write the records to every partition (and one to the marker topic)."""
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = [NewTopic(name, partitions, 1) for name, (partitions, _) in topics.items()] + [NewTopic(MARKER_TOPIC, 1, 1)]
    for start in range(0, len(wanted), batch):
        for future in admin.create_topics(wanted[start:start + batch], operation_timeout=60).values():
            future.result(120)
    # Every broker must know the partitions before records go to them (a cluster's brokers learn of new ones one
    # after the other, and librdkafka fails or holds a record for a partition its metadata lacks).
    written = [name for name, (_, records) in topics.items() if records] + [MARKER_TOPIC]
    deadline = time.monotonic() + 300
    for address in bootstrap.split(","):
        node = AdminClient({"bootstrap.servers": address})
        for name in written:
            while True:
                found = node.list_topics(name, timeout=30).topics.get(name)
                if found is not None and found.error is None and len(found.partitions) == (
                        topics[name][0] if name in topics else 1) and all(
                        partition.leader >= 0 for partition in found.partitions.values()):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{address} does not know every partition of {name} after 300 s")
                time.sleep(0.5)
    # librdkafka queues every record before the first is acknowledged: its queue must hold them all. Idempotence:
    # a retry after a timed-out request (a loaded Kafka creating partitions is slow) must not write a record twice.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True,
                         "queue.buffering.max.messages": max(100_000, sum(p * r for p, r in topics.values()) + 1),
                         "message.timeout.ms": 120_000})
    # A record that fails all the same (flush() does not say) is written again, until every one is acknowledged.
    failed: list[tuple[str, int, bytes]] = []

    def delivered(error: object, message: object) -> None:
        if error is not None:
            failed.append((message.topic(), message.partition(), message.value()))  # type: ignore[attr-defined]

    wanted_records = [(name, partition, b"record %d" % number) for name, (partitions, records) in topics.items()
                      for partition in range(partitions) for number in range(records)]
    wanted_records.append((MARKER_TOPIC, 0, b"done"))
    deadline = time.monotonic() + 600
    while wanted_records:
        for count, (name, partition, value) in enumerate(wanted_records):
            try:
                producer.produce(name, value=value, partition=partition, on_delivery=delivered)
            except KafkaException:  # the producer's own metadata lacks the topic or partition yet
                failed.append((name, partition, value))
            if count % 10_000 == 0:
                producer.poll(0)
        if producer.flush(max(1.0, deadline - time.monotonic())) != 0:
            raise RuntimeError("records still unacknowledged after 600 s")
        wanted_records, failed = sorted(failed, key=lambda record: (record[0], record[1])), []
        if wanted_records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(wanted_records)} records could not be written in 600 s")
            time.sleep(1)


async def commit(connection: KafkaConnection, group: str, topic: str, offsets: dict[int, int]) -> None:
    body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "topics": [{"name": topic, "partitions": [{"partition_index": p, "committed_offset": o,
                                                       "committed_metadata": ""} for p, o in offsets.items()]}]}
    deadline = time.monotonic() + COORDINATOR_TIMEOUT
    while True:
        answer = await connection.request(ApiKey.OFFSET_COMMIT, body)
        errors = {p["error_code"] for t in answer["topics"] for p in t["partitions"]}
        if errors == {0}:
            return
        # A new Apache Kafka creates and loads its offsets topic on the first commits: until then they
        # answer COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR.
        if not errors <= COORDINATOR_NOT_READY or time.monotonic() > deadline:
            raise RuntimeError(f"OffsetCommit for {group} answered error codes {sorted(errors)}")
        await asyncio.sleep(0.1)


async def coordinators_ready(connection: KafkaConnection, groups: list[str]) -> dict[str, str]:
    """Ask for the groups' coordinators until every one is there (Apache Kafka creates its offsets topic on
    the first FindCoordinator; a commit alone would get NOT_COORDINATOR until then); return each group's
    coordinator as host:port."""
    deadline = time.monotonic() + COORDINATOR_TIMEOUT
    while True:
        answer = await connection.request(ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": groups},
                                          version=4)
        errors = {c["error_code"] for c in answer["coordinators"]}
        if errors == {0}:
            return {c["key"]: f"{c['host']}:{c['port']}" for c in answer["coordinators"]}
        if time.monotonic() > deadline:
            raise RuntimeError(f"FindCoordinator still answers error codes {sorted(errors)}")
        await asyncio.sleep(0.2)


async def group_coordinators(bootstrap: str, groups: list[str]) -> dict[str, str]:
    """Each group's coordinator (host:port), asked of the first broker of ``bootstrap``."""
    async with await KafkaConnection.connect(bootstrap.split(",")[0], client_id="ingest-bench") as connection:
        return await coordinators_ready(connection, groups)


class CoordinatorConnections:
    """One committer's connections, one to each coordinator its groups have (a cluster spreads the groups over
    its brokers), opened on first use."""

    def __init__(self, coordinators: dict[str, str], client_id: str) -> None:
        self.coordinators = coordinators
        self.client_id = client_id
        self.open: dict[str, KafkaConnection] = {}

    async def __aenter__(self) -> CoordinatorConnections:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for connection in self.open.values():
            await connection.close()

    async def commit(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        address = self.coordinators[group]
        if address not in self.open:
            self.open[address] = await KafkaConnection.connect(address, client_id=self.client_id)
        await commit(self.open[address], group, topic, offsets)


async def fill(bootstrap: str, groups: dict[str, tuple[str, int, int]], rounds: int, connections: int,
               markers: list[str]) -> None:
    """Every group (name: its topic, its partitions, its last offset) commits every partition of its topic
    ``rounds`` times, round r (1 to ``rounds``) at offset last - rounds + r, never below 0; then each marker
    group commits once. Each commit goes to the group's coordinator."""
    coordinators = await group_coordinators(bootstrap, [*groups, *markers])

    async def committer(own_groups: list[str]) -> None:
        async with CoordinatorConnections(coordinators, "ingest-bench") as committing:
            for round_number in range(1, rounds + 1):
                for group in own_groups:
                    topic, partitions, last = groups[group]
                    offset = max(0, last - rounds + round_number)
                    await committing.commit(group, topic, dict.fromkeys(range(partitions), offset))

    names = list(groups)
    await asyncio.gather(*(committer(names[i::connections]) for i in range(connections)))
    async with CoordinatorConnections(coordinators, "ingest-bench") as committing:
        for group in markers:
            await committing.commit(group, MARKER_TOPIC, {0: 1})


def marker_seen(monitor: MonitorProcess, group: str) -> bool:
    """The marker's single commit (offset 1) is in the monitor's storage (consumer detail endpoint)."""
    status, body = monitor.get(f"/v3/kafka/local/consumer/{group}")
    entries = body.get("topics", {}).get(MARKER_TOPIC, []) if status == 200 else []
    return any(o and o["offset"] == 1 for entry in entries for o in entry["offsets"])


def group_complete(monitor: MonitorProcess, group: str, partitions: int, lag: int = 0) -> bool:
    """Every partition of the group's topic has its last commit: with ``rounds`` records per partition and
    ``rounds`` >= intervals, that is a full window on every partition (complete 1) and the group's total lag
    what its last commits leave (none for a group that commits the log's end).
    ``/status`` is asked rather than the consumer detail: its answer is small, so the question costs the
    monitor little."""
    status, body = monitor.get(f"/v3/kafka/local/consumer/{group}/status")
    if status != 200:
        return False
    answer = body["status"]
    return answer["partition_count"] == partitions and answer["complete"] == 1 and answer["totallag"] == lag


def wait_for_each(monitor: MonitorProcess, items: list[str], done: Callable[[str], bool], timeout: float) -> None:
    """Check the items in order, each until it is done: one question at a time, so that polling adds
    little work to the monitor being measured (a done item stays done)."""
    deadline = time.monotonic() + timeout
    for item in items:
        while not done(item):
            if monitor.process is None or monitor.process.poll() is not None:
                raise RuntimeError(f"{monitor.name} exited:\n{monitor.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{monitor.name}: {item} still incomplete after {timeout:.0f} s")
            time.sleep(POLL_INTERVAL)


def measure(monitor: MonitorProcess, broker_pid: int, groups: list[str], markers: list[str], partitions: int,
            timeout: float) -> IngestResult:
    broker_cpu = cpu_seconds(broker_pid)
    started = time.monotonic()
    monitor.start()
    try:
        answering = time.monotonic()
        wait_for_each(monitor, markers, lambda group: marker_seen(monitor, group), timeout)
        wait_for_each(monitor, groups, lambda group: group_complete(monitor, group, partitions), timeout)
        done = time.monotonic()
        return IngestResult(monitor.name, answering - started, done - started, monitor.rss_bytes(),
                            monitor.peak_rss_bytes(), cpu_seconds(monitor.pid), cpu_seconds(broker_pid) - broker_cpu)
    finally:
        monitor.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=1_000_000, help="commits to fill (rounded to whole rounds)")
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=100, help="partitions of the committed topic")
    parser.add_argument("--connections", type=int, default=4, help="connections filling __consumer_offsets")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a monitor may take")
    parser.add_argument("--burrow", default="current,1.2.1",
                        help="Burrows to measure after burrowpy, comma-separated (current, 1.2.1), or none")
    parser.add_argument("--kafka", action="store_true",
                        help="fill a real Apache Kafka 4.4 instead of burrowpy's broker (Burrow 1.2.1 cannot read it)")
    args = parser.parse_args()
    burrows = [] if args.burrow == "none" else args.burrow.split(",")
    if unknown := set(burrows) - set(BURROWS):
        parser.error(f"--burrow: unknown {sorted(unknown)}; choose from {sorted(BURROWS)} or none")
    if "current" in burrows and current_burrow_version() is None:
        parser.error(f"--burrow current: {CURRENT_BURROW_BINARY} is missing (make install builds it)")
    if args.kafka and "1.2.1" in burrows:
        parser.error("--kafka: Burrow 1.2.1 cannot read Apache Kafka 4.4; use --burrow current")
    rounds = args.commits // (args.groups * args.partitions)
    if rounds < INTERVALS:
        parser.error(f"--commits must give every partition at least {INTERVALS} commits (groups x partitions x "
                     f"{INTERVALS} = {args.groups * args.partitions * INTERVALS})")
    commits = args.groups * args.partitions * rounds
    groups = [f"ingest-group-{n}" for n in range(args.groups)]
    markers = marker_groups(OFFSETS_PARTITIONS)

    print(f"$ {shlex.join([os.path.relpath(sys.executable), *sys.argv])}")
    print(f"{commits:,} commits = {args.groups} groups x {args.partitions} partitions x {rounds} rounds "
          f"(+{len(markers)} marker commits)")
    with tempfile.TemporaryDirectory(prefix="monitor-ingest-") as tmp:
        directory = Path(tmp)
        if args.kafka:
            kafka = KafkaServer(directory / "kafka", config={"offsets.topic.num.partitions": OFFSETS_PARTITIONS})
            server, broker_name = kafka, "Apache Kafka 4.4"
        else:
            server, broker_name = BrokerProcess(directory / "data"), "our broker"
        with server:
            prepare_topics(server.bootstrap, {TOPIC: (args.partitions, rounds)})
            began = time.monotonic()
            asyncio.run(fill(server.bootstrap, {group: (TOPIC, args.partitions, rounds) for group in groups}, rounds,
                             args.connections, markers))
            filled = time.monotonic() - began
            print(f"fill through {broker_name}: {filled:.1f} s, {commits / filled:,.0f} commits/s "
                  f"({args.connections} connections, {args.partitions} partitions per OffsetCommit)")
            # A status is cached for expire-cache seconds; 1 s keeps a re-asked group's answer fresh.
            settings = MonitorSettings(server.bootstrap, intervals=INTERVALS, expire_cache=1)
            broker_pid = kafka.process.pid if args.kafka else server.proc.pid
            results = [measure(BurrowpyProcess(directory / "burrowpy", settings), broker_pid, groups, markers,
                               args.partitions, args.timeout)]
            if burrows:
                with ZooKeeperServer(directory / "zookeeper") as zookeeper:
                    for name in burrows:
                        binary, ours_version, kafkas_version = BURROWS[name]
                        burrow = BurrowProcess(directory / f"burrow-{name}", settings, zookeeper=zookeeper.hosts,
                                               kafka_version=kafkas_version if args.kafka else ours_version,
                                               binary=binary)
                        burrow.name = f"Burrow {current_burrow_version() if name == 'current' else name}"
                        results.append(measure(burrow, broker_pid, groups, markers, args.partitions,
                                               args.timeout))

    print()
    print("| monitor | start-up until HTTP answers | time to take in every commit | commits/s | monitor CPU "
          "| broker CPU | RSS at the end | peak RSS |")
    print("|---|---|---|---|---|---|---|---|")
    for result in results:
        print(f"| {result.name} | {result.startup_s:.1f} s | {result.elapsed_s:.1f} s | "
              f"{commits / result.elapsed_s:,.0f} | {result.cpu_s:.1f} s | {result.broker_cpu_s:.1f} s | "
              f"{result.rss_bytes / 2**20:,.0f} MiB | {result.peak_rss_bytes / 2**20:,.0f} MiB |")
    ours = results[0]
    for burrow in results[1:]:
        print(f"\n{burrow.name} / burrowpy (above 1: burrowpy is ahead): time {burrow.elapsed_s / ours.elapsed_s:.2f}x, "
              f"CPU {burrow.cpu_s / ours.cpu_s:.2f}x, peak RSS {burrow.peak_rss_bytes / ours.peak_rss_bytes:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
