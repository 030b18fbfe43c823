"""How long the idle monitor holds its event loop at fleet scale: the longest stretches of work, and their owners.

    .venv/bin/python bench/monitor_loop_stalls.py [--groups 2000] [--partitions 50000] [--big-groups 10]
                                                  [--seconds 30] [--top 12] [--broker-dir DIR]

Run it with ``PYTHONPATH=<tree>`` to measure that tree's code (else the installed checkout's is imported).

The fleet of ``bench/monitor_fleet_daemon.py`` (its ``Fleet``: groups each on a topic of their own, caught up,
and ``--big-groups`` in ERR on one 1,000-partition topic, every partition committed ten times) on our own broker
(``burrowpy broker``, a process of its own), read by the whole monitor running in this process
(``burrowpy.daemon.Monitor``, configured as ``burrowpy serve`` would be: the kafka cluster and consumer modules,
offset-refresh 10 s, the dashboard's trend sampler every 5 s, the HTTP server). Once every commit is in
storage and a refresh has passed, for ``--seconds`` nothing commits and nobody asks, and:

- a ticker asks the loop to wake it every millisecond (``call_later``): how late each wake-up is, which is how
  long a request arriving at that moment would wait before the loop even reads it (the longest, p99.9, p99);
- every callback the loop runs is timed (``asyncio.events.Handle._run`` wrapped): the longest ones, each named
  by the coroutine of its task (a task step is one stretch of work between two awaits); within them, the
  answers aiokafka's connections decode (``AIOKafkaConnection._handle_frame``, named ``decode`` and the
  request's class) and the garbage collector's passes (``gc.callbacks``, named ``gc generation N``), which
  run inside whatever callback allocated last;
- CPU seconds (``time.process_time``, this process: the monitor) per offset-refresh period;
- with ``--cpu-only``, no ticker and no callback timing (their own CPU is 0.3-0.5 s per refresh period): the
  CPU seconds are then the monitor's alone;
- with ``--census``, after the idle period: the objects the collector tracks, by generation and by type (the
  most numerous), and how long a full pass (``gc.collect(2)``) takes then, three times.

As ``burrowpy serve`` does, the live objects are frozen out of the collector's full passes
(``burrowpy.daemon.GarbageFreezer``), here just before the idle period (serve: a minute after the start, then
every 15 minutes); that refreeze's own full pass is timed and printed. ``--no-freeze`` leaves the collector as
it was before the freezer.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shlex
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import structlog

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from harness import BrokerProcess  # noqa: E402
from monitor_fleet_daemon import INTERVALS, Fleet, fleet_arguments  # noqa: E402
from monitor_ingest import OFFSETS_PARTITIONS, fill, prepare_topics  # noqa: E402

from burrowpy.config import parse_config  # noqa: E402
from burrowpy.daemon import GarbageFreezer, Monitor, tune_garbage_collector  # noqa: E402
from burrowpy.protocol import FetchConsumers  # noqa: E402

OFFSET_REFRESH = 10
TICK_S = 0.001


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
        self.recording = False
        self._original: Any = None
        self._handle_frame: Any = None
        self._gc_pass: Any = None

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
            started = time.perf_counter()
            handle_frame(connection, frame)
            elapsed = time.perf_counter() - started
            if elapsed > 0.002:
                timer.by_kind[f"decode {type(request).__name__}"].append(elapsed)

        AIOKafkaConnection._handle_frame = timed_frame  # type: ignore[method-assign]
        collecting: list[float] = []

        def gc_pass(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                collecting[:] = [time.perf_counter()]
            elif collecting and timer.recording:
                elapsed = time.perf_counter() - collecting[0]
                if elapsed > 0.002:
                    timer.by_kind[f"gc generation {info['generation']}"].append(elapsed)

        self._gc_pass = gc_pass
        gc.callbacks.append(gc_pass)

        def timed_run(handle: asyncio.Handle) -> None:
            if not timer.recording:
                original(handle)
                return
            started = time.perf_counter()
            original(handle)
            elapsed = time.perf_counter() - started
            if elapsed > 0.002:
                kind = describe(handle)
                timer.by_kind[kind].append(elapsed)

        asyncio.events.Handle._run = timed_run  # type: ignore[method-assign]

    def uninstall(self) -> None:
        from aiokafka.conn import AIOKafkaConnection

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


def config(bootstrap: str, port: int) -> dict[str, Any]:
    return {
        "general": {"pidfile": ""},
        "logging": {"level": "error"},
        "httpserver": {"default": {"address": f"127.0.0.1:{port}"}},
        "storage": {"default": {"class-name": "inmemory", "intervals": INTERVALS}},
        "evaluator": {"default": {"class-name": "caching", "expire-cache": 1}},
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


async def measure(bootstrap: str, fleet: Fleet, seconds: float, top: int = 0, freeze: bool = True,
                  ticking: bool = True) -> dict[str, Any]:
    from harness import free_port

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    monitor = Monitor(parse_config(config(bootstrap, free_port()), "burrowpy.yaml", {}), structlog.get_logger())
    timer = LoopTimer()
    if ticking:
        timer.install()
    metadata_cost = MetadataCost()
    metadata_cost.install()
    lateness: list[float] = []
    stop = asyncio.Event()
    started = time.monotonic()
    await monitor.start()
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
        await asyncio.sleep(OFFSET_REFRESH + 1)  # a refresh with every commit in storage, and a sampler round
        freezer = GarbageFreezer(structlog.get_logger(), first_s=0)
        refreeze_ms: float | None = None
        if freeze:
            began = time.perf_counter()
            freezer.refreeze()  # what serve's freezer does a minute after the start, then every 15 minutes
            refreeze_ms = (time.perf_counter() - began) * 1000
        tick = asyncio.create_task(ticker(lateness, stop) if ticking else stop.wait())
        timer.recording = metadata_cost.recording = True
        cpu = time.process_time()
        await asyncio.sleep(seconds)
        cpu = time.process_time() - cpu
        timer.recording = metadata_cost.recording = False
        stop.set()
        await tick
        counted = census(top) if top else []
    finally:
        if ticking:
            timer.uninstall()
        gc.unfreeze()
        await monitor.stop()
    lateness.sort()
    lateness = lateness or [0.0]
    kinds = sorted(((max(times), len(times), sum(times), kind) for kind, times in timer.by_kind.items()),
                   reverse=True)
    return {"read_s": read_s, "cpu_per_refresh_s": cpu / (seconds / OFFSET_REFRESH), "ticks": len(lateness),
            "late_max_ms": lateness[-1] * 1000, "late_p999_ms": lateness[int(0.999 * len(lateness))] * 1000,
            "late_p99_ms": lateness[int(0.99 * len(lateness))] * 1000,
            "late_p50_ms": lateness[len(lateness) // 2] * 1000, "kinds": kinds, "census": counted,
            "refreeze_ms": refreeze_ms, "metadata_decodes": metadata_cost.decodes,
            "metadata_passes": metadata_cost.passes}


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
    args = parser.parse_args()
    tune_garbage_collector()  # as burrowpy serve does
    fleet = Fleet.generate(args.groups, args.partitions, args.big_groups, args.big_partitions)
    print(f"$ {shlex.join([os.path.relpath(sys.executable), *sys.argv])}")
    print(f"fleet: {len(fleet.groups):,} groups, {fleet.partitions:,} partitions, load {os.getloadavg()[0]:.2f}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="loop-stalls-") as tmp:
        directory = args.broker_dir or Path(tmp)
        made = (directory / "data").exists()
        directory.mkdir(parents=True, exist_ok=True)
        broker = BrokerProcess(directory / "data", extra_config={
            "max.partitions": fleet.partitions + 1000, "offsets.topic.num.partitions": OFFSETS_PARTITIONS})
        broker.launch()
        try:
            broker.wait_ready(timeout=600)  # a broker of 50,000 partitions loads them first
            if not made:
                began = time.monotonic()
                prepare_topics(broker.bootstrap, fleet.topics)
                asyncio.run(fill(broker.bootstrap, fleet.groups, INTERVALS, args.connections, fleet.markers))
                print(f"fleet made on the broker: {time.monotonic() - began:.1f} s", flush=True)
            figures = asyncio.run(measure(broker.bootstrap, fleet, args.seconds, args.census, not args.no_freeze,
                                        not args.cpu_only))
        finally:
            broker.stop()
    print(f"idle {args.seconds:.0f} s, load {os.getloadavg()[0]:.2f} after: CPU per offset refresh "
          f"{figures['cpu_per_refresh_s']:.3f} s; loop wake-ups ({figures['ticks']:,}) late by p50 "
          f"{figures['late_p50_ms']:.1f} / p99 {figures['late_p99_ms']:.1f} / p99.9 {figures['late_p999_ms']:.1f} / "
          f"max {figures['late_max_ms']:.1f} ms")
    decodes, passes = figures["metadata_decodes"], figures["metadata_passes"]
    per_minute = 60 / args.seconds
    print(f"whole-cluster Metadata: {len(decodes)} answers decoded ({sum(decodes):.3f} s CPU), "
          f"{len(passes)} cluster-module passes ({sum(passes):.3f} s CPU); per minute "
          f"{(sum(decodes) + sum(passes)) * per_minute:.3f} s CPU")
    if figures["refreeze_ms"] is not None:
        print(f"refreeze before the idle period (unfreeze, full pass, freeze): {figures['refreeze_ms']:.0f} ms")
    print("longest callbacks over 2 ms, by what they run (longest, count, total):")
    for longest, count, total, kind in figures["kinds"][:args.top]:
        print(f"  {longest * 1000:8.1f} ms  {count:6d}  {total:7.3f} s  {kind}")
    for line in figures["census"]:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
