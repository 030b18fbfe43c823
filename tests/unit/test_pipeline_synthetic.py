"""Synthetic histories: the right rows, reproducible, and every group behaving as announced."""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa

from burrowpy.pipeline.history import history_arrow_schema, read_history
from burrowpy.pipeline.replay import ReplaySettings, evaluation_points, replay_history
from burrowpy.pipeline.synthetic import BEHAVIOURS, SyntheticSpec, synthetic_tables, write_synthetic_history
from burrowpy.protocol import Status

SPEC = SyntheticSpec(groups=5, partitions=2, commits_per_partition=40, disorder=0.05)


def whole(spec: SyntheticSpec, topics_per_table: int = 100) -> pa.Table:
    return pa.concat_tables(list(synthetic_tables(spec, topics_per_table)))


def test_rows_and_schema():
    table = whole(SPEC)
    assert table.schema.equals(history_arrow_schema())
    kinds = table.column("kind").to_pylist()
    samples_per_partition = SPEC.duration_ms // (SPEC.sample_interval_s * 1000) + 1
    assert kinds.count("broker") == SPEC.groups * SPEC.partitions * samples_per_partition
    silent_rounds = int(40 * 0.8) - int(40 * 0.4)  # the stopping group's silence
    assert kinds.count("commit") == SPEC.commits - SPEC.partitions * silent_rounds == SPEC.commit_rows
    commits = table.filter(pa.compute.equal(table.column("kind"), "commit"))
    assert commits.column("group").null_count == 0 and commits.column("order").null_count == 0
    brokers = table.filter(pa.compute.equal(table.column("kind"), "broker"))
    assert brokers.column("group").null_count == brokers.num_rows


def test_reproducible_from_the_seed():
    assert whole(SPEC).equals(whole(SPEC))
    assert not whole(SPEC).equals(whole(SyntheticSpec(**{**SPEC.__dict__, "seed": 8})))
    assert whole(SPEC, topics_per_table=2).num_rows == whole(SPEC).num_rows


def test_orders_increase_with_rounds_and_some_commits_arrive_out_of_order():
    commits = [r for r in whole(SPEC).to_pylist() if r["kind"] == "commit"]
    by_partition = defaultdict(list)
    for row in commits:
        by_partition[(row["group"], row["partition"])].append(row)
    disordered = 0
    for rows in by_partition.values():
        by_time = sorted(rows, key=lambda r: r["timestamp"])
        orders = [r["order"] for r in by_time]
        disordered += sum(1 for a, b in zip(orders, orders[1:], strict=False) if b < a)
    assert disordered > 0


def test_groups_share_topics():
    spec = SyntheticSpec(groups=7, groups_per_topic=3, partitions=2, commits_per_partition=10)
    table = whole(spec, topics_per_table=2)
    assert spec.topics == 3
    pairs = {(r["group"], r["topic"]) for r in table.to_pylist() if r["kind"] == "commit"}
    assert pairs == {(f"group-{g:05d}-{BEHAVIOURS[g % 5]}", f"topic-{g // 3:05d}") for g in range(7)}
    brokers = [r for r in table.to_pylist() if r["kind"] == "broker"]
    assert len(brokers) == 3 * 2 * (spec.duration_ms // 30_000 + 1)


def test_every_behaviour_reaches_its_status(tmp_path):
    rows = write_synthetic_history(tmp_path, SPEC)
    table = read_history(tmp_path)
    assert table.num_rows == rows
    records = list(zip(*(table.column(name).to_pylist() for name in table.column_names), strict=True))
    points = evaluation_points(min(r[6] for r in records), max(r[6] for r in records), 60)
    seen = defaultdict(set)
    for result in replay_history(records, points, ReplaySettings()):
        seen[result.group.rsplit("-", 1)[1]].add(result.evaluation.status)
    assert seen["healthy"] == {Status.OK}
    assert Status.WARN in seen["lagging"]
    assert {Status.STOP, Status.OK} <= seen["stopping"]
    assert Status.STALL in seen["stalling"]
    assert Status.REWIND in seen["rewinding"]
