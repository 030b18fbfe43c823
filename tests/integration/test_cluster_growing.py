"""Growing and shrinking a running three-broker cluster of ours with Apache Kafka 4.4's own tools: a fourth
broker joins (gossip registers it, ``kafka-metadata-quorum add-controller`` makes it a Raft voter) and
partitions move onto it under an idempotent ``acks=all`` producer; then broker 3 is retired (its partitions
moved off, ``remove-controller``, stopped) and the cluster keeps its quorum and serves. One cluster, in order."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import pytest
from cluster_harness import BrokerCluster
from fault_harness import AckedWorkload, check_after, create_topic
from harness import unique_name, wait_until
from kafka_harness import java_peer

from broker.client import KafkaConnection
from broker.protocol.api import ApiKey
from broker.protocol.types import ZERO_UUID, uuid_text

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

pytest.importorskip("confluent_kafka")

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"


# Slower than the harness's timings: a voter change moves the quorum, and on a loaded machine the short ones make
# leaders change every few seconds, which the tools' calls would keep running into.
CALM_CLUSTER = {
    "raft": {"election_timeout_min_ms": 1000, "election_timeout_max_ms": 2000, "heartbeat_interval_ms": 100,
             "reconnect_interval_ms": 200},
    "gossip": {"protocol_period_ms": 300, "ping_timeout_ms": 150, "suspicion_multiplier": 4,
               "push_pull_interval_ms": 1000},
    "controller": {"preferred_leader_election_interval_ms": 1000, "unknown_broker_grace_ms": 5000},
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    brokers = BrokerCluster(tmp_path_factory.mktemp("growing"), settings={"min.insync.replicas": 2},
                            timings=CALM_CLUSTER)
    try:
        for node_id in brokers.ids:
            brokers.brokers[node_id].launch()
        for node_id in brokers.ids:
            brokers.brokers[node_id].wait_ready(90)  # slow to start on a loaded machine
        brokers.wait_healthy(60)
        yield brokers
    finally:
        brokers.stop()


def quorum(cluster: BrokerCluster, node_id: int = 1) -> dict:
    """DescribeQuorum through our client (cheaper than the tool's JVM where only the answer matters)."""
    async def ask() -> dict:
        async with await KafkaConnection.connect(cluster.brokers[node_id].bootstrap, timeout=30) as connection:
            return await connection.request(ApiKey.DESCRIBE_QUORUM, {"topics": [
                {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}, version=2)
    answer = asyncio.run(ask())
    return answer["topics"][0]["partitions"][0] if answer["topics"] else answer


def voter_ids(cluster: BrokerCluster, node_id: int = 1) -> list[int]:
    return sorted(voter["replica_id"] for voter in quorum(cluster, node_id).get("current_voters", []))


def voters(cluster: BrokerCluster, bootstrap: str | None = None) -> dict[int, list[str]]:
    """kafka-metadata-quorum describe --status: the voters and their endpoints."""
    printed = java_peer(QUORUM, "--bootstrap-server", bootstrap or cluster.bootstrap, "describe", "--status").stdout
    status = dict(line.split(":", 1) for line in printed.splitlines() if ":" in line)
    return {voter["id"]: voter["endpoints"] for voter in json.loads(status["CurrentVoters"])}


def replication_rows(cluster: BrokerCluster) -> dict[int, list[str]]:
    """NodeId DirectoryId LogEndOffset Lag LastFetchTimestamp LastCaughtUpTimestamp Status, per voter."""
    printed = java_peer(QUORUM, "--bootstrap-server", cluster.bootstrap, "describe", "--replication").stdout
    return {int(row[0]): row for row in (line.split() for line in printed.splitlines()[1:]) if row}


def controller_properties(cluster: BrokerCluster, node_id: int, path: Path) -> Path:
    """What add-controller reads of the new voter: its id, its Raft address as the controller listener, and its
    data directory, whose meta.properties holds its directory id."""
    path.write_text(f"node.id={node_id}\nprocess.roles=broker,controller\n"
                    f"metadata.log.dir={cluster.brokers[node_id].data_dir}\ncontroller.listener.names=RAFT\n"
                    f"listeners=RAFT://{cluster.raft_addresses[node_id]}\n"
                    "listener.security.protocol.map=RAFT:PLAINTEXT\n")
    return path


def directory_id(cluster: BrokerCluster, node_id: int) -> str:
    meta = (cluster.brokers[node_id].data_dir / "meta.properties").read_text()
    return re.search(r"^directory\.id=(\S+)$", meta, re.MULTILINE)[1]


def move(cluster: BrokerCluster, plan: dict[tuple[str, int], list[int]], plan_file: Path) -> None:
    """kafka-reassign-partitions --execute, then wait until Metadata shows every partition of the plan moved (the
    replicas are the target only once a move completed; our client, cheaper than the tool's --verify in a JVM)."""
    plan_file.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": partition, "replicas": replicas}
        for (topic, partition), replicas in plan.items()]}))
    executed = java_peer(REASSIGN, "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file",
                         str(plan_file), "--execute").stdout
    assert "Successfully started partition reassignment" in executed, executed

    def moved() -> bool:
        topics = {t["name"]: {p["partition_index"]: p["replica_nodes"] for p in t["partitions"]}
                  for t in cluster.metadata(cluster.running()[0])["topics"]}
        return all(topics[topic][partition] == replicas for (topic, partition), replicas in plan.items())

    wait_until(moved, 90, interval=0.5, message="the partitions to move")


def described_brokers(cluster: BrokerCluster, node_id: int) -> dict[int, bool]:
    """DescribeCluster v2 with the fenced brokers (KIP-1073): broker id -> whether it is fenced."""
    answer = ask(cluster, ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False,
                                                     "include_fenced_brokers": True}, node_id)
    return {b["broker_id"]: b["is_fenced"] for b in answer["brokers"]}


def ask(cluster: BrokerCluster, api: ApiKey, request: dict, node_id: int = 1) -> dict:
    async def request_once() -> dict:
        async with await KafkaConnection.connect(cluster.brokers[node_id].bootstrap, timeout=30) as connection:
            return await connection.request(api, request)
    return asyncio.run(request_once())


def voter_change(cluster: BrokerCluster, api: ApiKey, request: dict) -> dict:
    return ask(cluster, api, {"cluster_id": None, **request})


def test_a_fourth_broker_joins_becomes_a_voter_and_takes_partitions_under_acks_all_load(cluster, tmp_path):
    topic = unique_name("growing")
    create_topic(cluster, topic, [[1, 2], [2, 3], [3, 1]])
    workload = AckedWorkload(cluster.bootstrap, topic, 3, rate=50).start()
    try:
        workload.wait_for_acks(100)
        cluster.add_broker(4, voters=[1, 2, 3])
        # running, but no voter, so without the metadata: not registered, clients are not sent to it, and as
        # Kafka's broker it accepts none before it has caught up (it would tell them of no broker at all)
        assert voter_ids(cluster) == [1, 2, 3]
        assert 4 not in [b["node_id"] for b in cluster.metadata(1)["brokers"]]
        assert not cluster.brokers[4].answers()

        properties = controller_properties(cluster, 4, tmp_path / "controller-4.properties")

        refusals: list[str] = []

        # not through broker 4, which accepts no connection yet
        founders = ",".join(cluster.brokers[i].bootstrap for i in (1, 2, 3))

        def add_controller() -> str | None:
            """The tool's output once it added the voter (refused while gossip has not found broker 4 yet)."""
            run = java_peer(QUORUM, "--bootstrap-server", founders, "--command-config", str(properties),
                            "add-controller", check=False)
            if run.returncode != 0:
                refusals.append(run.stdout[-500:] + run.stderr[-1500:])
            return run.stdout if run.returncode == 0 else None

        try:
            added = wait_until(add_controller, 150, interval=1, message="add-controller to add broker 4")
        except AssertionError:
            raise AssertionError(f"add-controller refused: {refusals}") from None
        assert f"Added controller 4 with directory id {directory_id(cluster, 4)}" in added, added
        # it caught up with the metadata, and then the controller registered it
        wait_until(lambda: 4 in [b["node_id"] for b in cluster.metadata(1)["brokers"]], 60,
                   message="broker 4 in Metadata")
        wait_until(cluster.brokers[4].answers, 30, message="broker 4 to accept clients")
        wait_until(lambda: 4 in [b["node_id"] for b in cluster.metadata(4)["brokers"]], 30,
                   message="broker 4 to know itself registered")
        rows = replication_rows(cluster)
        assert sorted(rows) == [1, 2, 3, 4]
        assert rows[4][1] == directory_id(cluster, 4)
        assert rows[4][-1] in ("Follower", "Leader")

        # load onto it: every partition gets a replica on broker 4, its preferred leader in two of them
        move(cluster, {(topic, 0): [4, 2], (topic, 1): [2, 4], (topic, 2): [4, 1]}, tmp_path / "grow.json")
        assert {p: part["replica_nodes"] for p, part in cluster.partitions(topic).items()} == \
            {0: [4, 2], 1: [2, 4], 2: [4, 1]}
        workload.wait_for_acks(100, after=time.monotonic())
    finally:
        workload.stop()
    check_after(cluster, workload, tmp_path / "scratch")
    # a second add of the same voter is Kafka's DUPLICATE_VOTER
    again = voter_change(cluster, ApiKey.ADD_RAFT_VOTER, {
        "timeout_ms": 10000, "voter_id": 4, "voter_directory_id": b"\x01" * 16,
        "listeners": [{"name": "RAFT", "host": "127.0.0.1", "port": 1}]})
    assert again["error_code"] == 126, again


def test_a_broker_is_retired_and_the_cluster_keeps_its_quorum(cluster, tmp_path):
    # every replica on broker 3 goes to broker 4 (which joined in the test before)
    plan = {(topic["name"], part["partition_index"]): [4 if r == 3 else r for r in part["replica_nodes"]]
            for topic in cluster.metadata(1)["topics"] for part in topic["partitions"] if 3 in part["replica_nodes"]}
    assert plan, "broker 3 holds no replica"
    move(cluster, plan, tmp_path / "retire.json")
    assert not [(t["name"], p["partition_index"]) for t in cluster.metadata(1)["topics"] for p in t["partitions"]
                if 3 in p["replica_nodes"]]

    # a configured voter has no directory id (as in a static Kafka quorum): the wrong one names no voter
    wrong = voter_change(cluster, ApiKey.REMOVE_RAFT_VOTER, {"voter_id": 3, "voter_directory_id": b"\x01" * 16})
    assert wrong["error_code"] == 127, wrong
    removed = java_peer(QUORUM, "--bootstrap-server", cluster.bootstrap, "remove-controller", "--controller-id", "3",
                        "--controller-directory-id", uuid_text(ZERO_UUID)).stdout
    assert re.search(r"Removed ?KRaft controller 3", removed), removed
    # broker 3, running until it is stopped below, no longer follows the quorum, yet answers as Kafka's brokers
    # do: with the leader's view (it asks the others until the leader answers). When it refused, the tool's admin
    # client, which retries on the node it is connected to, stalled on it until its call timed out.
    # (it refused once it had noticed it no longer hears from a leader: within a few seconds in most runs)
    assert voter_ids(cluster, 3) == [1, 2, 4]
    assert voters(cluster) == {i: [f"RAFT://{cluster.raft_addresses[i]}"] for i in (1, 2, 4)}
    cluster.brokers[3].terminate()
    cluster.brokers[3].stop()
    wait_until(lambda: 3 not in [b["node_id"] for b in cluster.metadata(1)["brokers"]], 30,
               message="broker 3 gone from Metadata")

    # fenced but still registered, until kafka-cluster unregister drops it (UnregisterBroker)
    assert described_brokers(cluster, 2) == {1: False, 2: False, 3: True, 4: False}
    endpoints = java_peer(CLUSTER_TOOL, "list-endpoints", "--bootstrap-server", cluster.bootstrap,
                          "--include-fenced-brokers").stdout
    assert re.search(r"^3\s.*\bfenced\b", endpoints, re.MULTILINE | re.IGNORECASE), endpoints
    unregistered = java_peer(CLUSTER_TOOL, "unregister", "--bootstrap-server", cluster.bootstrap, "--id", "3")
    assert "3 is no longer registered." in unregistered.stdout, unregistered.stdout
    wait_until(lambda: all(3 not in described_brokers(cluster, node) for node in (1, 2, 4)), 30,
               message="broker 3 unregistered everywhere")
    again = java_peer(CLUSTER_TOOL, "unregister", "--bootstrap-server", cluster.bootstrap, "--id", "3", check=False)
    assert again.returncode != 0 and "BrokerIdNotRegisteredException" in again.stdout + again.stderr, again

    # the three voters left keep a quorum: with broker 1 stopped too, 2 and 4 still elect and serve
    cluster.brokers[1].terminate()
    cluster.brokers[1].stop()
    wait_until(lambda: cluster.controller(2) in (2, 4), 30, interval=0.2, message="a controller among 2 and 4")
    topic = unique_name("after")
    # (not fault_harness.create_topic, which waits for every partition to have all its replicas in sync)
    assert cluster.create_topic(2, topic, 2, 2)["error_code"] == 0  # on the live brokers: 2 and 4
    wait_until(lambda: all(p["leader_id"] in (2, 4) for p in cluster.partitions(topic, 2).values()), 30,
               message="the new topic's leaders")
    workload = AckedWorkload(cluster.bootstrap, topic, 2, rate=50).start()
    try:
        workload.wait_for_acks(100)
    finally:
        workload.stop()
    cluster.brokers[1].start()
    check_after(cluster, workload, tmp_path / "scratch")

    # a broker still running that is unregistered leaves its leaderships, and is registered again at once, as
    # the controller sees it alive (a new broker epoch)
    led = wait_until(lambda: {p: part["leader_epoch"] for p, part in cluster.partitions(topic, 4).items()
                              if part["leader_id"] == 2}, 30, message="a partition led by broker 2")
    assert ask(cluster, ApiKey.UNREGISTER_BROKER, {"broker_id": 2}, 4)["error_code"] == 0
    wait_until(lambda: all(cluster.partitions(topic, 4)[p]["leader_epoch"] > epoch for p, epoch in led.items()),
               30, message="broker 2's leaderships moved")
    wait_until(lambda: described_brokers(cluster, 4).get(2) is False, 30, message="broker 2 registered again")
