"""Broker throughput: a confluent-kafka producer and consumer in separate processes against our broker.

    .venv/bin/python bench/broker_throughput.py [--records 1000000] [--size 100] [--acks 1 all]

Starts `burrowpy broker` on a free port with a fresh data dir, creates one single-partition topic per
acks setting, and prints records/s, MB/s and produce latency p50/p99 (delivery-report latency, measured
in the producer process) for the producer, the broker's CPU time per produced record (user and system, from
/proc: a figure that holds when other processes share the cores), and records/s and MB/s for a consumer
reading the topic from the beginning in another process.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

from harness import BrokerProcess  # noqa: E402


def produce(bootstrap: str, topic: str, records: int, size: int, acks: str, out: mp.Queue) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576, "compression.type": "none"})
    payload = b"x" * size
    latencies: list[float] = []

    def delivered(err, msg, sent=None) -> None:
        if err is None:
            latencies.append(msg.latency())

    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, payload, partition=0, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - start
    latencies.sort()
    out.put({"records": len(latencies), "seconds": elapsed,
             "p50_ms": latencies[len(latencies) // 2] * 1000 if latencies else None,
             "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000 if latencies else None})


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def consume(bootstrap: str, topic: str, records: int, out: mp.Queue) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}",
                         "enable.auto.commit": False, "fetch.max.bytes": 52_428_800,
                         "max.partition.fetch.bytes": 10_485_760})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen = 0
    start = time.perf_counter()
    deadline = start + 300
    while seen < records and time.perf_counter() < deadline:
        for msg in consumer.consume(10000, 1.0):
            if msg.error() is None:
                seen += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    out.put({"records": seen, "seconds": elapsed})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--acks", nargs="+", default=["1", "all"])
    args = parser.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(Path(tmp) / "data") as broker:
        results = {}
        for acks in args.acks:
            topic = f"bench-acks-{acks}"
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            queue: mp.Queue = mp.Queue()
            p = mp.Process(target=produce, args=(broker.bootstrap, topic, args.records, args.size, acks, queue))
            cpu_before = cpu_seconds(broker.proc.pid)
            p.start()
            produced = queue.get()
            p.join()
            broker_cpu = cpu_seconds(broker.proc.pid) - cpu_before
            c = mp.Process(target=consume, args=(broker.bootstrap, topic, args.records, queue))
            c.start()
            consumed = queue.get()
            c.join()
            mb = args.size / 1e6
            results[acks] = {
                "produce_records_per_s": round(produced["records"] / produced["seconds"]),
                "produce_MB_per_s": round(produced["records"] * mb / produced["seconds"], 1),
                "produce_latency_p50_ms": round(produced["p50_ms"], 1),
                "produce_latency_p99_ms": round(produced["p99_ms"], 1),
                "produce_broker_cpu_us_per_record": round(broker_cpu * 1e6 / produced["records"], 2),
                "consume_records_per_s": round(consumed["records"] / consumed["seconds"]),
                "consume_MB_per_s": round(consumed["records"] * mb / consumed["seconds"], 1),
                "records": produced["records"],
            }
        print(json.dumps({"record_size": args.size, "results": results}, indent=2))


if __name__ == "__main__":
    main()
