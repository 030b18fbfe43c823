"""What callers hand the group machine, and what it answers (plain values; no behaviour)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from broker.errors import ErrorCode
from broker.groups.offsets import TopicPartition
from broker.groups.state import GroupState, Protocols

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
DEAD_GROUP_STATE = GroupState.DEAD.value


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    # JoinGroup v4+ from a dynamic member: an unknown member is first handed an id (MEMBER_ID_REQUIRED).
    require_known_member_id: bool = False


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[JoinedMember, ...] = ()  # only the leader gets them


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    assignments: Mapping[str, bytes]
    # SyncGroup v5 echoes what JoinGroup returned; None (older versions) skips the check.
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    # OffsetCommit v1 lets the client set the commit time; -1 means "now".
    commit_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class CommitRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    offsets: Mapping[TopicPartition, PartitionCommit]
    # OffsetCommit v2-4: an explicit retention time sets an expire timestamp (-1: broker default).
    retention_time_ms: int = -1


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"  # or "consumer" (KIP-848)


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol_name: str
    members: tuple[MemberDescription, ...] = ()
