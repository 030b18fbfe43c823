"""How long a single node's event loop stops while it deletes a topic (``delete``: DeleteTopics' own path,
``LocalTopicAdmin.delete_topic``, of a topic of ``--partitions`` partitions holding three segments each) or while it
starts and creates `__consumer_offsets` (``start``: ``Broker.start`` with ``offsets.topic.num.partitions`` set to
``--partitions``), median of ``--runs``.

    .venv/bin/python bench/topic_files_loop_stall.py delete [--partitions 1000] [--runs 10] [--dir /tmp]
    .venv/bin/python bench/topic_files_loop_stall.py start [--partitions 500] [--runs 10] [--dir /tmp]

A ticker on the loop wakes every millisecond; the longest gap between its wakes while the call runs is the loop's
stall (what every other connection waits). ``--no-ticker`` times the call alone (no other work on the loop to share
the interpreter lock with). Name the code measured as for ``bench/truncation_caller.py``::

    git archive <commit> broker | tar -x -C /tmp/old && cd /tmp && PYTHONPATH=/tmp/old python <this script> ...
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from broker import broker as broker_module
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.protocol.records import Record, build_batch


async def stalled(call: Callable[[], Awaitable[object]], ticker: bool) -> tuple[float, float]:
    """(the loop's longest stall, the call's time), in seconds, while ``call()`` runs."""
    longest = 0.0
    running = True

    async def tick() -> None:
        nonlocal longest
        last = time.perf_counter()
        while running:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    ticking = asyncio.create_task(tick()) if ticker else None
    await asyncio.sleep(0.01)
    longest = 0.0
    began = time.perf_counter()
    await call()
    took = time.perf_counter() - began
    running = False
    if ticking is not None:
        await ticking
    return longest, took


def new_broker(data_dir: Path, offsets_partitions: int = 1) -> Broker:
    return Broker(BrokerConfig.load(None, listen="127.0.0.1:0", data_dir=str(data_dir),
                                    overrides={"offsets.topic.num.partitions": offsets_partitions}))


async def delete_run(data_dir: Path, partitions: int, ticker: bool) -> tuple[float, float]:
    broker = new_broker(data_dir)
    await broker.start()
    try:
        await broker.topic_admin.create_topic("doomed", partitions, {"segment.bytes": "1024"}, 1)
        now_ms = int(time.time() * 1000)
        batch = build_batch([Record(0, now_ms, b"k", b"v" * 500, [])])
        for partition in range(partitions):
            plog = broker.partition_log("doomed", partition)
            for _ in range(3):  # a segment each: a batch of ~570 bytes overfills the next
                plog.append(batch, now_ms=now_ms)
        return await stalled(lambda: broker.topic_admin.delete_topic("doomed"), ticker)
    finally:
        await broker.stop()


async def start_run(data_dir: Path, partitions: int, ticker: bool) -> tuple[float, float]:
    broker = new_broker(data_dir, partitions)
    try:
        return await stalled(broker.start, ticker)
    finally:
        await broker.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", choices=["delete", "start"])
    parser.add_argument("--partitions", type=int)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--no-ticker", action="store_true")
    args = parser.parse_args()
    partitions = args.partitions or (1000 if args.work == "delete" else 500)
    run = delete_run if args.work == "delete" else start_run
    stalls, calls = [], []
    for number in range(args.runs):
        data_dir = args.dir / f"topic-files-stall-{os.getpid()}-{number}"
        stall, took = asyncio.run(run(data_dir, partitions, not args.no_ticker))
        stalls.append(1000 * stall)
        calls.append(1000 * took)
        shutil.rmtree(data_dir)
    stalls.sort()
    calls.sort()
    what = "DeleteTopics" if args.work == "delete" else "start (with __consumer_offsets)"
    if not args.no_ticker:
        print(f"loop's longest stall: median {statistics.median(stalls):.1f} ms, max {stalls[-1]:.1f} ms "
              f"over {args.runs} runs of {partitions} partitions")
    print(f"the {what}: median {statistics.median(calls):.1f} ms (min {calls[0]:.1f}, max {calls[-1]:.1f})"
          + (" with no ticker" if args.no_ticker else ""))
    print(f"code: {os.path.dirname(os.path.dirname(os.path.abspath(broker_module.__file__)))}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
