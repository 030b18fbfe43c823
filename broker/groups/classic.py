"""Kafka's classic rebalance protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) for the group machine.

The rules are those of Apache Kafka's (pre-KIP-848) ``GroupCoordinator``; where they are subtle, comments
say which Kafka behaviour is meant.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import structlog

from broker.errors import ErrorCode
from broker.groups.machine_core import (
    JOIN_TIMER,
    MEMBER_SESSION_TIMER,
    PENDING_MEMBER_TIMER,
    SYNC_TIMER,
    MachineCore,
)
from broker.groups.requests import (
    UNKNOWN_MEMBER_ID,
    JoinedMember,
    JoinRequest,
    JoinResult,
    SyncRequest,
    SyncResult,
)
from broker.groups.state import (
    ClassicGroup,
    GroupState,
    InitialJoinDelay,
    Member,
    plain_protocol_names,
)
from broker.protocol import consumer_offsets
from broker.protocol.consumer_offsets import GroupMetadataRecord, MemberRecord

log = structlog.get_logger("broker.groups")


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


class ClassicProtocol(MachineCore):
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
            self._deadlines.set((PENDING_MEMBER_TIMER, group.group_id, new_member_id),
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
            self._deadlines.cancel((PENDING_MEMBER_TIMER, group.group_id, member_id))
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
        self._deadlines.cancel((MEMBER_SESSION_TIMER, group.group_id, old_member_id))
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
                    self._deadlines.cancel((MEMBER_SESSION_TIMER, group.group_id, new_member_id))
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
        self._deadlines.cancel((SYNC_TIMER, group.group_id))
        now = self._clock()
        if group.is_state(GroupState.EMPTY):
            # Wait a little for more members, so a group starting up does not rebalance once per member.
            delay = self.config.initial_rebalance_delay_ms
            group.initial_join = InitialJoinDelay(delay, max(group.rebalance_timeout_ms - delay, 0))
            self._deadlines.set((JOIN_TIMER, group.group_id), now + delay)
        else:
            group.initial_join = None
            self._deadlines.set((JOIN_TIMER, group.group_id), now + group.rebalance_timeout_ms)
        group.transition_to(GroupState.PREPARING_REBALANCE, now)
        self._maybe_complete_join(group)

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        """The join phase ends early once every member (and every handed-out id) has joined, except during
        an initial delay, which always runs its course."""
        if (group.is_state(GroupState.PREPARING_REBALANCE) and group.initial_join is None
                and group.has_all_members_joined()):
            self._deadlines.cancel((JOIN_TIMER, group.group_id))
            self._complete_join(group)

    def _on_join_deadline(self, group: ClassicGroup) -> None:
        if not group.is_state(GroupState.PREPARING_REBALANCE):
            return
        initial = group.initial_join
        if initial is not None and group.new_member_added and initial.remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, initial.remaining_ms)
            group.initial_join = InitialJoinDelay(delay, max(initial.remaining_ms - initial.delay_ms, 0))
            self._deadlines.set((JOIN_TIMER, group.group_id), self._clock() + delay)
            return
        self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        group.initial_join = None
        for member in group.not_yet_rejoined():
            if not member.is_static:  # static members keep their seat until their session expires
                self._drop_member(group, member)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined are left: wait another rebalance timeout.
            self._deadlines.set((JOIN_TIMER, group.group_id), self._clock() + group.rebalance_timeout_ms)
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
        self._deadlines.set((SYNC_TIMER, group.group_id), self._clock() + group.rebalance_timeout_ms)

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
            self._deadlines.cancel((SYNC_TIMER, group.group_id))

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
        self._deadlines.cancel((MEMBER_SESSION_TIMER, group.group_id, member.member_id))

    def _remove_member_and_update_group(self, group: ClassicGroup, member: Member) -> None:
        self._drop_member(group, member)
        if group.is_state(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    def _remove_pending_member(self, group: ClassicGroup, member_id: str) -> None:
        self._deadlines.cancel((PENDING_MEMBER_TIMER, group.group_id, member_id))
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
