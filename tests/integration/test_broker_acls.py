"""ACLs on the broker, configured as on Kafka (authorizer.class.name = StandardAuthorizer, super.users):
Kafka's kafka-acls tool and the AdminClient create, list and delete them; librdkafka clients get Kafka's
authorization errors for what their principal may not do, and nothing is written for them; the principal
is the SASL user, or the subject of a TLS client certificate, or User:ANONYMOUS."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from burrow_support import MonitorSettings, SecuredMonitor
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from harness import BrokerProcess, create_topics, free_port, unique_name, wait_until
from kafka_harness import java_peer
from tls_certs import CertificateAuthority

from broker.client import ClientSecurity, KafkaConnection
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey
from broker.protocol.records import Record, build_batch

pytestmark = pytest.mark.integration

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


class SecuredBroker:
    def __init__(self, directory: Path) -> None:
        self.ca = CertificateAuthority(directory / "certs")
        server = self.ca.issue("broker")
        self.carol = self.ca.issue("carol", client=True)
        self.monitor = self.ca.issue("monitor", client=True)
        self.plain, self.sasl, self.ssl = free_port(), free_port(), free_port()
        accounts = " ".join(f'user_{name}="{password}"' for name, password in USERS.items())
        self.process = BrokerProcess(directory / "data", port=self.plain, extra_config={
            "listeners": f"PLAINTEXT://127.0.0.1:{self.plain},SASL_PLAINTEXT://127.0.0.1:{self.sasl},"
                         f"SSL://127.0.0.1:{self.ssl}",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {accounts};",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.store),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca.path), "ssl.client.auth": "required",
            "authorizer.class.name": AUTHORIZER, "super.users": "User:admin",
            "group.initial.rebalance.delay.ms": 0, "auto.create.topics.enable": False,
        })

    def client(self, user: str) -> dict[str, str]:
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl}", "security.protocol": "sasl_plaintext",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}

    def tls_client(self) -> dict[str, str]:
        return {"bootstrap.servers": f"127.0.0.1:{self.ssl}", "security.protocol": "ssl",
                "ssl.ca.location": str(self.ca.path), "ssl.certificate.location": str(self.carol.certificate),
                "ssl.key.location": str(self.carol.key)}


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[SecuredBroker]:
    broker = SecuredBroker(tmp_path_factory.mktemp("acls"))
    broker.process.start()
    yield broker
    broker.process.stop()



def allow(principal: str, kind: ResourceType, name: str, operation: AclOperation,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(kind, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def delivery_errors(settings: dict[str, str], topic: str, count: int = 3) -> list[KafkaError | None]:
    errors: list[KafkaError | None] = []
    producer = Producer({**settings, "message.timeout.ms": 20000})
    for number in range(count):
        producer.produce(topic, b"acl %d" % number, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    return errors


def consume(settings: dict[str, str], topic: str, group: str, want: int) -> tuple[list[bytes], list[KafkaError]]:
    consumer = Consumer({**settings, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    errors: list[KafkaError] = []
    try:
        for _ in range(60):
            for message in consumer.consume(10, timeout=0.5):
                if message.error() is None:
                    values.append(message.value())
                else:
                    errors.append(message.error())
            if len(values) >= want or errors:
                break
        if values:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values, errors


def test_the_kafka_acls_tool_manages_acls_that_survive_a_restart(secured, tmp_path):
    topic, group = unique_name("orders"), unique_name("app")
    admin = secured.client("admin")
    create_topics(admin, topic)
    properties = tmp_path / "admin.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                          "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                          'username="admin" password="admin-secret";\n')
    tool = ("org.apache.kafka.tools.AclCommand", "--bootstrap-server", f"127.0.0.1:{secured.sasl}",
            "--command-config", str(properties))
    java_peer(*tool, "--add", "--allow-principal", "User:alice", "--consumer", "--topic", topic, "--group", group)
    listed = java_peer(*tool, "--list", "--topic", topic).stdout
    for operation in ("READ", "DESCRIBE"):
        assert f"(principal=User:alice, host=*, operation={operation}, permissionType=ALLOW)" in listed
    assert "WRITE" not in listed

    # alice reads in her group; her records were written by the super user
    producer = Producer(admin)
    producer.produce(topic, b"for alice")
    assert producer.flush(30) == 0
    values, errors = consume(secured.client("alice"), topic, group, 1)
    assert (values, errors) == ([b"for alice"], [])

    secured.process.stop()
    secured.process.start()
    admin_client = AdminClient(admin)
    described = admin_client.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None, AclOperation.ANY,
        AclPermissionType.ANY)).result(30)
    assert {(b.restype, b.name, b.operation) for b in described} >= {
        (ResourceType.TOPIC, topic, AclOperation.READ), (ResourceType.TOPIC, topic, AclOperation.DESCRIBE),
        (ResourceType.GROUP, group, AclOperation.READ)}

    java_peer(*tool, "--remove", "--force", "--allow-principal", "User:alice", "--consumer", "--topic", topic,
              "--group", group)
    assert "User:alice" not in java_peer(*tool, "--list", "--topic", topic).stdout
    values, errors = consume(secured.client("alice"), topic, unique_name("again"), 1)
    assert not values and errors
    assert errors[0].code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)


def test_clients_get_kafkas_authorization_errors(secured):
    topic, group, other_group = unique_name("ledger"), unique_name("readers"), unique_name("strangers")
    admin_settings = secured.client("admin")
    create_topics(admin_settings, topic)
    admin = AdminClient(admin_settings)
    for future in admin.create_acls([
        allow("User:alice", ResourceType.TOPIC, topic, AclOperation.WRITE),
        allow("User:alice", ResourceType.TOPIC, topic, AclOperation.READ),
        allow("User:alice", ResourceType.GROUP, group, AclOperation.READ),
    ]).values():
        future.result(30)

    # bob may not write: every record fails with TOPIC_AUTHORIZATION_FAILED
    errors = delivery_errors(secured.client("bob"), topic)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    # alice writes, idempotently (WRITE on a topic is enough for InitProducerId, KIP-679)
    assert delivery_errors({**secured.client("alice"), "enable.idempotence": True}, topic) == [None] * 3
    # alice reads in her group, not in another one
    values, errors = consume(secured.client("alice"), topic, group, 3)
    assert (values, errors) == ([b"acl 0", b"acl 1", b"acl 2"], [])
    values, errors = consume(secured.client("alice"), topic, other_group, 3)
    assert not values and [e.code() for e in errors][:1] == [KafkaError.GROUP_AUTHORIZATION_FAILED]

    # bob does not see the topic; the super user does
    assert topic not in AdminClient(secured.client("bob")).list_topics(timeout=30).topics
    assert topic in admin.list_topics(timeout=30).topics
    # deleting the write ACL takes the right away again
    deleted = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                                                  "User:alice", None, AclOperation.WRITE,
                                                  AclPermissionType.ALLOW)])
    assert [len(future.result(30)) for future in deleted.values()] == [1]
    errors = delivery_errors(secured.client("alice"), topic, 1)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_a_tls_client_is_its_certificate_subject(secured):
    mine, theirs = unique_name("carol"), unique_name("dave")
    create_topics(secured.client("admin"), mine, theirs)
    tls = secured.tls_client()
    assert mine not in AdminClient(tls).list_topics(timeout=30).topics
    admin = AdminClient(secured.client("admin"))
    for future in admin.create_acls([allow("User:CN=carol", ResourceType.TOPIC, "carol-", AclOperation.DESCRIBE,
                                           ResourcePatternType.PREFIXED)]).values():
        future.result(30)
    seen = AdminClient(tls).list_topics(timeout=30).topics
    assert mine in seen and theirs not in seen


async def test_an_anonymous_client_is_refused_on_the_wire_and_nothing_is_written(secured):
    topic = unique_name("guarded")
    create_topics(secured.client("admin"), topic)
    conn = await KafkaConnection.connect(f"127.0.0.1:{secured.plain}", client_id="acl-test")
    try:
        batch = build_batch([Record(0, 1_700_000_000_000, b"k", b"v")])
        produced = await conn.request(ApiKey.PRODUCE, {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                                                       "topic_data": [{"name": topic, "partition_data": [
                                                           {"index": 0, "records": batch}]}]}, version=9)
        assert produced["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        metadata = await conn.request(ApiKey.METADATA, {"topics": [{"name": topic, "topic_id": bytes(16)}],
                                                        "allow_auto_topic_creation": False,
                                                        "include_topic_authorized_operations": True}, version=12)
        assert metadata["topics"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        created = await conn.request(ApiKey.CREATE_TOPICS, {"topics": [
            {"name": unique_name("sneaky"), "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": []}], "timeout_ms": 5000, "validate_only": False}, version=7)
        assert created["topics"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        coordinator = await conn.request(ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": ["g"]},
                                         version=4)
        assert coordinator["coordinators"][0]["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        committed = await conn.request(ApiKey.OFFSET_COMMIT, {
            "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "retention_time_ms": -1, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1, "commit_timestamp": -1,
                 "committed_metadata": ""}]}]}, version=8)
        assert committed["topics"][0]["partitions"][0]["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        producer_id = await conn.request(ApiKey.INIT_PRODUCER_ID, {
            "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1},
            version=4)
        assert producer_id["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        # only holders of DESCRIBE / ALTER on the cluster see and manage ACLs
        described = await conn.request(ApiKey.DESCRIBE_ACLS, {
            "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}, version=3)
        assert (described["error_code"], described["resources"]) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
        acls = await conn.request(ApiKey.CREATE_ACLS, {"creations": [
            {"resource_type": 2, "resource_name": "*", "resource_pattern_type": 3, "principal": "User:ANONYMOUS",
             "host": "*", "operation": 2, "permission_type": 3}]}, version=3)
        assert acls["results"][0]["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        configs = await conn.request(ApiKey.DESCRIBE_CONFIGS, {"resources": [
            {"resource_type": 4, "resource_name": "1", "configuration_keys": None}], "include_synonyms": False,
            "include_documentation": False}, version=4)
        assert configs["results"][0]["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        # what operators' tools ask: log dirs need DESCRIBE on the cluster, producers READ on the topic, and a
        # topic's partitions DESCRIBE on it (asked for by name: refused; asked for all: left out)
        dirs = await conn.request(ApiKey.DESCRIBE_LOG_DIRS, {"topics": None}, version=4)
        assert (dirs["error_code"], dirs["results"]) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
        producers = await conn.request(ApiKey.DESCRIBE_PRODUCERS, {"topics": [
            {"name": topic, "partition_indexes": [0]}]}, version=0)
        assert producers["topics"][0]["partitions"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        partitions = await conn.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, {"topics": [{"name": topic}]}, version=0)
        assert [(t["name"], t["error_code"], t["partitions"]) for t in partitions["topics"]] == [
            (topic, ErrorCode.TOPIC_AUTHORIZATION_FAILED, [])]
        every = await conn.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, {"topics": []}, version=0)
        assert every["topics"] == []
        # leader elections need ALTER on the cluster: refused as a whole and for each partition asked for
        elected = await conn.request(ApiKey.ELECT_LEADERS, {"election_type": 0, "timeout_ms": 5000,
                                                            "topic_partitions": [{"topic": topic, "partitions": [0]}]},
                                     version=2)
        assert elected["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert [(r["topic"], [(p["partition_id"], p["error_code"]) for p in r["partition_result"]])
                for r in elected["replica_election_results"]] == [(topic, [(0, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)])]
    finally:
        await conn.close()
    # nothing was written: the topic is empty, no topic was created, no ACL exists for the anonymous user
    admin = AdminClient(secured.client("admin"))
    assert not [name for name in admin.list_topics(timeout=30).topics if name.startswith("sneaky-")]
    consumer = Consumer({**secured.client("admin"), "group.id": unique_name("check")})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), 30)
    finally:
        consumer.close()
    assert (low, high) == (0, 0)
    anonymous = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY,
                                                     "User:ANONYMOUS", None, AclOperation.ANY,
                                                     AclPermissionType.ANY)).result(30)
    assert anonymous == []


def test_the_monitor_needs_only_describe_and_read(secured, tmp_path):
    """burrowpy serve as a least-privileged client (its certificate's subject): DESCRIBE on the cluster and on
    every group, READ on every topic (__consumer_offsets, and records for lag in seconds) is all it needs."""
    topic = group = unique_name("watched")
    admin_settings = secured.client("admin")
    create_topics(admin_settings, topic)
    producer = Producer(admin_settings)
    for number in range(10):
        producer.produce(topic, b"%d" % number)
    assert producer.flush(30) == 0
    committer = Consumer({**admin_settings, "group.id": group, "enable.auto.commit": False})
    try:
        wait_until(lambda: committer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False) or True, 60,
                   interval=0.5, message="a commit")
    finally:
        committer.close()
    admin = AdminClient(admin_settings)
    monitor = "User:CN=monitor"
    for future in admin.create_acls([
        allow(monitor, ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
        allow(monitor, ResourceType.TOPIC, "*", AclOperation.READ),
        allow(monitor, ResourceType.GROUP, "*", AclOperation.DESCRIBE),
    ]).values():
        future.result(30)
    settings = MonitorSettings(f"127.0.0.1:{secured.ssl}", intervals=4, offset_refresh=1, topic_refresh=1,
                               expire_cache=0)
    tls = {"cafile": str(secured.ca.path), "certfile": str(secured.monitor.certificate),
           "keyfile": str(secured.monitor.key)}
    with SecuredMonitor(tmp_path / "monitor", settings, tls, None) as burrowpy:
        burrowpy.assert_lag_seen(group, topic, 4, 6, f"{group} seen by the least-privileged monitor")


async def test_a_regex_subscription_gets_only_the_topics_its_member_may_describe(secured):
    prefix = unique_name("regex")
    mine, hidden = f"{prefix}-mine", f"{prefix}-hidden"
    admin_settings = secured.client("admin")
    create_topics(admin_settings, mine, hidden)
    group = unique_name("regex-group")
    admin = AdminClient(admin_settings)
    for future in admin.create_acls([allow("User:alice", ResourceType.TOPIC, mine, AclOperation.DESCRIBE),
                                     allow("User:alice", ResourceType.GROUP, group, AclOperation.READ)]).values():
        future.result(30)
    alice = ClientSecurity(sasl_mechanism="PLAIN", username="alice", password=USERS["alice"])
    conn = await KafkaConnection.connect(f"127.0.0.1:{secured.sasl}", security=alice)
    try:
        member_id, epoch, assigned = uuid.uuid4().hex[:22], 0, []
        for _ in range(50):
            answer = await conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, {
                "group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": None,
                "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": None if epoch else [],
                "subscribed_topic_regex": f"{prefix}-.*" if not epoch else None, "server_assignor": None,
                "topic_partitions": assigned}, version=1)
            assert answer["error_code"] == ErrorCode.NONE, answer
            epoch = answer["member_epoch"]
            if answer["assignment"] is not None:
                assigned = answer["assignment"]["topic_partitions"]
            if assigned:
                break
            await asyncio.sleep(0.1)
        metadata = await conn.request(ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False},
                                      version=12)
    finally:
        await conn.close()
    names = {t["topic_id"]: t["name"] for t in metadata["topics"]}
    assert [(names.get(t["topic_id"], "a topic alice may not describe"), t["partitions"])
            for t in assigned] == [(mine, [0])]
    assert hidden not in names.values()
