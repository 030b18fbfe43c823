"""Kafka's Java consumer tool reading the same data from our broker and from Apache Kafka, round after round.

    .venv/bin/python bench/java_consume_rounds.py [--size 100] [--partitions 6] [--records 1000000] [--rounds 3]
                                                  [--producer kcat|java]

Both brokers start side by side with the matrix's settings (``bench/broker_matrix.py``); one topic on each gets
the same records (``--producer``: kcat, whose batches are ~1 MB, or Kafka's ProducerPerformance, whose batches are
its 16 KiB ``batch.size``, as in the matrix's Java rows). Then every thread of both brokers is kept to CPU 0 and
``ConsumerPerformance --print-metrics`` runs on CPU 1, a fresh group each time, alternately on each broker
(the broker going first alternating from round to round). Each run prints the tool's own figures (the group
join, the time from the join to the last record, the rate over that time: the rate the matrix reports), the
broker's CPU seconds over the run, and the consumer's fetch metrics (how many Fetch requests, their mean size
and latency); then the median rate per broker and their ratio. bench/HISTORY.md, "The Java consume rows".
"""

from __future__ import annotations

import argparse
import contextlib
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

import broker_vs_kafka as bench  # noqa: E402
from broker_vs_kafka import Broker, Row  # noqa: E402
from harness import BrokerProcess  # noqa: E402
from kafka_harness import KafkaServer, java_command, unavailable  # noqa: E402
from produce_cost import SETTINGS  # noqa: E402

FETCH_METRICS = ("fetch-total", "fetch-size-avg", "fetch-latency-avg", "records-per-request-avg")
BROKER_CPU, CONSUMER_CPU = 0, 1


def fetch_metric(output: str, name: str) -> float | None:
    """One of the consumer's fetch-manager metrics (client-level, not per topic) from ``--print-metrics``."""
    found = re.search(rf"consumer-fetch-manager-metrics:{re.escape(name)}:\{{client-id=[^,}}]*\}}\s*:\s*(\S+)", output)
    return float(found.group(1)) if found else None


def consume_once(broker: Broker, topic: str, records: int, group: str) -> dict[str, float]:
    command = ["taskset", "-c", str(CONSUMER_CPU),
               *java_command("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", broker.bootstrap,
                             "--topic", topic, "--messages", str(records), "--hide-header", "--timeout", "60000",
                             "--print-metrics", "--group", group, jvm_opts=bench.JAVA_OPTS)]
    cpu_before = bench.cpu_seconds(broker.pid)
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    cpu = bench.cpu_seconds(broker.pid) - cpu_before
    # start.time, end.time, MB, MB/s, records, records/s, rebalance ms, fetch ms, fetch MB/s, fetch records/s
    lines = [line.split(", ") for line in done.stdout.splitlines() if line.count(", ") >= 9]
    if done.returncode != 0 or not lines or int(lines[-1][4]) < records:
        raise RuntimeError(f"ConsumerPerformance did not read {records} records:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    figures = {"join_ms": float(lines[-1][6]), "fetch_ms": float(lines[-1][7]), "rate": float(lines[-1][9]),
               "broker_cpu_s": cpu}
    for name in FETCH_METRICS:
        value = fetch_metric(done.stdout, name)
        if value is not None:
            figures[name] = value
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100, help="bytes a record")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="runs on each broker")
    parser.add_argument("--producer", choices=("kcat", "java"), default="kcat")
    args = parser.parse_args()
    if reason := unavailable():
        parser.error(reason)
    with tempfile.TemporaryDirectory(prefix="java-consume-") as tmp, contextlib.ExitStack() as running:
        directory = Path(tmp)
        node = running.enter_context(BrokerProcess(directory / "ours", extra_config=SETTINGS))
        kafka = running.enter_context(KafkaServer(directory / "kafka", config=SETTINGS))
        brokers = (Broker("ours", node.bootstrap, node.proc.pid, directory / "ours"),
                   Broker("Kafka", kafka.bootstrap, kafka.process.pid, kafka.directory))
        producer = bench.JavaTools() if args.producer == "java" else bench.Kcat(directory)
        row = Row(args.size, args.partitions, 1, "1")
        for broker in brokers:
            bench.create_topic(broker.bootstrap, "rounds", args.partitions)
            producer.produce(broker.bootstrap, "rounds", row, args.records, broker.pid)
            for pid in bench.each_pid(broker.pid):
                bench.pin_threads(pid, {BROKER_CPU})
        rates: dict[str, list[float]] = {broker.name: [] for broker in brokers}
        for round_number in range(args.rounds):
            for broker in brokers if round_number % 2 == 0 else brokers[::-1]:
                figures = consume_once(broker, "rounds", args.records, f"rounds-{round_number}-{time.monotonic_ns()}")
                rates[broker.name].append(figures["rate"])
                print(f"{broker.name:>6} round {round_number}: join {figures['join_ms']:,.0f} ms, fetching "
                      f"{figures['fetch_ms']:,.0f} ms, {figures['rate']:,.0f} records/s, broker CPU "
                      f"{figures['broker_cpu_s']:.2f} s; " + ", ".join(
                          f"{name} {figures[name]:,.1f}" for name in FETCH_METRICS if name in figures), flush=True)
        ours, theirs = (statistics.median(rates[broker.name]) for broker in brokers)
        print(f"median rate: ours {ours:,.0f}/s, Kafka {theirs:,.0f}/s, ratio {ours / theirs:.2f}; per-run ratios "
              f"{min(rates['ours']) / max(rates['Kafka']):.2f}-{max(rates['ours']) / min(rates['Kafka']):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
