"""The group APIs on the wire, version by version, through our own client against a real broker process."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from harness import unique_name

from broker.client import KafkaConnection
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey, decode_struct, encode_struct

pytestmark = pytest.mark.integration

E = ErrorCode


def subscription(*topics: str) -> bytes:
    return encode_struct("ConsumerProtocolSubscription", 1, {"topics": list(topics), "user_data": None,
                                                            "owned_partitions": []})


def assignment(topic: str, partitions: list[int]) -> bytes:
    return encode_struct("ConsumerProtocolAssignment", 0, {
        "assigned_partitions": [{"topic": topic, "partitions": partitions}], "user_data": None})



@pytest.fixture(scope="module")
def topic(broker):
    name = unique_name("wire")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1)])[name].result(timeout=30)
    return name


@pytest.fixture
async def conn(broker):
    connection = await KafkaConnection.connect(broker.bootstrap, client_id="wire-test")
    yield connection
    await connection.close()


async def join(conn: KafkaConnection, group: str, version: int, member_id: str = "", instance_id: str | None = None,
               topics: tuple[str, ...] = ("t",), session_ms: int = 10000) -> dict:
    return await conn.request(ApiKey.JOIN_GROUP, {
        "group_id": group, "session_timeout_ms": session_ms, "rebalance_timeout_ms": 20000, "member_id": member_id,
        "group_instance_id": instance_id, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription(*topics)}]}, version=version)


async def stable_member(conn: KafkaConnection, group: str, topic: str, instance_id: str | None = None) -> dict:
    """One member joined (v5) and synced (v3) with an assignment of the whole topic; its join answer."""
    joined = await join(conn, group, 5, instance_id=instance_id, topics=(topic,))
    if joined["error_code"] == E.MEMBER_ID_REQUIRED:
        joined = await join(conn, group, 5, member_id=joined["member_id"], topics=(topic,))
    assert joined["error_code"] == E.NONE
    synced = await conn.request(ApiKey.SYNC_GROUP, {
        "group_id": group, "generation_id": joined["generation_id"], "member_id": joined["member_id"],
        "group_instance_id": instance_id,
        "assignments": [{"member_id": joined["member_id"], "assignment": assignment(topic, [0, 1, 2])}]},
        version=3)
    assert synced["error_code"] == E.NONE
    return joined


async def commit(conn: KafkaConnection, group: str, topic: str, offsets: dict[int, int], version: int = 8,
                 generation: int = -1, member_id: str = "", **extra) -> dict[int, int]:
    answer = await conn.request(ApiKey.OFFSET_COMMIT, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id, **extra,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "committed_offset": o, "committed_leader_epoch": 3, "committed_metadata": "m"}
            for p, o in offsets.items()]}]}, version=version)
    return {p["partition_index"]: p["error_code"] for t in answer["topics"] for p in t["partitions"]}


# --- FindCoordinator -------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_find_coordinator_single_key(broker, conn, version):
    answer = await conn.request(ApiKey.FIND_COORDINATOR, {"key": "some-group", "key_type": 0}, version=version)
    assert (answer["error_code"], answer["node_id"], answer["host"], answer["port"]) == (
        E.NONE, broker.node_id, "127.0.0.1", broker.port)


async def test_find_coordinator_batched_keys_transactions_and_unknown_key_types(broker, conn):
    answer = await conn.request(ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": ["a", "b"]},
                                version=4)
    assert [(c["key"], c["error_code"], c["port"]) for c in answer["coordinators"]] == [
        ("a", E.NONE, broker.port), ("b", E.NONE, broker.port)]
    txn = await conn.request(ApiKey.FIND_COORDINATOR, {"key": "txn", "key_type": 1}, version=3)
    assert (txn["error_code"], txn["node_id"], txn["port"]) == (E.NONE, broker.node_id, broker.port)
    unknown = await conn.request(ApiKey.FIND_COORDINATOR, {"key": "x", "key_type": 2}, version=3)
    assert unknown["error_code"] == E.INVALID_REQUEST and unknown["node_id"] == -1


# --- membership ------------------------------------------------------------------------------------------

async def test_join_group_v0_joins_at_once_and_v4_requires_a_member_id(conn):
    group = unique_name("join")
    v0 = await join(conn, group, 0)
    assert v0["error_code"] == E.NONE and v0["generation_id"] == 1 and v0["leader"] == v0["member_id"]
    assert v0["member_id"].startswith("wire-test-") and v0["protocol_name"] == "range"

    group4 = unique_name("join4")
    first = await join(conn, group4, 4)
    assert first["error_code"] == E.MEMBER_ID_REQUIRED and first["generation_id"] == -1
    assert first["member_id"].startswith("wire-test-")
    second = await join(conn, group4, 7, member_id=first["member_id"])
    assert second["error_code"] == E.NONE and second["protocol_type"] == "consumer"
    assert [m["member_id"] for m in second["members"]] == [first["member_id"]]


async def test_join_errors(conn):
    assert (await join(conn, "", 5))["error_code"] == E.INVALID_GROUP_ID
    assert (await join(conn, unique_name("j"), 5, session_ms=10))["error_code"] == E.INVALID_SESSION_TIMEOUT
    unknown = await join(conn, unique_name("j"), 7, member_id="nobody")
    assert unknown["error_code"] == E.UNKNOWN_MEMBER_ID and unknown["protocol_name"] is None


async def test_sync_heartbeat_and_leave_across_versions(conn, topic):
    group = unique_name("sync")
    joined = await stable_member(conn, group, topic)
    member, generation = joined["member_id"], joined["generation_id"]
    v5 = await conn.request(ApiKey.SYNC_GROUP, {
        "group_id": group, "generation_id": generation, "member_id": member, "protocol_type": "consumer",
        "protocol_name": "range", "assignments": []}, version=5)
    assert v5["error_code"] == E.NONE and (v5["protocol_type"], v5["protocol_name"]) == ("consumer", "range")
    assert decode_struct("ConsumerProtocolAssignment", v5["assignment"])[1]["assigned_partitions"] == [
        {"topic": topic, "partitions": [0, 1, 2]}]
    wrong = await conn.request(ApiKey.SYNC_GROUP, {
        "group_id": group, "generation_id": generation, "member_id": member, "protocol_type": "consumer",
        "protocol_name": "roundrobin", "assignments": []}, version=5)
    assert wrong["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL

    for version in range(5):
        beat = await conn.request(ApiKey.HEARTBEAT, {"group_id": group, "generation_id": generation,
                                                     "member_id": member}, version=version)
        assert beat["error_code"] == E.NONE
    stale = await conn.request(ApiKey.HEARTBEAT, {"group_id": group, "generation_id": generation + 1,
                                                  "member_id": member}, version=0)
    assert stale["error_code"] == E.ILLEGAL_GENERATION

    # v0-2: one member, its error at the top; v3+: a batch with an error each
    gone = await conn.request(ApiKey.LEAVE_GROUP, {"group_id": group, "member_id": "nobody"}, version=1)
    assert gone["error_code"] == E.UNKNOWN_MEMBER_ID
    left = await conn.request(ApiKey.LEAVE_GROUP, {"group_id": group, "members": [
        {"member_id": member, "group_instance_id": None}, {"member_id": "nobody", "group_instance_id": None}]},
        version=5)
    assert left["error_code"] == E.NONE
    assert [(m["member_id"], m["error_code"]) for m in left["members"]] == [
        (member, E.NONE), ("nobody", E.UNKNOWN_MEMBER_ID)]
    beat = await conn.request(ApiKey.HEARTBEAT, {"group_id": group, "generation_id": generation,
                                                 "member_id": member}, version=4)
    assert beat["error_code"] == E.UNKNOWN_MEMBER_ID


async def test_rebalance_with_two_connections(broker, topic):
    group = unique_name("two")
    async with await KafkaConnection.connect(broker.bootstrap, client_id="a") as a, \
            await KafkaConnection.connect(broker.bootstrap, client_id="b") as b:
        first = await stable_member(a, group, topic)
        second_join = asyncio.ensure_future(join(b, group, 3, topics=(topic,)))
        await asyncio.sleep(0)  # the leader learns about the rebalance from its heartbeat
        for _ in range(100):
            beat = await a.request(ApiKey.HEARTBEAT, {"group_id": group, "generation_id": first["generation_id"],
                                                      "member_id": first["member_id"]}, version=1)
            if beat["error_code"] == E.REBALANCE_IN_PROGRESS:
                break
            await asyncio.sleep(0.05)
        assert beat["error_code"] == E.REBALANCE_IN_PROGRESS
        rejoined = await join(a, group, 3, member_id=first["member_id"], topics=(topic,))
        second = await second_join
        assert rejoined["generation_id"] == second["generation_id"] == first["generation_id"] + 1
        assert rejoined["leader"] == first["member_id"] and len(rejoined["members"]) == 2


async def test_static_member_rejoins_without_rebalance(broker, topic):
    group = unique_name("static")
    async with await KafkaConnection.connect(broker.bootstrap, client_id="static") as c:
        first = await stable_member(c, group, topic, instance_id="host-1")
        again = await join(c, group, 5, instance_id="host-1", topics=(topic,))
        assert again["error_code"] == E.NONE and again["member_id"] != first["member_id"]
        assert again["generation_id"] == first["generation_id"]
        fenced = await c.request(ApiKey.HEARTBEAT, {"group_id": group, "generation_id": first["generation_id"],
                                                    "member_id": first["member_id"], "group_instance_id": "host-1"},
                                 version=3)
        assert fenced["error_code"] == E.FENCED_INSTANCE_ID


# --- offsets ---------------------------------------------------------------------------------------------

async def test_simple_commits_in_every_version_and_fetch(conn, topic):
    group = unique_name("simple")
    for version in range(9):
        assert await commit(conn, group, topic, {0: 100 + version}, version=version) == {0: E.NONE}
        fetch_version = min(version, 7)
        fetched = await conn.request(ApiKey.OFFSET_FETCH, {"group_id": group, "topics": [
            {"name": topic, "partition_indexes": [0, 1]}]}, version=fetch_version)
        partitions = {p["partition_index"]: p for t in fetched["topics"] for p in t["partitions"]}
        assert partitions[0]["committed_offset"] == 100 + version
        if fetch_version >= 5:  # the leader epoch is committed from v6 and fetched from v5
            assert partitions[0]["committed_leader_epoch"] == (3 if version >= 6 else -1)
        assert (partitions[1]["committed_offset"], partitions[1]["error_code"]) == (-1, E.NONE)
    assert await commit(conn, group, "no-such-topic", {0: 1}) == {0: E.UNKNOWN_TOPIC_OR_PARTITION}


async def test_offset_fetch_whole_group_and_batched_groups(conn, topic):
    group = unique_name("fetch")
    await commit(conn, group, topic, {0: 5, 2: 7})
    everything = await conn.request(ApiKey.OFFSET_FETCH, {"group_id": group, "topics": None}, version=6)
    assert everything["error_code"] == E.NONE
    assert {(p["partition_index"], p["committed_offset"], p["metadata"])
            for t in everything["topics"] for p in t["partitions"]} == {(0, 5, "m"), (2, 7, "m")}
    batched = await conn.request(ApiKey.OFFSET_FETCH, {"groups": [
        {"group_id": group, "topics": [{"name": topic, "partition_indexes": [2]}]},
        {"group_id": "never-seen", "topics": None},
        {"group_id": group, "topics": None}]}, version=8)
    answers = batched["groups"]
    assert [g["error_code"] for g in answers] == [E.NONE] * 3
    assert answers[0]["topics"][0]["partitions"][0]["committed_offset"] == 7
    assert answers[1]["topics"] == []
    assert len(answers[2]["topics"][0]["partitions"]) == 2


async def test_member_commit_validation_on_the_wire(conn, topic):
    group = unique_name("member")
    joined = await stable_member(conn, group, topic)
    ok = await commit(conn, group, topic, {1: 9}, generation=joined["generation_id"], member_id=joined["member_id"])
    assert ok == {1: E.NONE}
    assert await commit(conn, group, topic, {1: 9}) == {1: E.UNKNOWN_MEMBER_ID}
    assert await commit(conn, group, topic, {1: 9}, generation=99, member_id=joined["member_id"]) == {
        1: E.ILLEGAL_GENERATION}


# --- admin -----------------------------------------------------------------------------------------------

async def test_list_describe_delete(conn, topic):
    live, empty = unique_name("live"), unique_name("empty")
    joined = await stable_member(conn, live, topic)
    await commit(conn, empty, topic, {0: 1})

    listed = await conn.request(ApiKey.LIST_GROUPS, {"states_filter": ["Stable"]}, version=4)
    states = {g["group_id"]: g["group_state"] for g in listed["groups"]}
    assert states.get(live) == "Stable" and empty not in states
    every = await conn.request(ApiKey.LIST_GROUPS, {}, version=0)
    assert {live, empty} <= {g["group_id"] for g in every["groups"]}

    described = await conn.request(ApiKey.DESCRIBE_GROUPS, {"groups": [live, "nobody"],
                                                           "include_authorized_operations": True}, version=5)
    group, nobody = described["groups"]
    assert (group["group_state"], group["protocol_type"], group["protocol_data"]) == ("Stable", "consumer", "range")
    member = group["members"][0]
    assert (member["member_id"], member["client_id"], member["client_host"]) == (
        joined["member_id"], "wire-test", "/127.0.0.1")
    assert decode_struct("ConsumerProtocolSubscription", member["member_metadata"])[1]["topics"] == [topic]
    assert group["authorized_operations"] > 0
    assert (nobody["error_code"], nobody["group_state"]) == (E.NONE, "Dead")

    deleted = await conn.request(ApiKey.DELETE_GROUPS, {"groups_names": [live, empty, "nobody"]}, version=2)
    assert [(r["group_id"], r["error_code"]) for r in deleted["results"]] == [
        (live, E.NON_EMPTY_GROUP), (empty, E.NONE), ("nobody", E.GROUP_ID_NOT_FOUND)]
    fetched = await conn.request(ApiKey.OFFSET_FETCH, {"group_id": empty, "topics": None}, version=7)
    assert fetched["topics"] == []


async def test_offset_delete(broker, conn, topic):
    group = unique_name("odel")
    other = unique_name("other-topic")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(other, num_partitions=1, replication_factor=1)])[other].result(timeout=30)
    joined = await stable_member(conn, group, topic)
    await commit(conn, group, topic, {0: 1}, generation=joined["generation_id"], member_id=joined["member_id"])
    await commit(conn, group, other, {0: 2}, generation=joined["generation_id"], member_id=joined["member_id"])
    answer = await conn.request(ApiKey.OFFSET_DELETE, {"group_id": group, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0}]},
        {"name": other, "partitions": [{"partition_index": 0}]},
        {"name": "no-such-topic", "partitions": [{"partition_index": 0}]}]}, version=0)
    assert answer["error_code"] == E.NONE
    assert {(t["name"], p["error_code"]) for t in answer["topics"] for p in t["partitions"]} == {
        (topic, E.GROUP_SUBSCRIBED_TO_TOPIC), (other, E.NONE), ("no-such-topic", E.UNKNOWN_TOPIC_OR_PARTITION)}
    missing = await conn.request(ApiKey.OFFSET_DELETE, {"group_id": unique_name("none"), "topics": []}, version=0)
    assert missing["error_code"] == E.GROUP_ID_NOT_FOUND


def test_offsets_topic_compression_codec_compresses_the_coordinators_batches(tmp_path):
    """offsets.topic.compression.codec 4 (zstd): the coordinator's batches in __consumer_offsets are zstd; the
    commit survives a restart (the coordinator reads its compressed batches back) and kcat decodes them."""
    import shutil
    import struct
    import subprocess

    from confluent_kafka import Consumer, TopicPartition
    from harness import BrokerProcess, create_topics

    with BrokerProcess(tmp_path / "data", extra_config={"offsets.topic.compression.codec": 4,
                                                        "offsets.topic.num.partitions": 1}) as broker:
        create_topics({"bootstrap.servers": broker.bootstrap}, "zstd-offsets")

        def committed_offset() -> int:
            consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "zstd-group"})
            try:
                return consumer.committed([TopicPartition("zstd-offsets", 0)], timeout=30)[0].offset
            finally:
                consumer.close()

        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "zstd-group"})
        try:
            consumer.commit(offsets=[TopicPartition("zstd-offsets", 0, 5)], asynchronous=False)
        finally:
            consumer.close()
        broker.stop()
        codecs = []
        for segment in sorted((tmp_path / "data" / "logs" / "__consumer_offsets-0").glob("*.log")):
            data, position = segment.read_bytes(), 0
            while position + 61 <= len(data):
                length = struct.unpack_from(">i", data, position + 8)[0]
                codecs.append(struct.unpack_from(">h", data, position + 21)[0] & 0x07)
                position += 12 + length
        assert codecs and set(codecs) == {4}, codecs
        broker.start()
        assert committed_offset() == 5
        kcat = shutil.which("kcat")
        assert kcat is not None
        read = subprocess.run([kcat, "-b", broker.bootstrap, "-C", "-t", "__consumer_offsets", "-o", "beginning",
                               "-e", "-q", "-f", "%k|%s\n"], capture_output=True, timeout=60)
        assert b"zstd-group" in read.stdout and b"zstd-offsets" in read.stdout, read
