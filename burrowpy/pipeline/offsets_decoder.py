"""`__consumer_offsets` records and ListOffsets samples as history rows.

Records are interpreted by the monitor's own consumer module (``burrowpy.coordinators.offsets_topic``,
which decodes with the broker's schema codec), so Spark takes in exactly the commits the monitor's
storage would: same versions read, same group filter. Only offset commits become rows; owner
messages and tombstones have no place in the history format and are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from burrowpy.coordinators.offsets_topic import GroupFilter, RecordSkipped, interpret
from burrowpy.protocol import SetConsumerOffset

from .history import HISTORY_COLUMNS, KIND_BROKER, KIND_COMMIT

HistoryRow = tuple  # the HISTORY_COLUMNS of one event


def commit_rows(
    cluster: str, records: Iterable[tuple[bytes | None, bytes | None, int]], groups: GroupFilter | None = None
) -> Iterator[HistoryRow]:
    """History commit rows for (key, value, offset) records of the offsets topic; the offset is the order."""
    accept = groups or GroupFilter()
    for key, value, offset in records:
        if key is None:
            continue  # not a record of the offsets topic's formats
        try:
            requests = interpret(cluster, key, value, offset, accept)
        except RecordSkipped:
            continue
        for request in requests:
            if isinstance(request, SetConsumerOffset):
                yield (
                    KIND_COMMIT,
                    request.cluster,
                    request.group,
                    request.topic,
                    request.partition,
                    request.offset,
                    request.timestamp,
                    request.order,
                )


def broker_offset_row(cluster: str, topic: str, partition: int, offset: int, timestamp_ms: int) -> HistoryRow:
    """The history row of one ListOffsets sample (a partition's log-end offset at ``timestamp_ms``)."""
    return (KIND_BROKER, cluster, None, topic, partition, offset, timestamp_ms, None)


def decode_arrow_batches(cluster: str, batches: Iterable[Any]) -> Iterator[Any]:
    """``mapInArrow`` body: record batches (key, value, offset, ...) -> history batches of commits."""
    import pyarrow as pa

    from .history import history_arrow_schema

    schema = history_arrow_schema()
    for batch in batches:
        records = zip(
            batch.column("key").to_pylist(),
            batch.column("value").to_pylist(),
            batch.column("offset").to_pylist(),
            strict=True,
        )
        rows = list(commit_rows(cluster, records))
        if rows:
            columns = list(zip(*rows, strict=True))
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(column, type=schema.field(name).type)
                    for name, column in zip(HISTORY_COLUMNS, columns, strict=True)
                ],
                schema=schema,
            )


def commits_from_records(records: Any, cluster: str) -> Any:
    """A Spark DataFrame of offsets-topic records (Spark's ``kafka`` source columns) -> history commit rows."""
    from functools import partial

    from .history import HISTORY_SPARK_SCHEMA

    return records.select("key", "value", "offset").mapInArrow(
        partial(decode_arrow_batches, cluster), HISTORY_SPARK_SCHEMA
    )
