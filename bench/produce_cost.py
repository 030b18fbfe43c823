"""Our broker's CPU per produced record, kept to one core, kcat producing on the other: repeated runs.

    PYTHONPATH=<tree> .venv/bin/python bench/produce_cost.py [--size 1024] [--partitions 1] [--records 400000]
        [--runs 5] [--acks 1] [--keep-topics] [--idle-between S] [--beside-kafka] [--hold S]
        [--producers N] [--unpinned]

Starts ``burrowpy broker`` (the code Python imports: put a checkout first on ``PYTHONPATH``) with the matrix's
settings (``bench/broker_matrix.py``: socket buffers of 102400, no delete delay), keeps every thread of it to
CPU 0 and this script and its kcat producers to the others, and for each run creates a topic, produces
``--records`` records of ``--size`` bytes with one kcat (``-X acks=...``, librdkafka's defaults otherwise) and
prints the rate and the broker's own CPU seconds per million records (utime + stime from /proc, which holds
when other work shares the machine; the rate does not), split into user and system time, with the records
of each batch (read back from the topic's log files) and the broker's page faults a batch. ``--hold S``: then
keep kcat producing for S seconds more, printing the broker's pid first, to profile it (``py-spy``,
``strace -c``, ``perf``). ``--producers N``: N kcat producers at once, each a share of the records;
``--unpinned``: nothing pinned, the broker and the producers sharing every CPU (the matrix's unpinned rows: the
rate then depends on how the scheduler shares the cores, the CPU per record less so). bench/HISTORY.md, "The
1 KiB produce rows per core: where the CPU goes" and "The produced batch's `pwritev` on a writer thread".
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

import broker_vs_kafka as bench  # noqa: E402
from harness import BrokerProcess  # noqa: E402

SETTINGS = {"socket.send.buffer.bytes": 102400, "socket.receive.buffer.bytes": 102400,
            "log.segment.delete.delay.ms": 0, "group.initial.rebalance.delay.ms": 0}


def user_system_faults(pid: int) -> tuple[float, float, int]:
    """User and system CPU seconds of a process so far (its own threads), and its page faults (minor and
    major)."""
    fields = bench.stat_fields(pid)
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick, int(fields[7]) + int(fields[9])


def batch_sizes(data_dir: Path, topic: str) -> list[int]:
    """The records of each batch in ``topic``'s log files (its partitions' segments, read from disk)."""
    counts = []
    for log in sorted(data_dir.glob(f"{topic}-*/*.log")):
        with open(log, "rb") as file:
            while len(header := file.read(61)) == 61:
                counts.append(int.from_bytes(header[57:61], "big"))
                file.seek(int.from_bytes(header[8:12], "big") + 12 - 61, os.SEEK_CUR)
    return counts


def produce(bootstrap: str, topic: str, acks: str, records: Path, producers: int = 1) -> float:
    """Seconds for ``producers`` kcat processes at once, each sending every record of ``records``."""
    started = time.monotonic()
    with contextlib.ExitStack() as files:
        running = [subprocess.Popen([bench.KCAT, "-P", "-b", bootstrap, "-t", topic, "-X", f"acks={acks}", "-q"],
                                    stdin=files.enter_context(open(records, "rb")), stderr=subprocess.DEVNULL)
                   for _ in range(producers)]
        for process in running:
            if process.wait() != 0:
                raise RuntimeError(f"kcat exited with {process.returncode}")
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--hold", type=float, default=0.0)
    parser.add_argument("--producers", type=int, default=1,
                        help="kcat producers at once, each sending --records / N of the records")
    parser.add_argument("--unpinned", action="store_true",
                        help="the broker, this script and the producers on every CPU (the matrix's unpinned "
                             "arrangement) rather than the broker on CPU 0 and the rest on the others")
    parser.add_argument("--idle-between", type=float, default=0.0,
                        help="seconds to leave the machine idle after each run's topic is deleted (the matrix runs "
                             "the other broker meanwhile)")
    parser.add_argument("--keep-topics", action="store_true",
                        help="keep each run's topic (its log stays in the page cache, so every run writes into "
                             "memory the page cache has not used before) rather than delete it")
    parser.add_argument("--beside-kafka", action="store_true",
                        help="an idle Apache Kafka node kept to the broker's core meanwhile (as in the matrix)")
    args = parser.parse_args()
    import broker

    print(f"broker code: {Path(broker.__file__).parent}; load average {os.getloadavg()[0]:.2f}", flush=True)
    everywhere = os.sched_getaffinity(0)
    with tempfile.TemporaryDirectory(prefix="produce-cost-") as tmp, contextlib.ExitStack() as running:
        node = running.enter_context(BrokerProcess(Path(tmp) / "broker", extra_config=SETTINGS))
        assert node.proc is not None
        pid = node.proc.pid
        cpus = everywhere if args.unpinned else {0}
        bench.pin_threads(pid, cpus)
        if args.beside_kafka:
            from kafka_harness import KafkaServer

            kafka = running.enter_context(KafkaServer(Path(tmp) / "kafka", config=SETTINGS))
            assert kafka.process is not None
            for process in (kafka.process.pid, *bench.descendants(kafka.process.pid)):
                bench.pin_threads(process, cpus)
        if not args.unpinned:
            os.sched_setaffinity(0, everywhere - {0})
        each = args.records // args.producers
        records = bench.records_file(Path(tmp), args.size, each)
        total = each * args.producers
        figures = []
        for run in range(args.runs + 1):
            topic = f"cost-{run}"
            bench.create_topic(node.bootstrap, topic, args.partitions)
            os.sync()  # as the matrix does: no dirty pages of earlier runs written back during this one
            before, (user_before, system_before, faults_before) = bench.cpu_seconds(pid), user_system_faults(pid)
            seconds = produce(node.bootstrap, topic, args.acks, records, args.producers)
            cpu = bench.cpu_seconds(pid) - before
            user, system, faults = user_system_faults(pid)
            user, system, faults = user - user_before, system - system_before, faults - faults_before
            batches = batch_sizes(Path(tmp) / "broker" / "logs", topic)
            if not args.keep_topics:
                bench.delete_topic(node.bootstrap, topic)
                bench.wait_until_gone(Path(tmp) / "broker" / "logs", topic)
            time.sleep(args.idle_between)  # a deliberate idle interval, not a wait for something
            label = "warm-up" if run == 0 else f"run {run}"
            print(f"{label:>8}: {total / seconds:>10,.0f} records/s, broker {cpu / total * 1e6:.2f} "
                  f"CPU s per million records (user {user / total * 1e6:.2f}, "
                  f"system {system / total * 1e6:.2f}; {100 * cpu / seconds:.0f} % of a core); "
                  f"{len(batches):,} batches, {sum(batches) / max(1, len(batches)):.0f} records a batch on average, "
                  f"{faults / max(1, len(batches)):.1f} page faults a batch",
                  flush=True)
            if run:
                figures.append(cpu / total * 1e6)
        figures.sort()
        print(f"CPU s/M: median {figures[len(figures) // 2]:.2f}, range {figures[0]:.2f}-{figures[-1]:.2f}; "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)
        if args.hold > 0:
            print(f"holding: broker pid {pid}", flush=True)
            bench.create_topic(node.bootstrap, "hold", args.partitions)
            deadline = time.monotonic() + args.hold
            while time.monotonic() < deadline:
                produce(node.bootstrap, "hold", args.acks, records, args.producers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
