"""Replication, transaction markers and the brokers' AddPartitionsToTxn (v4+) between brokers only, on a plain
PLAINTEXT cluster without an authorizer (the default): a client posing as a follower, as a transaction
coordinator or as a leader verifying a transaction is refused with Kafka's errors and changes nothing, while
the brokers, which log in to each other with the cluster secret, go on replicating and completing
transactions. (The same with an authorizer: test_cluster_security.py.)"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_harness import FAST_CLUSTER, SECRET, BrokerCluster
from confluent_kafka import Consumer, Producer
from harness import create_topics, unique_name, wait_until

from broker.client import ClientError, KafkaConnection
from broker.cluster.keys import derive_key
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey
from broker.security.broker_login import MECHANISM as BROKER_MECHANISM
from broker.security.broker_login import BrokerCredential

pytestmark = pytest.mark.integration

# Gossip slow to call a paused broker dead (~30 s), the leader quick to drop a follower that stopped fetching
# (1.5 s): the ISR shrink below is the leader's own, which faked fetches would hold off.
TIMINGS = {**FAST_CLUSTER, "gossip": {**FAST_CLUSTER["gossip"], "suspicion_multiplier": 300}}
LAG_TIME_MAX_MS = 1500
SHRINK_WAIT = 10.0  # well past the leader's lag limit, well before gossip's verdict


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[BrokerCluster]:
    cluster = BrokerCluster(tmp_path_factory.mktemp("broker-only"), timings=TIMINGS,
                            settings={"replica.lag.time.max.ms": LAG_TIME_MAX_MS})
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def ask_at(bootstrap: str, api_key: int, body: dict[str, Any], version: int | None = None) -> dict[str, Any]:
    async def request() -> dict[str, Any]:
        async with await KafkaConnection.connect(bootstrap, timeout=10) as connection:
            return await connection.request(api_key, body, version=version)

    return asyncio.run(request())


def ask(cluster: BrokerCluster, node_id: int, api_key: int, body: dict[str, Any],
        version: int | None = None) -> dict[str, Any]:
    return ask_at(cluster.brokers[node_id].bootstrap, api_key, body, version)


def follower_fetch(replica_id: int, topic: str, offsets: dict[int, int]) -> dict[str, Any]:
    """A Fetch as a follower sends it: the replica id, and each partition's log end as its fetch offset."""
    return {"replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                 "log_start_offset": 0, "partition_max_bytes": 1 << 20} for p, offset in offsets.items()]}]}


def end_offset(cluster: BrokerCluster, node_id: int, topic: str, partition: int = 0, *,
               committed: bool = False) -> int:
    """The high watermark (or with ``committed`` the last stable offset) the partition's leader reports."""
    answer = ask(cluster, node_id, ApiKey.LIST_OFFSETS, {
        "replica_id": -1, "isolation_level": 1 if committed else 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "timestamp": -1, "current_leader_epoch": -1}]}]})
    found = answer["topics"][0]["partitions"][0]
    assert found["error_code"] == 0, found
    return found["offset"]


def produce(bootstrap: str, topic: str, count: int, acks: str, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks})
    for number in range(count):
        producer.produce(topic, b"record %d" % number, partition=partition)
    assert producer.flush(30) == 0


def test_a_client_posing_as_a_paused_follower_is_refused_and_moves_nothing(cluster):
    topic = unique_name("followed")
    create_topics({"bootstrap.servers": cluster.bootstrap}, topic, replication=3)
    produce(cluster.bootstrap, topic, 10, "all")
    wait_until(lambda: sorted(cluster.partitions(topic)[0]["isr_nodes"]) == cluster.ids, 30, message="all in sync")
    leader = cluster.partitions(topic)[0]["leader_id"]
    paused = next(i for i in cluster.ids if i != leader)
    process = cluster.brokers[paused].proc
    os.kill(process.pid, signal.SIGSTOP)
    try:
        produce(cluster.brokers[leader].bootstrap, topic, 5, "1")  # the paused follower has 10 records, not 15
        answers: list[dict[str, Any]] = []
        moved: list[int] = []  # high watermarks past 10 seen while the paused follower was in the ISR

        def faking_until_the_leader_drops_it() -> bool:
            # the client claims the paused follower has all 15 records
            answers.append(ask(cluster, leader, ApiKey.FETCH, follower_fetch(paused, topic, {0: 15})))
            high_watermark = end_offset(cluster, leader, topic)
            if paused in cluster.partitions(topic, leader)[0]["isr_nodes"]:  # read after: it was in then too
                moved.extend([high_watermark] if high_watermark != 10 else [])
                return False
            return high_watermark == 15

        try:
            wait_until(faking_until_the_leader_drops_it, SHRINK_WAIT, interval=0.1,
                       message="the leader to drop the paused follower from the ISR")
        finally:
            assert not moved, f"faked follower fetches moved the high watermark to {moved[0]}"
        # and faking more does not bring it back
        for _ in range(5):
            answers.append(ask(cluster, leader, ApiKey.FETCH, follower_fetch(paused, topic, {0: 15})))
        assert paused not in cluster.partitions(topic, leader)[0]["isr_nodes"]
        for answer in answers:  # Kafka's answer to a follower fetch it does not take: no records, no offsets
            assert answer["error_code"] == ErrorCode.NONE
            part = answer["responses"][0]["partitions"][0]
            assert (part["error_code"], part["high_watermark"], bytes(part["records"] or b"")) == \
                (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, b"")
    finally:
        os.kill(process.pid, signal.SIGCONT)
    # the real follower, back, catches up over its broker login and rejoins
    wait_until(lambda: sorted(cluster.partitions(topic, leader)[0]["isr_nodes"]) == cluster.ids, 30,
               message="the follower back in the ISR")
    assert end_offset(cluster, leader, topic) == 15


def test_a_client_posing_as_a_coordinator_writes_no_marker_and_the_brokers_still_commit(cluster):
    topic = unique_name("txn")
    create_topics({"bootstrap.servers": cluster.bootstrap}, topic, partitions=3, replication=3)
    transactional_id = unique_name("txn-producer")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    for partition in range(3):
        producer.produce(topic, b"pending", partition=partition)
    assert producer.flush(30) == 0
    leaders = {p: part["leader_id"] for p, part in cluster.partitions(topic).items()}
    coordinator_id = ask(cluster, cluster.ids[0], ApiKey.FIND_COORDINATOR, {
        "key_type": 1, "coordinator_keys": [transactional_id]}, version=4)["coordinators"][0]["node_id"]
    state = ask(cluster, coordinator_id, ApiKey.DESCRIBE_TRANSACTIONS,
                {"transactional_ids": [transactional_id]})["transaction_states"][0]
    assert state["transaction_state"] == "Ongoing"
    before = {p: (end_offset(cluster, leaders[p], topic, p), end_offset(cluster, leaders[p], topic, p,
                                                                          committed=True)) for p in leaders}
    assert all(stable < high for high, stable in before.values())  # the open transaction holds the LSO back

    for partition, leader in leaders.items():
        answer = ask(cluster, leader, ApiKey.WRITE_TXN_MARKERS, {"markers": [{
            "producer_id": state["producer_id"], "producer_epoch": state["producer_epoch"],
            "transaction_result": True, "coordinator_epoch": 0,
            "topics": [{"name": topic, "partition_indexes": [partition]}]}]})
        codes = [p["error_code"] for m in answer["markers"] for t in m["topics"] for p in t["partitions"]]
        assert codes == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    # no marker was written: the same log ends, the transaction still open
    assert {p: (end_offset(cluster, leaders[p], topic, p), end_offset(cluster, leaders[p], topic, p,
                                                                        committed=True)) for p in leaders} == before

    producer.commit_transaction(30)  # the coordinator's own markers go to the leaders over the broker login
    wait_until(lambda: all(end_offset(cluster, leaders[p], topic, p, committed=True)
                           == end_offset(cluster, leaders[p], topic, p) > before[p][0] for p in leaders), 30,
               message="the commit markers written on every leader")
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": unique_name("reader"),
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []

        def all_read() -> bool:
            values.extend(m.value() for m in consumer.consume(10, timeout=0.5) if m.error() is None)
            return len(values) == 3

        wait_until(all_read, 30, message="the committed records")
        assert values == [b"pending"] * 3
    finally:
        consumer.close()


KEY = derive_key(SECRET, "inter-broker")


def as_broker(cluster: BrokerCluster, node_id: int, credential: BrokerCredential, api_key: int | None = None,
              body: dict[str, Any] | None = None, version: int | None = None) -> dict[str, Any] | str:
    """Logs in to broker ``node_id`` with ``credential`` and sends the request, if any: its answer (``{}``
    without one), or the login's refusal."""
    async def request() -> dict[str, Any] | str:
        connection = KafkaConnection("127.0.0.1", cluster.brokers[node_id].port, timeout=10,
                                     broker_credential=credential)
        try:
            await connection.open()
        except ClientError as exc:
            return str(exc)
        async with connection:
            return await connection.request(api_key, body, version=version) if api_key is not None else {}

    return asyncio.run(request())


def current_credential(cluster: BrokerCluster, node_id: int, at: int) -> BrokerCredential:
    """Broker ``node_id``'s credential at its current broker epoch, as broker ``at``'s refusal of a stale
    one names it."""
    stale = as_broker(cluster, at, BrokerCredential(node_id, 10**9, KEY))
    assert isinstance(stale, str) and "but is at broker epoch" in stale, stale
    return BrokerCredential(node_id, int(stale.rsplit("at broker epoch ", 1)[1].split()[0]), KEY)


def test_only_the_clusters_secret_and_a_current_broker_epoch_log_in(cluster):
    """The inter-broker login on the wire: another secret, an unregistered broker or a stale broker epoch gets
    SASL_AUTHENTICATION_FAILED (and the connection closed); a broker logged in speaks only for itself."""
    refused = as_broker(cluster, 1, BrokerCredential(2, 0, derive_key("another secret", "inter-broker")))
    assert "proof does not match" in refused
    refused = as_broker(cluster, 1, BrokerCredential(7, 0, KEY))
    assert "broker 7 logged in with broker epoch 0 but is not a registered, unfenced broker" in refused
    # broker 2's own credential, asking as broker 3: refused, as from a client
    answer = as_broker(cluster, 1, current_credential(cluster, 2, at=1), ApiKey.FETCH,
                       follower_fetch(3, "__consumer_offsets", {0: 0}))
    assert answer["responses"][0]["partitions"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_a_client_adds_nothing_to_a_transaction_with_the_brokers_add_partitions(cluster):
    """AddPartitionsToTxn v4+ is what Kafka's brokers verify a transaction's partitions with: a client gets
    CLUSTER_AUTHORIZATION_FAILED and the transaction stays as it was, while a broker of the cluster is
    answered."""
    topic = unique_name("verified")
    create_topics({"bootstrap.servers": cluster.bootstrap}, topic, partitions=2, replication=3)
    transactional_id = unique_name("verified-producer")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    try:
        producer.begin_transaction()
        producer.produce(topic, b"pending", partition=0)
        assert producer.flush(30) == 0
        coordinator_id = ask(cluster, cluster.ids[0], ApiKey.FIND_COORDINATOR, {
            "key_type": 1, "coordinator_keys": [transactional_id]}, version=4)["coordinators"][0]["node_id"]

        def described() -> dict[str, Any]:
            return ask(cluster, coordinator_id, ApiKey.DESCRIBE_TRANSACTIONS,
                       {"transactional_ids": [transactional_id]})["transaction_states"][0]

        state = described()
        assert (state["transaction_state"], state["topics"]) == ("Ongoing", [{"topic": topic, "partitions": [0]}])

        def add(partitions: list[int], verify_only: bool) -> dict[str, Any]:
            return {"transactions": [{"transactional_id": transactional_id, "producer_id": state["producer_id"],
                                      "producer_epoch": state["producer_epoch"], "verify_only": verify_only,
                                      "topics": [{"name": topic, "partitions": partitions}]}]}

        for version in (4, 5):
            for verify_only in (False, True):
                answer = ask(cluster, coordinator_id, ApiKey.ADD_PARTITIONS_TO_TXN, add([1], verify_only), version)
                assert (answer["error_code"], answer["results_by_transaction"]) == (
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED, []), (version, verify_only, answer)
        assert described() == state  # partition 1 not added

        other = next(i for i in cluster.ids if i != coordinator_id)
        answer = as_broker(cluster, coordinator_id, current_credential(cluster, other, at=coordinator_id),
                           ApiKey.ADD_PARTITIONS_TO_TXN, add([0, 1], True), version=5)
        results = answer["results_by_transaction"][0]["topic_results"][0]["results_by_partition"]
        assert {r["partition_index"]: r["partition_error_code"] for r in results} == {
            0: ErrorCode.NONE, 1: ErrorCode.TRANSACTION_ABORTABLE}
    finally:
        producer.abort_transaction(30)


# The APIs Kafka's brokers and controllers send only to each other: the ZooKeeper era's (4-7, gone in Kafka 4)
# and those a KRaft controller serves to brokers and other controllers. api key -> name.
BROKER_ONLY_APIS = {4: "LeaderAndIsr", 5: "StopReplica", 6: "UpdateMetadata", 7: "ControlledShutdown", 52: "Vote",
                    53: "BeginQuorumEpoch", 54: "EndQuorumEpoch", 56: "AlterPartition", 58: "Envelope",
                    59: "FetchSnapshot", 62: "BrokerRegistration", 63: "BrokerHeartbeat", 67: "AllocateProducerIds",
                    70: "ControllerRegistration", 73: "AssignReplicasToDirs", 82: "UpdateRaftVoter"}


def test_the_apis_only_kafkas_brokers_send_are_not_served(cluster):
    """Our brokers speak to each other over the Kafka protocol only with Fetch and WriteTxnMarkers (the quorum
    is pysyncobj's): every other broker-to-broker API of Kafka's is not advertised, and a request for one
    closes its connection, as Kafka does for an API it does not enable; the broker serves on."""
    leader = cluster.ids[0]
    advertised = {entry["api_key"] for entry in ask(cluster, leader, ApiKey.API_VERSIONS, {
        "client_software_name": "t", "client_software_version": "1"}, version=3)["api_keys"]}
    assert not advertised & set(BROKER_ONLY_APIS), [BROKER_ONLY_APIS[k] for k in advertised & set(BROKER_ONLY_APIS)]
    for api_key, name in BROKER_ONLY_APIS.items():
        with socket.create_connection(("127.0.0.1", cluster.brokers[leader].port), timeout=10) as sock:
            header = struct.pack(">hhih", api_key, 0, 1, len(b"posing")) + b"posing"
            sock.sendall(struct.pack(">i", len(header) + 8) + header + bytes(8))
            try:
                answer = sock.recv(1)
            except ConnectionResetError:
                answer = b""
            assert answer == b"", f"{name} (api key {api_key}) was answered"
    assert ask(cluster, leader, ApiKey.METADATA, {"topics": []})["brokers"]


def test_a_broken_or_misplaced_broker_login_closes_only_its_connection(cluster, broker):
    """Garbage in the login gets SASL_AUTHENTICATION_FAILED and the connection closed; a single node, which has
    no other brokers, does not take the mechanism at all; both brokers go on serving."""

    async def attempt(bootstrap: str, token: bytes) -> tuple[int, int | None, bool]:
        async with await KafkaConnection.connect(bootstrap, timeout=10) as connection:
            handshake = await connection.request(ApiKey.SASL_HANDSHAKE, {"mechanism": BROKER_MECHANISM}, version=1)
            if handshake["error_code"]:
                closed = await _closed(connection)
                return handshake["error_code"], None, closed
            answer = await connection.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token}, version=1)
            return handshake["error_code"], answer["error_code"], await _closed(connection)

    assert asyncio.run(attempt(cluster.brokers[1].bootstrap, b"not a client-first message")) == \
        (ErrorCode.NONE, ErrorCode.SASL_AUTHENTICATION_FAILED, True)
    assert asyncio.run(attempt(broker.bootstrap, b"")) == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, None, True)
    assert cluster.metadata(1)["brokers"] and ask_at(broker.bootstrap, ApiKey.METADATA, {"topics": []})["brokers"]


async def _closed(connection: KafkaConnection) -> bool:
    try:
        await connection.request(ApiKey.METADATA, {"topics": []})
    except ClientError:
        return True
    return False

