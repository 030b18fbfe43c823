"""`burrowpy demo` (what `make run` starts): an embedded broker, the monitor pointed at it, and a workload.

The workload produces to one topic and runs three consumer groups, so that real statuses show within a
minute on the dashboard, http://127.0.0.1:8000/ui/, and at http://127.0.0.1:8000/v3/kafka/local/consumer:

- ``demo-healthy`` keeps up and commits every second: OK;
- ``demo-lagging`` reads a few records of each partition every 3 s, slower than they are produced: lag
  grows at every commit, WARN (commits are spaced wider than the 1 s broker-offset refresh, so each
  commit's stored lag sees a newer log end);
- ``demo-stopped`` reads for a while and then stops committing while lag is left: STOP (group ERR).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

TOPIC = "demo-events"
PARTITIONS = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--http", default="127.0.0.1:8000", metavar="HOST:PORT", help="HTTP API address")
    parser.add_argument("--broker", default="127.0.0.1:0", metavar="HOST:PORT",
                        help="where the embedded broker listens (port 0: any free port)")
    parser.add_argument("--data-dir", metavar="DIR",
                        help="broker data, kept after the demo (default: a temporary directory, removed when it stops)")
    parser.add_argument("--duration", type=float, default=0, metavar="SECONDS",
                        help="stop after this long (default: run until Ctrl-C)")
    parser.add_argument("--log-level", default="warning", help="monitor log level (debug, info, warn, error)")


def monitor_config(bootstrap: str, http: str, log_level: str) -> dict[str, Any]:
    return {
        "logging": {"level": log_level},
        "storage": {"default": {"class-name": "inmemory", "intervals": 10, "expire-group": 604800}},
        "evaluator": {"default": {"class-name": "caching", "expire-cache": 2}},
        "httpserver": {"default": {"address": http}},
        # Probes every second and topic health every 5 s, so the dashboard's figures fill in quickly.
        "cluster": {"local": {"class-name": "kafka", "servers": [bootstrap], "offset-refresh": 1,
                              "topic-refresh": 10, "probe": True, "probe-interval": 1, "topic-health-refresh": 5}},
        "consumer": {"local": {"class-name": "kafka", "cluster": "local", "servers": [bootstrap]}},
    }


async def _produce(bootstrap: str, rate: float) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        n = 0
        while True:
            await producer.send(TOPIC, f"event {n}".encode(), key=str(n % 97).encode())
            n += 1
            await asyncio.sleep(1 / rate)
    finally:
        await producer.stop()


async def _consume(bootstrap: str, group: str, per_partition: int, every: float = 1.0,
                   stop_after: float | None = None) -> None:
    """Consume in a group, at most ``per_partition`` records of each partition every ``every`` seconds,
    committing after every round; with ``stop_after``, stop consuming and committing after that long."""
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await consumer.start()
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        while stop_after is None or loop.time() - started < stop_after:
            for tp in consumer.assignment():
                await consumer.getmany(tp, timeout_ms=100, max_records=per_partition)
            await consumer.commit()
            await asyncio.sleep(every)
        # Still a member of the group, but no progress and no commits: Burrow's STOP.
        await asyncio.Event().wait()
    finally:
        await consumer.stop()


async def demo(args: argparse.Namespace) -> int:
    if args.data_dir:
        return await _demo(args, Path(args.data_dir), "")
    data_dir = Path(tempfile.mkdtemp(prefix="burrowpy-demo-"))
    try:
        return await _demo(args, data_dir, ", removed when the demo stops")
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


async def _demo(args: argparse.Namespace, data_dir: Path, data_note: str) -> int:
    from broker.broker import Broker
    from broker.config import BrokerConfig
    from broker.main import configure_logging
    from burrowpy.config import parse_config
    from burrowpy.daemon import Monitor
    from burrowpy.logging import LogControl

    configure_logging("warning")
    broker = Broker(BrokerConfig.load(None, listen=args.broker, data_dir=str(data_dir),
                                      overrides={"group.initial.rebalance.delay.ms": 0}))
    await broker.start()
    broker.ensure_topic(TOPIC, PARTITIONS)
    bootstrap = f"{broker.host}:{broker.port}"
    config = parse_config(monitor_config(bootstrap, args.http, args.log_level), "<demo>")
    log_control = LogControl(config.logging, stream=sys.stderr)
    monitor = Monitor(config, log_control.logger, log_control=log_control)
    workload: list[asyncio.Task] = []
    failed: asyncio.Future | None = None
    # Ctrl-C stops the demo as soon as it has said where it is: the handlers are in place before it says so
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await monitor.start()
        workload = [
            asyncio.create_task(_produce(bootstrap, rate=30)),
            asyncio.create_task(_consume(bootstrap, "demo-healthy", per_partition=10_000)),
            asyncio.create_task(_consume(bootstrap, "demo-lagging", per_partition=5, every=3)),
            asyncio.create_task(_consume(bootstrap, "demo-stopped", per_partition=10_000, stop_after=15)),
        ]
        base = f"http://{args.http}"
        print(f"burrowpy demo dashboard: {base}/ui/\n"
              f"  broker on {bootstrap} (data in {data_dir}{data_note}), HTTP API on {base}\n"
              f"  groups:   {base}/v3/kafka/local/consumer\n"
              f"  statuses: {base}/v3/kafka/local/consumer/demo-lagging/status  (WARN within a minute)\n"
              f"            {base}/v3/kafka/local/consumer/demo-stopped/status  (STOP after ~30 s)\n"
              f"            {base}/v3/kafka/local/consumer/demo-healthy/status  (OK)\n"
              f"  metrics:  {base}/metrics\n"
              "Ctrl-C stops it.", flush=True)
        waiters: list[asyncio.Future[Any]] = [asyncio.create_task(stop.wait())]
        if args.duration:
            waiters.append(asyncio.create_task(asyncio.sleep(args.duration)))
        failed = asyncio.gather(*workload)
        done, _ = await asyncio.wait([*waiters, failed], return_when=asyncio.FIRST_COMPLETED)
        for waiter in waiters:
            waiter.cancel()
        if failed in done:
            failed.result()
        return 0
    finally:
        for task in workload:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*workload, return_exceptions=True)
        if failed is not None:
            # Read what the gather over the cancelled workload ended with, or asyncio prints it at exit.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await failed
        await monitor.stop()
        await broker.stop()
        log_control.close()


def run(args: argparse.Namespace) -> int:
    return asyncio.run(demo(args))
