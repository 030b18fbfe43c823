"""Topic configs a new user tries first, on our broker and, where the answer is Kafka's to give, side by
side with a real Apache Kafka 4.4: compression.type (with its levels) recompressing batches, APPEND and
SUBTRACT on list configs, and records without a key refused by compacted topics with Kafka's per-record
errors (KIP-467).
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from harness import wait_until
from kafka import KafkaProducer
from kafka.errors import KafkaError as PythonKafkaError

from broker.client import KafkaConnection
from broker.config import BROKER_KEYS
from broker.protocol.api import ApiKey
from broker.protocol.records import (
    ATTR_COMPRESSION_MASK,
    Record,
    build_batch,
    decode_records_any,
    iter_batches,
)

pytestmark = pytest.mark.integration

CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def create_topic(bootstrap: str, topic: str, configs: dict[str, str], partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1, config=configs)]).values():
        future.result(30)


def topic_config(bootstrap: str, topic: str, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", topic)
    return admin.describe_configs([resource])[resource].result(30)[name].value


async def stored_batches(bootstrap: str, topic: str) -> list[tuple[int, list[bytes]]]:
    """(codec, record values) of every batch stored in partition 0, read with a raw Fetch."""
    async with await KafkaConnection.connect(bootstrap) as connection:
        answer = await connection.request(ApiKey.FETCH, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                         "last_fetched_epoch": -1, "log_start_offset": -1,
                                                         "partition_max_bytes": 1 << 20}]}]}, version=11)
    data = answer["responses"][0]["partitions"][0]["records"]
    return [(header.attributes & ATTR_COMPRESSION_MASK,
             [r.value for r in decode_records_any(data[pos:pos + header.batch_length + 12])])
            for pos, header in iter_batches(data)]


def produce(bootstrap: str, topic: str, codec: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 50})
    for value in values:
        producer.produce(topic, key=b"k", value=value, partition=0)
    assert producer.flush(30) == 0


@pytest.mark.parametrize(("topic_codec", "producer_codec"), [
    ("zstd", "gzip"), ("uncompressed", "lz4"), ("gzip", "none"), ("lz4", "zstd"), ("snappy", "gzip"),
    ("producer", "gzip")])
def test_compression_type_recompresses_batches(broker, topic_codec, producer_codec):
    topic = f"codec-{topic_codec}-{producer_codec}"
    create_topic(broker.bootstrap, topic, {"compression.type": topic_codec})
    assert topic_config(broker.bootstrap, topic, "compression.type") == topic_codec
    values = [b"value %d " % n * 20 for n in range(50)]
    produce(broker.bootstrap, topic, producer_codec, values)
    batches = asyncio.run(stored_batches(broker.bootstrap, topic))
    stored_codec = CODECS["gzip"] if topic_codec == "producer" else CODECS[topic_codec]
    assert {codec for codec, _ in batches} == {stored_codec}
    assert [value for _, batch in batches for value in batch] == values


def test_compression_levels_are_configs(broker):
    create_topic(broker.bootstrap, "codec-levels", {"compression.type": "zstd", "compression.zstd.level": "19",
                                                     "compression.gzip.level": "9", "compression.lz4.level": "17"})
    assert topic_config(broker.bootstrap, "codec-levels", "compression.zstd.level") == "19"
    assert topic_config(broker.bootstrap, "codec-levels", "compression.gzip.level") == "9"
    produce(broker.bootstrap, "codec-levels", "gzip", [b"x" * 1000] * 10)
    assert {codec for codec, _ in asyncio.run(stored_batches(broker.bootstrap, "codec-levels"))} == {4}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for name, value in (("compression.type", "brotli"), ("compression.gzip.level", "10"),
                        ("compression.lz4.level", "0")):
        future = admin.create_topics([NewTopic(f"codec-bad-{name}", 1, 1, config={name: value})])
        with pytest.raises(Exception, match="INVALID_CONFIG|InvalidConfig"):
            next(iter(future.values())).result(30)


def alter(bootstrap: str, topic: str, *entries: ConfigEntry) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", topic, incremental_configs=list(entries))
    admin.incremental_alter_configs([resource])[resource].result(30)


@pytest.mark.parametrize("server", ["broker", "kafka"])
def test_append_and_subtract_on_list_configs(request, server):
    bootstrap = request.getfixturevalue(server).bootstrap
    create_topic(bootstrap, "list-configs", {})
    alter(bootstrap, "list-configs",
          ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND))
    wait_until(lambda: topic_config(bootstrap, "list-configs", "cleanup.policy") == "delete,compact", 30,
               message="cleanup.policy delete,compact")
    alter(bootstrap, "list-configs",
          ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT))
    wait_until(lambda: topic_config(bootstrap, "list-configs", "cleanup.policy") == "compact", 30,
               message="cleanup.policy compact")
    with pytest.raises(Exception, match="Can't APPEND to key retention.ms because its type is not LIST"):
        alter(bootstrap, "list-configs",
              ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.APPEND))


async def produce_raw(bootstrap: str, topic: str, batch: bytes) -> dict:
    async with await KafkaConnection.connect(bootstrap) as connection:
        for _ in range(50):  # a new Kafka partition may not have its leader yet
            answer = await connection.request(ApiKey.PRODUCE, {
                "transactional_id": None, "acks": 1, "timeout_ms": 30_000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}, version=9)
            partition = answer["responses"][0]["partition_responses"][0]
            if partition["error_code"] not in (3, 6):
                return partition
            await asyncio.sleep(0.2)
    raise AssertionError(f"{topic} never got a leader")


def test_records_without_keys_on_a_compacted_topic_get_kafkas_answer(broker, kafka):
    batch = build_batch([Record(0, 1, b"k", b"v"), Record(1, 1, None, b"v"), Record(2, 1, None, b"v")])
    answers = []
    for server in (broker, kafka):
        create_topic(server.bootstrap, "keyless-wire", {"cleanup.policy": "compact"})
        answers.append(asyncio.run(produce_raw(server.bootstrap, "keyless-wire", batch)))
    ours, kafkas = answers
    assert ours["error_code"] == 87  # INVALID_RECORD
    assert ours == kafkas


def test_clients_see_invalid_record_for_keyless_records(broker):
    create_topic(broker.bootstrap, "keyless-clients", {"cleanup.policy": "compact"})
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce("keyless-clients", value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert [e.code() for e in errors] == [ConfluentError.INVALID_RECORD]

    python_producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        with pytest.raises(PythonKafkaError, match="InvalidRecord|INVALID_RECORD|Compacted topic"):
            python_producer.send("keyless-clients", value=b"no key").get(30)
    finally:
        python_producer.close()
    produce(broker.bootstrap, "keyless-clients", "none", [b"keyed"])  # a key: accepted
    assert [values for _, values in asyncio.run(stored_batches(broker.bootstrap, "keyless-clients"))] == [[b"keyed"]]


async def described_topic(bootstrap: str, topic: str) -> dict[str, dict]:
    async with await KafkaConnection.connect(bootstrap) as connection:
        await connection.request(ApiKey.CREATE_TOPICS, {"topics": [{"name": topic, "num_partitions": 1,
                                 "replication_factor": 1, "assignments": [], "configs": []}], "timeout_ms": 30_000})
        answer = await connection.request(ApiKey.DESCRIBE_CONFIGS, {"resources": [
            {"resource_type": 2, "resource_name": topic, "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}, version=4)
    return {c["name"]: {k: c[k] for k in ("value", "config_type", "config_source", "read_only", "is_sensitive",
                                          "is_default")} for c in answer["results"][0]["configs"]}


# Where a new topic's configs differ from Kafka 4.4's, on purpose: name -> why.
TOPIC_CONFIG_DIFFERENCES = {
    "min.insync.replicas": "Kafka 4's storage tool sets it cluster-wide as a dynamic default (source 3); ours is "
                           "the static default (source 5), same value",
    "retention.disk.percent": "ours only: delete the oldest segments while the data disk is fuller than this",
}


def test_every_topic_config_is_described_as_kafka_does(broker, kafka):
    ours = asyncio.run(described_topic(broker.bootstrap, "every-config"))
    kafkas = asyncio.run(described_topic(kafka.bootstrap, "every-config"))
    assert set(kafkas) - set(ours) == set()  # every topic config Kafka 4.4 has
    assert set(ours) - set(kafkas) == {"retention.disk.percent"}
    differing = {name for name in kafkas if ours[name] != kafkas[name]}
    assert differing == set(TOPIC_CONFIG_DIFFERENCES) - {"retention.disk.percent"}
    assert ours["min.insync.replicas"]["value"] == kafkas["min.insync.replicas"]["value"]


@pytest.mark.parametrize(("name", "value", "reason"), [
    ("remote.storage.enable", "true", "Tiered Storage functionality is disabled in the broker"),
    ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
    ("max.decompressed.message.bytes", "0", "at least 1"),
    ("message.timestamp.after.max.ms", "-1", "at least 0"),
])
def test_configs_this_broker_cannot_honour_are_refused_with_the_reason(broker, name, value, reason):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    future = admin.create_topics([NewTopic(f"refused-{name}", 1, 1, config={name: value})])
    with pytest.raises(Exception, match=reason):
        next(iter(future.values())).result(30)


async def validated(bootstrap: str, topic: str, name: str, value: str) -> tuple[int, str | None]:
    async with await KafkaConnection.connect(bootstrap) as connection:
        answer = await connection.request(ApiKey.CREATE_TOPICS, {"topics": [{
            "name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [],
            "configs": [{"name": name, "value": value}]}], "timeout_ms": 30_000, "validate_only": True})
    return answer["topics"][0]["error_code"], answer["topics"][0]["error_message"]


# Topic config values both refuse, with the same code and message. Not here, on purpose: segment.bytes
# below Kafka 4's 1 MiB minimum (ours takes 14 bytes up, which the tests' small segments need).
BAD_TOPIC_VALUES = [
    ("retention.ms", "abc"), ("retention.ms", "-5"), ("retention.bytes", "x1"), ("segment.bytes", "99999999999"),
    ("min.cleanable.dirty.ratio", "1.5"), ("min.cleanable.dirty.ratio", "-0.5"), ("min.cleanable.dirty.ratio", "x"),
    ("compression.type", "brotli"), ("compression.gzip.level", "10"), ("compression.gzip.level", "0"),
    ("compression.lz4.level", "0"), ("compression.lz4.level", "18"), ("compression.zstd.level", "23"),
    ("compression.zstd.level", "-131073"), ("message.timestamp.type", "Foo"), ("cleanup.policy", "shred"),
    ("cleanup.policy", "compact,shred"), ("preallocate", "yes"), ("no.such.config", "1"),
    ("min.insync.replicas", "0"), ("max.message.bytes", "-1"), ("segment.ms", "0"), ("flush.messages", "0"),
    ("index.interval.bytes", "-1"), ("segment.index.bytes", "2"), ("max.compaction.lag.ms", "0"),
    ("local.retention.ms", "-3"), ("remote.copy.lag.bytes", "-2"), ("remote.copy.lag.ms", "-2"),
    ("message.timestamp.before.max.ms", "-1"), ("retention.ms", ""), ("max.decompressed.message.bytes", "0"),
    ("segment.jitter.ms", "-1"), ("delete.retention.ms", "-1"), ("file.delete.delay.ms", "-1"),
    ("min.compaction.lag.ms", "-1"), ("local.retention.bytes", "-3"),
    ("leader.replication.throttled.replicas", "abc"), ("follower.replication.throttled.replicas", "0:1,*"),
]


def test_bad_topic_config_values_get_kafkas_refusal(broker, kafka):
    differing = {}
    for index, (name, value) in enumerate(BAD_TOPIC_VALUES):
        ours = asyncio.run(validated(broker.bootstrap, f"bad-value-{index}", name, value))
        kafkas = asyncio.run(validated(kafka.bootstrap, f"bad-value-{index}", name, value))
        assert ours[0] == 40, (name, value, ours)
        if ours != kafkas:
            differing[(name, value)] = (ours, kafkas)
    assert differing == {}
    good = [("cleanup.policy", ""), ("preallocate", "TRUE"), ("remote.copy.lag.ms", "-1"),
            ("leader.replication.throttled.replicas", "*"), ("follower.replication.throttled.replicas", "0:1,1:1")]
    for server in (broker, kafka):
        assert [asyncio.run(validated(server.bootstrap, "good-value", n, v)) for n, v in good] == [(0, None)] * 5


def test_the_offsets_topic_is_made_with_offsets_topic_segment_bytes(broker):
    """As Kafka makes it: in segments of offsets.topic.segment.bytes (100 MiB), not the log's 1 GiB."""
    assert topic_config(broker.bootstrap, "__consumer_offsets", "segment.bytes") == "104857600"


def test_unclean_leader_election_is_accepted_on_a_single_node(broker):
    """Nothing to elect from on one node: the setting is simply taken, as Kafka takes it (the cluster's
    unclean elections: test_unclean_leader_election.py)."""
    create_topic(broker.bootstrap, "unclean-single", {"unclean.leader.election.enable": "true"})
    assert topic_config(broker.bootstrap, "unclean-single", "unclean.leader.election.enable") == "true"
    produce(broker.bootstrap, "unclean-single", "none", [b"kept"])
    assert asyncio.run(stored_batches(broker.bootstrap, "unclean-single")) == [(0, [b"kept"])]


def test_record_timestamps_beyond_the_topic_bounds_get_kafkas_answer(broker, kafka):
    future = 1_700_000_000_000 * 2  # far past message.timestamp.after.max.ms (one hour)
    batch = build_batch([Record(0, 1_000, b"k", b"v"), Record(1, future, b"k", b"v")])
    answers = []
    for server in (broker, kafka):
        create_topic(server.bootstrap, "timestamp-bounds", {"message.timestamp.before.max.ms": "86400000"})
        answers.append(asyncio.run(produce_raw(server.bootstrap, "timestamp-bounds", batch)))
    for answer in answers:
        assert answer["error_code"] == 32  # INVALID_TIMESTAMP
        assert [e["batch_index"] for e in answer["record_errors"]] == [0, 1]
        assert all("is out of range" in e["batch_index_error_message"] for e in answer["record_errors"])
    assert answers[0]["log_start_offset"] == answers[1]["log_start_offset"] == 0


def test_max_decompressed_message_bytes_gets_kafkas_answer(broker, kafka):
    """Compressed batches with a record whose decompressed body exceeds the limit are refused whole with
    INVALID_RECORD; uncompressed ones are not decompressed, so not checked, as in Kafka."""
    def record(size: int) -> Record:
        return Record(0, 1_700_000_000_000, b"k", b"z" * size)  # a body of size + 8 bytes

    cases = {"at the limit, gzip": build_batch([record(992)], compression=1),
             "one byte over, gzip": build_batch([record(993)], compression=1),
             "over, among others, zstd": build_batch([record(10), record(3000), record(10)], compression=4),
             "over, uncompressed": build_batch([record(3000)])}
    answers = {}
    for server in (broker, kafka):
        create_topic(server.bootstrap, "decompressed-limit", {"max.decompressed.message.bytes": "1000"})
        answers[server] = {case: asyncio.run(produce_raw(server.bootstrap, "decompressed-limit", batch))
                           for case, batch in cases.items()}
    codes = {case: answer["error_code"] for case, answer in answers[broker].items()}
    assert codes == {"at the limit, gzip": 0, "one byte over, gzip": 87, "over, among others, zstd": 87,
                     "over, uncompressed": 0}
    assert codes == {case: answer["error_code"] for case, answer in answers[kafka].items()}
    assert all(answer["record_errors"] == [] for server in answers for answer in answers[server].values())


async def described_broker(bootstrap: str) -> dict[str, dict]:
    async with await KafkaConnection.connect(bootstrap) as connection:
        answer = await connection.request(ApiKey.DESCRIBE_CONFIGS, {"resources": [
            {"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}, version=4)
    return {c["name"]: c for c in answer["results"][0]["configs"]}


def test_every_broker_config_is_described_as_kafka_does(broker, kafka):
    """Kafka 4.4's 350 broker configs, each with Kafka's type, read-only flag and sensitivity; those Kafka
    shows at their default (every one the node's own properties did not set) with the same value."""
    ours, kafkas = asyncio.run(described_broker(broker.bootstrap)), asyncio.run(described_broker(kafka.bootstrap))
    assert set(kafkas) <= set(ours) and len(kafkas) >= 350
    shape = ("config_type", "read_only", "is_sensitive")
    # advertised.listeners changes at run time here, as on Kafka before KRaft (a KRaft Kafka holds it read-only)
    assert kafkas["advertised.listeners"]["read_only"] and not ours["advertised.listeners"]["read_only"]
    ours["advertised.listeners"]["read_only"] = True
    assert {n: [kafkas[n][k] for k in shape] for n in kafkas} == {n: [ours[n][k] for k in shape] for n in kafkas}
    ours_run_with = set(BROKER_KEYS)  # the settings this broker acts on carry its own values
    at_default = [n for n, c in kafkas.items() if c["config_source"] == 5 and n not in ours_run_with]
    assert len(at_default) > 200  # fewer each time the broker acts on another of Kafka's settings
    assert {n: kafkas[n]["value"] for n in at_default} == {n: ours[n]["value"] for n in at_default}
