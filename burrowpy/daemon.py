"""``burrowpy serve``: the monitor daemon, Burrow's startup and shutdown in Python.

Everything is configured first (every module built, so a bad config exits 1 before anything connects),
then started in Burrow's order: zookeeper (only with notifiers), storage, evaluator, httpserver,
notifier, cluster, consumer; stopped in reverse on SIGINT, SIGTERM or SIGQUIT. ``/burrow/admin/ready``
turns READY once the consumer modules have started.

:class:`Monitor` is the daemon without the process concerns (pid file, signals, log setup), for
programs that embed the monitor, such as ``burrowpy demo``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from burrowpy.config import Config, Section
    from burrowpy.context import ApplicationContext, Clock, Evaluator, Storage
    from burrowpy.coordinators.base import ModuleFactory
    from burrowpy.logging import LogControl

# Burrow's --config-dir looks for a file named burrow with one of viper's extensions.
CONFIG_DIR_NAMES = ("burrow.json", "burrow.toml", "burrow.yaml", "burrow.yml")

# The daemon's garbage collector thresholds. Python's default collects the youngest generation every 700
# net allocations of container objects; one evaluation of a 1,000-partition group allocates about ten
# thousand (its result, kept for the cache until the next), so each evaluation paid a dozen young
# collections and, every few evaluations, a full one over everything the monitor holds: /status of such a
# group took twice as long at p99 as at p50. Ten thousand keeps the young generation about one evaluation
# deep; reference counting still frees everything that is not in a cycle at once, so memory does not grow
# by more than those ten thousand objects (bench/README.md, "Monitor storage and evaluation").
GC_THRESHOLDS = (10_000, 10, 10)


def tune_garbage_collector() -> None:
    """Set the daemon's collector thresholds (:data:`GC_THRESHOLDS`) for this process."""
    gc.set_threshold(*GC_THRESHOLDS)


# glibc's malloc serves a request of more than its mmap threshold (128 KiB at first) with a mapping of its own,
# given back to the system when freed; but the first time such a block is freed it raises the threshold to that
# block's size (up to 32 MiB), and from then on blocks that large come from the heap, whose memory it gives back
# only from the top. The monitor's large blocks are transients (a fetch response of the offsets topic, a
# whole-cluster Metadata or DescribeLogDirs answer, a JSON answer listing a thousand partitions): from the heap,
# each left its pages there behind the small objects allocated after it, and at fleet scale the arenas held
# 20-43 MiB free (bench/README.md, "The whole monitor's memory at fleet scale"). A fixed threshold keeps every
# block above it a mapping of its own, given back when freed. Each thread that allocates gets an arena of its
# own as well (the loop, the threads that decode answers): two are enough, the interpreter's lock lets one
# thread run Python at a time.
MALLOC_MMAP_THRESHOLD = 256 << 10
MALLOC_ARENA_MAX = 2
_M_MMAP_THRESHOLD, _M_ARENA_MAX = -3, -8  # mallopt's parameters (glibc's malloc.h)


def tune_malloc() -> bool:
    """Set glibc malloc's mmap threshold and arena count (:data:`MALLOC_MMAP_THRESHOLD`, :data:`MALLOC_ARENA_MAX`)
    for this process, unless its environment sets them (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_ARENA_MAX``); False
    where there is no glibc malloc (another C library: nothing is done)."""
    import ctypes

    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallopt") or not hasattr(libc, "malloc_trim"):  # malloc_trim: glibc's alone
        return False
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        libc.mallopt(_M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD)
    if "MALLOC_ARENA_MAX" not in os.environ:
        libc.mallopt(_M_ARENA_MAX, MALLOC_ARENA_MAX)
    return True


# A full (generation 2) pass walks every container object the process tracks: at fleet scale (2,000 groups,
# 50,750 partitions) some 700,000, mostly the long-lived per-partition state (storage's entries and rings with
# their arrays, aiokafka's partition metadata, topic health's readings), which takes 250-950 ms of the event
# loop, a couple of times a minute when idle (bench/README.md, "The event loop at fleet scale"). The daemon
# moves what is alive into the collector's permanent generation (gc.freeze), which passes do not walk; objects
# there are still freed by reference counting when let go, so only cyclic garbage could stay. None stays for
# ever: every GC_FREEZE_PERIOD_S the frozen objects are given back (gc.unfreeze), one full pass collects what
# has become cyclic garbage since, and the survivors are frozen again. That pass is the one full-length stall
# left, once a period instead of every half minute; the first freeze comes once the state has been read.
GC_FREEZE_FIRST_S = 60.0
GC_FREEZE_PERIOD_S = 900.0


class _LoopTask:
    """A task of the daemon's own on the event loop: :meth:`start` runs :meth:`_run`, :meth:`stop` cancels it and
    waits for it to end."""

    task_name = ""
    _task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.task_name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class GarbageFreezer(_LoopTask):
    """Keeps the monitor's long-lived objects out of the collector's full passes (see :data:`GC_FREEZE_PERIOD_S`).

    The whole process is affected (the collector is the interpreter's): :meth:`stop` gives the frozen objects
    back. Used by ``burrowpy serve``, not by :class:`Monitor`, so that programs embedding the monitor decide.
    """

    task_name = "garbage-freezer"

    def __init__(self, logger: Any, first_s: float = GC_FREEZE_FIRST_S,
                 period_s: float = GC_FREEZE_PERIOD_S) -> None:
        self._log = logger
        self.first_s = first_s
        self.period_s = period_s
        self.refreezes = 0

    def refreeze(self) -> None:
        """Unfreeze, collect everything (what became cyclic garbage while frozen included), freeze the rest."""
        started = time.perf_counter()
        gc.unfreeze()
        collected = gc.collect()
        gc.freeze()
        self.refreezes += 1
        self._log.debug("garbage collector: live objects frozen", collected=collected,
                        frozen=gc.get_freeze_count(), ms=round((time.perf_counter() - started) * 1000, 1))

    async def _run(self) -> None:
        await asyncio.sleep(self.first_s)
        while True:
            self.refreeze()
            await asyncio.sleep(self.period_s)

    async def stop(self) -> None:
        await super().stop()
        gc.unfreeze()


# CPython (3.11) starts a young (generation 0) pass when the tracked objects allocated minus those deallocated since
# the last pass exceed the first threshold. Under live ingest the monitor frees old objects as fast as it makes new
# ones (storage's replaced entries, the bases the trend sampler renews, topic health's readings), and the old ones
# freed (frozen or in generation 2) count against the new: the young generation grew to 100,000-200,000 objects
# before its pass came, a pass of 40-90 ms of the loop's CPU (bench/README.md, "What the long young passes walk").
# The young collector paces those passes by time instead: the loop runs one (gc.collect(0)) every interval, and the
# interval follows what the passes cost, shorter when a pass took more than YOUNG_PASS_TARGET_S (the young
# generation grows fast), longer when less, between YOUNG_INTERVAL_MIN_S and YOUNG_INTERVAL_MAX_S (a pass over next
# to nothing costs a microsecond). Pacing alone moves the length to generation 1: each paced pass counts towards
# generation 1's threshold and its survivors pile up there (the ingest's objects live seconds, until replaced), and
# generation-1 passes walked 70 ms of them. So what survives a paced pass is frozen at once (gc.freeze, as the
# GarbageFreezer freezes the state, a constant-time move): no pass walks it again, reference counting frees it when
# let go, and only what becomes cyclic garbage after surviving a pass waits for the freezer's next refreeze (at
# fleet scale, under ingest, 6 objects a minute once the cluster module's requests were no longer reference cycles;
# 16,000 before: bench/README.md, "The collector's young passes paced").
YOUNG_PASS_TARGET_S = 0.001
YOUNG_INTERVAL_MIN_S = 0.01
YOUNG_INTERVAL_MAX_S = 0.1


class YoungCollector(_LoopTask):
    """Runs the collector's young passes on the event loop every :attr:`interval_s`, adapted to what they cost
    (see :data:`YOUNG_PASS_TARGET_S`), and freezes what survives them.

    ``freeze_survivors`` False leaves the survivors in generation 1 (measured, not used: see above). Frozen
    survivors are the :class:`GarbageFreezer`'s to give back, at its next refreeze or when it stops; used by
    ``burrowpy serve`` with it, not by :class:`Monitor`.
    """

    task_name = "young-collector"

    def __init__(self, target_s: float = YOUNG_PASS_TARGET_S, min_interval_s: float = YOUNG_INTERVAL_MIN_S,
                 max_interval_s: float = YOUNG_INTERVAL_MAX_S, freeze_survivors: bool = True) -> None:
        self.target_s = target_s
        self.min_interval_s = min_interval_s
        self.max_interval_s = max_interval_s
        self.freeze_survivors = freeze_survivors
        self.interval_s = max_interval_s
        self.passes = 0

    def collect(self) -> float:
        """One young pass (and the survivors frozen, with ``freeze_survivors``); the interval adapted to its
        cost, which is returned (the loop thread's CPU seconds)."""
        started = time.thread_time()
        gc.collect(0)
        if self.freeze_survivors:
            gc.freeze()
        spent = time.thread_time() - started
        self.passes += 1
        # halve the interval at most, double it at most: one pass of an unusual size does not swing it far
        factor = min(2.0, max(0.5, self.target_s / spent)) if spent > 0 else 2.0
        self.interval_s = min(self.max_interval_s, max(self.min_interval_s, self.interval_s * factor))
        return spent

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            self.collect()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", metavar="FILE",
                        help="config file: YAML (see config/burrowpy.yaml), or Burrow's own TOML (*.toml)")
    source.add_argument("--config-dir", metavar="DIR",
                        help="as Burrow's flag: read burrow.toml (or burrow.yaml/.yml/.json) from DIR")


def _storage_factory(name: str, section: Section, ctx: ApplicationContext) -> Any:
    from burrowpy.storage.inmemory import InMemoryStorage

    return InMemoryStorage(name, section, ctx.config.cluster_names, ctx.clock,
                           _module_logger(ctx, "storage", "inmemory", name))


def _evaluator_factory(name: str, section: Section, ctx: ApplicationContext) -> Any:
    from burrowpy.evaluator.caching import CachingEvaluator

    return CachingEvaluator(name, section, ctx.storage, ctx.clock, _module_logger(ctx, "evaluator", "caching", name))


def _module_logger(ctx: ApplicationContext, coordinator: str, class_name: str, name: str) -> Any:
    return ctx.logger.bind(type="module", coordinator=coordinator, class_name=class_name, name=name)


def module_classes() -> dict[str, dict[str, ModuleFactory]]:
    """The one table of module classes: kind -> class-name -> factory(name, section, ctx).

    Imports happen here, not at the top of the file, so that ``burrowpy --help`` stays fast.
    """
    from burrowpy.coordinators.cluster_kafka import KafkaCluster
    from burrowpy.coordinators.consumer_kafka import KafkaConsumer
    from burrowpy.coordinators.consumer_kafka_zk import KafkaZkConsumer

    return {
        "storage": {"inmemory": _storage_factory},
        "evaluator": {"caching": _evaluator_factory},
        "cluster": {"kafka": KafkaCluster},
        "consumer": {"kafka": KafkaConsumer, "kafka_zk": KafkaZkConsumer},
    }


class Monitor:
    """The configured coordinators of one monitor, started and stopped in Burrow's order."""

    def __init__(self, config: Config, logger: Any, *, clock: Clock | None = None,
                 log_control: LogControl | None = None,
                 classes: Mapping[str, Mapping[str, ModuleFactory]] | None = None) -> None:
        from burrowpy.context import ApplicationContext, SystemClock

        self.ctx = ApplicationContext(config=config, logger=logger, clock=clock or SystemClock(),
                                      log_control=log_control)
        self.classes = classes if classes is not None else module_classes()
        self.log = logger.bind(type="main", name="burrowpy")
        self.http: Any = None
        self.zookeeper: Any = None
        self._coordinators: list[tuple[str, Any]] = []
        self._started: list[tuple[str, Any]] = []

    def configure(self) -> None:
        """Build every coordinator and module (raises ConfigError); call inside the event loop."""
        from burrowpy.coordinators.base import Coordinator
        from burrowpy.httpserver.server import HttpServerCoordinator

        ctx = self.ctx
        config = ctx.config
        zookeeper_block = config.block("zookeeper")
        if config.has_notifiers and zookeeper_block is not None:
            from burrowpy.coordinators.zookeeper import ZookeeperCoordinator

            tls_name = zookeeper_block.get_str("tls", "")
            self.zookeeper = ZookeeperCoordinator(zookeeper_block, ctx, tls=config.section("tls", tls_name))
            ctx.zookeeper = self.zookeeper.client
            self._coordinators.append(("zookeeper", self.zookeeper))
        storage = Coordinator("storage", ctx, self.classes["storage"], default_class="inmemory")
        self._coordinators.append(("storage", storage))
        # the storage classes build these modules, each one a Storage
        ctx.storage = cast("Storage", next(iter(storage.modules.values())))
        evaluator = Coordinator("evaluator", ctx, self.classes["evaluator"], default_class="caching")
        self._coordinators.append(("evaluator", evaluator))
        ctx.evaluator = cast("Evaluator", next(iter(evaluator.modules.values())))
        self.http = HttpServerCoordinator(ctx)
        self._coordinators.append(("httpserver", self.http))
        if config.has_notifiers:
            self._configure_notifiers()
        for kind in ("cluster", "consumer"):
            self._coordinators.append((kind, Coordinator(kind, ctx, self.classes[kind])))
        if config.history is not None:
            # Last, so that a config error elsewhere leaves no writer behind.
            from burrowpy.pipeline.history import HistoryWriter

            ctx.history = HistoryWriter(config.history.dir, config.history.roll_interval, ctx.clock.time)

    def _configure_notifiers(self) -> None:
        from burrowpy.notifier import NotifierCoordinator

        # Burrow insists on ZooKeeper for notifiers; without a zookeeper block we run them unlocked, which is
        # right for a single instance (the notifier coordinator logs it). A notifier-lock block of class kafka
        # puts the lock, and the incidents' state, in Kafka instead.
        lock = None
        lock_block = self.ctx.config.block("notifier-lock")
        if lock_block is not None:
            from burrowpy.notifier.kafka_lock import KafkaNotifierLock, lock_class

            if lock_class(lock_block) == "kafka":
                lock = KafkaNotifierLock(lock_block, self.ctx)
            else:
                lock_block.check_keys(("class-name",))
                if self.zookeeper is None:
                    raise lock_block.error("class-name", "is zookeeper, but there is no zookeeper block")
        notifier = NotifierCoordinator(self.ctx, self.ctx.config.modules("notifier"), zookeeper=self.zookeeper,
                                       lock=lock, store=lock, registry=self.ctx.registry)
        self.ctx.modules["notifier"] = notifier.modules
        self.ctx.notifier = notifier
        self._coordinators.append(("notifier", notifier))

    async def start(self) -> None:
        if not self._coordinators:
            self.configure()
        self.log.info("starting", coordinators=[name for name, _ in self._coordinators])
        for name, coordinator in self._coordinators:
            try:
                await coordinator.start()
            except Exception:
                self.log.exception("coordinator failed to start", coordinator=name)
                await self.stop()
                raise
            self._started.append((name, coordinator))
        self.ctx.app_ready.set()
        self.log.info("started")

    async def stop(self) -> None:
        """Stop in reverse order, so that request senders stop before the modules that serve them."""
        self.ctx.app_ready.clear()
        while self._started:
            name, coordinator = self._started.pop()
            try:
                await coordinator.stop()
            except Exception:
                self.log.exception("coordinator failed to stop", coordinator=name)
        if self.ctx.history is not None:
            self.ctx.history.close()
            self.ctx.history = None


def find_config(args: argparse.Namespace) -> str:
    if args.config:
        return args.config
    for name in CONFIG_DIR_NAMES:
        candidate = Path(args.config_dir) / name
        if candidate.is_file():
            return str(candidate)
    from burrowpy.config import ConfigError

    raise ConfigError(args.config_dir, "", f"no config file found (looked for {', '.join(CONFIG_DIR_NAMES)})")


def acquire_pidfile(path: str) -> str | None:
    """Burrow's pid file: refuse to start when it names another live process. Returns an error or None."""
    try:
        text = Path(path).read_text().strip()
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        return f"cannot read PID file {path}: {exc.strerror}"
    if text:
        if not text.isdigit():
            return f"cannot interpret the contents of PID file {path}: {text[:40]!r}"
        pid = int(text)
        if pid != os.getpid() and _process_exists(pid):
            return f"PID file {path} names running process {pid}; is another burrowpy running?"
    try:
        Path(path).write_text(str(os.getpid()))
    except OSError as exc:
        return f"cannot write PID file {path}: {exc.strerror}"
    return None


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run(args: argparse.Namespace) -> int:
    from burrowpy.config import ConfigError, load_config
    from burrowpy.logging import LogControl, redirect_stdout

    tune_garbage_collector()
    tune_malloc()
    try:
        config = load_config(find_config(args))
    except ConfigError as exc:
        print(f"burrowpy serve: {exc}", file=sys.stderr)
        return 1
    pidfile = config.general.pidfile
    if pidfile:
        problem = acquire_pidfile(pidfile)
        if problem:
            print(f"burrowpy serve: {problem}", file=sys.stderr)
            return 1
    try:
        try:
            if config.general.stdout_logfile:
                redirect_stdout(config.general.stdout_logfile)
            log_control = LogControl(config.logging, capture_libraries=True)
        except OSError as exc:
            print(f"burrowpy serve: {config.file}: cannot open the log output {exc.filename}: {exc.strerror}",
                  file=sys.stderr)
            return 1
        try:
            return asyncio.run(_serve(config, log_control))
        finally:
            log_control.close()
    finally:
        if pidfile:
            _remove_pidfile(pidfile)


def _remove_pidfile(path: str) -> None:
    try:
        os.remove(path)
    except OSError as exc:
        print(f"burrowpy serve: failed to remove PID file {path}: {exc.strerror}", file=sys.stderr)


async def _serve(config: Config, log_control: LogControl) -> int:
    from burrowpy.config import ConfigError

    logger = log_control.logger
    log = logger.bind(type="main", name="burrowpy")
    log.info("starting burrowpy", config=config.file, pid=os.getpid())
    for warning in config.warnings:
        log.warning(warning)
    monitor = Monitor(config, logger, log_control=log_control)
    try:
        monitor.configure()
    except ConfigError as exc:
        log.error("invalid configuration", error=str(exc))
        print(f"burrowpy serve: {exc}", file=sys.stderr)
        return 1
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
        loop.add_signal_handler(signum, stopping.set)
    try:
        await monitor.start()
    except Exception as exc:
        print(f"burrowpy serve: failed to start: {exc}", file=sys.stderr)
        return 1
    freezer = GarbageFreezer(log)
    freezer.start()
    young = YoungCollector()
    young.start()
    await stopping.wait()
    log.info("shutdown triggered")
    await young.stop()
    await freezer.stop()
    await monitor.stop()
    log.info("stopped burrowpy")
    return 0
