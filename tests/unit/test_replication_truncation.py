"""Follower truncation by leader epoch (KIP-101/279) and appending a leader's batches, on real partition logs.

The leader's OffsetForLeaderEpoch answer comes straight from its PartitionLog, as the handler serves it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from log_harness import BASE_TS, Clock, batch, config

from broker.cluster.follower_log import append_leader_batches, cut_divergent_tail, truncation_for_epoch_answer
from broker.log.partition import PartitionLog, RollPending
from tests.examples import examples

UNDEFINED = -1


def no_local_epochs(_epoch: int) -> tuple[int, int]:
    raise AssertionError("the follower's own epochs are not needed for this answer")


@pytest.mark.parametrize(
    ("latest", "start", "end", "answer", "local", "expected"),
    [
        # The leader has our epoch and it ends at 7 there: cut to 7, done.
        ((3, 5), 5, 10, (3, 7), None, (7, True)),
        # The leader's epoch 3 goes further than our log: nothing to cut.
        ((3, 5), 5, 10, (3, 12), None, (10, True)),
        # The leader knows no epoch at or after ours: our whole latest epoch goes, then ask again.
        ((3, 5), 5, 10, (UNDEFINED, UNDEFINED), None, (5, False)),
        # The leader's answer is epoch 1 ending at 4; ours ends at 5: cut to the smaller, done.
        ((3, 5), 5, 10, (1, 4), (1, 5), (4, True)),
        ((3, 5), 5, 10, (1, 6), (1, 5), (5, True)),
        # We never had the leader's epoch 2: drop what follows our epoch 1, ask again.
        ((3, 5), 5, 10, (2, 8), (1, 5), (5, False)),
    ],
)
def test_truncation_for_epoch_answer(latest, start, end, answer, local, expected):
    lookup = no_local_epochs if local is None else (lambda epoch: local)
    assert truncation_for_epoch_answer(latest[0], start, end, answer[0], answer[1], lookup) == expected


class Replica:
    def __init__(self, directory: Path, clock: Clock) -> None:
        self.log = PartitionLog(directory, config(segment_bytes=700), clock)

    def contents(self) -> bytes:
        log = self.log
        return log.read(log.log_start_offset, 1 << 30) if log.log_end_offset > log.log_start_offset else b""


def settle(follower: Replica, leader: Replica) -> int:
    """What a fetcher does on a new leader: OffsetForLeaderEpoch rounds; return how many were needed."""
    rounds = 0
    while True:
        entries = follower.log.leader_epoch_entries()
        if not entries:
            return rounds
        rounds += 1
        epoch, start = entries[-1]
        answer_epoch, answer_end = leader.log.end_offset_for_epoch(epoch)
        if cut_divergent_tail(follower.log, epoch, start, answer_epoch, answer_end):
            return rounds


def replicate(follower: Replica, leader: Replica, max_bytes: int = 1 << 30) -> None:
    """One fetch of at most ``max_bytes``. A batch that needs a roll ends the appending (the roll runs on the
    roller thread); as the fetcher does, wait for the roll and fetch again from the new log end."""
    while (offset := follower.log.log_end_offset) < leader.log.log_end_offset:
        try:
            append_leader_batches(follower.log, leader.log.read(offset, max_bytes), offset)
            return
        except RollPending as pending:
            pending.rolled.result(timeout=10)


@pytest.fixture
def replicas(tmp_path):
    clock = Clock()
    return [Replica(tmp_path / f"r{i}", clock) for i in range(3)]


def write(replica: Replica, epoch: int, *counts: int) -> None:
    for count in counts:
        replica.log.append(batch(count, ts=BASE_TS), leader_epoch=epoch)


def test_follower_with_an_unreplicated_tail_truncates_it(replicas):
    old_leader, new_leader, _ = replicas
    write(old_leader, 0, 3, 2)
    replicate(new_leader, old_leader)
    write(old_leader, 0, 4)  # never reached the new leader
    write(new_leader, 1, 2, 2)
    assert settle(old_leader, new_leader) == 1
    assert old_leader.log.log_end_offset == 5
    replicate(old_leader, new_leader)
    assert old_leader.contents() == new_leader.contents()
    assert old_leader.log.leader_epoch_entries() == [(0, 0), (1, 5)]


def test_new_leader_that_wrote_nothing_yet_still_cuts_the_tail(replicas):
    """The new leader has no entry for its epoch yet; the follower's own later epoch is unknown to it."""
    a, b, _ = replicas
    write(a, 0, 3)
    replicate(b, a)
    write(b, 1, 2)  # b led epoch 1, a did not get it
    write(a, 0, 1)
    # a leads again (epoch 2) without having written yet; b follows it.
    assert settle(b, a) == 2  # epoch 1 unknown to a -> cut epoch 1, then epoch 0 agrees up to 3
    assert b.log.log_end_offset == 3
    replicate(b, a)
    assert b.contents() == a.contents()


def test_follower_missing_an_intermediate_epoch(replicas):
    a, b, c = replicas
    write(a, 0, 2)
    replicate(b, a)
    replicate(c, a)
    write(b, 1, 3)  # b leads epoch 1; c gets part of it, a none
    replicate(c, b, max_bytes=1)
    write(a, 2, 2)  # a leads epoch 2 without epoch 1 data
    write(c, 3, 1)  # c led epoch 3 briefly
    assert settle(c, a) >= 2
    assert settle(b, a) >= 1
    replicate(c, a)
    replicate(b, a)
    assert b.contents() == c.contents() == a.contents()


def test_cut_at_the_smaller_end_of_a_shared_epoch(replicas):
    """Epoch 0 ends at 12 on the leader but at 10 here (our epoch 1 began at 10): cut to 10, not 12."""
    a, b, _ = replicas
    write(a, 0, 4, 4, 4)
    replicate(b, a, max_bytes=1)
    replicate(b, a, max_bytes=1)
    assert b.log.log_end_offset == 8
    write(b, 1, 2)  # b led epoch 1 from 8
    write(a, 2, 3)  # a leads epoch 2 from 12, without b's epoch 1
    settle(b, a)
    assert b.log.log_end_offset == 8
    replicate(b, a)
    assert b.contents() == a.contents()


def test_epoch_of_the_answer_unknown_here(replicas):
    """The leader answers with an epoch we never had: cut after our largest epoch below it and ask again."""
    a, b, c = replicas
    write(a, 0, 4, 4)
    replicate(b, a, max_bytes=1)  # b has 0..3
    replicate(c, a)  # c has 0..7
    write(b, 2, 3)  # b leads epoch 2 from 4
    write(c, 3, 2)  # c leads epoch 3 from 8
    write(b, 4, 1)  # b leads again, epoch 4
    # c asks about epoch 3; b answers epoch 2 (ending where its epoch 4 starts), which c never had.
    assert settle(c, b) == 2
    assert c.log.log_end_offset == 4
    replicate(c, b)
    assert c.contents() == b.contents()


def test_follower_behind_the_leader_keeps_everything(replicas):
    leader, follower, _ = replicas
    write(leader, 0, 2, 2)
    replicate(follower, leader)
    write(leader, 0, 2)
    write(leader, 1, 3)
    assert settle(follower, leader) == 1
    assert follower.log.log_end_offset == 4
    replicate(follower, leader)
    assert follower.contents() == leader.contents()


def test_empty_follower_needs_no_round(replicas):
    leader, follower, _ = replicas
    write(leader, 0, 2)
    assert settle(follower, leader) == 0


def test_batches_already_here_are_skipped_and_a_gap_is_allowed(replicas):
    leader, follower, _ = replicas
    write(leader, 0, 3, 3)
    replicate(follower, leader)
    assert not append_leader_batches(follower.log, leader.log.read(0, 1 << 30), 6)
    assert follower.log.log_end_offset == 6
    # A leader whose log now starts at 20 (older records deleted): the follower continues there.
    trimmed_leader = replicas[2]
    write(trimmed_leader, 0, 10, 10, 2)
    trimmed_leader.log.delete_records_before(20)
    assert append_leader_batches(follower.log, trimmed_leader.log.read(20, 1 << 30), 20)
    assert follower.log.log_end_offset == 22
    assert follower.log.read(20, 1 << 30) == trimmed_leader.log.read(20, 1 << 30)


def test_a_batch_cut_differently_on_the_leader_replaces_ours(replicas):
    leader, follower, _ = replicas
    write(leader, 0, 2, 4)
    write(follower, 0, 2, 2)
    # The follower asks from its log end (4), which the leader answers from its batch at 2: ours goes, its file work
    # on the roller, and the appending ends there (RollPending), as at a roll; the next fetch asks from 2.
    with pytest.raises(RollPending) as pending:
        append_leader_batches(follower.log, leader.log.read(4, 1 << 30), 4)
    pending.value.rolled.result(timeout=10)
    assert follower.log.log_end_offset == 2
    assert append_leader_batches(follower.log, leader.log.read(2, 1 << 30), 2)
    assert follower.log.log_end_offset == 6
    assert follower.log.read(2, 1 << 30) == leader.log.read(2, 1 << 30)


@settings(max_examples=examples(60, 20), deadline=None)
@given(st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(1, 4)),
        st.tuples(st.just("replicate"), st.integers(0, 2), st.integers(1, 300)),
        st.tuples(st.just("elect"), st.integers(0, 2)),
    ),
    max_size=25,
))
def test_logs_converge_to_the_leader_whatever_the_elections(ops):
    """Any sequence of writes, partial replication and (clean or unclean) elections: once every follower
    settled and caught up, every log is byte for byte the leader's."""
    with tempfile.TemporaryDirectory() as tmp:
        clock = Clock()
        replicas = [Replica(Path(tmp) / f"r{i}", clock) for i in range(3)]
        try:
            leader, epoch = 0, 0
            settled = {0, 1, 2}
            for op in ops:
                if op[0] == "write":
                    write(replicas[leader], epoch, op[1])
                elif op[0] == "replicate" and op[1] != leader:
                    if op[1] not in settled:
                        settle(replicas[op[1]], replicas[leader])
                        settled.add(op[1])
                    replicate(replicas[op[1]], replicas[leader], op[2])
                elif op[0] == "elect" and op[1] != leader:
                    leader, epoch = op[1], epoch + 1
                    settled = {leader}
            for index, replica in enumerate(replicas):
                if index != leader:
                    if index not in settled:
                        settle(replica, replicas[leader])
                    replicate(replica, replicas[leader])
                    assert replica.contents() == replicas[leader].contents()
                    assert replica.log.leader_epoch_entries() == replicas[leader].log.leader_epoch_entries()
        finally:  # closed before the directory goes, or their pending background writes fail
            for replica in replicas:
                replica.log.close()
