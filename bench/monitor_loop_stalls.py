"""How long the monitor holds its event loop at fleet scale, idle and under live ingest: the longest stretches of
work, and their owners.

    .venv/bin/python bench/monitor_loop_stalls.py [--groups 2000] [--partitions 50000] [--big-groups 10]
                                                  [--seconds 30] [--top 12] [--broker-dir DIR]
                                                  [--live SECONDS] [--commit-interval 5] [--pin]

Run it with ``PYTHONPATH=<tree>`` to measure that tree's code (else the installed checkout's is imported).

The fleet of ``bench/monitor_fleet_daemon.py`` (its ``Fleet``: groups each on a topic of their own, caught up,
and ``--big-groups`` in ERR on one 1,000-partition topic, every partition committed ten times) on our own broker
(``burrowpy broker``, a process of its own), read by the whole monitor running in this process
(``burrowpy.daemon.Monitor``, configured as ``burrowpy serve`` would be: the kafka cluster and consumer modules,
offset-refresh 10 s, the dashboard's trend sampler every 5 s, the HTTP server). Once every commit is in
storage and a refresh has passed, for ``--seconds`` nothing commits and nobody asks, and:

- a ticker asks the loop to wake it every millisecond (``call_later``): how late each wake-up is, which is how
  long a request arriving at that moment would wait before the loop even reads it (the longest, p99.9, p99);
- every callback the loop runs is timed (``asyncio.events.Handle._run`` wrapped), in wall time and in the loop
  thread's CPU time (``time.thread_time``: a stretch much longer than its CPU waited for the core, another
  process's, or for the GIL, another thread's): those over 2 ms, the most CPU-costly kinds first, each named
  by the coroutine of its task (a task step is one stretch of work between two awaits); within them, the
  answers aiokafka's connections decode (``AIOKafkaConnection._handle_frame``, named ``decode`` and the
  request's class), the storage requests its workers handle (each public method of ``StorageState``, named
  ``storage`` and the method) and the garbage collector's passes (``gc.callbacks``, named ``gc generation N``), which
  run inside whatever callback allocated last; every collector pass's CPU is also summed by generation;
- CPU seconds (``time.process_time``, this process: the monitor) per offset-refresh period;
- with ``--cpu-only``, no ticker and no callback timing in the idle period (their own CPU is 0.3-0.5 s per
  refresh period): the CPU seconds are then the monitor's alone;
- with ``--census``, after the idle period (or the live one, then also the kinds of the cyclic garbage a full
  pass finds): the objects the collector tracks, by generation and by type (the
  most numerous), and how long a full pass (``gc.collect(2)``) takes then, three times.

With ``--live SECONDS``, after the idle period, as many seconds of live ingest (``monitor_fleet_daemon``'s live
phase): every fleet group but the big ones commits all its partitions every ``--commit-interval`` seconds,
through broker/client.py from a process of its own, while a client in another process asks each big group's
``/status`` and ``/lag`` in turn over HTTP, every request a cache miss (a group is asked again only after
expire-cache has passed); the answers' p50 / p99 / p99.9 / max are printed with the loop's wake-up lateness and
its longest callbacks by owner over the same seconds. ``--seconds 0`` skips the idle period.

With ``--pin`` this process (the monitor and its threads) runs on CPU 0 alone, and the broker, the committing
process and the HTTP client on CPU 1 (``sched_setaffinity``, every thread), so the figures are the monitor's
code's rather than the scheduler's sharing of two cores between them.

As ``burrowpy serve`` does, the live objects are frozen out of the collector's full passes
(``burrowpy.daemon.GarbageFreezer``, started as serve starts it): its first refreeze just before the idle period
(serve: a minute after the start), then on its schedule; that refreeze's own full pass is printed. ``--no-freeze``
leaves the collector as it was before the freezer. Then, as serve runs it (from its start), the young collector
(``burrowpy.daemon.YoungCollector``, in a tree that has it): young passes paced on the loop, their survivors frozen;
``--young off`` leaves it out, ``--young pace`` paces without freezing, ``--young freeze`` is serve's. After the live
period the objects generation 2 holds (promoted since the refreeze: what full passes would walk) are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import json
import os
import re
import shlex
import sys
import tempfile
import time
import tracemalloc
from collections import defaultdict
from pathlib import Path
from typing import Any

import structlog

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from monitor_fleet_daemon import INTERVALS, Fleet, fleet_arguments, fleet_on_our_broker  # noqa: E402

from burrowpy import daemon  # noqa: E402
from burrowpy.config import parse_config  # noqa: E402
from burrowpy.daemon import GarbageFreezer, Monitor, tune_garbage_collector  # noqa: E402
from burrowpy.protocol import FetchConsumers  # noqa: E402

OFFSET_REFRESH = 10
TICK_S = 0.001
EXPIRE_CACHE_S = 1
MONITOR_CPU, LOAD_CPU = 0, 1  # with --pin

# The live ingest's committing clients, a process of their own: monitor_fleet_daemon's live_commits for SECONDS.
COMMITTER = r"""
import asyncio, json, sys
paths, bootstrap, shape, seconds, interval, connections = json.loads(sys.argv[1])
sys.path[:0] = paths
from monitor_fleet_daemon import Fleet, live_commits

async def main() -> int:
    stop, sent = asyncio.Event(), [0]
    committing = asyncio.create_task(live_commits(bootstrap, Fleet.generate(*shape), interval, connections, stop,
                                                  sent))
    await asyncio.wait([committing], timeout=seconds)
    stop.set()  # the committers end after their current commit, or now if they sleep until their next
    await asyncio.wait([committing], timeout=1)
    committing.cancel()
    await asyncio.gather(committing, return_exceptions=True)
    return sent[0]

print(asyncio.run(main()), flush=True)
"""


def describe(handle: asyncio.Handle) -> str:
    """What a callback is: the coroutine of the task it steps, else the function's qualified name."""
    callback = getattr(handle, "_callback", None)
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coro = owner.get_coro()
        return getattr(coro, "__qualname__", repr(coro))
    return getattr(callback, "__qualname__", repr(callback))


class LoopTimer:
    """Times every callback the loop runs (``Handle._run``), keeping the longest per kind and overall."""

    def __init__(self) -> None:
        self.longest: list[tuple[float, str]] = []
        self.by_kind: dict[str, list[float]] = defaultdict(list)
        # the thread CPU time of each of those (same order): a stretch much longer than its CPU waited for the
        # GIL (a thread of this process) or for the core (another process)
        self.cpu_by_kind: dict[str, list[float]] = defaultdict(list)
        self.gc_cpu: dict[int, list[float]] = {0: [], 1: [], 2: []}  # every pass's thread CPU, by generation
        self.recording = False
        self._original: Any = None
        self._handle_frame: Any = None
        self._gc_pass: Any = None
        self._state_methods: dict[str, Any] = {}

    def install(self) -> None:
        from aiokafka.conn import AIOKafkaConnection

        original = self._original = asyncio.events.Handle._run
        timer = self
        handle_frame = self._handle_frame = AIOKafkaConnection._handle_frame

        def timed_frame(connection: Any, frame: Any) -> None:
            if not timer.recording or not connection._requests:
                handle_frame(connection, frame)
                return
            request = connection._requests[0][1]
            started, cpu = time.perf_counter(), time.thread_time()
            handle_frame(connection, frame)
            elapsed = time.perf_counter() - started
            if elapsed > 0.002:
                timer.by_kind[f"decode {type(request).__name__}"].append(elapsed)
                timer.cpu_by_kind[f"decode {type(request).__name__}"].append(time.thread_time() - cpu)

        AIOKafkaConnection._handle_frame = timed_frame  # type: ignore[method-assign]
        collecting: list[float] = []

        def gc_pass(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                collecting[:] = [time.perf_counter(), time.thread_time()]
            elif collecting and timer.recording:
                timer.gc_cpu[info["generation"]].append(time.thread_time() - collecting[1])
                elapsed = time.perf_counter() - collecting[0]
                if elapsed > 0.002:
                    timer.by_kind[f"gc generation {info['generation']}"].append(elapsed)
                    timer.cpu_by_kind[f"gc generation {info['generation']}"].append(
                        time.thread_time() - collecting[1])

        self._gc_pass = gc_pass
        gc.callbacks.append(gc_pass)
        self._timed_state_methods()

        def timed_run(handle: asyncio.Handle) -> None:
            if not timer.recording:
                original(handle)
                return
            started, cpu = time.perf_counter(), time.thread_time()
            original(handle)
            elapsed = time.perf_counter() - started
            if elapsed > 0.002:
                kind = describe(handle)
                timer.by_kind[kind].append(elapsed)
                timer.cpu_by_kind[kind].append(time.thread_time() - cpu)

        asyncio.events.Handle._run = timed_run  # type: ignore[method-assign, assignment]

    def _timed_state_methods(self) -> None:
        """Storage's requests, within its workers' passes: each public method of ``StorageState`` timed, those
        over 2 ms named ``storage METHOD`` (a pass over 2 ms without one is many requests, none of them long)."""
        from burrowpy.storage.state import StorageState

        timer = self
        self._state_methods = {}
        for name, method in list(vars(StorageState).items()):
            if name.startswith("_") or not callable(method):
                continue
            self._state_methods[name] = method

            def timed(*args: Any, _method: Any = method, _name: str = name) -> Any:
                if not timer.recording:
                    return _method(*args)
                started, cpu = time.perf_counter(), time.thread_time()
                try:
                    return _method(*args)
                finally:
                    elapsed = time.perf_counter() - started
                    if elapsed > 0.002:
                        timer.by_kind[f"storage {_name}"].append(elapsed)
                        timer.cpu_by_kind[f"storage {_name}"].append(time.thread_time() - cpu)

            setattr(StorageState, name, timed)

    def uninstall(self) -> None:
        from aiokafka.conn import AIOKafkaConnection

        from burrowpy.storage.state import StorageState

        for name, method in self._state_methods.items():
            setattr(StorageState, name, method)

        asyncio.events.Handle._run = self._original  # type: ignore[method-assign]
        AIOKafkaConnection._handle_frame = self._handle_frame  # type: ignore[method-assign]
        gc.callbacks.remove(self._gc_pass)


async def ticker(lateness: list[float], stop: asyncio.Event) -> None:
    """Wake every ``TICK_S``; record how late each wake-up was."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        woken = loop.create_future()
        due = loop.time() + TICK_S
        loop.call_at(due, woken.set_result, None)
        await woken
        lateness.append(loop.time() - due)


class MetadataCost:
    """The CPU time of the whole-cluster Metadata readings: each answer's decode (our codec, in a thread: topic
    health's and the cluster module's readings) and the cluster module's pass over it (``partition_leaders``, in a
    thread), counted while :attr:`recording`. Thread CPU time of the threads doing them, so other work of the
    process at the same time is not in it."""

    def __init__(self) -> None:
        self.recording = False
        self.decodes: list[float] = []
        self.passes: list[float] = []

    def install(self) -> None:
        from broker.protocol.api import ApiKey
        from burrowpy.coordinators import cluster_kafka, codec_request

        decode, leaders = codec_request.LaterAnswer.decode, cluster_kafka.partition_leaders
        cost = self

        def timed_decode(answer: codec_request.LaterAnswer) -> dict[str, Any]:
            began = time.thread_time()
            try:
                return decode(answer)
            finally:
                if cost.recording and answer.api_key == ApiKey.METADATA:
                    cost.decodes.append(time.thread_time() - began)

        def timed_leaders(*args: Any) -> Any:
            began = time.thread_time()
            try:
                return leaders(*args)
            finally:
                if cost.recording:
                    cost.passes.append(time.thread_time() - began)

        codec_request.LaterAnswer.decode = timed_decode  # type: ignore[method-assign, assignment]
        cluster_kafka.partition_leaders = timed_leaders  # type: ignore[assignment]


def pin(pid: int, cpu: int) -> None:
    """Run every thread of process ``pid`` on ``cpu`` alone (threads it starts later inherit it)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), {cpu})
        except ProcessLookupError:  # a thread that ended meanwhile
            pass


def percentiles_ms(samples: list[float]) -> dict[str, float]:
    """p50 / p99 / p99.9 / max of times in seconds, in ms."""
    ordered = sorted(samples)
    at = lambda share: ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000  # noqa: E731
    return {"p50": at(0.5), "p99": at(0.99), "p999": at(0.999), "max": ordered[-1] * 1000, "count": len(ordered)}


class Window:
    """What the loop did over a span: its wake-ups' lateness (the ticker), its longest callbacks by owner
    (:class:`LoopTimer`) and this process's CPU."""

    def __init__(self, timer: LoopTimer, ticking: bool = True) -> None:
        """``ticking`` False: the CPU alone (no ticker, and the callbacks not timed)."""
        self.timer = timer
        self.ticking = ticking
        self.lateness: list[float] = []
        self._stop = asyncio.Event()
        self._tick: asyncio.Task[None] | None = None
        self._cpu = 0.0
        self._began = 0.0

    def open(self) -> None:
        self.timer.by_kind.clear()
        self.timer.cpu_by_kind.clear()
        for passes in self.timer.gc_cpu.values():
            passes.clear()
        self._tick = asyncio.create_task(ticker(self.lateness, self._stop) if self.ticking else self._stop.wait())
        self.timer.recording = self.ticking
        self._cpu, self._began = time.process_time(), time.monotonic()

    async def close(self) -> dict[str, Any]:
        cpu, seconds = time.process_time() - self._cpu, time.monotonic() - self._began
        self.timer.recording = False
        self._stop.set()
        assert self._tick is not None
        await self._tick
        kinds = sorted(((max(times), max(self.timer.cpu_by_kind[kind]), len(times), sum(times),
                         sum(self.timer.cpu_by_kind[kind]), kind) for kind, times in self.timer.by_kind.items()),
                       key=lambda row: row[1], reverse=True)
        return {"seconds": seconds, "cpu_s": cpu, "late_ms": percentiles_ms(self.lateness) if self.lateness else None, "kinds": kinds,
                "gc": {generation: list(cpu) for generation, cpu in self.timer.gc_cpu.items()}}


async def live_ingest(bootstrap: str, port: int, fleet: Fleet, shape: tuple[int, int, int, int], seconds: float,
                      interval: float, connections: int, pinned: bool, timer: LoopTimer) -> dict[str, Any]:
    """``seconds`` of live commits from one process while a client process times the big groups' answers."""
    from monitor_fleet_daemon import CLIENT

    prefix = ["taskset", "-c", str(LOAD_CPU)] if pinned else []
    paths = [str(ROOT / "bench"), str(ROOT / "tests" / "integration")]
    committer = await asyncio.create_subprocess_exec(
        *prefix, sys.executable, "-c", COMMITTER,
        json.dumps([paths, bootstrap, shape, seconds, interval, connections]), stdout=asyncio.subprocess.PIPE)
    window = Window(timer)
    window.open()
    partitions = fleet.groups[fleet.big[0]][1]
    client = await asyncio.create_subprocess_exec(
        *prefix, sys.executable, "-c", CLIENT, json.dumps({"burrowpy": port}), ",".join(fleet.big), str(partitions),
        str(seconds), str(EXPIRE_CACHE_S + 0.1), stdout=asyncio.subprocess.PIPE)
    answers, _ = await client.communicate()
    sent, _ = await committer.communicate()
    figures = await window.close()
    if client.returncode or committer.returncode:
        raise RuntimeError(f"the HTTP client (exit status {client.returncode}) or the committer "
                           f"({committer.returncode}) failed")
    times = json.loads(answers)["burrowpy"]
    return figures | {"commits_per_s": int(sent) / figures["seconds"],
                      "status_ms": percentiles_ms(times["status"]), "lag_ms": percentiles_ms(times["lag"])}


def config(bootstrap: str, port: int) -> dict[str, Any]:
    return {
        "general": {"pidfile": ""},
        "logging": {"level": "error"},
        "httpserver": {"default": {"address": f"127.0.0.1:{port}"}},
        "storage": {"default": {"class-name": "inmemory", "intervals": INTERVALS}},
        "evaluator": {"default": {"class-name": "caching", "expire-cache": EXPIRE_CACHE_S}},
        "cluster": {"local": {"class-name": "kafka", "servers": [bootstrap], "offset-refresh": OFFSET_REFRESH,
                              "topic-refresh": 60}},
        "consumer": {"local": {"class-name": "kafka", "cluster": "local", "servers": [bootstrap]}},
    }


def census(top: int) -> list[str]:
    """The collector's tracked objects by generation and by type, then three timed full passes."""
    lines = ["tracked objects by generation: " + " / ".join(
        f"{len(gc.get_objects(generation)):,}" for generation in range(3))]
    if hasattr(gc, "get_freeze_count"):
        lines.append(f"frozen (gc.freeze, not walked): {gc.get_freeze_count():,}")
    kinds: dict[str, int] = defaultdict(int)
    for obj in gc.get_objects():
        kinds[f"{type(obj).__module__}.{type(obj).__qualname__}"] += 1
    lines.append(f"most numerous of {sum(kinds.values()):,} tracked:")
    for kind, count in sorted(kinds.items(), key=lambda item: -item[1])[:top]:
        lines.append(f"  {count:9,d}  {kind}")
    del kinds
    passes = []
    for _ in range(3):
        started = time.perf_counter()
        gc.collect(2)
        passes.append((time.perf_counter() - started) * 1000)
    lines.append("gc.collect(2): " + " / ".join(f"{ms:.0f}" for ms in passes) + " ms")
    return lines


class MallocHeap(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (every arena summed)."""

    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


class MemoryReport:
    """``--memory``: the process's memory at each phase of the run (:meth:`phase`), and what ``malloc_trim(0)``
    gives back at each.

    For each phase: VmRSS now and VmHWM since the previous phase (the peak is reset after each reading by writing
    5 to ``/proc/self/clear_refs``), anonymous and file-backed resident memory (``smaps_rollup``), glibc's heaps
    (``malloc_info``: the arenas, each thread that allocates has one, their size from the system and what of it
    is free; and the blocks of 128 KiB or more malloc maps on their own), and the memory Python's allocators hold
    (``sys._debugmallocstats`` is too long; ``tracemalloc`` with ``--tracemalloc N``: the current and peak traced
    memory, and the N largest allocation sites by file:line, which costs a lot of CPU and memory itself).
    """

    def __init__(self, trace_frames: int, top: int, trim: bool) -> None:
        self.libc = ctypes.CDLL("libc.so.6")
        self.libc.fopen.restype = ctypes.c_void_p
        self.libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        self.libc.fclose.argtypes = [ctypes.c_void_p]
        self.libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
        self.libc.mallinfo2.restype = MallocHeap
        self.top = top
        self.trim = trim
        self.rows: list[dict[str, Any]] = []
        self.tops: list[tuple[str, list[str]]] = []
        self._start_snapshot: tracemalloc.Snapshot | None = None
        self._highest_snapshot: tracemalloc.Snapshot | None = None
        self._highest = 0
        if trace_frames:
            tracemalloc.start(trace_frames)

    @staticmethod
    def _status() -> dict[str, int]:
        fields = {}
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "Threads"):
                fields[key] = int(value.split()[0])
        return fields

    def _heaps(self) -> tuple[int, int, int, int]:
        """glibc's arenas: (count, bytes from the system, bytes free in them, bytes of separately mapped blocks)."""
        with tempfile.NamedTemporaryFile(suffix=".xml") as file:
            handle = self.libc.fopen(file.name.encode(), b"w")
            self.libc.malloc_info(0, handle)
            self.libc.fclose(handle)
            text = Path(file.name).read_text()
        heaps = text.count("<heap nr=")
        tail = text[text.rindex("</heap>"):]  # the totals over every heap
        system = int(re.search(r'<system type="current" size="(\d+)"', tail)[1])  # type: ignore[index]
        free = sum(int(size) for size in re.findall(r'<total type="(?:fast|rest)" count="\d+" size="(\d+)"', tail))
        mapped = int(re.search(r'<total type="mmap" count="\d+" size="(\d+)"', tail)[1])  # type: ignore[index]
        return heaps, system, free, mapped

    def phase(self, name: str) -> None:
        """Read everything now, as phase ``name`` (its peak: since the previous phase); with ``trim``, also
        what ``malloc_trim(0)`` then gives back (the reading itself is before the trim)."""
        status = self._status()
        heaps, system, free, mapped = self._heaps()
        row: dict[str, Any] = {"phase": name, "rss": status["VmRSS"] / 1024, "hwm": status["VmHWM"] / 1024,
                               "anon": status["RssAnon"] / 1024, "file": status["RssFile"] / 1024,
                               "threads": status["Threads"], "arenas": heaps, "malloc_system": system / 2**20,
                               "malloc_free": free / 2**20, "malloc_mapped": mapped / 2**20}
        if tracemalloc.is_tracing():
            current, peak = tracemalloc.get_traced_memory()
            row["traced"], row["traced_peak"] = current / 2**20, peak / 2**20
            snapshot = tracemalloc.take_snapshot().filter_traces(
                [tracemalloc.Filter(False, tracemalloc.__file__)])
            self.tops.append((name, [f"{stat.size / 2**20:8.1f} MiB {stat.count:9,d}  {stat.traceback[0]}"
                                     for stat in snapshot.statistics("lineno")[:self.top]]))
            if self._highest_snapshot is not None and self._start_snapshot is not None:
                grew = self._highest_snapshot.compare_to(self._start_snapshot, "lineno")
                self.tops.append((f"{name}: its highest sample ({self._highest / 2**20:.1f} MiB traced) against its "
                                  f"start, the largest growth", [
                                      f"{stat.size_diff / 2**20:+8.1f} MiB {stat.count_diff:+9,d}  {stat.traceback[0]}"
                                      for stat in grew[:self.top]]))
            self._start_snapshot = snapshot
            self._highest, self._highest_snapshot = tracemalloc.get_traced_memory()[0], None
            del snapshot
            tracemalloc.reset_peak()
        if self.trim:
            self.libc.malloc_trim(0)
            row["rss_trimmed"] = self._status()["VmRSS"] / 1024
        self.rows.append(row)
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here on: the next phase's peak

    async def watch_peaks(self, every_s: float = 0.05, step: int = 4 << 20) -> None:
        """With tracemalloc: every ``every_s`` of the loop, a snapshot whenever the traced memory is ``step`` above
        the highest seen in this phase; each phase's highest is compared with the phase's start by file:line
        (:meth:`phase`), which names what a transient peak held. Polled from the loop, so it sees what is held
        across awaits (a fetch's answer, a decoded Metadata answer, an HTTP answer being written), not what one
        callback allocates and frees."""
        while True:
            await asyncio.sleep(every_s)
            current, _ = tracemalloc.get_traced_memory()
            if current > self._highest + step:
                self._highest = current
                self._highest_snapshot = tracemalloc.take_snapshot()

    def print(self) -> None:
        print("memory by phase (MiB; peak: VmHWM since the phase before; malloc: glibc's arenas from the system, "
              "free in them, and blocks mapped on their own; trimmed: VmRSS after malloc_trim(0)):")
        traced = any("traced" in row for row in self.rows)
        print(f"  {'phase':<28} {'RSS':>7} {'peak':>7} {'anon':>7} {'file':>6} {'thr':>4} {'arenas':>6} "
              f"{'malloc':>7} {'free':>7} {'mapped':>7} {'trimmed':>8}" + (f" {'traced':>7} {'peak':>7}" if traced else ""))
        for row in self.rows:
            line = (f"  {row['phase']:<28} {row['rss']:7.1f} {row['hwm']:7.1f} {row['anon']:7.1f} {row['file']:6.1f} "
                    f"{row['threads']:4d} {row['arenas']:6d} {row['malloc_system']:7.1f} {row['malloc_free']:7.1f} "
                    f"{row['malloc_mapped']:7.1f} {row.get('rss_trimmed', 0):8.1f}")
            if "traced" in row:
                line += f" {row['traced']:7.1f} {row['traced_peak']:7.1f}"
            print(line)
        print(f"peak RSS over the run: {max(row['hwm'] for row in self.rows):.1f} MiB")
        for name, lines in self.tops:
            print(f"tracemalloc, the largest allocation sites at '{name}' (size, blocks, where):")
            for line in lines:
                print("  " + line)


async def measure(bootstrap: str, fleet: Fleet, seconds: float, top: int = 0, freeze: bool = True,
                  live: dict[str, Any] | None = None, ticking: bool = True,
                  memory: MemoryReport | None = None, young: str = "serve") -> dict[str, Any]:
    """The idle period's figures (and with ``live``, the keyword arguments of :func:`live_ingest` but the ones
    given here, the live period's after it); ``ticking`` False: the idle period's CPU alone (``--cpu-only``)."""
    from harness import free_port

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    port = free_port()
    monitor = Monitor(parse_config(config(bootstrap, port), "burrowpy.yaml", {}), structlog.get_logger())
    timer = LoopTimer()
    timed = ticking or live is not None  # (the wrapped callbacks cost CPU even when not recording)
    if timed:
        timer.install()
    metadata_cost = MetadataCost()
    metadata_cost.install()
    freezer = GarbageFreezer(structlog.get_logger(), first_s=0)
    young_kind = getattr(daemon, "YoungCollector", None)  # (a tree before it: none)
    if young_kind is None or young == "off":
        young_collector = None
    else:
        young_collector = young_kind(freeze_survivors=young == "freeze") if young != "serve" else young_kind()
    started = time.monotonic()
    watching = asyncio.create_task(memory.watch_peaks()) if memory and tracemalloc.is_tracing() else None
    await monitor.start()
    if memory:
        memory.phase("monitor started")
    live_figures = None
    try:
        ctx = monitor.ctx
        wanted = set(fleet.groups) | set(fleet.markers)
        while True:
            listed = await ctx.fetch(FetchConsumers(cluster="local", reply=ctx.new_reply())) or []
            if wanted <= set(listed):
                break
            if time.monotonic() - started > 600:
                raise RuntimeError(f"{len(wanted - set(listed))} groups still unread after 600 s")
            await asyncio.sleep(0.5)
        read_s = time.monotonic() - started
        print(f"every commit read: {read_s:.1f} s after start", flush=True)
        if memory:
            memory.phase("every commit read")
        await asyncio.sleep(OFFSET_REFRESH + 1)  # a refresh with every commit in storage, and a sampler round
        if memory:
            memory.phase("a refresh later")
        refreeze_ms: float | None = None
        if freeze:
            # serve's freezer: its first refreeze now (serve: a minute after the start), then on its schedule
            freezer.start()
            while freezer.refreezes < 1:
                await asyncio.sleep(0.01)
        if young_collector is not None:  # serve starts it with the freezer
            young_collector.start()
            refreeze_ms = getattr(freezer, "last_refreeze_ms", None)  # (not timed by the freezer before w10/1)
        window = Window(timer, ticking)
        window.open()
        metadata_cost.recording = True
        await asyncio.sleep(seconds)
        metadata_cost.recording = False
        idle = await window.close()
        if memory:
            memory.phase(f"idle {seconds:.0f} s")
        if live is not None:
            frozen_before = gc.get_freeze_count()
            live_figures = await live_ingest(bootstrap, port, fleet, timer=timer, **live)
            if memory:
                memory.phase(f"live {live['seconds']:.0f} s")
            frozen_after = gc.get_freeze_count()
            oldest_after = len(gc.get_objects(generation=2))  # promoted since the freeze, walked by full passes
            # what of it was cyclic garbage, kept frozen (or unwalked) until the freezer's next refreeze
            gc.unfreeze()
            if top:
                gc.set_debug(gc.DEBUG_SAVEALL)  # the garbage found is kept in gc.garbage, to be counted
            garbage_after = gc.collect()
            gc.set_debug(0)
            garbage_kinds: dict[str, int] = defaultdict(int)
            for obj in gc.garbage:
                garbage_kinds[f"{type(obj).__module__}.{type(obj).__qualname__}"] += 1
            gc.garbage.clear()
            gc.freeze()
        counted = census(top) if top else []  # after the live period if there is one
    finally:
        if watching is not None:
            watching.cancel()
        if timed:
            timer.uninstall()
        if young_collector is not None:
            await young_collector.stop()
        await freezer.stop()
        gc.unfreeze()
        await monitor.stop()
    if live_figures is not None:
        live_figures["young_freezes"] = getattr(freezer, "young_freezes", 0)
        live_figures["young_collector"] = (None if young_collector is None else
                                           (young, young_collector.passes, young_collector.interval_s))
        live_figures["oldest_after"] = oldest_after
        live_figures["frozen"] = (frozen_before, frozen_after, garbage_after)
        live_figures["garbage_kinds"] = sorted(garbage_kinds.items(), key=lambda item: -item[1])[:top]
    return {"read_s": read_s, "cpu_per_refresh_s": idle["cpu_s"] / (seconds / OFFSET_REFRESH) if seconds else 0.0,
            "idle": idle, "census": counted, "refreeze_ms": refreeze_ms, "metadata_decodes": metadata_cost.decodes,
            "metadata_passes": metadata_cost.passes, "live": live_figures}


def print_kinds(kinds: list[tuple[float, float, int, float, float, str]], top: int) -> None:
    print("callbacks over 2 ms, by what they run, the most CPU-costly first: the longest one's thread CPU and the "
          "longest wall time, count, total CPU and wall time:")
    for longest, longest_cpu, count, total, total_cpu, kind in kinds[:top]:
        print(f"  {longest_cpu * 1000:8.1f} ms CPU ({longest * 1000:7.1f} wall)  {count:6d}  {total_cpu:7.3f} s CPU "
              f"({total:7.3f} wall)  {kind}")


def peak_rss_mib() -> float:
    """This process's peak resident set so far (VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def gc_line(figures: dict[str, Any]) -> str:
    """Every collector pass of the window by generation: count, thread CPU in all and of the longest."""
    passes = figures["gc"]
    return "collector passes (all): " + "; ".join(
        f"generation {generation}: {len(cpu)}, {sum(cpu) * 1000:.0f} ms CPU, longest {max(cpu, default=0) * 1000:.1f}"
        for generation, cpu in sorted(passes.items()))


def late(figures: dict[str, Any]) -> str:
    late_ms = figures["late_ms"]
    if late_ms is None:
        return "loop wake-ups not timed (--cpu-only)"
    return (f"loop wake-ups ({late_ms['count']:,}) late by p50 {late_ms['p50']:.1f} / p99 {late_ms['p99']:.1f} / "
            f"p99.9 {late_ms['p999']:.1f} / max {late_ms['max']:.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    fleet_arguments(parser)
    parser.add_argument("--seconds", type=float, default=30.0, help="idle seconds measured")
    parser.add_argument("--top", type=int, default=12, help="kinds of callback listed")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--no-freeze", action="store_true", help="do not freeze the live objects out of the "
                        "collector's full passes (as burrowpy serve did before its GarbageFreezer)")
    parser.add_argument("--census", type=int, default=0, metavar="TOP", help="after the idle period, count the "
                        "collector's tracked objects (the TOP most numerous types) and time full passes")
    parser.add_argument("--cpu-only", action="store_true", help="no ticker and no callback timing, which cost "
                        "0.3-0.5 s of CPU per refresh period themselves: the monitor's own CPU")
    parser.add_argument("--broker-dir", type=Path, help="keep the broker's data here; a directory that holds it "
                        "from an earlier run with the same fleet is used as it is (the fleet is not made again)")
    parser.add_argument("--live", type=float, default=0.0, metavar="SECONDS",
                        help="after the idle period, seconds of live ingest while a client times the big groups' "
                             "/status and /lag")
    parser.add_argument("--commit-interval", type=float, default=5.0,
                        help="seconds between a group's live commits")
    parser.add_argument("--young", choices=("serve", "off", "pace", "freeze"), default="serve",
                        help="the young collector (burrowpy.daemon.YoungCollector, if the tree has it): as burrowpy "
                        "serve runs it, none, pacing alone, or pacing with the survivors frozen")
    parser.add_argument("--pin", action="store_true", help=f"the monitor (this process) on CPU {MONITOR_CPU} alone; "
                        f"the broker, the committing clients and the HTTP client on CPU {LOAD_CPU}")
    parser.add_argument("--no-tune-malloc", action="store_true", help="leave glibc malloc as it is (burrowpy serve "
                        "sets its mmap threshold and arena count: burrowpy.daemon.tune_malloc)")
    parser.add_argument("--memory", action="store_true", help="the process's memory at each phase: RSS, peak, "
                        "glibc's arenas (MemoryReport)")
    parser.add_argument("--memory-trim", action="store_true", help="with --memory, malloc_trim(0) after each "
                        "phase's reading, and the RSS after it (the phases after are then of a trimmed process)")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="TOP", help="with --memory, trace Python's "
                        "allocations (from the start: costly) and list the TOP largest sites at each phase")
    args = parser.parse_args()
    memory = MemoryReport(1 if args.tracemalloc else 0, args.tracemalloc, args.memory_trim) if args.memory else None
    if memory:
        memory.phase("imports (bench and burrowpy)")
    tune_garbage_collector()  # as burrowpy serve does
    if not args.no_tune_malloc:
        tuned = getattr(daemon, "tune_malloc", None)  # (a tree before it: not tuned)
        print(f"malloc tuned as burrowpy serve tunes it: {bool(tuned and tuned())}")
    fleet = Fleet.generate(args.groups, args.partitions, args.big_groups, args.big_partitions)
    if memory:
        memory.phase("the bench's fleet generated")
    print(f"$ {shlex.join([os.path.relpath(sys.executable), *sys.argv])}")
    print(f"fleet: {len(fleet.groups):,} groups, {fleet.partitions:,} partitions, load {os.getloadavg()[0]:.2f}",
          flush=True)
    live = None
    if args.live:
        live = {"shape": (args.groups, args.partitions, args.big_groups, args.big_partitions), "seconds": args.live,
                "interval": args.commit_interval, "connections": args.connections, "pinned": args.pin}
    with fleet_on_our_broker(fleet, args.broker_dir, args.connections) as broker:
        if args.pin:
            assert broker.proc is not None
            pin(broker.proc.pid, LOAD_CPU)
            pin(os.getpid(), MONITOR_CPU)
        figures = asyncio.run(measure(broker.bootstrap, fleet, args.seconds, args.census, not args.no_freeze,
                                      live, not args.cpu_only, memory, args.young))
    if memory:
        memory.print()
    if args.seconds:
        print(f"idle {args.seconds:.0f} s, load {os.getloadavg()[0]:.2f} after: CPU per offset refresh "
              f"{figures['cpu_per_refresh_s']:.3f} s; {late(figures['idle'])}")
        decodes, passes = figures["metadata_decodes"], figures["metadata_passes"]
        per_minute = 60 / args.seconds
        print(f"whole-cluster Metadata: {len(decodes)} answers decoded ({sum(decodes):.3f} s CPU), "
              f"{len(passes)} cluster-module passes ({sum(passes):.3f} s CPU); per minute "
              f"{(sum(decodes) + sum(passes)) * per_minute:.3f} s CPU")
    if args.seconds:
        print_kinds(figures["idle"]["kinds"], args.top)
        print(gc_line(figures["idle"]))
    if figures["refreeze_ms"] is not None:
        print(f"the first refreeze (unfreeze, full pass, freeze): {figures['refreeze_ms']:.0f} ms")
    for line in figures["census"]:
        print(line)
    live_figures = figures["live"]
    if live_figures is not None:
        print(f"live ingest {live_figures['seconds']:.0f} s{' (pinned)' if args.pin else ''}, "
              f"{live_figures['commits_per_s']:,.0f} commits/s, load {os.getloadavg()[0]:.2f} after: monitor CPU "
              f"{live_figures['cpu_s'] / live_figures['seconds']:.0%} of a core; {late(live_figures)}; the freezer "
              f"froze the young generations {live_figures['young_freezes']} times; frozen objects "
              f"{live_figures['frozen'][0]:,} before, {live_figures['frozen'][1]:,} after, of which a refreeze then "
              f"finds {live_figures['frozen'][2]:,} cyclic garbage; peak RSS "
              f"{peak_rss_mib():,.0f} MiB{' (since the last phase of --memory)' if memory else ''}")
        collector = live_figures["young_collector"]
        print("young collector: " + ("none" if collector is None else
                                     f"{collector[0]}, {collector[1]:,} paced passes, interval at the end "
                                     f"{collector[2] * 1000:.0f} ms") +
              f"; generation 2 after the live period (not frozen): {live_figures['oldest_after']:,} objects")
        for kind in ("status", "lag"):
            answers = live_figures[f"{kind}_ms"]
            print(f"/{kind} of a {fleet.groups[fleet.big[0]][1]:,}-partition group ({answers['count']} answers): "
                  f"p50 {answers['p50']:.1f} / p99 {answers['p99']:.1f} / p99.9 {answers['p999']:.1f} / "
                  f"max {answers['max']:.1f} ms")
        print_kinds(live_figures["kinds"], args.top)
        print(gc_line(live_figures))
        if live_figures["garbage_kinds"]:
            print("the cyclic garbage found after the live period, the most numerous kinds:")
            for kind, count in live_figures["garbage_kinds"]:
                print(f"  {count:9,d}  {kind}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
