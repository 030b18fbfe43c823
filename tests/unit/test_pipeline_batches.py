"""The Spark task's body (``replay_arrow_batches``): the rows of many partitions, grouped by partition and cut
into record batches anywhere, give each partition's evaluations exactly as one call per partition does
(``replay_arrow_group``, the columnar replay or the event-by-event one), whatever the chunk size; and hand
over the partial group figures of all of them once."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from burrowpy.pipeline.evaluate import (
    PARTITION_STATUS_COLUMNS,
    group_partials,
    replay_arrow_batches,
    replay_arrow_group,
)
from burrowpy.pipeline.history import read_history
from burrowpy.pipeline.replay import ReplaySettings, evaluation_points
from burrowpy.pipeline.synthetic import SyntheticSpec, write_synthetic_history

KEYS = ("cluster", "topic", "partition")


def result_rows(table: pa.Table) -> list[tuple]:
    assert table.column_names == list(PARTITION_STATUS_COLUMNS)
    assert [field.type for field in table.schema] == [pa.string(), pa.string(), pa.string(), pa.int32(),
                                                      pa.int64(), pa.string(), pa.int64(), pa.float64(),
                                                      pa.float64()]
    return sorted(
        tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in row)
        for row in zip(*(table.column(name).to_pylist() for name in PARTITION_STATUS_COLUMNS), strict=True)
    )


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> pa.Table:
    """A synthetic history with some disorder, one partition with record rows (replayed event by event),
    and one with a log end that goes back (declined by the columnar path too)."""
    directory = tmp_path_factory.mktemp("history")
    spec = SyntheticSpec(groups=9, groups_per_topic=3, partitions=3, commits_per_partition=40, disorder=0.05)
    write_synthetic_history(directory, spec)
    table = read_history(directory)
    first = table.slice(0, 1).to_pylist()[0]
    extra = pa.Table.from_pylist([
        {**first, "kind": "record", "group": None, "offset": first["offset"] - 3, "order": None},
        {**first, "kind": "broker", "topic": "topic-00001", "partition": 2, "group": None,
         "offset": 0, "timestamp": first["timestamp"] + 1_500_000, "order": None},
    ], schema=table.schema)
    return pa.concat_tables([table, extra])


def grouped(table: pa.Table, seed: int) -> pa.Table:
    """The rows grouped by partition (partitions in a random order, rows within each in a random order),
    as a Spark task hands them over."""
    rng = np.random.default_rng(seed)
    keys = list(zip(*(table.column(k).to_pylist() for k in KEYS), strict=True))
    distinct = sorted(set(keys), key=repr)
    rank = dict(zip(distinct, rng.permutation(len(distinct)).tolist(), strict=True))
    position = np.array([rank[key] for key in keys])
    order = np.lexsort((rng.random(len(keys)), position))
    return table.take(pa.array(order))


def per_partition(table: pa.Table, points: list[int], settings: ReplaySettings) -> list[tuple]:
    tables = []
    for cluster, topic, partition in sorted(set(zip(*(table.column(k).to_pylist() for k in KEYS), strict=True))):
        mask = pc.and_(pc.and_(pc.equal(table.column("cluster"), cluster), pc.equal(table.column("topic"), topic)),
                       pc.equal(table.column("partition"), partition))
        part = table.filter(mask)
        key = (pa.scalar(cluster), pa.scalar(topic), pa.scalar(partition, pa.int32()))
        tables.append(replay_arrow_group(points, settings, key, part))
    return result_rows(pa.concat_tables(tables))


@pytest.mark.parametrize("settings", [ReplaySettings(), ReplaySettings(intervals=4, allowed_lag=20),
                                      ReplaySettings(min_distance_s=90)])
@pytest.mark.parametrize(("batch_rows", "chunk_rows"), [(10_000, 200_000), (97, 500), (13, 1), (5_000, 50)])
def test_batches_equal_a_call_per_partition(history, settings, batch_rows, chunk_rows):
    first, last = pc.min_max(history.column("timestamp")).values()
    points = evaluation_points(first.as_py(), last.as_py(), 60)
    stream = grouped(history, seed=batch_rows).combine_chunks().to_batches(max_chunksize=batch_rows)
    handed: list[pa.Table] = []
    out = list(replay_arrow_batches(points, settings, iter(stream), chunk_rows=chunk_rows,
                                    partials=handed.append))
    assert all(isinstance(batch, pa.RecordBatch) for batch in out)
    got = result_rows(pa.Table.from_batches(out))
    assert got == per_partition(history, points, settings)
    assert len({row[:4] for row in got}) > 20  # partitions of every topic, many groups
    # the group partials handed over once, taken from the codes chunk by chunk (or from the event-by-event
    # replay's rows): those of all the evaluations yielded, taken at once from their names
    assert len(handed) == 1
    assert sorted(handed[0].to_pylist(), key=repr) == sorted(
        group_partials(pa.Table.from_batches(out)).to_pylist(), key=repr)


def test_no_rows_give_no_batches():
    assert list(replay_arrow_batches([1], ReplaySettings(), iter([]))) == []


def test_a_partition_larger_than_a_chunk_is_evaluated_whole(history):
    """A chunk holds at least one whole partition: with chunks of one row, each partition's rows gather
    until the next partition's first row shows up."""
    topic = history.filter(pc.equal(history.column("topic"), "topic-00000"))
    first, last = pc.min_max(topic.column("timestamp")).values()
    points = evaluation_points(first.as_py(), last.as_py(), 60)
    stream = grouped(topic, seed=3).to_batches(max_chunksize=1)
    got = result_rows(pa.Table.from_batches(list(replay_arrow_batches(points, ReplaySettings(), iter(stream),
                                                                      chunk_rows=1))))
    assert got == per_partition(topic, points, ReplaySettings())


def test_null_keys_are_a_partition_of_their_own():
    """Spark groups rows whose key is null together, apart from every other key; so does the task."""
    rows = [
        {"kind": "broker", "cluster": None, "group": None, "topic": "t", "partition": 0, "offset": 10,
         "timestamp": 1_000, "order": None},
        {"kind": "commit", "cluster": None, "group": "g", "topic": "t", "partition": 0, "offset": 4,
         "timestamp": 2_000, "order": 1},
        {"kind": "broker", "cluster": "c", "group": None, "topic": "t", "partition": 0, "offset": 50,
         "timestamp": 1_000, "order": None},
        {"kind": "commit", "cluster": "c", "group": "g", "topic": "t", "partition": 0, "offset": 45,
         "timestamp": 2_000, "order": 1},
    ]
    schema = pa.schema([("kind", pa.string()), ("cluster", pa.string()), ("group", pa.string()),
                        ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                        ("timestamp", pa.int64()), ("order", pa.int64())])
    table = pa.Table.from_pylist(rows, schema=schema)
    out = pa.Table.from_batches(list(replay_arrow_batches([3], ReplaySettings(), iter(table.to_batches()))))
    assert sorted((r["cluster"] or "", r["current_lag"]) for r in out.to_pylist()) == [("", 6), ("c", 5)]
