"""Faults injected into a three-broker cluster while an idempotent ``acks=all`` producer writes (RF 3,
``min.insync.replicas: 2``): after each, every acknowledged record is in the log once, in order, and the
replicas' segment files hold the same batches below the high watermark (:mod:`fault_harness`).

One cluster serves the module, each scenario on a topic of its own; each scenario ends with the cluster
healthy again (every broker up, every replica in sync).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_harness import (
    FETCHER_CLIENT_ID,
    AckedWorkload,
    DirectProducer,
    FakeFollower,
    FaultCluster,
    check_after,
    create_topic,
    disk_filled,
    read_topic,
    tmpfs,
)
from harness import unique_name, wait_until

from broker.client import KafkaConnection
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey

# alone: its scenarios are bounded by failure timeouts that a second worker's load on two cores can stretch
pytestmark = [pytest.mark.integration, pytest.mark.timeout(180), pytest.mark.alone]

pytest.importorskip("confluent_kafka")

SETTINGS = {"min.insync.replicas": 2}
# A produce request the leader received just before its connections were cut may still be acknowledged:
# its followers could fetch it before the relays closed their connections (they do within 50 ms).
CUT_GRACE = 0.5
FULL_DISK = 3
FULL_RAFT = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    brokers = FaultCluster(tmp_path_factory.mktemp("faults"), settings=SETTINGS)
    # broker FULL_DISK's log dir and broker FULL_RAFT's Raft dir are small tmpfs of their own, to fill in
    # test_a_full_disk and test_a_full_raft_dir
    with (tmpfs(brokers.brokers[FULL_DISK].data_dir / "logs", "64m") as mounted,
          tmpfs(brokers.brokers[FULL_RAFT].data_dir / "raft", "16m")):
        brokers.small_disk = mounted
        try:
            brokers.start()
            yield brokers
        finally:
            brokers.stop()


def topic_led_by(cluster: FaultCluster, leader: int, partitions: int = 1) -> str:
    """A new topic whose partitions all have ``leader`` as preferred leader, the others following."""
    name = unique_name("faults")
    others = [i for i in cluster.ids if i != leader]
    create_topic(cluster, name, [[leader, *others]] * partitions)
    assert cluster.leader_of(name) == leader
    return name


def other_leader(cluster: FaultCluster, topic: str, old: int, asking: int) -> int:
    def moved() -> int:
        leader = cluster.partitions(topic, asking)[0]["leader_id"]
        return leader if leader not in (old, -1) else 0
    return wait_until(moved, 30, interval=0.1, message=f"leadership of {topic} to leave broker {old}")


@contextlib.contextmanager
def acked_workload(cluster: FaultCluster, scratch: Path, leader: int, partitions: int = 3) -> Iterator[AckedWorkload]:
    """The workload on a new topic led by ``leader``, running while the scenario does its faults, then the
    checks (when the scenario got through)."""
    topic = topic_led_by(cluster, leader, partitions)
    workload = AckedWorkload(cluster.bootstrap, topic, partitions).start()
    try:
        workload.wait_for_acks(150)
        yield workload
    finally:
        workload.stop()
    check_after(cluster, workload, scratch)


def poll(condition: Callable[[], bool], timeout: float) -> bool:
    """Whether ``condition`` comes true within ``timeout`` s (polled), for scenarios that go on either way
    and report what they saw at the end."""
    try:
        wait_until(condition, timeout, interval=0.1)
    except AssertionError:
        return False
    return True


def test_the_leader_paused_past_the_failure_timeouts(cluster, tmp_path):
    leader = cluster.controller()  # the Raft leader too: both roles move
    with acked_workload(cluster, tmp_path, leader) as workload:
        asking = next(i for i in cluster.ids if i != leader)
        with cluster.paused(leader):
            paused_at = time.monotonic()
            other_leader(cluster, workload.topic, leader, asking)
            workload.wait_for_acks(150, after=paused_at)
        cluster.wait_healthy(60)
        workload.wait_for_acks(150, after=time.monotonic())


def test_the_leader_killed_three_times(cluster, tmp_path):
    with acked_workload(cluster, tmp_path, cluster.ids[0]) as workload:
        for _ in range(3):
            leader = cluster.leader_of(workload.topic)
            cluster.kill(leader)
            workload.wait_for_acks(150, after=time.monotonic())
            cluster.restart(leader)
            cluster.wait_healthy(60)


def test_two_of_three_killed_and_restarted(cluster, tmp_path):
    with acked_workload(cluster, tmp_path, cluster.ids[1]) as workload:
        leader = cluster.leader_of(workload.topic)
        victims = [leader, next(i for i in cluster.ids if i != leader)]
        for victim in victims:
            cluster.kill(victim)
        killed_at, sent = time.monotonic(), workload.sent
        # one broker of three meets neither min.insync.replicas nor a Raft majority: nothing is acknowledged
        # of the records produced meanwhile
        wait_until(lambda: workload.sent > sent + 400, 10, message="the producer to try 400 more records")
        assert workload.acks_after(killed_at + 0.5) == 0
        for victim in victims:
            cluster.restart(victim)
        workload.wait_for_acks(150, after=time.monotonic(), timeout=60)
        cluster.wait_healthy(60)


def test_the_brokers_metrics_agree_on_the_controller(cluster):
    controller = cluster.controller()
    scrapes = {i: cluster.scrape(i) for i in cluster.ids}
    assert {i: s.value("kafka_controller_kafkacontroller_activecontrollercount") for i, s in scrapes.items()} == {
        i: int(i == controller) for i in cluster.ids}
    for scrape in scrapes.values():
        assert scrape.value("kafka_server_raft_metrics_current_leader") == controller
        assert scrape.value("kafka_server_raft_metrics_current_epoch") >= 1
        assert scrape.value("kafka_server_raft_metrics_high_watermark") >= 1
        assert scrape.value("burrowpy_broker_raft_commit_lag") >= 0
    assert scrapes[controller].value("kafka_controller_kafkacontroller_offlinepartitionscount") == 0


def test_a_follower_paused(cluster, tmp_path):
    leader = cluster.ids[2]
    follower = next(i for i in cluster.ids if i != leader)
    with acked_workload(cluster, tmp_path, leader) as workload:
        before = cluster.scrape(leader)
        assert before.value("kafka_server_replicamanager_underreplicatedpartitions") == 0
        other = next(i for i in cluster.ids if i not in (leader, follower))
        copied = cluster.scrape(other).value("kafka_server_brokertopicmetrics_replicationbytesin_total")
        with cluster.paused(follower):
            paused_at = time.monotonic()
            wait_until(lambda: follower not in cluster.isr(workload.topic, node_id=leader), 30, interval=0.1,
                       message=f"the paused broker {follower} to leave the ISR")
            # the leader's metrics say so: its three partitions under-replicated, each ISR shrunk once
            during = cluster.scrape(leader)
            assert during.value("kafka_server_replicamanager_underreplicatedpartitions") >= 3
            assert during.value("kafka_server_replicamanager_underminisrpartitioncount") == 0
            assert during.value("kafka_network_requestmetrics_requests_total", request="FetchFollower") > 0
            assert (during.value("kafka_server_replicamanager_isrshrinks_total")
                    - before.value("kafka_server_replicamanager_isrshrinks_total")) >= 3
            workload.wait_for_acks(150, after=paused_at)
            # the other follower copies on, and says how far behind it is
            still_copying = cluster.scrape(other)
            assert still_copying.value("kafka_server_brokertopicmetrics_replicationbytesin_total") > copied
            assert still_copying.value("kafka_server_replicafetchermanager_maxlag", clientid="Replica") >= 0
        cluster.wait_healthy(60)
        workload.wait_for_acks(150, after=time.monotonic())
        after = wait_until(lambda: (s := cluster.scrape(leader)).value(
            "kafka_server_replicamanager_underreplicatedpartitions") == 0 and s, 30, interval=0.2,
            message="the leader's under-replicated partitions back to 0")
        assert (after.value("kafka_server_replicamanager_isrexpands_total")
                - before.value("kafka_server_replicamanager_isrexpands_total")) >= 3


def test_a_client_faking_a_followers_fetches(cluster, tmp_path):
    """Broker ``faked``'s own fetches are cut off (it stays up, in Raft and gossip), and an ordinary client
    sends the fetches it would: the leader must not take them as that broker's, so the broker leaves the
    ISR and, when the leader dies, a replica that holds the acknowledged records takes over."""
    leader, faked = cluster.ids[0], cluster.ids[1]
    with acked_workload(cluster, tmp_path, leader, partitions=1) as workload:
        cluster.kafka_relays[leader].refuse(FETCHER_CLIENT_ID.format(faked))
        state = cluster.partitions(workload.topic, leader)[0]
        fake = FakeFollower(cluster.brokers[leader].bootstrap, workload.topic, faked, state["leader_epoch"],
                            start=workload.acks[-1].offset + 1).start()
        try:
            cut_at = time.monotonic()
            left_isr = poll(lambda: faked not in cluster.isr(workload.topic, node_id=leader), 15)
            if not left_isr:
                workload.errors.append(f"broker {faked} stayed in the ISR for 15 s on a client's fetches")
            workload.wait_for_acks(100, after=cut_at)
        finally:
            fake.stop()
        cluster.kill(leader)
        new_leader = other_leader(cluster, workload.topic, leader, faked)
        cluster.kafka_relays[leader].allow_all()
        cluster.restart(leader)
        cluster.wait_healthy(60)
    assert left_isr, (f"broker {faked} stayed in the ISR on a client's fetches (leader after the failover: "
                      f"{new_leader}; the fetches' error codes: {sorted(set(fake.error_codes))})")


def test_the_leader_cut_off_from_the_other_brokers(cluster, tmp_path):
    """A partition of the network: the leader (the controller too) loses the other brokers (Raft, replication
    and gossip, both ways) while its clients still reach it. Whatever it was sent from then on it must not
    acknowledge; the others elect a new leader and go on; after healing it rejoins as a follower. Three
    transactions begun before the cut, their records on the cut-off leader, end during it within a bound: one
    coordinated by another broker the producer commits (or aborts, when the commit cannot get through), one it
    aborts; one coordinated by the cut-off broker itself it commits too, once that broker has stopped answering
    as coordinator and the others have moved its part of the transaction log (during the cut when the producer
    asks another broker for the new coordinator, else once healed). read_committed consumers see a
    transaction's records once if it committed, else never."""
    leader = cluster.controller()
    probed = topic_led_by(cluster, leader)  # written by requests to that broker only
    transacted = topic_led_by(cluster, leader, partitions=2)
    coordinator = next(i for i in cluster.ids if i != leader)
    with (acked_workload(cluster, tmp_path, leader) as workload, transaction_spanning(cluster, transacted, coordinator=coordinator) as txn,
          transaction_spanning(cluster, transacted, abort=True, coordinator=coordinator) as aborted,
          transaction_spanning(cluster, transacted, coordinator=leader) as cut_off_coordinated):
        probe = DirectProducer(cluster.brokers[leader].bootstrap, probed).start()
        try:
            wait_until(lambda: len(probe.acknowledged()) >= 5, 30, message="the probe's first acknowledgements")
            group = coordinated_by(cluster, leader, "group", key_type=0)
            assert offset_fetch_error(cluster, leader, group) == ErrorCode.NONE
            cluster.isolate(leader)
            cut_at = time.monotonic()
            asking = next(i for i in cluster.ids if i != leader)
            wait_until(lambda: coordinator_answer(cluster, leader, cut_off_coordinated.name)["error_code"]
                       == ErrorCode.COORDINATOR_NOT_AVAILABLE, 10,
                       message="the cut-off broker to stop naming a transaction coordinator")
            wait_until(lambda: offset_fetch_error(cluster, leader, group) == ErrorCode.NOT_COORDINATOR, 10,
                       message="the cut-off broker to stop answering as its group's coordinator")
            other_leader(cluster, workload.topic, leader, asking)
            aborted.end()
            workload.wait_for_acks(150, after=cut_at)
            txn.end()
            wait_until(lambda: coordinator_answer(cluster, asking, cut_off_coordinated.name)["node_id"]
                       not in (leader, -1), 20, interval=0.2,
                       message="the others to name a new coordinator in place of the cut-off broker")
            # librdkafka asks the broker it used last for the new coordinator: while that is the cut-off one,
            # it is told COORDINATOR_NOT_AVAILABLE for as long as the cut lasts (a cut-off Kafka broker would
            # name itself); once healed, that broker names the new coordinator
            ended_during_cut = cut_off_coordinated.end(20, required=False)
            wait_until(lambda: sum(1 for a in probe.attempts if a.sent_at > cut_at + CUT_GRACE) >= 10, 30,
                       message="ten produce requests to the cut-off leader")
        finally:
            cluster.heal()
            probe.stop()
        healed_at = time.monotonic()
        if not ended_during_cut:
            cut_off_coordinated.end()
        late = [a for a in probe.acknowledged() if a.sent_at > cut_at + CUT_GRACE]
        assert not late, f"the cut-off leader acknowledged acks=all records sent after the cut: {late[:3]}"
        cluster.wait_healthy(60)
        workload.wait_for_acks(150, after=healed_at)
    stored = dict(read_topic(cluster.bootstrap, probed, 1)[0])
    lost = [a for a in probe.acknowledged() if stored.get(a.offset) != a.value]
    assert not lost, f"records the leader acknowledged before the cut are gone: {lost[:3]}"
    visible = read_committed(cluster.bootstrap, transacted, 2)
    txn.check(visible)
    aborted.check(visible)
    cut_off_coordinated.check(visible)
    assert aborted.outcome == "aborted", f"the transaction aborted during the cut ended {aborted.outcome!r}"


class SpanningTransaction:
    """A transactional producer (confluent-kafka) with one transaction committed before the cut and one
    begun before it (its records written to the leader about to be cut off) that is ended during the cut:
    committed if the commit gets through, else aborted; either way within a bound, never left hanging. With
    ``abort`` the one ended during the cut is aborted by the producer."""

    TIMEOUT = 45.0

    def __init__(self, bootstrap: str, topic: str, transactional_id: str, abort: bool = False) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.abort = abort
        self.name = transactional_id
        self.producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": self.name,
                                  "transaction.timeout.ms": 60000, "message.timeout.ms": 20000,
                                  "request.timeout.ms": 5000, "socket.timeout.ms": 3000,
                                  "reconnect.backoff.max.ms": 500})
        self.committed: list[bytes] = []
        self.pending: list[bytes] = []
        self.outcome = ""

    def _write(self, prefix: str) -> list[bytes]:
        values = [f"{self.name}-{prefix}-{i}".encode() for i in range(20)]
        self.producer.begin_transaction()
        for i, value in enumerate(values):
            self.producer.produce(self.topic, value, partition=i % 2)
        assert self.producer.flush(30) == 0, f"the records of transaction {prefix} were not written"
        return values

    def start(self) -> SpanningTransaction:
        self.producer.init_transactions(30)
        values = self._write("before")
        self.producer.commit_transaction(30)
        self.committed = values
        self.pending = self._write("spanning")
        return self

    def end(self, within: float = TIMEOUT, *, required: bool = True) -> bool:
        """Commit (with ``abort``: abort) the spanning transaction, retrying what Kafka calls retriable; abort
        it when the commit cannot be completed. A fatal error (the producer fenced) leaves it to the
        coordinator's timeout, which aborts it. Whether it ended within ``within`` s; not ending fails the
        test unless not ``required`` (the producer may be asked to end it again later)."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                if self.abort:
                    self.producer.abort_transaction(max(deadline - time.monotonic(), 1))
                    self.outcome = "aborted"
                    return True
                self.producer.commit_transaction(max(deadline - time.monotonic(), 1))
                self.outcome = "committed"
                return True
            except KafkaException as exc:
                error = exc.args[0]
                if error.fatal():
                    self.outcome = "fenced"
                    return True
                if error.txn_requires_abort():
                    self.producer.abort_transaction(max(deadline - time.monotonic(), 1))
                    self.outcome = "aborted"
                    return True
                if not error.retriable():
                    raise
        assert not required, f"the transaction begun before the cut neither committed nor aborted in {within} s"
        return False

    def check(self, visible: list[bytes]) -> None:
        """A read_committed consumer sees this producer's committed transactions' records once each, nothing
        else of it."""
        visible = [value for value in visible if value.startswith(f"{self.name}-".encode())]
        expected = self.committed + (self.pending if self.outcome == "committed" else [])
        assert sorted(visible) == sorted(expected), (
            f"the spanning transaction ended {self.outcome!r}; read_committed saw {len(visible)} records, "
            f"expected {len(expected)}: extra {sorted(set(visible) - set(expected))[:5]}, "
            f"missing {sorted(set(expected) - set(visible))[:5]}, twice {len(visible) - len(set(visible))}")


@contextlib.contextmanager
def transaction_spanning(cluster: FaultCluster, topic: str, abort: bool = False,
                         coordinator: int | None = None) -> Iterator[SpanningTransaction]:
    """A :class:`SpanningTransaction` started; with ``coordinator`` its transactional id is one that broker
    coordinates."""
    prefix = "aborting" if abort else "spanning"
    transactional_id = unique_name(prefix) if coordinator is None else coordinated_by(cluster, coordinator, prefix)
    txn = SpanningTransaction(cluster.bootstrap, topic, transactional_id, abort).start()
    try:
        yield txn
    finally:
        if txn.outcome != "fenced":  # a fenced producer raises its fatal error on every call
            txn.producer.flush(0)


def coordinated_by(cluster: FaultCluster, node_id: int, prefix: str, key_type: int = 1) -> str:
    """A new transactional id (``key_type`` 0: group id) whose coordinator is broker ``node_id``: FindCoordinator
    (v4 asks for many keys at once) over 60 candidates, each coordinator leading about a third of the
    coordinator topic, asked again while that topic is being made (its first FindCoordinator makes it)."""
    def found() -> str | None:
        answer = asyncio.run(find_coordinators(cluster, node_id, [unique_name(prefix) for _ in range(60)], key_type))
        return next((c["key"] for c in answer["coordinators"] if c["error_code"] == 0 and c["node_id"] == node_id),
                    None)

    return wait_until(found, 30, interval=0.2, message=f"a transactional id coordinated by broker {node_id}")


async def find_coordinators(cluster: FaultCluster, node_id: int, keys: list[str], key_type: int = 1
                            ) -> dict[str, Any]:
    """Broker ``node_id``'s FindCoordinator (v4) answer for these transactional ids (``key_type`` 0: groups)."""
    async with await KafkaConnection.connect(cluster.brokers[node_id].bootstrap, timeout=10) as connection:
        return await connection.request(ApiKey.FIND_COORDINATOR, {"key_type": key_type, "coordinator_keys": keys},
                                        version=4)


def coordinator_answer(cluster: FaultCluster, node_id: int, transactional_id: str) -> dict[str, Any]:
    return asyncio.run(find_coordinators(cluster, node_id, [transactional_id]))["coordinators"][0]


def offset_fetch_error(cluster: FaultCluster, node_id: int, group_id: str) -> int:
    """Broker ``node_id``'s OffsetFetch error for a group (NONE where it coordinates it)."""
    async def ask() -> dict[str, Any]:
        async with await KafkaConnection.connect(cluster.brokers[node_id].bootstrap, timeout=10) as connection:
            return await connection.request(ApiKey.OFFSET_FETCH, {"group_id": group_id, "topics": None}, version=6)
    return asyncio.run(ask())["error_code"]


def read_committed(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> list[bytes]:
    """Every record a read_committed consumer reads, once no transaction is open any more: each partition's
    last stable offset has reached its high watermark (a transaction ended while a broker was cut off may
    still have markers to write, or be aborted by its timeout) and the consumer has reached it."""
    import confluent_kafka
    from confluent_kafka import Consumer, TopicPartition

    def consumer(isolation: str) -> Consumer:
        return Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("committed"),
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})

    committed, uncommitted = consumer("read_committed"), consumer("read_uncommitted")
    values: list[bytes] = []
    at_end: dict[int, int] = {}
    try:
        committed.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])

        def settled() -> bool:
            for message in committed.consume(100, timeout=0.5):
                if message.error() is None:
                    values.append(message.value())
                elif message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    at_end[message.partition()] = message.offset()
            for p in range(partitions):
                stable = committed.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                high = uncommitted.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                if stable != high or at_end.get(p, -1) < high:
                    return False
            return True
        wait_until(settled, timeout, interval=0, message=f"a read_committed consumer to reach the end of {topic}")
    finally:
        committed.close()
        uncommitted.close()
    return values


def test_a_full_disk(cluster, tmp_path):
    """The leader's disk fills up: clients get KAFKA_STORAGE_ERROR, the broker logs an error naming its log
    dir with a count, nothing acknowledged is lost, and it takes writes again once there is room."""
    if not cluster.small_disk:
        pytest.skip("mounting a tmpfs as a broker's data dir needs root")
    broker = cluster.brokers[FULL_DISK]
    probed = topic_led_by(cluster, FULL_DISK)
    with acked_workload(cluster, tmp_path, FULL_DISK) as workload:
        probe = DirectProducer(broker.bootstrap, probed).start()
        try:
            wait_until(lambda: len(probe.acknowledged()) >= 3, 30, message="the probe's first acknowledgements")
            with disk_filled(broker.data_dir / "logs"):
                full_at = time.monotonic()
                wait_until(lambda: any(a.error_code == ErrorCode.KAFKA_STORAGE_ERROR for a in probe.attempts
                                       if a.sent_at > full_at), 30, message="a KAFKA_STORAGE_ERROR")
                failures = wait_until(lambda: storage_errors_logged(broker.log_path), 10,
                                      message="the broker to log the failed writes")
                assert all(entry["log_dir"] == str(broker.data_dir / "logs") for entry in failures), failures[-1]
                assert [entry["storage_errors"] for entry in failures] == list(range(1, len(failures) + 1))
                # a write that fits in a page a segment file already has may still succeed now and then, and
                # bring the log dir back: the dir is offline at some moment, not at every one
                wait_until(lambda: (full := cluster.scrape(FULL_DISK)).value(
                    "kafka_log_logmanager_offlinelogdirectorycount") == 1 and full.value(
                    "kafka_server_replicamanager_offlinereplicacount") > 0, 10, interval=0.1,
                    message="the metrics to count the log dir offline")
            freed_at = time.monotonic()
            wait_until(lambda: any(a.sent_at > freed_at for a in probe.acknowledged()), 30,
                       message="the broker to take writes again")
            workload.wait_for_acks(150, after=freed_at)
            # every failed write counted in the metrics as in the log; the log dir back once writes succeed
            recovered = cluster.scrape(FULL_DISK)
            assert recovered.value("burrowpy_broker_storage_errors_total", logdir=str(broker.data_dir / "logs")) \
                == len(storage_errors_logged(broker.log_path)) > 0
            assert recovered.value("kafka_log_logmanager_offlinelogdirectorycount") == 0
        finally:
            probe.stop()
    stored = dict(read_topic(cluster.bootstrap, probed, 1)[0])
    lost = [a for a in probe.acknowledged() if stored.get(a.offset) != a.value]
    assert not lost, f"acknowledged records lost: {lost[:3]}"


def test_a_full_raft_dir(cluster):
    """The disk of a broker's Raft journal fills up: as Kafka halts a broker whose metadata log dir failed, it
    exits with an error naming the dir at its next Raft write (here: saving the commit index of a new topic),
    rather than voting and acknowledging entries it did not keep; restarted once there is room, it rejoins."""
    if not cluster.small_disk:
        pytest.skip("mounting a tmpfs as a broker's Raft dir needs root")
    broker = cluster.brokers[FULL_RAFT]
    raft_dir = broker.data_dir / "raft"
    asking = next(i for i in cluster.ids if i != FULL_RAFT)
    with disk_filled(raft_dir):
        assert cluster.create_topic(asking, unique_name("faults"), 1, 1)["error_code"] == 0
        code = wait_until(lambda: broker.proc.poll(), 20, interval=0.1, message="the broker to halt")
        cluster.kill(FULL_RAFT)  # reaped
    assert code == 1
    halts = logged(broker.log_path, "raft log dir failed, halting the broker")
    assert [entry["raft_dir"] for entry in halts] == [str(raft_dir)], halts
    cluster.restart(FULL_RAFT)
    cluster.wait_healthy(60)


def logged(log_path: Path, event: str) -> list[dict]:
    """The broker's log entries of ``event``."""
    quoted = json.dumps(event)
    return [json.loads(line) for line in log_path.read_text(errors="replace").splitlines() if quoted in line]


def storage_errors_logged(log_path: Path) -> list[dict]:
    return logged(log_path, "log dir write failed")
