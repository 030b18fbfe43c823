"""Helpers for the partition-log tests: batches, configs, a settable clock, reading a log back."""

from __future__ import annotations

from broker.log.config import LogConfig
from broker.log.partition import PartitionLog
from broker.protocol.records import Record, build_batch, decode_records_any

BASE_TS = 1_700_000_000_000


def batch(
    count: int = 1,
    *,
    ts: int = BASE_TS,
    key: bytes | None = b"k",
    value: bytes | None = b"v" * 20,
    producer: tuple[int, int, int] = (-1, -1, -1),
    compression: int = 0,
) -> bytes:
    """A producer batch of ``count`` records (offsets from 0, timestamps ts, ts+1, ...)."""
    pid, epoch, sequence = producer
    records = [Record(i, ts + i, key, value, []) for i in range(count)]
    return build_batch(
        records, compression=compression, producer_id=pid, producer_epoch=epoch, base_sequence=sequence
    )


def keyed_batch(pairs: list[tuple[bytes, bytes | None]], *, ts: int = BASE_TS, compression: int = 0) -> bytes:
    records = [Record(i, ts + i, key, value, []) for i, (key, value) in enumerate(pairs)]
    return build_batch(records, compression=compression)


def config(**settings: object) -> LogConfig:
    """A LogConfig from Kafka names written with underscores: config(segment_bytes=4096)."""
    return LogConfig.from_settings({name.replace("_", "."): value for name, value in settings.items()})


def all_records(log: PartitionLog, start: int | None = None) -> list[Record]:
    first = log.log_start_offset if start is None else start
    if first >= log.log_end_offset:
        return []
    return [r for r in decode_records_any(log.read(first, 1 << 30)) if r.offset >= first]


class Clock:
    """Time in seconds, moved by hand."""

    def __init__(self, now_ms: int = BASE_TS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> float:
        return self.now_ms / 1000

    def advance(self, ms: int) -> None:
        self.now_ms += ms
