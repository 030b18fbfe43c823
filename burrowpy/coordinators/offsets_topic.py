"""What one `__consumer_offsets` record means to the monitor, as storage requests (pure, no IO).

The record layouts are decoded by the broker's schema codec (one codec for the project). Differences from
Burrow 1.2.1, deliberate: offset value v2 (same layout as v0) and v4 are read; group metadata values v2-v4
are read, so owners show with modern Kafka; an offset tombstone removes that partition's commits
(Burrow ignores it, issue #818), a group tombstone deletes the group as in Burrow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.protocol.api import decode_struct
from burrowpy.protocol import (
    ClearConsumerOwners,
    SetConsumerOffset,
    SetConsumerOwner,
    SetDeleteGroup,
    SetDeletePartitionOffsets,
)

OFFSET_KEY_VERSIONS = (0, 1)
GROUP_KEY_VERSION = 2


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
    except RecordSkipped:
        raise
    except Exception as exc:  # the codec's DecodeError, or a version it does not know
        raise RecordSkipped(f"key version {version}: {exc}") from None
    raise RecordSkipped(f"unknown key version {version}")
