"""Broker cost curves: our broker and Apache Kafka 4.4 as partitions and connections grow.

    .venv/bin/python bench/broker_scaling.py [--partitions 1,10,100,1000] [--connections 1,10,100,500]
                                             [--seconds 5] [--plot-dir bench]

One broker at a time (``burrowpy broker`` on a fresh data dir, then a single Apache Kafka 4.4 node in KRaft
mode from the test peers), each measured with the same client: this script's own asyncio connections on
our codec (broker/client.py) sending prebuilt v2 record batches, so both brokers get byte-identical requests.

- partitions: a topic with P partitions; 4 connections each send Produce requests (acks=1) carrying one
  100-record batch (100 B values) for each of up to 16 partitions, going round all P partitions, for
  ``--seconds``; then one connection reads every partition back from the beginning with Fetch.
- connections: C connections to a 10-partition topic, each sending one 10-record batch per Produce
  request and waiting for the answer, all at once for ``--seconds``: requests/s, records/s and the p99
  request latency across all connections.

Every point prints the broker's CPU (percent of one core) and its resident set after the step (VmRSS), and
this client's CPU: a Python client on the same 2 cores is the bottleneck long before a broker is, so the
rates are what this client gets, while CPU and memory show what each broker pays per partition and per
connection. With ``--plot-dir``, two SVG charts (log-log) are written there.
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
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT))

from harness import BrokerProcess  # noqa: E402
from kafka_harness import KafkaServer, unavailable  # noqa: E402
from svgplot import log_log_chart  # noqa: E402

from broker.client import KafkaConnection  # noqa: E402
from broker.protocol.api import ApiKey  # noqa: E402
from broker.protocol.records import Record, build_batch, iter_batches  # noqa: E402

VALUE = b"x" * 100
PARTITIONS_PER_REQUEST = 16
PRODUCE_CONNECTIONS = 4
NOT_LEADER_OR_FOLLOWER = 6


@dataclass
class Point:
    broker: str
    size: int  # partitions or connections
    records_per_s: float
    requests_per_s: float
    p99_ms: float
    consume_records_per_s: float
    broker_cpu: float  # percent of one core while producing
    client_cpu: float
    rss_mib: float


def cpu_seconds(pid: int) -> float:
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def batch(records: int) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([Record(offset=n, timestamp=now, key=None, value=VALUE, headers=[]) for n in range(records)])


async def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    async with await KafkaConnection.connect(bootstrap, client_id="scaling-bench") as connection:
        answer = await connection.request(ApiKey.CREATE_TOPICS, {
            "topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout_ms": 60_000, "validate_only": False})
        errors = {t["error_code"] for t in answer["topics"]}
        if errors != {0}:
            raise RuntimeError(f"CreateTopics {topic}: error codes {sorted(errors)}")
        # Leaders take a moment on Kafka: wait until Metadata shows every partition led.
        deadline = time.monotonic() + 60
        while True:
            metadata = await connection.request(ApiKey.METADATA, {"topics": [{"name": topic}],
                                                                  "allow_auto_topic_creation": False})
            parts = metadata["topics"][0]["partitions"]
            if len(parts) == partitions and all(p["leader_id"] >= 0 and p["error_code"] == 0 for p in parts):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: partitions without a leader after 60 s")
            await asyncio.sleep(0.2)


async def warm_up(bootstrap: str, topic: str, partitions: int) -> int:
    """One record to every partition, sent again until each is acknowledged (a new Kafka partition can
    refuse writes for a moment after Metadata names its leader), so timing starts on a ready topic.
    Returns the records written."""
    payload = batch(1)
    waiting = set(range(partitions))
    deadline = time.monotonic() + 60
    async with await KafkaConnection.connect(bootstrap, client_id="scaling-bench") as connection:
        while waiting:
            answer = await connection.request(ApiKey.PRODUCE, {
                "transactional_id": None, "acks": 1, "timeout_ms": 30_000, "topic_data": [
                    {"name": topic, "partition_data": [{"index": p, "records": payload} for p in sorted(waiting)]}]})
            for part in answer["responses"][0]["partition_responses"]:
                if part["error_code"] == 0:
                    waiting.discard(part["index"])
            if waiting and time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: {len(waiting)} partitions still refuse writes after 60 s")
            if waiting:
                await asyncio.sleep(0.1)
    return partitions


async def produce_for(bootstrap: str, topic: str, partition_cycle, payload: bytes, records_per_batch: int,
                      per_request: int, until: float, latencies: list[float]) -> tuple[int, int]:
    """Send Produce requests until ``until``; (records acknowledged, requests)."""
    records = requests = 0
    async with await KafkaConnection.connect(bootstrap, client_id="scaling-bench") as connection:
        while time.monotonic() < until:
            chosen = [next(partition_cycle) for _ in range(per_request)]
            body = {"transactional_id": None, "acks": 1, "timeout_ms": 30_000, "topic_data": [
                {"name": topic, "partition_data": [{"index": p, "records": payload} for p in chosen]}]}
            sent = time.perf_counter()
            answer = await connection.request(ApiKey.PRODUCE, body)
            latencies.append(time.perf_counter() - sent)
            codes = [p["error_code"] for t in answer["responses"] for p in t["partition_responses"]]
            if set(codes) - {0, NOT_LEADER_OR_FOLLOWER}:
                raise RuntimeError(f"Produce to {topic}: error codes {sorted(set(codes))}")
            # A new Kafka partition can answer NOT_LEADER_OR_FOLLOWER for a moment after Metadata already
            # names its leader; like a real client, send again (only acknowledged batches count).
            records += records_per_batch * codes.count(0)
            requests += 1
            if NOT_LEADER_OR_FOLLOWER in codes:
                await asyncio.sleep(0.05)
    return records, requests


async def consume_all(bootstrap: str, topic: str, partitions: int) -> int:
    """Fetch every partition from offset 0 to its end; the number of records read."""
    positions = dict.fromkeys(range(partitions), 0)
    total = 0
    async with await KafkaConnection.connect(bootstrap, client_id="scaling-bench") as connection:
        while positions:
            wanted = list(positions.items())[:100]
            answer = await connection.request(ApiKey.FETCH, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 64 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
                "topics": [{"topic": topic, "partitions": [
                    {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "last_fetched_epoch": -1,
                     "log_start_offset": -1, "partition_max_bytes": 8 << 20} for p, o in wanted]}]})
            for part in answer["responses"][0]["partitions"]:
                index, data = part["partition_index"], part["records"] or b""
                if part["error_code"]:
                    raise RuntimeError(f"Fetch {topic}/{index}: error {part['error_code']}")
                last = None
                for _, header in iter_batches(data):
                    total += header.last_offset_delta + 1
                    last = header.base_offset + header.last_offset_delta
                if last is not None:
                    positions[index] = last + 1
                if positions[index] >= part["high_watermark"]:
                    del positions[index]
    return total


def p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return 1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0


async def partitions_point(name: str, bootstrap: str, pid: int, partitions: int, seconds: float) -> Point:
    topic = f"scaling-partitions-{partitions}"
    await create_topic(bootstrap, topic, partitions)
    warm = await warm_up(bootstrap, topic, partitions)
    payload = batch(100)
    cycle = itertools.cycle(range(partitions))
    latencies: list[float] = []
    broker_before, client_before, started = cpu_seconds(pid), time.process_time(), time.monotonic()
    until = started + seconds
    per_request = min(partitions, PARTITIONS_PER_REQUEST)
    results = await asyncio.gather(*(produce_for(bootstrap, topic, cycle, payload, 100, per_request, until, latencies)
                                     for _ in range(PRODUCE_CONNECTIONS)))
    elapsed = time.monotonic() - started
    broker_cpu, client_cpu = cpu_seconds(pid) - broker_before, time.process_time() - client_before
    records, requests = sum(r for r, _ in results), sum(q for _, q in results)
    read_started = time.monotonic()
    read = await consume_all(bootstrap, topic, partitions)
    read_elapsed = time.monotonic() - read_started
    if read != records + warm:
        raise RuntimeError(f"{name}: read back {read} records of {records + warm} produced to {topic}")
    return Point(name, partitions, records / elapsed, requests / elapsed, p99(latencies), read / read_elapsed,
                 100 * broker_cpu / elapsed, 100 * client_cpu / elapsed, rss_mib(pid))


async def connections_point(name: str, bootstrap: str, pid: int, connections: int, seconds: float) -> Point:
    topic = f"scaling-connections-{connections}"
    await create_topic(bootstrap, topic, 10)
    await warm_up(bootstrap, topic, 10)
    payload = batch(10)
    cycle = itertools.cycle(range(10))
    latencies: list[float] = []
    broker_before, client_before, started = cpu_seconds(pid), time.process_time(), time.monotonic()
    until = started + seconds
    results = await asyncio.gather(*(produce_for(bootstrap, topic, cycle, payload, 10, 1, until, latencies)
                                     for _ in range(connections)))
    elapsed = time.monotonic() - started
    broker_cpu, client_cpu = cpu_seconds(pid) - broker_before, time.process_time() - client_before
    records, requests = sum(r for r, _ in results), sum(q for _, q in results)
    return Point(name, connections, records / elapsed, requests / elapsed, p99(latencies), 0.0,
                 100 * broker_cpu / elapsed, 100 * client_cpu / elapsed, rss_mib(pid))


def measure(name: str, bootstrap: str, pid: int, partition_steps: list[int], connection_steps: list[int],
            seconds: float) -> tuple[list[Point], list[Point]]:
    by_partitions = [asyncio.run(partitions_point(name, bootstrap, pid, p, seconds)) for p in partition_steps]
    by_connections = [asyncio.run(connections_point(name, bootstrap, pid, c, seconds)) for c in connection_steps]
    for point in by_partitions + by_connections:
        print(f"  {point}", flush=True)
    return by_partitions, by_connections


def print_tables(ours: tuple[list[Point], list[Point]], kafkas: tuple[list[Point], list[Point]]) -> None:
    print()
    print("| partitions | produce records/s ours / Kafka | consume records/s ours / Kafka | broker CPU % ours / Kafka "
          "| client CPU % | broker RSS MiB ours / Kafka |")
    print("|---|---|---|---|---|---|")
    for o, k in zip(ours[0], kafkas[0], strict=True):
        print(f"| {o.size:,} | {o.records_per_s:,.0f} / {k.records_per_s:,.0f} | {o.consume_records_per_s:,.0f} / "
              f"{k.consume_records_per_s:,.0f} | {o.broker_cpu:.0f} / {k.broker_cpu:.0f} | "
              f"{o.client_cpu:.0f} / {k.client_cpu:.0f} | {o.rss_mib:,.0f} / {k.rss_mib:,.0f} |")
    print()
    print("| connections | requests/s ours / Kafka | p99 request ms ours / Kafka | broker CPU % ours / Kafka "
          "| client CPU % | broker RSS MiB ours / Kafka |")
    print("|---|---|---|---|---|---|")
    for o, k in zip(ours[1], kafkas[1], strict=True):
        print(f"| {o.size:,} | {o.requests_per_s:,.0f} / {k.requests_per_s:,.0f} | {o.p99_ms:.1f} / {k.p99_ms:.1f} | "
              f"{o.broker_cpu:.0f} / {k.broker_cpu:.0f} | {o.client_cpu:.0f} / {k.client_cpu:.0f} | "
              f"{o.rss_mib:,.0f} / {k.rss_mib:,.0f} |")


def plot(directory: Path, ours: tuple[list[Point], list[Point]], kafkas: tuple[list[Point], list[Point]]) -> None:
    def series(points: list[Point], value) -> list[tuple[float, float]]:
        return [(p.size, value(p)) for p in points]

    for index, axis in ((0, "partitions"), (1, "connections")):
        log_log_chart(directory / f"broker_{axis}.svg", f"Broker cost against {axis}", axis, {
            "ours: broker CPU % of a core": series(ours[index], lambda p: p.broker_cpu),
            "Kafka: broker CPU % of a core": series(kafkas[index], lambda p: p.broker_cpu),
            "ours: RSS MiB": series(ours[index], lambda p: p.rss_mib),
            "Kafka: RSS MiB": series(kafkas[index], lambda p: p.rss_mib),
            "ours: requests/s": series(ours[index], lambda p: p.requests_per_s),
            "Kafka: requests/s": series(kafkas[index], lambda p: p.requests_per_s),
        })
        print(f"chart: {directory / f'broker_{axis}.svg'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="1,10,100,1000")
    parser.add_argument("--connections", default="1,10,100,500")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each produce step")
    parser.add_argument("--plot-dir", type=Path, help="write broker_partitions.svg and broker_connections.svg here")
    args = parser.parse_args()
    if reason := unavailable():
        parser.error(reason)
    partition_steps = [int(n) for n in args.partitions.split(",")]
    connection_steps = [int(n) for n in args.connections.split(",")]
    print(f"$ {shlex.join([os.path.relpath(sys.executable), *sys.argv])}")
    with tempfile.TemporaryDirectory(prefix="broker-scaling-") as tmp:
        directory = Path(tmp)
        with BrokerProcess(directory / "ours") as broker:
            ours = measure("ours", broker.bootstrap, broker.proc.pid, partition_steps, connection_steps, args.seconds)
        with KafkaServer(directory / "kafka") as kafka:
            kafkas = measure("Kafka", kafka.bootstrap, kafka.process.pid, partition_steps, connection_steps,
                             args.seconds)
    print_tables(ours, kafkas)
    if args.plot_dir:
        plot(args.plot_dir, ours, kafkas)
    return 0


if __name__ == "__main__":
    sys.exit(main())
