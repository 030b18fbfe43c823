"""What an append's own write into the segment file (the page cache) costs the event loop: ``LogSegment.append`` of
a 1 MiB batch, p50/p99/max over ``--mib`` appends, on a quiet page cache and under dirty-page pressure.

    .venv/bin/python bench/append_write_latency.py [--mib 512] [--dir /tmp]

"quiet": the appends alone (the file's pages new, nothing else dirty). "pressure": another process writes
``--pressure-mib`` MiB to files of its own without syncing, as fast as it can, while the appends run: once dirty pages
pass the kernel's ``vm.dirty_ratio`` share of memory, a writer is made to wait in ``balance_dirty_pages`` (the
kernel throttles every process writing, the broker's appends with it). The files are deleted afterwards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from broker.log.segment import LogSegment
from broker.protocol.records import Record, build_batch

PRESSURE = """
import os, sys
path, mib = sys.argv[1], int(sys.argv[2])
piece = os.urandom(1 << 20)
fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
for i in range(mib):
    os.pwrite(fd, piece, i << 20)
os.close(fd)
"""


def dirty_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Dirty:"):
            return int(line.split()[1]) // 1024
    return -1


def appends(directory: Path, count: int) -> list[float]:
    value = os.urandom((1 << 20) - 200)
    produced = build_batch([Record(0, int(time.time() * 1000), b"k", value, [])])
    segment = LogSegment.create(str(directory), 0, 4096, int(time.time() * 1000))
    times = []
    try:
        for i in range(count):
            began = time.perf_counter()
            segment.append((produced,), i, i + 1, 0)
            times.append(time.perf_counter() - began)
    finally:
        segment.delete()
    return times


def report(name: str, times: list[float]) -> None:
    ms = sorted(1000 * t for t in times)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(f"{name}: p50 {statistics.median(ms):.3f} ms, p99 {p99:.3f} ms, max {ms[-1]:.3f} ms over {len(ms)} "
          f"appends of 1 MiB; dirty now {dirty_mib()} MiB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=512)
    parser.add_argument("--pressure-mib", type=int, default=8192)
    parser.add_argument("--dirty-mib", type=int, default=3584,
                        help="dirty memory to wait for before the appends (past the midpoint of vm.dirty_background_ratio "
                             "and vm.dirty_ratio of this machine's 24 GiB, where the kernel starts throttling writers)")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    work = args.dir / f"append-write-latency-{os.getpid()}"
    work.mkdir()
    try:
        report("quiet", appends(work, args.mib))
        scratch = work / "pressure.scratch"
        writer = subprocess.Popen([sys.executable, "-c", PRESSURE, str(scratch), str(args.pressure_mib)])
        try:
            deadline = time.monotonic() + 60
            while dirty_mib() < args.dirty_mib and writer.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)  # until the other writer has dirtied a good share of memory
            print(f"dirty when the appends start: {dirty_mib()} MiB")
            report("pressure", appends(work, args.mib))
        finally:
            writer.kill()
            writer.wait()
            scratch.unlink(missing_ok=True)
    finally:
        for name in os.listdir(work):
            os.unlink(work / name)
        work.rmdir()
    print(f"vm.dirty_ratio {Path('/proc/sys/vm/dirty_ratio').read_text().strip()}, "
          f"vm.dirty_background_ratio {Path('/proc/sys/vm/dirty_background_ratio').read_text().strip()}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
