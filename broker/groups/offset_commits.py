"""Offset storage of the group machine: OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete and the
periodic expiry, with Kafka's (``GroupMetadataManager``'s) checks and error mapping.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

import structlog

from broker.errors import ErrorCode
from broker.groups.machine_core import MachineCore, OffsetsRecord
from broker.groups.offsets import TopicPartition
from broker.groups.requests import (
    UNKNOWN_MEMBER_ID,
    CommitRequest,
)
from broker.groups.state import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    GroupState,
)
from broker.protocol import consumer_offsets
from broker.protocol.consumer_offsets import OffsetAndMetadata

log = structlog.get_logger("broker.groups")


def commit_error(append_error: ErrorCode) -> ErrorCode:
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



class OffsetCommits(MachineCore):
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
            answer = commit_error(error)
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
            answer = commit_error(error)
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
            answer = commit_error(error)
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

    @staticmethod
    def _log_cleanup_failure(error: ErrorCode) -> None:
        if error != ErrorCode.NONE:
            log.warning("writing offset tombstones failed", error=error.name)
