"""Replication and transaction markers between brokers only, on a plain PLAINTEXT cluster without an
authorizer (the default): a client posing as a follower or as a transaction coordinator is refused with
Kafka's errors and changes nothing, while the brokers, which log in to each other with the cluster secret,
go on replicating and completing transactions. (The same with an authorizer: test_cluster_security.py.)"""

from __future__ import annotations

import asyncio
import os
import signal
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


def test_only_the_clusters_secret_and_a_current_broker_epoch_log_in(cluster):
    """The inter-broker login on the wire: another secret, an unregistered broker or a stale broker epoch gets
    SASL_AUTHENTICATION_FAILED (and the connection closed); a broker logged in speaks only for itself."""
    key = derive_key(SECRET, "inter-broker")

    async def log_in(credential: BrokerCredential, then: dict[str, Any] | None = None) -> dict[str, Any] | str:
        connection = KafkaConnection("127.0.0.1", cluster.brokers[1].port, timeout=10, broker_credential=credential)
        try:
            await connection.open()
        except ClientError as exc:
            return str(exc)
        async with connection:
            return await connection.request(ApiKey.FETCH, then) if then else {}

    refused = asyncio.run(log_in(BrokerCredential(2, 0, derive_key("another secret", "inter-broker"))))
    assert "proof does not match" in refused
    refused = asyncio.run(log_in(BrokerCredential(7, 0, key)))
    assert "broker 7 logged in with broker epoch 0 but is not a registered, unfenced broker" in refused
    stale = asyncio.run(log_in(BrokerCredential(2, 10**9, key)))
    assert "but is at broker epoch" in stale
    current = int(stale.rsplit("at broker epoch ", 1)[1].split()[0])
    # broker 2's own credential, asking as broker 3: refused, as from a client
    answer = asyncio.run(log_in(BrokerCredential(2, current, key), follower_fetch(3, "__consumer_offsets", {0: 0})))
    assert answer["responses"][0]["partitions"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED


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

