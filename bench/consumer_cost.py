"""What four kcat consumers cost the machine when they read from our broker and from Kafka: the broker's CPU,
the consumers' own (user and kernel apart), and where the whole machine's time went.

    .venv/bin/python bench/consumer_cost.py [--records 1500000] [--size 1024] [--producers 4] [--partitions 6]
                                            [--consumers 4] [--warm 2] [--runs 4] [--ours KEY=VALUE[,...]]

Both brokers run at once (``burrowpy broker`` and a single Apache Kafka 4.4 node from the test peers), each
with one topic of ``--partitions`` partitions that ``--producers`` kcat producers (acks=1) filled with
``--records`` records of ``--size`` bytes (``bench/broker_vs_kafka.py``'s producers); how many record batches
the producers made against each broker is printed, counted in the brokers' log files (the same format on
both), since a consumer's work per record depends on it. Then the consumers read the whole topic, on one broker and
then on the other, ``--warm`` times unmeasured (Kafka's JIT compiles its fetch path in the first runs) and
``--runs`` times measured, which broker goes first changing from pair to pair. The data stays in the page
cache throughout, so every run reads the same bytes the same way. Printed per run: the wall time until the
last consumer was done, the broker's CPU, the consumers' user and system CPU and page faults (from
``wait4``), the machine's CPU split from ``/proc/stat`` (user, system, softirq, idle; percent of one core)
and the bytes over loopback; at the end the median run of each broker.

``--pin-consumers CPUS`` runs each consumer on those CPUs only (``taskset -c``): a kcat consumer's two busy
threads (librdkafka's broker thread decoding answers, kcat's main thread taking the records) then take turns
on one core instead of running side by side on two.

``--ours KEY=VALUE[,...]`` starts our broker with those settings (e.g. ``socket.send.buffer.bytes=102400``,
Kafka's default send buffer), ``--kafka KEY=VALUE[,...]`` starts Kafka with those (e.g.
``socket.send.buffer.bytes=-1``, the kernel's sizing, ours by default); ``--ours-tree DIR`` runs our broker from the code of another checkout (a change
tried: ``git worktree add DIR`` and apply it there).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from broker_vs_kafka import (  # noqa: E402
    Kcat,
    Row,
    checkout,
    congestion_control,
    create_topic,
    describe_checkout,
    parse_settings,
    pinned_to,
)
from harness import BrokerProcess  # noqa: E402
from kafka_harness import KafkaServer, unavailable  # noqa: E402

from broker.protocol.records import iter_batches  # noqa: E402

TOPIC = "consumer-cost"
CPU_FIELDS = {"user": 0, "system": 2, "softirq": 6, "idle": 3}  # columns of /proc/stat's "cpu" line


def machine_ticks() -> list[int]:
    return [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]


def loopback_bytes() -> int:
    for line in Path("/proc/net/dev").read_text().splitlines():
        name, _, counters = line.partition(":")
        if name.strip() == "lo":
            return int(counters.split()[0])
    raise RuntimeError("no loopback interface in /proc/net/dev")


@dataclass
class Run:
    wall: float
    broker_cpu: float
    consumers_user: float
    consumers_system: float
    consumers_faults: int
    machine: dict[str, float]  # percent of one core over the run, per CPU_FIELDS
    loopback_mb: float

    def line(self) -> str:
        split = ", ".join(f"{name} {share:.0f}" for name, share in self.machine.items())
        return (f"{self.wall:5.2f} s; broker CPU {self.broker_cpu:.2f} s; consumers user {self.consumers_user:.2f} s, "
                f"system {self.consumers_system:.2f} s, {self.consumers_faults:,} page faults; machine % of a "
                f"core: {split}; loopback {self.loopback_mb:,.0f} MB")


def count_batches(log_dir: Path, partitions: int) -> tuple[int, int]:
    """Record batches and records in the topic's segment files."""
    batches = records = 0
    for partition in range(partitions):
        for segment in (log_dir / f"{TOPIC}-{partition}").glob("*.log"):
            for _, header in iter_batches(segment.read_bytes()):
                batches += 1
                records += header.records_count
    return batches, records


def consume(bootstrap: str, pid: int, consumers: int, records: int, wrapper: list[str]) -> Run:
    """``consumers`` kcat consumers each read the topic from the beginning to its end, as
    ``bench/broker_vs_kafka.py``'s consumers do, with the machine's CPU and loopback counted around them."""
    ticks, sent_before = machine_ticks(), loopback_bytes()
    run = Kcat.read_all(bootstrap, TOPIC, consumers, records, pid, wrapper)
    spent = [after - before for after, before in zip(machine_ticks(), ticks, strict=True)]
    cores = os.cpu_count() or 1
    machine = {name: 100 * cores * spent[column] / sum(spent) for name, column in CPU_FIELDS.items()}
    return Run(run.wall, run.broker_cpu, run.clients_user, run.clients_system, run.faults, machine,
               (loopback_bytes() - sent_before) / 1e6)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_500_000, help="records written, then read by each consumer")
    parser.add_argument("--size", type=int, default=1024, help="bytes per record")
    parser.add_argument("--producers", type=int, default=4, help="kcat producers that fill the topic")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--warm", type=int, default=2, help="unmeasured consume runs on each broker first")
    parser.add_argument("--runs", type=int, default=4, help="measured consume runs on each broker")
    parser.add_argument("--ours", type=parse_settings, default={}, metavar="KEY=VALUE[,...]",
                        help="settings for our broker")
    parser.add_argument("--kafka", type=parse_settings, default={}, metavar="KEY=VALUE[,...]",
                        help="settings for Kafka (server.properties keys)")
    parser.add_argument("--ours-tree", type=checkout, default=None, metavar="DIR",
                        help="our broker runs the code of the checkout DIR (a change tried, as in bench/tried/)")
    parser.add_argument("--pin-consumers", default=None, metavar="CPUS",
                        help="run each consumer on these CPUs only (taskset -c CPUS, e.g. 1)")
    args = parser.parse_args()
    wrapper = pinned_to(args.pin_consumers)
    if reason := unavailable():
        parser.error(reason)
    print(f"$ {' '.join([os.path.relpath(sys.executable), *sys.argv])}", flush=True)
    print(f"TCP congestion control: {congestion_control()}")
    if args.ours_tree:
        print(f"ours: {describe_checkout(args.ours_tree)}")
    with tempfile.TemporaryDirectory(prefix="consumer-cost-") as tmp:
        directory = Path(tmp)
        with BrokerProcess(directory / "ours", extra_config=args.ours,
                           env={"PYTHONPATH": str(args.ours_tree)} if args.ours_tree else None) as ours, \
                KafkaServer(directory / "kafka", config=args.kafka) as kafka:
            brokers = {"ours": (ours.bootstrap, ours.proc.pid), "Kafka": (kafka.bootstrap, kafka.process.pid)}
            log_dirs = {"ours": directory / "ours" / "logs", "Kafka": kafka.log_dir}
            for name, (bootstrap, pid) in brokers.items():
                create_topic(bootstrap, TOPIC, args.partitions)
                Kcat(directory).produce(bootstrap, TOPIC, Row(args.size, args.partitions, args.producers, "1"),
                                        args.records, pid)
                batches, records = count_batches(log_dirs[name], args.partitions)
                print(f"  {name:>5}: {batches:,} batches in the log, {records / batches:,.1f} records each")
            os.sync()  # the data written out before any run, so that no run shares the machine with writeback
            runs: dict[str, list[Run]] = {name: [] for name in brokers}
            for number in range(args.warm + args.runs):
                for name in (("ours", "Kafka") if number % 2 == 0 else ("Kafka", "ours")):
                    run = consume(*brokers[name], args.consumers, args.records, wrapper)
                    measured = number >= args.warm
                    print(f"  {name:>5} {'run' if measured else 'warm-up'} {number + 1}: {run.line()}", flush=True)
                    if measured:
                        runs[name].append(run)
    print("median runs:")
    for name, found in runs.items():
        print(f"  {name:>5}: {sorted(found, key=lambda run: run.wall)[(len(found) - 1) // 2].line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
