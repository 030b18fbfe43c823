"""Partition reassignment on a three-broker cluster of ours, driven by Apache Kafka 4.4's own
kafka-reassign-partitions (run through its main class): --generate proposes, --execute starts, --verify
follows it to the end, --cancel goes back; a leader that is moved off hands its leadership over, and an
idempotent acks=all producer writing all along loses no acknowledged record."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from cluster_harness import BrokerCluster
from fault_harness import AckedWorkload, check_after, create_topic
from harness import Scrape, describe_broker_configs, free_port, unique_name, wait_until
from kafka_harness import java_peer

from broker.client import KafkaConnection
from broker.protocol.api import ApiKey

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    metrics_ports = {node: free_port() for node in (1, 2, 3)}
    brokers = BrokerCluster(tmp_path_factory.mktemp("reassign"), settings={"min.insync.replicas": 2},
                            node_settings=lambda node, _port: {"metrics.listen": f"127.0.0.1:{metrics_ports[node]}"})
    brokers.metrics_ports = metrics_ports  # type: ignore[attr-defined]
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
        # the replicas without the one being added, in their current order (as Kafka's controller reverts); the
        # broker asked learns it from the quorum up to a heartbeat after the tool's answer, as a Kafka broker does
        wait_until(lambda: replicas_of(cluster, topic) == {0: [2, 1]}, 10,
                   message="the cancelled reassignment's replicas, [2, 1]")
        assert "No partition reassignments found." in reassign(cluster, "--list", through=(1, 2))
    cluster.wait_healthy(60)
    assert sorted(cluster.partitions(topic)[0]["isr_nodes"]) == [1, 2]


def alter(bootstrap: str, topic: str, replicas: list[int] | None) -> dict:
    async def ask() -> dict:
        async with await KafkaConnection.connect(bootstrap, timeout=30) as connection:
            return await connection.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {"timeout_ms": 30000, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "replicas": replicas}]}]})
    return asyncio.run(ask())


def test_an_unknown_target_broker_is_refused(cluster, tmp_path):
    topic = unique_name("invalid")
    create_topic(cluster, topic, [[1, 2]])
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0,
                                                                    "replicas": [3, 9]}]}))
    refused = java_peer(REASSIGN, "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file",
                        str(plan_file), "--execute", check=False)
    assert refused.returncode != 0
    assert "Unknown broker id 9" in refused.stdout, refused.stdout + refused.stderr  # the tool's own check
    assert replicas_of(cluster, topic) == {0: [1, 2]}


THROTTLE = 200_000  # bytes a second
FETCH_MAX_BYTES = 1048576  # replica.fetch.max.bytes: the first fetch of a quiet throttle comes whole


def test_a_throttled_move_keeps_to_its_rate_and_verify_lifts_the_throttle(cluster, tmp_path):
    """--throttle sets the brokers' rates and the topic's throttled replicas; broker 3's new replica fills at the
    rate (the leader sends, and broker 3 fetches, no faster), while the same move unthrottled is much quicker;
    --verify lifts every throttle once done; nothing is lost on the way."""
    throttled, free = unique_name("throttled"), unique_name("unthrottled")
    for topic in (throttled, free):
        create_topic(cluster, topic, [[1, 2]])
    values = {topic: produce_incompressible(cluster, topic, 3000, 1000) for topic in (throttled, free)}
    sizes = {topic: replica_bytes(cluster, 1, topic) for topic in (throttled, free)}  # (their batches differ)
    size = sizes[throttled]
    assert size > 3 * 10**6

    def move(topic: str, *args: str) -> tuple[float, int, float]:
        """Broker 3's copy of the partition, watched from before the tool runs (the tool's JVM is slow to start
        and stop): (seconds from its first bytes to the whole partition, those first bytes, the copy's rate
        after them)."""
        plan_file = tmp_path / f"{topic}.json"
        plan_file.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0,
                                                                        "replicas": [3, 2]}]}))
        samples: list[tuple[float, int]] = []

        def copied() -> bool:
            samples.append((time.monotonic(), replica_bytes(cluster, 3, topic)))
            return samples[-1][1] >= sizes[topic]

        with ThreadPoolExecutor(1) as tool:
            executed = tool.submit(reassign, cluster, "--reassignment-json-file", str(plan_file), "--execute", *args)
            wait_until(copied, 120, interval=0.05, message=f"broker 3 to copy {topic}-0")
            assert f"Successfully started partition reassignment for {topic}-0" in executed.result(120)
        first_at, first_bytes = next((at, held) for at, held in samples if held)
        copy_s = samples[-1][0] - first_at
        return copy_s, first_bytes, (sizes[topic] - first_bytes) / max(copy_s, 1e-3)

    def reassignment_bytes() -> dict[tuple[int, str], float]:
        return {(node, side): Scrape(cluster.metrics_ports[node]).value(
            f"kafka_server_brokertopicmetrics_reassignmentbytes{side}_total") for node in (1, 2, 3) for side in ("in", "out")}

    before = reassignment_bytes()
    unthrottled_s, _, _ = move(free)
    throttled_s, first_bytes, measured = move(throttled, "--throttle", str(THROTTLE))
    for node in (1, 2, 3):  # every broker of the move was given the rates
        configs = describe_broker_configs(cluster.brokers[node].bootstrap, str(node))
        assert configs["leader.replication.throttled.rate"]["value"] == str(THROTTLE)
        assert configs["follower.replication.throttled.rate"]["value"] == str(THROTTLE)
    # all but the first fetch's worth at no more than the rate
    assert first_bytes <= FETCH_MAX_BYTES + 100_000, first_bytes
    assert throttled_s >= (size - FETCH_MAX_BYTES) / THROTTLE * 0.9, (throttled_s, size)
    assert measured <= THROTTLE * 1.3, measured
    assert unthrottled_s < throttled_s / 2, (unthrottled_s, throttled_s)
    # Kafka's replication quota rates, what the leader sent and broker 3 fetched for throttled replicas: a fetch
    # let through under the bound may take the rate over it by one fetch's worth over the time measured (5 s
    # at least, with the first fetch at once)
    for node, side in ((1, "leader"), (3, "follower")):
        rate = Scrape(cluster.metrics_ports[node]).value(f"kafka_server_{side}replication_byte_rate")
        assert THROTTLE / 4 < rate <= THROTTLE + FETCH_MAX_BYTES / 5, (side, rate)

    # the move ends (broker 3 joins the ISR, broker 1 leaves) before the tool is asked: its JVM is slow to start
    wait_until(lambda: replicas_of(cluster, throttled) == {0: [3, 2]}, 60, interval=0.1, message="the move to end")
    # Kafka's ReassignmentBytesIn/OutPerSec: broker 3, the replica both moves add, fetched both partitions from
    # their leader, broker 1, which sent them; broker 2, a replica before and after, fetched nothing new
    moved = {key: value - before[key] for key, value in reassignment_bytes().items()}
    total = sum(sizes.values())
    assert total <= moved[(3, "in")] <= total * 1.05, (moved, total)
    assert total <= moved[(1, "out")] <= total * 1.05, (moved, total)
    assert moved[(2, "in")] == moved[(3, "out")] == 0, moved
    verified = reassign(cluster, "--reassignment-json-file", str(tmp_path / f"{throttled}.json"), "--verify")
    assert f"Reassignment of partition {throttled}-0 is completed" in verified, verified
    assert "Clearing broker-level throttles on brokers 1,2,3" in verified, verified
    assert f"Clearing topic-level throttles on topic {throttled}" in verified, verified
    for node in (1, 2, 3):
        configs = describe_broker_configs(cluster.brokers[node].bootstrap, str(node))
        assert "leader.replication.throttled.rate" not in configs and "follower.replication.throttled.rate" not in configs
    assert consume_values(cluster, throttled, len(values[throttled])) == values[throttled]


def replica_bytes(cluster: BrokerCluster, node: int, topic: str) -> int:
    """The size of broker ``node``'s log of partition 0 of ``topic`` (0 before it has one)."""
    directory = cluster.brokers[node].data_dir / "logs" / f"{topic}-0"
    return sum(segment.stat().st_size for segment in directory.glob("*.log")) if directory.is_dir() else 0


def produce_incompressible(cluster: BrokerCluster, topic: str, count: int, size: int) -> list[bytes]:
    values = [os.urandom(size) for _ in range(count)]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for value in values:
        producer.produce(topic, value, partition=0)
        producer.poll(0)
    assert producer.flush(30) == 0
    return values


def consume_values(cluster: BrokerCluster, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": unique_name("check"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return got
