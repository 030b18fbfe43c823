"""Transactions on our broker with real clients: librdkafka's transactional producer (confluent-kafka),
read_committed and read_uncommitted consumers, consume-transform-produce with offsets in the transaction,
producers killed mid-transaction, a broker killed mid-transaction, and Kafka's own kafka-transactions tool.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from burrow_support import CLUSTER, BurrowpyProcess, MonitorSettings
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from harness import BrokerProcess, wait_until
from kafka_harness import java_peer, run_word_count
from monitor_support import wait_until_offsets_topic_read

from broker.groups.hashing import offsets_partition_for

pytestmark = pytest.mark.integration

TXN_PRODUCER = Path(__file__).with_name("txn_producer.py")
PARTITION_EOF = -191
OFFSET_INVALID = -1001  # librdkafka: no committed offset
# Timed-out transactions are looked for every 200 ms here (Kafka's default: every 10 s).
BROKER_CONFIG = {"group.initial.rebalance.delay.ms": 200,
                 "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200}


def offsets_partition(group_id: str) -> int:
    return offsets_partition_for(group_id, 50)


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def transactional_producer(bootstrap: str, transactional_id: str, **extra) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **extra})
    producer.init_transactions(30)
    return producer


def read_values(bootstrap: str, topic: str, isolation: str, partitions: int = 1) -> list[bytes]:
    """Every value a consumer with ``isolation`` gets from the start to the end of each partition (for
    read_committed, the end is the last stable offset)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}", "isolation.level": isolation,
                         "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    try:
        def all_read() -> bool:
            for message in consumer.consume(500, timeout=0.2):
                if message.error() is None:
                    values.append(message.value())
                    at_end.discard(message.partition())
                elif message.error().code() == PARTITION_EOF:
                    at_end.add(message.partition())
                else:
                    raise AssertionError(f"consumer error: {message.error()}")
            return len(at_end) == partitions
        wait_until(all_read, 30, interval=0, message=f"the end of {topic} ({isolation})")
    finally:
        consumer.close()
    return values


def kafka_transactions_tool(bootstrap: str, *args: str) -> list[dict[str, str]]:
    """Kafka's kafka-transactions.sh (TransactionsCommand): its table output, one dict per row."""
    output = java_peer("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bootstrap, *args).stdout
    header, *rows = [[cell.strip() for cell in line.split("\t")] for line in output.splitlines() if line.strip()]
    return [dict(zip(header, row, strict=False)) for row in rows]


def listed_state(bootstrap: str, transactional_id: str) -> str | None:
    rows = [row for row in kafka_transactions_tool(bootstrap, "list") if row["TransactionalId"] == transactional_id]
    return rows[0]["TransactionState"] if rows else None


def test_committed_records_are_read_once_and_aborted_ones_only_uncommitted(broker):
    create_topic(broker.bootstrap, "txn-basic", 2)
    producer = transactional_producer(broker.bootstrap, "txn-basic")
    producer.begin_transaction()
    for i in range(6):
        producer.produce("txn-basic", value=f"c1-{i}".encode(), partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(4):
        producer.produce("txn-basic", value=f"a-{i}".encode(), partition=i % 2)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce("txn-basic", value=b"c2", partition=0)
    producer.commit_transaction(30)

    committed = sorted(read_values(broker.bootstrap, "txn-basic", "read_committed", 2))
    assert committed == sorted([f"c1-{i}".encode() for i in range(6)] + [b"c2"])
    everything = sorted(read_values(broker.bootstrap, "txn-basic", "read_uncommitted", 2))
    assert everything == sorted(committed + [f"a-{i}".encode() for i in range(4)])


def test_an_open_transaction_holds_read_committed_consumers_at_its_first_offset(broker):
    create_topic(broker.bootstrap, "txn-lso")
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce("txn-lso", value=b"before", partition=0)
    plain.flush(30)
    txn = transactional_producer(broker.bootstrap, "txn-lso")
    txn.begin_transaction()
    txn.produce("txn-lso", value=b"in-txn", partition=0)
    txn.flush(30)
    plain.produce("txn-lso", value=b"after", partition=0)
    plain.flush(30)

    assert read_values(broker.bootstrap, "txn-lso", "read_committed") == [b"before"]
    assert read_values(broker.bootstrap, "txn-lso", "read_uncommitted") == [b"before", b"in-txn", b"after"]
    # the last stable offset, as ListOffsets tells a read_committed client, is the transaction's first offset
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lso-reader",
                       "isolation.level": "read_committed"})
    try:
        assert reader.get_watermark_offsets(TopicPartition("txn-lso", 0), timeout=10) == (0, 1)
        txn.commit_transaction(30)
        assert reader.get_watermark_offsets(TopicPartition("txn-lso", 0), timeout=10) == (0, 4)
    finally:
        reader.close()
    assert read_values(broker.bootstrap, "txn-lso", "read_committed") == [b"before", b"in-txn", b"after"]


def test_consume_transform_produce_is_exactly_once_with_an_aborted_round(broker):
    create_topic(broker.bootstrap, "ctp-in", 2)
    create_topic(broker.bootstrap, "ctp-out", 2)
    source = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(200):
        source.produce("ctp-in", value=str(i).encode(), partition=i % 2)
    source.flush(30)

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ctp", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    producer = transactional_producer(broker.bootstrap, "ctp-processor")
    consumer.subscribe(["ctp-in"])
    processed = 0
    rounds = 0
    try:
        while processed < 200:
            batch = [m for m in consumer.consume(25, timeout=1) if m.error() is None]
            if not batch:
                continue
            rounds += 1
            producer.begin_transaction()
            for message in batch:
                producer.produce("ctp-out", value=b"x" + message.value(), partition=message.partition())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            if rounds == 3:
                # a failure: the round is aborted (its records written first) and its input read again
                # from the committed offsets
                producer.flush(30)
                producer.abort_transaction(30)
                for tp in consumer.committed(consumer.assignment(), timeout=30):
                    consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
                continue
            producer.commit_transaction(30)
            processed += len(batch)
        committed = consumer.committed([TopicPartition("ctp-in", 0), TopicPartition("ctp-in", 1)], timeout=30)
    finally:
        consumer.close()
    assert rounds > 3
    assert [tp.offset for tp in committed] == [100, 100]
    output = read_values(broker.bootstrap, "ctp-out", "read_committed", 2)
    assert sorted(output) == sorted(b"x" + str(i).encode() for i in range(200))
    assert len(read_values(broker.bootstrap, "ctp-out", "read_uncommitted", 2)) > 200  # the aborted round


def test_a_killed_producer_is_aborted_after_its_timeout_and_fenced_by_its_successor(broker):
    create_topic(broker.bootstrap, "txn-kill")
    # a timeout long enough for the checks of the open transaction below on a loaded machine
    zombie = subprocess.Popen([sys.executable, str(TXN_PRODUCER), broker.bootstrap, "txn-kill", "txn-kill", "5",
                               "10000"], stdout=subprocess.PIPE, text=True)
    try:
        assert json.loads(zombie.stdout.readline()) == {"state": "open"}
    finally:
        zombie.kill()  # SIGKILL: no abort from the client
        zombie.wait()
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce("txn-kill", value=b"after", partition=0)
    plain.flush(30)
    assert read_values(broker.bootstrap, "txn-kill", "read_committed") == []  # held at the open transaction
    (described,) = kafka_transactions_tool(broker.bootstrap, "describe", "--transactional-id", "txn-kill")
    assert (described["TransactionState"], described["ProducerEpoch"], described["TransactionTimeoutMs"],
            described["TopicPartitions"]) == ("Ongoing", "0", "10000", "txn-kill-0")

    # the coordinator aborts it once its 10 s are up; the consumer then gets past it
    wait_until(lambda: read_values(broker.bootstrap, "txn-kill", "read_committed") == [b"after"], 30,
               message="the killed producer's transaction to be aborted")
    assert listed_state(broker.bootstrap, "txn-kill") == "CompleteAbort"

    successor = transactional_producer(broker.bootstrap, "txn-kill")
    successor.begin_transaction()
    successor.produce("txn-kill", value=b"successor", partition=0)
    successor.commit_transaction(30)
    assert read_values(broker.bootstrap, "txn-kill", "read_committed") == [b"after", b"successor"]
    (described,) = kafka_transactions_tool(broker.bootstrap, "describe", "--transactional-id", "txn-kill")
    # epoch 0 for the zombie, 1 for the abort that fenced it, 2 for its successor
    assert (described["ProducerEpoch"], described["TransactionState"]) == ("2", "CompleteCommit")


def test_a_second_instance_fences_the_first(broker):
    create_topic(broker.bootstrap, "txn-fence")
    first = transactional_producer(broker.bootstrap, "txn-fence")
    second = transactional_producer(broker.bootstrap, "txn-fence")
    first.begin_transaction()
    first.produce("txn-fence", value=b"zombie", partition=0)
    with pytest.raises(KafkaException) as refused:
        first.commit_transaction(30)
    assert refused.value.args[0].fatal()
    second.begin_transaction()
    second.produce("txn-fence", value=b"live", partition=0)
    second.commit_transaction(30)
    assert read_values(broker.bootstrap, "txn-fence", "read_committed") == [b"live"]


def test_a_broker_killed_mid_transaction_recovers_it_and_the_commit_completes(tmp_path):
    node = BrokerProcess(tmp_path / "data", extra_config=BROKER_CONFIG)
    node.start()
    try:
        create_topic(node.bootstrap, "txn-crash", 2)
        producer = transactional_producer(node.bootstrap, "txn-crash", **{"transaction.timeout.ms": 60000})
        producer.begin_transaction()
        producer.produce("txn-crash", value=b"aborted", partition=1)
        producer.flush(30)
        producer.abort_transaction(30)
        group = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "crash-group"})
        producer.begin_transaction()
        for i in range(10):
            producer.produce("txn-crash", value=f"open-{i}".encode(), partition=i % 2)
        producer.send_offsets_to_transaction([TopicPartition("txn-crash", 0, 7)], group.consumer_group_metadata(), 30)
        producer.flush(30)
        node.kill()  # kill -9, the transaction open
        node.start()
        assert read_values(node.bootstrap, "txn-crash", "read_committed", 2) == []
        (described,) = kafka_transactions_tool(node.bootstrap, "describe", "--transactional-id", "txn-crash")
        assert described["TransactionState"] == "Ongoing"
        assert described["TopicPartitions"].split(",") == sorted(
            ["txn-crash-0", "txn-crash-1", f"__consumer_offsets-{offsets_partition('crash-group')}"])
        # the offset in the transaction was reloaded as pending: not committed yet, and unstable for
        # read_committed clients (librdkafka's default), whose OffsetFetch is retried until it is stable
        lax = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "crash-group",
                        "isolation.level": "read_uncommitted"})
        assert lax.committed([TopicPartition("txn-crash", 0)], timeout=30)[0].offset == OFFSET_INVALID
        lax.close()
        with pytest.raises(KafkaException, match="Timed out"):
            group.committed([TopicPartition("txn-crash", 0)], timeout=2)
        producer.commit_transaction(60)  # librdkafka reconnects; the recovered coordinator completes it
        assert sorted(read_values(node.bootstrap, "txn-crash", "read_committed", 2)) == sorted(
            f"open-{i}".encode() for i in range(10))
        assert group.committed([TopicPartition("txn-crash", 0)], timeout=30)[0].offset == 7
        group.close()
        # a clean restart keeps the aborted transaction hidden too (its index is in .txnindex files)
        node.stop()
        node.start()
        assert b"aborted" not in read_values(node.bootstrap, "txn-crash", "read_committed", 2)
        assert b"aborted" in read_values(node.bootstrap, "txn-crash", "read_uncommitted", 2)
        assert list((tmp_path / "data" / "logs" / "txn-crash-1").glob("*.txnindex"))
    finally:
        node.stop()


def test_the_java_transactional_producer_and_admin_client(broker):
    create_topic(broker.bootstrap, "java-txn", 2)
    output = java_peer("burrowpy.peers.JavaClients", "transactions", broker.bootstrap, "java-txn", "java-txn-id").stdout
    # the client's own log (the fenced producer's error) shares stdout with the steps
    steps = {step["step"]: step["value"] for step in map(json.loads, (line for line in output.splitlines()
                                                                      if line.startswith("{")))}
    assert steps["fenced"] == "ProducerFencedException"
    assert sorted(steps["read_committed"]) == sorted([f"committed-{i}" for i in range(5)] + ["successor"])
    assert steps["described"] == {"state": "CompleteCommit", "epoch": 1}
    assert steps["listed"] == ["CompleteCommit"]
    assert sorted(read_values(broker.bootstrap, "java-txn", "read_uncommitted", 2)) == sorted(
        [f"committed-{i}".encode() for i in range(5)] + [f"aborted-{i}".encode() for i in range(3)]
        + [b"successor"])


def test_kafka_streams_exactly_once_v2_counts_every_word_once(broker, tmp_path):
    create_topic(broker.bootstrap, "eos-in", 2)
    app = run_word_count(broker.bootstrap, "eos-count", "eos-in", "eos-out", tmp_path / "state", "classic",
                         "exactly_once_v2", isolation="read_committed")
    assert app.exit_code in (0, 143), app.stderr()[-3000:]
    assert app.lines[-1] == {"state": "NOT_RUNNING"}
    # its input offsets were committed in its transactions: the group is at the end of the input
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "eos-count"})
    try:
        committed = reader.committed([TopicPartition("eos-in", 0), TopicPartition("eos-in", 1)], timeout=30)
        ends = [reader.get_watermark_offsets(TopicPartition("eos-in", p), timeout=10)[1] for p in (0, 1)]
    finally:
        reader.close()
    assert [tp.offset for tp in committed] == ends == [2, 2]
    # every record of the output was written in a transaction (transactional batches, then markers)
    listed = {row["TransactionalId"]: row["TransactionState"]
              for row in kafka_transactions_tool(broker.bootstrap, "list")}
    assert any(tid.startswith("eos-count-") for tid in listed)


def test_the_monitor_sees_transactional_commits_only_once_committed(broker, tmp_path):
    """burrowpy's monitor on our broker: offsets a group commits in transactions (send_offsets_to_transaction)
    count once the transaction commits; an aborted transaction's offsets never show."""
    create_topic(broker.bootstrap, "mon-txn-in")
    source = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        source.produce("mon-txn-in", value=b"%d" % i, partition=0)
    source.flush(30)
    group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "mon-txn"})
    producer = transactional_producer(broker.bootstrap, "mon-txn-processor")

    def commit_in_transaction(offset: int, commit: bool) -> None:
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition("mon-txn-in", 0, offset)],
                                             group.consumer_group_metadata(), 30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    def committed_and_lag() -> tuple[int, int] | None:
        status, body = monitor.get(f"/v3/kafka/{CLUSTER}/consumer/mon-txn/lag")
        if status != 200 or not body["status"]["partitions"]:
            return None
        partition = body["status"]["partitions"][0]
        return partition["end"]["offset"], partition["current_lag"]

    settings = MonitorSettings(broker.bootstrap, intervals=3, offset_refresh=1, topic_refresh=1, expire_cache=0)
    with BurrowpyProcess(tmp_path / "monitor", settings) as monitor:
        commit_in_transaction(3, commit=True)
        wait_until(lambda: committed_and_lag() == (3, 7), 30, message="the committed transaction's offset")
        commit_in_transaction(9, commit=False)
        wait_until_offsets_topic_read(monitor)  # past the aborted transaction's offset and its marker
        assert committed_and_lag() == (3, 7)
        commit_in_transaction(8, commit=True)
        wait_until(lambda: committed_and_lag() == (8, 2), 30, message="the next committed transaction's offset")
    group.close()
