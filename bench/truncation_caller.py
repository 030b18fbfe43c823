"""What a follower's truncation costs the calling thread (the broker's event loop), median of ``--runs``.

    .venv/bin/python bench/truncation_caller.py [--runs 20] [--segment-mib 16] [--segments 2.5] [--dir /tmp]

Each run builds a log of ``--segments`` segments of ``--segment-mib`` MiB in 16 KiB producer batches (index entries
every 4 KiB, Kafka's default), then times ``truncate_to(..., roll_off_thread=True)`` into the middle of the
second-to-last segment (the later one goes, the one holding the cut keeps half its batches), as the fetcher calls
it after an OffsetForLeaderEpoch answer; then, apart, the time until the roller's file work is done. Name the code
measured with ``PYTHONPATH`` and run it from a directory without a ``broker`` package (the editable install may map
``broker`` to another checkout; the script prints the one it ran)::

    git archive <commit> broker | tar -x -C /tmp/old && cd /tmp && PYTHONPATH=/tmp/old python <this script>
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from broker.log import partition
from broker.log.background import ROLLER
from broker.log.config import LogConfig
from broker.log.partition import PartitionLog
from broker.protocol.records import Record, build_batch

BATCH_BYTES = 16 << 10


def build(directory: Path, segment_bytes: int, total_bytes: int) -> PartitionLog:
    config = LogConfig.from_settings({"segment.bytes": segment_bytes})
    log = PartitionLog(directory, config)
    records = [Record(i, int(time.time() * 1000), b"k%d" % i, os.urandom(1000), []) for i in range(16)]
    produced = build_batch(records)
    assert abs(len(produced) - BATCH_BYTES) < 1024
    written = 0
    while written < total_bytes:
        log.append(produced, leader_epoch=1)
        written += len(produced)
    return log


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--segment-mib", type=int, default=16)
    parser.add_argument("--segments", type=float, default=2.5)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    segment_bytes = args.segment_mib << 20
    caller, roller = [], []
    for run in range(args.runs):
        directory = args.dir / f"truncation-caller-{os.getpid()}-{run}"
        log = build(directory, segment_bytes, int(args.segments * segment_bytes))
        segments = log._segments
        target = segments[-2]
        offset = (target.base_offset + target.next_offset) // 2
        began = time.perf_counter()
        log.truncate_to(offset, roll_off_thread=True)
        caller.append(time.perf_counter() - began)
        ROLLER.wait_idle()
        roller.append(time.perf_counter() - began)
        log.close()
        shutil.rmtree(directory)
    ms = sorted(1000 * t for t in caller)
    print(f"caller: median {statistics.median(ms):.2f} ms, min {ms[0]:.2f}, max {ms[-1]:.2f} ms over {args.runs} runs")
    done = sorted(1000 * t for t in roller)
    print(f"until the roller is done: median {statistics.median(done):.2f} ms, max {done[-1]:.2f} ms")
    print(f"code: {os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(partition.__file__))))}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
