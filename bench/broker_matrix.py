"""Our broker against Apache Kafka 4.4, the whole matrix in one run, written to one results file.

    .venv/bin/python bench/broker_matrix.py [--quick] [--seconds 4] [--clients kcat,java] [--name NAME]
    .venv/bin/python bench/broker_report.py bench/results/DATE-NAME.json --readme bench/README.md

Both brokers run side by side for the whole run (``burrowpy broker`` on a fresh data dir; one Kafka node in
KRaft mode), with the same settings: the machine's TCP congestion control, the same socket buffers
(``--socket-buffers``, Kafka's default of 100 KiB unless told), the same deletion of a deleted topic at once
and no initial rebalance delay, and any ``--settings`` for both alike. Nothing is set for one broker only.

For each arrangement (``pinned``: each broker's threads kept to ``--broker-cpu``, the clients and this script
to the other CPUs, the per-core capacity; ``unpinned``: everything on every CPU, what a colocated deployment
sees), each client (kcat, the Java perf tools) and each row of bench/broker_vs_kafka.py's matrix (100 B and
1 KiB x 1 and 6 partitions x 1 and 4 clients x acks 1 and all; ``--quick``: 1 client, 100 B and 1 KiB, 1 and 6
partitions, acks=1):

1. a warm-up run of the row on each broker (``--warm-up-records``, produce then consume, a new topic),
   whose produce rates set the measured run's size: about ``--seconds`` of producing on the slower broker
   (never fewer records than the warm-up's), the same records on both;
2. one measured run on each broker (a new topic, produce then consume).

The broker going first alternates from row to row, for the warm-ups and the measured runs alike. Each run
records the rate and the broker's CPU seconds (utime + stime of the broker process and its descendants, from
``/proc/PID/stat``), from which the report gives CPU seconds per million records. After the throughput rows of
an arrangement, the latency row: ``bench/latency_client.py`` at a fixed rate on a new one-partition topic of each
broker, percentiles over the records after the first ``--latency-drop`` seconds.

Every run is appended to ``bench/results/<date>-<name>.json`` as it is measured (a run stopped half-way keeps
what it measured); ``bench/broker_report.py`` turns the file into the README's tables.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import broker_vs_kafka as bench  # noqa: E402
from broker_vs_kafka import Broker, Row  # noqa: E402
from harness import BrokerProcess  # noqa: E402
from kafka_harness import PEERS_DIR, KafkaServer, unavailable  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
LATENCY_CLIENT = Path(__file__).resolve().parent / "latency_client.py"


def round_count(count: float) -> int:
    """``count`` rounded up to the 1-2-5 series (10,000, 20,000, 50,000, 100,000, ...): kcat's input files are
    made once per size and count, and a few sizes serve every row."""
    step = 10_000
    while True:
        for factor in (1, 2, 5):
            if count <= step * factor:
                return step * factor
        step *= 10


def set_affinity(broker: Broker, cpus: set[int]) -> None:
    """Keep every thread of the broker's processes (and of their children) to ``cpus``; threads started later
    inherit it from the thread that starts them."""
    for pid in bench.each_pid(broker.pid):
        for process in (pid, *bench.descendants(pid)):
            bench.pin_threads(process, cpus)


class Recorder:
    """The results file, rewritten whole after every run (small: a few hundred runs)."""

    def __init__(self, path: Path, header: dict) -> None:
        self.path = path
        self.results = {**header, "runs": [], "latency": [], "finished": False}
        self.started = time.monotonic()
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.results, indent=1) + "\n")
        temporary.replace(self.path)

    def run(self, arrangement: str, broker: Broker, client: str, row: Row, warm_up: bool, phase: str,
            figure: bench.Figure) -> None:
        self.results["runs"].append({
            "arrangement": arrangement, "broker": broker.name, "client": client, "size": row.size,
            "partitions": row.partitions, "clients": row.clients, "acks": row.acks, "phase": phase,
            "warm_up": warm_up, "records": figure.records, "seconds": figure.records / figure.records_per_s,
            "records_per_s": figure.records_per_s, "mb_per_s": figure.mb_per_s, "broker_cpu_s": figure.broker_cpu_s,
            "broker_cpu_pct": figure.broker_cpu, "clients_cpu_pct": figure.clients_cpu,
            "broker_waited_pct": figure.broker_waited, "done_at_s": round(time.monotonic() - self.started, 1)})
        self.save()

    def latency(self, arrangement: str, broker: Broker, found: dict) -> None:
        self.results["latency"].append({"arrangement": arrangement, "broker": broker.name, **found})
        self.save()


class Matrix:
    def __init__(self, args: argparse.Namespace, brokers: tuple[Broker, Broker], clients: list,
                 recorder: Recorder) -> None:
        self.args = args
        self.brokers = brokers
        self.clients = clients
        self.recorder = recorder
        self.topics = 0

    def topic(self, kind: str) -> str:
        self.topics += 1
        return f"matrix-{kind}-{self.topics}"

    def one_run(self, arrangement: str, broker: Broker, client, row: Row, count: int, warm_up: bool
                ) -> bench.Figure:
        idle = self.brokers[1 - self.brokers.index(broker)]
        if warm_up:
            print("  warm-up:", end="")
        produced, consumed = bench.measure_run(broker, client, row, self.topic(client.name), count, idle=idle)
        self.recorder.run(arrangement, broker, client.name, row, warm_up, "produce", produced)
        self.recorder.run(arrangement, broker, client.name, row, warm_up, "consume", consumed)
        return produced

    def row(self, arrangement: str, client, row: Row, first: int) -> None:
        order = (self.brokers[first], self.brokers[1 - first])
        warm = [self.one_run(arrangement, broker, client, row, self.args.warm_up_records[row.size], True)
                for broker in order]
        # never shorter than the warm-up: a Java client's rate over a few seconds is mostly its own JVM warming
        count = max(self.args.warm_up_records[row.size],
                    round_count(self.args.seconds * min(figure.records_per_s for figure in warm)))
        for broker in order:
            self.one_run(arrangement, broker, client, row, count, False)

    def latency(self, arrangement: str, first: int) -> None:
        for broker in (self.brokers[first], self.brokers[1 - first]):
            topic = self.topic("latency")
            bench.create_topic(broker.bootstrap, topic, 1)
            command = [sys.executable, str(LATENCY_CLIENT), broker.bootstrap, topic, "--rate",
                       str(self.args.latency_rate), "--seconds", str(self.args.latency_seconds), "--drop",
                       str(self.args.latency_drop)]
            done = subprocess.run(command, capture_output=True, text=True, timeout=self.args.latency_seconds + 120)
            found = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
            if done.returncode != 0 or "error" in found:
                raise RuntimeError(f"{shlex.join(command)} exited with {done.returncode}: {found or done.stderr}")
            print(f"  {broker.name:>8} latency at {self.args.latency_rate:,}/s: p50 {found['p50_ms']:.2f} ms, "
                  f"p99 {found['p99_ms']:.2f} ms, p999 {found['p999_ms']:.2f} ms", flush=True)
            self.recorder.latency(arrangement, broker, found)
            bench.delete_topic(broker.bootstrap, topic)

    def arrangement(self, name: str, rows: list[Row]) -> None:
        everywhere = os.sched_getaffinity(0)
        if name == "pinned":
            broker_cpus = {self.args.broker_cpu}
            for broker in self.brokers:
                set_affinity(broker, broker_cpus)
            # the clients are this script's children and inherit where it may run
            os.sched_setaffinity(0, everywhere - broker_cpus)
        brokers_on = os.sched_getaffinity(bench.each_pid(self.brokers[0].pid)[0])
        print(f"{name}: the brokers on CPUs {sorted(brokers_on)}, the clients on {sorted(os.sched_getaffinity(0))}",
              flush=True)
        try:
            turn = 0
            for client in self.clients:
                for row in rows:
                    self.row(name, client, row, turn % 2)
                    turn += 1
            self.latency(name, turn % 2)
        finally:
            os.sched_setaffinity(0, everywhere)
            for broker in self.brokers:
                set_affinity(broker, everywhere)


def kafka_version() -> str:
    """The version of the Kafka jars the Java peers (and so the Kafka node) run."""
    jar = next((PEERS_DIR / "lib").glob("kafka-clients-*.jar"), None)
    if jar is None:
        raise RuntimeError(f"no kafka-clients jar under {PEERS_DIR / 'lib'}")
    return jar.stem.removeprefix("kafka-clients-")


def commit() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--short", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip()
    return done.stdout.strip() + (" with uncommitted changes" if dirty else "")


def parse_warm_up(text: str) -> dict[int, int]:
    try:
        small, large = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--warm-up-records wants two counts, N100,N1K, got {text!r}") from None
    if small < 1 or large < 1:
        raise argparse.ArgumentTypeError(f"--warm-up-records wants counts of 1 or more, got {text!r}")
    return {100: small, 1024: large}


def parse_name(text: str) -> str:
    if not text or not all(char.isalnum() or char in "-_." for char in text):
        raise argparse.ArgumentTypeError(f"--name wants letters, digits, '-', '_' or '.', got {text!r}")
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 1-client rows with acks=1 only, kcat only, 1 s per row, short latency run")
    parser.add_argument("--seconds", type=float, default=None,
                        help="about how long each measured produce runs on the slower broker (default 4, quick 1)")
    parser.add_argument("--clients", default=None, help="comma-separated: kcat, java (default both; quick kcat)")
    parser.add_argument("--rows", type=bench.parse_rows, default=None,
                        help="only these rows: SIZE:PARTITIONS:CLIENTS[,...], e.g. 1024:6:4")
    parser.add_argument("--acks", type=bench.parse_acks, default=None, metavar="ACKS[,ACKS]",
                        help="the acks settings of each row (default 1,all; quick 1)")
    parser.add_argument("--arrangements", default="pinned,unpinned",
                        help="comma-separated: pinned (each broker on --broker-cpu, the clients elsewhere), unpinned")
    parser.add_argument("--broker-cpu", type=int, default=0, help="the CPU the brokers are kept to when pinned")
    parser.add_argument("--socket-buffers", type=int, default=102_400,
                        help="socket.send.buffer.bytes and socket.receive.buffer.bytes of both brokers (-1: the "
                             "OS's autotuning)")
    parser.add_argument("--settings", type=bench.parse_settings, default={}, metavar="KEY=VALUE[,...]",
                        help="more broker settings, for both brokers alike")
    parser.add_argument("--latency-rate", type=int, default=bench.LATENCY_RATE, help="records/s of the latency row")
    parser.add_argument("--latency-seconds", type=float, default=None, help="each latency run (default 10, quick 4)")
    parser.add_argument("--latency-drop", type=float, default=None,
                        help="seconds at the start of a latency run left out (default 3, quick 1)")
    parser.add_argument("--warm-up-records", type=parse_warm_up, default=None, metavar="N100,N1K",
                        help="records of each warm-up run, for 100 B and 1 KiB rows (default 200000,50000; "
                             "quick 50000,20000)")
    parser.add_argument("--ours-nodes", type=int, default=1, metavar="N",
                        help="ours is a cluster of N of our brokers on this machine, each topic's partitions spread "
                             "over them (a node of several processes); CPU figures are all of them together")
    parser.add_argument("--name", type=parse_name, default=None, help="the results file's name after the date")
    args = parser.parse_args()
    quick = args.quick
    args.seconds = args.seconds or (1.0 if quick else 4.0)
    args.clients = args.clients or ("kcat" if quick else "kcat,java")
    args.acks = args.acks or (("1",) if quick else ("1", "all"))
    args.latency_seconds = args.latency_seconds or (4.0 if quick else 10.0)
    args.latency_drop = args.latency_drop if args.latency_drop is not None else (1.0 if quick else 3.0)
    args.warm_up_records = args.warm_up_records or ({100: 50_000, 1024: 20_000} if quick else
                                                    {100: 200_000, 1024: 50_000})
    arrangements = args.arrangements.split(",")
    if reason := unavailable():
        parser.error(reason)
    if not set(arrangements) <= {"pinned", "unpinned"} or len(set(arrangements)) != len(arrangements):
        parser.error("--arrangements wants pinned and/or unpinned, each once")
    if "pinned" in arrangements and not ({args.broker_cpu} < os.sched_getaffinity(0)):
        parser.error(f"--broker-cpu {args.broker_cpu}: pinning needs that CPU and another one to run on, this "
                     f"script may run on {sorted(os.sched_getaffinity(0))}")
    if not set(args.clients.split(",")) <= {"kcat", "java"}:
        parser.error(f"--clients wants kcat and/or java, got {args.clients!r}")
    if args.ours_nodes < 1:
        parser.error("--ours-nodes wants 1 or more")
    if not 0 <= args.latency_drop < args.latency_seconds:
        parser.error("--latency-drop must be at least 0 and below --latency-seconds")
    now = datetime.datetime.now(datetime.UTC)
    name = args.name or ("quick" if quick else "matrix")
    path = RESULTS / f"{now:%Y-%m-%d}-{name}.json"
    shared = {"socket.send.buffer.bytes": args.socket_buffers, "socket.receive.buffer.bytes": args.socket_buffers,
              "log.segment.delete.delay.ms": 0, "group.initial.rebalance.delay.ms": 0, **args.settings}
    command = shlex.join(["bench/broker_matrix.py", *sys.argv[1:]])
    print(f"$ {command}\nresults: {path}\nTCP congestion control: {bench.congestion_control()}", flush=True)
    header = {"name": name, "date": f"{now:%Y-%m-%d %H:%M} UTC", "command": command, "commit": commit(),
              "machine": {"cpus": os.cpu_count(), "kernel": platform.release(),
                          "congestion_control": bench.congestion_control(), "loadavg_start": os.getloadavg()[0]},
              "kafka_version": kafka_version(), "shared_settings": shared, "ours_nodes": args.ours_nodes,
              "seconds_per_row": args.seconds}
    recorder = Recorder(path, header)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="broker-matrix-") as tmp, contextlib.ExitStack() as running:
        directory = Path(tmp)
        known = {"kcat": bench.Kcat(directory), "java": bench.JavaTools()}
        clients = [known[name] for name in args.clients.split(",")]
        rows = list(bench.matrix(quick and args.rows is None, args.rows, args.acks))
        if args.ours_nodes > 1:
            ours = bench.ours_cluster(running, directory / "ours", args.ours_nodes, shared, "ours")
        else:
            node = running.enter_context(BrokerProcess(directory / "ours", extra_config=shared))
            ours = Broker("ours", node.bootstrap, node.proc.pid, directory / "ours")
        kafka = running.enter_context(KafkaServer(directory / "kafka", config=shared))
        brokers = (ours, Broker("Kafka", kafka.bootstrap, kafka.process.pid, kafka.directory))
        matrix = Matrix(args, brokers, clients, recorder)
        for arrangement in arrangements:
            matrix.arrangement(arrangement, rows)
    recorder.results["machine"]["loadavg_end"] = os.getloadavg()[0]
    recorder.results["finished"] = True
    recorder.results["wall_seconds"] = round(time.monotonic() - started)
    recorder.save()
    print(f"done in {time.monotonic() - started:.0f} s: {path}\n"
          f"the tables: .venv/bin/python bench/broker_report.py {path.relative_to(ROOT)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
