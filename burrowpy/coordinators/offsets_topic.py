"""What one `__consumer_offsets` record means to the monitor, as storage requests (pure, no IO).

The record layouts are decoded by :mod:`broker.protocol.consumer_offsets`, the broker's own codec of them. Differences from
Burrow 1.2.1, deliberate: offset value v2 (same layout as v0) and v4 are read; group metadata values v2-v4
are read, so owners show with modern Kafka; an offset tombstone removes that partition's commits
(Burrow ignores it, issue #818), a group tombstone deletes the group as in Burrow.

Record types 3 and up are the new group coordinator's (Kafka 3.7+, KIP-848 consumer groups, KIP-932 share
groups, KIP-1071 streams groups): a consumer group's member metadata (5) and current assignment (8), and
the tombstone of its group record (3), become member events for
:class:`~burrowpy.coordinators.group_members.ConsumerProtocolMembers`, which turns them into owners; every
other type Kafka 4.4 writes carries nothing a lag monitor shows (epochs, target assignments, share and
streams groups' state) and is skipped on purpose, without a warning. Only unknown types are reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.protocol.consumer_offsets import (
    GROUP_EPOCH_RECORD,
    MEMBER_METADATA_RECORD,
    ConsumerGroupKey,
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetsRecordError,
    assigned_partitions,
    decode_consumer_group_value,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from burrowpy.coordinators.group_members import (
    RemoveGroupMembers,
    RemoveMember,
    SetMember,
    SetMemberAssignment,
)
from burrowpy.protocol import (
    ClearConsumerOwners,
    SetConsumerOffset,
    SetConsumerOwner,
    SetDeleteGroup,
    SetDeletePartitionOffsets,
)

# The rest of the new group coordinator's record types, up to Kafka 4.4 (9 and 18 were written by earlier
# releases only): group epochs, subscription metadata, target assignments, regular expressions, and the
# state of share and streams groups.
SKIPPED_RECORD_TYPES = frozenset({4, 6, 7, *range(9, 24)})


class RecordSkipped(Exception):
    """A record the monitor cannot use, with the reason (logged at warning level by the caller)."""


@dataclass(slots=True)
class GroupFilter:
    allow: Any = None  # compiled regex or None
    deny: Any = None

    def accepts(self, group: str) -> bool:
        if self.allow is not None and not self.allow.search(group):
            return False
        return not (self.deny is not None and self.deny.search(group))


def interpret(cluster: str, key: bytes | None, value: bytes | None, order: int, groups: GroupFilter) -> list[Any]:
    """Storage requests for one record read at offset ``order`` of the offsets topic.

    Raises RecordSkipped for records of unknown versions or that do not decode.
    """
    if key is None or len(key) < 2:
        raise RecordSkipped("key shorter than its version")
    version = int.from_bytes(key[:2], "big", signed=True)
    if version in SKIPPED_RECORD_TYPES:
        return []
    try:
        decoded = decode_key(key)
        if isinstance(decoded, OffsetCommitKey):
            if not groups.accepts(decoded.group):
                return []
            if not value:
                return [SetDeletePartitionOffsets(cluster=cluster, group=decoded.group, topic=decoded.topic,
                                                  partition=decoded.partition)]
            committed = decode_offset_commit_value(value)
            return [SetConsumerOffset(cluster=cluster, group=decoded.group, topic=decoded.topic,
                                      partition=decoded.partition, offset=committed.offset, order=order,
                                      timestamp=committed.commit_timestamp)]
        if isinstance(decoded, GroupMetadataKey):
            group = decoded.group
            if not value:
                return [SetDeleteGroup(cluster=cluster, group=group)]
            if not groups.accepts(group):
                return []
            metadata = decode_group_metadata_value(value)
            if metadata.protocol_type != "consumer":
                return []
            if not metadata.members:
                return [ClearConsumerOwners(cluster=cluster, group=group)]
            requests: list[Any] = []
            for member in metadata.members:
                if not member.assignment:
                    continue
                for topic, partitions in assigned_partitions(member.assignment):
                    requests.extend(SetConsumerOwner(cluster=cluster, group=group, topic=topic,
                                                     partition=partition, owner=member.client_host,
                                                     client_id=member.client_id)
                                    for partition in partitions)
            return requests
        if isinstance(decoded, ConsumerGroupKey):
            if not groups.accepts(decoded.group):
                return []
            if decoded.record_type == GROUP_EPOCH_RECORD:
                return [] if value else [RemoveGroupMembers(decoded.group)]
            return _member_record(decoded, value)
    except OffsetsRecordError as exc:
        raise RecordSkipped(f"key version {version}: {exc}") from None
    raise RecordSkipped(f"unknown key version {version}")


def _member_record(key: ConsumerGroupKey, value: bytes | None) -> list[Any]:
    group, member_id = key.group, key.member
    assert member_id is not None  # decode_key gives every member record type its member
    if not value:
        return [RemoveMember(group, member_id)]
    v = decode_consumer_group_value(key.record_type, value)
    if key.record_type == MEMBER_METADATA_RECORD:
        return [SetMember(group, member_id, v["client_id"], v["client_host"])]
    assigned = tuple((bytes(t["topic_id"]), tuple(t["partitions"])) for t in v["assigned_partitions"])
    return [SetMemberAssignment(group, member_id, assigned)]
