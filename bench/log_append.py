"""Partition log alone: append and read throughput, against raw file I/O of the same bytes.

    .venv/bin/python bench/log_append.py [--mb 256] [--dir DIR]

For a few batch shapes (records per batch x value size) it appends pre-built producer batches to a
fresh PartitionLog (validate + CRC-32C + offset patch + write, rolling 64 MiB segments) and then reads
the whole log back the way a consumer fetches (1 MiB reads from the next offset). The same bytes are
then written with plain os.write and read with os.pread, so the overhead of the log is visible in the
same run. Prints MB/s and batches/s. The default scratch directory is under the system temp dir.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from broker.log.config import LogConfig
from broker.log.partition import PartitionLog
from broker.protocol.records import BatchHeader, Record, build_batch

SHAPES = [(1, 100), (10, 100), (100, 100), (16, 1024), (1, 65536)]
READ_SIZE = 1 << 20


def producer_batch(records: int, value_size: int) -> bytes:
    value = os.urandom(value_size)
    return build_batch([Record(i, 1_700_000_000_000 + i, b"key-%d" % i, value, []) for i in range(records)])


def bench_log(directory: str, data: bytes, count: int) -> tuple[float, float]:
    log = PartitionLog(directory, LogConfig(segment_bytes=64 << 20))
    start = time.perf_counter()
    for _ in range(count):
        log.append(data, now_ms=1_700_000_000_000)
    append_s = time.perf_counter() - start
    start = time.perf_counter()
    offset = 0
    end = log.log_end_offset
    while offset < end:
        chunk = log.read(offset, READ_SIZE)
        last_position = len(chunk) - len(data)
        offset = BatchHeader.parse(chunk, last_position).next_offset
    read_s = time.perf_counter() - start
    log.close()
    return append_s, read_s


def bench_raw(path: str, data: bytes, count: int) -> tuple[float, float]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, data)
    write_s = time.perf_counter() - start
    size = os.fstat(fd).st_size
    start = time.perf_counter()
    position = 0
    while position < size:
        position += len(os.pread(fd, READ_SIZE, position))
    read_s = time.perf_counter() - start
    os.close(fd)
    return write_s, read_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=256, help="megabytes appended per shape")
    parser.add_argument("--dir", default=None, help="scratch directory (default: a new temp dir)")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="log-bench-", dir=args.dir)
    try:
        print(f"{args.mb} MiB per shape, scratch {scratch}")
        print(
            f"{'records x value':>16} {'batch B':>8} | {'append MB/s':>11} {'batches/s':>10} {'read MB/s':>10}"
            f" | {'raw write MB/s':>14} {'raw read MB/s':>13}"
        )
        for records, value_size in SHAPES:
            data = producer_batch(records, value_size)
            count = max(1, (args.mb << 20) // len(data))
            total_mb = count * len(data) / 1e6
            log_dir = os.path.join(scratch, f"log-{records}-{value_size}")
            append_s, read_s = bench_log(log_dir, data, count)
            shutil.rmtree(log_dir)
            raw_path = os.path.join(scratch, "raw")
            raw_write_s, raw_read_s = bench_raw(raw_path, data, count)
            os.unlink(raw_path)
            print(
                f"{records:>6} x {value_size:>7} {len(data):>8} | {total_mb / append_s:>11.0f} {count / append_s:>10.0f}"
                f" {total_mb / read_s:>10.0f} | {total_mb / raw_write_s:>14.0f} {total_mb / raw_read_s:>13.0f}"
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
