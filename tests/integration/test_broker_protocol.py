"""The broker against hand-made and hostile requests: Kafka's wire rules, and bad input never takes it down."""

from __future__ import annotations

import os
import socket
import struct

import pytest
from harness import recv_exactly, wait_until

from broker.protocol.api import ApiKey, decode_response, encode_request
from broker.protocol.records import Record, build_batch

pytestmark = pytest.mark.integration


class Wire:
    """A raw TCP connection speaking frames."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.correlation = 0

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def send(self, api_key: int, version: int, body: dict) -> int:
        self.correlation += 1
        self.sock.sendall(encode_request(api_key, version, self.correlation, "wire-test", body))
        return self.correlation

    def recv_frame(self) -> bytes:
        header = recv_exactly(self.sock, 4)
        if len(header) < 4:
            raise ConnectionError("closed")
        (size,) = struct.unpack(">i", header)
        return recv_exactly(self.sock, size)

    def recv(self, api_key: int, version: int) -> tuple[int, dict]:
        return decode_response(api_key, version, self.recv_frame())

    def call(self, api_key: int, version: int, body: dict) -> dict:
        sent = self.send(api_key, version, body)
        correlation, response = self.recv(api_key, version)
        assert correlation == sent
        return response

    def is_closed(self) -> bool:
        self.sock.settimeout(10)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


def create_topic(wire: Wire, name: str, partitions: int = 1, configs: dict | None = None) -> None:
    answer = wire.call(ApiKey.CREATE_TOPICS, 4, {"topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}], "timeout_ms": 10000})
    assert answer["topics"][0]["error_code"] == 0, answer


def produce(wire: Wire, topic: str, records: bytes, *, acks: int = 1, version: int = 7) -> dict | None:
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}
    if acks == 0:
        wire.send(ApiKey.PRODUCE, version, body)
        return None
    return wire.call(ApiKey.PRODUCE, version, body)["responses"][0]["partition_responses"][0]


def log_end(wire: Wire, topic: str) -> int:
    answer = wire.call(ApiKey.LIST_OFFSETS, 1, {"replica_id": -1, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    return answer["topics"][0]["partitions"][0]["offset"]


def batch(values: list[bytes], **kwargs) -> bytes:
    return build_batch([Record(offset=i, timestamp=1_700_000_000_000 + i, key=None, value=v, headers=[])
                        for i, v in enumerate(values)], **kwargs)


@pytest.fixture
def wire(broker):
    conn = Wire(broker.port)
    yield conn
    conn.close()


def still_serving(port: int) -> bool:
    other = Wire(port)
    try:
        return other.call(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
    finally:
        other.close()


def test_api_versions_unknown_version_gets_v0_error_reply(wire):
    wire.correlation += 1
    wire.send_raw(struct.pack(">hhih", ApiKey.API_VERSIONS, 99, wire.correlation, 4) + b"test" + os.urandom(7))
    correlation, body = decode_response(ApiKey.API_VERSIONS, 0, wire.recv_frame())
    assert correlation == wire.correlation
    assert body["error_code"] == 35
    assert [(k["api_key"], k["min_version"], k["max_version"]) for k in body["api_keys"]] == [(18, 0, 3)]


def test_api_versions_advertises_group_apis_from_zero(wire):
    versions = {k["api_key"]: (k["min_version"], k["max_version"])
                for k in wire.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                             "client_software_version": "1"})["api_keys"]}
    for key in (ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT,
                ApiKey.LEAVE_GROUP, ApiKey.INIT_PRODUCER_ID):
        assert versions[key][0] == 0
    assert versions[ApiKey.PRODUCE] == (3, 9)
    assert versions[ApiKey.FETCH] == (0, 12)
    assert versions[ApiKey.LIST_OFFSETS][0] == 0


def test_unknown_api_key_closes_only_that_connection(broker, wire):
    wire.send_raw(struct.pack(">hhih", 999, 0, 1, 0))
    assert wire.is_closed()
    assert still_serving(broker.port)


def test_unadvertised_version_closes_connection(broker, wire):
    wire.send_raw(struct.pack(">hhih", ApiKey.METADATA, 42, 1, 0))
    assert wire.is_closed()
    assert still_serving(broker.port)


@pytest.mark.parametrize(("version", "asked", "answered_name"), [
    (10, {"name": None, "topic_id": bytes(16)}, ""),
    (11, {"name": "by-name-and-id", "topic_id": b"\x01" * 16}, "by-name-and-id")])
def test_metadata_before_v12_refuses_a_topic_asked_for_by_id(wire, version, asked, answered_name):
    """Kafka: topic ids in a Metadata request only from v12; before, INVALID_REQUEST for each topic asked for."""
    answer = wire.call(ApiKey.METADATA, version, {"topics": [asked, {"name": "by-name", "topic_id": bytes(16)}]})
    assert [(t["name"], t["error_code"]) for t in answer["topics"]] == [(answered_name, 42), ("by-name", 42)]


def test_an_answer_that_cannot_carry_a_string_closes_the_connection_without_a_traceback(broker, wire):
    """A group id of 32767 bytes of invalid UTF-8 decodes as 32767 U+FFFD, three bytes each: no int16-length
    string can carry it back. Kafka cannot serialize that answer either; the connection is closed, and that is
    no crash of the broker's."""
    wire.send_raw(struct.pack(">hhih", ApiKey.DESCRIBE_GROUPS, 0, 1, 1) + b"t"
                  + struct.pack(">ih", 1, 0x7FFF) + b"\xff" * 0x7FFF)
    assert wire.is_closed()
    assert still_serving(broker.port)
    assert "cannot carry a string" in broker.log_text()
    assert "Traceback" not in broker.log_text()


def test_a_transactional_id_too_long_for_the_transaction_log_is_answered(broker, wire):
    """32767 bytes of invalid UTF-8 decode as three times as many: more than the transaction log's key can hold.
    Kafka fails writing that key and answers UNKNOWN_SERVER_ERROR; the connection stays up."""
    wire.correlation += 1
    wire.send_raw(struct.pack(">hhih", ApiKey.INIT_PRODUCER_ID, 1, wire.correlation, 1) + b"t"
                  + struct.pack(">h", 0x7FFF) + b"\xff" * 0x7FFF + struct.pack(">i", 60000))
    correlation, answer = wire.recv(ApiKey.INIT_PRODUCER_ID, 1)
    assert (correlation, answer["error_code"], answer["producer_id"]) == (wire.correlation, -1, -1)
    assert wire.call(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
    assert "Traceback" not in broker.log_text()


def test_oversized_frame_closes_connection(broker, wire):
    wire.sock.sendall(struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 16)
    assert wire.is_closed()
    assert still_serving(broker.port)


@pytest.mark.parametrize("seed", range(5))
def test_garbage_frames_never_take_the_broker_down(broker, seed):
    rnd = __import__("random").Random(seed)
    for _ in range(20):
        conn = Wire(broker.port)
        payload = struct.pack(">hhi", rnd.choice([0, 1, 3, 8, 11, 18]), rnd.randint(0, 12), 7) + rnd.randbytes(
            rnd.randint(0, 300))
        conn.send_raw(payload)
        try:
            conn.sock.settimeout(5)
            conn.sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            pass
        conn.close()
    assert still_serving(broker.port)


def test_truncated_frame_then_disconnect(broker):
    conn = Wire(broker.port)
    conn.sock.sendall(struct.pack(">i", 100) + b"\x00\x03")
    conn.close()
    assert still_serving(broker.port)


def test_responses_come_back_in_request_order(wire):
    sent = [wire.send(ApiKey.METADATA, 1, {"topics": []}) if i % 2 else wire.send(ApiKey.API_VERSIONS, 1, {})
            for i in range(20)]
    got = [wire.recv(ApiKey.METADATA if i % 2 else ApiKey.API_VERSIONS, 1)[0] for i in range(20)]
    assert got == sent


def test_metadata_controller_is_a_listed_broker_and_offsets_topic_is_internal(wire):
    answer = wire.call(ApiKey.METADATA, 12, {"topics": None})
    assert answer["controller_id"] in [b["node_id"] for b in answer["brokers"]]
    offsets = [t for t in answer["topics"] if t["name"] == "__consumer_offsets"]
    assert offsets and offsets[0]["is_internal"] and len(offsets[0]["partitions"]) == 50


def test_list_offsets_v0_returns_one_element_array(wire):
    create_topic(wire, "lo-v0")
    produce(wire, "lo-v0", batch([b"a", b"b", b"c"]))
    answer = wire.call(ApiKey.LIST_OFFSETS, 0, {"replica_id": -1, "topics": [{"name": "lo-v0", "partitions": [
        {"partition_index": 0, "timestamp": -1, "max_num_offsets": 1}]}]})
    assert answer["topics"][0]["partitions"][0]["old_style_offsets"] == [3]


def test_acks_0_gets_no_response(wire):
    create_topic(wire, "acks0")
    produce(wire, "acks0", batch([b"fire-and-forget"]), acks=0)
    # The next response on the connection answers the next request, not the produce.
    assert log_end(wire, "acks0") == 1


def test_bad_crc_is_refused_and_nothing_appended(wire):
    create_topic(wire, "badcrc")
    data = bytearray(batch([b"payload"]))
    data[-1] ^= 0xFF
    answer = produce(wire, "badcrc", bytes(data))
    assert answer["error_code"] == 2  # CORRUPT_MESSAGE
    assert log_end(wire, "badcrc") == 0


def test_batch_over_max_message_bytes_is_refused(wire):
    create_topic(wire, "toolarge", configs={"max.message.bytes": "1000"})
    answer = produce(wire, "toolarge", batch([os.urandom(2000)]))
    assert answer["error_code"] == 10  # MESSAGE_TOO_LARGE
    assert log_end(wire, "toolarge") == 0
    assert produce(wire, "toolarge", batch([b"small"]))["error_code"] == 0


def test_zstd_needs_produce_v7(wire):
    create_topic(wire, "zstd-old")
    answer = produce(wire, "zstd-old", batch([b"z" * 100], compression=4), version=6)
    assert answer["error_code"] == 76  # UNSUPPORTED_COMPRESSION_TYPE


def test_idempotent_duplicates_and_sequence_gaps(wire):
    create_topic(wire, "idem")
    pid = wire.call(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
    assert pid["error_code"] == 0
    ident = {"producer_id": pid["producer_id"], "producer_epoch": pid["producer_epoch"]}
    first = produce(wire, "idem", batch([b"a", b"b"], base_sequence=0, **ident))
    assert first["error_code"] == 0 and first["base_offset"] == 0
    duplicate = produce(wire, "idem", batch([b"a", b"b"], base_sequence=0, **ident))
    assert duplicate["error_code"] == 0 and duplicate["base_offset"] == 0
    assert log_end(wire, "idem") == 2
    gap = produce(wire, "idem", batch([b"c"], base_sequence=5, **ident))
    assert gap["error_code"] == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    nxt = produce(wire, "idem", batch([b"c"], base_sequence=2, **ident))
    assert nxt["error_code"] == 0 and nxt["base_offset"] == 2


def test_an_idempotent_producer_id_is_new_each_time_and_naming_another_fences_nothing(wire):
    """Kafka's coordinator gives an idempotent InitProducerId a new producer id and epoch 0 whatever id and epoch
    it names (TransactionCoordinator.handleInitProducerId); handing out the named id's next epoch would let any
    client fence another client's producer."""
    create_topic(wire, "idem-fence")
    first = wire.call(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                                   "producer_id": -1, "producer_epoch": -1})
    victim = {"producer_id": first["producer_id"], "producer_epoch": first["producer_epoch"]}
    assert produce(wire, "idem-fence", batch([b"a"], base_sequence=0, **victim))["error_code"] == 0
    named = wire.call(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                                   **victim})
    assert named["error_code"] == 0
    assert named["producer_id"] != victim["producer_id"] and named["producer_epoch"] == 0
    # the producer whose id was named carries on with its own epoch and next sequence
    assert produce(wire, "idem-fence", batch([b"b"], base_sequence=1, **victim))["error_code"] == 0
    assert log_end(wire, "idem-fence") == 2


def test_fetch_long_poll_returns_when_data_arrives(broker, wire):
    create_topic(wire, "longpoll")
    fetch_body = {"replica_id": -1, "max_wait_ms": 10000, "min_bytes": 1, "max_bytes": 1 << 20,
                  "isolation_level": 1, "topics": [{"topic": "longpoll", "partitions": [
                      {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    sent = wire.send(ApiKey.FETCH, 11, fetch_body)
    other = Wire(broker.port)
    produce(other, "longpoll", batch([b"wake up"]))
    other.close()
    wire.sock.settimeout(5)  # well under max_wait_ms: the append must wake the fetch
    correlation, answer = wire.recv(ApiKey.FETCH, 11)
    assert correlation == sent
    part = answer["responses"][0]["partitions"][0]
    assert part["high_watermark"] == 1 and part["last_stable_offset"] == 1 and part["records"]


def test_fetch_out_of_range_and_unknown_partition(wire):
    create_topic(wire, "ranges")
    answer = wire.call(ApiKey.FETCH, 11, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                          "topics": [{"topic": "ranges", "partitions": [
                                              {"partition": 0, "fetch_offset": 5, "partition_max_bytes": 1000},
                                              {"partition": 9, "fetch_offset": 0, "partition_max_bytes": 1000}]}]})
    codes = [p["error_code"] for p in answer["responses"][0]["partitions"]]
    assert codes == [1, 3]  # OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION: every partition answered


def test_topics_cli(broker, tmp_path):
    import subprocess

    from harness import BURROWPY

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([BURROWPY, "topics", *args, "--bootstrap", broker.bootstrap], capture_output=True,
                              text=True, timeout=60)

    created = cli("create", "cli-topic", "--partitions", "3", "--config", "retention.ms=3600000")
    assert created.returncode == 0, created.stderr
    assert "cli-topic" in cli("list").stdout.split()
    described = cli("describe", "cli-topic")
    assert "PartitionCount: 3" in described.stdout and "retention.ms=3600000" in described.stdout
    again = cli("create", "cli-topic")
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    assert cli("delete", "cli-topic").returncode == 0
    wait_until(lambda: "cli-topic" not in cli("list").stdout.split(), 10, message="topic deleted")


def test_internal_topics_refuse_client_writes_and_deletion_but_other_double_underscore_topics_work(wire):
    answer = produce(wire, "__consumer_offsets", batch([b"forged commit"]))
    assert answer["error_code"] == 17  # INVALID_TOPIC_EXCEPTION
    deleted = wire.call(ApiKey.DELETE_TOPICS, 4, {"topic_names": ["__consumer_offsets"], "timeout_ms": 5000})
    assert deleted["responses"][0]["error_code"] == 17
    # Only Kafka's internal topics are special, not every name starting with "__".
    create_topic(wire, "__app_events")
    assert produce(wire, "__app_events", batch([b"ordinary"]))["error_code"] == 0
    listed = wire.call(ApiKey.METADATA, 12, {"topics": [{"name": "__app_events"}]})
    assert listed["topics"][0]["is_internal"] is False


def test_metadata_follows_every_change_of_a_topic(wire):
    """Metadata answers reuse each topic's encoding while nothing about it changes; new partitions, a topic
    deleted and made again (a new id) and the other versions' fields all show at once."""
    name = "metadata-follows"
    everything = {"topics": None, "allow_auto_topic_creation": False,
                  "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}

    def described(version: int = 12) -> dict:
        return next(t for t in wire.call(ApiKey.METADATA, version, everything)["topics"] if t["name"] == name)

    create_topic(wire, name, 1)
    first = described()
    assert len(first["partitions"]) == 1 and described() == first  # the same answer from the kept encoding
    grown = wire.call(ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"name": name, "count": 3, "assignments": None}],
                                                    "timeout_ms": 30000, "validate_only": False})
    assert grown["results"][0]["error_code"] == 0
    assert [p["partition_index"] for p in described()["partitions"]] == [0, 1, 2]
    old_version = described(9)  # no topic id in v9: the decoder gives the all-zero default
    assert old_version["topic_id"] == bytes(16) != first["topic_id"]
    assert [p["partition_index"] for p in old_version["partitions"]] == [0, 1, 2]
    deleted = wire.call(ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": name, "topic_id": bytes(16)}],
                                                 "timeout_ms": 30000})
    assert deleted["responses"][0]["error_code"] == 0
    create_topic(wire, name, 2)
    again = described()
    assert again["topic_id"] != first["topic_id"] and len(again["partitions"]) == 2
    with_operations = {**everything, "include_topic_authorized_operations": True}
    asked = next(t for t in wire.call(ApiKey.METADATA, 12, with_operations)["topics"] if t["name"] == name)
    assert asked["topic_authorized_operations"] > 0 and again["topic_authorized_operations"] == -(2**31)


def test_describe_topic_partitions_pages_with_a_cursor_as_kafka_does(wire):
    """KIP-966: topics in name order from the cursor's, at most the limit of partitions an answer, the next
    cursor where the answer stopped (a topic's next partition, or the next topic's first when the limit ended
    with a topic); a cursor naming an unlisted topic or a negative partition makes the request invalid."""
    create_topic(wire, "pages-a", 3)
    create_topic(wire, "pages-b", 2)

    def page(names: list[str], limit: int, cursor: tuple[str, int] | None) -> dict:
        return wire.call(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
            "topics": [{"name": n} for n in names], "response_partition_limit": limit,
            "cursor": None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]}})

    def shown(answer: dict) -> list[tuple[str, int, int]]:
        return [(t["name"], t["error_code"], p["partition_index"]) for t in answer["topics"] for p in t["partitions"]]

    wanted = ["pages-b", "pages-a", "pages-none"]
    first = page(wanted, 2, None)
    assert shown(first) == [("pages-a", 0, 0), ("pages-a", 0, 1)]
    assert first["next_cursor"] == {"topic_name": "pages-a", "partition_index": 2}
    second = page(wanted, 1, ("pages-a", 2))
    assert shown(second) == [("pages-a", 0, 2)] and second["next_cursor"] == {"topic_name": "pages-b",
                                                                               "partition_index": 0}
    last = page(wanted, 10, ("pages-b", 0))
    assert shown(last) == [("pages-b", 0, 0), ("pages-b", 0, 1)] and last["next_cursor"] is None
    assert [(t["name"], t["error_code"]) for t in last["topics"]] == [("pages-b", 0), ("pages-none", 3)]
    a = page(["pages-a"], 10, None)["topics"][0]
    assert a["topic_id"] != bytes(16) and a["is_internal"] is False and a["topic_authorized_operations"] > 0
    assert all(p["leader_id"] == 1 and p["replica_nodes"] == [1] and p["isr_nodes"] == [1]
               and p["eligible_leader_replicas"] == [] for p in a["partitions"])

    for names, cursor in ((["pages-a"], ("pages-b", 0)), (["pages-a"], ("pages-a", -1))):
        refused = page(names, 10, cursor)
        assert [(t["name"], t["error_code"]) for t in refused["topics"]] == [("pages-a", 42)]  # INVALID_REQUEST
    # every topic: the unknown and the invalid are not asked for, so not answered
    everything = page([], 1000, ("pages-a", 1))
    names = [t["name"] for t in everything["topics"]]
    assert names[:2] == ["pages-a", "pages-b"] and names == sorted(names) and "__consumer_offsets" not in names
    assert [p["partition_index"] for p in everything["topics"][0]["partitions"]] == [1, 2]


def test_describe_producers_and_log_dirs_answer_every_partition_asked_for(wire):
    create_topic(wire, "producers-seen", 2)
    idempotent = batch([b"one", b"two"], producer_id=7, producer_epoch=3, base_sequence=0)
    assert produce(wire, "producers-seen", idempotent)["error_code"] == 0
    answer = wire.call(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
        {"name": "producers-seen", "partition_indexes": [0, 1, 9]},
        {"name": "producers-none", "partition_indexes": [0]}, {"name": "bad name!", "partition_indexes": [0]}]})
    seen, none, bad = answer["topics"]
    assert [(p["partition_index"], p["error_code"]) for p in seen["partitions"]] == [(0, 0), (1, 0), (9, 3)]
    [producer] = seen["partitions"][0]["active_producers"]
    assert (producer["producer_id"], producer["producer_epoch"], producer["last_sequence"],
            producer["current_txn_start_offset"]) == (7, 3, 1, -1)
    assert seen["partitions"][1]["active_producers"] == []
    assert none["partitions"][0]["error_code"] == 3 and bad["partitions"][0]["error_code"] == 17

    dirs = wire.call(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": [{"topic": "producers-seen", "partitions": [0, 1, 9]},
                                                             {"topic": "producers-none", "partitions": [0]}]})
    [log_dir] = dirs["results"]
    assert log_dir["error_code"] == 0 and log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
    [topic] = log_dir["topics"]
    sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
    assert topic["name"] == "producers-seen" and sizes[1] == 0 and sizes[0] == len(idempotent)
    every = wire.call(ApiKey.DESCRIBE_LOG_DIRS, 1, {"topics": None})["results"][0]["topics"]
    assert {"producers-seen", "__consumer_offsets"} <= {t["name"] for t in every}
