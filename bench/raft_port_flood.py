"""A three-broker cluster of ours while strangers (no secret) push bytes at every broker's Raft port.

    PYTHONPATH=<tree> .venv/bin/python bench/raft_port_flood.py [--mib 600] [--silent 200]

Starts ``burrowpy broker`` x3 (``tests/integration/cluster_harness.py``; the code Python imports: put a checkout
first on ``PYTHONPATH``), creates a topic (the baseline: a Raft commit), then:

- ``stream``: one connection to each broker's Raft port announces a frame of 2^31 - 1 bytes and sends random
  bytes as fast as they are taken, up to ``--mib`` MiB each, while five topics are created one after the other
  (each a Raft commit, timed, or its error); then the brokers' CPU seconds and RSS, and one more creation;
- ``silent``: ``--silent`` connections to one broker's Raft port that send nothing: how many descriptors the
  broker holds a second later, and how many of the connections it has closed 30 s later.

bench/README.md, "Hostile input and the event loop", has the figures before and after
``broker/cluster/raft_guard.py``.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

from cluster_harness import BrokerCluster  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def rss_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) >> 10
    return 0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def create(admin: AdminClient, name: str) -> str:
    started = time.monotonic()
    try:
        for future in admin.create_topics([NewTopic(name, 3, 3)], operation_timeout=30).values():
            future.result(timeout=60)
    except Exception as exc:  # noqa: BLE001 (what the client says is the figure)
        return f"failed after {time.monotonic() - started:.1f} s ({exc})"
    return f"{time.monotonic() - started:.2f} s"


def stream(address: str, limit: int, sent: list[int], index: int) -> None:
    host, port = address.rsplit(":", 1)
    junk = os.urandom(1 << 20)
    try:
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(struct.pack("i", 0x7FFFFFFF))
            while sent[index] < limit:
                sock.sendall(junk)
                sent[index] += len(junk)
    except OSError as exc:
        print(f"  stream to {address} ended by the broker after {sent[index] >> 20} MiB: {exc}", flush=True)


def flood(cluster: BrokerCluster, admin: AdminClient, mib: int) -> None:
    pids = {i: cluster.brokers[i].proc.pid for i in cluster.ids}  # type: ignore[union-attr]
    cpu = {i: cpu_seconds(pid) for i, pid in pids.items()}
    sent = [0] * len(pids)
    threads = [threading.Thread(target=stream, args=(cluster.raft_addresses[i], mib << 20, sent, n), daemon=True)
               for n, i in enumerate(cluster.ids)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for n in range(1, 6):
        print(f"  t+{time.monotonic() - started:.0f} s: create: {create(admin, f'during-{n}')}; sent "
              f"{[s >> 20 for s in sent]} MiB; RSS {[rss_mib(pid) for pid in pids.values()]} MiB", flush=True)
    for thread in threads:
        thread.join()
    print(f"stream: {sum(sent) >> 20} MiB in {time.monotonic() - started:.0f} s; brokers' CPU "
          f"{[round(cpu_seconds(pid) - cpu[i], 1) for i, pid in pids.items()]} s, RSS "
          f"{[rss_mib(pid) for pid in pids.values()]} MiB; a creation after it: {create(admin, 'after')}", flush=True)


def silent(cluster: BrokerCluster, count: int) -> None:
    node = cluster.ids[0]
    pid = cluster.brokers[node].proc.pid  # type: ignore[union-attr]
    host, port = cluster.raft_addresses[node].rsplit(":", 1)
    before = descriptors(pid)
    opened = [socket.create_connection((host, int(port))) for _ in range(count)]
    try:
        time.sleep(1)  # the figure is what the broker holds a second after: a measured interval, not a wait
        held = descriptors(pid) - before
        for sock in opened:
            sock.setblocking(False)
        deadline = time.monotonic() + 30
        closed: set[int] = set()
        while len(closed) < count and time.monotonic() < deadline:
            for n, sock in enumerate(opened):
                try:
                    if sock.recv(1) == b"":
                        closed.add(n)
                except BlockingIOError:
                    pass
                except OSError:
                    closed.add(n)
            time.sleep(0.2)
        print(f"silent: {count} connections; the broker held {held} more descriptors a second later, and had closed "
              f"{len(closed)} of them {min(30.0, 30 - (deadline - time.monotonic())):.0f} s later", flush=True)
    finally:
        for sock in opened:
            sock.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=600, help="MiB each stream sends at most")
    parser.add_argument("--silent", type=int, default=200, help="silent connections opened to one broker")
    args = parser.parse_args()
    import broker

    print(f"broker code: {Path(broker.__file__).parent}; load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="raft-flood-") as tmp:
        cluster = BrokerCluster(Path(tmp)).start()
        try:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            print(f"baseline: create: {create(admin, 'baseline')}", flush=True)
            flood(cluster, admin, args.mib)
            silent(cluster, args.silent)
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
