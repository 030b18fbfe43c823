"""Partition leadership in a three-broker cluster of ours, operated as Kafka's are: Kafka 4.4's
kafka-leader-election (ElectLeaders, preferred and unclean), controlled shutdown on SIGTERM (a broker hands
its leaderships to in-sync followers before it stops, even when it is a partition's last ISR member), and a
rolling restart of every broker under an idempotent acks=all load, after which auto.leader.rebalance.enable
moves leadership back to the preferred replicas.

One cluster for the module. It starts with auto.leader.rebalance.enable off, so that a leadership moved away
stays away until the tool moves it back; the rolling restart turns it on broker by broker.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cluster_harness import FAST_CLUSTER, BrokerCluster
from fault_harness import (
    AckedWorkload,
    check_acknowledged,
    check_replicas_identical,
    check_sequence_kept,
    create_topic,
    read_topic,
)
from harness import wait_until
from kafka_harness import java_peer

# alone: its hand-overs are bounded by Raft and shutdown timeouts that a second worker's load can stretch
pytestmark = [pytest.mark.integration, pytest.mark.alone]

ELECTION_TOOL = "org.apache.kafka.tools.LeaderElectionCommand"
# the controller's imbalance check follows the brokers' leader.imbalance.check.interval.seconds here
TIMINGS = {**FAST_CLUSTER, "controller": {"unknown_broker_grace_ms": 3000}}
AUTO_REBALANCE = {"auto.leader.rebalance.enable": True, "leader.imbalance.check.interval.seconds": 1}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    brokers = BrokerCluster(tmp_path_factory.mktemp("leadership"), timings=TIMINGS,
                            settings={"auto.leader.rebalance.enable": False, **SHUTDOWN_RETRIES})
    try:
        brokers.start()
        yield brokers
    finally:
        brokers.stop()


def elect(cluster: BrokerCluster, *args: str, check: bool = True) -> str:
    completed = java_peer(ELECTION_TOOL, "--bootstrap-server", cluster.bootstrap, *args, check=check)
    return completed.stdout + completed.stderr


def leaders(cluster: BrokerCluster, topic: str, node_id: int | None = None) -> dict[int, int]:
    return {index: p["leader_id"] for index, p in cluster.partitions(topic, node_id).items()}


HANDED_OVER = '"event": "controlled shutdown: leaderships handed over"'
NOT_FENCED = '"event": "controlled shutdown: the controller did not fence this broker in time'
# the harness's 5 s bound, made of other attempts and backoffs than its own, so that a test can tell them apart
SHUTDOWN_RETRIES = {"controlled.shutdown.max.retries": 2, "controlled.shutdown.retry.backoff.ms": 2500}


def controlled_stop(cluster: BrokerCluster, node_id: int) -> float:
    """SIGTERM one broker and wait for it to exit; how long it took. The broker waited, before it stopped, until
    the metadata it applied had fenced it (its leaderships moved, it left every ISR)."""
    broker = cluster.brokers[node_id]
    handed_over = broker.log_path.read_text().count(HANDED_OVER)
    started = time.monotonic()
    code = broker.stop(timeout=30)
    took = time.monotonic() - started
    assert code == 0, broker.log_text()
    assert broker.log_path.read_text().count(HANDED_OVER) == handed_over + 1, broker.log_text()
    return took


def check_handed_over(cluster: BrokerCluster, node_id: int, within: float = 0.5) -> None:
    """A broker that exited had handed its leaderships over: one still up sees none of them a moment later (one
    Raft heartbeat takes the commit to it), where a broker that just died would still be named their leader
    until gossip declared it dead."""
    other = cluster.running()[0]
    wait_until(lambda: not any(p["leader_id"] == node_id for t in cluster.metadata(other)["topics"]
                               for p in t["partitions"]),
               within, interval=0.02, message=f"broker {node_id}'s leaderships to have moved when it exited")


def test_preferred_election_with_kafkas_tool(cluster):
    create_topic(cluster, "elect-preferred", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    took = controlled_stop(cluster, 1)
    assert took < 10
    check_handed_over(cluster, 1)
    moved = leaders(cluster, "elect-preferred")
    assert moved[0] in (2, 3) and (moved[1], moved[2]) == (2, 3)
    cluster.restart(1)
    cluster.wait_healthy()
    assert leaders(cluster, "elect-preferred")[0] != 1  # no automatic rebalance here

    printed = elect(cluster, "--election-type", "PREFERRED", "--topic", "elect-preferred", "--partition", "0")
    assert "Successfully completed leader election (PREFERRED) for partitions elect-preferred-0" in printed
    wait_until(lambda: leaders(cluster, "elect-preferred", 1) == {0: 1, 1: 2, 2: 3}, 5, interval=0.05,
               message="broker 1 to see itself elected")
    again = elect(cluster, "--election-type", "PREFERRED", "--topic", "elect-preferred", "--partition", "0")
    assert "Valid replica already elected for partitions elect-preferred-0" in again

    # the __consumer_offsets partitions broker 1 is the preferred replica of moved too; every one goes back
    offsets = cluster.partitions("__consumer_offsets")
    displaced = sorted(i for i, p in offsets.items() if p["leader_id"] != p["replica_nodes"][0])
    assert displaced
    everything = elect(cluster, "--election-type", "PREFERRED", "--all-topic-partitions")
    assert "Successfully completed leader election (PREFERRED) for partitions" in everything
    assert all(f"__consumer_offsets-{i}" in everything for i in displaced), everything
    assert "elect-preferred" not in everything  # elections not needed are left out of an all-partitions answer
    # the tool returns once the Raft leader committed the elections; each broker applies them within a heartbeat
    wait_until(lambda: all(p["leader_id"] == p["replica_nodes"][0] for i in cluster.ids
                           for t in cluster.metadata(i)["topics"] for p in t["partitions"]),
               5, interval=0.05, message="every broker to see every partition on its preferred leader")


def test_unclean_election_and_the_last_isr_member_still_stops(cluster):
    create_topic(cluster, "elect-unclean", [[2, 3]])
    cluster.brokers[3].stop(timeout=30)
    wait_until(lambda: cluster.partitions("elect-unclean")[0]["isr_nodes"] == [2], 10, interval=0.05,
               message="broker 3 to leave the ISR")
    # broker 2 is the last ISR member: it stops all the same, leaving the partition without a leader (and
    # broker 1 alone, without a Raft quorum, until broker 3 is back)
    took = controlled_stop(cluster, 2)
    assert took < 10
    cluster.restart(3)
    check_handed_over(cluster, 2, within=20)
    wait_until(lambda: 3 in [b["node_id"] for b in cluster.metadata(1)["brokers"]], 20, interval=0.1,
               message="broker 3 to be registered again")
    offline = cluster.partitions("elect-unclean", 1)[0]
    assert (offline["leader_id"], offline["isr_nodes"]) == (-1, [2])

    refused = elect(cluster, "--election-type", "PREFERRED", "--topic", "elect-unclean", "--partition", "0",
                    check=False)
    assert "PreferredLeaderNotAvailableException" in refused
    printed = elect(cluster, "--election-type", "UNCLEAN", "--topic", "elect-unclean", "--partition", "0")
    assert "Successfully completed leader election (UNCLEAN) for partitions elect-unclean-0" in printed
    elected = cluster.partitions("elect-unclean", 1)[0]
    assert (elected["leader_id"], elected["isr_nodes"]) == (3, [3])
    needless = elect(cluster, "--election-type", "UNCLEAN", "--topic", "elect-unclean", "--partition", "0")
    assert "Valid replica already elected for partitions elect-unclean-0" in needless

    cluster.restart(2)
    cluster.wait_healthy()


def test_rolling_restart_under_load_loses_nothing_then_leadership_returns_to_preferred(cluster, tmp_path: Path):
    create_topic(cluster, "rolling", [[1, 2, 3], [2, 3, 1], [3, 1, 2]], **{"min.insync.replicas": "2"})
    workload = AckedWorkload(cluster.bootstrap, "rolling", 3, rate=150).start()
    try:
        workload.wait_for_acks(100)
        for node_id in cluster.ids:
            before = time.monotonic()
            controlled_stop(cluster, node_id)
            check_handed_over(cluster, node_id)
            workload.wait_for_acks(50, after=before)  # the two brokers left take the load
            cluster.brokers[node_id].extra_config.update(AUTO_REBALANCE)
            cluster.restart(node_id)
            cluster.wait_healthy()
        workload.wait_for_acks(100, after=time.monotonic())
    finally:
        workload.stop()
    # librdkafka retried through every hand-over: no delivery failed, no error but its own transport ones
    check_sequence_kept(workload)
    assert not workload.errors, workload.errors[:5]
    assert all(code < 0 for code in workload.error_codes), workload.error_codes
    records = read_topic(cluster.bootstrap, "rolling", 3)
    check_acknowledged(workload, records, check_replicas_identical(cluster, "rolling", records, tmp_path / "copies"))

    # the last broker restarted led nothing when it came back; the controller gives it its partitions back
    def preferred_everywhere() -> bool:
        return all(p["leader_id"] == p["replica_nodes"][0] for t in cluster.metadata(1)["topics"]
                   for p in t["partitions"])
    wait_until(preferred_everywhere, 20, interval=0.2, message="every partition to be led by its preferred replica")


def test_a_hand_over_no_controller_can_approve_is_waited_for_its_retries_and_backoffs(cluster):
    """The controller, with both other brokers stalled, cannot fence itself (no quorum commits it): told to stop,
    it waits controlled.shutdown.max.retries times controlled.shutdown.retry.backoff.ms, then stops all the same."""
    cluster.wait_healthy()
    controller = cluster.controller()
    broker = cluster.brokers[controller]
    stalled = [node for node in cluster.ids if node != controller]
    not_fenced = broker.log_path.read_text().count(NOT_FENCED)
    with cluster.paused(stalled[0]), cluster.paused(stalled[1]):
        started = time.monotonic()
        code = broker.stop(timeout=30)
        took = time.monotonic() - started
    assert code == 0, broker.log_text()
    warned = [line for line in broker.log_path.read_text().splitlines() if NOT_FENCED in line]
    assert len(warned) == not_fenced + 1, broker.log_text()
    assert '"attempts": 2' in warned[-1] and '"backoff_ms": 2500' in warned[-1], warned[-1]
    assert 5.0 <= took < 15, took
    cluster.restart(controller)
    cluster.wait_healthy(60)


def test_a_stopping_controller_takes_its_fence_to_the_other_brokers_before_it_exits(tmp_path: Path):
    """The controller (the Raft leader) fences itself when told to stop, and its followers learn of that commit only
    from a later append of its own: stopping as soon as it applied the fence, it left them naming it the leader of
    its partitions until a new Raft leader, an election timeout later, committed an entry of its own term (the
    rolling restart's hand-over check failed so when the new election took over 0.5 s). Here an election takes at
    least 3 s: the other brokers see the leaderships moved within check_handed_over's 0.5 s only if the stopping
    controller took the commit to them (a barrier appended after the fence) before it stopped."""
    slow_elections = {**TIMINGS, "raft": {**FAST_CLUSTER["raft"], "election_timeout_min_ms": 3000,
                                          "election_timeout_max_ms": 4000}}
    cluster = BrokerCluster(tmp_path / "slow-elections", timings=slow_elections,
                            settings={"auto.leader.rebalance.enable": False, **SHUTDOWN_RETRIES})
    try:
        cluster.start()
        create_topic(cluster, "fenced", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
        cluster.wait_healthy()
        controller = cluster.controller()
        controlled_stop(cluster, controller)
        check_handed_over(cluster, controller)
    finally:
        cluster.stop()
