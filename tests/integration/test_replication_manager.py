"""ReplicaManager edge cases with two real brokers in one event loop (real TCP, real logs, real handlers).

Leadership is assigned by hand through the StaticClusterBroker of replication_harness.py.
"""

from __future__ import annotations

import asyncio

import pytest
from harness import free_port, poll_until
from replication_harness import StaticClusterBroker

from broker.client import KafkaConnection
from broker.cluster.replication import ReplicaManager
from broker.config import BrokerConfig
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey
from broker.protocol.records import Record, build_batch

pytestmark = pytest.mark.integration

TOPIC = "t"


@pytest.fixture
async def brokers(tmp_path):
    ports = {1: free_port(), 2: free_port()}
    started = []
    for node_id, port in ports.items():
        config = BrokerConfig.load(None, listen=f"127.0.0.1:{port}", data_dir=str(tmp_path / f"n{node_id}"),
                                   node_id=node_id,
                                   overrides={"replica.lag.time.max.ms": 1000, "offsets.topic.num.partitions": 1})
        broker = StaticClusterBroker(config, ports)
        await broker.start()
        broker.create_topic(TOPIC, 1, {})
        started.append(broker)
    yield started
    for broker in started:
        await broker.stop()


async def produce(broker: StaticClusterBroker, texts: list[str], *, acks: int = -1, timeout_ms: int = 10000):
    batch = build_batch([Record(i, 0, None, text.encode()) for i, text in enumerate(texts)])
    async with await KafkaConnection.connect(f"127.0.0.1:{broker.port}") as connection:
        response = await connection.request(ApiKey.PRODUCE, {
            "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
        })
    return response["responses"][0]["partition_responses"][0]


def log_of(broker: StaticClusterBroker):
    return broker.partition_log(TOPIC, 0)


async def test_producers_waiting_when_leadership_moves_are_told_not_leader(brokers):
    leader, follower = brokers
    leader.lead(TOPIC, 0, 0, [1, 2], [1, 2])  # 2 is in the ISR but does not fetch: nothing commits
    waiting = asyncio.create_task(produce(leader, ["x"], timeout_ms=30000))
    await poll_until(lambda: log_of(leader).log_end_offset == 1, message="the append")
    assert not waiting.done()
    leader.follow(TOPIC, 0, 1, 2, [1, 2])
    answer = await asyncio.wait_for(waiting, 5)
    assert answer["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_isr_change_through_an_awaitable_callback_and_a_refusal(brokers):
    leader, follower = brokers
    proposals: list[tuple[list[int], int]] = []
    refuse = True

    async def propose_isr(topic: str, partition: int, isr: list[int], leader_epoch: int) -> bool:
        await asyncio.sleep(0)
        proposals.append((isr, leader_epoch))
        if refuse:
            return False
        return await leader.cluster_view.propose_isr(topic, partition, isr, leader_epoch)

    await leader.replica_manager.stop()
    leader.replica_manager = ReplicaManager(leader, propose_isr=propose_isr)
    leader.services.replicas.replication = leader.replica_manager
    await leader.replica_manager.start()
    leader.lead(TOPIC, 0, 3, [1, 2], [1])
    assert (await produce(leader, ["a", "b"]))["error_code"] == 0  # alone in the ISR
    follower.follow(TOPIC, 0, 3, 1, [1, 2])
    await poll_until(lambda: proposals, message="an expansion proposal")
    assert proposals[0] == ([1, 2], 3)
    state = leader.replica_manager.leader_state(TOPIC, 0)
    assert state.isr == (1,)
    refuse = False
    await poll_until(lambda: state.isr == (1, 2), message="the retried proposal to commit")
    assert leader.cluster_view.partition_leader(TOPIC, 0)[3] == [1, 2]


async def test_metadata_update_in_the_same_epoch_drops_a_dead_follower(brokers):
    """The controller removes a dead broker from the ISR itself; the leader learns it through
    become_leader with the same epoch, and the high watermark moves on without waiting for lag."""
    leader, follower = brokers
    leader.lead(TOPIC, 0, 0, [1, 2], [1, 2])
    waiting = asyncio.create_task(produce(leader, ["x"], timeout_ms=30000))
    await poll_until(lambda: log_of(leader).log_end_offset == 1, message="the append")
    leader.lead(TOPIC, 0, 0, [1, 2], [1])
    answer = await asyncio.wait_for(waiting, 5)
    assert answer["error_code"] == 0
    assert log_of(leader).high_watermark == 1


async def test_follower_behind_the_leader_log_start_continues_there(brokers):
    leader, follower = brokers
    leader.lead(TOPIC, 0, 0, [1, 2], [1])
    for round_ in range(4):
        assert (await produce(leader, [f"{round_}-{i}" for i in range(5)]))["error_code"] == 0
    assert log_of(leader).delete_records_before(12) == 12
    follower.follow(TOPIC, 0, 0, 1, [1, 2])
    await poll_until(lambda: log_of(follower).log_end_offset == 20, message="the follower to fetch from offset 12")
    follower_log = log_of(follower)
    assert follower_log.read(12, 1 << 20) == log_of(leader).read(12, 1 << 20)
    await poll_until(lambda: follower_log.log_start_offset == 12, message="the log start to follow the leader's")
    await poll_until(lambda: leader.replica_manager.leader_state(TOPIC, 0).isr == (1, 2), message="ISR expansion")


async def test_follower_high_watermark_and_log_start_follow_the_leader(brokers):
    leader, follower = brokers
    leader.lead(TOPIC, 0, 0, [1, 2], [1, 2])
    follower.follow(TOPIC, 0, 0, 1, [1, 2])
    for round_ in range(3):
        assert (await produce(leader, [f"{round_}-{i}" for i in range(4)]))["error_code"] == 0
    await poll_until(lambda: log_of(follower).high_watermark == 12, message="the follower's high watermark")
    assert not log_of(follower).auto_high_watermark
    log_of(leader).delete_records_before(6)
    assert (await produce(leader, ["more"]))["error_code"] == 0  # the next fetch answer carries it
    await poll_until(lambda: log_of(follower).log_start_offset == 6, message="the follower's log start")


async def test_stop_replica_stops_fetching(brokers):
    leader, follower = brokers
    leader.lead(TOPIC, 0, 0, [1, 2], [1])
    follower.follow(TOPIC, 0, 0, 1, [1, 2])
    assert (await produce(leader, ["a"]))["error_code"] == 0
    await poll_until(lambda: log_of(follower).log_end_offset == 1, message="replication")
    follower.replica_manager.stop_replica(TOPIC, 0)
    assert follower.replica_manager.following(TOPIC, 0) is None
    assert (await produce(leader, ["b"], acks=1))["error_code"] == 0
    await asyncio.sleep(0.3)  # a fetcher still running would fetch "b" well within this
    assert log_of(follower).log_end_offset == 1


async def test_follower_of_a_stale_epoch_is_fenced_until_it_learns_the_new_one(brokers):
    leader, follower = brokers
    leader.lead(TOPIC, 0, 5, [1, 2], [1])
    follower.follow(TOPIC, 0, 4, 1, [1, 2])  # an outdated view of the partition
    assert (await produce(leader, ["a", "b"]))["error_code"] == 0
    await asyncio.sleep(0.3)
    assert log_of(follower).log_end_offset == 0
    assert leader.replica_manager.leader_state(TOPIC, 0).followers[2].log_end_offset == -1
    follower.follow(TOPIC, 0, 5, 1, [1, 2])
    await poll_until(lambda: log_of(follower).log_end_offset == 2, message="replication in the current epoch")


async def test_a_partition_whose_leadership_was_not_taken_up_is_not_served(brokers):
    """The broker's view names it leader (here: no assignment, so the single-node answer), but its replica
    manager never took the leadership up: Produce, Fetch and ListOffsets are refused, so that clients look
    for the leader elsewhere, and an acks=all wait has no ISR to rely on."""
    leader, _follower = brokers
    assert leader.cluster_view.partition_leader(TOPIC, 0)[0] == leader.node_id
    assert (await produce(leader, ["x"]))["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (await produce(leader, ["x"], acks=1))["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    async with await KafkaConnection.connect(f"127.0.0.1:{leader.port}") as connection:
        offsets = await connection.request(ApiKey.LIST_OFFSETS, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        fetched = await connection.request(ApiKey.FETCH, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": TOPIC, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
    assert offsets["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert fetched["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert log_of(leader).log_end_offset == 0


async def test_acks_all_never_treats_a_partition_it_does_not_lead_as_a_single_node(brokers):
    leader, _follower = brokers
    plog = log_of(leader)
    plog.append(build_batch([Record(0, 0, None, b"x")]))  # this log commits by itself (auto high watermark)
    assert plog.high_watermark == 1
    assert not await leader.replica_manager.wait_for_isr(TOPIC, 0, 1, 0.5)


async def list_offsets(broker: StaticClusterBroker, timestamp: int, isolation_level: int = 0) -> dict:
    async with await KafkaConnection.connect(f"127.0.0.1:{broker.port}") as connection:
        answer = await connection.request(ApiKey.LIST_OFFSETS, {
            "replica_id": -1, "isolation_level": isolation_level, "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]})
    return answer["topics"][0]["partitions"][0]


async def test_a_new_leader_names_no_offset_until_its_high_watermark_reaches_its_epoch(brokers):
    """A follower's high watermark trails the leader's by a fetch round. Elected then, it must not answer a
    log end below what its predecessor acknowledged (a consumer reading up to it would miss acknowledged
    records): OFFSET_NOT_AVAILABLE, as Kafka answers, until a fetch of its ISR moves the high watermark."""
    old, new = brokers
    old.lead(TOPIC, 0, 0, [1, 2], [1, 2])
    new.follow(TOPIC, 0, 0, 1, [1, 2])
    assert (await produce(old, ["a", "b"]))["error_code"] == 0  # acknowledged: offsets 0 and 1
    await poll_until(lambda: log_of(new).log_end_offset == 2, message="replication")
    log_of(new).high_watermark = 1  # as it is when the answer carrying the last move is still on its way
    new.lead(TOPIC, 0, 1, [2, 1], [2, 1])
    for timestamp in (-1, 1 << 42):  # the log end; a timestamp lookup with no answer below the high watermark
        answer = await list_offsets(new, timestamp)
        assert answer["error_code"] == ErrorCode.OFFSET_NOT_AVAILABLE, (timestamp, answer)
    # the log start, and a lookup answered below the high watermark, need no more than what it knows
    assert [(await list_offsets(new, timestamp))["offset"] for timestamp in (-2, 0)] == [0, 0]
    old.follow(TOPIC, 0, 1, 2, [2, 1])
    await poll_until(lambda: log_of(new).high_watermark == 2, message="the ISR's fetch moving the high watermark")
    latest = await list_offsets(new, -1)
    assert (latest["error_code"], latest["offset"]) == (0, 2)
    assert (await list_offsets(new, 0))["offset"] == 0


async def test_a_timestamp_lookup_answers_no_record_above_the_high_watermark(brokers):
    leader, _follower = brokers
    leader.lead(TOPIC, 0, 0, [1, 2], [1, 2])  # 2 is in the ISR but does not fetch: nothing commits
    assert (await produce(leader, ["x"], acks=1))["error_code"] == 0
    assert log_of(leader).high_watermark == 0
    for timestamp in (0, -3):
        answer = await list_offsets(leader, timestamp)
        assert (answer["error_code"], answer["offset"], answer["timestamp"]) == (0, -1, -1), answer
