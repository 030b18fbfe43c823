"""The group machine's shared state: its config, where its records go, the groups it holds and the checks
every request makes (which partition, whether this node coordinates it, whether it is loading).

:class:`MachineCore` is the base that the machine's parts build on: the classic protocol
(:mod:`broker.groups.classic`), offset storage (:mod:`broker.groups.offset_commits`) and the machine itself
(:mod:`broker.groups.machine`), which adds the consumer protocol's entry points, admin and loading.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from broker.config import ASSIGNORS, parse_assignors
from broker.errors import ErrorCode
from broker.groups.consumer import ConsumerGroups
from broker.groups.hashing import offsets_partition_for
from broker.groups.loading import PartitionReplay
from broker.groups.state import (
    ClassicGroup,
    GroupState,
    Member,
)
from broker.groups.timers import Deadlines
from broker.protocol import consumer_offsets
from broker.protocol.types import fits_a_string

# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a member that joined but never completed a rebalance
# is dropped after this, since it cannot heartbeat yet and its connection may be gone.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

OffsetsRecord = tuple[bytes, bytes | None]  # (key, value); a None value is a tombstone


class OffsetsLog(Protocol):
    """Where the machine's records go: one call is one atomic batch on one `__consumer_offsets` partition."""

    def append(self, partition: int, records: list[OffsetsRecord],
               on_complete: Callable[[ErrorCode], None], producer: tuple[int, int] | None = None) -> None:
        """``producer`` (id, epoch): the records belong to that producer's transaction (TxnOffsetCommit)."""


@dataclass(frozen=True, slots=True)
class GroupConfig:
    offsets_partitions: int = 50
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    offsets_retention_ms: int = 10080 * 60 * 1000
    retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    group_metadata_value_version: int = consumer_offsets.DEFAULT_GROUP_METADATA_VALUE_VERSION
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    group_max_size: int = 2147483647  # group.max.size: members of a classic group
    consumer_group_max_size: int = 2147483647  # group.consumer.max.size: members of a KIP-848 group
    consumer_assignors: tuple[str, ...] = ASSIGNORS  # group.consumer.assignors, the first the default

    @classmethod
    def from_broker_config(cls, config: Any) -> GroupConfig:
        """From a broker config with Kafka's names (anything with a mapping's ``get``); missing keys take
        Kafka's defaults."""
        get = config.get
        d = cls()
        return cls(
            offsets_partitions=int(get("offsets.topic.num.partitions", d.offsets_partitions)),
            min_session_timeout_ms=int(get("group.min.session.timeout.ms", d.min_session_timeout_ms)),
            max_session_timeout_ms=int(get("group.max.session.timeout.ms", d.max_session_timeout_ms)),
            initial_rebalance_delay_ms=int(get("group.initial.rebalance.delay.ms",
                                               d.initial_rebalance_delay_ms)),
            offsets_retention_ms=int(get("offsets.retention.minutes", d.offsets_retention_ms // 60000)) * 60000,
            retention_check_interval_ms=int(get("offsets.retention.check.interval.ms",
                                                d.retention_check_interval_ms)),
            offset_metadata_max_bytes=int(get("offset.metadata.max.bytes", d.offset_metadata_max_bytes)),
            group_max_size=int(get("group.max.size", d.group_max_size)),
            consumer_group_max_size=int(get("group.consumer.max.size", d.consumer_group_max_size)),
            consumer_assignors=parse_assignors(str(get("group.consumer.assignors", ",".join(d.consumer_assignors)))),
            consumer_session_timeout_ms=int(get("group.consumer.session.timeout.ms", d.consumer_session_timeout_ms)),
            consumer_heartbeat_interval_ms=int(get("group.consumer.heartbeat.interval.ms",
                                                   d.consumer_heartbeat_interval_ms)),
            group_metadata_value_version=int(get("group.metadata.value.version",
                                                 d.group_metadata_value_version)),
        )


# Timer keys. The group id is always part of the key, so unloading a group can cancel its timers.
JOIN_TIMER = "join"  # the rebalance's join phase ends (rebalance timeout or initial delay)
SYNC_TIMER = "sync"  # members that got a JoinGroup answer must have sent SyncGroup by now
MEMBER_SESSION_TIMER = "session"  # a member's heartbeat deadline
PENDING_MEMBER_TIMER = "pending"  # a MEMBER_ID_REQUIRED id that was never used to join
RETENTION_TIMER = "retention"  # periodic offset expiry


class MachineCore:
    def __init__(self, config: GroupConfig, offsets_log: OffsetsLog, clock: Callable[[], int],
                 new_member_suffix: Callable[[], str] = lambda: str(uuid.uuid4()),
                 topics: Callable[[], dict[str, tuple[bytes, int]]] = dict,
                 serving: Callable[[], bool] = lambda: True) -> None:
        """``serving``: whether this broker may act as a coordinator at all now (it is in contact with the
        metadata quorum)."""
        self.config = config
        self._serving = serving
        self._log = offsets_log
        self._clock = clock
        self._new_member_suffix = new_member_suffix
        self._groups: dict[str, ClassicGroup] = {}
        self._owned: set[int] = set()
        self._replays: dict[int, PartitionReplay] = {}
        self._deadlines: Deadlines[tuple[Any, ...]] = Deadlines()
        # groups on the consumer protocol (KIP-848); their offsets are kept in ``_groups`` like any group's
        self.consumer = ConsumerGroups(
            config, clock, self._deadlines,
            lambda group_id, written, done: self._log.append(self.partition_for(group_id), written, done),
            topics)
        self._deadlines.set((RETENTION_TIMER,), clock() + config.retention_check_interval_ms)

    # --- partitions and timers ------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return offsets_partition_for(group_id, self.config.offsets_partitions)

    def owns(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self._owned

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._owned)

    def group(self, group_id: str) -> ClassicGroup | None:
        return self._groups.get(group_id)

    def next_deadline(self) -> int | None:
        return self._deadlines.next_deadline()

    def _schedule_session(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self._deadlines.set((MEMBER_SESSION_TIMER, group.group_id, member.member_id), self._clock() + timeout)

    def _status_error(self, group_id: str, membership: bool) -> ErrorCode | None:
        """Kafka's validateGroupStatus: the membership APIs need a non-empty group id. And any group id must
        fit the string of a `__consumer_offsets` key: a request's id of invalid UTF-8 decodes to three bytes per
        bad byte and can outgrow it. Kafka fails such a group's first write; refusing it here, before any
        state changes, keeps the machine from holding a group it could never store."""
        if (membership and not group_id) or not fits_a_string(group_id):
            return ErrorCode.INVALID_GROUP_ID
        if not self._serving():
            return ErrorCode.NOT_COORDINATOR
        partition = self.partition_for(group_id)
        if partition in self._replays:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._owned:
            return ErrorCode.NOT_COORDINATOR
        return None

    # --- forgetting groups ------------------------------------------------------------------------------

    def _forget_if_unused(self, group: ClassicGroup) -> None:
        """A group created by a request that then failed (and that never had a generation) is not kept."""
        if (group.is_state(GroupState.EMPTY) and group.generation_id == 0 and not group.members
                and not group.pending_members and not group.offsets
                and self._groups.get(group.group_id) is group):
            self._forget_group(group)

    def _forget_group(self, group: ClassicGroup) -> None:
        if self._groups.get(group.group_id) is group:
            del self._groups[group.group_id]
        self._deadlines.cancel((JOIN_TIMER, group.group_id))
        self._deadlines.cancel((SYNC_TIMER, group.group_id))
        for member_id in group.members:
            self._deadlines.cancel((MEMBER_SESSION_TIMER, group.group_id, member_id))
        for member_id in group.pending_members:
            self._deadlines.cancel((PENDING_MEMBER_TIMER, group.group_id, member_id))
