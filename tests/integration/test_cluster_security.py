"""A secured three-broker cluster: brokers replicate over SASL_SSL, logging in to each other with SCRAM-SHA-512
credentials that live in the cluster's metadata; ACLs and SCRAM credentials made on one broker are in force
on all; each listener's clients are told the brokers' addresses on that listener."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import BrokerCluster
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from harness import (
    alter_broker_configs,
    create_topics,
    describe_broker_configs,
    free_port,
    secret_file,
    unique_name,
    wait_until,
)
from tls_certs import CertificateAuthority, serial_of, served_serial

from broker.client import ClientSecurity, KafkaConnection
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey

pytestmark = pytest.mark.integration

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" '
              'user_alice="alice-secret";')
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";'


class SecuredCluster:
    def __init__(self, root) -> None:
        self.ca = CertificateAuthority(root / "certs")
        server = self.ca.issue("broker")
        self.secure_ports: dict[int, int] = {}

        def node_settings(node_id: int, port: int) -> dict:
            self.secure_ports[node_id] = free_port()
            return {"listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{self.secure_ports[node_id]}",
                    "password.encoder.secret": f"the-password-encoder-secret-of-broker-{node_id}"}

        self.cluster = BrokerCluster(root, node_settings=node_settings, settings={
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.store),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca.path),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:broker;User:admin",
            # the harness checks health as User:ANONYMOUS on the PLAINTEXT listeners
            "allow.everyone.if.no.acl.found": True,
        }, args=("--add-scram", "SCRAM-SHA-512=[name=broker,password-file="
                                f"{secret_file(root, 'broker.password', 'broker-secret')}]"))

    def client(self, node_id: int, user: str = "admin", password: str | None = None,
               mechanism: str = "PLAIN") -> dict[str, str]:
        return {"bootstrap.servers": f"127.0.0.1:{self.secure_ports[node_id]}", "security.protocol": "sasl_ssl",
                "ssl.ca.location": str(self.ca.path), "sasl.mechanism": mechanism, "sasl.username": user,
                "sasl.password": password or f"{user}-secret"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[SecuredCluster]:
    cluster = SecuredCluster(tmp_path_factory.mktemp("secured-cluster"))
    try:  # a start that fails part way leaves no broker running
        cluster.cluster.start()
        yield cluster
    finally:
        cluster.cluster.stop()


def replicated_topic(secured: SecuredCluster, prefix: str, records: int) -> str:
    """A new topic on all three brokers with ``records`` records, once every replica is in sync."""
    topic = unique_name(prefix)
    create_topics(secured.client(1), topic, replication=3)
    producer = Producer({**secured.client(2), "acks": "all"})
    for number in range(records):
        producer.produce(topic, b"record %d" % number)
    assert producer.flush(30) == 0
    wait_until(lambda: sorted(secured.cluster.partitions(topic)[0]["isr_nodes"]) == [1, 2, 3], 30,
               message="all three replicas in sync")
    return topic


def test_brokers_replicate_over_sasl_ssl_and_clients_see_their_listeners_addresses(secured):
    # every replica fetched the records over SASL_SSL (SCRAM-SHA-512) and is in sync
    topic = replicated_topic(secured, "replicated", 50)
    metadata = AdminClient(secured.client(3)).list_topics(timeout=30)
    assert sorted((b.id, b.port) for b in metadata.brokers.values()) == sorted(secured.secure_ports.items())
    plain = secured.cluster.metadata(1)
    assert sorted((b["node_id"], b["port"]) for b in plain["brokers"]) == sorted(
        (i, b.port) for i, b in secured.cluster.brokers.items())

    # the leader goes; a follower that replicated over TLS serves every record
    leader = secured.cluster.partitions(topic)[0]["leader_id"]
    secured.cluster.kill(leader)
    try:
        survivor = next(i for i in secured.cluster.ids if i != leader)
        wait_until(lambda: secured.cluster.partitions(topic, survivor)[0]["leader_id"] not in (-1, leader), 30,
                   message="a new leader")
        consumer = Consumer({**secured.client(survivor), "group.id": unique_name("reader"),
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        values: list[bytes] = []
        try:
            for _ in range(60):
                values += [m.value() for m in consumer.consume(50, timeout=0.5) if m.error() is None]
                if len(values) >= 50:
                    break
        finally:
            consumer.close()
        assert values == [b"record %d" % n for n in range(50)]
    finally:
        secured.cluster.restart(leader)
        secured.cluster.wait_healthy()


def test_acls_and_scram_credentials_made_on_one_broker_hold_on_all(secured):
    topic = unique_name("guarded")
    create_topics(secured.client(1), topic, replication=3)
    admin = AdminClient(secured.client(1))
    for future in admin.create_acls([AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                                                "User:carol", "*", AclOperation.READ,
                                                AclPermissionType.ALLOW)]).values():
        future.result(30)
    for future in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"carol-secret")]).values():
        future.result(30)

    async def described_anonymously(node_id: int) -> int:
        connection = await KafkaConnection.connect(secured.cluster.brokers[node_id].bootstrap, timeout=10)
        async with connection:
            answer = await connection.request(ApiKey.METADATA, {
                "topics": [{"name": topic, "topic_id": bytes(16)}], "allow_auto_topic_creation": False})
        return answer["topics"][0]["error_code"]

    # the topic now has an ACL: the anonymous user may not describe it, on any broker
    for node_id in secured.cluster.ids:
        assert asyncio.run(described_anonymously(node_id)) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    # carol, made on broker 1, logs in with SCRAM on broker 3 and sees the topic her ACL names
    carol = AdminClient(secured.client(3, "carol", mechanism="SCRAM-SHA-512"))
    assert topic in carol.list_topics(timeout=30).topics


def test_raft_traffic_goes_inside_tls(secured):
    """The brokers reach each other over SASL_SSL, so their Raft addresses serve TLS: a client trusting the
    cluster's CA completes a handshake with the broker's certificate; plain bytes get nothing back."""
    for node_id, address in secured.cluster.raft_addresses.items():
        host, port = address.rsplit(":", 1)
        context = ssl.create_default_context(cafile=str(secured.ca.path))
        with socket.create_connection((host, int(port)), timeout=10) as raw, \
                context.wrap_socket(raw, server_hostname=host) as tls:
            subject = dict(item for rdn in tls.getpeercert()["subject"] for item in rdn)
            assert subject["commonName"] == "broker", node_id
        with socket.create_connection((host, int(port)), timeout=10) as plain:
            plain.sendall(b"\x00" * 64)  # what pysyncobj's plain transport would send first
            plain.settimeout(10)
            try:
                answer = plain.recv(1024)
            except ConnectionResetError:
                answer = b""
            assert answer == b"" or answer[0] == 0x15, answer  # closed, or a TLS alert
    # and the quorum is healthy through the tunnels: every broker agrees on the controller
    assert len({secured.cluster.controller(i) for i in secured.cluster.ids}) == 1


def test_a_super_user_that_is_no_broker_of_the_cluster_replicates_nothing_and_writes_no_marker(secured):
    """With an authorizer too, follower fetches, WriteTxnMarkers and AddPartitionsToTxn v4+ need the cluster's
    broker login: the brokers' own SASL user (a super user: CLUSTER_ACTION allowed) on the inter-broker listener,
    without it, gets Kafka's refusals and changes nothing."""
    topic = replicated_topic(secured, "guarded-replication", 5)
    partition = secured.cluster.partitions(topic)[0]
    leader = partition["leader_id"]
    follower = next(r for r in partition["replica_nodes"] if r != leader)
    security = ClientSecurity(ssl_context=ssl.create_default_context(cafile=str(secured.ca.path)),
                              sasl_mechanism="SCRAM-SHA-512", username="broker", password="broker-secret")

    async def pose_as_broker() -> tuple[dict, dict, dict, int]:
        async with await KafkaConnection.connect(f"127.0.0.1:{secured.secure_ports[leader]}", timeout=10,
                                                 security=security) as connection:
            fetched = await connection.request(ApiKey.FETCH, {
                "replica_id": follower, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                     "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}]})
            marked = await connection.request(ApiKey.WRITE_TXN_MARKERS, {"markers": [{
                "producer_id": 4242, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
                "topics": [{"name": topic, "partition_indexes": [0]}]}]}, version=1)
            added = await connection.request(ApiKey.ADD_PARTITIONS_TO_TXN, {"transactions": [{
                "transactional_id": "posing", "producer_id": 4242, "producer_epoch": 0, "verify_only": False,
                "topics": [{"name": topic, "partitions": [0]}]}]}, version=4)
            listed = await connection.request(ApiKey.LIST_OFFSETS, {
                "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
                    {"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]}]})
        return fetched, marked, added, listed["topics"][0]["partitions"][0]["offset"]

    fetched, marked, added, high_watermark = asyncio.run(pose_as_broker())
    part = fetched["responses"][0]["partitions"][0]
    assert (fetched["error_code"], part["error_code"], bytes(part["records"] or b"")) == \
        (ErrorCode.NONE, ErrorCode.TOPIC_AUTHORIZATION_FAILED, b"")
    assert [p["error_code"] for m in marked["markers"] for t in m["topics"] for p in t["partitions"]] == \
        [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    assert (added["error_code"], added["results_by_transaction"]) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    assert high_watermark == 5  # no marker took an offset


def test_each_broker_takes_its_renewed_certificate_through_the_metadata(secured):
    """A certificate rotated across the cluster as with Kafka: one alter per broker (Kafka takes a listener's
    keystore for one broker only, never as the cluster default), kept in the cluster's metadata; each broker
    hands its renewed certificate to new connections, and the cluster replicates on."""
    key = "listener.name.sasl_ssl.ssl.keystore.location"
    brokers = secured.cluster.brokers
    assert alter_broker_configs(brokers[1].bootstrap, {key: "/nowhere.pem"}, node="") == (
        ErrorCode.INVALID_REQUEST, f"Cannot update these configs at default cluster level, broker id must be "
                                   f"specified: [{key}]")
    renewed = {node: secured.ca.issue("broker", stem=f"broker-{node}-renewed") for node in secured.cluster.ids}
    for node, issued in renewed.items():
        assert alter_broker_configs(brokers[node].bootstrap, {key: str(issued.store)}, node=str(node)) == (0, None)
    for node, issued in renewed.items():
        wait_until(lambda node=node, issued=issued: served_serial(secured.secure_ports[node], secured.ca.path)
                   == serial_of(issued), 30,
                   message=f"broker {node} to serve its renewed certificate")
        entry = describe_broker_configs(brokers[node].bootstrap, str(node))[key]
        assert (entry["value"], entry["config_source"]) == (str(issued.store), 2)
    replicated_topic(secured, "after-rotation", 10)


def test_a_password_set_on_one_broker_is_in_the_metadata_only_encrypted(secured):
    """KIP-226's password encoder in a cluster: a password config set for one broker reaches it through the
    replicated metadata, which every broker's Raft journal holds, encrypted with that broker's
    password.encoder.secret; no file of any broker holds it in the clear."""
    key = "listener.name.sasl_ssl.ssl.truststore.password"  # a PEM truststore takes no password: nothing changes
    password = b"a-password-nobody-may-read"
    brokers = secured.cluster.brokers
    assert alter_broker_configs(brokers[2].bootstrap, {key: password.decode()}, node="2") == (0, None)
    wait_until(lambda: describe_broker_configs(brokers[2].bootstrap, "2").get(key, {}).get("config_source") == 2,
               30, message="broker 2 to run with the password")

    def files(node: int) -> list[Path]:
        return [path for path in brokers[node].data_dir.rglob("*") if path.is_file()]

    for node in secured.cluster.ids:
        wait_until(lambda node=node: any(b"encryptedPassword:" in path.read_bytes()
                                         for path in files(node) if path.parent.name == "raft"),
                   30, message=f"broker {node}'s journal to hold the encrypted password")
        assert [path for path in files(node) if password in path.read_bytes()] == []
    assert alter_broker_configs(brokers[2].bootstrap, {key: None}, node="2") == (0, None)


def test_a_broker_becomes_a_voter_and_leaves_again_while_raft_runs_inside_tls(secured):
    """KIP-853's voter changes where the brokers' Raft traffic goes inside TLS: each voter opens its tunnel to
    the new voter's Raft address when the change reaches it, so the fourth broker (the admin user asks, a super
    user: ALTER on the cluster) catches up, is registered, and is taken out of the voters again."""
    cluster = secured.cluster
    security = ClientSecurity(ssl_context=ssl.create_default_context(cafile=str(secured.ca.path)),
                              sasl_mechanism="PLAIN", username="admin", password="admin-secret")
    directory_id = bytes(range(1, 17))

    def ask(api: ApiKey, request: dict) -> dict:
        async def request_once() -> dict:
            async with await KafkaConnection.connect(f"127.0.0.1:{secured.secure_ports[1]}", timeout=30,
                                                     security=security) as connection:
                return await connection.request(api, request)
        return asyncio.run(request_once())

    def voters() -> dict[int, int]:
        """Voter id -> log end offset, as the Raft leader reports them (DescribeQuorum)."""
        answer = ask(ApiKey.DESCRIBE_QUORUM, {"topics": [
            {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})
        partition = answer["topics"][0]["partitions"][0]
        return {voter["replica_id"]: voter["log_end_offset"] for voter in partition["current_voters"]}

    # pysyncobj connects only from the greater address to the lesser: one below every voter's makes each voter
    # connect to the new one, through a tunnel that did not exist when it started
    address = next(a for a in (f"127.0.0.1:{free_port()}" for _ in range(1000))
                   if a < min(cluster.raft_addresses[i] for i in (1, 2, 3)))
    broker = cluster.add_broker(4, voters=[1, 2, 3], raft_address=address)
    try:
        host, _, port = address.rpartition(":")
        added = wait_until(lambda: (answer := ask(ApiKey.ADD_RAFT_VOTER, {
            "cluster_id": None, "timeout_ms": 30_000, "voter_id": 4, "voter_directory_id": directory_id,
            "listeners": [{"name": "RAFT", "host": host, "port": int(port)}]}))["error_code"]
            != ErrorCode.REQUEST_TIMED_OUT and answer, 60, message="broker 4 seen alive by gossip")  # refused until then
        assert added["error_code"] == 0, added
        # caught up over the tunnels: its log end is the leader's, and the controller registers it
        wait_until(lambda: len(set((ends := voters()).values())) == 1 and sorted(ends) == [1, 2, 3, 4], 60,
                   message="broker 4 a caught-up voter")
        wait_until(lambda: 4 in [b["node_id"] for b in cluster.metadata(1)["brokers"]], 60,
                   message="broker 4 registered")
        # a voter added with a directory id is removed by it only: the zero id (a configured voter's) names no voter
        zero = ask(ApiKey.REMOVE_RAFT_VOTER, {"cluster_id": None, "voter_id": 4, "voter_directory_id": bytes(16)})
        assert zero["error_code"] == ErrorCode.VOTER_NOT_FOUND, zero
        removed = ask(ApiKey.REMOVE_RAFT_VOTER, {"cluster_id": None, "voter_id": 4, "voter_directory_id": directory_id})
        assert removed["error_code"] == 0, removed
        wait_until(lambda: sorted(voters()) == [1, 2, 3], 30, message="broker 4 out of the voters")
    finally:
        broker.terminate()
        broker.stop()
