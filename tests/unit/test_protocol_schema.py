"""The schema model: version ranges, defaults, validation, naming, and what the compiler generates."""

from __future__ import annotations

import re

import pytest
from protocol_strategies import ALL_SCHEMAS

from broker.protocol import messages
from broker.protocol.api import SCHEMA_VERSIONS, ApiKey
from broker.protocol.schema import Array, Field, Message, SchemaError, Struct, Versions


def test_versions_parse_and_contain():
    assert Versions.parse("3+") == Versions(3, None)
    assert Versions.parse("0-5") == Versions(0, 5)
    assert Versions.parse("2") == Versions(2, 2)
    assert Versions.parse("none").is_empty()
    assert 7 in Versions.parse("3+") and 2 not in Versions.parse("3+")
    assert 6 not in Versions.parse("0-5") and 0 not in Versions.parse("none")
    assert [str(Versions.parse(t)) for t in ("3+", "0-5", "2", "none")] == ["3+", "0-5", "2", "none"]


def test_versions_cover():
    assert Versions.parse("0+").covers(Versions.parse("3-5"))
    assert Versions.parse("1+").covers(Versions.parse("1+"))
    assert not Versions.parse("1+").covers(Versions.parse("0+"))
    assert not Versions.parse("0-7").covers(Versions.parse("0+"))
    assert not Versions.parse("none").covers(Versions.parse("0"))


def test_defaults():
    assert Field("a", "int32", "0+").default_value() == 0
    assert Field("a", "int32", "0+", default=-1).default_value() == -1
    assert Field("a", "string", "0+").default_value() == ""
    assert Field("a", "string", "3+", nullable="3+").default_value() is None  # nullable in all its versions
    assert Field("a", "string", "0+", nullable="1+").default_value() == ""  # not nullable in v0
    assert Field("a", "uuid", "10+").default_value() == bytes(16)
    assert Field("a", "records", "0+").default_value() == b""
    assert Field("a", Array("int32"), "0+").default_value() == []
    leader = Struct("Leader", (Field("id", "int32", "0+", default=-1), Field("tags", Array("string"), "0+")))
    assert Field("a", leader, "0+").default_value() == {"id": -1, "tags": []}


def _message(*fields: Field, flexible: str = "none") -> Message:
    return Message("Test", "data", versions="0-3", flexible=flexible, fields=fields)


@pytest.mark.parametrize(
    ("fields", "flexible", "complaint"),
    [
        ((Field("a", "int32", "0+"), Field("a", "int8", "0+")), "none", "unique"),
        ((Field("ThrottleTimeMs", "int32", "0+"),), "none", "snake_case"),
        ((Field("a", "int32", "0+", tag=0),), "2+", "non-flexible"),
        ((Field("a", "int32", "2+", tag=0), Field("b", "int32", "2+", tag=0)), "2+", "duplicate"),
        ((Field("a", "int32", "0+", nullable="0+"),), "none", "cannot be nullable"),
        ((Field("a", "int16", "0+", default=40000),), "none", "does not fit"),
        ((Field("a", "string", "0+", default=None),), "none", "never nullable"),
        ((Field("a", "varint", "0+"),), "none", "unknown type"),
        ((Field("a", Array("records"), "0+"),), "none", "not a Kafka type"),
        ((Field("a", "int32", "0+", compact="none"),), "none", "compactness"),
    ],
)
def test_invalid_schemas_are_rejected_when_built(fields, flexible, complaint):
    with pytest.raises(SchemaError, match=complaint):
        _message(*fields, flexible=flexible)


def test_messages_need_closed_version_ranges_and_api_keys_only_on_apis():
    with pytest.raises(SchemaError):
        Message("Open", "data", versions="0+", flexible="none", fields=())
    with pytest.raises(SchemaError):
        Message("NoKey", "request", versions="0", flexible="none", fields=())
    with pytest.raises(SchemaError):
        Message("Keyed", "data", versions="0", flexible="none", fields=(), api_key=3)


def _all_field_names(struct: Struct):
    for f in struct.fields:
        yield f.name
        inner = f.type.element if isinstance(f.type, Array) else f.type
        if isinstance(inner, Struct):
            yield from _all_field_names(inner)


def test_field_names_are_kafka_names_in_snake_case():
    names = {name for schema in ALL_SCHEMAS for name in _all_field_names(schema.struct)}
    assert all(re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", name) for name in names)  # V3AndBelowTopics: v3_and_below_topics
    assert {"throttle_time_ms", "topic_id", "isr_nodes", "group_instance_id"} <= names


def test_schema_versions_cover_the_required_ranges():
    required = {
        ApiKey.API_VERSIONS: (0, 3),
        ApiKey.METADATA: (0, 12),
        ApiKey.PRODUCE: (0, 9),
        ApiKey.FETCH: (0, 12),
        ApiKey.LIST_OFFSETS: (0, 7),
        ApiKey.CREATE_TOPICS: (0, 7),
        ApiKey.DELETE_TOPICS: (0, 6),
        ApiKey.CREATE_PARTITIONS: (0, 3),
        ApiKey.DESCRIBE_CONFIGS: (0, 4),
        ApiKey.ALTER_CONFIGS: (0, 2),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
        ApiKey.INIT_PRODUCER_ID: (0, 4),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
        ApiKey.DESCRIBE_CLUSTER: (0, 2),
        ApiKey.DELETE_RECORDS: (0, 2),
        ApiKey.FIND_COORDINATOR: (0, 4),
        ApiKey.JOIN_GROUP: (0, 7),
        ApiKey.SYNC_GROUP: (0, 5),
        ApiKey.HEARTBEAT: (0, 4),
        ApiKey.LEAVE_GROUP: (0, 5),
        ApiKey.OFFSET_COMMIT: (0, 9),
        ApiKey.OFFSET_FETCH: (0, 9),
        ApiKey.LIST_GROUPS: (0, 5),
        ApiKey.DESCRIBE_GROUPS: (0, 5),
        ApiKey.DELETE_GROUPS: (0, 2),
        ApiKey.ELECT_LEADERS: (0, 2),
        ApiKey.OFFSET_DELETE: (0, 0),
        ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
        ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.SASL_AUTHENTICATE: (0, 2),
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
        ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
        ApiKey.END_TXN: (0, 4),
        ApiKey.WRITE_TXN_MARKERS: (0, 1),
        ApiKey.TXN_OFFSET_COMMIT: (0, 4),
        ApiKey.UNREGISTER_BROKER: (0, 0),
        ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
        ApiKey.LIST_TRANSACTIONS: (0, 1),
        ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
        ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
        ApiKey.DESCRIBE_ACLS: (0, 3),
        ApiKey.CREATE_ACLS: (0, 3),
        ApiKey.DELETE_ACLS: (0, 3),
        ApiKey.DESCRIBE_LOG_DIRS: (0, 5),
        ApiKey.DESCRIBE_QUORUM: (0, 2),
        ApiKey.DESCRIBE_PRODUCERS: (0, 0),
        ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
        ApiKey.ADD_RAFT_VOTER: (0, 1),
        ApiKey.REMOVE_RAFT_VOTER: (0, 0),
        ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    }
    assert required == SCHEMA_VERSIONS
    assert {name: m.version_range() for name, m in messages.DATA_STRUCTS.items()} == {
        "ConsumerProtocolSubscription": (0, 3),
        "ConsumerProtocolAssignment": (0, 3),
        "OffsetCommitKey": (0, 1),
        "TransactionLogKey": (0, 0),
        "ConsumerGroupMetadataKey": (3, 3),
        "ConsumerGroupMetadataValue": (0, 0),
        "ConsumerGroupTargetAssignmentMetadataKey": (6, 6),
        "ConsumerGroupTargetAssignmentMetadataValue": (0, 0),
        "ConsumerGroupTargetAssignmentMemberKey": (7, 7),
        "ConsumerGroupTargetAssignmentMemberValue": (0, 0),
        "TransactionLogValue": (0, 1),
        "OffsetCommitValue": (0, 4),
        "GroupMetadataKey": (2, 2),
        "GroupMetadataValue": (0, 4),
        "ConsumerGroupMemberMetadataKey": (5, 5),
        "ConsumerGroupMemberMetadataValue": (0, 0),
        "ConsumerGroupCurrentMemberAssignmentKey": (8, 8),
        "ConsumerGroupCurrentMemberAssignmentValue": (0, 0),
    }


@pytest.mark.parametrize(
    ("api_key", "first_flexible"),
    [
        (ApiKey.API_VERSIONS, 3),
        (ApiKey.METADATA, 9),
        (ApiKey.PRODUCE, 9),
        (ApiKey.FETCH, 12),
        (ApiKey.DESCRIBE_CLUSTER, 0),
    ],
)
def test_flexible_thresholds(api_key, first_flexible):
    low, high = SCHEMA_VERSIONS[api_key]
    for schema in (messages.REQUESTS[api_key], messages.RESPONSES[api_key]):
        assert [v for v in range(low, high + 1) if schema.is_flexible(v)] == list(
            range(first_flexible, high + 1)
        )


def test_compiled_once_and_fixed_fields_merged_into_one_struct_call():
    response = messages.RESPONSES[ApiKey.FETCH]
    compiled = response.compiled(11)
    assert response.compiled(11) is compiled
    # partition_index, error_code, high_watermark, last_stable_offset, log_start_offset: one unpack
    assert re.search(r"(f_\d+, ){5}= unpack_\d+\(buf, pos\)\n    pos \+= 30\n", compiled.source)
    with pytest.raises(ValueError):
        response.compiled(13)


def test_an_array_element_may_come_already_encoded():
    from broker.protocol.api import decode_response, encode_element, encode_response
    from broker.protocol.types import Encoded

    topic = {"error_code": 0, "name": "t", "topic_id": bytes(16), "is_internal": False, "partitions": [
        {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 0, "replica_nodes": [1],
         "isr_nodes": [1], "offline_replicas": []}], "topic_authorized_operations": -(2**31)}
    body = {"throttle_time_ms": 0, "brokers": [], "cluster_id": "c", "controller_id": 1}
    for version in (1, 9, 12):
        encoded = encode_element(ApiKey.METADATA, version, "topics", topic)
        assert isinstance(encoded, Encoded)
        plain = encode_response(ApiKey.METADATA, version, 7, {**body, "topics": [topic, topic]})
        mixed = encode_response(ApiKey.METADATA, version, 7, {**body, "topics": [encoded, topic]})
        assert mixed == plain
        assert decode_response(ApiKey.METADATA, version, mixed[4:])[1]["topics"][0]["name"] == "t"
