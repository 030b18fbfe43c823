"""The consumer group protocol of KIP-848 on our broker: librdkafka and the Java consumer with
``group.protocol=consumer`` share a topic, members join and leave, every record is consumed exactly once
across the rebalances; Kafka's kafka-consumer-groups shows the group; the group survives a restart; the
monitor shows its owners and client ids from the group's records in `__consumer_offsets`.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from collections import Counter

import pytest
from burrow_support import CLUSTER, BurrowpyProcess, MonitorSettings
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from harness import BrokerProcess, wait_until
from kafka_harness import java_command, java_peer

from broker.client import KafkaConnection
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey

pytestmark = pytest.mark.integration

GROUP_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
BROKER_CONFIG = {"group.consumer.heartbeat.interval.ms": 300, "group.consumer.session.timeout.ms": 6000,
                 # below Kafka's bounds, lowered as Kafka's own tests lower them
                 "group.consumer.min.heartbeat.interval.ms": 300, "group.consumer.min.session.timeout.ms": 6000}


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, partitions: int, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for number in range(first, first + count):
        producer.produce(topic, value=str(number).encode(), partition=number % partitions)
    assert producer.flush(30) == 0


def describe(bootstrap: str, group: str) -> dict:
    """ConsumerGroupDescribe, sent with our own client."""
    async def ask() -> dict:
        async with await KafkaConnection.connect(bootstrap) as connection:
            answer = await connection.request(ApiKey.CONSUMER_GROUP_DESCRIBE,
                                              {"group_ids": [group], "include_authorized_operations": False})
            return answer["groups"][0]
    return asyncio.run(ask())


class CommittingConsumer(threading.Thread):
    """A librdkafka consumer on the consumer protocol that commits each record synchronously once read."""

    def __init__(self, bootstrap: str, group: str, topic: str, client_id: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                                  "client.id": client_id, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest"})
        self.consumer.subscribe([topic])
        self.values: list[int] = []
        self.errors: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            message = self.consumer.poll(0.1)
            if message is None:
                continue
            if message.error() is not None:
                self.errors.append(str(message.error()))
                continue
            self.values.append(int(message.value()))
            try:
                self.consumer.commit(message=message, asynchronous=False)
            except KafkaException as exc:
                self.errors.append(str(exc))
        self.consumer.close()  # leaves the group (a heartbeat with epoch -1)

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)


def test_librdkafka_and_the_java_consumer_share_a_topic_exactly_once(broker, tmp_path):
    topic = group = "kip848-shared"
    create_topic(broker.bootstrap, topic, 6)
    produce(broker.bootstrap, topic, 6, 0, 120)
    first = CommittingConsumer(broker.bootstrap, group, topic, "librdkafka-member")
    first.start()
    try:
        wait_until(lambda: len(first.values) >= 120, 60, message="the first member to read the first 120 records")
        assert sorted(p for t in describe(broker.bootstrap, group)["members"][0]["assignment"]["topic_partitions"]
                      for p in t["partitions"]) == [0, 1, 2, 3, 4, 5]

        # the Java consumer joins: it reads 60 records, commits them, and leaves
        java = subprocess.Popen(java_command("burrowpy.peers.JavaClients", "consume", broker.bootstrap, topic, group,
                                             "60", "consumer"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            def split_in_two() -> bool:
                described = describe(broker.bootstrap, group)
                owned = [sorted(p for t in m["assignment"]["topic_partitions"] for p in t["partitions"])
                         for m in described["members"]]
                return described["group_state"] == "Stable" and len(owned) == 2 and all(len(o) == 3 for o in owned)
            wait_until(split_in_two, 60, interval=0.2, message="the six partitions split three and three")
            tool = java_peer(GROUP_TOOL, "--bootstrap-server", broker.bootstrap, "--describe", "--group", group).stdout
            rows = [line.split() for line in tool.splitlines() if line.startswith(group)]
            assert len(rows) == 6 and len({row[6] for row in rows}) == 2  # every partition has one of two owners
            produce(broker.bootstrap, topic, 6, 120, 180)
            stdout, stderr = java.communicate(timeout=120)
        finally:
            if java.poll() is None:
                java.kill()
        assert java.returncode == 0, stderr[-3000:]
        steps = {line["step"]: line["value"] for line in map(json.loads, stdout.splitlines()) if "step" in line}
        java_values = [int(row["value"]) for row in steps["consumed"]]
        assert len(java_values) >= 60
        # the Java member left: the first one gets every partition back and reads the rest
        wait_until(lambda: len(first.values) + len(java_values) >= 300, 60, message="all 300 records read")
    finally:
        first.stop()
    assert not first.errors
    counts = Counter(first.values + java_values)
    assert sorted(counts) == list(range(300)) and set(counts.values()) == {1}  # once each, no more, no less


def test_a_consumer_group_is_kept_across_a_restart_and_members_come_back(tmp_path):
    node = BrokerProcess(tmp_path / "data", extra_config=BROKER_CONFIG)
    node.start()
    try:
        create_topic(node.bootstrap, "kip848-restart", 2)
        produce(node.bootstrap, "kip848-restart", 2, 0, 10)
        member = CommittingConsumer(node.bootstrap, "kip848-restart", "kip848-restart", "restarted-member")
        member.start()
        wait_until(lambda: len(member.values) == 10, 60, message="the member to read 10 records")
        before = describe(node.bootstrap, "kip848-restart")
        node.stop()
        node.start()
        after = describe(node.bootstrap, "kip848-restart")
        # rebuilt from __consumer_offsets: the same epochs and the same member with its partitions
        assert (after["group_epoch"], after["assignment_epoch"]) == (before["group_epoch"], before["assignment_epoch"])
        assert [m["member_id"] for m in after["members"]] == [m["member_id"] for m in before["members"]]
        assert after["members"][0]["assignment"] == before["members"][0]["assignment"]
        produce(node.bootstrap, "kip848-restart", 2, 10, 10)
        wait_until(lambda: len(member.values) == 20, 60, message="the member to go on after the restart")
        member.stop()
        assert sorted(member.values) == list(range(20))
        left = describe(node.bootstrap, "kip848-restart")
        assert left["group_state"] == "Empty" and left["group_epoch"] > after["group_epoch"]
    finally:
        node.stop()


def test_protocol_errors_on_the_wire(broker):
    create_topic(broker.bootstrap, "kip848-wire", 1)

    async def scenario() -> dict:
        async with await KafkaConnection.connect(broker.bootstrap) as connection:
            def heartbeat(**fields) -> dict:
                body = {"group_id": "kip848-wire", "member_id": "m-1", "member_epoch": 0, "rebalance_timeout_ms": 30000,
                        "subscribed_topic_names": ["kip848-wire"], "topic_partitions": [], **fields}
                return connection.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, body, version=1)
            answers = {"joined": await heartbeat()}
            answers["unknown_assignor"] = await heartbeat(member_id="m-2", server_assignor="sticky")
            answers["stale_epoch"] = await heartbeat(member_epoch=answers["joined"]["member_epoch"] + 5,
                                                     topic_partitions=None, subscribed_topic_names=None)
            answers["unknown_member"] = await heartbeat(member_id="nobody", member_epoch=1)
            answers["no_timeout"] = await heartbeat(member_id="m-3", rebalance_timeout_ms=-1)
            answers["left"] = await heartbeat(member_epoch=-1)
            return answers

    answers = asyncio.run(scenario())
    joined = answers["joined"]
    assert (joined["error_code"], joined["member_id"], joined["member_epoch"]) == (ErrorCode.NONE, "m-1", 1)
    assert joined["heartbeat_interval_ms"] == 300
    assert [t["partitions"] for t in joined["assignment"]["topic_partitions"]] == [[0]]
    assert answers["unknown_assignor"]["error_code"] == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert answers["stale_epoch"]["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
    assert answers["unknown_member"]["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    assert answers["no_timeout"]["error_code"] == ErrorCode.INVALID_REQUEST
    assert "RebalanceTimeoutMs" in answers["no_timeout"]["error_message"]
    assert (answers["left"]["error_code"], answers["left"]["member_epoch"]) == (ErrorCode.NONE, -1)


def test_a_commit_at_an_older_member_epoch_on_the_wire(broker):
    """KIP-1251 as Kafka 4.3+ answers it: after a second member joins and the first gives up a partition, the
    first member's epoch rises; a commit still carrying the old epoch is accepted for the partition it kept
    and refused (STALE_MEMBER_EPOCH) for the one it gave up, and a newer epoch than its own is refused."""
    topic = group = "kip848-older-epoch"
    create_topic(broker.bootstrap, topic, 2)

    async def scenario() -> dict:
        async with await KafkaConnection.connect(broker.bootstrap) as connection:
            def heartbeat(member: str, epoch: int, owned: list[dict] | None) -> dict:
                body = {"group_id": group, "member_id": member, "member_epoch": epoch, "rebalance_timeout_ms": 30000,
                        "subscribed_topic_names": [topic] if epoch == 0 else None, "topic_partitions": owned}
                return connection.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, body, version=1)

            async def commit(epoch: int, partition: int) -> int:
                answer = await connection.request(ApiKey.OFFSET_COMMIT, {
                    "group_id": group, "generation_id_or_member_epoch": epoch, "member_id": "m-1",
                    "group_instance_id": None, "topics": [{"name": topic, "partitions": [{
                        "partition_index": partition, "committed_offset": 1, "committed_leader_epoch": -1,
                        "committed_metadata": ""}]}]}, version=9)
                return answer["topics"][0]["partitions"][0]["error_code"]

            first = await heartbeat("m-1", 0, [])
            await heartbeat("m-2", 0, [])
            told = await heartbeat("m-1", first["member_epoch"], None)  # give one up
            kept = told["assignment"]["topic_partitions"]
            settled = await heartbeat("m-1", first["member_epoch"], kept)
            (kept_partition,) = kept[0]["partitions"]
            old = first["member_epoch"]
            return {"epochs": (old, settled["member_epoch"]),
                    "kept": await commit(old, kept_partition), "given_up": await commit(old, 1 - kept_partition),
                    "current": await commit(settled["member_epoch"], 1 - kept_partition),
                    "newer": await commit(settled["member_epoch"] + 1, kept_partition)}

    answers = asyncio.run(scenario())
    old, new = answers["epochs"]
    assert new > old
    assert (answers["kept"], answers["given_up"]) == (ErrorCode.NONE, ErrorCode.STALE_MEMBER_EPOCH)
    assert (answers["current"], answers["newer"]) == (ErrorCode.NONE, ErrorCode.STALE_MEMBER_EPOCH)


def test_the_monitor_shows_owners_and_client_ids_of_a_consumer_protocol_group(broker, tmp_path):
    topic = group = "kip848-monitored"
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, 2, 0, 20)
    settings = MonitorSettings(broker.bootstrap, intervals=3, offset_refresh=1, topic_refresh=1, expire_cache=0)
    with BurrowpyProcess(tmp_path / "monitor", settings) as monitor:
        def partitions() -> list[dict] | None:
            status, body = monitor.get(f"/v3/kafka/{CLUSTER}/consumer/{group}/lag")
            return body["status"]["partitions"] if status == 200 and body["status"]["partitions"] else None

        member = CommittingConsumer(broker.bootstrap, group, topic, "monitored-member")
        member.start()
        try:
            wait_until(lambda: len(member.values) == 20, 60, message="the member to read 20 records")
            # the owners may show before the monitor has read the member's last commits: wait for both
            seen: list[set] = []

            def owners_and_lags() -> bool:
                p = partitions()
                seen.append({(x["owner"], x["client_id"], x["current_lag"]) for x in p or []})
                return bool(p) and all(x["current_lag"] == 0 for x in p)

            wait_until(owners_and_lags, 60, interval=0.2, message="owners and no lag in the monitor")
            assert seen[-1] == {("/127.0.0.1", "monitored-member", 0)}
        finally:
            member.stop()
        wait_until(lambda: (p := partitions()) and not any(x["owner"] for x in p), 60, interval=0.2,
                   message="the owners to go once the member left")


def test_a_regex_subscription_picks_up_new_topics(broker):
    create_topic(broker.bootstrap, "kip848-rx-a", 1)
    produce(broker.bootstrap, "kip848-rx-a", 1, 0, 5)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kip848-rx", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500})
    consumer.subscribe(["^kip848-rx-.*"])
    seen: list[tuple[str, int]] = []
    try:
        def read(count: int) -> bool:
            seen.extend((m.topic(), int(m.value())) for m in consumer.consume(50, timeout=0.2) if m.error() is None)
            return len(seen) >= count
        wait_until(lambda: read(5), 60, interval=0, message="the records of the first matching topic")
        create_topic(broker.bootstrap, "kip848-rx-b", 2)
        create_topic(broker.bootstrap, "kip848-other", 1)
        produce(broker.bootstrap, "kip848-rx-b", 2, 100, 6)
        produce(broker.bootstrap, "kip848-other", 1, 200, 3)
        wait_until(lambda: read(11), 60, interval=0, message="the records of a topic created later that matches")
        described = describe(broker.bootstrap, "kip848-rx")
        (member,) = described["members"]
        assert member["subscribed_topic_regex"] == "(^kip848-rx-.*)"  # librdkafka joins its patterns as (a)|(b)
        assert sorted(t["topic_name"] for t in member["assignment"]["topic_partitions"]) == ["kip848-rx-a",
                                                                                            "kip848-rx-b"]
    finally:
        consumer.close()
    assert sorted(seen) == [("kip848-rx-a", n) for n in range(5)] + [("kip848-rx-b", n) for n in range(100, 106)]


def test_transactional_offsets_of_a_consumer_protocol_group(broker):
    create_topic(broker.bootstrap, "kip848-txn-in", 2)
    create_topic(broker.bootstrap, "kip848-txn-out", 1)
    produce(broker.bootstrap, "kip848-txn-in", 2, 0, 20)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kip848-txn", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "kip848-txn"})
    producer.init_transactions(30)
    consumer.subscribe(["kip848-txn-in"])
    done = 0
    try:
        while done < 20:
            batch = [m for m in consumer.consume(10, timeout=1) if m.error() is None]
            if not batch:
                continue
            producer.begin_transaction()
            for message in batch:
                producer.produce("kip848-txn-out", value=message.value(), partition=0)
            # the group metadata carries the member id and member epoch: TxnOffsetCommit checks them
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            done += len(batch)
        committed = consumer.committed([TopicPartition("kip848-txn-in", p) for p in (0, 1)], timeout=30)
    finally:
        consumer.close()
    assert [tp.offset for tp in committed] == [10, 10]


def test_without_the_consumer_protocol_kip_848_is_answered_unsupported_as_kafka_does(tmp_path):
    """group.coordinator.rebalance.protocols without ``consumer``: Kafka 4.4 (same setting, checked by hand with
    these requests) answers ConsumerGroupHeartbeat and each group of ConsumerGroupDescribe UNSUPPORTED_VERSION,
    while ApiVersions still lists both; classic groups carry on."""
    with BrokerProcess(tmp_path / "data", extra_config={
            "group.coordinator.rebalance.protocols": "classic"}) as broker:
        async def ask() -> tuple[dict, dict, dict]:
            async with await KafkaConnection.connect(broker.bootstrap) as connection:
                versions = await connection.request(ApiKey.API_VERSIONS, {
                    "client_software_name": "t", "client_software_version": "1"}, version=3)
                heartbeat = await connection.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, {
                    "group_id": "g", "member_id": "m" * 22, "member_epoch": 0, "instance_id": None, "rack_id": None,
                    "rebalance_timeout_ms": 30000, "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
                    "server_assignor": None, "topic_partitions": []}, version=1)
                described = await connection.request(ApiKey.CONSUMER_GROUP_DESCRIBE, {
                    "group_ids": ["g"], "include_authorized_operations": False}, version=0)
                return versions, heartbeat, described

        versions, heartbeat, described = asyncio.run(ask())
        assert {ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE} <= {
            entry["api_key"] for entry in versions["api_keys"]}
        assert (heartbeat["error_code"], heartbeat["member_id"], heartbeat["member_epoch"]) == (
            ErrorCode.UNSUPPORTED_VERSION, None, 0)
        assert [(g["group_id"], g["error_code"], g["group_state"]) for g in described["groups"]] == [
            ("g", ErrorCode.UNSUPPORTED_VERSION, "")]
        # a classic consumer group works as before
        create_topic(broker.bootstrap, "classic-only", 1)
        produce(broker.bootstrap, "classic-only", 1, 0, 3)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "classic-group",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["classic-only"])
        try:
            seen: list[bytes] = []
            wait_until(lambda: (message := consumer.poll(0.5)) is not None and not message.error()
                       and seen.append(message.value()) is None and len(seen) == 3, 60, interval=0,
                       message="the classic group's records")
        finally:
            consumer.close()
