"""A GroupMachine with a fake clock and an in-memory `__consumer_offsets`, for the group unit tests."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from broker.errors import ErrorCode
from broker.groups.machine import GroupConfig, GroupMachine
from broker.groups.requests import (
    CommitRequest,
    JoinRequest,
    JoinResult,
    PartitionCommit,
    SyncRequest,
    SyncResult,
)
from broker.protocol import consumer_offsets
from broker.protocol.api import encode_struct

START_MS = 1_700_000_000_000
CONFIG = GroupConfig(
    offsets_partitions=50,
    initial_rebalance_delay_ms=3000,
    min_session_timeout_ms=6000,
    max_session_timeout_ms=300000,
    offsets_retention_ms=24 * 3600 * 1000,
    retention_check_interval_ms=600000,
)


def subscription(*topics: str) -> bytes:
    return encode_struct("ConsumerProtocolSubscription", 0, {"topics": list(topics), "user_data": None})


def assignment(*topic_partitions: tuple[str, list[int]]) -> bytes:
    return encode_struct(
        "ConsumerProtocolAssignment",
        0,
        {
            "assigned_partitions": [{"topic": t, "partitions": p} for t, p in topic_partitions],
            "user_data": None,
        },
    )


class FakeClock:
    def __init__(self, now: int = START_MS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class MemoryOffsetsLog:
    """Records every append; completes it at once (``auto``) or when the test says so."""

    def __init__(self, auto: bool = True) -> None:
        self.auto = auto
        self.fail_with = ErrorCode.NONE
        self.appends: list[tuple[int, list[tuple[bytes, bytes | None]]]] = []
        self.producers: list[tuple[int, int] | None] = []  # the transaction of each append, if any
        self.waiting: list[Callable[[ErrorCode], None]] = []

    def append(self, partition, records_, on_complete, producer=None) -> None:
        self.appends.append((partition, list(records_)))
        self.producers.append(producer)
        if self.auto:
            on_complete(self.fail_with)
        else:
            self.waiting.append(on_complete)

    def complete(self, error: ErrorCode = ErrorCode.NONE) -> None:
        waiting, self.waiting = self.waiting, []
        for on_complete in waiting:
            on_complete(error)

    def decoded(self) -> list[tuple[int, object, object]]:
        """(partition, key, value) of every record written, decoded; value None for a tombstone."""
        out = []
        for partition, batch in self.appends:
            for key, value in batch:
                decoded_key = consumer_offsets.decode_key(key)
                if value is None:
                    decoded_value = None
                elif isinstance(decoded_key, consumer_offsets.OffsetCommitKey):
                    decoded_value = consumer_offsets.decode_offset_commit_value(value)
                else:
                    decoded_value = consumer_offsets.decode_group_metadata_value(value)
                out.append((partition, decoded_key, decoded_value))
        return out

    def group_values(self, group: str) -> list:
        return [v for _, k, v in self.decoded() if k == consumer_offsets.GroupMetadataKey(group)]


class Harness:
    def __init__(self, config: GroupConfig = CONFIG, auto_append: bool = True, own_all: bool = True) -> None:
        self.clock = FakeClock()
        self.log = MemoryOffsetsLog(auto_append)
        ids = itertools.count(1)
        self.machine = GroupMachine(config, self.log, self.clock, new_member_suffix=lambda: f"id{next(ids)}")
        if own_all:
            for partition in range(config.offsets_partitions):
                self.machine.begin_loading(partition)
                self.machine.finish_loading(partition)

    def advance(self, ms: int) -> None:
        self.clock.now += ms
        self.machine.tick()

    def finish_initial_delay(self, *waiting: list) -> None:
        """Advance by initial delays until every waiting JoinGroup is answered: each delay in which a new
        member joined a new group is followed by another one (bounded by the rebalance timeout)."""
        for _ in range(20):
            if all(waiting):
                return
            self.advance(CONFIG.initial_rebalance_delay_ms)
        raise AssertionError("the initial rebalance never completed")

    def state(self, group: str = "g") -> str | None:
        g = self.machine.group(group)
        return g.state.value if g is not None else None

    def join(
        self,
        group: str = "g",
        member_id: str = "",
        instance_id: str | None = None,
        protocols=(("range", None),),
        protocol_type: str = "consumer",
        session_ms: int = 10000,
        rebalance_ms: int = 30000,
        require_known: bool = False,
        client_id: str = "client",
    ) -> list[JoinResult]:
        answers: list[JoinResult] = []
        protocols = tuple((name, meta if meta is not None else subscription("t")) for name, meta in protocols)
        self.machine.join_group(
            JoinRequest(
                group,
                member_id,
                instance_id,
                client_id,
                "/127.0.0.1",
                session_ms,
                rebalance_ms,
                protocol_type,
                protocols,
                require_known,
            ),
            answers.append,
        )
        return answers

    def sync(
        self,
        group: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> list[SyncResult]:
        answers: list[SyncResult] = []
        self.machine.sync_group(
            SyncRequest(
                group, generation, member_id, instance_id, assignments or {}, protocol_type, protocol_name
            ),
            answers.append,
        )
        return answers

    def heartbeat(
        self, group: str, member_id: str, generation: int, instance_id: str | None = None
    ) -> ErrorCode:
        return self.machine.heartbeat(group, member_id, instance_id, generation)

    def commit(
        self,
        group: str,
        offsets: dict[tuple[str, int], int],
        generation: int = -1,
        member_id: str = "",
        instance_id: str | None = None,
        metadata: str = "",
        retention_ms: int = -1,
    ) -> list[dict[tuple[str, int], ErrorCode]]:
        answers: list = []
        self.machine.commit_offsets(
            CommitRequest(
                group,
                generation,
                member_id,
                instance_id,
                {tp: PartitionCommit(offset, 5, metadata) for tp, offset in offsets.items()},
                retention_ms,
            ),
            answers.append,
        )
        return answers

    def committed(self, group: str, tp: tuple[str, int]) -> int | None:
        error, offsets = self.machine.fetch_offsets(group, [tp])
        assert error == ErrorCode.NONE
        found = offsets[tp]
        return found.offset if found is not None else None

    def stable_group(
        self,
        group: str = "g",
        count: int = 1,
        session_ms: int = 10000,
        rebalance_ms: int = 30000,
        instance_ids: list[str | None] | None = None,
        topics: tuple[str, ...] = ("t",),
    ) -> list[str]:
        """Members joined, synced and Stable at generation 1; their ids, leader first."""
        instance_ids = instance_ids or [None] * count
        pending = [
            self.join(
                group,
                instance_id=iid,
                session_ms=session_ms,
                rebalance_ms=rebalance_ms,
                protocols=(("range", subscription(*topics)),),
            )
            for iid in instance_ids
        ]
        self.finish_initial_delay(*pending)
        results = [answers[0] for answers in pending]
        assert all(r.error == ErrorCode.NONE for r in results), results
        leader = results[0].leader_id
        ids = [leader] + [r.member_id for r in results if r.member_id != leader]
        syncs = [
            self.sync(
                group,
                mid,
                1,
                {m: assignment(("t", [i])) for i, m in enumerate(ids)} if mid == leader else None,
            )
            for mid in reversed(ids)
        ]
        assert all(s and s[0].error == ErrorCode.NONE for s in syncs), syncs
        assert self.state(group) == "Stable"
        return ids
