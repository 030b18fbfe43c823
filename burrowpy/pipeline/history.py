"""The offset-history format: what the monitor took in, one Parquet row per event.

A history is a directory of Parquet files. Each row is one event the monitor's storage received:

| column      | type   | meaning                                                                  |
|-------------|--------|--------------------------------------------------------------------------|
| `kind`      | string | `"broker"` (a ListOffsets sample), `"commit"` (a consumer commit) or `"record"` (a record's timestamp read for lag in seconds) |
| `cluster`   | string | cluster name as configured in the monitor                                |
| `group`     | string | consumer group; null for broker and record rows                          |
| `topic`     | string |                                                                          |
| `partition` | int32  |                                                                          |
| `offset`    | int64  | broker rows: the partition's log-end offset; commits: committed offset; records: the record's offset |
| `timestamp` | int64  | ms since the epoch; broker rows: sample time; commits: commit time; records: the record's timestamp |
| `order`     | int64  | commits only (null otherwise): position of the commit in its log         |

Files are named ``history-<ms when the file's first event was recorded, 13 digits>-<sequence>.parquet``
so that a plain sort of the names is a sort by capture time. A file is written under a hidden temporary name (Spark and
pyarrow skip names starting with ``.``) and renamed when complete, so a reader never sees half a file
even if the writer dies.

pyarrow is imported lazily: the monitor imports this module, and pyarrow is only in the ``spark`` extra.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from burrowpy.protocol import (
    SetBrokerOffset,
    SetBrokerOffsets,
    SetConsumerOffset,
    SetConsumerOffsets,
    SetRecordTimes,
)

KIND_BROKER = "broker"
KIND_COMMIT = "commit"
KIND_RECORD = "record"

HISTORY_COLUMNS = ("kind", "cluster", "group", "topic", "partition", "offset", "timestamp", "order")

# The same schema for Spark readers (DDL; `group` and `order` are SQL keywords, hence the backquotes).
HISTORY_SPARK_SCHEMA = (
    "kind string, cluster string, `group` string, topic string, partition int, "
    "offset long, timestamp long, `order` long"
)

FILE_PREFIX = "history-"
FILE_SUFFIX = ".parquet"


def history_arrow_schema() -> Any:
    """The pyarrow schema of a history file."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("kind", pa.string(), nullable=False),
            pa.field("cluster", pa.string(), nullable=False),
            pa.field("group", pa.string()),
            pa.field("topic", pa.string(), nullable=False),
            pa.field("partition", pa.int32(), nullable=False),
            pa.field("offset", pa.int64(), nullable=False),
            pa.field("timestamp", pa.int64(), nullable=False),
            pa.field("order", pa.int64()),
        ]
    )


def history_file_name(started_ms: int, sequence: int) -> str:
    return f"{FILE_PREFIX}{started_ms:013d}-{sequence:06d}{FILE_SUFFIX}"


def list_history_files(directory: str | os.PathLike) -> list[Path]:
    """The Parquet files of a history directory sorted by name, skipping hidden ones as Spark does.

    Files written by HistoryWriter sort by time; files written by Spark's file sink (``part-*``) are
    listed too, so a history captured by ``burrowpy spark stream --history`` reads the same way.
    """
    return sorted(
        p
        for p in Path(directory).iterdir()
        if p.name.endswith(FILE_SUFFIX) and not p.name.startswith((".", "_")) and p.is_file()
    )


def read_history(directory: str | os.PathLike) -> Any:
    """All events of a history directory as one pyarrow Table (in file order, then row order)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = history_arrow_schema()
    tables = [pq.read_table(path, schema=schema) for path in list_history_files(directory)]
    return pa.concat_tables(tables) if tables else schema.empty_table()


class HistoryWriter:
    """Records the events the monitor takes in as history files, rolled every ``roll_interval_s``.

    ``record`` only appends to in-memory columns; a file is written when the roll interval has passed
    since the first buffered event was recorded (checked on each ``record`` and ``flush``), when
    ``max_buffered_rows`` is reached, on ``flush(force=True)`` and on ``close``. Events still buffered
    when the process dies are lost; files already written are complete. ``clock`` returns seconds.
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        roll_interval_s: float = 60.0,
        clock: Callable[[], float] = time.time,
        max_buffered_rows: int = 100_000,
    ) -> None:
        if roll_interval_s <= 0:
            raise ValueError("roll_interval_s must be positive")
        if max_buffered_rows <= 0:
            raise ValueError("max_buffered_rows must be positive")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.roll_interval_s = roll_interval_s
        self.max_buffered_rows = max_buffered_rows
        self._clock = clock
        self._columns: dict[str, list] = {name: [] for name in HISTORY_COLUMNS}
        self._buffer_started_at: float | None = None
        self._sequence = self._next_free_sequence()
        self._closed = False

    @property
    def buffered_rows(self) -> int:
        return len(self._columns["kind"])

    def record(self, request: object) -> None:
        """Take in one storage request; anything but SetBrokerOffset(s), SetConsumerOffset(s) and SetRecordTimes
        is ignored (so are records that were gone when read). A run of commits gives a row per commit, a
        topic's broker offsets a row per partition."""
        if self._closed:
            raise ValueError("HistoryWriter is closed")
        if isinstance(request, SetConsumerOffsets):
            for partition, offset, order, timestamp in request.each():
                self._append(KIND_COMMIT, request.cluster, request.group, request.topic, partition, offset,
                             timestamp, order)
        elif isinstance(request, SetConsumerOffset):
            self._append(
                KIND_COMMIT,
                request.cluster,
                request.group,
                request.topic,
                request.partition,
                request.offset,
                request.timestamp,
                request.order,
            )
        elif isinstance(request, SetBrokerOffset):
            self._append(
                KIND_BROKER,
                request.cluster,
                None,
                request.topic,
                request.partition,
                request.offset,
                request.timestamp,
                None,
            )
        elif isinstance(request, SetBrokerOffsets):
            for partition, offset in zip(request.partitions, request.offsets, strict=True):
                self._append(KIND_BROKER, request.cluster, None, request.topic, partition, offset, request.timestamp,
                             None)
        elif isinstance(request, SetRecordTimes):
            for topic, partition, offset, record_time in request.times:
                if record_time is not None:
                    self._append(KIND_RECORD, request.cluster, None, topic, partition, offset, record_time, None)
        else:
            return
        if self.buffered_rows >= self.max_buffered_rows:
            self._write_file()
        else:
            self._roll_if_due()

    def flush(self, force: bool = False) -> None:
        """Write the buffered events if the roll interval has passed, or now if ``force``."""
        if force:
            self._write_file()
        else:
            self._roll_if_due()

    def close(self) -> None:
        """Write what is buffered and refuse further events."""
        if not self._closed:
            self._write_file()
            self._closed = True

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _append(
        self,
        kind: str,
        cluster: str,
        group: str | None,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        order: int | None,
    ) -> None:
        if self._buffer_started_at is None:
            self._buffer_started_at = self._clock()
        columns = self._columns
        columns["kind"].append(kind)
        columns["cluster"].append(cluster)
        columns["group"].append(group)
        columns["topic"].append(topic)
        columns["partition"].append(partition)
        columns["offset"].append(offset)
        columns["timestamp"].append(timestamp)
        columns["order"].append(order)

    def _roll_if_due(self) -> None:
        started = self._buffer_started_at
        if started is not None and self._clock() - started >= self.roll_interval_s:
            self._write_file()

    def _write_file(self) -> None:
        if not self.buffered_rows:
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pydict(self._columns, schema=history_arrow_schema())
        started = self._buffer_started_at
        assert started is not None  # set with the first buffered row
        name = history_file_name(int(started * 1000), self._sequence)
        temporary = self.directory / f".{name}.tmp"
        pq.write_table(table, temporary)
        # fsync before the rename so that a crash leaves either the whole file or none of it.
        with open(temporary, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, self.directory / name)
        self._sequence += 1
        self._columns = {name: [] for name in HISTORY_COLUMNS}
        self._buffer_started_at = None

    def _next_free_sequence(self) -> int:
        """Continue numbering after files left by an earlier writer in the same directory."""
        sequences = []
        for path in list_history_files(self.directory):
            if not path.name.startswith(FILE_PREFIX):
                continue
            suffix = path.name[: -len(FILE_SUFFIX)].rsplit("-", 1)[-1]
            if suffix.isdigit():
                sequences.append(int(suffix))
        return max(sequences, default=-1) + 1
