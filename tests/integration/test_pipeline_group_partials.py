"""The group figures taken in the replay's pass: partials of any split of the partition evaluations, combined
by Spark (``combine_group_partials``), equal Spark's aggregation of all of them (``group_evaluations``), the
definition the group status and lag report were built on; and the Spark task writes its partials once.

One SparkSession (local[2] on 127.0.0.1) serves the module.
"""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from burrowpy.pipeline.evaluate import (
    GROUP_PARTIAL_SCHEMA,
    PARTITION_EVALUATION_SCHEMA,
    PARTITION_STATUS_COLUMNS,
    combine_group_partials,
    group_evaluations,
    group_partials,
    merge_group_partials,
    replay_arrow_batches,
)
from burrowpy.pipeline.history import history_arrow_schema
from burrowpy.pipeline.replay import ReplaySettings
from burrowpy.pipeline.session import build_session
from burrowpy.protocol import Status

pytestmark = pytest.mark.integration

GROUP_COLUMNS = ("cluster", "group", "timestamp", "rank", "totallag", "max_partition_lag", "max_lag_seconds",
                 "any_stop", "any_stall", "any_rewind", "status")


@pytest.fixture(scope="module")
def spark():
    return build_session("local[2]", app_name="burrowpy-tests", shuffle_partitions=4)


# Few values per key column, so that rows share (cluster, group, timestamp) and partitions; every status
# (and one no group status is given for), lags up to large, lag_seconds often null.
evaluation_rows = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", None]),
        st.sampled_from(["g1", "g2"]),
        st.sampled_from(["t1", "t2"]),
        st.integers(0, 2),
        st.sampled_from([60_000, 120_000]),
        st.sampled_from([s.name for s in Status] + ["UNKNOWN"]),
        st.integers(-5, 2**40),
        st.floats(0.0, 1.0),
        st.one_of(st.none(), st.floats(0.0, 1e6)),
    ),
    max_size=40,
)


def evaluations_table(rows: list[tuple]) -> pa.Table:
    return pa.table({name: pa.array([row[index] for row in rows], kind) for index, (name, kind) in enumerate(
        zip(PARTITION_STATUS_COLUMNS, (pa.string(), pa.string(), pa.string(), pa.int32(), pa.int64(),
                                       pa.string(), pa.int64(), pa.float64(), pa.float64()), strict=True))})


def keyed(rows) -> dict[tuple, tuple]:
    out = {}
    for row in rows:
        values = tuple(row[name] for name in GROUP_COLUMNS)
        out[values[:3]] = tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in values[3:])
    return out


@settings(deadline=None, max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=evaluation_rows, cuts=st.lists(st.integers(0, 40), max_size=4))
def test_partials_of_any_split_combine_into_the_whole_aggregation(spark, rows, cuts):
    table = evaluations_table(rows)
    bounds = sorted({0, table.num_rows, *(min(cut, table.num_rows) for cut in cuts)})
    parts = [table.slice(start, end - start) for start, end in zip(bounds, bounds[1:], strict=False)]
    # a task's partials are merged from its chunks' (merge_group_partials); tasks' partials go to Spark
    tasks = [merge_group_partials([group_partials(part) for part in parts[:2]])] if parts else []
    tasks += [group_partials(part) for part in parts[2:]]
    partial_rows = [row for task in tasks for row in task.to_pylist()]
    expected = group_evaluations(spark.createDataFrame(table.to_pylist(), schema=PARTITION_EVALUATION_SCHEMA))
    got = combine_group_partials(spark.createDataFrame(partial_rows, schema=GROUP_PARTIAL_SCHEMA))
    assert got.columns == expected.columns == list(GROUP_COLUMNS)
    assert got.schema == expected.schema
    assert keyed(got.collect()) == keyed(expected.collect())


def test_the_replay_hands_over_the_partials_of_what_it_yields():
    # two partitions of two groups at two points, cut in small chunks: the sink gets one table, the
    # partials of every row the batches carried
    rows = []
    for partition in range(3):
        for timestamp, offset in ((0, 10), (1000, 20)):
            rows.append(("broker", "c", None, "t", partition, offset + partition, timestamp, None))
            for group, lag in (("g1", 3), ("g2", 0)):
                rows.append(("commit", "c", group, "t", partition, offset + partition - lag, timestamp + 1,
                             timestamp // 1000))
    schema = history_arrow_schema()
    history = pa.table({name: [row[index] for row in rows] for index, name in enumerate(schema.names)},
                       schema=schema)
    handed: list[pa.Table] = []
    out = pa.Table.from_batches(list(replay_arrow_batches([1, 2], ReplaySettings(), iter(history.to_batches(4)),
                                                          chunk_rows=5, partials=handed.append)))
    assert out.num_rows == 12
    assert len(handed) == 1
    assert sorted(handed[0].to_pylist(), key=str) == sorted(group_partials(out).to_pylist(), key=str)
    assert {row["group"]: row["totallag"] for row in handed[0].to_pylist() if row["timestamp"] == 2000} == {
        "g1": 9, "g2": 0}
