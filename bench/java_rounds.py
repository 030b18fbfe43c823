"""Kafka's Java perf tools against our broker and Apache Kafka, round after round, with the clients' own metrics.

    .venv/bin/python bench/java_rounds.py [--phase consume|produce] [--size 100] [--partitions 6]
                                          [--records 1000000] [--rounds 3] [--producer kcat|java] [--acks 1]

Both brokers start side by side with the matrix's settings (``bench/broker_matrix.py``), every thread of both kept
to CPU 0, the tool on CPU 1, alternately on each broker (the broker going first alternating from round to round).

``--phase produce``: each run a fresh topic, ``ProducerPerformance --print-metrics`` (``--throughput -1``, the
given acks, the producer's defaults otherwise: its 16 KiB ``batch.size``), as the matrix's Java produce rows run
it: the tool's rate (which leaves out the JVM's start), the broker's CPU seconds, and how the producer batched
and waited (records a request, request latency, time in its queue, waiting for buffer space).

``--phase consume``: one topic on each broker gets the same records (``--producer``: kcat, whose batches are
~1 MB, or ProducerPerformance, whose batches are 16 KiB, as in the matrix's Java rows); then
``ConsumerPerformance --print-metrics`` reads it, a fresh group each time: the tool's own figures (the group join,
the time from the join to the last record, the rate over that time: the rate the matrix reports), the broker's
CPU seconds, and the consumer's fetch metrics (how many Fetch requests, their mean size and latency).

Both phases end with the median rate per broker and their ratio. bench/HISTORY.md, "The Java rows, round after
round".
"""

from __future__ import annotations

import argparse
import contextlib
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

import broker_vs_kafka as bench  # noqa: E402
from broker_matrix import set_affinity  # noqa: E402
from broker_vs_kafka import Broker, Row  # noqa: E402
from harness import BrokerProcess  # noqa: E402
from kafka_harness import KafkaServer, java_command, unavailable  # noqa: E402
from produce_cost import SETTINGS  # noqa: E402

FETCH_METRICS: tuple[str, ...] = ("fetch-total", "fetch-size-avg", "fetch-latency-avg", "records-per-request-avg")
PRODUCE_METRICS: tuple[str, ...] = ("request-total", "records-per-request-avg", "request-latency-avg", "record-queue-time-avg",
                   "bufferpool-wait-ratio")
BROKER_CPU, CONSUMER_CPU = 0, 1


def client_metric(output: str, group: str, name: str) -> float | None:
    """One of a client's metrics of ``group`` (client-level, not per topic or node) from ``--print-metrics``."""
    found = re.search(rf"^{group}:{re.escape(name)}:\{{client-id=[^,}}]*\}}\s*:\s*(\S+)$", output, re.MULTILINE)
    return float(found.group(1)) if found else None


def run_tool(command: list[str], broker: Broker) -> tuple[str, float]:
    """The tool's output and the broker's CPU seconds while it ran (the tool on CONSUMER_CPU)."""
    cpu_before = bench.cpu_seconds(broker.pid)
    done = subprocess.run(["taskset", "-c", str(CONSUMER_CPU), *command], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"{command[-1]} exited with {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout, bench.cpu_seconds(broker.pid) - cpu_before


def produce_once(broker: Broker, topic: str, args: argparse.Namespace) -> dict[str, float]:
    output, cpu = run_tool(java_command("org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                                        "--num-records", str(args.records), "--record-size", str(args.size),
                                        "--throughput", "-1", "--print-metrics", "--producer-props",
                                        f"bootstrap.servers={broker.bootstrap}", f"acks={args.acks}",
                                        jvm_opts=bench.JAVA_OPTS), broker)
    summaries = bench.PRODUCED.findall(output)
    if not summaries:
        raise RuntimeError(f"no summary line from ProducerPerformance:\n{output[-2000:]}")
    figures = {"rate": float(summaries[-1][1]), "broker_cpu_s": cpu}
    for name in PRODUCE_METRICS:
        value = client_metric(output, "producer-metrics", name)
        if value is not None:
            figures[name] = value
    return figures


def consume_once(broker: Broker, topic: str, records: int, group: str) -> dict[str, float]:
    output, cpu = run_tool(java_command("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server",
                                        broker.bootstrap, "--topic", topic, "--messages", str(records),
                                        "--hide-header", "--timeout", "60000", "--print-metrics", "--group", group,
                                        jvm_opts=bench.JAVA_OPTS), broker)
    # start.time, end.time, MB, MB/s, records, records/s, rebalance ms, fetch ms, fetch MB/s, fetch records/s
    lines = [line.split(", ") for line in output.splitlines() if line.count(", ") >= 9]
    if not lines or int(lines[-1][4]) < records:
        raise RuntimeError(f"ConsumerPerformance did not read {records} records:\n{output[-2000:]}")
    figures = {"join_ms": float(lines[-1][6]), "fetch_ms": float(lines[-1][7]), "rate": float(lines[-1][9]),
               "broker_cpu_s": cpu}
    for name in FETCH_METRICS:
        value = client_metric(output, "consumer-fetch-manager-metrics", name)
        if value is not None:
            figures[name] = value
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100, help="bytes a record")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="runs on each broker")
    parser.add_argument("--producer", choices=("kcat", "java"), default="kcat", help="what fills the topic read")
    parser.add_argument("--phase", choices=("consume", "produce"), default="consume")
    parser.add_argument("--acks", default="1", help="the produce phase's acks")
    args = parser.parse_args()
    if reason := unavailable():
        parser.error(reason)
    with tempfile.TemporaryDirectory(prefix="java-rounds-") as tmp, contextlib.ExitStack() as running:
        directory = Path(tmp)
        node = running.enter_context(BrokerProcess(directory / "ours", extra_config=SETTINGS))
        kafka = running.enter_context(KafkaServer(directory / "kafka", config=SETTINGS))
        brokers = (Broker("ours", node.bootstrap, node.proc.pid, directory / "ours"),
                   Broker("Kafka", kafka.bootstrap, kafka.process.pid, kafka.directory))
        if args.phase == "consume":
            producer = bench.JavaTools() if args.producer == "java" else bench.Kcat(directory)
            for broker in brokers:
                bench.create_topic(broker.bootstrap, "rounds", args.partitions)
                producer.produce(broker.bootstrap, "rounds", Row(args.size, args.partitions, 1, "1"), args.records,
                                 broker.pid)
        for broker in brokers:
            set_affinity(broker, {BROKER_CPU})
        rates: dict[str, list[float]] = {broker.name: [] for broker in brokers}
        for round_number in range(args.rounds):
            for broker in brokers if round_number % 2 == 0 else brokers[::-1]:
                if args.phase == "consume":
                    figures = consume_once(broker, "rounds", args.records, f"rounds-{round_number}")
                    said = (f"join {figures['join_ms']:,.0f} ms, fetching {figures['fetch_ms']:,.0f} ms, ")
                    metrics = FETCH_METRICS
                else:
                    topic = f"rounds-{round_number}"
                    bench.create_topic(broker.bootstrap, topic, args.partitions)
                    figures = produce_once(broker, topic, args)
                    bench.delete_topic(broker.bootstrap, topic)
                    said, metrics = "", PRODUCE_METRICS
                rates[broker.name].append(figures["rate"])
                print(f"{broker.name:>6} round {round_number}: {said}{figures['rate']:,.0f} records/s, broker CPU "
                      f"{figures['broker_cpu_s']:.2f} s; " + ", ".join(
                          f"{name} {figures[name]:,.2f}" for name in metrics if name in figures), flush=True)
        ours, theirs = (statistics.median(rates[broker.name]) for broker in brokers)
        print(f"median rate: ours {ours:,.0f}/s, Kafka {theirs:,.0f}/s, ratio {ours / theirs:.2f}; per-run ratios "
              f"{min(rates['ours']) / max(rates['Kafka']):.2f}-{max(rates['ours']) / min(rates['Kafka']):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
