"""What `__consumer_offsets` records mean to the monitor: every key and value version, tombstones, filters."""

from __future__ import annotations

import re

import pytest

from broker.protocol.api import encode_struct
from burrowpy.coordinators.offsets_topic import GroupFilter, RecordSkipped, interpret
from burrowpy.protocol import (
    ClearConsumerOwners,
    SetConsumerOffset,
    SetConsumerOwner,
    SetDeleteGroup,
    SetDeletePartitionOffsets,
)

ALL = GroupFilter()


def offset_key(version: int = 1, group: str = "g", topic: str = "t", partition: int = 3) -> bytes:
    return encode_struct("OffsetCommitKey", version, {"group": group, "topic": topic, "partition": partition})


@pytest.mark.parametrize("key_version", [0, 1])
@pytest.mark.parametrize("value_version", [0, 1, 2, 3, 4])
def test_offset_commit_every_version(key_version, value_version):
    value = encode_struct(
        "OffsetCommitValue",
        value_version,
        {
            "offset": 1234,
            "leader_epoch": 7,
            "metadata": "m",
            "commit_timestamp": 1_700_000_000_123,
            "expire_timestamp": 1_700_000_100_000,
        },
    )
    assert interpret("c", offset_key(key_version), value, 99, ALL) == [
        SetConsumerOffset(
            cluster="c", group="g", topic="t", partition=3, offset=1234, order=99, timestamp=1_700_000_000_123
        )
    ]


def test_offset_tombstone_forgets_the_partition():
    assert interpret("c", offset_key(), None, 5, ALL) == [
        SetDeletePartitionOffsets(cluster="c", group="g", topic="t", partition=3)
    ]


def assignment(topics: dict[str, list[int]], version: int = 0) -> bytes:
    return encode_struct(
        "ConsumerProtocolAssignment",
        version,
        {
            "assigned_partitions": [{"topic": t, "partitions": p} for t, p in topics.items()],
            "user_data": None,
        },
    )


@pytest.mark.parametrize("value_version", [0, 1, 2, 3, 4])
def test_group_metadata_gives_owners(value_version):
    key = encode_struct("GroupMetadataKey", 2, {"group": "g"})
    members = [
        {
            "member_id": "m1",
            "group_instance_id": None,
            "client_id": "c1",
            "client_host": "/10.0.0.1",
            "rebalance_timeout": 300000,
            "session_timeout": 10000,
            "subscription": b"",
            "assignment": assignment({"t": [0, 2]}),
        },
        {
            "member_id": "m2",
            "group_instance_id": "i2",
            "client_id": "c2",
            "client_host": "/10.0.0.2",
            "rebalance_timeout": 300000,
            "session_timeout": 10000,
            "subscription": b"",
            "assignment": assignment({"t": [1], "u": [0]}, version=1),
        },
    ]
    value = encode_struct(
        "GroupMetadataValue",
        value_version,
        {
            "protocol_type": "consumer",
            "generation": 4,
            "protocol": "range",
            "leader": "m1",
            "current_state_timestamp": 1_700_000_000_000,
            "members": members,
        },
    )
    assert interpret("c", key, value, 1, ALL) == [
        SetConsumerOwner(cluster="c", group="g", topic="t", partition=0, owner="/10.0.0.1", client_id="c1"),
        SetConsumerOwner(cluster="c", group="g", topic="t", partition=2, owner="/10.0.0.1", client_id="c1"),
        SetConsumerOwner(cluster="c", group="g", topic="t", partition=1, owner="/10.0.0.2", client_id="c2"),
        SetConsumerOwner(cluster="c", group="g", topic="u", partition=0, owner="/10.0.0.2", client_id="c2"),
    ]


def test_empty_group_clears_owners_and_tombstone_deletes_group():
    key = encode_struct("GroupMetadataKey", 2, {"group": "g"})
    empty = encode_struct(
        "GroupMetadataValue",
        3,
        {"protocol_type": "consumer", "generation": 5, "protocol": None, "leader": None, "members": []},
    )
    assert interpret("c", key, empty, 1, ALL) == [ClearConsumerOwners(cluster="c", group="g")]
    assert interpret("c", key, None, 2, ALL) == [SetDeleteGroup(cluster="c", group="g")]


def test_non_consumer_groups_are_ignored():
    key = encode_struct("GroupMetadataKey", 2, {"group": "connect"})
    value = encode_struct(
        "GroupMetadataValue",
        3,
        {"protocol_type": "connect", "generation": 1, "protocol": "x", "leader": "m", "members": []},
    )
    assert interpret("c", key, value, 1, ALL) == []


def test_allow_and_deny_lists():
    only_app = GroupFilter(allow=re.compile("^app-"), deny=re.compile("-test$"))
    value = encode_struct("OffsetCommitValue", 3, {"offset": 1, "metadata": "", "commit_timestamp": 1})
    assert interpret("c", offset_key(group="app-1"), value, 1, only_app)
    assert interpret("c", offset_key(group="other"), value, 1, only_app) == []
    assert interpret("c", offset_key(group="app-1-test"), value, 1, only_app) == []


@pytest.mark.parametrize("key", [b"", b"\x00", b"\x00\x18abc", b"\x00\x01\x00\x05ab"])
def test_undecodable_records_are_skipped_with_a_reason(key):
    with pytest.raises(RecordSkipped):
        interpret("c", key, b"\x00\x03", 1, ALL)
