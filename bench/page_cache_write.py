"""How fast this machine copies new data into the page cache, depending on where the memory comes from.

    .venv/bin/python bench/page_cache_write.py [--gib 4] [--pause 5,20,60] [--dir /tmp]

Writes ``--gib`` GiB into a new file in 1 MiB ``pwrite`` calls (as a broker appends a producer's batches,
without syncing), printing the rate of each 512 MiB, then deletes the file (its pages are freed unwritten)
and writes 1 GiB again at once and after each pause of ``--pause`` seconds. On a virtual machine whose
memory the host backs only when the guest touches it, the first writes that grow the page cache into free
memory run at a fraction of the rate of writes into memory freed a moment ago: that copy is the biggest part
of a broker's work under producers (``perf``: ``copy_folio_from_iter_atomic``), whichever broker it is.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

PIECE = 1 << 20
CHUNK = 512 * PIECE


def write_and_delete(path: Path, nbytes: int, piece: bytes) -> str:
    """Write ``nbytes`` into a new file at ``path``, then delete it; the rate of each CHUNK in GB/s."""
    rates = []
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    try:
        for start in range(0, nbytes, CHUNK):
            end = min(start + CHUNK, nbytes)
            began = time.perf_counter()
            for position in range(start, end, PIECE):
                os.pwrite(fd, piece, position)
            rates.append((end - start) / 1e9 / (time.perf_counter() - began))
    finally:
        os.close(fd)
        path.unlink()
    return ", ".join(f"{rate:.2f}" for rate in rates)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=int, default=4, help="GiB written into free memory first")
    parser.add_argument("--pause", default="5,20,60", help="seconds to wait before each later 1 GiB write")
    parser.add_argument("--dir", type=Path, default=Path("/tmp"), help="where the scratch file goes")
    args = parser.parse_args()
    piece = os.urandom(PIECE)
    path = args.dir / f"page-cache-write-{os.getpid()}.scratch"
    print(f"free memory before: {_free_mib():,} MiB")
    print(f"{args.gib} GiB into a new file, GB/s per 512 MiB: {write_and_delete(path, args.gib << 30, piece)}")
    print(f"1 GiB again at once (the memory just freed): {write_and_delete(path, 1 << 30, piece)}")
    for pause in (float(p) for p in filter(None, args.pause.split(","))):
        time.sleep(pause)
        print(f"1 GiB again after {pause:g} s: {write_and_delete(path, 1 << 30, piece)}")
    return 0


def _free_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemFree:"):
            return int(line.split()[1]) // 1024
    return -1


if __name__ == "__main__":
    raise SystemExit(main())
