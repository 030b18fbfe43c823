"""``/status`` and ``/lag`` of a 1,000-partition group over HTTP, every request a cache miss.

    .venv/bin/python bench/monitor_status_http.py [--partitions 1000] [--requests 500]

The monitor's own pieces in this process — the inmemory storage, the caching evaluator with
``expire-cache`` 0 (so every request evaluates the group again), Burrow's HTTP API on aiohttp, the garbage
collector thresholds of ``burrowpy serve`` — on 127.0.0.1, and a client in a process of its own (Python's
``http.client``, one keep-alive connection) timing each request from sending it to having read the whole
answer. The group is the one of ``bench/monitor_storage.py``: ten commits per partition, every partition
OK with a lag, the longest path through the rules. Requests alternate between the group's ``/status``
(only the partitions worse than OK listed) and its ``/lag`` (every partition listed), or with
``--status-only`` are all ``/status``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import statistics
import sys
import time

from aiohttp import web

from burrowpy.config import parse_config
from burrowpy.context import ApplicationContext
from burrowpy.coordinators.base import Coordinator
from burrowpy.daemon import module_classes, tune_garbage_collector
from burrowpy.httpserver import build_app
from burrowpy.logging import LogControl
from burrowpy.protocol import SetBrokerOffset, SetConsumerOffset

CLUSTER, GROUP, TOPIC = "local", "group-0", "orders"

CLIENT = r"""
import http.client, json, sys, time
port, requests, paths = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
connection = http.client.HTTPConnection("127.0.0.1", port)
times = {path: [] for path in paths}
for number in range(requests + 20):
    path = paths[number % len(paths)]
    start = time.perf_counter()
    connection.request("GET", path)
    response = connection.getresponse()
    body = response.read()
    elapsed = time.perf_counter() - start
    if response.status != 200 or json.loads(body)["error"]:
        raise SystemExit(f"{path}: {response.status} {body[:200]!r}")
    if number >= 20:  # the first ones warm up both sides
        times[path].append(elapsed)
print(json.dumps(times))
"""


def percentiles(samples: list[float]) -> dict:
    samples = sorted(samples)
    return {"p50_ms": round(statistics.median(samples) * 1000, 3),
            "p99_ms": round(samples[int(len(samples) * 0.99) - 1] * 1000, 3),
            "max_ms": round(samples[-1] * 1000, 3), "requests": len(samples)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=500, help="timed requests of each kind")
    parser.add_argument("--status-only", action="store_true", help="ask only for /status, not /lag in between")
    args = parser.parse_args()
    tune_garbage_collector()

    config = parse_config({"logging": {"level": "warn"},
                           "storage": {"default": {"class-name": "inmemory"}},
                           "evaluator": {"default": {"class-name": "caching", "expire-cache": 0}},
                           "cluster": {CLUSTER: {"class-name": "kafka", "servers": ["127.0.0.1:9"]}}},
                          "bench.yaml", {})
    log_control = LogControl(config.logging, stream=io.StringIO(), name="bench.monitor_status_http")
    ctx = ApplicationContext(config=config, logger=log_control.logger, clock=time, log_control=log_control)
    classes = module_classes()
    storage_coordinator = Coordinator("storage", ctx, classes["storage"], default_class="inmemory")
    ctx.storage = storage_coordinator.modules["default"]
    evaluator_coordinator = Coordinator("evaluator", ctx, classes["evaluator"], default_class="caching")
    ctx.evaluator = evaluator_coordinator.modules["default"]
    Coordinator("cluster", ctx, classes["cluster"])  # built for the API's cluster list, never started
    await storage_coordinator.start()
    await evaluator_coordinator.start()
    storage = ctx.storage
    for partition in range(args.partitions):
        storage.submit(SetBrokerOffset(CLUSTER, TOPIC, partition, args.partitions, 10**9, 0))
    await storage.flush()
    now_ms = int(time.time()) * 1000
    for index in range(10):
        for partition in range(args.partitions):
            storage.submit(SetConsumerOffset(CLUSTER, GROUP, TOPIC, partition, 10**8 + index * 100,
                                             index * args.partitions + partition, now_ms - (10 - index) * 10_000))
    await storage.flush()

    runner = web.AppRunner(build_app(ctx), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    paths = [f"/v3/kafka/{CLUSTER}/consumer/{GROUP}/status", f"/v3/kafka/{CLUSTER}/consumer/{GROUP}/lag"]
    if args.status_only:
        del paths[1]
    try:
        client = await asyncio.create_subprocess_exec(sys.executable, "-c", CLIENT, str(port),
                                                      str(args.requests * len(paths)), *paths,
                                                      stdout=asyncio.subprocess.PIPE)
        output, _ = await client.communicate()
        if client.returncode:
            raise SystemExit(f"the client failed (exit status {client.returncode})")
    finally:
        await runner.cleanup()
        await evaluator_coordinator.stop()
        await storage_coordinator.stop()
        log_control.close()
    times = json.loads(output)
    print(json.dumps({"partitions": args.partitions, "expire_cache": 0,
                      **{name: percentiles(times[path]) for name, path in zip(("status_uncached", "lag_uncached"),
                                                                              paths, strict=False)}}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
