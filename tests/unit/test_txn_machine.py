"""The transaction machine (broker/txn/machine.py): Kafka's answers, example by example, and its invariants
under random sequences of requests, timeouts, failed writes and late markers.

Which error when is Kafka's TransactionCoordinator (handleInitProducerId / prepareInitProducerIdTransit,
handleAddPartitionsToTransaction, endTransaction) and TransactionState.validPreviousStates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.errors import ErrorCode
from broker.txn.machine import IllegalTransition, InitStep, TxnMachine
from broker.txn.state import IDLE_STATES, MAX_PRODUCER_EPOCH, TxnMetadata, TxnState

FENCED = ErrorCode.PRODUCER_FENCED
TP = ("orders", 0)


def apply_all(machine: TxnMachine, step: ErrorCode | TxnMetadata) -> TxnMetadata:
    assert isinstance(step, TxnMetadata), step
    machine.apply(step)
    return step


def with_producer(state: TxnState = TxnState.EMPTY, epoch: int = 0) -> TxnMachine:
    """A machine whose id "t" has producer 7 at ``epoch``, brought to ``state`` the way requests bring it."""
    machine = TxnMachine()
    machine.load({"t": TxnMetadata("t", 7, epoch, 60000)})
    if state == TxnState.EMPTY:
        return machine
    ongoing = apply_all(machine, machine.add_partitions("t", 7, epoch, [TP], FENCED, 10))
    if state == TxnState.ONGOING:
        return machine
    committed = state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)
    prepared = apply_all(machine, TxnMachine.prepared(ongoing, committed, 20))
    if state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        machine.apply(TxnMachine.completed(prepared, 30))
    return machine


# --- InitProducerId ---------------------------------------------------------------------------------------

def test_a_new_transactional_id_needs_a_producer_id_and_starts_empty_at_epoch_0():
    machine = TxnMachine()
    assert machine.init_producer_id("t", -1, -1, FENCED) == InitStep.NEW_PRODUCER_ID
    meta = machine.initialised("t", 60000, 5, new_producer_id=42)
    machine.apply(meta)
    assert (meta.producer_id, meta.producer_epoch, meta.state) == (42, 0, TxnState.EMPTY)
    assert machine.transactional_id_of(42) == "t"


@pytest.mark.parametrize("state", [TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT])
def test_init_in_an_idle_state_bumps_the_epoch(state):
    machine = with_producer(state, epoch=3)
    assert machine.init_producer_id("t", -1, -1, FENCED) == InitStep.BUMP
    meta = machine.initialised("t", 1000, 50, None)
    machine.apply(meta)
    assert (meta.producer_id, meta.producer_epoch, meta.timeout_ms, meta.partitions) == (7, 4, 1000, set())


def test_init_with_an_open_transaction_fences_it_and_is_retried():
    # Kafka: Ongoing -> prepareFenceProducerEpoch (whatever producer the request names), the open transaction
    # is aborted with a bumped epoch that is never handed out, the answer is CONCURRENT_TRANSACTIONS, and the
    # client's retry bumps the epoch a second time
    machine = with_producer(TxnState.ONGOING, epoch=3)
    assert machine.init_producer_id("t", 7, 3, FENCED) == InitStep.FENCE_FIRST
    assert machine.init_producer_id("t", -1, -1, FENCED) == InitStep.FENCE_FIRST
    fence = apply_all(machine, TxnMachine.fenced(machine.get("t"), 40))
    assert (fence.state, fence.producer_epoch, fence.last_producer_epoch, fence.partitions) == (
        TxnState.PREPARE_ABORT, 4, -1, {TP})
    assert machine.init_producer_id("t", -1, -1, FENCED) == ErrorCode.CONCURRENT_TRANSACTIONS  # markers pending
    machine.apply(TxnMachine.completed(fence, 41))
    assert machine.init_producer_id("t", -1, -1, FENCED) == InitStep.BUMP
    retried = apply_all(machine, machine.initialised("t", 1000, 42, None))
    assert (retried.state, retried.producer_epoch) == (TxnState.EMPTY, 5)
    # the fenced producer can neither write nor recover its id
    assert machine.add_partitions("t", 7, 3, [TP], FENCED, 43) == FENCED
    assert machine.init_producer_id("t", 7, 3, FENCED) == FENCED


@pytest.mark.parametrize("state", [TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT])
def test_init_while_markers_are_written_is_concurrent_transactions(state):
    assert with_producer(state).init_producer_id("t", -1, -1, FENCED) == ErrorCode.CONCURRENT_TRANSACTIONS


def test_init_naming_another_producer_or_a_stale_epoch_is_fenced():
    # KIP-360 (isValidProducerId / prepareIncrementProducerEpoch): PRODUCER_FENCED
    machine = with_producer(epoch=3)
    assert machine.init_producer_id("t", 8, 3, FENCED) == FENCED
    assert machine.init_producer_id("t", 7, 2, ErrorCode.INVALID_PRODUCER_EPOCH) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert machine.init_producer_id("t", 7, 3, FENCED) == InitStep.BUMP
    # the id is checked before the state: a stranger is fenced even while markers are written
    assert with_producer(TxnState.PREPARE_COMMIT, epoch=3).init_producer_id("t", 8, 3, FENCED) == FENCED


def test_a_recovering_producers_retry_gets_the_epoch_its_first_attempt_got():
    # prepareIncrementProducerEpoch: the expected epoch is remembered as the last epoch, so the same request
    # again (its answer lost) gets the same epoch; a new instance's bump forgets it
    machine = with_producer(epoch=3)
    bumped = apply_all(machine, machine.initialised("t", 1000, 50, None, producer_epoch=3))
    assert (bumped.producer_epoch, bumped.last_producer_epoch) == (4, 3)
    assert machine.init_producer_id("t", 7, 3, FENCED) == InitStep.RETRY
    again = apply_all(machine, machine.initialised("t", 1000, 51, None, producer_epoch=3))
    assert (again.producer_id, again.producer_epoch, again.last_producer_epoch) == (7, 4, 3)
    assert machine.init_producer_id("t", 7, 2, FENCED) == FENCED
    fresh = apply_all(machine, machine.initialised("t", 1000, 52, None))
    assert (fresh.producer_epoch, fresh.last_producer_epoch) == (5, -1)
    assert machine.init_producer_id("t", 7, 3, FENCED) == FENCED


def test_the_producer_a_timeout_fenced_cannot_recover_its_id():
    # a fence keeps no last epoch (Kafka: lastProducerEpoch = -1), so the timed-out producer is fenced
    machine = with_producer(TxnState.ONGOING, epoch=3)
    prepared = apply_all(machine, TxnMachine.fenced(machine.get("t"), 40))
    machine.apply(TxnMachine.completed(prepared, 41))
    assert machine.get("t").producer_epoch == 4
    assert machine.init_producer_id("t", 7, 3, FENCED) == FENCED
    assert machine.init_producer_id("t", 7, 4, FENCED) == InitStep.BUMP


def test_exhausted_epochs_rotate_to_a_new_producer_id():
    # Kafka hands out epochs up to Short.MaxValue - 1, then a new producer id
    assert with_producer(epoch=MAX_PRODUCER_EPOCH - 1).init_producer_id("t", -1, -1, FENCED) == InitStep.BUMP
    machine = with_producer(epoch=MAX_PRODUCER_EPOCH)
    assert machine.init_producer_id("t", -1, -1, FENCED) == InitStep.NEW_PRODUCER_ID
    with pytest.raises(ValueError, match="new producer id"):
        machine.initialised("t", 1000, 50, None)
    meta = machine.initialised("t", 1000, 50, new_producer_id=99)
    machine.apply(meta)
    assert (meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (99, 0, 7)
    assert machine.transactional_id_of(7) is None and machine.transactional_id_of(99) == "t"


def test_a_retry_naming_the_producer_id_rotated_away_from_gets_the_new_one():
    machine = with_producer(epoch=MAX_PRODUCER_EPOCH)
    assert machine.init_producer_id("t", 7, MAX_PRODUCER_EPOCH, FENCED) == InitStep.NEW_PRODUCER_ID
    rotated = apply_all(machine, machine.initialised("t", 1000, 50, 99, producer_epoch=MAX_PRODUCER_EPOCH))
    assert (rotated.producer_id, rotated.producer_epoch, rotated.last_producer_epoch) == (99, 0, MAX_PRODUCER_EPOCH)
    assert machine.init_producer_id("t", 7, MAX_PRODUCER_EPOCH, FENCED) == InitStep.RETRY
    again = machine.initialised("t", 1000, 51, None, producer_epoch=MAX_PRODUCER_EPOCH)
    assert (again.producer_id, again.producer_epoch) == (99, 0)
    assert machine.init_producer_id("t", 7, MAX_PRODUCER_EPOCH - 1, FENCED) == FENCED


def test_a_fence_at_the_last_epoch_uses_the_reserved_one_and_the_retry_rotates():
    machine = with_producer(TxnState.ONGOING, epoch=MAX_PRODUCER_EPOCH)
    fence = apply_all(machine, TxnMachine.fenced(machine.get("t"), 40))
    assert fence.producer_epoch == MAX_PRODUCER_EPOCH + 1
    machine.apply(TxnMachine.completed(fence, 41))
    assert machine.init_producer_id("t", -1, -1, FENCED) == InitStep.NEW_PRODUCER_ID


# --- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------------------

def test_add_partitions_opens_the_transaction_and_keeps_its_start():
    machine = with_producer()
    first = apply_all(machine, machine.add_partitions("t", 7, 0, [TP], FENCED, 10))
    assert (first.state, first.partitions, first.start_ms) == (TxnState.ONGOING, {TP}, 10)
    second = apply_all(machine, machine.add_partitions("t", 7, 0, [("orders", 1)], FENCED, 20))
    assert (second.partitions, second.start_ms, second.last_update_ms) == ({TP, ("orders", 1)}, 10, 20)
    assert machine.add_partitions("t", 7, 0, [TP], FENCED, 30) == ErrorCode.NONE  # nothing to write


@pytest.mark.parametrize(("producer_id", "epoch", "fenced", "error"), [
    (8, 0, FENCED, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
    (7, 1, FENCED, FENCED),
    (7, 1, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_PRODUCER_EPOCH),  # versions before KIP-588
])
def test_add_partitions_checks_the_producer_before_the_state(producer_id, epoch, fenced, error):
    for state in TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT:
        assert with_producer(state).add_partitions("t", producer_id, epoch, [TP], fenced, 50) == error


def test_add_partitions_of_an_unknown_id_is_an_invalid_mapping():
    assert TxnMachine().add_partitions("t", 7, 0, [TP], FENCED, 0) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_an_empty_transactional_id_is_an_invalid_request():
    machine = with_producer(TxnState.ONGOING)
    machine.load({"": TxnMetadata("", 9, 0, 1000)})  # even were one loaded
    assert machine.add_partitions("", 9, 0, [TP], FENCED, 0) == ErrorCode.INVALID_REQUEST
    assert machine.verify_partitions("", 9, 0, [TP], FENCED) == {TP: ErrorCode.INVALID_REQUEST}
    assert machine.end_txn("", 9, 0, True, FENCED, 0) == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("state", [TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT])
def test_add_partitions_while_markers_are_written_is_concurrent_transactions(state):
    assert with_producer(state).add_partitions("t", 7, 0, [TP], FENCED, 50) == ErrorCode.CONCURRENT_TRANSACTIONS


def test_verify_only_answers_per_partition_as_kafkas_coordinator():
    machine = with_producer(TxnState.ONGOING)
    assert machine.verify_partitions("t", 7, 0, [TP, ("orders", 1)], FENCED) == {
        TP: ErrorCode.NONE, ("orders", 1): ErrorCode.TRANSACTION_ABORTABLE}
    assert machine.verify_partitions("t", 7, 1, [TP], FENCED) == {TP: FENCED}
    assert machine.verify_partitions("t", 8, 0, [TP], FENCED) == {TP: ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert with_producer(TxnState.COMPLETE_COMMIT).verify_partitions("t", 7, 0, [TP], FENCED) == {
        TP: ErrorCode.TRANSACTION_ABORTABLE}
    for state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        assert with_producer(state).verify_partitions("t", 7, 0, [TP], FENCED) == {
            TP: ErrorCode.CONCURRENT_TRANSACTIONS}


# --- partition verification (KIP-890) ---------------------------------------------------------------------

def test_a_transactional_write_is_checked_against_the_open_transaction():
    machine = with_producer(TxnState.ONGOING, epoch=2)
    assert machine.check_transactional_write(7, 2, *TP, clustered=False) is None
    assert machine.check_transactional_write(7, 1, *TP, clustered=False).code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert machine.check_transactional_write(7, 2, "orders", 5, clustered=False).code == ErrorCode.INVALID_TXN_STATE
    assert machine.check_transactional_write(8, 0, *TP, clustered=False).code == \
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert machine.check_transactional_write(8, 0, *TP, clustered=True) is None  # another coordinator's
    assert with_producer(TxnState.COMPLETE_COMMIT).check_transactional_write(7, 0, *TP, clustered=False).code == \
        ErrorCode.INVALID_TXN_STATE


# --- EndTxn -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("state", "committed", "answer"), [
    (TxnState.EMPTY, True, ErrorCode.INVALID_TXN_STATE),
    (TxnState.EMPTY, False, ErrorCode.INVALID_TXN_STATE),
    (TxnState.COMPLETE_COMMIT, True, ErrorCode.NONE),  # a retry
    (TxnState.COMPLETE_COMMIT, False, ErrorCode.INVALID_TXN_STATE),
    (TxnState.COMPLETE_ABORT, False, ErrorCode.NONE),
    (TxnState.COMPLETE_ABORT, True, ErrorCode.INVALID_TXN_STATE),
    (TxnState.PREPARE_COMMIT, True, ErrorCode.CONCURRENT_TRANSACTIONS),
    (TxnState.PREPARE_COMMIT, False, ErrorCode.INVALID_TXN_STATE),
    (TxnState.PREPARE_ABORT, False, ErrorCode.CONCURRENT_TRANSACTIONS),
    (TxnState.PREPARE_ABORT, True, ErrorCode.INVALID_TXN_STATE),
])
def test_end_txn_outside_an_open_transaction_answers_as_kafka(state, committed, answer):
    assert with_producer(state).end_txn("t", 7, 0, committed, FENCED, 100) == answer


@pytest.mark.parametrize("committed", [True, False])
def test_end_txn_of_an_open_transaction_prepares_then_completes(committed):
    machine = with_producer(TxnState.ONGOING)
    prepared = apply_all(machine, machine.end_txn("t", 7, 0, committed, FENCED, 100))
    assert prepared.state == (TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT)
    assert machine.preparing() == [prepared]
    done = TxnMachine.completed(prepared, 110)
    machine.apply(done)
    assert (done.state, done.partitions) == (
        TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT, set())


def test_end_txn_checks_the_producer():
    machine = with_producer(TxnState.ONGOING, epoch=2)
    assert machine.end_txn("t", 8, 2, True, FENCED, 0) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert machine.end_txn("t", 7, 1, True, FENCED, 0) == FENCED
    assert machine.end_txn("t", 7, 3, True, FENCED, 0) == FENCED  # strict equality from a client
    assert TxnMachine().end_txn("t", 7, 0, True, FENCED, 0) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


# --- transitions the machine refuses ------------------------------------------------------------------------

@pytest.mark.parametrize(("state", "to"), [
    (TxnState.EMPTY, TxnState.PREPARE_COMMIT),
    (TxnState.EMPTY, TxnState.COMPLETE_COMMIT),
    (TxnState.ONGOING, TxnState.EMPTY),
    (TxnState.ONGOING, TxnState.COMPLETE_ABORT),
    (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_ABORT),
    (TxnState.PREPARE_ABORT, TxnState.ONGOING),
    (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT),
])
def test_a_transition_kafka_does_not_allow_is_refused(state, to):
    machine = with_producer(state)
    with pytest.raises(IllegalTransition):
        machine.apply(machine.get("t").copy(state=to))
    assert machine.get("t").state == state


def test_an_epoch_going_backwards_and_forgetting_an_open_transaction_are_refused():
    machine = with_producer(epoch=3)
    with pytest.raises(IllegalTransition, match="epoch"):
        machine.apply(machine.get("t").copy(producer_epoch=2))
    with pytest.raises(IllegalTransition, match="cannot begin"):
        machine.apply(TxnMetadata("u", 8, 0, 1000, state=TxnState.ONGOING))
    machine = with_producer(TxnState.ONGOING)
    with pytest.raises(IllegalTransition, match="Dead"):
        machine.forget("t")


def test_timers_find_timed_out_preparing_and_expired_ids():
    machine = with_producer(TxnState.ONGOING)  # started at 10, timeout 60000
    assert machine.timed_out(60010) == []
    assert [m.transactional_id for m in machine.timed_out(60011)] == ["t"]
    idle = with_producer(TxnState.COMPLETE_ABORT)  # last update at 30
    assert idle.expired(1029, 1000) == [] and [m.transactional_id for m in idle.expired(1030, 1000)] == ["t"]
    idle.forget("t")
    assert idle.get("t") is None and idle.transactional_id_of(7) is None


def test_list_filters_by_state_producer_and_duration():
    machine = with_producer(TxnState.ONGOING)
    machine.load({"u": TxnMetadata("u", 8, 0, 1000)})
    unknown, listed = machine.listed(["Ongoing", "Nonsense"], [], -1, 100)
    assert unknown == ["Nonsense"] and [t.transactional_id for t in listed] == ["t"]
    assert [t.transactional_id for t in machine.listed([], [8], -1, 100)[1]] == ["u"]
    assert machine.listed([], [], 91, 100)[1] == [] and len(machine.listed([], [], 90, 100)[1]) == 1


# --- properties ---------------------------------------------------------------------------------------------

TIDS = ("a", "b")
CLIENTS = ("a", "a", "b")  # two instances of "a", which fence each other


@dataclass
class Client:
    transactional_id: str
    producer_id: int = -1
    epoch: int = -1


@dataclass
class World:
    """The machine with the coordinator's sequencing around it (write, then apply; prepare, markers, complete),
    where any write or marker may fail, and the clients' view of their producer ids and epochs."""

    machine: TxnMachine = field(default_factory=TxnMachine)
    clients: list[Client] = field(default_factory=lambda: [Client(t) for t in CLIENTS])
    now: int = 0
    next_producer_id: int = 1000
    handed_out: set[tuple[int, int]] = field(default_factory=set)

    def write(self, meta: TxnMetadata, ok: bool) -> ErrorCode:
        self.machine.validate(meta)
        if not ok:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        self.machine.apply(meta)
        return ErrorCode.NONE

    def end(self, prepared: TxnMetadata, ok: bool, markers_ok: bool) -> ErrorCode:
        error = self.write(prepared, ok)
        if error != ErrorCode.NONE:
            return error
        if not markers_ok:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE  # left preparing: the periodic check completes it
        return self.write(TxnMachine.completed(prepared, self.now), True)

    def init(self, client: Client, recover: bool, ok: bool, markers_ok: bool) -> ErrorCode:
        producer_id, epoch = (client.producer_id, client.epoch) if recover else (-1, -1)
        step = self.machine.init_producer_id(client.transactional_id, producer_id, epoch, FENCED)
        if step == InitStep.FENCE_FIRST:
            open_txn = self.machine.get(client.transactional_id)
            assert open_txn is not None
            fence = TxnMachine.fenced(open_txn, self.now)
            error = self.write(fence, ok)
            if error == ErrorCode.NONE and markers_ok:
                self.write(TxnMachine.completed(fence, self.now), True)
            return error if error != ErrorCode.NONE else ErrorCode.CONCURRENT_TRANSACTIONS
        if isinstance(step, ErrorCode):
            return step
        new_producer_id = None
        if step == InitStep.NEW_PRODUCER_ID:
            new_producer_id = self.next_producer_id
            self.next_producer_id += 1
        meta = self.machine.initialised(client.transactional_id, 1000, self.now, new_producer_id, epoch)
        error = self.write(meta, ok)
        if error == ErrorCode.NONE:
            assert (meta.producer_id, meta.producer_epoch) not in self.handed_out
            self.handed_out.add((meta.producer_id, meta.producer_epoch))
            client.producer_id, client.epoch = meta.producer_id, meta.producer_epoch
        return error

    def expected_producer_error(self, client: Client) -> ErrorCode | None:
        meta = self.machine.get(client.transactional_id)
        if meta is None or meta.producer_id != client.producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        return FENCED if meta.producer_epoch != client.epoch else None


clients = st.integers(0, len(CLIENTS) - 1)
writes = st.sampled_from([True, True, True, False])
commands = st.one_of(
    st.tuples(st.just("init"), clients, st.booleans(), writes, writes),
    st.tuples(st.just("add"), clients, st.sets(st.integers(0, 3), min_size=1, max_size=2), writes),
    st.tuples(st.just("end"), clients, st.booleans(), writes, writes),
    st.tuples(st.just("tick"), st.integers(1, 1500)),
    st.tuples(st.just("timeouts"), writes, writes),
    st.tuples(st.just("markers")),
    st.tuples(st.just("expire"), st.integers(500, 5000)),
)


def check_invariants(world: World, before: dict[str, TxnMetadata]) -> None:
    machine = world.machine
    metas = machine.transactions()
    # one transactional id per producer id, and the index agrees with the states
    assert len({m.producer_id for m in metas}) == len(metas)
    for meta in metas:
        assert machine.transactional_id_of(meta.producer_id) == meta.transactional_id
        assert (meta.state == TxnState.ONGOING or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
                ) == bool(meta.partitions)
        if meta.state == TxnState.ONGOING:
            assert 0 <= meta.start_ms <= world.now
        old = before.get(meta.transactional_id)
        if old is not None and old.producer_id == meta.producer_id:
            assert meta.producer_epoch >= old.producer_epoch  # the epoch never decreases
        elif old is not None:
            assert meta.previous_producer_id == old.producer_id and meta.producer_epoch == 0  # a rotation


@settings(deadline=None, max_examples=200)
@given(st.lists(commands, max_size=40))
def test_random_requests_keep_the_machines_invariants(steps):
    world = World()
    machine = world.machine
    for command in steps:
        before = {m.transactional_id: m for m in machine.transactions()}
        kind = command[0]
        if kind == "init":
            _, index, recover, ok, markers_ok = command
            client = world.clients[index]
            current = machine.get(client.transactional_id)
            stale = recover and client.producer_id >= 0 and current is not None and (
                (client.producer_id != current.producer_id and not (
                    client.producer_id == current.previous_producer_id and client.epoch >= MAX_PRODUCER_EPOCH))
                or (current.state in IDLE_STATES and
                    client.epoch not in (current.producer_epoch, current.last_producer_epoch)))
            was_open = current is not None and current.state == TxnState.ONGOING and not stale
            answer = world.init(client, recover, ok, markers_ok)
            if stale:
                assert answer == FENCED  # only the current producer may bump, or retry its last bump
            if was_open:
                assert answer != ErrorCode.NONE  # an open transaction is aborted first, and the client retries
        elif kind == "add":
            _, index, partitions, ok = command
            client = world.clients[index]
            expected = world.expected_producer_error(client)
            step = machine.add_partitions(client.transactional_id, client.producer_id, client.epoch,
                                          [("t", p) for p in partitions], FENCED, world.now)
            if expected is not None:
                assert step == expected  # a fenced producer never opens a transaction
            elif isinstance(step, TxnMetadata):
                world.write(step, ok)
            else:
                assert step in (ErrorCode.NONE, ErrorCode.CONCURRENT_TRANSACTIONS)
        elif kind == "end":
            _, index, committed, ok, markers_ok = command
            client = world.clients[index]
            expected = world.expected_producer_error(client)
            state = machine.get(client.transactional_id).state if expected is None else None
            step = machine.end_txn(client.transactional_id, client.producer_id, client.epoch, committed, FENCED,
                                   world.now)
            if expected is not None:
                assert step == expected  # a fenced producer never ends a transaction
                continue
            answer = step if isinstance(step, ErrorCode) else world.end(step, ok, markers_ok)
            if answer == ErrorCode.NONE:
                assert state in (TxnState.ONGOING,
                                 TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT)
                assert machine.get(client.transactional_id).state == (
                    TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT)
        elif kind == "tick":
            world.now += command[1]
        elif kind == "timeouts":
            _, ok, markers_ok = command
            for meta in machine.timed_out(world.now):
                world.end(TxnMachine.fenced(meta, world.now), ok, markers_ok)
                assert machine.get(meta.transactional_id).producer_epoch >= meta.producer_epoch
        elif kind == "markers":
            for meta in machine.preparing():
                world.write(TxnMachine.completed(meta, world.now), True)
            assert machine.preparing() == []
        elif kind == "expire":
            for meta in machine.expired(world.now, command[1]):
                machine.forget(meta.transactional_id)
        check_invariants(world, before)
        # no transaction stays open past its timeout once the timer ran with working writes
        if kind == "timeouts" and command[1] and command[2]:
            assert machine.timed_out(world.now) == []
