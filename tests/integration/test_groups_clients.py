"""Consumer groups of real clients against our broker: kcat -G, confluent-kafka, kafka-python, aiokafka and
kafkajs.

Each test runs the same story with one client library: three members share a 6-partition topic and
every record is consumed exactly once; one member leaves and the other two take over its partitions;
the committed offsets survive a broker restart, and a new member resumes exactly where they were.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import uuid
from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from harness import ROOT, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 6
PER_PARTITION = 10
SESSION_MS = 10000
HEARTBEAT_MS = 500


# --- members: one consumer-group member of some client library, run in the background -----------------------

class Member:
    """A group member: what it is assigned now (None while rebalancing) and every record it consumed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.assignment: list[int] | None = None
        self.records: list[tuple[int, int, bytes]] = []
        self.closed = False
        self._lock = threading.Lock()

    def assigned(self, partitions: list[int]) -> None:
        with self._lock:
            self.assignment = sorted(partitions)

    def revoked(self) -> None:
        with self._lock:
            self.assignment = None

    def got(self, partition: int, offset: int, value: bytes) -> None:
        with self._lock:
            self.records.append((partition, offset, value))

    def close(self) -> None:
        raise NotImplementedError


class ThreadMember(Member):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.stopping = threading.Event()
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._guarded, name=name, daemon=True)
        self._thread.start()

    def _guarded(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # reported by close()
            self.failure = exc

    def run(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.stopping.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), f"{self.name} did not stop"
        if self.failure is not None:
            raise AssertionError(f"{self.name} failed") from self.failure


class ConfluentMember(ThreadMember):
    def __init__(self, bootstrap: str, topic: str, group: str, name: str) -> None:
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        super().__init__(name)

    def run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "client.id": self.name,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "heartbeat.interval.ms": HEARTBEAT_MS, "session.timeout.ms": SESSION_MS})
        consumer.subscribe([self.topic], on_assign=lambda _c, ps: self.assigned([p.partition for p in ps]),
                           on_revoke=lambda _c, ps: self.revoked())
        try:
            while not self.stopping.is_set():
                message = consumer.poll(0.2)
                if message is None or message.error():
                    continue
                self.got(message.partition(), message.offset(), message.value())
                consumer.commit(message, asynchronous=False)
        finally:
            consumer.close()


class KafkaPythonMember(ThreadMember):
    def __init__(self, bootstrap: str, topic: str, group: str, name: str) -> None:
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        super().__init__(name)

    def run(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                member.revoked()

            def on_partitions_assigned(self, assigned):
                member.assigned([tp.partition for tp in assigned])

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.name,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 heartbeat_interval_ms=HEARTBEAT_MS, session_timeout_ms=SESSION_MS)
        consumer.subscribe([self.topic], listener=Listener())
        try:
            while not self.stopping.is_set():
                batches = consumer.poll(timeout_ms=200)
                for records in batches.values():
                    for record in records:
                        self.got(record.partition, record.offset, record.value)
                if batches:
                    consumer.commit()
        finally:
            consumer.close()


class AiokafkaMember(ThreadMember):
    def __init__(self, bootstrap: str, topic: str, group: str, name: str) -> None:
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        super().__init__(name)

    def run(self) -> None:
        asyncio.run(self._consume())

    async def _consume(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

        member = self

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                member.revoked()

            async def on_partitions_assigned(self, assigned):
                member.assigned([tp.partition for tp in assigned])

        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.name,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    heartbeat_interval_ms=HEARTBEAT_MS, session_timeout_ms=SESSION_MS)
        consumer.subscribe([self.topic], listener=Listener())
        await consumer.start()
        try:
            while not self.stopping.is_set():
                batches = await consumer.getmany(timeout_ms=200)
                for records in batches.values():
                    for record in records:
                        self.got(record.partition, record.offset, record.value)
                if batches:
                    await consumer.commit()
        finally:
            await consumer.stop()


class ProcessMember(Member):
    """A member living in a child process that reports on its stdout (and stderr)."""

    def __init__(self, name: str, argv: list[str], cwd=None) -> None:
        super().__init__(name)
        self.proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.stderr_lines: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(self.proc.stdout, self.on_stdout), daemon=True),
                         threading.Thread(target=self._read, args=(self.proc.stderr, self.on_stderr), daemon=True)]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream, handle: Callable[[str], None]) -> None:
        for line in stream:
            handle(line.rstrip("\n"))

    def on_stdout(self, line: str) -> None:
        raise NotImplementedError

    def on_stderr(self, line: str) -> None:
        self.stderr_lines.append(line)

    def stop_process(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.stop_process()
        try:
            code = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"{self.name} did not stop:\n" + "\n".join(self.stderr_lines[-20:])) from None
        for reader in self._readers:
            reader.join(10)
        assert code == 0, f"{self.name} exited with {code}:\n" + "\n".join(self.stderr_lines[-20:])


class KcatMember(ProcessMember):
    """``kcat -G``: librdkafka's balanced consumer, auto-committing; rebalances are reported on stderr."""

    def __init__(self, bootstrap: str, topic: str, group: str, name: str) -> None:
        super().__init__(name, ["kcat", "-b", bootstrap, "-G", group, "-X", f"client.id={name}",
                                "-X", "auto.offset.reset=earliest", "-X", f"heartbeat.interval.ms={HEARTBEAT_MS}",
                                "-X", f"session.timeout.ms={SESSION_MS}", "-X", "auto.commit.interval.ms=100",
                                "-f", "%p %o %s\\n", "-u", topic])

    def on_stdout(self, line: str) -> None:
        partition, offset, value = line.split(" ", 2)
        self.got(int(partition), int(offset), value.encode())

    def on_stderr(self, line: str) -> None:
        super().on_stderr(line)
        if "rebalanced" in line and "assigned:" in line:
            listed = line.split("assigned:", 1)[1]
            self.assigned([int(part.split("[")[1].rstrip("]").strip()) for part in listed.split(",") if "[" in part])
        elif "rebalanced" in line and "revoked:" in line:
            self.revoked()

    def stop_process(self) -> None:
        self.proc.terminate()  # kcat closes the consumer on SIGTERM: commits and leaves the group


KAFKAJS_MEMBER = r"""
const { Kafka, logLevel } = require("kafkajs");
const [broker, topic, group, name, session, heartbeat] = process.argv.slice(1);
const emit = (event) => process.stdout.write(JSON.stringify(event) + "\n");
const kafka = new Kafka({ clientId: name, brokers: [broker], logLevel: logLevel.ERROR });
const consumer = kafka.consumer({ groupId: group, sessionTimeout: Number(session),
                                  heartbeatInterval: Number(heartbeat), maxWaitTimeInMs: 200 });
consumer.on(consumer.events.GROUP_JOIN, (e) => emit({ event: "assigned", partitions: e.payload.memberAssignment[topic] || [] }));
consumer.on(consumer.events.REBALANCING, () => emit({ event: "revoked" }));
(async () => {
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({ eachMessage: async ({ partition, message }) =>
    emit({ event: "message", partition, offset: Number(message.offset), value: message.value.toString() }) });
  process.stdin.on("end", async () => { await consumer.disconnect(); process.exit(0); });
  process.stdin.resume();
})().catch((e) => { console.error(e); process.exit(1); });
"""


class KafkajsMember(ProcessMember):
    """One kafkajs consumer in a node process; closing its stdin makes it disconnect (and leave)."""

    def __init__(self, bootstrap: str, topic: str, group: str, name: str) -> None:
        super().__init__(name, ["node", "-e", KAFKAJS_MEMBER, bootstrap, topic, group, name, str(SESSION_MS),
                                str(HEARTBEAT_MS)], cwd=ROOT / "tests" / "js")

    def on_stdout(self, line: str) -> None:
        event = json.loads(line)
        if event["event"] == "assigned":
            self.assigned(event["partitions"])
        elif event["event"] == "revoked":
            self.revoked()
        else:
            self.got(event["partition"], event["offset"], event["value"].encode())

    def stop_process(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()


# --- the story -------------------------------------------------------------------------------------------

def create_topic(bootstrap: str, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=PARTITIONS, replication_factor=1)])[name].result(timeout=30)
    return name


def produce(bootstrap: str, topic: str, label: str, per_partition: int = PER_PARTITION) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in range(PARTITIONS):
        for i in range(per_partition):
            producer.produce(topic, value=f"{label}-{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = reader.committed([CKTopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: tp.offset for tp in found}
    finally:
        reader.close()


def balanced(members: list[Member]) -> bool:
    """Every member holds partitions and together they hold each partition exactly once."""
    assignments = [m.assignment for m in members]
    if any(not a for a in assignments):
        return False
    return sorted(p for a in assignments for p in a) == list(range(PARTITIONS))


def consumed(members: list[Member]) -> list[tuple[int, int]]:
    return [(p, o) for m in members for p, o, _ in m.records]


def expected_offsets(upto: int) -> set[tuple[int, int]]:
    return {(p, o) for p in range(PARTITIONS) for o in range(upto)}


def describe(members: list[Member]) -> str:
    return "; ".join(f"{m.name}: assigned {m.assignment}, {len(m.records)} records" for m in members)


def run_group_story(broker, make_member: Callable[[str, str, str, str], Member], prefix: str) -> None:
    bootstrap = broker.bootstrap
    topic = create_topic(bootstrap, prefix)
    group = f"{prefix}-group-{uuid.uuid4().hex[:6]}"
    members = [make_member(bootstrap, topic, group, f"{prefix}-{i}") for i in range(3)]
    try:
        # Three members share the topic, two partitions each, and consume each record exactly once.
        wait_until(lambda: balanced(members), 60, message=f"3 balanced members ({describe(members)})")
        produce(bootstrap, topic, "first")
        wait_until(lambda: set(consumed(members)) == expected_offsets(PER_PARTITION), 60,
                   message=f"the first records to be consumed ({describe(members)})")
        wait_until(lambda: committed(bootstrap, group, topic) == dict.fromkeys(range(PARTITIONS), PER_PARTITION),
                   30, message="the first records to be committed")
        assert sorted(Counter(consumed(members)).values()) == [1] * PARTITIONS * PER_PARTITION
        for member in members:
            assert {p for p, _, _ in member.records} == set(member.assignment or ())

        # One member leaves; the other two take over its partitions and consume exactly the new records.
        leaving = members[2]
        leaving_partitions = set(leaving.assignment or ())
        leaving.close()
        staying = members[:2]
        wait_until(lambda: balanced(staying), 60, message=f"2 members to take over ({describe(staying)})")
        produce(bootstrap, topic, "second")
        wait_until(lambda: set(consumed(members)) == expected_offsets(2 * PER_PARTITION), 60,
                   message=f"the second records to be consumed ({describe(staying)})")
        for member in staying:
            member.close()
        assert sorted(Counter(consumed(members)).values()) == [1] * PARTITIONS * 2 * PER_PARTITION
        taken_over = {p for m in staying for p, o, _ in m.records if o >= PER_PARTITION}
        assert leaving_partitions <= taken_over
        assert committed(bootstrap, group, topic) == dict.fromkeys(range(PARTITIONS), 2 * PER_PARTITION)
    finally:
        for member in members:
            if not member.closed:
                member.close()

    # The commits survive a restart: a new member starts exactly after them.
    broker.stop()
    broker.start()
    assert committed(bootstrap, group, topic) == dict.fromkeys(range(PARTITIONS), 2 * PER_PARTITION)
    produce(bootstrap, topic, "third", per_partition=1)
    resumed = make_member(bootstrap, topic, group, f"{prefix}-resumed")
    try:
        wait_until(lambda: len(resumed.records) >= PARTITIONS, 60, message=f"resume ({describe([resumed])})")
    finally:
        resumed.close()
    assert sorted((p, o, v) for p, o, v in resumed.records) == [
        (p, 2 * PER_PARTITION, f"third-{p}-0".encode()) for p in range(PARTITIONS)]


def test_kcat_balanced_consumers(broker):
    run_group_story(broker, KcatMember, "kcat")


def test_confluent_kafka_group(broker):
    run_group_story(broker, ConfluentMember, "ck")


def test_kafka_python_group(broker):
    run_group_story(broker, KafkaPythonMember, "kp")


def test_aiokafka_group(broker):
    run_group_story(broker, AiokafkaMember, "aio")


def test_kafkajs_group(broker):
    run_group_story(broker, KafkajsMember, "js")
