"""Records of a consumer-protocol group (KIP-848) as Apache Kafka 4.4 wrote them, and the owners they give.

The bytes were captured from a real Kafka 4.4.0 node: librdkafka 2.16.1 with ``group.protocol=consumer``,
group ``g848``, client id ``cid-848``, one member assigned partitions 0-2 of topic ``t848`` (topic id
043d7ceb-2314-49a0-8fd7-a31015c01a23), three offset commits; then the member left.
"""

from __future__ import annotations

import re

import pytest

from broker.protocol.records import Record, build_batch
from burrowpy.coordinators import offsets_fastpath
from burrowpy.coordinators.group_members import (
    ConsumerProtocolMembers,
    RemoveGroupMembers,
    RemoveMember,
    SetMember,
    SetMemberAssignment,
)
from burrowpy.coordinators.offsets_fastpath import OffsetsRecordDecoder
from burrowpy.coordinators.offsets_topic import GroupFilter, RecordSkipped, interpret
from burrowpy.protocol import ClearConsumerOwners, SetConsumerOffset, SetConsumerOwner, one_by_one

CLUSTER = "c"
ALL = GroupFilter()
MEMBER = "JcbN5cBRQviciu9qALTNRg"
TOPIC_ID = bytes.fromhex("043d7ceb231449a08fd7a31015c01a23")

# (key, value) in log order, as read from __consumer_offsets
RECORDS = [
    ("000500046738343800164a63624e356342525176696369753971414c544e5267",  # member metadata (type 5)
     "00000000086369642d3834380b2f3132372e302e302e3102057438343801000493e00001000100"),
    ("0003000467383438", "000000000002010008ea4a109edadda642"),  # group epoch (type 3)
    ("000700046738343800164a63624e356342525176696369753971414c544e5267",  # target assignment member (type 7)
     "000002043d7ceb231449a08fd7a31015c01a23040000000000000001000000020000"),
    ("0006000467383438", "000000000002010008000001a20e3a4ee1"),  # target assignment epoch (type 6)
    ("000800046738343800164a63624e356342525176696369753971414c544e5267",  # current assignment (type 8)
     "000000000002000000000002043d7ceb231449a08fd7a31015c01a230400000000000000010000000201000d040000000200000002"
     "000000020100"),
    ("000100046738343800047438343800000000",  # offset commit, value v4 with the topic id in a tagged field
     "000400000000000000030000000001000001a20e3a4f86010010043d7ceb231449a08fd7a31015c01a23"),
    ("0003000467383438", "00000000000300"),
    ("0006000467383438", "00000000000300"),
]


def decoded(index: int) -> list:
    key, value = RECORDS[index]
    return interpret(CLUSTER, bytes.fromhex(key), bytes.fromhex(value), index, ALL)


def test_member_metadata_and_current_assignment_become_member_events():
    assert decoded(0) == [SetMember("g848", MEMBER, "cid-848", "/127.0.0.1")]
    assert decoded(4) == [SetMemberAssignment("g848", MEMBER, ((TOPIC_ID, (0, 1, 2)),))]


def test_every_other_record_type_of_the_group_is_skipped_on_purpose():
    for index in (1, 2, 3, 6, 7):
        assert decoded(index) == []


def test_commits_of_a_consumer_protocol_group_are_read():
    assert decoded(5) == [SetConsumerOffset(CLUSTER, "g848", "t848", 0, offset=3, order=5, timestamp=1795535032198)]


def test_the_fast_path_reads_kafka_4_commit_values_with_their_tagged_topic_id(monkeypatch):
    key, value = (bytes.fromhex(x) for x in RECORDS[5])
    batch = build_batch([Record(7, 1, key, value)], base_offset=7)
    monkeypatch.setattr(offsets_fastpath, "interpret", lambda *args: pytest.fail("left the fast path"))
    decoded = OffsetsRecordDecoder(CLUSTER, ALL).decode(batch, 0)
    assert one_by_one(decoded.requests) == [SetConsumerOffset(CLUSTER, "g848", "t848", 0, offset=3, order=7,
                                                  timestamp=1795535032198)]
    # a tag section that does not end where the value ends is left to the schema codec to judge
    judged = []
    monkeypatch.setattr(offsets_fastpath, "interpret", lambda *args: judged.append(args) or interpret(*args))
    longer = build_batch([Record(7, 1, key, value + b"\x00")], base_offset=7)
    assert one_by_one(OffsetsRecordDecoder(CLUSTER, ALL).decode(longer, 0).requests) == interpret(CLUSTER, key, value + b"\x00",
                                                                                      7, ALL)
    assert len(judged) == 1


def test_tombstones():
    member_key, group_key = bytes.fromhex(RECORDS[0][0]), bytes.fromhex(RECORDS[1][0])
    assignment_key = bytes.fromhex(RECORDS[4][0])
    assert interpret(CLUSTER, member_key, None, 9, ALL) == [RemoveMember("g848", MEMBER)]
    assert interpret(CLUSTER, assignment_key, None, 9, ALL) == [RemoveMember("g848", MEMBER)]
    assert interpret(CLUSTER, group_key, None, 9, ALL) == [RemoveGroupMembers("g848")]
    assert interpret(CLUSTER, group_key, None, 9, GroupFilter(deny=re.compile("^g8"))) == []


def test_filtered_groups_give_nothing():
    denied = GroupFilter(deny=re.compile("848"))
    assert interpret(CLUSTER, bytes.fromhex(RECORDS[0][0]), bytes.fromhex(RECORDS[0][1]), 0, denied) == []


def test_unknown_record_types_and_broken_member_records_are_reported():
    with pytest.raises(RecordSkipped, match="unknown key version 24"):
        interpret(CLUSTER, b"\x00\x18\x00\x01g", b"", 0, ALL)
    with pytest.raises(RecordSkipped):
        interpret(CLUSTER, bytes.fromhex(RECORDS[0][0]), b"\x00\x00\x05", 0, ALL)


def owners(requests: list) -> set[tuple]:
    return {(r.topic, r.partition, r.owner, r.client_id) for r in requests if isinstance(r, SetConsumerOwner)}


def test_owners_once_the_topic_id_has_a_name():
    members = ConsumerProtocolMembers(CLUSTER)
    events = [event for index in range(len(RECORDS)) for event in decoded(index)
              if isinstance(event, SetMember | SetMemberAssignment)]
    first = members.apply(events)
    assert first == [ClearConsumerOwners(CLUSTER, "g848")]  # the topic's name is not known yet
    assert members.unknown_topic_ids() == {TOPIC_ID}
    learned = members.learn_topic_ids({TOPIC_ID: "t848", bytes(16): "other"})
    assert learned[0] == ClearConsumerOwners(CLUSTER, "g848")
    assert owners(learned) == {("t848", p, "/127.0.0.1", "cid-848") for p in range(3)}
    assert members.unknown_topic_ids() == set()
    assert members.learn_topic_ids({TOPIC_ID: "t848"}) == []  # nothing new


def test_owners_follow_members_joining_and_leaving():
    members = ConsumerProtocolMembers(CLUSTER)
    members.learn_topic_ids({TOPIC_ID: "t848"})
    # the assignment may come before the metadata: no owner until both are known
    assert owners(members.apply([SetMemberAssignment("g", "a", ((TOPIC_ID, (0, 1)),))])) == set()
    assert owners(members.apply([SetMember("g", "a", "client-a", "/10.0.0.1")])) == {
        ("t848", 0, "/10.0.0.1", "client-a"), ("t848", 1, "/10.0.0.1", "client-a")}
    both = members.apply([SetMember("g", "b", "client-b", "/10.0.0.2"),
                          SetMemberAssignment("g", "a", ((TOPIC_ID, (0,)),)),
                          SetMemberAssignment("g", "b", ((TOPIC_ID, (1,)),))])
    assert both[0] == ClearConsumerOwners(CLUSTER, "g")
    assert owners(both) == {("t848", 0, "/10.0.0.1", "client-a"), ("t848", 1, "/10.0.0.2", "client-b")}
    assert owners(members.apply([RemoveMember("g", "a")])) == {("t848", 1, "/10.0.0.2", "client-b")}
    assert members.apply([RemoveGroupMembers("g")]) == [ClearConsumerOwners(CLUSTER, "g")]
    assert members.unknown_topic_ids() == set()
