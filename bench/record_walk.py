"""The produce validator's cost per record: CPU time of ``validate_records`` on uncompressed batches of
librdkafka-like shapes (null keys, fixed-size values, timestamps 1 ms apart), walked record by record and
read with numpy, beside the batch's CRC-32C check for scale.

    .venv/bin/python bench/record_walk.py

CPU time (``time.process_time``), best of seven runs of 20 walks each, so that other processes on the
cores move the figures less than wall time would.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

from broker.protocol import record_walk
from broker.protocol.record_walk import RecordChecks, validate_records
from broker.protocol.records import Record, build_batch, validate_batch

SHAPES = [(1000, 100), (100, 100), (900, 1024), (100, 1024), (16, 1024)]
NOW = 1_700_000_000_000


def best_cpu_seconds(work: Callable[[], object], repeat: int = 20) -> float:
    best = float("inf")
    for _ in range(7):
        started = time.process_time()
        for _ in range(repeat):
            work()
        best = min(best, (time.process_time() - started) / repeat)
    return best


def main() -> None:
    checks = RecordChecks(2**31 - 9, False, None, NOW + 3_600_000, "bench-0")  # Kafka's default bounds
    print("| records x size | walked, ns a record | numpy, ns a record | CRC-32C check, ns a record |")
    print("|---|---|---|---|")
    kept = record_walk.VECTOR_MIN_RECORDS
    for count, size in SHAPES:
        batch = build_batch([Record(i, NOW + i, None, b"x" * size) for i in range(count)])
        header = validate_batch(batch)
        figures = []
        for threshold in (2**31, 1):
            record_walk.VECTOR_MIN_RECORDS = threshold
            figures.append(best_cpu_seconds(partial(validate_records, batch, header, checks)) / count * 1e9)
        record_walk.VECTOR_MIN_RECORDS = kept
        crc = best_cpu_seconds(partial(validate_batch, batch)) / count * 1e9
        print(f"| {count} x {size} B | {figures[0]:,.0f} | {figures[1]:,.0f} | {crc:,.0f} |")


if __name__ == "__main__":
    main()
