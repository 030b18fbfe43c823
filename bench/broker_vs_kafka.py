"""Our broker side by side with Apache Kafka 4.4: the same clients, the same workloads, one broker at a time.

    .venv/bin/python bench/broker_vs_kafka.py [--quick] [--clients kcat,java] [--records-100 500000]
                                              [--records-1k 200000]
    .venv/bin/python bench/broker_vs_kafka.py --latency-runs 7

For each broker (``burrowpy broker`` on a fresh data dir, then a single Apache Kafka 4.4 node in KRaft mode
from the test peers, both on 127.0.0.1), and each row of the matrix

    record size 100 B and 1 KiB  x  partitions 1 and 6  x  clients 1 and 4  x  acks 1 and all

(``--quick``: 100 B and 1 KiB, 1 and 6 partitions, 1 client, acks 1 and all), on a new topic:

- produce: the clients each send their share of the records (no keys, so records spread over the
  partitions) and the row's rate is all records over the wall time until the last client is done;
- consume: the same number of clients each read the whole topic from the beginning (fan-out: every client
  gets every record), rate = records delivered to all clients / wall time.

Clients, both written for speed and run as separate processes: ``kcat`` (librdkafka, C) and Kafka's own
``ProducerPerformance`` / ``ConsumerPerformance`` (the Java client, the classes behind
``kafka-producer-perf-test.sh`` and ``kafka-consumer-perf-test.sh``), with their default settings apart from
acks. Kafka's producer tool also reports the produce latency (p50/p99 of its send-to-acknowledgement
times at full speed); a last row measures latency at a fixed 20,000 records/s, where queueing does not
dominate it.

``--rows SIZE:PARTITIONS:CLIENTS[,...]`` keeps only the rows named (the acks settings of each that ``--acks``
names, ``1,all`` by default, in that order: ``--acks all,1`` runs acks=all first), e.g.
``--rows 1024:6:4`` for the 1 KiB, 6-partition, 4-client rows; ``--repeat N`` measures each row N times on
each broker (a new topic each time) and reports the median run of each figure, with every run's rate
printed as it is measured. Before the first measured run each broker gets ``--warm-up N`` unmeasured runs (1
by default) of the first row with each client: Kafka's JVM compiles its produce and fetch paths in its first
runs, which had counted against whichever row came first.

``--alternate`` starts both brokers and takes turns, run by run: each run of a row on one broker is followed by
the same run on the other, so that whatever else the machine does in a stretch of time weighs on both brokers
alike (without it, all of our rows run first, then all of Kafka's). Which broker goes first changes from one
pair of runs to the next (ours first in the first pair): with our broker against itself, the second of each
pair was measured faster in most rows (bench/HISTORY.md), so a fixed order favoured Kafka. An even
``--repeat`` gives each broker the first place equally often in every row. The broker not being measured sits idle;
each run prints its CPU use too. Each run then starts with the machine's dirty pages written out (``sync``,
outside the timed part) and its topic is deleted after it, the next run waiting until its files are gone
(both brokers run with ``log.segment.delete.delay.ms=0`` here: with Kafka's default of a minute it deleted each
run's gigabyte or so during a later run), so that no run pays for writing back or deleting the data of the runs
before it and longer runs (``--records-100``, ``--records-1k``) fit on the disk.

``--clients-nice N`` runs every client at nice N, so that on this machine, where the clients and the broker
share two cores, the broker is served first (as on a machine of its own): Linux shares a core among runnable
threads, and a broker with one busy thread (ours) gets less of it against four producers' threads than one
with many (Kafka). Both brokers are measured with the same setting.

``--producer-metrics`` has Kafka's producer tool print its metrics and shows, after each produce, how every
producer batched and waited (batch size, records per request, request latency, time records queued, time
waiting for buffer memory or in the network thread's select, retries and errors): whether a broker made the
client work differently.

``--pin-consumers CPUS`` runs each kcat consumer on those CPUs only (``taskset -c``, e.g. ``1``). Unpinned, a
kcat consumer of 100 B records is the bound of its row: librdkafka's thread decoding answers and kcat's thread
taking records run on both cores and hand every batch across, and that costs it more the sooner a broker answers
(``bench/consumer_cost.py``); pinned, the two take turns on one core and the row measures the broker.

``--pin-brokers CPU`` (with ``--alternate``, ``--versus-ours`` or ``--versus-tree``) keeps every thread of both
brokers to that CPU and this script, and so every client, to the others: the per-core arrangement of
``bench/broker_matrix.py`` (``pinned``), for an A/B that must hold there too. Unpinned (the default), the brokers
and the clients share every CPU.

``--versus-ours KEY=VALUE[,...]`` measures our broker against itself with those broker settings, run by run
as ``--alternate`` does (an A/B of a setting; the tables call the second broker "ours B"). ``--versus-tree DIR``
does the same with the code of another checkout as "ours B" (an A/B of a change: ``git worktree add DIR`` and
apply the change there, e.g. one of the changes tried and dropped in ``bench/tried/``); both may be given.

``--broker-sessions`` (with ``--alternate``) starts each broker in a session of its own, as a broker run by a
service manager or from its own shell is. Linux's autogroup scheduling (``kernel.sched_autogroup_enabled``)
then shares the CPU between sessions first and threads second: the clients' threads, all in this script's
session, no longer outnumber a broker of one busy thread (ours) against one of many (Kafka's).

``--ours-settings KEY=VALUE[,...]`` starts our broker with those settings, against Kafka too (e.g.
``socket.congestion.control=cubic``, burrowpy's own setting, on a machine whose default is ``bbr``; the output
names the machine's congestion control first).

``--ours-nodes N`` (with ``--alternate``) makes "ours" a cluster of N of our brokers on this machine (Raft and
gossip, the bench's topics with one replica, so each topic's partitions spread over the nodes and the clients
talk to all of them): what several processes sharing a broker's work could do on these two cores, rows of one
partition aside. Its CPU figures are those of all the nodes together.

``--latency-runs N`` runs only the fixed-rate latency row, N times on each broker (a new topic each time),
and prints every run's p50 / p99 and their medians: one 5-second run's p99 swings with whatever else the two
cores are doing.

Rates of the Java tools are their own figures (without the JVM's start and, for the consumer, the group
join); kcat's are records over the wall time of its processes. Every row prints the broker's and the
clients' CPU use (percent of one core over the row's wall time), so a reader sees which side is the
bottleneck: with two cores shared by the broker and its clients, a row whose clients use more CPU than the
broker is client-bound. Each run's line also gives the clients' page faults (``wait4``'s resource usage) and
the largest peak RSS of one client (its VmHWM, read every 50 ms): a kcat producer queues the records it cannot
send yet, so its memory shows how far the broker lags behind it. And how long the broker's threads were ready
to run but had no CPU (``/proc/PID/task/*/schedstat``, summed over its threads, as percent of the wall time):
a broker with one busy thread that waits much of a run for a CPU is starved, not slow.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from harness import BrokerProcess, create_topics  # noqa: E402
from kafka_harness import KafkaServer, java_command, unavailable  # noqa: E402

KCAT = "kcat"
JAVA_OPTS = ("-Xmx512m",)
LATENCY_RATE = 20_000  # records/s of the fixed-rate latency row
CLIENTS_NICE = 0  # --clients-nice: the clients run at this nice value (both brokers alike)
CLIENT_TIMEOUT_S = 600  # a client still running after this long is killed


@dataclass(frozen=True)
class Row:
    size: int
    partitions: int
    clients: int
    acks: str

    def label(self) -> str:
        size = f"{self.size} B" if self.size < 1024 else f"{self.size // 1024} KiB"
        return f"{size}, {self.partitions} part., {self.clients} client{'s' * (self.clients > 1)}, acks={self.acks}"


@dataclass
class Figure:
    records_per_s: float
    mb_per_s: float
    broker_cpu: float  # percent of one core
    clients_cpu: float
    p50_ms: float | None = None
    p99_ms: float | None = None
    clients_faults: int = 0  # page faults of all the clients
    clients_max_rss_mb: float = 0.0  # the largest peak RSS of one client
    broker_waited: float = 0.0  # percent of the wall time the broker's threads waited for a CPU (summed)
    records: int = 0  # records moved (a consume's: delivered to all its clients)
    broker_cpu_s: float = 0.0  # the broker's CPU seconds over the run (bench/broker_matrix.py: CPU per record)


Pids = int | tuple[int, ...]  # a broker's process, or the processes of a cluster of ours (--ours-nodes)


def congestion_control() -> str:
    """The machine's TCP congestion control, which every connection here uses (loopback included): with
    ``bbr`` the kernel paces each connection's sends with timers, which changes what a broker's sends cost."""
    return Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()


def each_pid(pids: Pids) -> tuple[int, ...]:
    return pids if isinstance(pids, tuple) else (pids,)


def stat_fields(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (the 3rd field of proc(5) first)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()


def pin_threads(pid: int, cpus: set[int]) -> None:
    """Keep every thread of a process to ``cpus``; threads it starts later inherit it from the one starting them."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):  # a thread that has just ended
            os.sched_setaffinity(int(task.name), cpus)


def descendants(pid: int) -> list[int]:
    """The live processes started by ``pid``, their children and so on."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                children.setdefault(int(stat_fields(int(entry.name))[1]), []).append(int(entry.name))
    found, todo = [], list(children.get(pid, ()))
    while todo:
        found.append(child := todo.pop())
        todo.extend(children.get(child, ()))
    return found


def cpu_seconds(pids: Pids) -> float:
    """User + system CPU time of a process (or the sum over processes) so far, from /proc/PID/stat: its own,
    its reaped children's and its live descendants' (a broker that starts helper processes pays for them)."""
    total = 0
    for pid in each_pid(pids):
        fields = stat_fields(pid)
        total += sum(int(value) for value in fields[11:15])
        for child in descendants(pid):
            with contextlib.suppress(OSError, IndexError, ValueError):
                total += sum(int(value) for value in stat_fields(child)[11:13])
    return total / os.sysconf("SC_CLK_TCK")


def runnable_wait_seconds(pids: Pids) -> float:
    """Time the threads of a process (or of processes) have spent ready to run but waiting for a CPU, so far
    (schedstat); threads that have ended are not counted."""
    total = 0
    for pid in each_pid(pids):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, IndexError, ValueError):
                total += int((task / "schedstat").read_text().split()[1])
    return total / 1e9


def children_cpu_seconds() -> float:
    """CPU time of every child process this script has waited for (the clients)."""
    times = os.times()
    return times.children_user + times.children_system


@dataclass
class ClientsRun:
    wall: float  # seconds until the last client was done
    broker_cpu: float  # CPU seconds of the broker meanwhile
    clients_cpu: float  # CPU seconds of all the clients
    outputs: list[str]  # each client's stdout and stderr
    faults: int  # page faults of all the clients (minor and major)
    max_rss_mb: float  # the largest peak RSS of one client
    broker_waited: float  # seconds the broker's threads were ready to run but had no CPU (summed over threads)
    clients_user: float  # of clients_cpu, the CPU seconds in the clients' own code ...
    clients_system: float  # ... and in the kernel on their behalf


def run_clients(commands: list[list[str]], broker_pid: Pids, stdin_files: list[Path | None]) -> ClientsRun:
    """Run the client commands at once. Their output goes to files, not pipes: a pipe nobody reads while
    another client is waited for would stop its writer (kcat's consumer prints a line per record), and the
    clients would no longer run side by side."""
    broker_before, clients_before = cpu_seconds(broker_pid), children_cpu_seconds()
    waited_before = runnable_wait_seconds(broker_pid)
    started = time.monotonic()
    running = []
    with contextlib.ExitStack() as files:
        for command, stdin_file in zip(commands, stdin_files, strict=True):
            stdin = files.enter_context(open(stdin_file, "rb")) if stdin_file else subprocess.DEVNULL
            output = files.enter_context(tempfile.TemporaryFile())
            if CLIENTS_NICE:
                command = ["nice", "-n", str(CLIENTS_NICE), *command]
            running.append((subprocess.Popen(command, stdin=stdin, stdout=output, stderr=subprocess.STDOUT),
                            output))
        peaks = PeakRss([process.pid for process, _ in running])
        # a client that hangs is killed after CLIENT_TIMEOUT_S, and every client still running when one fails
        killer = threading.Timer(CLIENT_TIMEOUT_S, lambda: [process.kill() for process, _ in running])
        killer.start()
        outputs, faults, user, system = [], 0, 0.0, 0.0
        try:
            for process, output in running:
                _, status, usage = os.wait4(process.pid, 0)  # reaped here, with its page faults and CPU
                process.returncode = os.waitstatus_to_exitcode(status)
                faults += usage.ru_minflt + usage.ru_majflt
                user, system = user + usage.ru_utime, system + usage.ru_stime
                output.seek(0)
                outputs.append(output.read().decode(errors="replace"))
                if process.returncode != 0:
                    raise RuntimeError(f"{shlex.join(process.args)} exited with {process.returncode}:\n"
                                       f"{outputs[-1][-2000:]}")
        finally:
            killer.cancel()
            peak_kb = peaks.stop()
            for process, _ in running:
                if process.returncode is None:
                    process.kill()  # (kill polls first: a client that has just exited is reaped there)
                    process.wait()
    wall = time.monotonic() - started
    return ClientsRun(wall, cpu_seconds(broker_pid) - broker_before, children_cpu_seconds() - clients_before,
                      outputs, faults, peak_kb / 1024, runnable_wait_seconds(broker_pid) - waited_before, user, system)


class PeakRss:
    """The largest peak RSS (VmHWM, in KiB) of some processes, read every 50 ms until :meth:`stop`. Not
    ``wait4``'s ru_maxrss: a child started by vfork carries this script's own peak in it."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.peak_kb = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while True:
            for pid in self.pids:
                with contextlib.suppress(OSError, ValueError):
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmHWM:"):
                            self.peak_kb = max(self.peak_kb, int(line.split()[1]))
            if self._done.wait(0.05):
                return

    def stop(self) -> int:
        self._done.set()
        self._thread.join()
        return self.peak_kb


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    create_topics({"bootstrap.servers": bootstrap}, topic, partitions=partitions)


def delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic]).values():
        future.result(60)


def wait_until_gone(data_dir: Path, topic: str, timeout: float = 120.0) -> None:
    """Wait until no partition directory of ``topic``, nor any deleted one, is left under ``data_dir``: both
    brokers remove a deleted topic's files after answering, in the background, which must not happen during
    the next run. (Kafka renames them ``<topic>-<partition>.<id>-delete``, ours ``<id>-delete``.)"""
    deadline = time.monotonic() + timeout
    while any(path.name.startswith(f"{topic}-") or path.name.endswith("-delete") for path in data_dir.rglob("*")):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic} still has files under {data_dir} after {timeout:.0f} s")
        time.sleep(0.1)


def records_file(directory: Path, size: int, count: int) -> Path:
    """``count`` newline-separated records of ``size`` bytes for kcat -P (made once per size and count)."""
    path = directory / f"records-{size}-{count}.txt"
    if not path.exists():
        line = b"x" * size + b"\n"
        with open(path, "wb") as out:
            for _ in range(count // 10_000):
                out.write(line * 10_000)
            out.write(line * (count % 10_000))
    return path


def share(records: int, clients: int) -> list[int]:
    return [records // clients + (1 if n < records % clients else 0) for n in range(clients)]


def pinned_to(cpus: str | None) -> list[str]:
    """The command that runs a client on ``cpus`` only (``taskset -c``), or nothing when ``cpus`` is None."""
    return ["taskset", "-c", cpus] if cpus else []


class Kcat:
    name = "kcat"

    def __init__(self, directory: Path, consumer_cpus: str | None = None) -> None:
        self.directory = directory
        # before each consumer (``--pin-consumers``): its two threads take turns on those CPUs
        self.consumer_wrapper = pinned_to(consumer_cpus)

    def produce(self, bootstrap: str, topic: str, row: Row, records: int, broker_pid: Pids) -> Figure:
        counts = share(records, row.clients)
        files = [records_file(self.directory, row.size, count) for count in counts]
        commands = [[KCAT, "-P", "-b", bootstrap, "-t", topic, "-X", f"acks={row.acks}", "-q"] for _ in counts]
        run = run_clients(commands, broker_pid, files)
        return figure(records, row.size, run.wall, run)

    def consume(self, bootstrap: str, topic: str, row: Row, records: int, broker_pid: Pids) -> Figure:
        run = self.read_all(bootstrap, topic, row.clients, records, broker_pid, self.consumer_wrapper)
        return figure(records * row.clients, row.size, run.wall, run)

    @staticmethod
    def read_all(bootstrap: str, topic: str, clients: int, records: int, broker_pid: Pids,
                 wrapper: Sequence[str] = ()) -> ClientsRun:
        """``clients`` kcat consumers each read ``topic`` from the beginning to its end, every one checked to
        have read ``records`` records. ``wrapper``: a command that runs kcat (e.g. ``taskset -c 1``)."""
        commands = [[*wrapper, KCAT, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%o\\n"]
                    for _ in range(clients)]
        run = run_clients(commands, broker_pid, [None] * clients)
        for output in run.outputs:
            got = sum(1 for line in output.splitlines() if line.isdigit())
            if got != records:
                raise RuntimeError(f"kcat read {got} records of {topic}, expected {records}")
        return run


PRODUCED = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
                      r"[\d.]+ ms max latency, (\d+) ms 50th, \d+ ms 95th, (\d+) ms 99th")


# The Java producer's own metrics that say how it batched and waited (``--producer-metrics``)
PRODUCER_METRICS = ("batch-size-avg", "records-per-request-avg", "request-latency-avg", "record-queue-time-avg",
                    "bufferpool-wait-ratio", "io-wait-ratio", "record-retry-total", "record-error-total")
METRIC_LINE = re.compile(r"^producer-metrics:([\w-]+):\{client-id=[^}]*\}\s*:\s*(\S+)$", re.MULTILINE)


class JavaTools:
    name = "java"

    def __init__(self, metrics: bool = False) -> None:
        self.metrics = metrics  # print the producers' PRODUCER_METRICS after each produce

    def produce(self, bootstrap: str, topic: str, row: Row, records: int, broker_pid: Pids,
                throughput: int = -1) -> Figure:
        commands = [java_command("org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                                 "--num-records", str(count), "--record-size", str(row.size),
                                 "--throughput", str(throughput), *(["--print-metrics"] * self.metrics),
                                 "--producer-props", f"bootstrap.servers={bootstrap}", f"acks={row.acks}",
                                 jvm_opts=JAVA_OPTS)
                    for count in share(records, row.clients)]
        run = run_clients(commands, broker_pid, [None] * row.clients)
        if self.metrics:
            print_producer_metrics(run.outputs)
        summaries = []
        for output in run.outputs:
            found = PRODUCED.findall(output)
            if not found:
                raise RuntimeError(f"no summary line from ProducerPerformance:\n{output[-2000:]}")
            summaries.append(found[-1])
        # The tool's own rate leaves out the JVM's start; the clients ran at the same time, so rates add up.
        rate = sum(float(summary[1]) for summary in summaries)
        result = figure(records, row.size, records / rate, run)
        result.p50_ms = max(int(summary[2]) for summary in summaries)
        result.p99_ms = max(int(summary[3]) for summary in summaries)
        return result

    def consume(self, bootstrap: str, topic: str, row: Row, records: int, broker_pid: Pids) -> Figure:
        commands = [java_command("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap,
                                 "--topic", topic, "--messages", str(records), "--hide-header",
                                 "--timeout", "60000", jvm_opts=JAVA_OPTS)
                    for _ in range(row.clients)]
        run = run_clients(commands, broker_pid, [None] * row.clients)
        rate = 0.0
        for output in run.outputs:
            # start.time, end.time, MB, MB/s, records, records/s, rebalance ms, fetch ms, fetch MB/s, fetch records/s
            values = [line.split(", ") for line in output.splitlines() if line.count(", ") >= 9]
            if not values or int(values[-1][4]) < records:
                raise RuntimeError(f"ConsumerPerformance did not read {records} records:\n{output[-2000:]}")
            rate += float(values[-1][9])  # the tool's rate after the group join, without the JVM's start
        return figure(records * row.clients, row.size, records * row.clients / rate, run)


def print_producer_metrics(outputs: list[str]) -> None:
    """Each of PRODUCER_METRICS as every producer ended with it (one value per client)."""
    found = [dict(METRIC_LINE.findall(output)) for output in outputs]
    for name in PRODUCER_METRICS:
        values = [float(metrics[name]) for metrics in found if name in metrics]
        print(f"      {name:<26} " + " ".join(f"{value:,.2f}" for value in values), flush=True)


def figure(records: int, size: int, seconds: float, run: ClientsRun) -> Figure:
    """Rates of ``records`` moved in ``seconds``; CPU use as percent of one core over the run's wall time."""
    return Figure(records / seconds, records * size / seconds / 1e6, 100 * run.broker_cpu / run.wall,
                  100 * run.clients_cpu / run.wall, clients_faults=run.faults, clients_max_rss_mb=run.max_rss_mb,
                  broker_waited=100 * run.broker_waited / run.wall, records=records, broker_cpu_s=run.broker_cpu)


def matrix(quick: bool, only: set[tuple[int, int, int]] | None = None,
           acks_order: tuple[str, ...] = ("1", "all")) -> Iterator[Row]:
    clients = (1,) if quick else (1, 4)
    for size, partitions, count, acks in itertools.product((100, 1024), (1, 6), clients, acks_order):
        if only is None or (size, partitions, count) in only:
            yield Row(size, partitions, count, acks)


def parse_rows(text: str) -> set[tuple[int, int, int]]:
    """``1024:6:4,100:1:1`` -> {(1024, 6, 4), (100, 1, 1)}; sizes 100/1024, partitions 1/6, clients 1/4."""
    found = set()
    for spec in text.split(","):
        try:
            size, partitions, clients = (int(part) for part in spec.split(":"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"--rows wants SIZE:PARTITIONS:CLIENTS, got {spec!r}") from None
        if size not in (100, 1024) or partitions not in (1, 6) or clients not in (1, 4):
            raise argparse.ArgumentTypeError(f"--rows {spec!r}: size is 100 or 1024, partitions 1 or 6, clients 1 or 4")
        found.add((size, partitions, clients))
    return found


def parse_acks(text: str) -> tuple[str, ...]:
    order = tuple(text.split(","))
    if not order or len(set(order)) != len(order) or not set(order) <= {"1", "all"}:
        raise argparse.ArgumentTypeError(f"--acks wants 1 and/or all, comma-separated, each once, got {text!r}")
    return order


def checkout(text: str) -> Path:
    """``--versus-tree DIR`` (and ``bench/consumer_cost.py --ours-tree DIR``): a checkout of burrowpy, whose
    broker package Python imports from there (as the ``burrowpy`` script does: -P leaves the current directory
    out of the path)."""
    directory = Path(text).resolve()
    found = subprocess.run([sys.executable, "-P", "-c", "import broker; print(broker.__file__)"], capture_output=True,
                           text=True, env={**os.environ, "PYTHONPATH": str(directory)})
    if found.returncode != 0 or not found.stdout.strip().startswith(str(directory / "broker")):
        raise argparse.ArgumentTypeError(f"{text}: no burrowpy checkout there (its broker package "
                                         f"is not what Python imports with PYTHONPATH={directory})")
    return directory


def pin_brokers(brokers: Sequence[Broker], cpu: int) -> None:
    """``--pin-brokers``: every thread of the brokers' processes (and their children's) to ``cpu``, this script,
    and so every client it starts from now on, to the other CPUs; threads started later inherit the affinity of
    the thread starting them."""
    others = set(range(os.cpu_count() or 1)) - {cpu}
    if not others:
        raise SystemExit("--pin-brokers needs a machine of two CPUs or more")
    for broker in brokers:
        for pid in each_pid(broker.pid):
            for process in (pid, *descendants(pid)):
                pin_threads(process, {cpu})
    os.sched_setaffinity(0, others)
    print(f"pinned: the brokers' threads to CPU {cpu}, this script and the clients to CPUs "
          f"{','.join(map(str, sorted(others)))}", flush=True)


def describe_checkout(directory: Path) -> str:
    """The commit of a checkout and its uncommitted change, so that the output says what "ours B" ran."""
    commit = subprocess.run(["git", "-C", str(directory), "log", "-1", "--format=%h %s"], capture_output=True,
                            text=True).stdout.strip()
    changed = subprocess.run(["git", "-C", str(directory), "status", "--short", "--untracked-files=all"],
                             capture_output=True, text=True).stdout.strip()
    return f"the code of {directory} ({commit or 'not a git checkout'}; " + \
        (f"changed:\n{changed}\n)" if changed else "unchanged)")


def parse_settings(text: str) -> dict[str, object]:
    """``socket.send.buffer.bytes=102400,log.segment.bytes=1e9`` -> broker settings, values read as YAML."""
    import yaml

    settings = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"settings are KEY=VALUE[,KEY=VALUE...], got {item!r}")
        settings[key.strip()] = yaml.safe_load(value)
    return settings


def median_figure(figures: list[Figure]) -> Figure:
    """The run with the median rate (the lower middle one for an even count): its CPU and latency go with it."""
    return sorted(figures, key=lambda f: f.records_per_s)[(len(figures) - 1) // 2]


def median_runs(runs: list[tuple[Figure, Figure]]) -> tuple[Figure, Figure]:
    """(produce, consume) of a row's runs: the median run of each."""
    return median_figure([p for p, _ in runs]), median_figure([c for _, c in runs])


@dataclass
class Broker:
    name: str
    bootstrap: str
    pid: Pids
    data_dir: Path | None = None  # where its partitions' directories are (to see a deleted topic gone)


def ours_cluster(running: contextlib.ExitStack, directory: Path, nodes: int, settings: dict, name: str) -> Broker:
    """A cluster of ``nodes`` of our brokers on this machine, stopped by ``running``: the internal topics
    replicated on every node, the bench's topics not at all (their partitions spread over the nodes, as one
    broker of Kafka's spreads them over threads)."""
    from cluster_harness import BrokerCluster

    cluster = BrokerCluster(directory, size=nodes, timings={}, settings={
        **settings, "default.replication.factor": 1, "offsets.topic.replication.factor": nodes,
        "transaction.state.log.replication.factor": nodes})
    running.callback(cluster.stop)
    cluster.start()
    return Broker(name, cluster.bootstrap, tuple(node.proc.pid for node in cluster.brokers.values()), directory)


def measure_run(broker: Broker, client, row: Row, topic: str, count: int, idle: Broker | None = None
                ) -> tuple[Figure, Figure]:
    """One produce and one consume of a row on a new topic; with ``idle``, that other broker's CPU use
    meanwhile is printed (it should stay near zero)."""
    create_topic(broker.bootstrap, topic, row.partitions)
    if idle:
        os.sync()  # no dirty pages of earlier runs to be written back during this one
        idle_before, began = cpu_seconds(idle.pid), time.monotonic()
    produced = client.produce(broker.bootstrap, topic, row, count, broker.pid)
    consumed = client.consume(broker.bootstrap, topic, row, count, broker.pid)
    idle_note = ""
    if idle:
        idle_note = f" ({idle.name} idle at {100 * (cpu_seconds(idle.pid) - idle_before) / (time.monotonic() - began):.0f} %)"
        delete_topic(broker.bootstrap, topic)  # the disk holds one run's data at a time
        if broker.data_dir is not None:
            wait_until_gone(broker.data_dir, topic)
    print(f"  {broker.name:>8} {client.name:>5} {row.label():<40} produce {produced.records_per_s:>12,.0f}/s "
          f"consume {consumed.records_per_s:>12,.0f}/s{idle_note}; broker waiting for a CPU "
          f"{produced.broker_waited:.0f} % p, {consumed.broker_waited:.0f} % c; clients: page faults "
          f"{produced.clients_faults:,} p, {consumed.clients_faults:,} c, largest RSS "
          f"{produced.clients_max_rss_mb:.0f} MB p, {consumed.clients_max_rss_mb:.0f} MB c", flush=True)
    return produced, consumed


def warm_up(brokers: Sequence[Broker], row: Row, clients: list, records: dict[int, int], runs: int) -> None:
    """``runs`` unmeasured runs of ``row`` with each client on each broker, before anything is measured:
    Kafka's JVM compiles its produce and fetch paths in its first runs (its first run of a session was its
    slowest, bench/HISTORY.md), and a broker's page cache and buffers fill."""
    for number in range(runs):
        for client in clients:
            for index, broker in enumerate(brokers):
                print(f"  warm-up {number + 1}:", end="")
                measure_run(broker, client, row, f"bench-warm-{client.name}-{number}", records[row.size],
                            idle=brokers[1 - index] if len(brokers) == 2 else None)


def measure_alternating(brokers: tuple[Broker, Broker], rows: list[Row], clients: list, records: dict[int, int],
                        repeat: int, warm_runs: int = 0) -> list[dict]:
    """Every run of every row on each of the two brokers in turn; one result dict per broker, as
    measure_broker's."""
    warm_up(brokers, rows[0], clients, records, warm_runs)
    runs: dict[tuple[int, Row, str], list[tuple[Figure, Figure]]] = {}
    pairs = 0
    for row_number, row in enumerate(rows):
        for client in clients:
            for run in range(repeat):
                # which broker goes first alternates from pair to pair: in an A/A run (the same code as both
                # brokers) the second of a pair came out ahead more often than not
                for number in (0, 1) if pairs % 2 == 0 else (1, 0):
                    runs.setdefault((number, row, client.name), []).append(measure_run(
                        brokers[number], client, row, f"bench-{client.name}-{row_number}-{run}",
                        records[row.size], idle=brokers[1 - number]))
                pairs += 1
    results = []
    for number, broker in enumerate(brokers):
        result = {(row, name): median_runs(found) for (which, row, name), found in runs.items() if which == number}
        result[(LATENCY_ROW, "latency")] = fixed_rate_latency(broker, "bench-latency")
        results.append(result)
    return results


def measure_broker(broker: Broker, rows: list[Row], clients: list, records: dict[int, int], repeat: int = 1,
                   warm_runs: int = 0) -> dict:
    warm_up([broker], rows[0], clients, records, warm_runs)
    results = {}
    for row_number, row in enumerate(rows):
        for client in clients:
            runs = [measure_run(broker, client, row, f"bench-{client.name}-{row_number}-{run}", records[row.size])
                    for run in range(repeat)]
            results[(row, client.name)] = median_runs(runs)
    results[(LATENCY_ROW, "latency")] = fixed_rate_latency(broker, "bench-latency")
    return results


LATENCY_ROW = Row(100, 1, 1, "all")


def fixed_rate_latency(broker: Broker, topic: str) -> Figure:
    """The Java producer at LATENCY_RATE records/s for five seconds, acks=all, into a new one-partition topic."""
    create_topic(broker.bootstrap, topic, 1)
    return JavaTools().produce(broker.bootstrap, topic, LATENCY_ROW, 5 * LATENCY_RATE, broker.pid,
                               throughput=LATENCY_RATE)


def latency_runs(broker: Broker, runs: int) -> list[tuple[int, int]]:
    found = []
    for run in range(runs):
        result = fixed_rate_latency(broker, f"bench-latency-{run}")
        found.append((result.p50_ms, result.p99_ms))
        print(f"  {broker.name:>8} run {run + 1}: p50 {result.p50_ms} ms, p99 {result.p99_ms} ms", flush=True)
    return found


def print_latency_runs(ours: list[tuple[int, int]], kafkas: list[tuple[int, int]]) -> None:
    def median(values: list[int]) -> float:
        ordered = sorted(values)
        middle = len(ordered) // 2
        return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2

    print(f"\n{LATENCY_RATE:,} records/s, 100 B, 1 partition, acks=all, Java producer, 5 s per run")
    print("| run | ours p50 / p99 ms | Kafka p50 / p99 ms |")
    print("|---|---|---|")
    for run, ((p50, p99), (k50, k99)) in enumerate(zip(ours, kafkas, strict=True), 1):
        print(f"| {run} | {p50} / {p99} | {k50} / {k99} |")
    print(f"| median | {median([p for p, _ in ours]):g} / {median([p for _, p in ours]):g} | "
          f"{median([p for p, _ in kafkas]):g} / {median([p for _, p in kafkas]):g} |")


def print_table(rows: list[Row], clients: list, ours: dict, kafkas: dict, other: str = "Kafka") -> None:
    """The medians of both brokers, row by row; ``other`` names the second broker (Kafka, or ours configured
    otherwise)."""
    print()
    print(f"| client | row | produce ours | produce {other} | ratio | consume ours | consume {other} | ratio "
          f"| consume/produce ours | CPU % ours (broker / clients) | CPU % {other} (broker / clients) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        for client in clients:
            (op, oc), (kp, kc) = ours[(row, client.name)], kafkas[(row, client.name)]
            print(f"| {client.name} | {row.label()} | {op.records_per_s:,.0f} | {kp.records_per_s:,.0f} | "
                  f"{op.records_per_s / kp.records_per_s:.2f} | {oc.records_per_s:,.0f} | {kc.records_per_s:,.0f} | "
                  f"{oc.records_per_s / kc.records_per_s:.2f} | {oc.records_per_s / op.records_per_s:.2f} | "
                  f"{op.broker_cpu:.0f}/{op.clients_cpu:.0f} p, {oc.broker_cpu:.0f}/{oc.clients_cpu:.0f} c | "
                  f"{kp.broker_cpu:.0f}/{kp.clients_cpu:.0f} p, {kc.broker_cpu:.0f}/{kc.clients_cpu:.0f} c |")
    print()
    print(f"| produce latency (Java producer) | ours p50 / p99 | {other} p50 / p99 |")
    print("|---|---|---|")
    for row in rows:
        if ("java" in [c.name for c in clients]) and row.clients == 1:
            op, kp = ours[(row, "java")][0], kafkas[(row, "java")][0]
            print(f"| full speed, {row.label()} | {op.p50_ms:.0f} / {op.p99_ms:.0f} ms | "
                  f"{kp.p50_ms:.0f} / {kp.p99_ms:.0f} ms |")
    ol, kl = ours[(LATENCY_ROW, "latency")], kafkas[(LATENCY_ROW, "latency")]
    print(f"| {LATENCY_RATE:,} records/s, {LATENCY_ROW.label()} | {ol.p50_ms:.0f} / {ol.p99_ms:.0f} ms | "
          f"{kl.p50_ms:.0f} / {kl.p99_ms:.0f} ms |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one client per row only")
    parser.add_argument("--clients", default="kcat,java", help="comma-separated: kcat, java")
    parser.add_argument("--records-100", type=int, default=500_000, help="records per 100 B row")
    parser.add_argument("--records-1k", type=int, default=200_000, help="records per 1 KiB row")
    parser.add_argument("--rows", type=parse_rows, default=None,
                        help="only these rows: SIZE:PARTITIONS:CLIENTS[,...], e.g. 1024:6:4")
    parser.add_argument("--acks", type=parse_acks, default=("1", "all"), metavar="ACKS[,ACKS]",
                        help="the acks settings of each row, in the order they run (default 1,all)")
    parser.add_argument("--warm-up", type=int, default=1, metavar="N",
                        help="unmeasured runs of the first row with each client on each broker before the measured "
                             "ones (default 1; 0 for none, as before 2026-11-27)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per row and broker; the median run is reported")
    parser.add_argument("--alternate", action="store_true",
                        help="both brokers up; each run on ours is followed by the same run on Kafka")
    parser.add_argument("--latency-runs", type=int, default=0, help="only the fixed-rate latency row, N times")
    parser.add_argument("--clients-nice", type=int, default=0, choices=range(20), metavar="N",
                        help="run the clients at nice N (0-19), below the broker, whichever broker it is")
    parser.add_argument("--versus-ours", type=parse_settings, default=None, metavar="KEY=VALUE[,...]",
                        help="instead of Kafka, our broker with these settings as the second broker (implies "
                             "--alternate)")
    parser.add_argument("--versus-tree", type=checkout, default=None, metavar="DIR",
                        help="instead of Kafka, our broker running the code of the checkout DIR as the second "
                             "broker (implies --alternate)")
    parser.add_argument("--ours-nodes", type=int, default=1, metavar="N",
                        help="with --alternate: ours is a cluster of N of our brokers on this machine, each topic's "
                             "partitions spread over them")
    parser.add_argument("--ours-settings", type=parse_settings, default={}, metavar="KEY=VALUE[,...]",
                        help="our broker runs with these settings (against Kafka, or as the first of --versus-ours)")
    parser.add_argument("--broker-sessions", action="store_true",
                        help="with --alternate: each broker in a session of its own, so that the kernel's autogroup "
                             "scheduling shares the CPU between the broker and the clients as groups")
    parser.add_argument("--pin-consumers", default=None, metavar="CPUS",
                        help="run each kcat consumer on these CPUs only (taskset -c CPUS, e.g. 1): its two busy "
                             "threads take turns on one core instead of handing records across two")
    parser.add_argument("--pin-brokers", type=int, default=None, metavar="CPU",
                        help="with --alternate (or --versus-ours / --versus-tree): keep every thread of both brokers "
                             "to CPU, and this script and every client to the other CPUs (the per-core figures "
                             "of bench/broker_matrix.py's pinned arrangement)")
    parser.add_argument("--producer-metrics", action="store_true",
                        help="print the Java producers' batching and waiting metrics after each produce")
    args = parser.parse_args()
    global CLIENTS_NICE
    CLIENTS_NICE = args.clients_nice
    if reason := unavailable():
        parser.error(reason)
    if args.ours_nodes < 1 or (args.ours_nodes > 1 and not args.alternate):
        parser.error("--ours-nodes wants a count of 1 or more, and more than 1 only with --alternate")
    if args.pin_brokers is not None and not (args.alternate or args.versus_ours is not None
                                             or args.versus_tree is not None):
        parser.error("--pin-brokers goes with --alternate (or --versus-ours / --versus-tree)")
    if args.broker_sessions and (args.ours_nodes > 1 or not (args.alternate or args.versus_ours is not None
                                                             or args.versus_tree is not None)):
        parser.error("--broker-sessions goes with --alternate (or --versus-ours / --versus-tree), one node of ours")
    with tempfile.TemporaryDirectory(prefix="broker-vs-kafka-") as tmp:
        directory = Path(tmp)
        known = {"kcat": Kcat(directory, args.pin_consumers), "java": JavaTools(args.producer_metrics)}
        clients = [known[name] for name in args.clients.split(",")]
        rows = list(matrix(args.quick and args.rows is None, args.rows, args.acks))
        records = {100: args.records_100, 1024: args.records_1k}
        print(f"$ {shlex.join([os.path.relpath(sys.executable), *sys.argv])}")
        print(f"TCP congestion control: {congestion_control()}")
        if args.latency_runs:
            with BrokerProcess(directory / "ours", extra_config=args.ours_settings) as broker:
                ours_runs = latency_runs(Broker("ours", broker.bootstrap, broker.proc.pid), args.latency_runs)
            with KafkaServer(directory / "kafka") as kafka:
                kafka_runs = latency_runs(Broker("Kafka", kafka.bootstrap, kafka.process.pid), args.latency_runs)
            print_latency_runs(ours_runs, kafka_runs)
            return 0
        versus_ours = args.versus_ours is not None or args.versus_tree is not None
        if args.alternate or versus_ours:
            # Both brokers delete a deleted topic's files a minute later by default (log.segment.delete.delay.ms;
            # ours used to delete at once): left at a minute, Kafka's deletions of 1.5 GB fell into later runs,
            # ours more often than not (the runs came round every 20 s). Here both delete at once and each run
            # waits until the files are gone.
            at_once = {"log.segment.delete.delay.ms": 0}
            ours_config = {"group.initial.rebalance.delay.ms": 0, **at_once, **args.ours_settings}
            with contextlib.ExitStack() as running:
                if args.ours_nodes > 1:
                    ours_broker = ours_cluster(running, directory / "ours", args.ours_nodes, ours_config,
                                               f"ours x{args.ours_nodes}")
                    print(f"ours: a cluster of {args.ours_nodes} of our brokers on this machine, the topics' "
                          "partitions spread over them (CPU figures: all of them together)")
                else:
                    broker = running.enter_context(BrokerProcess(directory / "ours", extra_config=ours_config,
                                                                 new_session=args.broker_sessions))
                    ours_broker = Broker("ours", broker.bootstrap, broker.proc.pid, directory / "ours")
                if not versus_ours:
                    kafka = running.enter_context(KafkaServer(directory / "kafka", config=at_once,
                                                              new_session=args.broker_sessions))
                    second = Broker("Kafka", kafka.bootstrap, kafka.process.pid, kafka.directory)
                else:
                    settings = args.versus_ours or {}
                    other_code = [describe_checkout(args.versus_tree)] if args.versus_tree else []
                    other_settings = [", ".join(f"{key}={value}" for key, value in settings.items())] if settings else []
                    print("ours B: ours with " + " and with ".join(other_code + other_settings))
                    (directory / "other").mkdir()
                    other = running.enter_context(BrokerProcess(
                        directory / "other" / "data", extra_config={**ours_config, **settings},
                        env={"PYTHONPATH": str(args.versus_tree)} if args.versus_tree else None,
                        new_session=args.broker_sessions))
                    second = Broker("ours B", other.bootstrap, other.proc.pid, directory / "other" / "data")
                if args.pin_brokers is not None:
                    pin_brokers((ours_broker, second), args.pin_brokers)
                ours, seconds = measure_alternating((ours_broker, second), rows, clients, records, args.repeat,
                                                    args.warm_up)
            print_table(rows, clients, ours, seconds, second.name)
            return 0
        # Kafka's fixture starts groups without the initial rebalance delay; ours likewise.
        with BrokerProcess(directory / "ours", extra_config={"group.initial.rebalance.delay.ms": 0,
                                                             **args.ours_settings}) as broker:
            ours = measure_broker(Broker("ours", broker.bootstrap, broker.proc.pid), rows, clients, records,
                                  args.repeat, args.warm_up)
        with KafkaServer(directory / "kafka") as kafka:
            kafkas = measure_broker(Broker("Kafka", kafka.bootstrap, kafka.process.pid), rows, clients, records,
                                    args.repeat, args.warm_up)
    print_table(rows, clients, ours, kafkas)
    return 0


if __name__ == "__main__":
    sys.exit(main())
