"""Synthetic offset histories: groups that behave in known ways, written in the history format.

The benchmark and the parity test need histories that are large, reproducible (seeded) and that drive
partitions through every status. Each group consumes every partition of one topic; a topic's log end
grows at ``rate`` messages per second and is sampled every ``sample_interval_s``. Groups commit every
``commit_interval_s`` and take one of these behaviours, in turn by group index:

- ``healthy``: follows the log end closely, sometimes exactly (OK);
- ``lagging``: consumes at half the produce rate, so lag grows at every commit (WARN);
- ``stopping``: stops committing at 40% of the run while lag > 0 (STOP), resumes caught up at 80% (OK);
- ``stalling``: commits the same offset again and again from 30% of the run on (STALL);
- ``rewinding``: jumps back at 50% of the run further than it can recover within a window (REWIND).

A ``disorder`` fraction of commits swap timestamps with their successor, so that commits also arrive
out of ``order`` and exercise the ring's back-fill path.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .history import KIND_BROKER, KIND_COMMIT, history_arrow_schema, history_file_name

BEHAVIOURS = ("healthy", "lagging", "stopping", "stalling", "rewinding")


@dataclass(frozen=True)
class SyntheticSpec:
    groups: int = 10
    partitions: int = 4  # per topic
    commits_per_partition: int = 60
    commit_interval_s: int = 60
    sample_interval_s: int = 30
    rate: int = 10  # messages per second per partition
    disorder: float = 0.02
    start_ms: int = 1_700_000_000_000
    seed: int = 7
    cluster: str = "synthetic"

    @property
    def commits(self) -> int:
        return self.groups * self.partitions * self.commits_per_partition

    @property
    def duration_ms(self) -> int:
        return self.commits_per_partition * self.commit_interval_s * 1000


def topic_name(group_index: int) -> str:
    return f"topic-{group_index:05d}"


def group_name(group_index: int) -> str:
    return f"group-{group_index:05d}-{BEHAVIOURS[group_index % len(BEHAVIOURS)]}"


def _tables(spec: SyntheticSpec, first_group: int, group_count: int) -> Iterator[Any]:
    """History rows of groups [first_group, first_group + group_count) and their topics."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng([spec.seed, first_group])
    groups = np.arange(first_group, first_group + group_count)
    partitions, commits = spec.partitions, spec.commits_per_partition
    rewind_by = spec.rate * spec.commit_interval_s * 15  # more than a 10-commit window can win back
    log_start = rng.integers(rewind_by + 1000, rewind_by + 100_000, size=(group_count, partitions))

    def log_end(elapsed_ms: Any) -> Any:
        return log_start[..., None] + (elapsed_ms * spec.rate) // 1000

    # Broker samples: one topic per group, every partition sampled at the same instants.
    sample_times = np.arange(0, spec.duration_ms + 1, spec.sample_interval_s * 1000, dtype=np.int64)
    broker_offsets = log_end(np.broadcast_to(sample_times, (group_count, partitions, len(sample_times))))
    broker_shape = broker_offsets.shape
    yield _table(
        pa, np, spec, kind=KIND_BROKER,
        group_index=np.broadcast_to(groups[:, None, None], broker_shape), with_group=False,
        partition=np.broadcast_to(np.arange(partitions)[None, :, None], broker_shape),
        offset=broker_offsets, timestamp=spec.start_ms + np.broadcast_to(sample_times, broker_shape), order=None,
    )

    # Commits: round k of a group happens at k * interval plus a per-partition phase.
    phase = rng.integers(0, spec.commit_interval_s * 1000, size=(group_count, partitions))
    rounds = np.arange(commits, dtype=np.int64)
    elapsed = rounds[None, None, :] * spec.commit_interval_s * 1000 + phase[..., None]
    behaviour = (groups % len(BEHAVIOURS))[:, None, None]
    caught_up = log_end(elapsed)
    behind = caught_up - rng.integers(1, spec.rate * 5, size=elapsed.shape)
    healthy = np.where(rng.random(elapsed.shape) < 0.3, caught_up, caught_up - rng.integers(0, spec.rate * 3,
                                                                                                 size=elapsed.shape))
    lagging = log_start[..., None] + (elapsed * spec.rate) // 2000
    stall_at = int(commits * 0.3)
    stalling = np.where(rounds >= stall_at, behind[..., stall_at:stall_at + 1], behind)
    rewinding = np.where(rounds >= commits // 2, behind - rewind_by, behind)
    stopping = np.where(rounds >= int(commits * 0.8), caught_up, behind)
    offsets = np.select(
        [behaviour == 0, behaviour == 1, behaviour == 2, behaviour == 3],
        [healthy, lagging, stopping, stalling],
        rewinding,
    )
    silent = (behaviour == 2) & (rounds >= int(commits * 0.4)) & (rounds < int(commits * 0.8))
    timestamps = spec.start_ms + elapsed
    swap = (rng.random(elapsed.shape) < spec.disorder) & (rounds < commits - 1)
    swapped = timestamps.copy()
    swapped[..., :-1] = np.where(swap[..., :-1], timestamps[..., 1:], timestamps[..., :-1])
    swapped[..., 1:] = np.where(swap[..., :-1], timestamps[..., :-1], swapped[..., 1:])
    order = rounds[None, None, :] * partitions + np.arange(partitions)[None, :, None]
    keep = ~np.broadcast_to(silent, offsets.shape)
    shape = offsets.shape
    yield _table(
        pa, np, spec, kind=KIND_COMMIT,
        group_index=np.broadcast_to(groups[:, None, None], shape)[keep], with_group=True,
        partition=np.broadcast_to(np.arange(partitions)[None, :, None], shape)[keep],
        offset=offsets[keep], timestamp=swapped[keep], order=np.broadcast_to(order, shape)[keep],
    )


def _table(pa: Any, np: Any, spec: SyntheticSpec, *, kind: str, group_index: Any, with_group: bool,
           partition: Any, offset: Any, timestamp: Any, order: Any) -> Any:
    group_index = np.ravel(group_index)
    rows = len(group_index)
    first = int(group_index.min())
    names = np.arange(first, int(group_index.max()) + 1)
    indices = pa.array(group_index - first, type=pa.int32())
    topics = pa.DictionaryArray.from_arrays(indices, pa.array([topic_name(i) for i in names])).cast(pa.string())
    if with_group:
        groups = pa.DictionaryArray.from_arrays(indices, pa.array([group_name(i) for i in names])).cast(pa.string())
    else:
        groups = pa.nulls(rows, pa.string())
    columns = {
        "kind": pa.array(np.full(rows, kind, dtype=object), pa.string()),
        "cluster": pa.array(np.full(rows, spec.cluster, dtype=object), pa.string()),
        "group": groups,
        "topic": topics,
        "partition": pa.array(np.ravel(partition), pa.int32()),
        "offset": pa.array(np.ravel(offset), pa.int64()),
        "timestamp": pa.array(np.ravel(timestamp), pa.int64()),
        "order": pa.array(np.ravel(order), pa.int64()) if order is not None else pa.nulls(rows, pa.int64()),
    }
    return pa.table(columns, schema=history_arrow_schema())


def synthetic_tables(spec: SyntheticSpec, groups_per_table: int = 100) -> Iterator[Any]:
    """The whole history as pyarrow Tables, ``groups_per_table`` groups (and their topics) at a time."""
    for first in range(0, spec.groups, groups_per_table):
        yield from _tables(spec, first, min(groups_per_table, spec.groups - first))


def write_synthetic_history(directory: str | os.PathLike, spec: SyntheticSpec, groups_per_file: int = 100) -> int:
    """Write the history into ``directory`` (history file names); returns the number of rows written."""
    import pyarrow.parquet as pq

    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    rows = 0
    for sequence, table in enumerate(synthetic_tables(spec, groups_per_file)):
        pq.write_table(table, path / history_file_name(spec.start_ms, sequence))
        rows += table.num_rows
    return rows
