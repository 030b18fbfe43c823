"""Real consumers and small questions to the monitors, for the monitor's end-to-end tests.

Consumers: each drives one group on our broker by committing the offsets it is told, with confluent-kafka
(librdkafka) or kafka-python, from its own thread.

    with committing("kafka-python", bootstrap, "g", "t", lambda n: {0: 10 + n}) as consumer:
        wait_until(lambda: consumer.committed(4))

They subscribe (so the broker records them as the group's members, which monitors show as partition
owners), wait until they own every partition of their topic, then commit with their client's commit
API, synchronously, every COMMIT_PERIOD seconds.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from burrow_support import CLUSTER, CONSUMER, BurrowpyProcess, MonitorProcess
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient, NewTopic
from harness import Scrape, wait_until
from kafka import KafkaConsumer
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as PythonPartition

OFFSETS_TOPIC = "__consumer_offsets"
SELF_GROUP = f"burrow-{CONSUMER}"  # where burrowpy's consumer module reports its position in OFFSETS_TOPIC
COMMIT_PERIOD = 0.4  # seconds between a live consumer's commits
CLIENTS = ("confluent", "kafka-python")


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def produce(producer: Producer, topic: str, partition: int, count: int) -> None:
    for number in range(count):
        producer.produce(topic, value=b"record %d" % number, partition=partition)
    assert producer.flush(30) == 0


def broker_offsets(monitor: MonitorProcess, topic: str) -> list[int] | None:
    status, body = monitor.get(f"/v3/kafka/{CLUSTER}/topic/{topic}")
    return body["offsets"] if status == 200 else None


def offsets_topic_ends(bootstrap: str, partitions: int) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        ends = consumer.end_offsets([PythonPartition(OFFSETS_TOPIC, p) for p in range(partitions)])
    finally:
        consumer.close()
    return {tp.partition: end for tp, end in ends.items()}


def wait_until_offsets_topic_read(monitor: BurrowpyProcess) -> None:
    """Wait until burrowpy has read ``__consumer_offsets`` up to where it ends now: its consumer module
    reports its own position there as the commits of group ``burrow-local`` (Burrow 1.2.1 has no such group)."""
    partitions = len(broker_offsets(monitor, OFFSETS_TOPIC))
    ends = offsets_topic_ends(monitor.settings.bootstrap, partitions)

    def read_everything() -> bool:
        status, body = monitor.get(f"/v3/kafka/{CLUSTER}/consumer/{SELF_GROUP}")
        if status != 200:
            return False
        entries = body["topics"][OFFSETS_TOPIC]
        position = {p: e["offsets"][-1]["offset"] for p, e in enumerate(entries) if e["offsets"]}
        return all(position.get(p, 0) >= end for p, end in ends.items() if end > 0)
    wait_until(read_everything, 30, interval=0.1, message="the monitor to read __consumer_offsets to its end")


class ConfluentCommitter:
    """A subscribed librdkafka consumer that commits offsets it is given."""

    group_settings: dict[str, str] = {}  # the classic group protocol: librdkafka's default

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self.client_id = f"{group}-librdkafka"
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": self.client_id,
                                  "enable.auto.commit": False, "auto.offset.reset": "latest", **self.group_settings})
        self.consumer.subscribe([topic])

    def wait_assigned(self) -> None:
        def assigned() -> bool:
            self.consumer.poll(0.1)
            return len(self.consumer.assignment()) == self.partitions
        wait_until(assigned, 30, interval=0, message=f"{self.client_id} to be assigned every partition")

    def commit(self, offsets: dict[int, int]) -> None:
        self.consumer.commit(offsets=[ConfluentPartition(self.topic, p, o) for p, o in offsets.items()],
                             asynchronous=False)

    def idle(self, seconds: float) -> None:
        # poll serves the group's callbacks; it returns early when a record arrives, which is dropped
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.consumer.poll(left)

    def close(self) -> None:
        self.consumer.close()


class KafkaPythonCommitter:
    """A subscribed kafka-python consumer that commits offsets it is given."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self.client_id = f"{group}-kafka-python"
        self._settings = {"bootstrap_servers": bootstrap, "group_id": group, "client_id": self.client_id,
                          "enable_auto_commit": False, "auto_offset_reset": "latest",
                          # Fresh metadata every second: a topic just created on a KRaft cluster can be missing
                          # from the first answer, and with kafka-python's default (5 minutes) the group would be
                          # assigned nothing until then.
                          "metadata_max_age_ms": 1000}
        self.consumer = KafkaConsumer(topic, **self._settings)

    def wait_assigned(self) -> None:
        def assigned() -> bool:
            self.consumer.poll(100)
            return len(self.consumer.assignment()) == self.partitions
        # On a busy machine a kafka-python member of a new group on Kafka 4.4 has been seen to stay without an
        # assignment for minutes: after 30 s it leaves and joins again as a new consumer, as an application would.
        for attempt in range(3):
            try:
                wait_until(assigned, 30, interval=0, message=f"{self.client_id} to be assigned every partition")
                return
            except AssertionError:
                if attempt == 2:
                    raise
                self.consumer.close()
                self.consumer = KafkaConsumer(self.topic, **self._settings)

    def commit(self, offsets: dict[int, int]) -> None:
        self.consumer.commit({PythonPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})

    def idle(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.consumer.poll(max(1, int(left * 1000)))

    def close(self) -> None:
        self.consumer.close()


class ConsumerProtocolCommitter(ConfluentCommitter):
    """The same librdkafka consumer in a group on the consumer protocol of KIP-848 (Apache Kafka 4.x)."""

    group_settings = {"group.protocol": "consumer"}


COMMITTERS = {"confluent": ConfluentCommitter, "kafka-python": KafkaPythonCommitter,
              "confluent-consumer-protocol": ConsumerProtocolCommitter}


class CommitLoop:
    """A consumer in its own thread (the clients are not shared between threads): it joins its group,
    then commits ``offsets_for(round)`` every COMMIT_PERIOD seconds until stopped, or ``rounds`` times."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, partitions: int,
                 offsets_for: Callable[[int], dict[int, int]], rounds: int | None = None) -> None:
        self.committer = COMMITTERS[client](bootstrap, group, topic, partitions)
        self.offsets_for = offsets_for
        self.rounds = rounds
        self.commits = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"commit-loop-{group}", daemon=True)

    @property
    def client_id(self) -> str:
        return self.committer.client_id

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self.committer.wait_assigned()
            while not self._stop.is_set() and self.commits != self.rounds:
                self.committer.commit(self.offsets_for(self.commits))
                self.commits += 1
                self.committer.idle(COMMIT_PERIOD)
        except BaseException as exc:  # handed to the test thread by committed() and stop()
            self.error = exc
        finally:
            self.committer.close()

    def committed(self, count: int) -> bool:
        if self.error is not None:
            raise AssertionError(f"the consumer failed: {self.error!r}") from self.error
        return self.commits >= count

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the consumer thread did not stop"
        if self.error is not None:
            raise AssertionError(f"the consumer failed: {self.error!r}") from self.error


@contextlib.contextmanager
def committing(client: str, bootstrap: str, group: str, topic: str, offsets_for: Callable[[int], dict[int, int]],
               *, partitions: int = 2, rounds: int | None = None) -> Iterator[CommitLoop]:
    """A CommitLoop that runs for the duration of the ``with`` block (and is always stopped)."""
    loop = CommitLoop(client, bootstrap, group, topic, partitions, offsets_for, rounds)
    loop.start()
    try:
        yield loop
    finally:
        loop.stop()


def topic_health(monitor: MonitorProcess, topic: str) -> dict | None:
    """burrowpy's health figures of the topic (``health`` in ``GET /v3/kafka/{cluster}/topic/{topic}``)."""
    status, body = monitor.get(f"/v3/kafka/{CLUSTER}/topic/{topic}")
    return body["health"] if status == 200 else None


def cluster_health_counts(scrape: Scrape) -> dict[str, float]:
    """The cluster's under-replicated, under-min-ISR and offline partition counts from /metrics."""
    return {kind: scrape.value(f"burrow_kafka_cluster_{kind}_partitions", cluster=CLUSTER)
            for kind in ("under_replicated", "under_min_isr", "offline")}
