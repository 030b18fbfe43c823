"""Synthetic offset histories: groups that behave in known ways, written in the history format.

The benchmark and the parity test need histories that are large, reproducible (seeded) and that drive
partitions through every status. Each group consumes every partition of one topic; a topic's log end
grows at ``rate`` messages per second and is sampled every ``sample_interval_s``; ``groups_per_topic``
consecutive groups share a topic. Groups commit every ``commit_interval_s`` and take one of these
behaviours, in turn by group index:

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
    groups_per_topic: int = 1
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
    def topics(self) -> int:
        return -(-self.groups // self.groups_per_topic)

    @property
    def commits(self) -> int:
        """Commit rounds of all groups' partitions (``commit_rows`` is what is written)."""
        return self.groups * self.partitions * self.commits_per_partition

    @property
    def silent_rounds(self) -> int:
        """Rounds in which a stopping group does not commit."""
        return int(self.commits_per_partition * 0.8) - int(self.commits_per_partition * 0.4)

    @property
    def commit_rows(self) -> int:
        """The commits actually written: every round of every group, but the stopping groups' silence."""
        stopping = len(range(BEHAVIOURS.index("stopping"), self.groups, len(BEHAVIOURS)))
        return self.commits - stopping * self.partitions * self.silent_rounds

    @property
    def duration_ms(self) -> int:
        return self.commits_per_partition * self.commit_interval_s * 1000


def topic_name(topic_index: int) -> str:
    return f"topic-{topic_index:05d}"


def group_name(group_index: int) -> str:
    return f"group-{group_index:05d}-{BEHAVIOURS[group_index % len(BEHAVIOURS)]}"


def _topics_table(spec: SyntheticSpec, first_topic: int, topic_count: int) -> Any:
    """History rows of topics [first_topic, first_topic + topic_count) and of the groups that consume them."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng([spec.seed, first_topic])
    partitions, commits = spec.partitions, spec.commits_per_partition
    rewind_by = spec.rate * spec.commit_interval_s * 15  # more than a 10-commit window can win back
    log_start = rng.integers(rewind_by + 1000, rewind_by + 100_000, size=(topic_count, partitions))

    # Broker samples: every partition of every topic sampled at the same instants.
    sample_times = np.arange(0, spec.duration_ms + 1, spec.sample_interval_s * 1000, dtype=np.int64)
    broker_offsets = log_start[..., None] + (sample_times * spec.rate) // 1000
    broker_shape = broker_offsets.shape
    brokers = _table(
        pa,
        np,
        spec,
        kind=KIND_BROKER,
        topic_index=np.broadcast_to(
            np.arange(first_topic, first_topic + topic_count)[:, None, None], broker_shape
        ),
        group_index=None,
        partition=np.broadcast_to(np.arange(partitions)[None, :, None], broker_shape),
        offset=broker_offsets,
        timestamp=spec.start_ms + np.broadcast_to(sample_times, broker_shape),
        order=None,
    )

    # Commits: round k of a group happens at k * interval plus a per-partition phase.
    groups = np.arange(
        first_topic * spec.groups_per_topic,
        min((first_topic + topic_count) * spec.groups_per_topic, spec.groups),
    )
    topic_of_group = groups // spec.groups_per_topic
    group_log_start = log_start[topic_of_group - first_topic]
    phase = rng.integers(0, spec.commit_interval_s * 1000, size=(len(groups), partitions))
    rounds = np.arange(commits, dtype=np.int64)
    elapsed = rounds[None, None, :] * spec.commit_interval_s * 1000 + phase[..., None]
    behaviour = (groups % len(BEHAVIOURS))[:, None, None]
    caught_up = group_log_start[..., None] + (elapsed * spec.rate) // 1000
    behind = caught_up - rng.integers(1, spec.rate * 5, size=elapsed.shape)
    healthy = np.where(
        rng.random(elapsed.shape) < 0.3,
        caught_up,
        caught_up - rng.integers(0, spec.rate * 3, size=elapsed.shape),
    )
    lagging = group_log_start[..., None] + (elapsed * spec.rate) // 2000
    stall_at = int(commits * 0.3)
    stalling = np.where(rounds >= stall_at, behind[..., stall_at : stall_at + 1], behind)
    rewinding = np.where(rounds >= commits // 2, behind - rewind_by, behind)
    stopping = np.where(rounds >= int(commits * 0.8), caught_up, behind)
    offsets = np.select(
        [behaviour == 0, behaviour == 1, behaviour == 2, behaviour == 3],
        [healthy, lagging, stopping, stalling],
        rewinding,
    )
    silent = (
        (behaviour == BEHAVIOURS.index("stopping"))
        & (rounds >= int(commits * 0.4))
        & (rounds < int(commits * 0.8))
    )
    timestamps = spec.start_ms + elapsed
    swap = (rng.random(elapsed.shape) < spec.disorder) & (rounds < commits - 1)
    swapped = timestamps.copy()
    swapped[..., :-1] = np.where(swap[..., :-1], timestamps[..., 1:], timestamps[..., :-1])
    swapped[..., 1:] = np.where(swap[..., :-1], timestamps[..., :-1], swapped[..., 1:])
    order = rounds[None, None, :] * partitions + np.arange(partitions)[None, :, None]
    shape = offsets.shape
    keep = ~np.broadcast_to(silent, shape)
    commits_table = _table(
        pa,
        np,
        spec,
        kind=KIND_COMMIT,
        topic_index=np.broadcast_to(topic_of_group[:, None, None], shape)[keep],
        group_index=np.broadcast_to(groups[:, None, None], shape)[keep],
        partition=np.broadcast_to(np.arange(partitions)[None, :, None], shape)[keep],
        offset=offsets[keep],
        timestamp=swapped[keep],
        order=np.broadcast_to(order, shape)[keep],
    )
    return pa.concat_tables([brokers, commits_table])


def _names(pa: Any, np: Any, indices: Any, name_of: Any) -> Any:
    """A string column of ``name_of(index)`` built through a dictionary: one Python string per distinct name."""
    first = int(indices.min())
    dictionary = pa.array([name_of(i) for i in range(first, int(indices.max()) + 1)])
    return pa.DictionaryArray.from_arrays(pa.array(indices - first, type=pa.int32()), dictionary).cast(
        pa.string()
    )


def _table(
    pa: Any,
    np: Any,
    spec: SyntheticSpec,
    *,
    kind: str,
    topic_index: Any,
    group_index: Any,
    partition: Any,
    offset: Any,
    timestamp: Any,
    order: Any,
) -> Any:
    topic_index = np.ravel(topic_index)
    rows = len(topic_index)
    columns = {
        "kind": pa.array(np.full(rows, kind, dtype=object), pa.string()),
        "cluster": pa.array(np.full(rows, spec.cluster, dtype=object), pa.string()),
        "group": (
            _names(pa, np, np.ravel(group_index), group_name)
            if group_index is not None
            else pa.nulls(rows, pa.string())
        ),
        "topic": _names(pa, np, topic_index, topic_name),
        "partition": pa.array(np.ravel(partition), pa.int32()),
        "offset": pa.array(np.ravel(offset), pa.int64()),
        "timestamp": pa.array(np.ravel(timestamp), pa.int64()),
        "order": pa.array(np.ravel(order), pa.int64()) if order is not None else pa.nulls(rows, pa.int64()),
    }
    return pa.table(columns, schema=history_arrow_schema())


def synthetic_tables(spec: SyntheticSpec, topics_per_table: int = 100) -> Iterator[Any]:
    """The whole history as pyarrow Tables, ``topics_per_table`` topics (with their groups) at a time.

    Each table holds whole topics: every broker sample and every commit of their partitions.
    """
    for first in range(0, spec.topics, topics_per_table):
        yield _topics_table(spec, first, min(topics_per_table, spec.topics - first))


def write_synthetic_history(
    directory: str | os.PathLike, spec: SyntheticSpec, topics_per_file: int = 100
) -> int:
    """Write the history into ``directory`` (history file names); returns the number of rows written.

    A file holds whole topics (broker rows and commits), so each file can also be replayed on its own.
    """
    import pyarrow.parquet as pq

    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    rows = 0
    for sequence, table in enumerate(synthetic_tables(spec, topics_per_file)):
        pq.write_table(table, path / history_file_name(spec.start_ms, sequence))
        rows += table.num_rows
    return rows
