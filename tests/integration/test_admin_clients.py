"""Topic administration through real admin clients: configs, partitions, records, cluster, deletion."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from harness import BrokerProcess, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def new_topic(admin: AdminClient, partitions: int = 1, config: dict | None = None) -> str:
    name = f"admin-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)
    return name


def topic_configs(admin: AdminClient, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.TOPIC, name)
    return admin.describe_configs([resource])[resource].result(30)


def test_describe_and_alter_topic_configs(admin):
    name = new_topic(admin, config={"retention.ms": "3600000", "cleanup.policy": "compact"})
    configs = topic_configs(admin, name)
    assert configs["retention.ms"].value == "3600000" and not configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "compact"
    assert configs["segment.bytes"].is_default

    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    configs = topic_configs(admin, name)
    assert configs["retention.ms"].value == "7200000"
    assert configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].is_default


def test_invalid_config_is_refused_with_a_reason(admin):
    name = f"admin-{uuid.uuid4().hex[:8]}"
    future = admin.create_topics([NewTopic(name, 1, 1, config={"retention.ms": "soon"})])[name]
    with pytest.raises(Exception, match="retention.ms"):
        future.result(30)
    assert name not in admin.list_topics(timeout=10).topics


def test_create_partitions_and_produce_to_the_new_ones(broker, admin):
    name = new_topic(admin, 2)
    admin.create_partitions([NewPartitions(name, 5)])[name].result(30)
    assert len(admin.list_topics(name, timeout=10).topics[name].partitions) == 5
    with pytest.raises(Exception, match="INVALID_PARTITIONS|partitions"):
        admin.create_partitions([NewPartitions(name, 3)])[name].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(name, b"to the last partition", partition=4)
    assert producer.flush(30) == 0


def test_delete_records_moves_the_log_start(broker, admin):
    name = new_topic(admin)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce(name, str(i).encode(), partition=0)
    assert producer.flush(30) == 0
    result = admin.delete_records([TopicPartition(name, 0, 6)])
    low = list(result.values())[0].result(30)
    assert low.low_watermark == 6
    earliest = admin.list_offsets({TopicPartition(name, 0): OffsetSpec.earliest()})
    assert list(earliest.values())[0].result(30).offset == 6
    latest = admin.list_offsets({TopicPartition(name, 0): OffsetSpec.latest()})
    assert list(latest.values())[0].result(30).offset == 10


def test_describe_cluster_and_topics(broker, admin):
    cluster = admin.describe_cluster().result(30)
    assert [node.id for node in cluster.nodes] == [1]
    assert cluster.controller.id == 1 and cluster.cluster_id


def test_delete_topic(admin):
    name = new_topic(admin)
    admin.delete_topics([name])[name].result(30)
    wait_until(lambda: name not in admin.list_topics(timeout=10).topics, 10, message="topic gone")


def test_kafka_python_admin(broker):
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        name = f"kp-admin-{uuid.uuid4().hex[:8]}"
        admin.create_topics([KNewTopic(name, 3, 1, topic_configs={"retention.bytes": "1048576"})])
        assert name in admin.list_topics()
        described = admin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, name)])
        assert "1048576" in str(described)
        admin.delete_topics([name])
        wait_until(lambda: name not in admin.list_topics(), 10, message="topic gone")
    finally:
        admin.close()


def test_auto_topic_creation_can_be_switched_off(tmp_path):
    with BrokerProcess(tmp_path / "data", extra_config={"auto.create.topics.enable": False}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 3000})
        errors = []
        producer.produce("never-created", b"x", on_delivery=lambda err, msg: errors.append(err))
        producer.flush(10)
        assert errors and errors[0] is not None
        assert "never-created" not in admin.list_topics(timeout=10).topics
