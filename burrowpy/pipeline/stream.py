"""The streaming job: live partition statuses from a broker, with Structured Streaming.

Two streams are merged into history-shaped events: the offsets topic read with Spark's ``kafka`` source
and decoded as the monitor decodes it, and log-end offset samples from ``burrowpy-broker-offsets``.
Events are keyed by (cluster, topic, partition) and folded by ``applyInPandasWithState`` into the same
``PartitionState`` the batch job replays (storage rings, lag-time lookup), evaluated with the rules at
processing time. A row is emitted whenever a group's status on a partition changes, the first
evaluation included.

When is "now"? A key with new rows is evaluated as of its newest event: log-end samples and commits
are stamped when they were read, so a slow micro-batch does not make a busy consumer look stopped.
A consumer that goes silent sends nothing, and its key may get no new rows at all: every key carries
a processing-time timeout, and when it fires the key is evaluated again at the current time, which is
how STOP is noticed. The evaluation time of a key never goes backwards. The state is pickled into one binary column; it holds Python objects of this
version of burrowpy, so a checkpoint is not meant to outlive an upgrade.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from burrowpy.protocol import Status

from .replay import PartitionState, ReplaySettings, frame_events

STATUS_CHANGE_SCHEMA = (
    "cluster string, `group` string, topic string, partition int, timestamp long, status string, "
    "current_lag long, complete double, lag_seconds double"
)
STATE_SCHEMA = "state binary"


@dataclass(frozen=True)
class StreamSettings:
    bootstrap_servers: str
    output: str
    checkpoint: str
    history: str | None = None
    cluster: str = "local"
    offsets_topic: str = "__consumer_offsets"
    starting_offsets: str = "earliest"
    sample_interval_s: float = 10.0
    trigger_s: float = 1.0
    expire_group_s: int = 604800  # storage expire-group: 7 days, as in Burrow
    replay: ReplaySettings = field(default_factory=ReplaySettings)

    @property
    def evaluation_timeout_ms(self) -> int:
        """How long a key may go without rows before it is evaluated anyway (STOP detection)."""
        return max(1000, int(self.trigger_s * 1000))


@dataclass
class LiveState:
    """The state of one (cluster, topic, partition): storage's view plus the last status sent per group."""

    partition: PartitionState
    last_status: dict[str, Status] = field(default_factory=dict)
    evaluated_at_s: int = 0

    def take_in(self, frame: Any) -> int:
        """Apply a micro-batch's events of this key in replay order; returns the newest event time (s)."""
        events = sorted(frame_events(frame))
        for event in events:
            self.partition.apply(event)
        return events[-1][0] // 1000 if events else 0

    def forget_expired(self, expire_group_s: int) -> None:
        """Drop groups whose newest commit here is older than ``expire_group_s`` (storage's expire-group).

        Burrow expires a whole group on its last commit anywhere; a key only sees its own partition, so
        here a group is forgotten partition by partition. It keeps a long-running stream's state bounded.
        """
        cutoff_ms = (self.evaluated_at_s - expire_group_s) * 1000
        commits = self.partition.commits
        expired = [
            group
            for group, ring in commits.items()
            if (newest := ring.newest()) is None or newest.timestamp < cutoff_ms
        ]
        for group in expired:
            del commits[group]
            self.last_status.pop(group, None)

    def changes(self, now_s: int, expire_group_s: int | None = None) -> list[Any]:
        """Evaluations at ``now_s`` (or later, if already evaluated later) that changed a group's status."""
        self.evaluated_at_s = max(self.evaluated_at_s, now_s)
        if expire_group_s is not None:
            self.forget_expired(expire_group_s)
        changed = []
        for evaluation in self.partition.evaluate(self.evaluated_at_s):
            if self.last_status.get(evaluation.group) != evaluation.status:
                self.last_status[evaluation.group] = evaluation.status
                changed.append(evaluation)
        return changed


def fold_partition(settings: StreamSettings, key: tuple, frames: Iterator[Any], state: Any) -> Iterator[Any]:
    """``applyInPandasWithState`` body for one (cluster, topic, partition)."""
    import pandas as pd

    cluster, topic, partition = key
    if state.exists:
        live: LiveState = pickle.loads(state.get[0])
    else:
        live = LiveState(PartitionState(settings.replay))
    if state.hasTimedOut:
        now_s = int(time.time())
    else:
        now_s = max((live.take_in(frame) for frame in frames), default=0)
    changes = live.changes(now_s, settings.expire_group_s)
    state.update((pickle.dumps(live, protocol=pickle.HIGHEST_PROTOCOL),))
    state.setTimeoutDuration(settings.evaluation_timeout_ms)
    if changes:
        yield pd.DataFrame(
            {
                "cluster": [cluster] * len(changes),
                "group": [c.group for c in changes],
                "topic": [topic] * len(changes),
                "partition": pd.Series([partition] * len(changes), dtype="int32"),
                "timestamp": pd.Series([c.timestamp for c in changes], dtype="int64"),
                "status": [c.status.name for c in changes],
                "current_lag": pd.Series([c.current_lag for c in changes], dtype="int64"),
                "complete": pd.Series([c.complete for c in changes], dtype="float64"),
                "lag_seconds": pd.Series([c.lag_seconds for c in changes], dtype="float64"),
            }
        )


def event_stream(spark: Any, settings: StreamSettings) -> Any:
    """Commits from the offsets topic and log-end samples, as one stream of history rows."""
    from .offsets_decoder import commits_from_records

    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.bootstrap_servers)
        .option("subscribe", settings.offsets_topic)
        .option("startingOffsets", settings.starting_offsets)
        .option("kafka.exclude.internal.topics", "false")  # see session.py
        # The offsets topic is compacted: offsets that compaction removed are not data lost.
        .option("failOnDataLoss", "false")
        .load()
    )
    samples = (
        spark.readStream.format("burrowpy-broker-offsets")
        .option("kafka.bootstrap.servers", settings.bootstrap_servers)
        .option("cluster", settings.cluster)
        .option("sampleIntervalMs", str(int(settings.sample_interval_s * 1000)))
        .load()
    )
    return commits_from_records(records, settings.cluster).unionByName(samples)


def status_changes(events: Any, settings: StreamSettings) -> Any:
    from pyspark.sql.streaming.state import GroupStateTimeout

    def fold(key, frames, state):  # no annotations: Spark would try to read a pandas UDF type from them
        return fold_partition(settings, key, frames, state)

    return events.groupBy("cluster", "topic", "partition").applyInPandasWithState(
        fold,
        outputStructType=STATUS_CHANGE_SCHEMA,
        stateStructType=STATE_SCHEMA,
        outputMode="append",
        timeoutConf=GroupStateTimeout.ProcessingTimeTimeout,
    )


def start_stream(spark: Any, settings: StreamSettings) -> list[Any]:
    """Start the status query (and the history query if asked); returns the running queries."""
    trigger = f"{settings.trigger_s} seconds"
    events = event_stream(spark, settings)
    queries = [
        status_changes(events, settings)
        .writeStream.format("parquet")
        .outputMode("append")
        .option("path", settings.output)
        .option("checkpointLocation", f"{settings.checkpoint}/status")
        .trigger(processingTime=trigger)
        .queryName("burrowpy-status")
        .start()
    ]
    if settings.history:
        queries.append(
            events.writeStream.format("parquet")
            .outputMode("append")
            .option("path", settings.history)
            .option("checkpointLocation", f"{settings.checkpoint}/history")
            .trigger(processingTime=trigger)
            .queryName("burrowpy-history")
            .start()
        )
    return queries


def run_stream(spark: Any, settings: StreamSettings, run_for_s: float | None = None) -> None:
    """Run until a query fails, the process is interrupted, or ``run_for_s`` seconds have passed."""
    queries = start_stream(spark, settings)
    deadline = None if run_for_s is None else time.monotonic() + run_for_s
    try:
        # awaitAnyTermination raises the error of a query that failed; a stopped query ends the loop.
        while all(query.isActive for query in queries):
            wait = 5.0 if deadline is None else min(5.0, deadline - time.monotonic())
            if wait <= 0:
                break
            spark.streams.awaitAnyTermination(wait)
    finally:
        for query in queries:
            query.stop()
