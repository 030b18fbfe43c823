"""How many Fetch requests consumers send, and how much each answer carries, our broker and Kafka alike.

    .venv/bin/python bench/fetch_answers.py [--records 1500000] [--consumers 4] [--partitions 6]

For each broker in turn (``burrowpy broker``, then a single Apache Kafka 4.4 node from the test peers), on a
fresh topic: four kcat producers write ``--records`` records of 1 KiB (``bench/broker_vs_kafka.py``'s kcat
producers), then ``--consumers`` consumers of confluent-kafka (librdkafka, assigned every partition, no group)
read the whole topic, each in a process of its own, with librdkafka's statistics on. Printed per consumer: Fetch requests sent, answers received and
their bytes, from the statistics' last report. A broker whose answers carry less makes its consumers ask
more often, and every request costs the broker a turn of its request path. The consumers' loop is Python's,
so their rate is not the point here (``bench/broker_vs_kafka.py`` measures rates with kcat).

``--strace`` also counts the broker's system calls while the consumers read (``strace -c -f`` attached to
its process, every thread): how many ``sendfile`` and socket writes an answer takes. strace slows the broker
down; its counts are the point, not its times.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from broker_vs_kafka import Kcat, Row, create_topic  # noqa: E402
from harness import BrokerProcess  # noqa: E402
from kafka_harness import KafkaServer, unavailable  # noqa: E402

TOPIC = "fetch-answers"


def consume_with_statistics(bootstrap: str, partitions: int, out: str) -> None:
    """One consumer (run as its own process): read every partition to its end, then write librdkafka's last
    statistics report to ``out``."""
    from confluent_kafka import Consumer, TopicPartition

    reports: list[str] = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fetch-answers", "enable.auto.commit": False,
                         "enable.partition.eof": True, "statistics.interval.ms": 1000,
                         "stats_cb": reports.append})
    consumer.assign([TopicPartition(TOPIC, partition, 0) for partition in range(partitions)])
    ended: set[int] = set()
    while len(ended) < partitions:
        for message in consumer.consume(10_000, 1.0):
            if message.error():
                ended.add(message.partition())
    seen = len(reports)
    while len(reports) == seen:  # one more report, made after every answer was in (one a second)
        consumer.poll(0.2)
    consumer.close()
    Path(out).write_text(reports[-1] if reports else "{}")


def measure(name: str, bootstrap: str, pid: int, directory: Path, args: argparse.Namespace) -> None:
    create_topic(bootstrap, TOPIC, args.partitions)
    Kcat(directory).produce(bootstrap, TOPIC, Row(1024, args.partitions, 4, "1"), args.records, pid)
    outputs = [directory / f"{name}-statistics-{number}.json" for number in range(args.consumers)]
    tracer = None
    if args.strace:
        counts = directory / f"{name}-strace.txt"
        tracer = subprocess.Popen(["strace", "-c", "-f", "-p", str(pid), "-o", str(counts)],
                                  stderr=subprocess.PIPE, text=True)
        # strace says "Process PID attached [with N threads]" once it traces every thread
        while "attached" not in (line := tracer.stderr.readline()):
            if not line:
                raise RuntimeError(f"strace could not attach to {name}'s process")
    consumers = [subprocess.Popen([sys.executable, __file__, "--consumer", bootstrap, str(args.partitions), str(out)])
                 for out in outputs]
    for consumer in consumers:
        if consumer.wait():
            raise RuntimeError(f"consumer failed against {name}")
    if tracer is not None:
        tracer.send_signal(signal.SIGINT)
        tracer.communicate()
        print(f"{name} system calls while the consumers read (strace -c -f, the most frequent):")
        rows = [line for line in counts.read_text().splitlines()[2:] if line and not line.startswith("-")]
        for line in sorted(rows[:-1], key=lambda line: -int(line.split()[3]))[:8]:
            fields = line.split()
            print(f"    {fields[-1]:<16} {int(fields[3]):>9,} calls")
    for number, out in enumerate(outputs):
        report = json.loads(out.read_text())
        for broker in report.get("brokers", {}).values():
            if broker.get("nodeid", -1) < 0:
                continue  # the bootstrap entry
            answers = max(broker["rx"], 1)
            print(f"{name:>6} consumer {number}: {broker['req'].get('Fetch', 0):,} Fetch requests, "
                  f"{broker['rx']:,} answers, {broker['rxbytes']:,} bytes, {broker['rxbytes'] // answers:,} "
                  "bytes an answer", flush=True)


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--consumer":
        consume_with_statistics(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_500_000, help="records of 1 KiB written, four producers")
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--strace", action="store_true", help="count the broker's system calls while consumers read")
    args = parser.parse_args()
    if reason := unavailable():
        parser.error(reason)
    if args.strace and shutil.which("strace") is None:
        parser.error("--strace wants strace on the PATH (Debian package strace)")
    with tempfile.TemporaryDirectory(prefix="fetch-answers-") as tmp:
        directory = Path(tmp)
        with BrokerProcess(directory / "ours") as broker:
            measure("ours", broker.bootstrap, broker.proc.pid, directory, args)
        with KafkaServer(directory / "kafka") as kafka:
            measure("Kafka", kafka.bootstrap, kafka.process.pid, directory, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
