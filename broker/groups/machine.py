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

The shell that wires this to the event loop and the partition logs is :mod:`broker.groups.coordinator`.
Kafka's rules are followed closely; where they are subtle, comments say which Kafka behaviour is meant.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from broker.errors import ErrorCode
from broker.groups.consumer import (
    REVOCATION_TIMER,
    SESSION_TIMER,
    ConsumerGroups,
    HeartbeatRequest,
    HeartbeatResult,
)
from broker.groups.hashing import offsets_partition_for
from broker.groups.loading import PartitionReplay
from broker.groups.offsets import TopicPartition
from broker.groups.requests import (
    DEAD_GROUP_STATE,
    UNKNOWN_MEMBER_ID,
    CommitRequest,
    GroupDescription,
    GroupListing,
    JoinedMember,
    JoinRequest,
    JoinResult,
    MemberDescription,
    SyncRequest,
    SyncResult,
)
from broker.groups.state import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    GroupState,
    InitialJoinDelay,
    Member,
    plain_protocol_names,
)
from broker.groups.timers import Deadlines
from broker.protocol import consumer_offsets
from broker.protocol.consumer_offsets import GroupMetadataRecord, MemberRecord, OffsetAndMetadata
from broker.protocol.types import fits_a_string

log = structlog.get_logger("broker.groups")


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
            consumer_session_timeout_ms=int(get("group.consumer.session.timeout.ms", d.consumer_session_timeout_ms)),
            consumer_heartbeat_interval_ms=int(get("group.consumer.heartbeat.interval.ms",
                                                   d.consumer_heartbeat_interval_ms)),
            group_metadata_value_version=int(get("group.metadata.value.version",
                                                 d.group_metadata_value_version)),
        )


# Timer keys. The group id is always part of the key, so unloading a group can cancel its timers.
_JOIN = "join"  # the rebalance's join phase ends (rebalance timeout or initial delay)
_SYNC = "sync"  # members that got a JoinGroup answer must have sent SyncGroup by now
_SESSION = "session"  # a member's heartbeat deadline
_PENDING = "pending"  # a MEMBER_ID_REQUIRED id that was never used to join
_RETENTION = "retention"  # periodic offset expiry


def _commit_error(append_error: ErrorCode) -> ErrorCode:
    """What an OffsetCommit answers when its append failed (Kafka's mapping in storeOffsets)."""
    if append_error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if append_error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if append_error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                        ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return append_error


def _group_store_error(append_error: ErrorCode) -> ErrorCode:
    """What a SyncGroup/JoinGroup answers when writing the group failed (Kafka's mapping in storeGroup)."""
    if append_error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if append_error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if append_error == ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.REBALANCE_IN_PROGRESS
    if append_error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                        ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return append_error


class GroupMachine:
    def __init__(self, config: GroupConfig, offsets_log: OffsetsLog, clock: Callable[[], int],
                 new_member_suffix: Callable[[], str] = lambda: str(uuid.uuid4()),
                 topics: Callable[[], dict[str, tuple[bytes, int]]] = dict) -> None:
        self.config = config
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
        self._deadlines.set((_RETENTION,), clock() + config.retention_check_interval_ms)

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

    def tick(self) -> None:
        """Fire every timer that is due now."""
        self._deadlines.expire(self._clock(), self._on_timer)

    def _on_timer(self, key: tuple[Any, ...]) -> None:
        kind = key[0]
        if kind in (SESSION_TIMER, REVOCATION_TIMER):
            self.consumer.on_timer(kind, key[1], key[2])
            return
        if kind == _RETENTION:
            now = self._clock()
            self._deadlines.set((_RETENTION,), now + self.config.retention_check_interval_ms)
            self.expire_offsets()
            return
        group = self._groups.get(key[1])
        if group is None:
            return
        if kind == _JOIN:
            self._on_join_deadline(group)
        elif kind == _SYNC:
            self._on_sync_deadline(group)
        elif kind == _SESSION:
            self._on_session_deadline(group, key[2])
        elif kind == _PENDING:
            self._remove_pending_member(group, key[2])

    def _schedule_session(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self._deadlines.set((_SESSION, group.group_id, member.member_id), self._clock() + timeout)

    def _status_error(self, group_id: str, membership: bool) -> ErrorCode | None:
        """Kafka's validateGroupStatus: the membership APIs need a non-empty group id. And any group id must
        fit the string of a `__consumer_offsets` key: a request's id of invalid UTF-8 decodes to three bytes per
        bad byte and can outgrow it. Kafka fails such a group's first write; refusing it here, before any
        state changes, keeps the machine from holding a group it could never store."""
        if (membership and not group_id) or not fits_a_string(group_id):
            return ErrorCode.INVALID_GROUP_ID
        partition = self.partition_for(group_id)
        if partition in self._replays:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._owned:
            return ErrorCode.NOT_COORDINATOR
        return None

    # --- JoinGroup --------------------------------------------------------------------------------------

    def join_group(self, request: JoinRequest, reply: Callable[[JoinResult], None]) -> None:
        error = self._status_error(request.group_id, membership=True)
        if error is None and not (self.config.min_session_timeout_ms <= request.session_timeout_ms
                                  <= self.config.max_session_timeout_ms):
            error = ErrorCode.INVALID_SESSION_TIMEOUT
        consumer_group = self.consumer.groups.get(request.group_id)
        if error is None and consumer_group is not None and consumer_group.members:
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL  # members of a consumer-protocol group are in it
        if error is not None:
            reply(JoinResult(error, request.member_id))
            return
        group = self._groups.get(request.group_id)
        unknown_member = request.member_id == UNKNOWN_MEMBER_ID
        if group is None:
            if not unknown_member:
                reply(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id))
                return
            group = self._groups[request.group_id] = ClassicGroup(request.group_id,
                                                                   current_state_timestamp=self._clock())
        if unknown_member:
            self._join_unknown_member(group, request, reply)
        else:
            self._join_known_member(group, request, reply)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        self._forget_if_unused(group)

    def _join_unknown_member(self, group: ClassicGroup, request: JoinRequest,
                             reply: Callable[[JoinResult], None]) -> None:
        if not group.supports_protocols(request.protocol_type, plain_protocol_names(request.protocols)):
            reply(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id))
            return
        new_member_id = f"{request.group_instance_id or request.client_id}-{self._new_member_suffix()}"
        if not group.has_static_member(request.group_instance_id) and self._full(group):
            reply(JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID))
            return
        if group.has_static_member(request.group_instance_id):
            self._rejoin_static_member(group, new_member_id, request, reply)
        elif request.require_known_member_id and request.group_instance_id is None:
            group.pending_members.add(new_member_id)
            self._deadlines.set((_PENDING, group.group_id, new_member_id),
                                self._clock() + request.session_timeout_ms)
            reply(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_member_id))
        else:
            self._add_member_and_rebalance(group, new_member_id, request, reply)

    def _join_known_member(self, group: ClassicGroup, request: JoinRequest,
                           reply: Callable[[JoinResult], None]) -> None:
        member_id = request.member_id
        if not group.supports_protocols(request.protocol_type, plain_protocol_names(request.protocols)):
            reply(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if member_id in group.pending_members:
            self._deadlines.cancel((_PENDING, group.group_id, member_id))
            if self._full(group):
                group.pending_members.discard(member_id)
                reply(JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id))
                return
            self._add_member_and_rebalance(group, member_id, request, reply)
            return
        if group.is_static_member_fenced(member_id, request.group_instance_id):
            reply(JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id))
            return
        member = group.members.get(member_id)
        if member is None or (request.group_instance_id is not None
                              and not group.has_static_member(request.group_instance_id)):
            # A dynamic member we do not know, or a static one whose instance id is gone: the client
            # resets its member id and joins again.
            reply(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
            return
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, request, reply)
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            if member.matches(request.protocols):
                # The member probably lost our answer: give it the current generation again.
                reply(self._join_result(group, member))
            else:
                self._update_member_and_rebalance(group, member, request, reply)
        elif group.is_state(GroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(request.protocols):
                # A leader rejoining asks for a new assignment (e.g. the topics' partitions changed).
                self._update_member_and_rebalance(group, member, request, reply)
            else:
                reply(self._join_result(group, member, include_members=False))
        else:
            reply(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _full(self, group: ClassicGroup) -> bool:
        """Kafka's group.max.size: a group that is not empty takes new members up to it (its members keep
        their place)."""
        return not group.is_state(GroupState.EMPTY) and len(group.members) >= self.config.group_max_size

    def _join_result(self, group: ClassicGroup, member: Member, include_members: bool = True,
                     leader_id: str | None = None) -> JoinResult:
        members: tuple[JoinedMember, ...] = ()
        if include_members and group.is_leader(member.member_id):
            members = tuple(JoinedMember(*entry) for entry in group.current_member_metadata())
        return JoinResult(ErrorCode.NONE, member.member_id, group.generation_id, group.protocol_type,
                          group.protocol_name, leader_id if leader_id is not None else group.leader_id or "",
                          members)

    def _add_member_and_rebalance(self, group: ClassicGroup, member_id: str, request: JoinRequest,
                                  reply: Callable[[JoinResult], None]) -> None:
        member = Member(member_id, request.group_instance_id, request.client_id, request.client_host,
                        request.rebalance_timeout_ms, request.session_timeout_ms, request.protocol_type,
                        request.protocols, is_new=True)
        if group.is_state(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, reply)
        # A new member cannot heartbeat before its first JoinGroup answer, and its connection may be
        # gone; drop it if the rebalance has not completed long after (it will retry if alive).
        self._schedule_session(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group)

    def _update_member_and_rebalance(self, group: ClassicGroup, member: Member, request: JoinRequest,
                                     reply: Callable[[JoinResult], None]) -> None:
        # A JoinGroup of this member that is still waiting was given up by the client when it sent this
        # one; answer it rather than leave it hanging.
        self._answer_join(member, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        group.update_member(member, request.protocols, request.rebalance_timeout_ms,
                            request.session_timeout_ms, reply)
        self._maybe_prepare_rebalance(group)

    def _rejoin_static_member(self, group: ClassicGroup, new_member_id: str, request: JoinRequest,
                              reply: Callable[[JoinResult], None]) -> None:
        """A static member restarted (same group.instance.id, no member id): it takes over its old seat,
        fencing whatever still uses the old id, without a rebalance when nothing else changes."""
        assert request.group_instance_id is not None
        instance_id = request.group_instance_id
        old_member_id = group.static_members[instance_id]
        old_member = group.members[old_member_id]
        self._fence(old_member)
        leader_before = group.leader_id or ""
        self._deadlines.cancel((_SESSION, group.group_id, old_member_id))
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        old_protocols = member.protocols
        old_rebalance_timeout, old_session_timeout = member.rebalance_timeout_ms, member.session_timeout_ms
        group.update_member(member, request.protocols, request.rebalance_timeout_ms,
                            request.session_timeout_ms, reply)
        self._schedule_session(group, member)

        if group.is_state(GroupState.STABLE):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(group)
                return
            generation = group.generation_id

            def stored(error: ErrorCode) -> None:
                # If a rebalance started meanwhile, the member waits for it like everyone else.
                if (self._groups.get(group.group_id) is not group or not group.is_state(GroupState.STABLE)
                        or group.generation_id != generation or group.members.get(new_member_id) is not member
                        or not member.awaiting_join):
                    return
                if error != ErrorCode.NONE:
                    # Put the old member back, as if this JoinGroup had not happened.
                    answer = member.join_reply
                    group.replace_static_member(instance_id, new_member_id, old_member_id)
                    group.update_member(member, old_protocols, old_rebalance_timeout, old_session_timeout,
                                        None)
                    self._deadlines.cancel((_SESSION, group.group_id, new_member_id))
                    self._schedule_session(group, member)
                    assert answer is not None
                    answer(JoinResult(_group_store_error(error), UNKNOWN_MEMBER_ID, generation,
                                      group.protocol_type, group.protocol_name, leader_before))
                    return
                # The old leader id is returned even if this member was the leader: a Stable group would
                # not pass on an assignment computed now, so this member must not think it leads.
                self._answer_join(member, self._join_result(group, member, include_members=False,
                                                            leader_id=leader_before))

            self._store_group(group, {m.member_id: m.assignment for m in group.members.values()}, stored)
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            # The leader may already be assigning partitions to the old member id: start over.
            self._prepare_rebalance(group)

    def _fence(self, member: Member) -> None:
        """Answer a replaced static member's waiting requests with FENCED_INSTANCE_ID."""
        self._answer_join(member, JoinResult(ErrorCode.FENCED_INSTANCE_ID, member.member_id))
        self._answer_sync(member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))

    @staticmethod
    def _answer_join(member: Member, result: JoinResult) -> bool:
        if member.join_reply is None:
            return False
        reply, member.join_reply = member.join_reply, None
        reply(result)
        return True

    @staticmethod
    def _answer_sync(member: Member, result: SyncResult) -> bool:
        if member.sync_reply is None:
            return False
        reply, member.sync_reply = member.sync_reply, None
        reply(result)
        return True

    # --- rebalance phases -------------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._deadlines.cancel((_SYNC, group.group_id))
        now = self._clock()
        if group.is_state(GroupState.EMPTY):
            # Wait a little for more members, so a group starting up does not rebalance once per member.
            delay = self.config.initial_rebalance_delay_ms
            group.initial_join = InitialJoinDelay(delay, max(group.rebalance_timeout_ms - delay, 0))
            self._deadlines.set((_JOIN, group.group_id), now + delay)
        else:
            group.initial_join = None
            self._deadlines.set((_JOIN, group.group_id), now + group.rebalance_timeout_ms)
        group.transition_to(GroupState.PREPARING_REBALANCE, now)
        self._maybe_complete_join(group)

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        """The join phase ends early once every member (and every handed-out id) has joined, except during
        an initial delay, which always runs its course."""
        if (group.is_state(GroupState.PREPARING_REBALANCE) and group.initial_join is None
                and group.has_all_members_joined()):
            self._deadlines.cancel((_JOIN, group.group_id))
            self._complete_join(group)

    def _on_join_deadline(self, group: ClassicGroup) -> None:
        if not group.is_state(GroupState.PREPARING_REBALANCE):
            return
        initial = group.initial_join
        if initial is not None and group.new_member_added and initial.remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, initial.remaining_ms)
            group.initial_join = InitialJoinDelay(delay, max(initial.remaining_ms - initial.delay_ms, 0))
            self._deadlines.set((_JOIN, group.group_id), self._clock() + delay)
            return
        self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        group.initial_join = None
        for member in group.not_yet_rejoined():
            if not member.is_static:  # static members keep their seat until their session expires
                self._drop_member(group, member)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined are left: wait another rebalance timeout.
            self._deadlines.set((_JOIN, group.group_id), self._clock() + group.rebalance_timeout_ms)
            return
        group.init_next_generation(self._clock(), consumer_offsets.subscription_topics)
        if group.is_state(GroupState.EMPTY):
            self._store_group(group, {}, self._log_store_failure(group))
            return
        for member in group.members.values():
            self._answer_join(member, self._join_result(group, member))
            self._schedule_session(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._deadlines.set((_SYNC, group.group_id), self._clock() + group.rebalance_timeout_ms)

    def _on_sync_deadline(self, group: ClassicGroup) -> None:
        """Members that got this generation's JoinGroup answer but never sent SyncGroup are dropped (the
        timer is cancelled when a new rebalance starts, so it always belongs to the current generation)."""
        if not group.pending_sync_members or not group.is_state(
                GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        for member_id in list(group.pending_sync_members):
            member = group.members.get(member_id)
            if member is not None:
                self._drop_member(group, member)
        self._prepare_rebalance(group)

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self._deadlines.cancel((_SYNC, group.group_id))

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _set_and_propagate_assignment(self, group: ClassicGroup, assignment: Mapping[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NONE)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            result = (SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name)
                      if error == ErrorCode.NONE else SyncResult(error))
            if self._answer_sync(member, result):
                # Its session deadline may have passed unnoticed while it waited: start a fresh one.
                self._schedule_session(group, member)

    # --- members leaving --------------------------------------------------------------------------------

    def _drop_member(self, group: ClassicGroup, member: Member) -> None:
        """Remove a member, answering whatever it still waits for (UNKNOWN_MEMBER_ID makes it rejoin)."""
        self._answer_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID))
        self._answer_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._deadlines.cancel((_SESSION, group.group_id, member.member_id))

    def _remove_member_and_update_group(self, group: ClassicGroup, member: Member) -> None:
        self._drop_member(group, member)
        if group.is_state(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    def _remove_pending_member(self, group: ClassicGroup, member_id: str) -> None:
        self._deadlines.cancel((_PENDING, group.group_id, member_id))
        group.pending_members.discard(member_id)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        self._forget_if_unused(group)

    def _on_session_deadline(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None or member.survives_session_expiry():
            return
        log.info("member session expired", group=group.group_id, member=member_id)
        self._remove_member_and_update_group(group, member)

    # --- SyncGroup, Heartbeat, LeaveGroup --------------------------------------------------------------------

    def sync_group(self, request: SyncRequest, reply: Callable[[SyncResult], None]) -> None:
        error = self._status_error(request.group_id, membership=True)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance this belonged to is lost; REBALANCE_IN_PROGRESS makes the client rejoin
            # (older clients do not expect COORDINATOR_LOAD_IN_PROGRESS here).
            error = ErrorCode.REBALANCE_IN_PROGRESS
        group = self._groups.get(request.group_id) if error is None else None
        if error is None and group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is not None:
            reply(SyncResult(error))
            return
        assert group is not None
        member = group.members.get(request.member_id)
        if group.is_static_member_fenced(request.member_id, request.group_instance_id):
            reply(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        elif member is None:
            reply(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif request.generation_id != group.generation_id:
            reply(SyncResult(ErrorCode.ILLEGAL_GENERATION))
        elif ((request.protocol_type is not None and request.protocol_type != group.protocol_type)
              or (request.protocol_name is not None and request.protocol_name != group.protocol_name)):
            reply(SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            reply(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_state(GroupState.STABLE):
            self._remove_pending_sync_member(group, member.member_id)
            reply(SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name))
            self._schedule_session(group, member)
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            self._answer_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            member.sync_reply = reply
            self._remove_pending_sync_member(group, member.member_id)
            if group.is_leader(member.member_id):
                self._store_assignment(group, dict(request.assignments))
        else:
            reply(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))

    def _store_assignment(self, group: ClassicGroup, leader_assignment: dict[str, bytes]) -> None:
        """The leader's assignment is written first; members get it once it is in the log."""
        assignment = {member_id: leader_assignment.get(member_id, b"") for member_id in group.members}
        generation = group.generation_id

        def stored(error: ErrorCode) -> None:
            # Someone may have joined meanwhile: only the same generation, still completing, moves on.
            if (self._groups.get(group.group_id) is not group or generation != group.generation_id
                    or not group.is_state(GroupState.COMPLETING_REBALANCE)):
                return
            if error != ErrorCode.NONE:
                self._reset_and_propagate_assignment_error(group, _group_store_error(error))
                self._maybe_prepare_rebalance(group)
            else:
                self._set_and_propagate_assignment(group, assignment)
                group.transition_to(GroupState.STABLE, self._clock())

        self._store_group(group, assignment, stored)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode:
        error = self._status_error(group_id, membership=True)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # the group is still loading: Kafka answers blindly
        if error is not None:
            return error
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_static_member_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_state(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_session(group, member)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(self, group_id: str, leaving: Iterable[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Members leave, by (member id, group instance id); an empty member id with an instance id removes
        that static member (administrative removal). Answers (group error, one error per member)."""
        leaving = list(leaving)
        error = self._status_error(group_id, membership=True)
        if error is not None:
            return error, []
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        errors = []
        for member_id, instance_id in leaving:
            if member_id == UNKNOWN_MEMBER_ID:
                current = group.static_members.get(instance_id) if instance_id is not None else None
                if current is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                else:
                    self._remove_member_and_update_group(group, group.members[current])
                    errors.append(ErrorCode.NONE)
            elif member_id in group.pending_members:
                self._remove_pending_member(group, member_id)
                errors.append(ErrorCode.NONE)
            elif group.is_static_member_fenced(member_id, instance_id):
                errors.append(ErrorCode.FENCED_INSTANCE_ID)
            elif member_id in group.members:
                self._remove_member_and_update_group(group, group.members[member_id])
                errors.append(ErrorCode.NONE)
            else:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
        return ErrorCode.NONE, errors

    # --- offsets ----------------------------------------------------------------------------------------

    def commit_offsets(self, request: CommitRequest,
                       reply: Callable[[dict[TopicPartition, ErrorCode]], None]) -> None:
        def fail(error: ErrorCode) -> None:
            reply(dict.fromkeys(request.offsets, error))

        error = self._status_error(request.group_id, membership=False)
        if error is None and request.group_id in self.consumer.groups:
            error = self.consumer.check_commit(request.group_id, request.member_id, request.generation_id,
                                               request.offsets)
            if error is None:
                self._store_offsets(self._offsets_holder(request.group_id), request, reply)
                return
        if error is not None:
            fail(error)
            return
        group = self._groups.get(request.group_id)
        if group is None:
            if request.generation_id >= 0:
                fail(ErrorCode.ILLEGAL_GENERATION)  # a generation of a group that no longer exists
                return
            # A standalone consumer (assign(), no group membership) keeps its offsets in a group that
            # never has members.
            group = self._groups[request.group_id] = ClassicGroup(request.group_id,
                                                                   current_state_timestamp=self._clock())
        error = self._validate_offset_commit(group, request)
        if error is not None:
            fail(error)
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            # A valid member that has its new generation but not its assignment yet: retry after sync.
            fail(ErrorCode.REBALANCE_IN_PROGRESS)
        else:
            member = group.members.get(request.member_id)
            if member is not None:
                self._schedule_session(group, member)  # a commit counts as a sign of life
            self._store_offsets(group, request, reply)
        self._forget_if_unused(group)

    def _offsets_holder(self, group_id: str) -> ClassicGroup:
        """Where a consumer-protocol group's offsets live: a classic group entry that never has members."""
        holder = self._groups.get(group_id)
        if holder is None:
            holder = self._groups[group_id] = ClassicGroup(group_id, current_state_timestamp=self._clock())
        return holder

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

    @staticmethod
    def _validate_offset_commit(group: ClassicGroup, request: CommitRequest) -> ErrorCode | None:
        if (request.generation_id >= 0 or request.member_id != UNKNOWN_MEMBER_ID
                or request.group_instance_id is not None):
            if request.group_instance_id is not None:
                current = group.static_members.get(request.group_instance_id)
                if current is None:
                    return ErrorCode.UNKNOWN_MEMBER_ID
                if current != request.member_id:
                    return ErrorCode.FENCED_INSTANCE_ID
            if request.member_id not in group.members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if request.generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
            return None
        if not group.is_state(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID  # only members commit for a group that has members
        return None

    def _accepted_commits(self, request: CommitRequest
                          ) -> tuple[dict[TopicPartition, OffsetAndMetadata], dict[TopicPartition, ErrorCode]]:
        """The commits to store, and the partitions refused (metadata over offset.metadata.max.bytes)."""
        now = self._clock()
        expire_timestamp = now + request.retention_time_ms if request.retention_time_ms != -1 else None
        errors: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, commit in request.offsets.items():
            metadata = commit.metadata or ""
            if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            accepted[tp] = OffsetAndMetadata(
                offset=commit.offset,
                leader_epoch=commit.leader_epoch,
                metadata=metadata,
                commit_timestamp=commit.commit_timestamp if commit.commit_timestamp != -1 else now,
                expire_timestamp=expire_timestamp,
            )
        return accepted, errors

    def _store_offsets(self, group: ClassicGroup, request: CommitRequest,
                       reply: Callable[[dict[TopicPartition, ErrorCode]], None]) -> None:
        accepted, errors = self._accepted_commits(request)
        if not accepted:
            reply(errors)
            return
        group.offsets.prepare(accepted)

        def appended(error: ErrorCode) -> None:
            group.offsets.complete(accepted, appended=error == ErrorCode.NONE)
            answer = _commit_error(error)
            reply({tp: errors.get(tp, answer) for tp in request.offsets})
            self._forget_if_unused(group)

        self._append_offsets(group, accepted, appended)

    def commit_transactional_offsets(self, request: CommitRequest, producer_id: int, producer_epoch: int,
                                     reply: Callable[[dict[TopicPartition, ErrorCode]], None]) -> None:
        """TxnOffsetCommit: the offsets go to the log in the producer's transaction and count once it
        commits (:meth:`complete_transaction`). A group that does not exist is created, as Kafka does; the
        member checks apply only when the request names a member or a generation (v3+)."""
        error = self._status_error(request.group_id, membership=False)
        if error is not None:
            reply(dict.fromkeys(request.offsets, error))
            return
        group = self._offsets_holder(request.group_id)
        if request.group_id in self.consumer.groups:
            # a consumer-protocol group: the member and its epoch, as for its plain commits
            error = self.consumer.check_commit(request.group_id, request.member_id, request.generation_id,
                                               request.offsets)
        else:
            error = self._validate_transactional_commit(group, request)
        if error is not None:
            reply(dict.fromkeys(request.offsets, error))
            self._forget_if_unused(group)
            return
        accepted, errors = self._accepted_commits(request)
        if not accepted:
            reply(errors)
            self._forget_if_unused(group)
            return

        def appended(error: ErrorCode) -> None:
            if error == ErrorCode.NONE:
                group.offsets.add_transactional(producer_id, accepted)
            answer = _commit_error(error)
            reply({tp: errors.get(tp, answer) for tp in request.offsets})
            self._forget_if_unused(group)

        self._append_offsets(group, accepted, appended, producer=(producer_id, producer_epoch))

    def _append_offsets(self, group: ClassicGroup, offsets: dict[TopicPartition, OffsetAndMetadata],
                        appended: Callable[[ErrorCode], None], producer: tuple[int, int] | None = None) -> None:
        """One batch of offset commit records for the group (in a producer's transaction if ``producer``)."""
        self._log.append(self.partition_for(group.group_id), [
            (consumer_offsets.offset_commit_key(group.group_id, topic, partition), consumer_offsets.offset_commit_value(committed))
            for (topic, partition), committed in offsets.items()
        ], appended, producer=producer)

    @staticmethod
    def _validate_transactional_commit(group: ClassicGroup, request: CommitRequest) -> ErrorCode | None:
        """Kafka's checks of a classic group's TxnOffsetCommit: looser than a plain commit's, they apply only
        to what the request names (an instance id, a member, a generation)."""
        if request.group_instance_id is not None and \
                group.static_members.get(request.group_instance_id) not in (None, request.member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if request.member_id != UNKNOWN_MEMBER_ID and request.member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if request.generation_id >= 0 and request.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return None

    def complete_transaction(self, partition: int, producer_id: int, committed: bool) -> None:
        """A transaction marker reached `__consumer_offsets` partition ``partition``: the producer's
        offsets in the groups of that partition are committed or dropped."""
        replay = self._replays.get(partition)
        if replay is not None:
            replay.apply_marker(producer_id, committed)
            return
        for group in [g for g in self._groups.values() if self.partition_for(g.group_id) == partition]:
            group.offsets.complete_transaction(producer_id, committed)
            self._forget_if_unused(group)

    def unstable_offsets(self, group_id: str) -> set[TopicPartition]:
        group = self._groups.get(group_id)
        return group.offsets.unstable() if group is not None else set()

    def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None
                      ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets (None where there is none); all of the group's when ``partitions`` is None."""
        error = self._status_error(group_id, membership=False)
        if error is not None:
            return error, {}
        group = self._groups.get(group_id)
        if partitions is None:
            return ErrorCode.NONE, dict(group.offsets.committed) if group is not None else {}
        return ErrorCode.NONE, {tp: group.offsets.get(tp) if group is not None else None for tp in partitions}

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition],
                       reply: Callable[[ErrorCode, dict[TopicPartition, ErrorCode]], None]) -> None:
        """OffsetDelete: only offsets of topics the group does not consume, unless it is Empty."""
        partitions = list(partitions)
        error = self._status_error(group_id, membership=False)
        group = self._groups.get(group_id) if error is None else None
        if error is None and group is None:
            error = ErrorCode.GROUP_ID_NOT_FOUND
        if error is not None:
            reply(error, {})
            return
        assert group is not None
        partition_errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_state(GroupState.EMPTY):
            eligible = partitions
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
            partition_errors = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                                for tp in partitions if group.is_subscribed_to_topic(tp[0])}
        else:
            reply(ErrorCode.NON_EMPTY_GROUP, {})
            return
        if not eligible:
            reply(ErrorCode.NONE, partition_errors)
            return

        def done(error: ErrorCode) -> None:
            answer = _commit_error(error)
            reply(ErrorCode.NONE, {**partition_errors, **dict.fromkeys(eligible, answer)})

        # Kafka 4's group coordinator leaves a group this empties to the periodic cleanup, so DeleteGroups
        # still finds it (kafka-consumer-groups --delete-offsets, then --delete).
        self._cleanup_groups([group], lambda g: g.offsets.remove(eligible), done, drop_emptied=False)

    def expire_offsets(self) -> None:
        """Drop expired offsets (writing tombstones), and Empty groups left with no offsets."""
        now = self._clock()
        retention = self.config.offsets_retention_ms
        groups = [g for g in self._groups.values() if self.partition_for(g.group_id) in self._owned]
        self._cleanup_groups(groups, lambda g: g.offsets.remove(g.expired_offsets(now, retention)),
                             self._log_cleanup_failure)

    def _cleanup_groups(self, groups: list[ClassicGroup],
                        remove_offsets: Callable[[ClassicGroup], list[TopicPartition]],
                        on_complete: Callable[[ErrorCode], None], drop_emptied: bool = True) -> None:
        """Kafka's cleanupGroupMetadata: remove offsets, then (``drop_emptied``) groups that are Empty with none
        left, and write the tombstones (one batch per partition). ``on_complete`` gets the first append
        error, if any."""
        now = self._clock()
        by_partition: dict[int, list[OffsetsRecord]] = defaultdict(list)
        for group in groups:
            partition = self.partition_for(group.group_id)
            for topic, index in remove_offsets(group):
                by_partition[partition].append((consumer_offsets.offset_commit_key(group.group_id, topic, index), None))
            if drop_emptied and group.is_state(GroupState.EMPTY, GroupState.DEAD) and not group.offsets:
                if not group.is_state(GroupState.DEAD):
                    group.transition_to(GroupState.DEAD, now)
                self._forget_group(group)
                # A group that never had a generation only ever existed through its offsets.
                if group.generation_id > 0:
                    by_partition[partition].append((consumer_offsets.group_metadata_key(group.group_id), None))
        if not by_partition:
            on_complete(ErrorCode.NONE)
            return
        outstanding = len(by_partition)
        first_error = ErrorCode.NONE

        def appended(error: ErrorCode) -> None:
            nonlocal outstanding, first_error
            outstanding -= 1
            if first_error == ErrorCode.NONE:
                first_error = error
            if outstanding == 0:
                on_complete(first_error)

        for partition, tombstones in by_partition.items():
            self._log.append(partition, tombstones, appended)

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
            answer = _commit_error(error)
            reply({**results, **{g.group_id: answer for g in eligible}})

        self._cleanup_groups(eligible, lambda g: g.offsets.remove_all(), done)

    # --- persistence ----------------------------------------------------------------------------------------

    def _store_group(self, group: ClassicGroup, assignment: Mapping[str, bytes],
                     on_complete: Callable[[ErrorCode], None]) -> None:
        protocol = group.protocol_name
        value = GroupMetadataRecord(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=protocol,
            leader=group.leader_id,
            current_state_timestamp=-1 if group.current_state_timestamp is None else group.current_state_timestamp,
            members=tuple(MemberRecord(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                subscription=m.metadata(protocol) if protocol is not None else b"",
                assignment=assignment.get(m.member_id, b""),
            ) for m in group.members.values()),
        )
        self._log.append(self.partition_for(group.group_id), [(
            consumer_offsets.group_metadata_key(group.group_id),
            consumer_offsets.group_metadata_value(value, self.config.group_metadata_value_version),
        )], on_complete)

    @staticmethod
    def _log_store_failure(group: ClassicGroup) -> Callable[[ErrorCode], None]:
        def check(error: ErrorCode) -> None:
            if error != ErrorCode.NONE:
                log.warning("writing group metadata failed", group=group.group_id, error=error.name)

        return check

    @staticmethod
    def _log_cleanup_failure(error: ErrorCode) -> None:
        if error != ErrorCode.NONE:
            log.warning("writing offset tombstones failed", error=error.name)

    def _forget_if_unused(self, group: ClassicGroup) -> None:
        """A group created by a request that then failed (and that never had a generation) is not kept."""
        if (group.is_state(GroupState.EMPTY) and group.generation_id == 0 and not group.members
                and not group.pending_members and not group.offsets
                and self._groups.get(group.group_id) is group):
            self._forget_group(group)

    def _forget_group(self, group: ClassicGroup) -> None:
        if self._groups.get(group.group_id) is group:
            del self._groups[group.group_id]
        self._deadlines.cancel((_JOIN, group.group_id))
        self._deadlines.cancel((_SYNC, group.group_id))
        for member_id in group.members:
            self._deadlines.cancel((_SESSION, group.group_id, member_id))
        for member_id in group.pending_members:
            self._deadlines.cancel((_PENDING, group.group_id, member_id))

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
