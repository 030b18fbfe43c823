"""How long a single node's event loop stops while its first transactional InitProducerId creates
`__transaction_state` (``transaction.state.log.num.partitions``, 50 by default), median of ``--runs``.

    .venv/bin/python bench/txn_topic_loop_stall.py [--runs 20] [--dir /tmp]

A ticker on the loop wakes every millisecond; the longest gap between its wakes while the call runs is the loop's
stall (what every other connection waits). Name the code measured as for ``bench/truncation_caller.py``::

    git archive <commit> broker | tar -x -C /tmp/old && cd /tmp && PYTHONPATH=/tmp/old python <this script>
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from topic_files_loop_stall import stalled

from broker import broker as broker_module
from broker.broker import Broker, ProducerIdAllocator
from broker.config import BrokerConfig
from broker.errors import ErrorCode
from broker.log.manager import LogManager
from broker.txn.coordinator import TransactionCoordinator


async def one_run(data_dir: Path) -> tuple[float, float]:
    """(the loop's longest stall, the call's time), in seconds."""
    broker = Broker(BrokerConfig.load(None, data_dir=str(data_dir), overrides={}))
    broker.logs = LogManager(data_dir / "logs", broker.config.topic_defaults(), auto_high_watermark=True)
    broker.producer_ids = ProducerIdAllocator(data_dir / "producer-ids.json")
    coordinator = TransactionCoordinator(broker)
    broker.transactions = coordinator
    await coordinator.start()
    answers: list[ErrorCode] = []

    async def init() -> None:
        error, _, _ = await coordinator.init_producer_id("t", 10_000, -1, -1, ErrorCode.PRODUCER_FENCED)
        answers.append(error)

    longest, took = await stalled(init, ticker=True)
    error = answers[0]
    assert error == ErrorCode.NONE
    broker.logs.close()
    return longest, took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    stalls, calls = [], []
    for run in range(args.runs):
        data_dir = args.dir / f"txn-topic-stall-{os.getpid()}-{run}"
        stall, took = asyncio.run(one_run(data_dir))
        stalls.append(1000 * stall)
        calls.append(1000 * took)
        shutil.rmtree(data_dir)
    stalls.sort()
    print(f"loop's longest stall: median {statistics.median(stalls):.1f} ms, max {stalls[-1]:.1f} ms over {args.runs} runs")
    print(f"the InitProducerId: median {statistics.median(calls):.1f} ms")
    print(f"code: {os.path.dirname(os.path.dirname(os.path.abspath(broker_module.__file__)))}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
