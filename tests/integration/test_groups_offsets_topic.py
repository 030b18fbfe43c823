"""`__consumer_offsets` as an ordinary consumer (Burrow, our monitor) reads it: every key and value version
the broker writes, field by field, decoded here by hand from kafka-protocol.md section 5 (not with the
project's codec, so a mistake there cannot hide one here).
"""

from __future__ import annotations

import struct
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from harness import BrokerProcess, wait_until

from broker.client import KafkaConnection
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey, encode_struct

pytestmark = pytest.mark.integration

OFFSETS_TOPIC = "__consumer_offsets"


class Reader:
    """Big-endian fields of a key or value; ``done()`` checks nothing is left over."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _fixed(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def i16(self) -> int:
        return self._fixed(">h")

    def i32(self) -> int:
        return self._fixed(">i")

    def i64(self) -> int:
        return self._fixed(">q")

    def string(self) -> str | None:
        length = self.i16()
        if length < 0:
            return None
        value = self.data[self.pos:self.pos + length].decode()
        self.pos += length
        return value

    def blob(self) -> bytes:
        length = self.i32()
        value = self.data[self.pos:self.pos + length]
        self.pos += length
        return value

    def done(self) -> None:
        assert self.pos == len(self.data), f"{len(self.data) - self.pos} bytes left over"


def parse_key(data: bytes) -> tuple:
    r = Reader(data)
    version = r.i16()
    if version in (0, 1):
        key = ("offset", version, r.string(), r.string(), r.i32())
    else:
        key = ("group", version, r.string())
    r.done()
    return key


def parse_offset_value(data: bytes) -> dict:
    r = Reader(data)
    value = {"version": r.i16(), "offset": r.i64()}
    if value["version"] >= 3:
        value["leader_epoch"] = r.i32()
    value["metadata"] = r.string()
    value["commit_timestamp"] = r.i64()
    if value["version"] == 1:
        value["expire_timestamp"] = r.i64()
    r.done()
    return value


def parse_group_value(data: bytes) -> dict:
    r = Reader(data)
    value = {"version": r.i16(), "protocol_type": r.string(), "generation": r.i32(), "protocol": r.string(),
             "leader": r.string()}
    version = value["version"]
    if version >= 2:
        value["current_state_timestamp"] = r.i64()
    members = []
    for _ in range(r.i32()):
        member = {"member_id": r.string()}
        if version >= 3:
            member["group_instance_id"] = r.string()
        member["client_id"] = r.string()
        member["client_host"] = r.string()
        if version >= 1:
            member["rebalance_timeout"] = r.i32()
        member["session_timeout"] = r.i32()
        member["subscription"] = r.blob()
        member["assignment"] = r.blob()
        members.append(member)
    value["members"] = members
    r.done()
    return value


def read_offsets_topic(bootstrap: str, keep, expected_count: int) -> list[tuple[tuple, bytes | None]]:
    """(parsed key, raw value) of the records whose key ``keep`` accepts, in offset order per partition."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                       "enable.auto.commit": False})
    reader.assign([TopicPartition(OFFSETS_TOPIC, p, OFFSET_BEGINNING) for p in range(50)])
    found: list[tuple[tuple, bytes | None]] = []

    def poll() -> bool:
        message = reader.poll(0.2)
        if message is not None and not message.error():
            key = parse_key(message.key())
            if keep(key):
                found.append((key, message.value()))
        return len(found) >= expected_count

    try:
        wait_until(poll, 60, interval=0, message=f"{expected_count} records in {OFFSETS_TOPIC}")
    finally:
        reader.close()
    return found


@pytest.fixture(params=[3, 2, 1, 0], ids=lambda v: f"group-value-v{v}")
def versioned_broker(request, tmp_path):
    proc = BrokerProcess(tmp_path / "data", extra_config={"group.initial.rebalance.delay.ms": 100,
                                                          "group.metadata.value.version": request.param})
    proc.start()
    yield proc, request.param
    proc.stop()


async def test_every_record_we_write_field_by_field(versioned_broker):
    broker, group_value_version = versioned_broker
    topic, group, standalone = (f"{name}-{uuid.uuid4().hex[:6]}" for name in ("dec", "g", "s"))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(timeout=30)
    subscription = encode_struct("ConsumerProtocolSubscription", 1, {"topics": [topic], "user_data": b"u",
                                                                     "owned_partitions": []})
    assignment = encode_struct("ConsumerProtocolAssignment", 0, {
        "assigned_partitions": [{"topic": topic, "partitions": [0, 1]}], "user_data": None})

    before = int(time.time() * 1000)
    async with await KafkaConnection.connect(broker.bootstrap, client_id="decoder") as conn:
        joined = await conn.request(ApiKey.JOIN_GROUP, {
            "group_id": group, "session_timeout_ms": 12000, "rebalance_timeout_ms": 34000, "member_id": "",
            "group_instance_id": "inst-1", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription}]}, version=5)
        member = joined["member_id"]
        synced = await conn.request(ApiKey.SYNC_GROUP, {
            "group_id": group, "generation_id": 1, "member_id": member, "group_instance_id": "inst-1",
            "assignments": [{"member_id": member, "assignment": assignment}]}, version=3)
        assert (joined["error_code"], synced["error_code"]) == (ErrorCode.NONE, ErrorCode.NONE)
        committed = await conn.request(ApiKey.OFFSET_COMMIT, {
            "group_id": group, "generation_id_or_member_epoch": 1, "member_id": member,
            "group_instance_id": "inst-1", "topics": [{"name": topic, "partitions": [
                {"partition_index": 1, "committed_offset": 42, "committed_leader_epoch": 3,
                 "committed_metadata": "meta"}]}]}, version=8)
        kept = await conn.request(ApiKey.OFFSET_COMMIT, {
            "group_id": standalone, "generation_id_or_member_epoch": -1, "member_id": "",
            "retention_time_ms": 3600000, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 7, "committed_metadata": None}]}]}, version=2)
        left = await conn.request(ApiKey.LEAVE_GROUP, {"group_id": group, "members": [
            {"member_id": member, "group_instance_id": "inst-1"}]}, version=3)
        dropped = await conn.request(ApiKey.OFFSET_DELETE, {"group_id": standalone, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0}]}]}, version=0)
        deleted = await conn.request(ApiKey.DELETE_GROUPS, {"groups_names": [group]}, version=1)
    after = int(time.time() * 1000)
    assert [committed["topics"][0]["partitions"][0]["error_code"], kept["topics"][0]["partitions"][0]["error_code"],
            left["error_code"], dropped["error_code"], deleted["results"][0]["error_code"]] == [0] * 5

    records = read_offsets_topic(broker.bootstrap, lambda key: key[2] in (group, standalone), 7)
    mine = [(key, value) for key, value in records if key[2] == group]
    theirs = [(key, value) for key, value in records if key[2] == standalone]

    # the group: its Stable generation with the member, the commit, Empty, then tombstones on deletion
    assert [key for key, _ in mine] == [("group", 2, group), ("offset", 1, group, topic, 1), ("group", 2, group),
                                        ("offset", 1, group, topic, 1), ("group", 2, group)]
    stable = parse_group_value(mine[0][1])
    assert {k: stable[k] for k in ("version", "protocol_type", "generation", "protocol", "leader")} == {
        "version": group_value_version, "protocol_type": "consumer", "generation": 1, "protocol": "range",
        "leader": member}
    expected_member = {"member_id": member, "group_instance_id": "inst-1", "client_id": "decoder",
                       "client_host": "/127.0.0.1", "rebalance_timeout": 34000, "session_timeout": 12000,
                       "subscription": subscription, "assignment": assignment}
    if group_value_version < 3:
        del expected_member["group_instance_id"]
    if group_value_version < 1:
        del expected_member["rebalance_timeout"]
    assert stable["members"] == [expected_member]
    if group_value_version >= 2:
        assert before <= stable["current_state_timestamp"] <= after

    offset_value = parse_offset_value(mine[1][1])
    assert before <= offset_value.pop("commit_timestamp") <= after
    assert offset_value == {"version": 3, "offset": 42, "leader_epoch": 3, "metadata": "meta"}

    empty = parse_group_value(mine[2][1])
    assert (empty["version"], empty["generation"], empty["protocol"], empty["leader"], empty["members"]) == (
        group_value_version, 2, None, None, [])
    assert empty["protocol_type"] == "consumer"
    assert mine[3][1] is None and mine[4][1] is None

    # the standalone group: a commit with a retention time (value v1), then OffsetDelete's tombstone
    assert [key for key, _ in theirs] == [("offset", 1, standalone, topic, 0)] * 2
    expiring = parse_offset_value(theirs[0][1])
    assert expiring["version"] == 1 and (expiring["offset"], expiring["metadata"]) == (7, "")
    assert expiring["expire_timestamp"] - expiring["commit_timestamp"] == 3600000
    assert theirs[1][1] is None
