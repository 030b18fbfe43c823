"""The transaction coordinator on a single node's real logs, without a server: what it writes to
`__transaction_state` and to the transaction's partitions, what it rebuilds after a restart, and its timers
on a clock the test moves."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from file_audit import file_changes

from broker.broker import Broker, ProducerIdAllocator
from broker.config import BrokerConfig
from broker.errors import ErrorCode
from broker.groups.coordinator import read_partition_entries
from broker.log.manager import LogManager
from broker.protocol.records import Record, build_batch
from broker.topics import TRANSACTIONS_TOPIC
from broker.txn.coordinator import TransactionCoordinator
from broker.txn.state import TxnState, decode_record, record_key, record_value

FENCED = ErrorCode.PRODUCER_FENCED
TIMEOUT_MS = 10_000
EXPIRATION_MS = 60_000


class Clock:
    def __init__(self) -> None:
        self.seconds = 1_700_000_000.0

    def __call__(self) -> float:
        return self.seconds

    def advance_ms(self, ms: int) -> None:
        self.seconds += ms / 1000


def storage_only_broker(data_dir: Path, clock: Clock) -> Broker:
    """A single-node broker with its logs and producer ids, as start() makes them, and no listener."""
    broker = Broker(BrokerConfig.load(None, data_dir=str(data_dir), overrides={
        "transaction.state.log.num.partitions": 3, "transactional.id.expiration.ms": EXPIRATION_MS}), clock=clock)
    broker.logs = LogManager(data_dir / "logs", broker.config.topic_defaults(), auto_high_watermark=True)
    broker.producer_ids = ProducerIdAllocator(data_dir / "producer-ids.json")
    broker.create_topic("orders", 2, {})
    return broker


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def broker(tmp_path: Path, clock: Clock) -> AsyncIterator[Broker]:
    broker = storage_only_broker(tmp_path / "data", clock)
    broker.transactions = TransactionCoordinator(broker)
    await broker.transactions.start()
    yield broker
    broker.logs.close()


async def restarted(broker: Broker, clock: Clock) -> TransactionCoordinator:
    """A new coordinator on the same logs, as after a crash: it rebuilds its state from them."""
    coordinator = TransactionCoordinator(broker)
    broker.transactions = coordinator
    await coordinator.start()
    return coordinator


def states_written(broker: Broker, transactional_id: str) -> list[TxnState | None]:
    """The id's records in `__transaction_state`, in order (None: a tombstone)."""
    coordinator: TransactionCoordinator = broker.transactions
    plog = broker.partition_log(TRANSACTIONS_TOPIC, coordinator.partition_for(transactional_id))
    written = []
    for entry in read_partition_entries(plog):
        tid, meta = decode_record(entry.key, entry.value)
        if tid == transactional_id:
            written.append(None if meta is None else meta.state)
    return written


def markers(broker: Broker, topic: str, partition: int) -> list[tuple[int, bool]]:
    """(producer id, committed) of every transaction marker in a partition."""
    return [(e.producer_id, e.marker) for e in read_partition_entries(broker.partition_log(topic, partition))
            if e.marker is not None]


async def begin(coordinator: TransactionCoordinator, transactional_id: str = "t") -> tuple[int, int]:
    error, producer_id, epoch = await coordinator.init_producer_id(transactional_id, TIMEOUT_MS, -1, -1, FENCED)
    assert error == ErrorCode.NONE
    added = await coordinator.add_partitions(transactional_id, producer_id, epoch, [("orders", 0), ("orders", 1)],
                                             FENCED)
    assert set(added.values()) == {ErrorCode.NONE}
    return producer_id, epoch


async def test_init_producer_id_refuses_what_kafka_refuses(broker):
    coordinator = broker.transactions
    assert await coordinator.init_producer_id("", TIMEOUT_MS, -1, -1, FENCED) == (ErrorCode.INVALID_REQUEST, -1, -1)
    for timeout in (0, coordinator.max_timeout_ms + 1):
        assert await coordinator.init_producer_id("t", timeout, -1, -1, FENCED) == (
            ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1)
    assert broker.logs.topics.get(TRANSACTIONS_TOPIC) is None  # nothing was written


async def test_init_creates_the_state_topic_and_each_call_bumps_the_epoch(broker):
    coordinator = broker.transactions
    error, producer_id, epoch = await coordinator.init_producer_id("t", TIMEOUT_MS, -1, -1, FENCED)
    assert (error, epoch) == (ErrorCode.NONE, 0)
    topic = broker.logs.topics[TRANSACTIONS_TOPIC]
    assert topic.partition_count == 3
    assert await coordinator.init_producer_id("t", TIMEOUT_MS, -1, -1, FENCED) == (ErrorCode.NONE, producer_id, 1)
    # the first instance, naming its producer id and epoch, is fenced by the second (KIP-360)
    assert await coordinator.init_producer_id("t", TIMEOUT_MS, producer_id, 0, FENCED) == (FENCED, -1, -1)
    assert states_written(broker, "t") == [TxnState.EMPTY, TxnState.EMPTY]


@pytest.mark.parametrize("committed", [True, False])
async def test_end_txn_writes_both_phases_and_a_marker_on_every_partition(broker, committed):
    coordinator = broker.transactions
    producer_id, epoch = await begin(coordinator)
    assert await coordinator.end_txn("t", producer_id, epoch, committed, FENCED) == ErrorCode.NONE
    assert markers(broker, "orders", 0) == markers(broker, "orders", 1) == [(producer_id, committed)]
    prepared, complete = ((TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT) if committed
                          else (TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT))
    assert states_written(broker, "t") == [TxnState.EMPTY, TxnState.ONGOING, prepared, complete]
    # a retry of the same result is answered without writing; the other result is refused
    assert await coordinator.end_txn("t", producer_id, epoch, committed, FENCED) == ErrorCode.NONE
    assert await coordinator.end_txn("t", producer_id, epoch, not committed, FENCED) == ErrorCode.INVALID_TXN_STATE
    assert len(states_written(broker, "t")) == 4


async def test_a_transaction_is_verified_before_its_writes(broker):
    coordinator = broker.transactions
    producer_id, epoch = await begin(coordinator)
    assert coordinator.check_transactional_write(producer_id, epoch, "orders", 1) is None
    assert coordinator.check_transactional_write(producer_id + 1, 0, "orders", 1).code == \
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert await coordinator.verify_partitions("t", producer_id, epoch, [("orders", 1), ("other", 0)], FENCED) == {
        ("orders", 1): ErrorCode.NONE, ("other", 0): ErrorCode.TRANSACTION_ABORTABLE}


async def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced(broker, clock):
    coordinator = broker.transactions
    producer_id, epoch = await begin(coordinator)
    clock.advance_ms(TIMEOUT_MS)
    await coordinator.abort_timed_out()
    assert markers(broker, "orders", 0) == []  # not later than its timeout
    clock.advance_ms(1)
    await coordinator.abort_timed_out()
    assert markers(broker, "orders", 0) == [(producer_id, False)]
    [described] = await coordinator.describe(["t"])
    assert (described["transaction_state"], described["producer_epoch"]) == ("CompleteAbort", epoch + 1)
    assert await coordinator.end_txn("t", producer_id, epoch, True, FENCED) == FENCED
    assert coordinator.check_transactional_write(producer_id, epoch, "orders", 0).code == \
        ErrorCode.INVALID_PRODUCER_EPOCH
    # nor may it recover its id with the epoch it had: Kafka's fence keeps no last epoch
    assert await coordinator.init_producer_id("t", TIMEOUT_MS, producer_id, epoch, FENCED) == (FENCED, -1, -1)


async def test_a_new_instance_aborts_the_open_transaction_of_the_old_one(broker):
    coordinator = broker.transactions
    producer_id, epoch = await begin(coordinator)
    # Kafka's answer to the first attempt: the transaction is aborted, fencing its producer, and the client
    # is told to retry; the retry gets the epoch after the fence's
    assert await coordinator.init_producer_id("t", TIMEOUT_MS, -1, -1, FENCED) == (
        ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1)
    assert markers(broker, "orders", 1) == [(producer_id, False)]
    assert states_written(broker, "t")[-2:] == [TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT]
    assert await coordinator.init_producer_id("t", TIMEOUT_MS, -1, -1, FENCED) == (
        ErrorCode.NONE, producer_id, epoch + 2)
    assert states_written(broker, "t")[-1] == TxnState.EMPTY
    assert await coordinator.add_partitions("t", producer_id, epoch, [("orders", 0)], FENCED) == {
        ("orders", 0): FENCED}


async def test_a_restart_rebuilds_the_state_and_completes_a_prepared_commit(broker, clock):
    coordinator = broker.transactions
    producer_id, epoch = await begin(coordinator)
    ongoing = coordinator.machine.get("t")
    # as if the coordinator crashed after writing PrepareCommit, before any marker
    prepared = ongoing.copy(state=TxnState.PREPARE_COMMIT)
    await broker.append(TRANSACTIONS_TOPIC, coordinator.partition_for("t"), build_batch(
        [Record(offset=0, timestamp=0, key=record_key("t"), value=record_value(prepared))]))
    await broker.append(TRANSACTIONS_TOPIC, coordinator.partition_for("u"), build_batch(
        [Record(offset=0, timestamp=0, key=b"\x00\x00garbage", value=b"\x01")]))  # undecodable: skipped
    coordinator = await restarted(broker, clock)
    assert markers(broker, "orders", 0) == [(producer_id, True)]
    [described] = await coordinator.describe(["t"])
    assert (described["transaction_state"], described["producer_id"], described["producer_epoch"]) == (
        "CompleteCommit", producer_id, epoch)
    assert coordinator.check_transactional_write(producer_id, epoch, "orders", 0).code == ErrorCode.INVALID_TXN_STATE


async def test_an_idle_transactional_id_expires_with_a_tombstone(broker, clock):
    coordinator = broker.transactions
    producer_id, epoch = await begin(coordinator)
    assert await coordinator.end_txn("t", producer_id, epoch, True, FENCED) == ErrorCode.NONE
    await coordinator.init_producer_id("idle-too-soon", TIMEOUT_MS, -1, -1, FENCED)
    clock.advance_ms(EXPIRATION_MS - 1)
    await coordinator.init_producer_id("idle-too-soon", TIMEOUT_MS, -1, -1, FENCED)
    clock.advance_ms(1)
    await coordinator.expire_transactional_ids()
    assert states_written(broker, "t")[-1] is None
    [gone, kept] = await coordinator.describe(["t", "idle-too-soon"])
    assert (gone["error_code"], kept["error_code"]) == (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, ErrorCode.NONE)
    coordinator = await restarted(broker, clock)
    assert [t["transactional_id"] for t in (await coordinator.list([], [], -1))[2]] == ["idle-too-soon"]
    # the forgotten id starts over with a new producer id
    error, new_producer_id, new_epoch = await coordinator.init_producer_id("t", TIMEOUT_MS, -1, -1, FENCED)
    assert (error, new_epoch) == (ErrorCode.NONE, 0) and new_producer_id != producer_id


async def test_list_and_describe_show_kafkas_names(broker, clock):
    coordinator = broker.transactions
    producer_id, _ = await begin(coordinator)
    await coordinator.init_producer_id("empty", TIMEOUT_MS, -1, -1, FENCED)
    clock.advance_ms(500)
    error, unknown, listed = await coordinator.list(["Ongoing", "Bogus"], [], 400)
    assert (error, unknown, listed) == (ErrorCode.NONE, ["Bogus"], [
        {"transactional_id": "t", "producer_id": producer_id, "transaction_state": "Ongoing"}])
    [described] = await coordinator.describe(["t"])
    assert described["topics"] == [{"topic": "orders", "partitions": [0, 1]}]
    assert described["transaction_timeout_ms"] == TIMEOUT_MS
    # Kafka's handleDescribeTransactions: an empty id is an invalid request, an unknown one is not found
    assert [d["error_code"] for d in await coordinator.describe(["", "nobody"])] == [
        ErrorCode.INVALID_REQUEST, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND]


async def test_the_first_transactional_write_creates_the_topic_off_the_event_loop(broker):
    """On a single node `__transaction_state` comes with its first record: its partitions' files are made on a
    thread, the writes asked meanwhile wait for the same creation, and the topic is seen whole or not at all."""
    coordinator: TransactionCoordinator = broker.transactions
    assert broker.logs.topics.get(TRANSACTIONS_TOPIC) is None
    with file_changes() as changes:  # this thread's: the event loop's
        answers = await asyncio.gather(*(coordinator.init_producer_id(tid, TIMEOUT_MS, -1, -1, FENCED)
                                         for tid in ("t1", "t2", "t3")))
    assert [error for error, _, _ in answers] == [ErrorCode.NONE] * 3
    topic = broker.logs.topics[TRANSACTIONS_TOPIC]
    assert topic.partition_count == 3
    # the appends of the records open the partitions' files, which exist by then; none is made here
    assert not [change for change in changes if change[0] in ("create", "os.mkdir")]
    assert {state for tid in ("t1", "t2", "t3") for state in states_written(broker, tid)} == {TxnState.EMPTY}

