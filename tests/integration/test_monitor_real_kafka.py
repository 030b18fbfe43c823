"""``burrowpy serve`` against a real Apache Kafka 4.4 node (KRaft), configured as for any cluster.

Groups of every kind Kafka 4.4 keeps: classic (librdkafka), on the consumer protocol of KIP-848 (librdkafka
and the Java consumer with ``group.protocol=consumer``), a Kafka Streams application on the classic and on
the streams protocol (KIP-1071), and a group that only commits (no members). Owners and client ids show for
the classic AND the consumer-protocol group (whose members Kafka writes as separate records naming topics
by id). Kafka's own ``kafka-consumer-groups`` tool drives the rest: ``--reset-offsets`` shows as REWIND,
``--delete-offsets`` and ``--delete`` make the topic's partitions and the group disappear. Kafka's records of
a consumer-protocol member's assignment (with KIP-1251's assignment epochs) are our codec's byte for byte.
Share groups read by librdkafka's share consumer show their start offsets, lags and owners, and, with the
module's Kafka running the Prometheus JMX exporter agent, their in-flight records. Last, nothing Kafka wrote
to ``__consumer_offsets`` during the module was a record the monitor could not decode.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from burrow_support import CLUSTER, BurrowpyProcess, MonitorSettings
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, ShareConsumer, TopicPartition
from harness import Scrape, free_port, wait_until
from kafka_harness import JVM_OPTS, JavaApp, KafkaServer, java_peer, jmx_exporter_agent
from monitor_support import (
    broker_offsets,
    cluster_health_counts,
    committing,
    create_topic,
    produce,
    topic_health,
)
from test_dashboard import browser, screenshot  # noqa: F401 (the dashboard's chromium, for the share groups' card)

from broker.protocol import consumer_offsets
from burrowpy.coordinators.broker_metrics import IN_FLIGHT_METRIC

pytestmark = pytest.mark.integration
OFFSETS_PARTITIONS = 50  # Kafka's offsets.topic.num.partitions default

GROUP_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
INTERVALS = 4


@pytest.fixture(scope="module")
def exporter_port() -> int | None:
    """The port of the module's Kafka's JMX exporter agent, or None when `make install` has not fetched it."""
    port = free_port()
    return port if jmx_exporter_agent(port) else None


@pytest.fixture(scope="module")
def kafka(tmp_path_factory, exporter_port) -> Iterator[KafkaServer]:
    """The module's one Kafka, with the JMX exporter agent (config/kafka-share-jmx-exporter.yml's rules)."""
    agent = [jmx_exporter_agent(exporter_port)] if exporter_port else []
    with KafkaServer(tmp_path_factory.mktemp("kafka"), jvm_opts=[*JVM_OPTS, *agent]) as server:
        yield server


@pytest.fixture(scope="module")
def monitor(kafka, exporter_port, tmp_path_factory) -> Iterator[BurrowpyProcess]:
    settings = MonitorSettings(kafka.bootstrap, intervals=INTERVALS, offset_refresh=1, topic_refresh=1,
                               expire_cache=1, topic_health_refresh=1,
                               broker_metrics=(f"http://127.0.0.1:{exporter_port}/metrics",) if exporter_port else ())
    with BurrowpyProcess(tmp_path_factory.mktemp("monitor") / "burrowpy", settings) as running:
        yield running


@pytest.fixture(scope="module")
def producer(kafka) -> Iterator[Producer]:
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
    yield producer
    producer.flush(10)
    del producer


def topic_with_records(kafka, monitor, producer, topic: str, counts: list[int]) -> None:
    create_topic(kafka.bootstrap, topic, len(counts))
    for partition, count in enumerate(counts):
        produce(producer, topic, partition, count)
    wait_until(lambda: broker_offsets(monitor, topic) == counts, 60, interval=0.2,
               message=f"the monitor to see broker offsets {counts} of {topic}")


def partitions_of(monitor, group: str) -> list[dict] | None:
    status, body = monitor.get(f"/v3/kafka/{CLUSTER}/consumer/{group}/lag")
    return sorted(body["status"]["partitions"], key=lambda p: (p["topic"], p["partition"])) if status == 200 else None


def owners(monitor, group: str) -> set[tuple[str, str]] | None:
    partitions = partitions_of(monitor, group)
    return {(p["owner"], p["client_id"]) for p in partitions} if partitions else None


def commit(consumer: Consumer, offsets: list[TopicPartition]) -> None:
    """Commit, again while a new Kafka is still electing the group's coordinator (NOT_COORDINATOR)."""
    wait_until(lambda: consumer.commit(offsets=offsets, asynchronous=False) or True, 60, interval=0.5,
               message=f"a commit of {offsets}")


def group_tool(kafka, *args: str) -> str:
    return java_peer(GROUP_TOOL, "--bootstrap-server", kafka.bootstrap, *args).stdout


@pytest.mark.parametrize("client", ["confluent-consumer-protocol", "confluent"])
def test_owners_and_client_ids_of_live_groups(kafka, monitor, producer, client):
    """Both group protocols: owners while the member is there, none once it has left."""
    group = topic = f"real-owners-{client}"
    topic_with_records(kafka, monitor, producer, topic, [10, 10, 10])
    with committing(client, kafka.bootstrap, group, topic, lambda _: {0: 10, 1: 10, 2: 5}, partitions=3) as loop:
        wait_until(lambda: loop.committed(2), 60, message=f"{group}'s first commits")
        seen = wait_until(lambda: (o := owners(monitor, group)) and ("", "") not in o and o, 60, interval=0.2,
                          message=f"owners of {group} in the monitor")
        assert seen == {("/127.0.0.1", loop.client_id)}
        partitions = partitions_of(monitor, group)
        assert [(p["partition"], p["current_lag"]) for p in partitions] == [(0, 0), (1, 0), (2, 5)]
    wait_until(lambda: owners(monitor, group) == {("", "")}, 60, interval=0.2,
               message=f"the owners of {group} to go once its member left")


def test_a_group_that_only_commits(kafka, monitor, producer):
    group = topic = "real-commits-only"
    topic_with_records(kafka, monitor, producer, topic, [20, 20])
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        for offsets in ({0: 5, 1: 5}, {0: 10, 1: 8}):
            commit(consumer, [TopicPartition(topic, p, o) for p, o in offsets.items()])
    finally:
        consumer.close()
    partitions = wait_until(lambda: (p := partitions_of(monitor, group)) and p[0]["end"]["offset"] == 10 and p,
                            60, interval=0.2, message=f"{group}'s commits in the monitor")
    assert [(p["partition"], p["current_lag"], p["owner"]) for p in partitions] == [(0, 10, ""), (1, 12, "")]


def test_the_group_tool_rewinds_and_deletes(kafka, monitor, producer):
    group = "real-tool"
    for topic in ("real-tool-a", "real-tool-b"):
        topic_with_records(kafka, monitor, producer, topic, [30])
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        for offset in (10, 20, 30):
            commit(consumer, [TopicPartition(t, 0, offset) for t in ("real-tool-a", "real-tool-b")])
    finally:
        consumer.close()
    wait_until(lambda: (p := partitions_of(monitor, group)) and all(x["end"]["offset"] == 30 for x in p), 60,
               interval=0.2, message=f"{group}'s commits in the monitor")

    out = group_tool(kafka, "--group", group, "--topic", "real-tool-a", "--reset-offsets", "--to-offset", "5",
                     "--execute")
    assert "real-tool-a" in out and " 5" in out
    rewound = wait_until(lambda: (p := partitions_of(monitor, group)) and p[0]["status"] == "REWIND" and p, 60,
                         interval=0.2, message="the reset to show as REWIND")
    assert (rewound[0]["topic"], rewound[0]["end"]["offset"]) == ("real-tool-a", 5)
    status, body = monitor.get(f"/v3/kafka/{CLUSTER}/consumer/{group}/status")
    assert status == 200 and body["status"]["status"] == "ERR"

    group_tool(kafka, "--group", group, "--topic", "real-tool-a", "--delete-offsets")
    wait_until(lambda: [p["topic"] for p in partitions_of(monitor, group) or []] == ["real-tool-b"], 60, interval=0.2,
               message="--delete-offsets to remove real-tool-a from the group")

    group_tool(kafka, "--group", group, "--delete")
    wait_until(lambda: monitor.get(f"/v3/kafka/{CLUSTER}/consumer/{group}")[0] == 404, 60, interval=0.2,
               message="--delete to remove the group")
    assert group not in monitor.get(f"/v3/kafka/{CLUSTER}/consumer")[1]["consumers"]


def settled(monitor, group: str, topic: str, ends: list[int]) -> bool:
    """The monitor shows the group committed at ``ends`` on every partition of ``topic``."""
    partitions = [p for p in partitions_of(monitor, group) or [] if p["topic"] == topic]
    return [p["end"]["offset"] if p["end"] else None for p in partitions] == ends


def test_java_consumer_on_the_consumer_protocol(kafka, monitor, producer):
    group = topic = "real-java-848"
    topic_with_records(kafka, monitor, producer, topic, [7, 8])
    output = java_peer("burrowpy.peers.JavaClients", "consume", kafka.bootstrap, topic, group, "15", "consumer").stdout
    assert '"committed","value":{"0":7,"1":8}' in output
    wait_until(lambda: settled(monitor, group, topic, [7, 8]), 60, interval=0.2,
               message=f"{group}'s commits in the monitor")


@pytest.mark.parametrize("protocol", ["classic", "streams"])
def test_a_kafka_streams_application(kafka, monitor, producer, tmp_path, protocol):
    """A word count: its group commits the input topic; with the streams protocol (KIP-1071) Kafka also writes
    the streams group's own records, which the monitor skips on purpose."""
    application = f"real-streams-{protocol}"
    source = f"{application}-in"
    topic_with_records(kafka, monitor, producer, source, [0, 0])
    with JavaApp("burrowpy.peers.WordCount", kafka.bootstrap, application, source, f"{application}-out",
                 str(tmp_path / "state"), protocol) as app:
        wait_until(lambda: app.saw("state", "RUNNING"), 120, interval=0.2, message="the Streams application to run")
        for partition in (0, 1):
            for line in ("to be or not to be", "that is the question"):
                producer.produce(source, value=line.encode(), partition=partition)
        assert producer.flush(30) == 0
        wait_until(lambda: settled(monitor, application, source, [2, 2]), 120, interval=0.2,
                   message=f"{application}'s commits of {source} in the monitor")
        assert app.stop() in (0, 143)


def test_offsets_committed_in_aborted_transactions_never_show(kafka, monitor, producer):
    """send_offsets_to_transaction writes the group's commit before the transaction ends: an aborted one must
    never reach the monitor (Burrow reads it as a commit), a committed one must."""
    group = topic = "real-transactional-commits"
    topic_with_records(kafka, monitor, producer, topic, [10])
    transactional = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"{group}-producer"})
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        transactional.init_transactions(60)
        for committed, offset in ((False, 9), (True, 4)):
            transactional.begin_transaction()
            transactional.send_offsets_to_transaction([TopicPartition(topic, 0, offset)],
                                                      consumer.consumer_group_metadata(), 60)
            if committed:
                transactional.commit_transaction(60)
            else:
                transactional.abort_transaction(60)
    finally:
        consumer.close()
    partitions = wait_until(lambda: (p := partitions_of(monitor, group)) and p[0]["end"] and p, 60, interval=0.2,
                            message=f"{group}'s committed transaction in the monitor")
    assert (partitions[0]["end"]["offset"], partitions[0]["current_lag"]) == (4, 6)
    status, detail = monitor.get(f"/v3/kafka/{CLUSTER}/consumer/{group}")
    stored = [entry["offset"] for entry in detail["topics"][topic][0]["offsets"] if entry]
    assert status == 200 and stored == [4], stored


def test_kafkas_current_assignment_records_are_ours_byte_for_byte(kafka, monitor, producer):
    """Kafka 4.4 writes each member's current assignment with the epoch since which it holds each partition
    (KIP-1251, a tagged field): our codec reads those records and writes the same bytes back."""
    group = topic = "real-assignment-epochs"
    topic_with_records(kafka, monitor, producer, topic, [5, 5])
    with committing("confluent-consumer-protocol", kafka.bootstrap, group, topic, lambda _: {0: 5, 1: 5}) as loop:
        wait_until(lambda: loop.committed(1), 60, message=f"{group}'s first commit")
    reader = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "real-assignment-reader",
                       "enable.auto.commit": False, "enable.partition.eof": True})
    reader.assign([TopicPartition("__consumer_offsets", p, OFFSET_BEGINNING) for p in range(OFFSETS_PARTITIONS)])
    values: list[bytes] = []
    ended: set[int] = set()
    try:
        def read_to_the_end() -> bool:
            for message in reader.consume(500, timeout=0.2):
                if message.error() is not None:
                    ended.add(message.partition())
                    continue
                key = consumer_offsets.decode_key(message.key())
                if (isinstance(key, consumer_offsets.ConsumerGroupKey) and key.group == group and message.value()
                        and key.record_type == consumer_offsets.CURRENT_ASSIGNMENT_RECORD):
                    values.append(message.value())
            return len(ended) == OFFSETS_PARTITIONS
        wait_until(read_to_the_end, 60, message="__consumer_offsets read to its end")
    finally:
        reader.close()
    assert values, f"no current-assignment record of {group}"
    held = [record for value in values
            for record in consumer_offsets.decode_consumer_group_value(consumer_offsets.CURRENT_ASSIGNMENT_RECORD, value)[
                "assigned_partitions"] if record["partitions"]]
    assert held and all(len(entry["assignment_epochs"]) == len(entry["partitions"]) for entry in held)
    for value in values:
        decoded = consumer_offsets.decode_consumer_group_value(consumer_offsets.CURRENT_ASSIGNMENT_RECORD, value)
        assert consumer_offsets.consumer_group_value(consumer_offsets.CURRENT_ASSIGNMENT_RECORD, decoded) == value


SHARE_GROUP_TOOL = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def share_partitions(monitor, group: str) -> dict[int, dict] | None:
    status, body = monitor.get(f"/v3/kafka/{CLUSTER}/share-group/{group}/lag")
    return {p["partition"]: {**p, "group": body["status"]} for p in body["status"]["partitions"]} \
        if status == 200 else None


class ShareReader(threading.Thread):
    """A librdkafka share consumer (implicit acknowledgement: a poll accepts the records of the one before)
    polling in a thread of its own, the only one that touches it, until ``stop``; closing commits its last
    acknowledgements and leaves the group."""

    def __init__(self, bootstrap: str, group: str, topic: str, client_id: str) -> None:
        super().__init__(daemon=True)
        self.consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id})
        self.consumer.subscribe([topic])
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                self.consumer.poll(0.2)
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        assert not self.is_alive(), "the share consumer did not close"


def test_a_share_group_running_then_stopped(kafka, monitor, producer, browser):  # noqa: F811
    """A share group (KIP-932; share.version is finalized by default in Kafka 4.4) reads a topic that keeps
    receiving records: the monitor lists it with each share-partition's start offset, log end and lag, OK while
    it consumes; once its consumer stops, the start offsets stop moving while records wait, and the partitions
    STALL, as the dashboard's cluster card shows. The figures are those of Kafka's own ``kafka-share-groups
    --describe --offsets``. While the consumer runs it is each share-partition's owner (ShareGroupDescribe);
    once it stops, no partition has one."""
    topic, group, client_id = "shared-jobs", "share-workers", "share-worker-1"
    create_topic(kafka.bootstrap, topic, 2)
    reader = ShareReader(kafka.bootstrap, group, topic, client_id)
    reader.start()
    fed = threading.Event()

    def feed() -> None:  # a share group starts at the log end (share.auto.offset.reset=latest): keep records coming
        while not fed.wait(0.05):  # about 20 records a second on each partition
            for partition in (0, 1):
                producer.produce(topic, value=b"job", partition=partition)
            producer.poll(0)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        def consuming() -> dict | None:
            parts = share_partitions(monitor, group)
            return parts if parts and len(parts) == 2 and all(p["start_offset"] > 0 for p in parts.values()) \
                and parts[0]["group"]["status"] == "OK" and parts[0]["group"]["group_state"] == "Stable" else None
        first = wait_until(consuming, 90, interval=0.2, message=f"{group} to consume both partitions, OK")
        moved = wait_until(lambda: (parts := consuming()) and all(parts[n]["start_offset"] > first[n]["start_offset"]
                                                                  for n in (0, 1)) and parts,
                           60, interval=0.2, message=f"the start offsets of {group} to move on")
        assert all(p["log_end_offset"] >= p["start_offset"] for p in moved.values())
        owned = wait_until(lambda: (parts := consuming()) and parts[0]["group"]["members"] == 1
                           and all(p["owners"] for p in parts.values()) and parts,
                           30, interval=0.2, message=f"the member of {group} as its partitions' owner")
        [member] = owned[0]["owners"]
        assert member["client_id"] == client_id and member["member_id"] and member["host"].endswith("127.0.0.1")
        assert all((p["owners"], p["owner"], p["client_id"]) == ([member], member["host"], client_id)
                   for p in owned.values()), owned
        browser.get(monitor.base + "/ui/#/clusters")
        row = f".share-groups tr[data-share-group='{group}']"
        wait_until(lambda: (rows := browser.find_elements("css selector", row))
                   and rows[0].text.count(f"{client_id} @ {member['host']}") == 2,
                   30, interval=0.2, message=f"the dashboard's row of {group} with its member")
    finally:
        reader.stop()
        fed.set()
        feeder.join(10)
    for partition in (0, 1):  # records that wait for no one
        produce(producer, topic, partition, 30)

    with ThreadPoolExecutor(1) as tool:  # Kafka's tool starts a JVM: run it while the monitor's window fills
        described = tool.submit(java_peer, SHARE_GROUP_TOOL, "--bootstrap-server", kafka.bootstrap, "--describe",
                                "--offsets", "--group", group)

        def stalled() -> dict | None:
            parts = share_partitions(monitor, group)
            return parts if all(p["status"] == "STALL" and p["current_lag"] >= 30 for p in parts.values()) \
                and parts[0]["group"]["status"] == "ERR" else None
        stalled_parts = wait_until(stalled, 60, interval=0.2, message=f"{group} to STALL once its consumer stopped")
        assert stalled_parts[0]["group"]["group_state"] == "Empty" and stalled_parts[0]["group"]["members"] == 0
        assert all((p["owners"], p["owner"], p["client_id"]) == ([], "", "") for p in stalled_parts.values())
        status, body = monitor.get(f"/v3/kafka/{CLUSTER}/share-group/{group}/status")
        assert status == 200 and body["status"]["status"] == "ERR"
        assert sorted((p["partition"], p["status"]) for p in body["status"]["partitions"]) == [(0, "STALL"),
                                                                                              (1, "STALL")]
        status, text = monitor.get("/metrics")
        assert status == 200
        share_series = [line for line in text.splitlines() if line.startswith("burrow_kafka_share_group")]
        assert f'burrow_kafka_share_group_partition_status{{cluster="{CLUSTER}",partition="0",share_group="{group}",' \
               f'topic="{topic}"}} 5.0' in share_series, share_series
        browser.get(monitor.base + "/ui/#/clusters")
        wait_until(lambda: (rows := browser.find_elements("css selector", row)) and rows[0].text.count("STALL") == 2,
                   30, interval=0.2, message=f"the dashboard's row of {group} with its STALLed partitions")
        shown = browser.find_element("css selector", row).text
        assert "ERR" in shown and "Empty" in shown and f"{topic}/0" in shown and f"{topic}/1" in shown, shown
        assert shown.count("no member") == 2 and client_id not in shown, shown
        screenshot(browser, "share-groups")
        output = described.result(120).stdout

    # No consumer and no more records: Kafka's tool and the monitor say the same.
    expected = {int(fields[2]): (int(fields[3]), int(fields[4])) for line in output.splitlines()
                if (fields := line.split()) and fields[0] == group and fields[1] == topic}
    assert set(expected) == {0, 1}, output
    wait_until(lambda: {n: (p["start_offset"], p["current_lag"]) for n, p in share_partitions(monitor, group).items()}
               == expected, 30, interval=0.2, message=f"the monitor's figures of {group} to be {expected}")
    lag_lines = {line for line in monitor.get("/metrics")[1].splitlines()
                 if line.startswith("burrow_kafka_share_group_partition_lag{") and f'share_group="{group}"' in line}
    assert lag_lines == {f'burrow_kafka_share_group_partition_lag{{cluster="{CLUSTER}",partition="{n}",'
                         f'share_group="{group}",topic="{topic}"}} {float(lag)}' for n, (_, lag) in expected.items()}


def jmx_in_flight(port: int, group: str, topic: str) -> int | None:
    """The partition-0 gauge ``InFlightMessageCount`` of the share group as the broker's JMX exporter serves it."""
    values = [sample.value for sample in Scrape(port).samples if sample.name == IN_FLIGHT_METRIC
              and (sample.labels["group"], sample.labels["topic"], sample.labels["partition"]) == (group, topic, "0")]
    return int(values[0]) if values else None


def test_records_in_flight_while_held_unacknowledged(kafka, exporter_port, monitor, producer, browser):  # noqa: F811
    """A share consumer in explicit acknowledgement mode acquires records and holds them: the monitor's
    ``in_flight`` (API, /metrics and the dashboard's share-group row) is the broker's own JMX figure, above 0,
    through the exporter agent; once it acknowledges them both go back to 0."""
    if exporter_port is None:
        pytest.skip("the Prometheus JMX exporter agent is missing: run `make install`")
    topic, group = "held-jobs", "holders"
    create_topic(kafka.bootstrap, topic, 1)
    consumer = ShareConsumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "client.id": "holder-1",
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    try:
        held: list = []

        def acquired() -> list:  # a share group starts at the log end: records keep coming until it gets some
            produce(producer, topic, 0, 5)
            held.extend(message for message in consumer.poll(0.5) if message.error() is None)
            return held
        wait_until(acquired, 60, interval=0, message=f"{group} to acquire records of {topic}")
        # Kafka describes no start offset for the share-partition until a first acknowledgement is persisted
        for message in held:
            consumer.acknowledge(message)
        consumer.commit_sync(30)
        wait_until(lambda: share_partitions(monitor, group), 30, interval=0.2,
                   message=f"the monitor to show {group}'s share-partition")
        held.clear()
        wait_until(acquired, 30, interval=0, message=f"{group} to acquire more records of {topic}")

        seen: list = []  # the latest (monitor's figure, JMX's), for a failure's message

        def agreed(count: int | None = None) -> int | None:
            parts = share_partitions(monitor, group)
            jmx = jmx_in_flight(exporter_port, group, topic)
            shown = parts[0]["in_flight"] if parts and 0 in parts else None
            seen[:] = [shown, jmx]
            return shown if shown == jmx and shown is not None and (count is None or shown == count) else None
        try:
            in_flight = wait_until(agreed, 30, interval=0.2)
        except AssertionError as exc:
            raise AssertionError(f"the monitor's in-flight count of {group} is not JMX's: {seen}") from exc
        assert in_flight >= len(held) > 0
        series = f'burrow_kafka_share_group_partition_in_flight{{cluster="{CLUSTER}",partition="0",' \
                 f'share_group="{group}",topic="{topic}"}}'
        assert any(line.startswith(series) and float(line.split()[-1]) > 0
                   for line in monitor.get("/metrics")[1].splitlines()), series
        browser.get(monitor.base + "/ui/#/clusters")
        row = f".share-groups tr[data-share-group='{group}'] [data-partition='{topic}/0']"
        wait_until(lambda: (cells := browser.find_elements("css selector", row))
                   and f", in flight {in_flight})" in cells[0].text,
                   30, interval=0.2, message=f"the dashboard's row of {group} with {in_flight} records in flight")

        for message in held:
            consumer.acknowledge(message)
        consumer.commit_sync(30)
        wait_until(lambda: agreed(0) == 0, 30, interval=0.2, message=f"{group}'s in-flight count to go back to 0")
        assert f"{series} 0.0" in monitor.get("/metrics")[1].splitlines()
    finally:
        consumer.close()


LOG_DIRS_TOOL = "org.apache.kafka.tools.LogDirsCommand"


def test_topic_health(kafka, monitor, producer, browser):  # noqa: F811
    """Topic health (burrowpy.coordinators.topic_health) on Kafka 4.4: the low watermark follows Kafka's
    DeleteRecords, the sizes on disk are those of Kafka's ``kafka-log-dirs`` tool, replicas / ISR / leader
    and min.insync.replicas are Kafka's, the produce rate shows on the partition records go to, and a
    healthy single node counts no under-replicated, under-min-ISR or offline partition; the dashboard's
    Topics view and topic page show the figures."""
    from confluent_kafka.admin import AdminClient

    topic = "health-orders"
    create_topic(kafka.bootstrap, topic, 2)
    produce(producer, topic, 0, 50)
    produce(producer, topic, 1, 80)
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, 20)]).values():
        future.result(30)
    with ThreadPoolExecutor(1) as tool:  # Kafka's tool starts a JVM: run it while the monitor reads
        described = tool.submit(java_peer, LOG_DIRS_TOOL, "--bootstrap-server", kafka.bootstrap, "--describe",
                                "--topic-list", topic)

        def read() -> dict | None:
            health = topic_health(monitor, topic)
            return health if health and [(p["low_watermark"], p["high_watermark"]) for p in health["partitions"]] \
                == [(20, 50), (0, 80)] else None

        health = wait_until(read, 30, interval=0.2, message=f"the health of {topic}")
        output = described.result(120).stdout
    json_line = next(line for line in output.splitlines() if line.startswith("{"))
    sizes = {entry["partition"]: entry["size"] for broker in json.loads(json_line)["brokers"]
             for log_dir in broker["logDirs"] for entry in log_dir["partitions"]}
    assert {f"{topic}-{p['partition']}": p["size_bytes"] for p in health["partitions"]} == sizes
    assert all(size > 0 for size in sizes.values())
    assert health["size_bytes"] == sum(sizes.values()) and health["min_insync_replicas"] == 1
    for row in health["partitions"]:
        assert (row["leader"], row["replicas"], row["isr"], row["offline_replicas"]) == (1, [1], [1], [])
        assert not (row["under_replicated"] or row["under_min_isr"] or row["offline"])

    fed = threading.Event()

    def feed() -> None:
        while not fed.wait(0.02):
            producer.produce(topic, value=b"order", partition=1)
            producer.poll(0)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        def producing() -> dict | None:
            rows = topic_health(monitor, topic)["partitions"]
            return rows if rows[1]["produce_rate"] and rows[0]["produce_rate"] == 0.0 else None
        rows = wait_until(producing, 30, interval=0.2, message=f"a produce rate on {topic}/1 only")
    finally:
        fed.set()
        feeder.join(10)
    assert 0 < rows[1]["produce_rate"] < 100, rows  # at most one record per 20 ms
    scrape = Scrape(monitor.port)
    assert cluster_health_counts(scrape) == {"under_replicated": 0, "under_min_isr": 0, "offline": 0}
    assert scrape.value("burrow_kafka_cluster_brokers", cluster=CLUSTER) == 1
    labels = {"cluster": CLUSTER, "topic": topic}
    assert scrape.value("burrow_kafka_topic_partition_low_watermark", **labels, partition="0") == 20
    assert scrape.value("burrow_kafka_topic_partition_size_bytes", **labels) >= sum(sizes.values())
    assert scrape.value("burrow_kafka_topic_partition_in_sync_replicas", **labels, partition="1") == 1
    assert scrape.value("burrow_kafka_topic_min_insync_replicas", **labels) == 1
    assert scrape.value("burrow_kafka_topic_produce_records_per_second", **labels) > 0

    browser.get(monitor.base + f"/ui/#/topics/{CLUSTER}")
    row = f"tr[data-topic='{topic}']"
    wait_until(lambda: (rows := browser.find_elements("css selector", row)) and "OK" in rows[0].text, 30,
               interval=0.2, message=f"the Topics view's row of {topic}")
    shown = browser.find_element("css selector", row).text
    assert "B" in shown and "/s" in shown, shown  # a size and a produce rate
    assert "1 broker · partitions: OK" in browser.find_element("css selector", ".cluster-health").text
    screenshot(browser, "topic-health")
    browser.get(monitor.base + f"/ui/#/topic/{CLUSTER}/{topic}")
    wait_until(lambda: (cells := browser.find_elements("css selector", "tr[data-partition='0'] td"))
               and cells[2].text == "20", 30, interval=0.2, message="the topic page's low watermark of partition 0")
    assert browser.find_element("css selector", "tr[data-partition='0']").text.split()[-1] == "OK"


def test_every_record_kafka_wrote_was_understood(monitor):
    """Run last in the module: everything the groups above made Kafka write was decoded or skipped on purpose."""
    log = monitor.log_path.read_text()
    assert "started" in log
    assert "skipped offsets-topic record" not in log
    assert "failed to decode" not in log
