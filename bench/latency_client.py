"""Produce latency at a fixed rate, over a steady-state window: a client process of bench/broker_matrix.py.

    .venv/bin/python bench/latency_client.py BOOTSTRAP TOPIC [--rate 20000] [--seconds 10] [--drop 3]
                                             [--size 100] [--acks all]

A confluent-kafka (librdkafka) producer sends ``--size``-byte records at ``--rate`` records/s for ``--seconds``
and prints one JSON object: the send-to-acknowledgement latency percentiles (p50, p99, p999, in ms) of the
records sent after the first ``--drop`` seconds, so that neither a broker's first moments with a new topic nor
the client's own start count. Each latency is librdkafka's own (``Message.latency()``: from ``produce()`` to
the acknowledgement read off the socket), not the time until Python got to the delivery callback.
``--linger-ms`` (5 by default, librdkafka's and the Java producer's default): how long the client waits to
fill a batch, which every record's latency includes, the same for both brokers. With 0, 20,000 records/s
became up to 20,000 requests/s, and on a loaded machine the client itself fell seconds behind.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from confluent_kafka import Producer


def percentile(ordered: list[float], fraction: float) -> float:
    """The nearest-rank percentile of an ascending list."""
    return ordered[min(len(ordered) - 1, max(0, int(fraction * len(ordered) + 0.5) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("--rate", type=int, default=20_000, help="records per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to send")
    parser.add_argument("--drop", type=float, default=3.0, help="seconds at the start whose records do not count")
    parser.add_argument("--size", type=int, default=100, help="bytes per record")
    parser.add_argument("--acks", default="all")
    parser.add_argument("--linger-ms", type=int, default=5, help="the producer's linger.ms")
    args = parser.parse_args()
    if not 0 <= args.drop < args.seconds or args.rate <= 0:
        parser.error("--drop must be at least 0 and below --seconds, --rate above 0")
    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": args.acks,
                         "linger.ms": args.linger_ms})
    latencies: list[float] = []
    errors: list[str] = []
    value = b"x" * args.size
    started = time.time()
    window_ms = (started + args.drop) * 1000  # a record's CreateTime is its produce() time, in ms

    def delivered(error, message) -> None:
        if error is not None:
            errors.append(str(error))
        elif message.timestamp()[1] >= window_ms:
            latencies.append(message.latency() * 1000)

    total = int(args.rate * args.seconds)
    sent = 0
    while sent < total:
        # as many records as the rate allows by now; poll() serves the callbacks and paces the loop
        due = min(total, int((time.time() - started) * args.rate) + 1)
        while sent < due:
            producer.produce(args.topic, value, on_delivery=delivered)
            sent += 1
        producer.poll(0.0005)
    left = producer.flush(30)
    if errors or left or not latencies:
        print(json.dumps({"error": f"{len(errors)} records failed ({errors[:3]}), {left} not acknowledged, "
                                    f"{len(latencies)} acknowledged in the window"}))
        return 1
    ordered = sorted(latencies)
    print(json.dumps({"records": sent, "window_records": len(ordered), "seconds": args.seconds, "drop": args.drop,
                      "rate": args.rate, "size": args.size, "acks": args.acks, "linger_ms": args.linger_ms,
                      "p50_ms": percentile(ordered, 0.5), "p99_ms": percentile(ordered, 0.99),
                      "p999_ms": percentile(ordered, 0.999), "max_ms": ordered[-1]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
