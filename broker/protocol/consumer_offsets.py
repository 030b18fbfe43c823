"""Keys and values of `__consumer_offsets` records, in the layouts Apache Kafka writes.

Every key and value starts with an int16 version (kafka-protocol.md section 5). What we write:

* an offset commit: key v1 (group, topic, partition) and value v3 (offset, leader epoch, metadata,
  commit timestamp) -- or value v1 (adds the expire timestamp, drops the leader epoch) when the commit
  carried an explicit retention time, as Kafka does;
* group metadata: key v2 (group) and value v3 by default (members with instance id, rebalance timeout,
  subscription and assignment). ``group.metadata.value.version`` 0-2 selects an older value layout:
  Burrow 1.2.1 decodes only values 0 and 1, so 1 lets it show partition owners;
* a tombstone: the same key with a null value.

The byte layouts come from the project's one schema codec (:mod:`broker.protocol.api`); this module
only chooses versions and converts between its dicts and typed records. It is the one place these records
are read and written: the broker's group coordinator writes and replays them, the monitor's consumer module
(and through it the pipeline) reads them, so it sits in the codec layer both may import.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from broker.protocol.api import decode_struct, encode_struct
from broker.protocol.types import ProtocolError

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
DEFAULT_GROUP_METADATA_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSIONS = range(0, 4)

_VERSION = struct.Struct(">h")

NO_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    # Only set by OffsetCommit v2-4 with an explicit retention time (pre-KIP-211 semantics).
    expire_timestamp: int | None = None


class OffsetsRecordError(ValueError):
    """Bytes that are not a record layout we know (corrupt, or a version we cannot read)."""


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int  # -1 when unknown (and in values older than v2)
    members: tuple[MemberRecord, ...] = ()


# --- encoding ------------------------------------------------------------------------------------------

def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return encode_struct("OffsetCommitKey", OFFSET_COMMIT_KEY_VERSION,
                         {"group": group, "topic": topic, "partition": partition})


def offset_commit_value(committed: OffsetAndMetadata) -> bytes:
    if committed.expire_timestamp is not None:
        version = OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
        expire_timestamp = committed.expire_timestamp
    else:
        version = OFFSET_COMMIT_VALUE_VERSION
        expire_timestamp = -1
    return encode_struct("OffsetCommitValue", version, {
        "offset": committed.offset,
        "leader_epoch": committed.leader_epoch,
        "metadata": committed.metadata,
        "commit_timestamp": committed.commit_timestamp,
        "expire_timestamp": expire_timestamp,
    })


def group_metadata_key(group: str) -> bytes:
    return encode_struct("GroupMetadataKey", GROUP_METADATA_KEY_VERSION, {"group": group})


def group_metadata_value(record: GroupMetadataRecord,
                         version: int = DEFAULT_GROUP_METADATA_VALUE_VERSION) -> bytes:
    if version not in GROUP_METADATA_VALUE_VERSIONS:
        raise ValueError(f"group metadata value version {version} is not one of 0-3")
    return encode_struct("GroupMetadataValue", version, {
        "protocol_type": record.protocol_type,
        "generation": record.generation,
        "protocol": record.protocol,
        "leader": record.leader,
        "current_state_timestamp": record.current_state_timestamp,
        "members": [{
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "rebalance_timeout": m.rebalance_timeout_ms,
            "session_timeout": m.session_timeout_ms,
            "subscription": m.subscription,
            "assignment": m.assignment,
        } for m in record.members],
    })


# --- consumer-protocol groups (KIP-848) -------------------------------------------------------------------
# Record types (the key's version): 3 group metadata (epoch), 5 member metadata, 6 target assignment
# metadata (assignment epoch), 7 a member's target assignment, 8 a member's current assignment.

GROUP_EPOCH_RECORD = 3
MEMBER_METADATA_RECORD = 5
TARGET_ASSIGNMENT_METADATA_RECORD = 6
TARGET_ASSIGNMENT_MEMBER_RECORD = 7
CURRENT_ASSIGNMENT_RECORD = 8
_GROUP_KEYS = {GROUP_EPOCH_RECORD: "ConsumerGroupMetadataKey",
               TARGET_ASSIGNMENT_METADATA_RECORD: "ConsumerGroupTargetAssignmentMetadataKey"}
_MEMBER_KEYS = {MEMBER_METADATA_RECORD: "ConsumerGroupMemberMetadataKey",
                TARGET_ASSIGNMENT_MEMBER_RECORD: "ConsumerGroupTargetAssignmentMemberKey",
                CURRENT_ASSIGNMENT_RECORD: "ConsumerGroupCurrentMemberAssignmentKey"}
_VALUES = {GROUP_EPOCH_RECORD: "ConsumerGroupMetadataValue",
           MEMBER_METADATA_RECORD: "ConsumerGroupMemberMetadataValue",
           TARGET_ASSIGNMENT_METADATA_RECORD: "ConsumerGroupTargetAssignmentMetadataValue",
           TARGET_ASSIGNMENT_MEMBER_RECORD: "ConsumerGroupTargetAssignmentMemberValue",
           CURRENT_ASSIGNMENT_RECORD: "ConsumerGroupCurrentMemberAssignmentValue"}


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    record_type: int
    group: str
    member: str | None = None


def consumer_group_key(record_type: int, group: str, member: str | None = None) -> bytes:
    if record_type in _GROUP_KEYS:
        return encode_struct(_GROUP_KEYS[record_type], record_type, {"group_id": group})
    return encode_struct(_MEMBER_KEYS[record_type], record_type, {"group_id": group, "member_id": member})


def consumer_group_value(record_type: int, body: dict[str, Any]) -> bytes:
    return encode_struct(_VALUES[record_type], 0, body)


def decode_consumer_group_value(record_type: int, data: bytes) -> dict[str, Any]:
    try:
        return decode_struct(_VALUES[record_type], data)[1]
    except ProtocolError as exc:
        raise OffsetsRecordError(f"bad consumer group record (type {record_type}): {exc}") from exc


# --- decoding ------------------------------------------------------------------------------------------

def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey | None:
    """The key of a `__consumer_offsets` record; None for a record type we do not keep (any other version).

    Key versions 0 and 1 are offset commits (the same layout), 2 is group metadata, 3 and 5-8 records of
    consumer-protocol groups.
    """
    if len(data) < _VERSION.size:
        raise OffsetsRecordError(f"a {len(data)}-byte key has no version")
    (version,) = _VERSION.unpack_from(data)
    try:
        if version in (0, 1):
            _, body = decode_struct("OffsetCommitKey", data)
            return OffsetCommitKey(body["group"], body["topic"], body["partition"])
        if version == GROUP_METADATA_KEY_VERSION:
            _, body = decode_struct("GroupMetadataKey", data)
            return GroupMetadataKey(body["group"])
        if version in _GROUP_KEYS:
            return ConsumerGroupKey(version, decode_struct(_GROUP_KEYS[version], data)[1]["group_id"])
        if version in _MEMBER_KEYS:
            _, body = decode_struct(_MEMBER_KEYS[version], data)
            return ConsumerGroupKey(version, body["group_id"], body["member_id"])
    except ProtocolError as exc:
        raise OffsetsRecordError(f"bad key (version {version}): {exc}") from exc
    return None


def decode_offset_commit_value(data: bytes) -> OffsetAndMetadata:
    try:
        version, body = decode_struct("OffsetCommitValue", data)
    except ProtocolError as exc:
        raise OffsetsRecordError(f"bad offset commit value: {exc}") from exc
    expire_timestamp = body["expire_timestamp"] if version == 1 else -1
    return OffsetAndMetadata(
        offset=body["offset"],
        leader_epoch=body["leader_epoch"] if version >= 3 else NO_LEADER_EPOCH,
        metadata=body["metadata"] or "",
        commit_timestamp=body["commit_timestamp"],
        expire_timestamp=None if expire_timestamp == -1 else expire_timestamp,
    )


def decode_group_metadata_value(data: bytes) -> GroupMetadataRecord:
    try:
        version, body = decode_struct("GroupMetadataValue", data)
    except ProtocolError as exc:
        raise OffsetsRecordError(f"bad group metadata value: {exc}") from exc
    members = tuple(MemberRecord(
        member_id=m["member_id"],
        group_instance_id=m["group_instance_id"] if version >= 3 else None,
        client_id=m["client_id"],
        client_host=m["client_host"],
        # v0 has no rebalance timeout; Kafka used the session timeout for both then.
        rebalance_timeout_ms=m["rebalance_timeout"] if version >= 1 else m["session_timeout"],
        session_timeout_ms=m["session_timeout"],
        subscription=bytes(m["subscription"]),
        assignment=bytes(m["assignment"]),
    ) for m in body["members"])
    return GroupMetadataRecord(
        protocol_type=body["protocol_type"],
        generation=body["generation"],
        protocol=body["protocol"],
        leader=body["leader"],
        current_state_timestamp=body["current_state_timestamp"] if version >= 2 else -1,
        members=members,
    )


def subscription_topics(data: bytes) -> frozenset[str]:
    """The topics of a consumer's JoinGroup metadata (ConsumerProtocolSubscription, any version)."""
    try:
        _, body = decode_struct("ConsumerProtocolSubscription", data)
    except ProtocolError as exc:
        raise OffsetsRecordError(f"bad consumer subscription: {exc}") from exc
    return frozenset(body["topics"])


def assigned_partitions(data: bytes) -> list[tuple[str, list[int]]]:
    """(topic, partitions) of a member's assignment in group metadata (ConsumerProtocolAssignment, any
    version)."""
    try:
        _, body = decode_struct("ConsumerProtocolAssignment", data)
    except ProtocolError as exc:
        raise OffsetsRecordError(f"bad consumer assignment: {exc}") from exc
    return [(assigned["topic"], assigned["partitions"]) for assigned in body["assigned_partitions"]]
