"""The batch job: a recorded history evaluated at regular points in time, on Spark.

The rows of each (cluster, topic, partition) are brought together in one Spark task, which hands all of its
partitions to one Python call (``mapInArrow``, ``replay_arrow_batches``): each partition's broker samples and
every group's commits are replayed through the storage ring and evaluated by ``burrowpy.evaluator.rules`` at
every evaluation point (see ``replay``). Group statuses, lag reports and the human report are Spark
aggregates of those partition statuses: for a local output, of the partial group figures each task takes in
the same pass (``group_partials``), so the partition statuses are not read back. For a local output each task
also writes its partition statuses itself (``written_partition_evaluations``: pyarrow's Parquet writer, the
files Spark reads back as it would its own), so that none of them becomes a row in Spark's JVM.

Output, under the output directory:
- ``partition_status``: cluster, group, topic, partition, timestamp (the evaluation point, ms),
  status, current_lag, complete, lag_seconds;
- ``group_status``: cluster, group, timestamp, status (OK, WARN or ERR), totallag;
- ``lag_report``: one row per group, see ``LAG_REPORT_COLUMNS``;
- ``report.md`` and ``report.svg``: the short human report.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from burrowpy.evaluator.rules import GROUP_STATUS_OF_PARTITION
from burrowpy.protocol import Status

from .columnar import STATUS_NAMES, HistoryArrays, replay_columns, replay_rows
from .history import HISTORY_SPARK_SCHEMA, KIND_BROKER, KIND_COMMIT, KIND_RECORD
from .replay import (
    ReplaySettings,
    column_events,
    evaluation_points,
    replay_partition,
)

PARTITION_EVALUATION_SCHEMA = (
    "cluster string, `group` string, topic string, partition int, timestamp long, status string, "
    "current_lag long, complete double, lag_seconds double"
)
PARTITION_STATUS_COLUMNS = (
    "cluster",
    "group",
    "topic",
    "partition",
    "timestamp",
    "status",
    "current_lag",
    "complete",
    "lag_seconds",
)
GROUP_STATUS_COLUMNS = ("cluster", "group", "timestamp", "status", "totallag")
LAG_REPORT_COLUMNS = (
    "cluster",
    "group",
    "first_timestamp",
    "last_timestamp",
    "evaluations",
    "seconds_ok",
    "seconds_warn",
    "seconds_err",  # time the group spent in each group status
    "seconds_stop",
    "seconds_stall",
    "seconds_rewind",  # time with at least one partition in that status
    "worst_totallag",
    "worst_partition_lag",
    "worst_lag_seconds",
    "final_status",
    "final_totallag",
)

# Group status rank of each partition status, for a Spark max(); rank -> group status name.
GROUP_RANK = {status.name: int(GROUP_STATUS_OF_PARTITION[status]) for status in GROUP_STATUS_OF_PARTITION}
GROUP_STATUS_NAMES = {int(s): s.name for s in (Status.OK, Status.WARN, Status.ERR)}

# A task's partial group figures per (cluster, group, evaluation point), taken in the replay's pass
# (``group_partials``); Spark combines them into ``group_evaluations``'s figures (``combine_group_partials``).
GROUP_PARTIAL_SCHEMA = (
    "cluster string, `group` string, timestamp long, rank int, totallag long, max_partition_lag long, "
    "max_lag_seconds double, any_stop int, any_stall int, any_rewind int"
)
GROUP_PARTIAL_KEYS = ("cluster", "group", "timestamp")
# (column, how partials of it combine)
GROUP_PARTIAL_FIGURES = (
    ("rank", "max"),
    ("totallag", "sum"),
    ("max_partition_lag", "max"),
    ("max_lag_seconds", "max"),
    ("any_stop", "max"),
    ("any_stall", "max"),
    ("any_rewind", "max"),
)


class HistoryError(ValueError):
    """The input is not a usable history (missing, empty)."""


@dataclass(frozen=True)
class EvaluationSummary:
    events: int
    points: int
    first_point_s: int
    last_point_s: int
    partition_rows: int
    group_rows: int
    groups: int


def replay_arrow_group(points_s: list[int], settings: ReplaySettings, key: tuple, table: Any) -> Any:
    """One (cluster, topic, partition)'s history rows -> its evaluations (``replay_arrow_batches`` gives the same
    for many partitions at once).

    Arrow in and out. The columnar replay takes the histories it covers; any other partition is replayed
    event by event through the storage rings (the definition both are tested against).
    """
    columns = replay_columns(table, points_s, settings)
    if columns is None:
        columns = event_replay_columns(table, points_s, settings)
    return event_replay_table(key, columns)


def event_replay_table(key: tuple, columns: dict[str, Any]) -> Any:
    """One partition's evaluation columns (group and status as names) as an Arrow table of
    PARTITION_EVALUATION_SCHEMA; ``key`` holds its cluster, topic and partition as Arrow scalars."""
    import pyarrow as pa

    cluster, topic, partition = (None if value is None else value.as_py() for value in key)
    rows = len(columns["group"])
    return pa.table(
        {
            "cluster": pa.repeat(pa.scalar(cluster, pa.string()), rows),
            "group": pa.array(columns["group"], pa.string()),
            "topic": pa.repeat(pa.scalar(topic, pa.string()), rows),
            "partition": pa.repeat(pa.scalar(partition, pa.int32()), rows),
            "timestamp": pa.array(columns["timestamp"], pa.int64()),
            "status": pa.array(columns["status"], pa.string()),
            "current_lag": pa.array(columns["current_lag"], pa.int64()),
            "complete": pa.array(columns["complete"], pa.float64()),
            "lag_seconds": pa.array(columns["lag_seconds"], pa.float64(), from_pandas=True),  # NaN: none
        }
    )


def empty_evaluations() -> Any:
    """An Arrow table of PARTITION_EVALUATION_SCHEMA without rows."""
    return event_replay_table((None, None, None), {name: [] for name in PARTITION_STATUS_COLUMNS})


def event_replay_columns(table: Any, points_s: list[int], settings: ReplaySettings) -> dict[str, list]:
    """The evaluations of ``replay_partition`` as the columns of ``replay_columns``."""
    events = column_events(
        *(table.column(name).to_pylist() for name in ("kind", "timestamp", "offset", "order", "group"))
    )
    columns: dict[str, list] = {name: [] for name in ("group", "timestamp", "status", "current_lag", "complete",
                                                      "lag_seconds")}
    for evaluation in replay_partition(events, points_s, settings):
        columns["group"].append(evaluation.group)
        columns["timestamp"].append(evaluation.timestamp)
        columns["status"].append(evaluation.status.name)
        columns["current_lag"].append(evaluation.current_lag)
        columns["complete"].append(evaluation.complete)
        columns["lag_seconds"].append(evaluation.lag_seconds)
    return columns


def check_history_path(input_path: str | os.PathLike) -> None:
    """Refuse a local history directory that does not exist (URLs are Spark's to read)."""
    if not Path(input_path).is_dir() and "://" not in str(input_path):
        raise HistoryError(f"history directory {input_path} does not exist")


def read_history_frame(spark: Any, input_path: str | os.PathLike) -> Any:
    check_history_path(input_path)
    return spark.read.schema(HISTORY_SPARK_SCHEMA).parquet(str(input_path))


# Rows of history gathered before a Spark task's partitions are replayed: the Arrow columns are read into
# numpy once for all of them (a partition's rows never straddle two such chunks).
CHUNK_ROWS = 200_000


def partition_evaluations(events: Any, points_s: list[int], settings: ReplaySettings,
                          partials_dir: str | None = None) -> Any:
    """Every partition of every group at every evaluation point (PARTITION_EVALUATION_SCHEMA).

    The rows of each (cluster, topic, partition) are brought into one Spark partition and sorted by it, and
    each Spark task's rows stream through one Python call (``mapInArrow``): a call per Spark partition, not
    per history partition, and the Arrow answer built for many partitions at once.

    With ``partials_dir`` (a local directory every task can write, which should be empty), each task also
    writes there its partial group figures (``group_partials``), one Parquet file per Spark partition, when
    the frame is computed."""

    def replay(batches):  # no annotations: Spark would try to read a UDF type from them
        sink = None if partials_dir is None else task_partials_writer(partials_dir)
        return replay_arrow_batches(points_s, settings, batches, partials=sink)

    return history_by_partition(events).mapInArrow(replay, schema=PARTITION_EVALUATION_SCHEMA)


def written_partition_evaluations(events: Any, points_s: list[int], settings: ReplaySettings, status_dir: str,
                                  partials_dir: str | None = None) -> Any:
    """``partition_evaluations`` written by the tasks themselves: each task writes its evaluations to
    ``status_dir`` (a local directory every task can write, which should be empty) as it makes them, one
    Parquet file per Spark partition (``write_task_statuses``, ``task_file``), and hands Spark back only
    how many it wrote (one row of TASK_ROWS_SCHEMA, none from a task without any), so that no partition
    status becomes a row of Spark's. ``partials_dir`` as for ``partition_evaluations``. The files are
    written when the frame is computed."""
    run = uuid.uuid4().hex  # in the file names, as Spark's writer puts its job's in them

    def replay(batches):  # no annotations: Spark would try to read a UDF type from them
        import pyarrow as pa

        sink = None if partials_dir is None else task_partials_writer(partials_dir)
        with task_file(status_dir, f"-{run}.snappy.parquet") as path:
            rows = write_task_statuses(path, replay_arrow_batches(points_s, settings, batches, partials=sink))
        if rows:
            yield pa.record_batch([pa.array([rows], pa.int64())], names=["rows"])

    return history_by_partition(events).mapInArrow(replay, schema=TASK_ROWS_SCHEMA)


def write_partition_statuses(events: Any, points_s: list[int], settings: ReplaySettings, status_dir: str,
                             partials_dir: str | None = None) -> int:
    """``written_partition_evaluations`` run: ``status_dir`` (local) holds what Spark's
    ``write.mode("overwrite").parquet`` of ``partition_evaluations`` would (what was there before removed, a
    file with the columns and no rows when there are no rows, ``_SUCCESS`` at the end); the rows written. If
    the job fails, ``status_dir`` is removed: no task's file is left to read as if it were the output."""
    shutil.rmtree(status_dir, ignore_errors=True)
    os.makedirs(status_dir)
    try:
        rows = sum(row["rows"] for row in written_partition_evaluations(
            events, points_s, settings, status_dir, partials_dir).collect())
        if not rows:
            import pyarrow.parquet as pq

            pq.write_table(empty_evaluations(), os.path.join(status_dir, "part-00000.snappy.parquet"),
                           compression="snappy")
        Path(status_dir, "_SUCCESS").touch()
    except BaseException:
        shutil.rmtree(status_dir, ignore_errors=True)
        raise
    return int(rows)


def history_by_partition(events: Any) -> Any:
    """The history rows the replay takes, each (cluster, topic, partition)'s in one Spark partition and
    together in it."""
    from pyspark.sql import functions as F

    # Commit rows without a group or order, and rows of unknown kinds, are not history; broker and record
    # rows are kept whatever their group and order say.
    valid = events.where(
        (events.kind == KIND_BROKER)
        | (events.kind == KIND_RECORD)
        | ((events.kind == KIND_COMMIT) & events["group"].isNotNull() & events["order"].isNotNull())
    )
    keys = ("cluster", "topic", "partition")
    # A hash first: the sort compares one long for almost every pair of rows, rather than the cluster's
    # name (the same in every row of most histories) and the topic's. The hash of the topic alone keeps a
    # topic's partitions together in a task, so that the partial group figures of a chunk of them (a group's
    # commits are on its topics) are fewer rows than its evaluations.
    return (
        valid.select("kind", *keys, "group", "offset", "timestamp", "order")
        .repartition(*keys)
        .sortWithinPartitions(F.xxhash64("cluster", "topic"), *keys)
    )


def replay_arrow_batches(points_s: list[int], settings: ReplaySettings, batches: Any,
                         chunk_rows: int = CHUNK_ROWS, partials: Callable[[Any], None] | None = None) -> Any:
    """``mapInArrow`` body: history record batches whose rows are grouped by (cluster, topic, partition)
    (each partition's rows consecutive) -> record batches of their evaluations (PARTITION_EVALUATION_SCHEMA).

    Batches are gathered until ``chunk_rows``; the chunk's whole partitions are evaluated together and the
    last one, which may go on in the next batch, is kept for the next chunk. With ``partials``, it is
    called once, after the last batch, with the partial group figures of all the evaluations
    (``group_partials``; not called when there were none)."""
    import pyarrow as pa

    chunk_partials: list[Any] = []

    sink = None if partials is None else chunk_partials

    pending: list[Any] = []
    pending_rows = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        pending.append(batch)
        pending_rows += batch.num_rows
        if pending_rows < chunk_rows:
            continue
        table = pa.Table.from_batches(pending)
        starts = partition_starts(table)
        last = int(starts[-1])
        if last == 0:
            continue  # one partition so far: keep gathering
        yield from evaluate_chunk(table.slice(0, last), starts[:-1], points_s, settings, sink).to_batches()
        rest = table.slice(last)
        pending, pending_rows = rest.to_batches(), rest.num_rows
    if pending_rows:
        table = pa.Table.from_batches(pending)
        yield from evaluate_chunk(table, partition_starts(table), points_s, settings, sink).to_batches()
    chunk_partials = [part for part in chunk_partials if part.num_rows]
    if partials is not None and chunk_partials:
        partials(merge_group_partials(chunk_partials))


def partition_starts(table: Any) -> Any:
    """The first row of each run of rows of one (cluster, topic, partition) (the rows grouped by it; a null
    key is a key like any other, as in a Spark grouping)."""
    import numpy as np
    import pyarrow.compute as pc

    rows = table.num_rows
    changed = np.zeros(rows, dtype=bool)
    changed[0] = True
    if rows > 1:
        for name in ("cluster", "topic", "partition"):
            column = table.column(name)
            after, before = column.slice(1), column.slice(0, rows - 1)
            differs = pc.or_(pc.fill_null(pc.not_equal(after, before), False),
                             pc.xor(pc.is_null(after), pc.is_null(before)))
            changed[1:] |= differs.to_numpy(zero_copy_only=False)
    return np.flatnonzero(changed)


def evaluate_chunk(table: Any, starts: Any, points_s: list[int], settings: ReplaySettings,
                   partials: list[Any] | None = None) -> Any:
    """The evaluations of the partitions of ``table`` beginning at rows ``starts`` (an Arrow table); with
    ``partials``, their partial group figures (``group_partials``) are appended to it, in one or more tables."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    arrays = HistoryArrays(table) if settings.min_distance_s == 0 else None
    ends = np.append(starts[1:], table.num_rows)
    pieces: list[dict[str, Any]] = []
    key_rows: list[Any] = []
    piece_starts: list[int] = []
    other_tables = []
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        codes = replay_rows(arrays, start, end, points_s, settings) if arrays is not None else None
        if codes is None:
            part = table.slice(start, end - start)
            key = tuple(part.column(name)[0] for name in ("cluster", "topic", "partition"))
            other_tables.append(event_replay_table(key, event_replay_columns(part, points_s, settings)))
            if partials is not None:
                partials.append(group_partials(other_tables[-1]))
            continue
        pieces.append(codes)
        key_rows.append(np.full(len(codes["group"]), start, dtype=np.int64))
        piece_starts.append(start)
    tables = other_tables
    if pieces:
        assert arrays is not None
        columns = {name: np.concatenate([piece[name] for piece in pieces]) for name in pieces[0]}
        key_row = pa.array(np.concatenate(key_rows))
        if partials is not None:
            # The figures from the codes (cluster, group, status): no strings hashed or compared.
            clusters = pc.dictionary_encode(table.column("cluster").take(pa.array(piece_starts)),
                                            null_encoding="encode").combine_chunks()
            cluster_codes = np.repeat(clusters.indices.to_numpy(zero_copy_only=False),
                                      [len(piece["group"]) for piece in pieces])
            partials.append(coded_group_partials(cluster_codes, clusters.dictionary, columns,
                                                 arrays.group_names))
        tables = [pa.table({
            "cluster": table.column("cluster").take(key_row).cast(pa.string()),
            "group": arrays.group_names.take(pa.array(columns["group"])).cast(pa.string()),
            "topic": table.column("topic").take(key_row).cast(pa.string()),
            "partition": table.column("partition").take(key_row).cast(pa.int32()),
            "timestamp": pa.array(columns["timestamp"], pa.int64()),
            "status": pa.array(STATUS_NAMES.tolist(), pa.string()).take(pa.array(columns["status"])),
            "current_lag": pa.array(columns["current_lag"], pa.int64()),
            "complete": pa.array(columns["complete"], pa.float64()),
            "lag_seconds": pa.array(columns["lag_seconds"], pa.float64(), from_pandas=True),  # NaN: none
        }), *other_tables]
    if not tables:
        return empty_evaluations()
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


# Group rank of each partition status code (a Status value; ``columnar``'s status codes).
RANK_OF_STATUS_CODE = [GROUP_RANK.get(status.name, int(Status.ERR)) for status in Status]


def coded_group_partials(cluster_codes: Any, cluster_names: Any, columns: dict[str, Any], group_names: Any) -> Any:
    """``group_partials`` of the columnar replay's evaluations ``columns`` (numpy; group as indices into
    ``group_names``, status as Status values), each row's cluster an index into ``cluster_names``."""
    import numpy as np
    import pyarrow as pa

    status = columns["status"]
    figures = pa.table({
        "cluster": pa.array(cluster_codes, pa.int32()),
        "group": pa.array(columns["group"], pa.int32()),
        "timestamp": pa.array(columns["timestamp"], pa.int64()),
        "rank": pa.array(np.asarray(RANK_OF_STATUS_CODE, dtype=np.int32)[status]),
        "totallag": pa.array(columns["current_lag"], pa.int64()),
        "max_partition_lag": pa.array(columns["current_lag"], pa.int64()),
        "max_lag_seconds": pa.array(columns["lag_seconds"], pa.float64(), from_pandas=True),  # NaN: none
        **{f"any_{which.name.lower()}": pa.array((status == int(which)).astype(np.int32))
           for which in (Status.STOP, Status.STALL, Status.REWIND)},
    })
    grouped = _aggregate_partials(figures)
    return grouped.set_column(0, "cluster", cluster_names.take(grouped.column("cluster")).cast(pa.string())) \
        .set_column(1, "group", group_names.take(grouped.column("group")).cast(pa.string()))


def group_partials(evaluations: Any) -> Any:
    """Partition evaluations (an Arrow table of PARTITION_EVALUATION_SCHEMA) -> their group figures per
    (cluster, group, timestamp) (an Arrow table of GROUP_PARTIAL_SCHEMA), taken as ``group_evaluations``
    takes them: the worst group rank of a partition status (a status without one ranks ERR), the sum and
    the largest of current_lag, the largest lag_seconds (nulls left out; null when all are), and whether
    a partition is in STOP, STALL, REWIND (1 or 0; null where the status is). Partials of parts of the
    same rows combine (``merge_group_partials``, ``combine_group_partials``) into the figures of all."""
    import pyarrow as pa
    import pyarrow.compute as pc

    status = evaluations.column("status")
    names = list(GROUP_RANK)
    rank = pc.fill_null(pa.array([GROUP_RANK[name] for name in names], pa.int32()).take(
        pc.index_in(status, value_set=pa.array(names, pa.string()))), int(Status.ERR))
    figures = pa.table({
        "cluster": evaluations.column("cluster"),
        "group": evaluations.column("group"),
        "timestamp": evaluations.column("timestamp"),
        "rank": rank,
        "totallag": evaluations.column("current_lag"),
        "max_partition_lag": evaluations.column("current_lag"),
        "max_lag_seconds": evaluations.column("lag_seconds"),
        **{f"any_{which.name.lower()}": pc.equal(status, which.name).cast(pa.int32())
           for which in (Status.STOP, Status.STALL, Status.REWIND)},
    })
    return _aggregate_partials(figures)


def merge_group_partials(tables: list[Any]) -> Any:
    """Partials of parts of the same evaluations (``group_partials``) -> the partials of all of them."""
    import pyarrow as pa

    if len(tables) == 1:
        return tables[0]
    return _aggregate_partials(pa.concat_tables(tables))


def _aggregate_partials(figures: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    # Nulls left out; null only when every value is (min_count=1), as Spark's sum and max.
    options = pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)
    aggregates = [(name, how, options) for name, how in GROUP_PARTIAL_FIGURES]
    grouped = figures.group_by(list(GROUP_PARTIAL_KEYS), use_threads=False).aggregate(aggregates)
    return pa.table({
        "cluster": grouped.column("cluster"),
        "group": grouped.column("group"),
        "timestamp": grouped.column("timestamp"),
        **{name: grouped.column(f"{name}_{how}") for name, how in GROUP_PARTIAL_FIGURES},
    })


@contextmanager
def task_file(directory: str, suffix: str) -> Iterator[str]:
    """The path a Spark task writes its own output file at: ``part-NNNNN`` (the task's partition) and
    ``suffix`` in ``directory``, written under a name Spark's readers pass over (a leading dot) and renamed
    when whole; removed if the writing fails, and not renamed if nothing was written there. A task run again
    (a retry, a speculative copy, the stage computed again) writes the same rows under the same name, so
    each partition counts once."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("a task's own output is written from a Spark task")
    name = f"part-{context.partitionId():05d}{suffix}"
    temporary = os.path.join(directory, f".{name}.{uuid.uuid4().hex}")
    try:
        yield temporary
    except BaseException:  # a generator closed early too: no half-written file is renamed
        with suppress(FileNotFoundError):
            os.remove(temporary)
        raise
    if os.path.exists(temporary):
        os.replace(temporary, os.path.join(directory, name))


def task_partials_writer(directory: str) -> Callable[[Any], None]:
    """A ``replay_arrow_batches`` partials sink for the Spark task it runs in: the partials become
    ``part-NNNNN.parquet`` in ``directory`` (``task_file``)."""

    def write(table: Any) -> None:
        import pyarrow.parquet as pq

        with task_file(directory, ".parquet") as path:
            pq.write_table(table, path)

    return write


# Rows of partition statuses a task gathers into one Parquet row group of its file (a chunk's evaluations
# are about CHUNK_ROWS rows).
STATUS_ROW_GROUP_ROWS = 1_000_000
# What a task that writes its partition statuses itself hands Spark back: how many it wrote.
TASK_ROWS_SCHEMA = "rows long"


def write_task_statuses(path: str, batches: Iterator[Any], row_group_rows: int = STATUS_ROW_GROUP_ROWS) -> int:
    """Partition status record batches (PARTITION_EVALUATION_SCHEMA) -> a Parquet file at ``path`` as Spark's
    writer makes it (snappy, dictionary encoding, the same columns and types when Spark reads it back),
    written as they come, a row group each time ``row_group_rows`` have come (the last one smaller); the rows
    written. Nothing is written when there are none."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer = None
    pending: list[Any] = []
    pending_rows = rows = 0
    try:
        for batch in batches:
            if not batch.num_rows:
                continue
            if writer is None:
                writer = pq.ParquetWriter(path, batch.schema, compression="snappy")
            pending.append(batch)
            pending_rows += batch.num_rows
            rows += batch.num_rows
            if pending_rows >= row_group_rows:
                writer.write_table(pa.Table.from_batches(pending), row_group_size=pending_rows)
                pending, pending_rows = [], 0
        if pending:
            assert writer is not None
            writer.write_table(pa.Table.from_batches(pending), row_group_size=pending_rows)
    finally:
        if writer is not None:
            writer.close()
    return rows


def combine_group_partials(partials: Any) -> Any:
    """Spark frame of GROUP_PARTIAL_SCHEMA rows -> what ``group_evaluations`` gives for the evaluations
    the partials were taken of."""
    from pyspark.sql import functions as F

    combined = {"max": F.max, "sum": F.sum}
    return _with_group_status(
        partials.groupBy(*GROUP_PARTIAL_KEYS)
        .agg(*(combined[how](name).alias(name) for name, how in GROUP_PARTIAL_FIGURES))
    )


def _with_group_status(groups: Any) -> Any:
    """``groups`` with its group status named (``status``) from its worst rank (``rank``)."""
    from pyspark.sql import functions as F

    status_names = F.create_map(
        *[item for k, v in GROUP_STATUS_NAMES.items() for item in (F.lit(k), F.lit(v))]
    )
    return groups.withColumn("status", status_names[F.col("rank")])


def group_evaluations(partitions: Any) -> Any:
    """Per (cluster, group, evaluation point): group status and totallag, plus what the lag report needs."""
    from pyspark.sql import functions as F

    rank = F.lit(int(Status.ERR))
    for name, value in GROUP_RANK.items():
        if value != int(Status.ERR):
            rank = F.when(F.col("status") == name, F.lit(value)).otherwise(rank)
    def any_partition(status: Status) -> Any:
        return F.max((F.col("status") == status.name).cast("int")).alias(f"any_{status.name.lower()}")

    return _with_group_status(
        partitions.groupBy("cluster", "group", "timestamp")
        .agg(
            F.max(rank).alias("rank"),
            F.sum("current_lag").alias("totallag"),
            F.max("current_lag").alias("max_partition_lag"),
            F.max("lag_seconds").alias("max_lag_seconds"),
            any_partition(Status.STOP),
            any_partition(Status.STALL),
            any_partition(Status.REWIND),
        )
    )


def lag_report(groups: Any, step_s: int) -> Any:
    """One row per group: time in each status, worst lags, the final state (LAG_REPORT_COLUMNS)."""
    from pyspark.sql import functions as F

    def seconds_where(condition: Any, name: str) -> Any:
        return (F.sum(condition.cast("long")) * F.lit(step_s)).alias(name)

    return (
        groups.groupBy("cluster", "group")
        .agg(
            F.min("timestamp").alias("first_timestamp"),
            F.max("timestamp").alias("last_timestamp"),
            F.count(F.lit(1)).alias("evaluations"),
            seconds_where(F.col("status") == "OK", "seconds_ok"),
            seconds_where(F.col("status") == "WARN", "seconds_warn"),
            seconds_where(F.col("status") == "ERR", "seconds_err"),
            seconds_where(F.col("any_stop") == 1, "seconds_stop"),
            seconds_where(F.col("any_stall") == 1, "seconds_stall"),
            seconds_where(F.col("any_rewind") == 1, "seconds_rewind"),
            F.max("totallag").alias("worst_totallag"),
            F.max("max_partition_lag").alias("worst_partition_lag"),
            F.max("max_lag_seconds").alias("worst_lag_seconds"),
            F.max_by("status", "timestamp").alias("final_status"),
            F.max_by("totallag", "timestamp").alias("final_totallag"),
        )
        .select(*LAG_REPORT_COLUMNS)
    )


def evaluate_history(
    spark: Any,
    input_path: str | os.PathLike,
    output_path: str | os.PathLike,
    settings: ReplaySettings = ReplaySettings(),
    step_s: int = 60,
    report_groups: int = 5,
) -> EvaluationSummary:
    """Run the batch job: read the history, write every output (overwriting), return counts."""
    from pyspark import StorageLevel
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from .report import write_report

    events = read_history_frame(spark, input_path)
    bounds = events.agg(F.count(F.lit(1)), F.min("timestamp"), F.max("timestamp")).first()
    event_count, first_ms, last_ms = bounds[0], bounds[1], bounds[2]
    if not event_count:
        raise HistoryError(f"history {input_path} has no events")
    points_s = evaluation_points(first_ms, last_ms, step_s)
    output = str(output_path).rstrip("/")

    # A local output: the partition statuses are written by the tasks themselves (``write_partition_statuses``)
    # and the group figures are taken in the same pass (``group_partials``), only those partials combined by
    # Spark; elsewhere Spark writes the statuses and the group figures are read back from what it wrote.
    partials_dir = None if "://" in output else f"{output}/_group_partials"
    if partials_dir is not None:
        shutil.rmtree(partials_dir, ignore_errors=True)
        os.makedirs(partials_dir)
    groups = None
    try:
        # The row counts are taken while each output is written: a count() of its own would be one more
        # Spark job, with its own generated code to compile.
        group_rows = Observation("group_rows")
        if partials_dir is not None:
            partition_count = write_partition_statuses(events, points_s, settings, f"{output}/partition_status",
                                                       partials_dir)
            partials = spark.read.schema(GROUP_PARTIAL_SCHEMA).parquet(partials_dir)
            groups = combine_group_partials(partials).persist(StorageLevel.MEMORY_AND_DISK)
        else:
            partition_rows = Observation("partition_rows")
            partition_evaluations(events, points_s, settings).select(*PARTITION_STATUS_COLUMNS) \
                .observe(partition_rows, F.count(F.lit(1)).alias("rows")) \
                .write.mode("overwrite").parquet(f"{output}/partition_status")
            partition_count = int(partition_rows.get["rows"])
            # Read back from what was written (a columnar scan of the columns they need), rather than from
            # a cache of every partition status, which cost more to build than the file to read.
            written = spark.read.parquet(f"{output}/partition_status")
            groups = group_evaluations(written).persist(StorageLevel.MEMORY_AND_DISK)
        groups.select(*GROUP_STATUS_COLUMNS).observe(group_rows, F.count(F.lit(1)).alias("rows")) \
            .write.mode("overwrite").parquet(f"{output}/group_status")
        report = lag_report(groups, step_s)
        report.write.mode("overwrite").parquet(f"{output}/lag_report")
        report_rows = spark.read.parquet(f"{output}/lag_report").toPandas()
        top = report_rows.sort_values(["worst_totallag", "cluster", "group"], ascending=[False, True, True])
        chosen = top.head(report_groups)[["cluster", "group"]]
        timeline_columns = ["cluster", "group", "timestamp", "status", "totallag", "max_lag_seconds"]
        if len(chosen):
            timelines = (
                groups.join(
                    spark.createDataFrame(chosen, schema="cluster string, `group` string"),
                    ["cluster", "group"],
                )
                .select(*timeline_columns)
                .toPandas()
            )
        else:
            timelines = report_rows.iloc[0:0].reindex(columns=timeline_columns)
        summary = EvaluationSummary(
            events=int(event_count),
            points=len(points_s),
            first_point_s=points_s[0],
            last_point_s=points_s[-1],
            partition_rows=partition_count,
            group_rows=int(group_rows.get["rows"]),
            groups=len(report_rows),
        )
        write_report(Path(output), summary, step_s, report_rows, timelines)
        return summary
    finally:
        if groups is not None:
            groups.unpersist()
        if partials_dir is not None:
            shutil.rmtree(partials_dir, ignore_errors=True)
