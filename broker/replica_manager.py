"""The partitions this broker holds, as Kafka's ReplicaManager gives them to the request handlers: the log of
a partition it leads (for appends, reads, offsets and trimming), appends, the acks=all wait for the in-sync
replicas, followers' fetch progress, and the long-poll wait for new data.

The same on a single node and in a cluster: where partitions are replicated
(:class:`broker.cluster.replication.ReplicaManager`, the replication of the partitions) the ISR confirms an
append; without replication every append is committed at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from broker.cluster.replication import ReplicaManager as Replication
from broker.cluster.view import ClusterView
from broker.errors import ErrorCode, KafkaError
from broker.log.manager import LogManager
from broker.log.partition import AppendResult, PartitionLog


class Append(Protocol):
    def __call__(self, topic: str, partition: int, batch: bytes | memoryview, *,
                 leader_epoch: int) -> Awaitable[AppendResult]: ...


def check_leader_epoch(current_epoch: int, requested: int) -> None:
    """A request's current_leader_epoch against the leader's: FENCED_LEADER_EPOCH for an older one,
    UNKNOWN_LEADER_EPOCH for a newer one (the client's metadata is ahead of this broker's), as Kafka answers."""
    if requested < 0 or requested == current_epoch:
        return
    if requested < current_epoch:
        raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
    raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)


class ReplicaManager:
    def __init__(self, logs: LogManager, view: ClusterView, replication: Replication | None, append: Append,
                 wait_for_appends: Callable[[list[tuple[str, int]], float], Awaitable[None]],
                 clock: Callable[[], float]) -> None:
        """``append``: the broker's leader append (it stamps the epoch, counts, wakes long polls, and lets a
        cluster's replication hear of it); ``wait_for_appends``: returns when one of the partitions gets new
        data or after the timeout in seconds."""
        self._logs = logs
        self._view = view
        self.replication = replication
        self._append = append
        self._wait_for_appends = wait_for_appends
        self._clock = clock

    def partition_log(self, topic: str, partition: int) -> PartitionLog:
        """The local log of a partition; UNKNOWN_TOPIC_OR_PARTITION when there is none."""
        plog = self._logs.get_log(topic, partition)
        if plog is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} is not on this broker")
        return plog

    def leader_log(self, topic: str, partition: int, requested_epoch: int = -1) -> tuple[PartitionLog, int]:
        """The log of a partition this broker acts as the leader of now, and the leader epoch; KafkaError
        otherwise, or when ``requested_epoch`` (the client's current_leader_epoch, -1: none) is not that epoch."""
        plog = self.partition_log(topic, partition)
        epoch = self._view.leader_epoch(topic, partition)
        check_leader_epoch(epoch, requested_epoch)
        return plog, epoch

    def high_watermark_known(self, topic: str, partition: int) -> bool:
        """False while this broker leads the partition with a high watermark still below the start of its
        leader epoch (:attr:`broker.cluster.isr.PartitionLeaderState.high_watermark_lags_epoch`)."""
        state = None if self.replication is None else self.replication.leader_state(topic, partition)
        return state is None or not state.high_watermark_lags_epoch

    async def append(self, topic: str, partition: int, batch: bytes | memoryview, leader_epoch: int) -> AppendResult:
        """Append a client's batch as the partition's leader in ``leader_epoch`` (the one its caller checked)."""
        return await self._append(topic, partition, batch, leader_epoch=leader_epoch)

    async def confirm_in_sync(self, appended: list[tuple[str, int, int]], timeout_s: float) -> list[ErrorCode]:
        """acks=all, for each appended (topic, partition, offset after its batch): NONE once the ISR holds the
        batch (the high watermark passed it), as Kafka's delayed produce answers; all wait together, at most
        ``timeout_s``. REQUEST_TIMED_OUT when it did not in time, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR
        shrank below min.insync.replicas meanwhile, the leadership's error when it moved."""
        if self.replication is None:
            return [ErrorCode.NONE] * len(appended)  # without replication every append is committed at once
        replicated = await asyncio.gather(*(self.replication.wait_for_isr(topic, partition, next_offset, timeout_s)
                                            for topic, partition, next_offset in appended))
        errors = []
        for (topic, partition, _next_offset), in_sync in zip(appended, replicated, strict=True):
            try:
                self._view.leader_epoch(topic, partition)
            except KafkaError as exc:
                errors.append(exc.code)
                continue
            isr = self._view.partition_leader(topic, partition)[3]
            if not in_sync:
                errors.append(ErrorCode.REQUEST_TIMED_OUT)
            elif len(isr) < self.partition_log(topic, partition).config.min_insync_replicas:
                # Written and replicated to the ISR, but the ISR shrank below the minimum meanwhile.
                errors.append(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
            else:
                errors.append(ErrorCode.NONE)
        return errors

    def follower_fetched(self, replica_id: int, fetched: list[tuple[str, int, int, int]]) -> None:
        """A follower's Fetch of (topic, partition, fetch offset, its current leader epoch): its fetch offset is
        its log end. The leader counts it before answering, so the high watermark in this very answer
        already includes it."""
        if self.replication is None:
            return
        now = self._clock()
        for topic, partition, fetch_offset, leader_epoch in fetched:
            self.replication.on_follower_fetch(topic, partition, replica_id, fetch_offset, now,
                                               leader_epoch=leader_epoch)

    async def wait_for_appends(self, partitions: list[tuple[str, int]], timeout_s: float) -> None:
        """Return when any of the partitions gets new data, or after ``timeout_s`` seconds."""
        await self._wait_for_appends(partitions, timeout_s)
