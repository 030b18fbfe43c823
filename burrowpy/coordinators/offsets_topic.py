"""What one `__consumer_offsets` record means to the monitor, as storage requests (pure, no IO).

The record layouts are decoded by the broker's schema codec (one codec for the project). Differences from
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

from broker.protocol.api import decode_struct
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

OFFSET_KEY_VERSIONS = (0, 1)
GROUP_KEY_VERSION = 2
CONSUMER_GROUP_METADATA_TYPE = 3
CONSUMER_GROUP_MEMBER_METADATA_TYPE = 5
CONSUMER_GROUP_CURRENT_ASSIGNMENT_TYPE = 8
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


def _key_version(key: bytes) -> int:
    if key is None or len(key) < 2:
        raise RecordSkipped("key shorter than its version")
    return int.from_bytes(key[:2], "big", signed=True)


def interpret(cluster: str, key: bytes, value: bytes | None, order: int, groups: GroupFilter) -> list[Any]:
    """Storage requests for one record read at offset ``order`` of the offsets topic.

    Raises RecordSkipped for records of unknown versions or that do not decode.
    """
    version = _key_version(key)
    try:
        if version in OFFSET_KEY_VERSIONS:
            _, k = decode_struct("OffsetCommitKey", key)
            if not groups.accepts(k["group"]):
                return []
            if not value:
                return [SetDeletePartitionOffsets(cluster=cluster, group=k["group"], topic=k["topic"],
                                                  partition=k["partition"])]
            _, v = decode_struct("OffsetCommitValue", value)
            return [SetConsumerOffset(cluster=cluster, group=k["group"], topic=k["topic"], partition=k["partition"],
                                      offset=v["offset"], order=order, timestamp=v["commit_timestamp"])]
        if version == GROUP_KEY_VERSION:
            _, k = decode_struct("GroupMetadataKey", key)
            group = k["group"]
            if not value:
                return [SetDeleteGroup(cluster=cluster, group=group)]
            if not groups.accepts(group):
                return []
            _, v = decode_struct("GroupMetadataValue", value)
            if v["protocol_type"] != "consumer":
                return []
            if not v["members"]:
                return [ClearConsumerOwners(cluster=cluster, group=group)]
            requests: list[Any] = []
            for member in v["members"]:
                if not member["assignment"]:
                    continue
                _, assignment = decode_struct("ConsumerProtocolAssignment", member["assignment"])
                for assigned in assignment["assigned_partitions"]:
                    requests.extend(SetConsumerOwner(cluster=cluster, group=group, topic=assigned["topic"],
                                                     partition=partition, owner=member["client_host"],
                                                     client_id=member["client_id"])
                                    for partition in assigned["partitions"])
            return requests
        if version in (CONSUMER_GROUP_MEMBER_METADATA_TYPE, CONSUMER_GROUP_CURRENT_ASSIGNMENT_TYPE):
            return _member_record(version, key, value, groups)
        if version == CONSUMER_GROUP_METADATA_TYPE:
            group = _group_of_new_record(key)
            return [RemoveGroupMembers(group)] if not value and groups.accepts(group) else []
        if version in SKIPPED_RECORD_TYPES:
            return []
    except RecordSkipped:
        raise
    except Exception as exc:  # the codec's DecodeError, or a version it does not know
        raise RecordSkipped(f"key version {version}: {exc}") from None
    raise RecordSkipped(f"unknown key version {version}")


def _group_of_new_record(key: bytes) -> str:
    """The group id that every new group-coordinator key starts with (after the type)."""
    length = int.from_bytes(key[2:4], "big", signed=True)
    if length < 0 or len(key) < 4 + length:
        raise RecordSkipped("key shorter than its group id")
    return key[4:4 + length].decode()


def _member_record(record_type: int, key: bytes, value: bytes | None, groups: GroupFilter) -> list[Any]:
    name = ("ConsumerGroupMemberMetadata" if record_type == CONSUMER_GROUP_MEMBER_METADATA_TYPE
            else "ConsumerGroupCurrentMemberAssignment")
    _, k = decode_struct(name + "Key", key)
    group, member_id = k["group_id"], k["member_id"]
    if not groups.accepts(group):
        return []
    if not value:
        return [RemoveMember(group, member_id)]
    _, v = decode_struct(name + "Value", value)
    if record_type == CONSUMER_GROUP_MEMBER_METADATA_TYPE:
        return [SetMember(group, member_id, v["client_id"], v["client_host"])]
    assigned = tuple((bytes(t["topic_id"]), tuple(t["partitions"])) for t in v["assigned_partitions"])
    return [SetMemberAssignment(group, member_id, assigned)]
