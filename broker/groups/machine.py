"""The group coordinator as a pure state machine: Kafka's classic rebalance protocol and offset storage.

:class:`GroupMachine` holds every group of the `__consumer_offsets` partitions this node coordinates and
implements what Apache Kafka's (pre-KIP-848) ``GroupCoordinator`` and ``GroupMetadataManager`` do, with
no sockets, no asyncio and no clock of its own:

* time comes from an injected ``clock()`` (milliseconds); timers are deadlines that the owner fires by
  calling :meth:`GroupMachine.tick` at :meth:`GroupMachine.next_deadline`;
* answers go to ``reply`` callbacks, so a JoinGroup can wait for the rebalance to complete;
* records for `__consumer_offsets` go to an injected :class:`OffsetsLog`, which calls back when the
  append is done; commits, the leader's assignment, deletions and a static member's new id are answered
  only after that.

It is built in parts along the protocol's seams: the state and checks every request shares
(:mod:`broker.groups.machine_core`), the classic rebalance protocol (:mod:`broker.groups.classic`), offset
storage (:mod:`broker.groups.offset_commits`) and the consumer protocol of KIP-848
(:mod:`broker.groups.consumer`); this module adds the timers, admin and partition loading.

The shell that wires this to the event loop and the partition logs is :mod:`broker.groups.coordinator`.
Kafka's rules are followed closely; where they are subtle, comments say which Kafka behaviour is meant.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import structlog

from broker.errors import ErrorCode
from broker.groups.classic import ClassicProtocol
from broker.groups.consumer import (
    REVOCATION_TIMER,
    SESSION_TIMER,
    HeartbeatRequest,
    HeartbeatResult,
)
from broker.groups.loading import PartitionReplay
from broker.groups.machine_core import (
    JOIN_TIMER,
    MEMBER_SESSION_TIMER,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    PENDING_MEMBER_TIMER,
    RETENTION_TIMER,
    SYNC_TIMER,
    GroupConfig,
    OffsetsLog,
    OffsetsRecord,
)
from broker.groups.offset_commits import OffsetCommits, commit_error
from broker.groups.requests import (
    DEAD_GROUP_STATE,
    GroupDescription,
    GroupListing,
    JoinResult,
    MemberDescription,
    SyncResult,
)
from broker.groups.state import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    GroupState,
)

log = structlog.get_logger("broker.groups")

__all__ = ["NEW_MEMBER_JOIN_TIMEOUT_MS", "GroupConfig", "GroupMachine", "OffsetsLog", "OffsetsRecord"]


class GroupMachine(ClassicProtocol, OffsetCommits):
    # --- timers ---------------------------------------------------------------------------------------------

    def tick(self) -> None:
        """Fire every timer that is due now."""
        self._deadlines.expire(self._clock(), self._on_timer)

    def _on_timer(self, key: tuple[Any, ...]) -> None:
        kind = key[0]
        if kind in (SESSION_TIMER, REVOCATION_TIMER):
            self.consumer.on_timer(kind, key[1], key[2])
            return
        if kind == RETENTION_TIMER:
            now = self._clock()
            self._deadlines.set((RETENTION_TIMER,), now + self.config.retention_check_interval_ms)
            self.expire_offsets()
            return
        group = self._groups.get(key[1])
        if group is None:
            return
        if kind == JOIN_TIMER:
            self._on_join_deadline(group)
        elif kind == SYNC_TIMER:
            self._on_sync_deadline(group)
        elif kind == MEMBER_SESSION_TIMER:
            self._on_session_deadline(group, key[2])
        elif kind == PENDING_MEMBER_TIMER:
            self._remove_pending_member(group, key[2])

    # --- consumer-protocol groups (KIP-848) -----------------------------------------------------------------

    def describe_consumer_group(self, group_id: str, topic_names: dict[bytes, str]
                                ) -> tuple[ErrorCode, str | None, dict[str, Any] | None]:
        """ConsumerGroupDescribe: (error, message, description)."""
        error = self._status_error(group_id, membership=False)
        if error is not None:
            return error, None, None
        described = self.consumer.describe(group_id, topic_names)
        if described is None:
            message = (f"Group {group_id} is not a consumer group." if group_id in self._groups
                       else f"Group {group_id} not found.")  # Kafka's words
            return ErrorCode.GROUP_ID_NOT_FOUND, message, None
        return ErrorCode.NONE, None, described

    def consumer_group_heartbeat(self, request: HeartbeatRequest, reply: Callable[[HeartbeatResult], None]) -> None:
        error = self._status_error(request.group_id, membership=False)
        classic = self._groups.get(request.group_id)
        if error is None and classic is not None and (classic.members or classic.pending_members):
            reply(HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND,
                                  f"group {request.group_id} is a classic group with members, not a consumer group"))
            return
        if error is not None:
            reply(HeartbeatResult(error))
            return
        self.consumer.heartbeat(request, reply)

    # --- admin: list, describe, delete --------------------------------------------------------------------------

    def list_groups(self, states: Iterable[str] = ()) -> tuple[ErrorCode, list[GroupListing]]:
        """Every group this node coordinates, optionally only those in ``states`` (names, any case)."""
        wanted = {state.lower() for state in states}
        listings = [GroupListing(g.group_id, g.protocol_type or "", g.state.value)
                    for g in self._groups.values()
                    if self.partition_for(g.group_id) in self._owned and g.group_id not in self.consumer.groups
                    and (not wanted or g.state.value.lower() in wanted)]
        listings += [GroupListing(g.group_id, CONSUMER_PROTOCOL_TYPE, g.state, group_type="consumer")
                     for g in self.consumer.groups.values()
                     if self.partition_for(g.group_id) in self._owned and (not wanted or g.state.lower() in wanted)]
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self._replays else ErrorCode.NONE
        return error, listings

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupDescription]:
        error = self._status_error(group_id, membership=False)
        if error is None and group_id in self.consumer.groups:
            return ErrorCode.NONE, self.consumer.classic_description(group_id)
        group = self._groups.get(group_id) if error is None else None
        if group is None:
            return error or ErrorCode.NONE, GroupDescription(group_id, DEAD_GROUP_STATE, "", "")
        stable = group.is_state(GroupState.STABLE)
        members = tuple(MemberDescription(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
            m.assignment if stable else b"",
        ) for m in group.members.values())
        return ErrorCode.NONE, GroupDescription(group_id, group.state.value, group.protocol_type or "",
                                                (group.protocol_name or "") if stable else "", members)

    def delete_groups(self, group_ids: Iterable[str], reply: Callable[[dict[str, ErrorCode]], None]) -> None:
        results: dict[str, ErrorCode] = {}
        eligible: list[ClassicGroup] = []
        for group_id in group_ids:
            error = self._status_error(group_id, membership=False)
            group = self._groups.get(group_id) if error is None else None
            consumer_group = self.consumer.groups.get(group_id) if error is None else None
            if consumer_group is not None:
                if consumer_group.members:
                    results[group_id] = ErrorCode.NON_EMPTY_GROUP
                    continue
                self.consumer.delete(group_id)
                if group is None:
                    results[group_id] = ErrorCode.NONE
                    continue
            if error is not None:
                results[group_id] = error
            elif group is None:
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.is_state(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD, self._clock())
                eligible.append(group)
            else:
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
        if not eligible:
            reply(results)
            return

        def done(error: ErrorCode) -> None:
            answer = commit_error(error)
            reply({**results, **{g.group_id: answer for g in eligible}})

        self._cleanup_groups(eligible, lambda g: g.offsets.remove_all(), done)

    # --- loading and unloading partitions ---------------------------------------------------------------------

    def begin_loading(self, partition: int) -> None:
        """Requests for this partition's groups get COORDINATOR_LOAD_IN_PROGRESS until :meth:`finish_loading`."""
        self._replays[partition] = PartitionReplay(partition)

    def replay(self, partition: int, key: bytes | None, value: bytes | None, producer_id: int = -1) -> None:
        """One record of a partition being loaded, in log order (tombstones included); ``producer_id`` for
        a record of a transactional batch."""
        self._replays[partition].apply(key, value, producer_id)

    def replay_marker(self, partition: int, producer_id: int, committed: bool) -> None:
        """A transaction marker met while loading a partition."""
        self._replays[partition].apply_marker(producer_id, committed)

    def finish_loading(self, partition: int) -> None:
        """Take over the groups the partition's records describe. Restored members must heartbeat within
        their session timeout (they do if they are still alive), or are expelled."""
        replay = self._replays.pop(partition)
        loaded = replay.groups(self._clock())
        self._owned.add(partition)
        self.consumer.adopt(replay.consumer_groups)
        for group_id, group in loaded.items():
            if self.partition_for(group_id) != partition:
                log.warning("group record in the wrong partition", group=group_id, partition=partition)
            self._groups[group_id] = group
            for member in group.members.values():
                self._schedule_session(group, member)
        if loaded:
            log.info("offsets partition loaded", partition=partition, groups=len(loaded))

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating a partition's groups (another node takes over): waiting members are told
        NOT_COORDINATOR and go looking for the new coordinator."""
        self._replays.pop(partition, None)
        self._owned.discard(partition)
        self.consumer.unload([g for g in self.consumer.groups if self.partition_for(g) == partition])
        for group in [g for g in self._groups.values() if self.partition_for(g.group_id) == partition]:
            for member in group.members.values():
                self._answer_join(member, JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
                self._answer_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))
            self._forget_group(group)
