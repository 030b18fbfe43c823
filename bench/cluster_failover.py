"""Cluster failover and replication cost: three `burrowpy broker` processes on 127.0.0.1.

    .venv/bin/python bench/cluster_failover.py [--records 100000] [--size 100] [--kills 3] [--fast]

1. Failover: a confluent-kafka producer (acks=all, idempotent) sends one record at a time to a
   single-partition topic with replication factor 3; the partition leader is killed with SIGKILL, and
   the time from the kill to the first record acknowledged by the new leader is measured. Repeated
   ``--kills`` times (the killed broker is restarted and the cluster allowed to heal in between).
2. Throughput: the same producer, pipelined (linger 5 ms), writes ``--records`` records of ``--size``
   bytes to a one-partition topic with replication factor 1 and then to one with replication factor 3,
   both with acks=all, in the same run.

By default the brokers use their default cluster timings (gossip protocol period 500 ms, suspicion
4 periods, Raft election timeout 0.4-1.4 s); ``--fast`` uses the short timings of the integration tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

from cluster_harness import BrokerCluster  # noqa: E402
from harness import wait_until  # noqa: E402


def produce_one(producer, topic: str, value: bytes, timeout: float = 60.0) -> tuple[float, object]:
    """Send one record and wait for its acknowledgement: (time acknowledged, error or None)."""
    outcome: list = []
    producer.produce(topic, value=value, on_delivery=lambda err, msg: outcome.append((time.monotonic(), err)))
    deadline = time.monotonic() + timeout
    while not outcome and time.monotonic() < deadline:
        producer.poll(0.005)
    return outcome[0] if outcome else (time.monotonic(), "timed out")


def failover(cluster: BrokerCluster, kills: int) -> list[float]:
    from confluent_kafka import Producer

    topic = "failover"
    answer = cluster.create_topic(cluster.running()[0], topic, 1, 3)
    assert answer["error_code"] == 0, answer
    cluster.wait_healthy()
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 0, "message.timeout.ms": 120000, "retry.backoff.ms": 20,
                         "retry.backoff.max.ms": 100, "topic.metadata.refresh.interval.ms": 1000})
    times = []
    for round_ in range(kills):
        for i in range(20):  # a warm connection to the current leader
            _at, error = produce_one(producer, topic, f"warm-{round_}-{i}".encode())
            assert error is None, error
        leader = cluster.partitions(topic)[0]["leader_id"]
        killed_at = time.monotonic()
        cluster.kill(leader)
        acked_at, error = produce_one(producer, topic, f"after-kill-{round_}".encode())
        assert error is None, error
        new_leader = cluster.partitions(topic)[0]["leader_id"]
        assert new_leader != leader
        times.append(acked_at - killed_at)
        print(f"kill {round_ + 1}: broker {leader} killed, first acknowledged produce after "
              f"{times[-1] * 1000:.0f} ms (new leader {new_leader})", flush=True)
        cluster.restart(leader)
        cluster.wait_healthy(90)
    producer.flush(10)
    return times


def throughput(cluster: BrokerCluster, replication: int, records: int, size: int) -> float:
    from confluent_kafka import Producer

    topic = f"throughput-rf{replication}"
    answer = cluster.create_topic(cluster.running()[0], topic, 1, replication)
    assert answer["error_code"] == 0, answer
    wait_until(lambda: all(p["leader_id"] >= 0 for p in cluster.partitions(topic).values()), 30,
               message="a leader")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 1_000_000})
    payload = b"x" * size
    errors: list = []
    start = time.monotonic()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value=payload,
                                 on_delivery=lambda err, msg: errors.append(err) if err else None)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(300)
    elapsed = time.monotonic() - start
    assert not errors, errors[:3]
    return records / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--fast", action="store_true", help="the integration tests' short cluster timings")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as root:
        cluster = BrokerCluster(Path(root), settings={"replica.lag.time.max.ms": 10000},
                                timings=None if args.fast else {})
        try:
            cluster.start()
            times = failover(cluster, args.kills)
            rf1 = throughput(cluster, 1, args.records, args.size)
            rf3 = throughput(cluster, 3, args.records, args.size)
        finally:
            cluster.stop()
    print(f"\nfailover, kill -9 of the leader to the first acknowledged produce ({args.kills} kills, "
          f"{'test' if args.fast else 'default'} timings): median {statistics.median(times) * 1000:.0f} ms, "
          f"max {max(times) * 1000:.0f} ms")
    print(f"throughput, acks=all, {args.records} x {args.size} B, one partition: "
          f"RF 1 {rf1:,.0f} records/s, RF 3 {rf3:,.0f} records/s ({rf3 / rf1:.0%} of RF 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
