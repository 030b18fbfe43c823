"""Partition reassignment on a three-broker cluster of ours, driven by Apache Kafka 4.4's own
kafka-reassign-partitions (run through its main class): --generate proposes, --execute starts, --verify
follows it to the end, --cancel goes back; a leader that is moved off hands its leadership over, and an
idempotent acks=all producer writing all along loses no acknowledged record."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest
from cluster_harness import BrokerCluster
from fault_harness import AckedWorkload, check_after, create_topic
from harness import unique_name, wait_until
from kafka_harness import java_peer

from broker.client import KafkaConnection
from broker.protocol.api import ApiKey

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

pytest.importorskip("confluent_kafka")

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    brokers = BrokerCluster(tmp_path_factory.mktemp("reassign"), settings={"min.insync.replicas": 2})
    try:
        brokers.start()
        yield brokers
    finally:
        brokers.stop()


def reassign(cluster: BrokerCluster, *args: str, through: tuple[int, ...] = ()) -> str:
    """The tool's output, bootstrapped at the brokers ``through`` (default: all running)."""
    bootstrap = ",".join(cluster.brokers[i].bootstrap for i in through) if through else cluster.bootstrap
    return java_peer(REASSIGN, "--bootstrap-server", bootstrap, *args).stdout


def replicas_of(cluster: BrokerCluster, topic: str) -> dict[int, list[int]]:
    return {p: part["replica_nodes"] for p, part in cluster.partitions(topic).items()}


def test_moving_every_partition_off_a_broker_under_acks_all_load(cluster, tmp_path):
    topic = unique_name("moving")
    create_topic(cluster, topic, [[1, 2], [2, 1], [1, 3]])  # broker 1 leads partitions 0 and 2
    workload = AckedWorkload(cluster.bootstrap, topic, 3).start()
    try:
        workload.wait_for_acks(150)
        topics_file = tmp_path / "topics.json"
        topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))

        def generate() -> str | None:
            """The proposal, asked again should a broker of the loaded machine be fenced for a moment (the tool
            then refuses: too few brokers for the replication factor)."""
            run = java_peer(REASSIGN, "--bootstrap-server", cluster.bootstrap, "--topics-to-move-json-file",
                            str(topics_file), "--broker-list", "2,3", "--generate", check=False)
            return run.stdout if run.returncode == 0 else None

        generated = wait_until(generate, 60, interval=0.5, message="kafka-reassign-partitions --generate")
        current, proposed = (json.loads(part.strip().splitlines()[0]) for part in generated.split(
            "Current partition replica assignment")[1].split("Proposed partition reassignment configuration"))
        assert {p["partition"]: p["replicas"] for p in current["partitions"]} == {0: [1, 2], 1: [2, 1], 2: [1, 3]}
        plan = {p["partition"]: p["replicas"] for p in proposed["partitions"]}
        assert all(sorted(replicas) == [2, 3] for replicas in plan.values()), plan
        plan_file = tmp_path / "plan.json"
        plan_file.write_text(json.dumps(proposed))

        executed = reassign(cluster, "--reassignment-json-file", str(plan_file), "--execute")
        assert f"Successfully started partition reassignments for {topic}-0,{topic}-1,{topic}-2" in executed

        def verified() -> bool:
            return len(re.findall(rf"Reassignment of partition {topic}-\d is completed",
                                  reassign(cluster, "--reassignment-json-file", str(plan_file), "--verify"))) == 3

        wait_until(verified, 60, interval=0.5, message="kafka-reassign-partitions --verify to say completed")
        assert replicas_of(cluster, topic) == plan
        workload.wait_for_acks(150, after=time.monotonic())  # the moved partitions take writes
    finally:
        workload.stop()
    # broker 1 led two of them: leadership left it with a new epoch, and nothing acknowledged was lost
    partitions = cluster.partitions(topic)
    assert all(part["leader_id"] in (2, 3) for part in partitions.values())
    assert partitions[0]["leader_epoch"] >= 1 and partitions[2]["leader_epoch"] >= 1
    check_after(cluster, workload, tmp_path / "scratch")


def test_a_reassignment_to_a_broker_that_is_down_waits_and_cancel_goes_back(cluster, tmp_path):
    topic = unique_name("cancel")
    create_topic(cluster, topic, [[1, 2]])
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0,
                                                                    "replicas": [3, 2]}]}))
    with cluster.paused(3):  # (the tool is bootstrapped elsewhere: a stopped process accepts and never answers)
        # The tool itself refuses a broker it does not see alive, so the request is our client's; Kafka's
        # controller takes a registered broker that is fenced as a target, as ours does.
        wait_until(lambda: cluster.metadata(1)["brokers"] and 3 not in
                   [b["node_id"] for b in cluster.metadata(1)["brokers"]], 30, message="broker 3 to be fenced")
        answer = alter(cluster.brokers[1].bootstrap, topic, [3, 2])
        assert answer["responses"][0]["partitions"][0]["error_code"] == 0, answer
        status = reassign(cluster, "--reassignment-json-file", str(plan_file), "--verify", through=(1, 2))
        assert f"Reassignment of partition {topic}-0 is still in progress." in status
        assert replicas_of(cluster, topic) == {0: [3, 2, 1]}  # the target, then the replica being removed
        listed = reassign(cluster, "--list", through=(1, 2))
        assert re.search(rf"{topic}-0: replicas: 3,2,1\. adding: 3\. removing: 1\.", listed), listed
        # throttles kept: clearing them asks every broker of the plan, and broker 3 is not answering
        cancelled = reassign(cluster, "--reassignment-json-file", str(plan_file), "--cancel", "--preserve-throttles",
                             through=(1, 2))
        assert f"Successfully cancelled partition reassignment for: {topic}-0" in cancelled
        # the replicas without the one being added, in their current order (as Kafka's controller reverts)
        assert replicas_of(cluster, topic) == {0: [2, 1]}
        assert "No partition reassignments found." in reassign(cluster, "--list", through=(1, 2))
    cluster.wait_healthy(60)
    assert sorted(cluster.partitions(topic)[0]["isr_nodes"]) == [1, 2]


def alter(bootstrap: str, topic: str, replicas: list[int] | None) -> dict:
    async def ask() -> dict:
        async with await KafkaConnection.connect(bootstrap, timeout=30) as connection:
            return await connection.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {"timeout_ms": 30000, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "replicas": replicas}]}]})
    return asyncio.run(ask())


def test_an_unknown_target_broker_and_a_throttle_are_refused(cluster, tmp_path):
    topic = unique_name("invalid")
    create_topic(cluster, topic, [[1, 2]])
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0,
                                                                    "replicas": [3, 9]}]}))
    refused = java_peer(REASSIGN, "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file",
                        str(plan_file), "--execute", check=False)
    assert refused.returncode != 0
    assert "Unknown broker id 9" in refused.stdout, refused.stdout + refused.stderr  # the tool's own check
    # --throttle: our replica fetching has no rate limit, so the brokers refuse the rates rather than ignore them,
    # and the tool stops before it moves anything
    plan_file.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0,
                                                                    "replicas": [3, 2]}]}))
    throttled = java_peer(REASSIGN, "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file",
                          str(plan_file), "--execute", "--throttle", "1000000", check=False)
    assert throttled.returncode != 0
    assert "This broker does not throttle replication" in throttled.stdout, throttled.stdout + throttled.stderr
    assert replicas_of(cluster, topic) == {0: [1, 2]}
