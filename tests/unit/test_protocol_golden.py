"""Known frames built by hand from the protocol spec, and a cross-check against kafka-python 3's codec."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import FetchRequest, OffsetCommitRequest
from kafka.protocol.metadata import ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import ProduceRequest
from protocol_strategies import body_strategy, with_defaults

from broker.protocol import messages
from broker.protocol.api import (
    ApiKey,
    DecodeError,
    EncodeError,
    FieldError,
    MissingFieldError,
    RequestHeader,
    UnknownApiKeyError,
    UnknownFieldError,
    UnsupportedVersionError,
    decode_request,
    decode_response,
    decode_struct,
    encode_element,
    encode_request,
    encode_response,
    encode_struct,
)


def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def string(s):
    return i16(len(s)) + s.encode()


def compact_string(s):
    return bytes([len(s) + 1]) + s.encode()


def framed(payload: bytes) -> bytes:
    return i32(len(payload)) + payload


# ----- requests ---------------------------------------------------------------------------------


def test_api_versions_v0_request_bytes():
    frame = framed(i16(18) + i16(0) + i32(7) + string("abc"))
    assert encode_request(ApiKey.API_VERSIONS, 0, 7, "abc", {}) == frame
    assert decode_request(frame[4:]) == (
        RequestHeader(18, 0, 7, "abc"),
        {"client_software_name": "", "client_software_version": ""},
    )


def test_api_versions_v3_request_uses_header_v2_with_a_classic_client_id():
    header = i16(18) + i16(3) + i32(1) + string("rdkafka") + b"\x00"
    body = compact_string("librdkafka") + compact_string("2.16.0") + b"\x00"
    frame = framed(header + body)
    request = {"client_software_name": "librdkafka", "client_software_version": "2.16.0"}
    assert encode_request(18, 3, 1, "rdkafka", request) == frame
    assert decode_request(frame[4:]) == (RequestHeader(18, 3, 1, "rdkafka"), request)


def test_null_client_id():
    frame = framed(i16(12) + i16(0) + i32(3) + i16(-1) + string("g") + i32(1) + string("m"))
    header, body = decode_request(frame[4:])
    assert header == RequestHeader(12, 0, 3, None)
    assert body == {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}
    assert encode_request(12, 0, 3, None, body) == frame


def test_metadata_v0_request_defaults_fields_of_later_versions():
    frame = framed(i16(3) + i16(0) + i32(1) + string("c") + i32(1) + string("t"))
    _, body = decode_request(frame[4:])
    assert body == {
        "topics": [{"topic_id": bytes(16), "name": "t"}],
        "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


def test_fetch_v12_request_tagged_cluster_id_and_unknown_tags():
    partition = i32(0) + i32(-1) + i64(5) + i32(-1) + i64(-1) + i32(1 << 20) + b"\x00"
    topic = compact_string("t") + bytes([2]) + partition + b"\x00"
    fixed = i32(-1) + i32(500) + i32(1) + i32(50 << 20) + i8(1) + i32(0) + i32(-1)
    untagged = fixed + bytes([2]) + topic + bytes([1]) + compact_string("")
    known_tag = b"\x00" + bytes([4]) + compact_string("abc")  # tag 0: cluster_id
    unknown_tag = b"\x07" + b"\x02" + b"\xaa\xbb"  # tag 7 is not in the schema: skipped
    frame = framed(
        i16(1) + i16(12) + i32(9) + string("c") + b"\x00" + untagged + b"\x02" + known_tag + unknown_tag
    )
    _, body = decode_request(frame[4:])
    assert body["cluster_id"] == "abc"
    assert body["topics"][0]["partitions"][0]["fetch_offset"] == 5
    assert body["rack_id"] == ""
    # Re-encoding writes only the known tag.
    expected = framed(i16(1) + i16(12) + i32(9) + string("c") + b"\x00" + untagged + b"\x01" + known_tag)
    assert encode_request(1, 12, 9, "c", body) == expected


def test_trailing_bytes_after_a_request_are_ignored_as_kafka_does():
    frame = encode_request(
        ApiKey.HEARTBEAT, 1, 4, "c", {"group_id": "g", "generation_id": 2, "member_id": "m"}
    )
    assert decode_request(frame[4:] + b"garbage") == decode_request(frame[4:])


def test_unsupported_api_versions_version_carries_the_parsed_header():
    # A v99 ApiVersions request: header v2 with a body the broker must not try to parse.
    frame = i16(18) + i16(99) + i32(42) + string("kafka-python") + b"\x00" + b"\xff\xfe"
    with pytest.raises(UnsupportedVersionError) as raised:
        decode_request(frame)
    assert raised.value.header == RequestHeader(18, 99, 42, "kafka-python")


def test_unknown_api_key_and_unsupported_versions():
    with pytest.raises(UnknownApiKeyError) as raised:
        decode_request(i16(57) + i16(0) + i32(1) + string("c"))  # UpdateFeatures: not served
    assert raised.value.header.api_key == 57
    with pytest.raises(UnsupportedVersionError):
        decode_request(i16(ApiKey.PRODUCE) + i16(10) + i32(1) + string("c"))
    with pytest.raises(UnsupportedVersionError):
        decode_request(i16(ApiKey.FETCH) + i16(-1) + i32(1) + string("c"))


def test_decode_errors_carry_the_header_when_it_was_read():
    frame = encode_request(ApiKey.METADATA, 1, 8, "c", {"topics": [{"name": "x"}]})
    with pytest.raises(DecodeError) as raised:
        decode_request(frame[4:-1])
    assert raised.value.header == RequestHeader(3, 1, 8, "c")
    with pytest.raises(DecodeError) as raised:
        decode_request(frame[4:9])
    assert raised.value.header is None


# ----- responses --------------------------------------------------------------------------------


def test_unsupported_version_answer_is_the_exact_v0_body():
    body = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}]}
    expected = framed(i32(42) + i16(35) + i32(1) + i16(18) + i16(0) + i16(3))
    assert encode_response(ApiKey.API_VERSIONS, 0, 42, body) == expected


def test_api_versions_v3_response_header_has_no_tagged_fields():
    body = {
        "error_code": 0,
        "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}],
        "throttle_time_ms": 0,
    }
    api_key_entry = i16(18) + i16(0) + i16(3) + b"\x00"
    expected = framed(i32(5) + i16(0) + bytes([2]) + api_key_entry + i32(0) + b"\x00")
    assert encode_response(18, 3, 5, body) == expected


def test_api_versions_error_35_response_is_decoded_as_v0_whatever_version_was_asked():
    frame = encode_response(
        18, 0, 42, {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]}
    )
    correlation_id, body = decode_response(18, 3, frame[4:])
    assert correlation_id == 42
    assert body["error_code"] == 35
    assert body["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 2}]


def test_metadata_v1_response_bytes():
    broker = i32(1) + string("localhost") + i32(9092) + i16(-1)  # rack: null
    partition = i16(0) + i32(0) + i32(1) + i32(1) + i32(1) + i32(1) + i32(1)
    topic = i16(0) + string("orders") + i8(0) + i32(1) + partition
    expected = framed(i32(11) + i32(1) + broker + i32(1) + i32(1) + topic)
    body = {
        "brokers": [{"node_id": 1, "host": "localhost", "port": 9092, "rack": None}],
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": "orders",
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": 0,
                        "leader_id": 1,
                        "replica_nodes": [1],
                        "isr_nodes": [1],
                    }
                ],
            }
        ],
    }
    assert encode_response(ApiKey.METADATA, 1, 11, body) == expected
    _, decoded = decode_response(ApiKey.METADATA, 1, expected[4:])
    assert decoded["topics"][0]["partitions"][0]["leader_epoch"] == -1  # v7+ field, default
    assert decoded["cluster_id"] is None and decoded["throttle_time_ms"] == 0


def test_flexible_response_header_has_a_tagged_section():
    frame = encode_response(ApiKey.METADATA, 9, 77, {"throttle_time_ms": 0, "brokers": [], "topics": []})
    assert frame[4:9] == i32(77) + b"\x00"
    # throttle, brokers [], cluster_id null, controller -1, topics [], cluster ops, tags
    assert frame[9:] == i32(0) + b"\x01" + b"\x00" + i32(-1) + b"\x01" + i32(-(2**31)) + b"\x00"


def test_request_records_encode_from_any_bytes_like_and_decode_to_a_view_of_the_frame():
    records = bytearray(b"\x01\x02\x03")
    body = {"acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": memoryview(records)}]}]}
    frame = bytearray(encode_request(ApiKey.PRODUCE, 9, 1, "p", body))
    _, decoded = decode_request(frame[4:])
    value = decoded["topic_data"][0]["partition_data"][0]["records"]
    assert type(value) is memoryview and value == b"\x01\x02\x03"
    # no copy: the records are the frame's own bytes
    received = memoryview(frame)[4:]
    _, decoded = decode_request(received)
    view = decoded["topic_data"][0]["partition_data"][0]["records"]
    frame[frame.index(b"\x01\x02\x03")] = 9
    assert bytes(view) == b"\x09\x02\x03"
    assert decode_request(memoryview(bytearray(frame))[4:]) == decode_request(bytes(frame[4:]))


# the fields of a Fetch v12 answer without a default in Kafka's spec, but for the records
FETCH_TOP = {"throttle_time_ms": 0, "error_code": 0}
FETCH_PARTITION = {"partition_index": 0, "error_code": 0, "high_watermark": 10, "aborted_transactions": None}


def test_response_records_decode_to_bytes():
    frame = encode_response(ApiKey.FETCH, 12, 1, {**FETCH_TOP, "responses": [{"topic": "t", "partitions": [
        {**FETCH_PARTITION, "records": bytearray(b"xyz")}]}]})
    decoded = decode_response(ApiKey.FETCH, 12, frame[4:])[1]
    value = decoded["responses"][0]["partitions"][0]["records"]
    assert type(value) is bytes and value == b"xyz"


def test_fetch_v12_response_leaves_default_tagged_fields_out():
    partition = {**FETCH_PARTITION, "records": b"xyz"}
    plain = encode_response(ApiKey.FETCH, 12, 1, {**FETCH_TOP, "responses": [{"topic": "t", "partitions": [partition]}]})
    leader = dict(partition, current_leader={"leader_id": 3, "leader_epoch": 7})
    tagged = encode_response(ApiKey.FETCH, 12, 1, {**FETCH_TOP, "responses": [{"topic": "t", "partitions": [leader]}]})
    # tag 1 (current_leader): size 9 = int32 + int32 + empty tag section
    assert len(tagged) == len(plain) + 1 + 1 + 9
    assert b"\x01\x01\x09" + i32(3) + i32(7) + b"\x00" in tagged
    explicit_default = dict(partition, current_leader={"leader_id": -1, "leader_epoch": -1})
    assert (
        encode_response(
            ApiKey.FETCH, 12, 1, {**FETCH_TOP, "responses": [{"topic": "t", "partitions": [explicit_default]}]}
        )
        == plain
    )


# ----- encode errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        (ApiKey.HEARTBEAT, 0, {"group_id": None}),  # null in a non-nullable string
        (ApiKey.HEARTBEAT, 0, {"generation_id": 2**31}),  # int32 out of range
        (ApiKey.METADATA, 10, {"topics": [{"topic_id": b"short", "name": "t"}]}),  # uuid of 5 bytes
        (ApiKey.METADATA, 0, {"topics": None}),  # topics is nullable only from v1
        (ApiKey.PRODUCE, 3, {"topic_data": [{"name": "t", "partition_data": [{"index": "zero"}]}]}),
        (ApiKey.PRODUCE, 3, {"topic_data": {"name": "t"}}),
    ],
)
def test_bodies_that_do_not_fit_the_schema_raise_encode_error(api_key, version, body):
    with pytest.raises(EncodeError):
        encode_request(api_key, version, 1, "c", body)


def test_a_misspelled_field_is_refused_not_sent_as_its_default():
    # without the check this frame went out with error_code 0: the error became a success
    with pytest.raises(UnknownFieldError, match=r"HeartbeatResponse v1: unknown field 'errorcode'") as caught:
        encode_response(ApiKey.HEARTBEAT, 1, 7, {"errorcode": 25})
    assert (caught.value.message, caught.value.version, caught.value.unknown) == ("HeartbeatResponse", 1, ["errorcode"])
    assert isinstance(caught.value, EncodeError)
    # as many keys as the version has fields, one of them misspelled
    with pytest.raises(UnknownFieldError, match="'errorcode'"):
        encode_response(ApiKey.HEARTBEAT, 1, 7, {"errorcode": 25, "throttle_time_ms": 0})


def test_a_misplaced_field_is_refused_at_any_depth_with_its_path():
    partition = {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 0, "replica_nodes": [1],
                 "isr_nodes": [1], "offline_replicas": [], "throttle_time_ms": 0}
    topic = {"error_code": 0, "name": "t", "topic_id": bytes(16), "partitions": [partition]}
    body = {"throttle_time_ms": 0, "brokers": [], "topics": [topic]}
    with pytest.raises(UnknownFieldError, match=r"MetadataResponse v12: .*'throttle_time_ms' in "
                                                r"MetadataResponse\.topics\.partitions"):
        encode_response(ApiKey.METADATA, 12, 1, body)
    with pytest.raises(UnknownFieldError, match=r"MetadataResponse v12: .*'throttle_time_ms'"):
        encode_element(ApiKey.METADATA, 12, "topics", topic)
    # a misspelled tagged field of a flexible version
    with pytest.raises(UnknownFieldError, match="'current_leaders' in FetchResponse.responses.partitions"):
        encode_response(ApiKey.FETCH, 12, 1, {**FETCH_TOP, "responses": [{"topic": "t", "partitions": [
            {"partition_index": 0, "current_leaders": {"leader_id": 3, "leader_epoch": 7}}]}]})


def test_requests_and_data_structs_refuse_unknown_fields_too():
    with pytest.raises(UnknownFieldError, match="HeartbeatRequest v0: unknown fields 'generation', 'groupid'"):
        encode_request(ApiKey.HEARTBEAT, 0, 1, "c", {"groupid": "g", "generation": 1, "member_id": "m"})
    with pytest.raises(UnknownFieldError, match="OffsetCommitValue v3: unknown field 'offest'"):
        encode_struct("OffsetCommitValue", 3, {"offest": 100})


def test_a_forgotten_field_without_a_spec_default_is_refused_not_sent_as_zero():
    # without the check this frame went out with error_code 0 (NONE): a forgotten error became a success
    with pytest.raises(MissingFieldError, match=r"HeartbeatResponse v1: missing field 'error_code' in "
                                                r"HeartbeatResponse \(required at this version") as caught:
        encode_response(ApiKey.HEARTBEAT, 1, 7, {"throttle_time_ms": 0})
    assert (caught.value.message, caught.value.version, caught.value.missing) == ("HeartbeatResponse", 1, ["error_code"])
    assert isinstance(caught.value, FieldError) and isinstance(caught.value, EncodeError)
    with pytest.raises(MissingFieldError, match="missing fields 'throttle_time_ms', 'error_code'"):
        encode_response(ApiKey.HEARTBEAT, 1, 7, {})
    # at any depth, with the path; in data structs (the records the broker writes) too
    with pytest.raises(MissingFieldError, match=r"missing field 'error_code' in ProduceResponse\.responses\."
                                                r"partition_responses"):
        encode_response(ApiKey.PRODUCE, 9, 1, {"throttle_time_ms": 0, "responses": [
            {"name": "t", "partition_responses": [{"index": 0, "base_offset": 5, "record_errors": []}]}]})
    with pytest.raises(MissingFieldError, match="OffsetCommitValue v3: missing field 'metadata'"):
        encode_struct("OffsetCommitValue", 3, {"offset": 100, "leader_epoch": -1, "commit_timestamp": 1})


def test_a_request_takes_the_default_for_a_missing_field():
    frame = encode_request(ApiKey.HEARTBEAT, 0, 1, "c", {"group_id": "g", "generation_id": 1})
    assert decode_request(frame[4:])[1] == {"group_id": "g", "generation_id": 1, "member_id": "",
                                           "group_instance_id": None}


def test_only_fields_of_the_encoded_version_without_a_spec_default_are_required():
    # throttle_time_ms exists from v1: v0 needs only error_code
    assert encode_response(ApiKey.HEARTBEAT, 0, 7, {"error_code": 25})[8:] == struct.pack(">h", 25)
    # log_append_time_ms and log_start_offset have Kafka's default -1, error_message null
    partition = {"index": 0, "error_code": 0, "base_offset": 5, "record_errors": []}
    frame = encode_response(ApiKey.PRODUCE, 9, 1, {"throttle_time_ms": 0, "responses": [
        {"name": "t", "partition_responses": [partition]}]})
    decoded = decode_response(ApiKey.PRODUCE, 9, frame[4:])[1]["responses"][0]["partition_responses"][0]
    assert (decoded["log_append_time_ms"], decoded["log_start_offset"], decoded["error_message"]) == (-1, -1, None)


def test_fields_of_other_versions_are_left_out_of_versions_without_them():
    # one body serves every version: throttle_time_ms exists from v1, leader_epoch of a partition from v7
    body = {"throttle_time_ms": 5, "error_code": 25}
    assert encode_response(ApiKey.HEARTBEAT, 0, 7, body) == framed(i32(7) + i16(25))
    assert encode_response(ApiKey.HEARTBEAT, 1, 7, body) == framed(i32(7) + i32(5) + i16(25))
    partition = {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 4, "replica_nodes": [1],
                 "isr_nodes": [1], "offline_replicas": []}
    body = {"brokers": [], "topics": [{"error_code": 0, "name": "t", "topic_id": bytes(16), "partitions": [partition]}]}
    decoded = decode_response(ApiKey.METADATA, 1, encode_response(ApiKey.METADATA, 1, 1, body)[4:])[1]
    assert decoded["topics"][0]["partitions"][0]["leader_epoch"] == -1


# ----- data structs -----------------------------------------------------------------------------


def test_offset_commit_records_bytes():
    key = encode_struct("OffsetCommitKey", 1, {"group": "g", "topic": "t", "partition": 3})
    assert key == i16(1) + string("g") + string("t") + i32(3)
    value = encode_struct(
        "OffsetCommitValue", 3, {"offset": 100, "leader_epoch": 2, "metadata": "", "commit_timestamp": 1700}
    )
    assert value == i16(3) + i64(100) + i32(2) + string("") + i64(1700)
    assert decode_struct("OffsetCommitValue", value + b"trailing") == (
        3,
        {"offset": 100, "leader_epoch": 2, "metadata": "", "commit_timestamp": 1700, "expire_timestamp": -1},
    )


def test_group_metadata_key_and_value_v1_bytes():
    assert encode_struct("GroupMetadataKey", 2, {"group": "g"}) == i16(2) + string("g")
    member = {
        "member_id": "m",
        "client_id": "c",
        "client_host": "/h",
        "rebalance_timeout": 300,
        "session_timeout": 10,
        "subscription": b"s",
        "assignment": b"",
    }
    value = encode_struct(
        "GroupMetadataValue",
        1,
        {
            "protocol_type": "consumer",
            "generation": 4,
            "protocol": "range",
            "leader": "m",
            "members": [member],
        },
    )
    member_bytes = string("m") + string("c") + string("/h") + i32(300) + i32(10) + i32(1) + b"s" + i32(0)
    header = string("consumer") + i32(4) + string("range") + string("m")
    assert value == i16(1) + header + i32(1) + member_bytes


def test_consumer_protocol_assignment_v0_bytes():
    body = {"assigned_partitions": [{"topic": "t", "partitions": [0, 2]}], "user_data": None}
    encoded = encode_struct("ConsumerProtocolAssignment", 0, body)
    assert encoded == i16(0) + i32(1) + string("t") + i32(2) + i32(0) + i32(2) + i32(-1)
    assert decode_struct("ConsumerProtocolAssignment", encoded) == (0, body)


def test_data_struct_errors():
    with pytest.raises(UnsupportedVersionError):
        decode_struct("OffsetCommitValue", i16(5) + i64(1))
    with pytest.raises(UnsupportedVersionError):
        encode_struct("GroupMetadataKey", 0, {"group": "g"})
    with pytest.raises(DecodeError):
        decode_struct("OffsetCommitValue", b"\x00")
    with pytest.raises(DecodeError):
        decode_struct("OffsetCommitValue", i16(3) + i64(1))
    with pytest.raises(ValueError, match="unknown data struct"):
        decode_struct("NoSuchStruct", i16(0))


# ----- cross-check with kafka-python 3 ----------------------------------------------------------


def _kafka_python_classes() -> dict[tuple[int, str], type]:
    found = {}
    pending = [ApiMessage]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", None) is None and getattr(cls, "_json", None):
            found[(cls.API_KEY, cls.type)] = cls
    return found


KAFKA_PYTHON = _kafka_python_classes()

CROSS_CHECKED = [
    (ApiKey.API_VERSIONS, 0),
    (ApiKey.API_VERSIONS, 3),
    (ApiKey.METADATA, 1),
    (ApiKey.METADATA, 12),
    (ApiKey.PRODUCE, 3),
    (ApiKey.PRODUCE, 9),
    (ApiKey.FETCH, 4),
    (ApiKey.FETCH, 11),
    (ApiKey.FETCH, 12),
    (ApiKey.LIST_OFFSETS, 0),
    (ApiKey.LIST_OFFSETS, 7),
    (ApiKey.FIND_COORDINATOR, 4),
    (ApiKey.JOIN_GROUP, 7),
    (ApiKey.SYNC_GROUP, 5),
    (ApiKey.OFFSET_COMMIT, 8),
    (ApiKey.OFFSET_FETCH, 8),
    (ApiKey.CREATE_TOPICS, 7),
    (ApiKey.DESCRIBE_CONFIGS, 4),
    (ApiKey.DESCRIBE_CLUSTER, 1),
]


@pytest.mark.parametrize("kind", ["request", "response"])
@pytest.mark.parametrize(("api_key", "version"), CROSS_CHECKED)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_python_reads_and_rewrites_our_frames_byte_for_byte(api_key, version, kind, data):
    schema = (messages.REQUESTS if kind == "request" else messages.RESPONSES)[api_key]
    body = data.draw(body_strategy(schema, version), label="body")
    if kind == "request":
        frame = encode_request(api_key, version, 5, "cross", body)[4:]
    else:
        if api_key == ApiKey.API_VERSIONS:
            body["error_code"] = 0  # kafka-python reads any ApiVersions error body as v0
        frame = encode_response(api_key, version, 5, body)[4:]
    theirs = KAFKA_PYTHON[(api_key, kind)].decode(frame, version=version, header=True)
    assert theirs.encode(header=True) == frame


def _kafka_python_frame(message, version: int) -> bytes:
    message.with_header(correlation_id=21, client_id="kafka-python")
    return message.encode(version=version, header=True)


def test_we_read_kafka_python_requests():
    produce = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t",
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=1, records=b"batch")
                ],
            )
        ],
    )
    header, body = decode_request(_kafka_python_frame(produce, 9))
    assert header == RequestHeader(ApiKey.PRODUCE, 9, 21, "kafka-python")
    assert body == {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 1, "records": b"batch"}]}],
    }

    metadata = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    _, body = decode_request(_kafka_python_frame(metadata, 12))
    assert body["topics"] is None and body["allow_auto_topic_creation"] is False

    fetch = FetchRequest(
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=1,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic="t",
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=42,
                        log_start_offset=-1,
                        partition_max_bytes=4096,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    _, body = decode_request(_kafka_python_frame(fetch, 11))
    assert body["topics"][0]["partitions"][0]["fetch_offset"] == 42 and body["isolation_level"] == 1

    commit = OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=3,
        member_id="m",
        group_instance_id=None,
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name="t",
                partitions=[
                    OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=9,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                ],
            )
        ],
    )
    _, body = decode_request(_kafka_python_frame(commit, 8))
    assert body["generation_id_or_member_epoch"] == 3
    assert body["topics"][0]["partitions"][0]["committed_offset"] == 9

    create = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name="n", num_partitions=3, replication_factor=1, assignments=[], configs=[]
            )
        ],
        timeout_ms=1000,
        validate_only=False,
    )
    _, body = decode_request(_kafka_python_frame(create, 5))
    assert body["topics"] == [
        {"name": "n", "num_partitions": 3, "replication_factor": 1, "assignments": [], "configs": []}
    ]


def test_kafka_python_reads_our_api_versions_v3_response():
    body = {
        "error_code": 0,
        "api_keys": [
            {"api_key": key, "min_version": low, "max_version": high}
            for key, (low, high) in [(0, (3, 9)), (18, (0, 3))]
        ],
        "throttle_time_ms": 0,
    }
    frame = encode_response(ApiKey.API_VERSIONS, 3, 99, body)
    theirs = ApiVersionsResponse.decode(frame[4:], version=3, header=True)
    assert theirs.header.correlation_id == 99
    assert [(k.api_key, k.min_version, k.max_version) for k in theirs.api_keys] == [(0, 3, 9), (18, 0, 3)]


def test_strategy_defaults_helper_matches_decoding():
    # The helper the round-trip tests rely on: a v0 Metadata request gets later fields' defaults.
    schema = messages.REQUESTS[ApiKey.METADATA]
    assert with_defaults(schema.struct, 0, {"topics": []}) == {
        "topics": [],
        "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
