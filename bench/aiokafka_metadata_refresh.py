"""What one of aiokafka's own metadata refreshes costs the monitor's event loop at fleet scale: aiokafka's client
as it is, against the brokers-only client the cluster and consumer modules use
(``burrowpy.coordinators.kafka_client.brokers_only_client``).

    .venv/bin/python bench/aiokafka_metadata_refresh.py [--groups 2000] [--partitions 50000] [--refreshes 5]
                                                        [--broker-dir DIR]

The fleet of ``bench/monitor_fleet_daemon.py`` (``--groups`` topics, ``--partitions`` partitions in all) on our
own broker, a process of its own (``--broker-dir`` keeps it between runs, as ``bench/monitor_loop_stalls.py``
does, and reuses one made before). For each client, ``--refreshes`` times: ``force_metadata_update()``, which
aiokafka makes by itself at its start, after every broken connection and every ``metadata_max_age_ms``; the wall
time of each (aiokafka decodes the answer on the event loop, so it is how long the loop is held, the answer's
transfer aside), the partitions the client then holds, and what one more refresh leaves allocated, as
tracemalloc counts it (the client's metadata, kept until the next refresh).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from monitor_fleet_daemon import Fleet, fleet_arguments, fleet_on_our_broker  # noqa: E402

from burrowpy.coordinators.kafka_client import BROKERS_ONLY_METADATA_AGE_MS, brokers_only_client  # noqa: E402


async def measure(bootstrap: str, refreshes: int) -> dict[str, dict[str, Any]]:
    from aiokafka import AIOKafkaClient

    figures: dict[str, dict[str, Any]] = {}
    makers = {"aiokafka's client": lambda: AIOKafkaClient(bootstrap_servers=[bootstrap],
                                                           metadata_max_age_ms=BROKERS_ONLY_METADATA_AGE_MS),
              "brokers-only client": lambda: brokers_only_client([bootstrap], {})}
    for name, make in makers.items():
        client = make()
        await client.bootstrap()
        times = []
        for _ in range(refreshes):
            began = time.perf_counter()
            assert await client.force_metadata_update()
            times.append(time.perf_counter() - began)
        gc.collect()
        tracemalloc.start()  # one more refresh, traced (which slows it): what it leaves held
        assert await client.force_metadata_update()
        gc.collect()
        held, _peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        partitions = sum(len(client.cluster.partitions_for_topic(t) or ())
                         for t in client.cluster.topics(exclude_internal_topics=False))
        figures[name] = {"times_s": times, "partitions": partitions, "held_bytes": held}
        await client.close()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    fleet_arguments(parser)
    parser.add_argument("--refreshes", type=int, default=5)
    parser.add_argument("--broker-dir", type=Path, help="keep the broker's data here (reused when it holds the fleet)")
    args = parser.parse_args()
    fleet = Fleet.generate(args.groups, args.partitions, args.big_groups, args.big_partitions)
    print(f"fleet: {len(fleet.groups):,} groups, {fleet.partitions:,} partitions, load {os.getloadavg()[0]:.2f}",
          flush=True)
    with fleet_on_our_broker(fleet, args.broker_dir) as broker:
        figures = asyncio.run(measure(broker.bootstrap, args.refreshes))
    print(f"load {os.getloadavg()[0]:.2f} after")
    for name, figure in figures.items():
        times = figure["times_s"]
        print(f"{name:>20}: refresh median {statistics.median(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms; "
              f"holds {figure['partitions']:,} partitions, {figure['held_bytes'] / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
