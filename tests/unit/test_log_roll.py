"""A roll asked with ``roll_off_thread`` (the event loop's appends) does its file work on the roller: no batch is
written before the new segment is active, the appends that meet the roll go in their order once it is, reads see
every record meanwhile, a failed roll fails them with KAFKA_STORAGE_ERROR and leaves the log whole, and a crash
in the middle of a roll recovers."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import threading
import time

import pytest
from log_harness import Clock, all_records, batch, config

from broker.cluster.follower_log import append_leader_batches
from broker.errors import ErrorCode, KafkaError
from broker.log.files import read_int
from broker.log.partition import LOG_START_FILE, RECOVERY_POINT_FILE, PartitionLog, RollPending
from broker.log.segment import segment_file
from broker.protocol.records import HEADER_SIZE, patched_header

SMALL = config(segment_bytes=300)
RECORD = batch(2, value=b"x" * 30)  # two fit a segment, the third rolls


class Jobs(list):
    """The roller as a list: jobs wait until the test runs them."""

    def run(self) -> None:
        while self:
            self.pop(0)()


def rolling_log(directory, roll_in=None, settings=SMALL) -> tuple[PartitionLog, Jobs]:
    jobs = Jobs()
    log = PartitionLog(directory, settings, Clock(), background=Jobs().append, roll_in=jobs.append if roll_in is None else roll_in)
    return log, jobs


def append_until_rolling(log: PartitionLog) -> RollPending:
    while True:
        try:
            log.append(RECORD, roll_off_thread=True)
        except RollPending as pending:
            return pending


def segment_files(directory) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(".log"))


def test_nothing_is_written_before_the_new_segment_is_active(tmp_path):
    log, jobs = rolling_log(tmp_path / "p")
    pending = append_until_rolling(log)
    end = log.log_end_offset
    assert not pending.rolled.done() and len(jobs) == 1
    assert segment_files(tmp_path / "p") == [f"{0:020d}.log"]  # the new segment's files are the roller's to make
    with pytest.raises(RollPending) as again:  # every append of the partition waits for the same roll
        log.append(RECORD, roll_off_thread=True)
    assert again.value.rolled is pending.rolled
    assert log.log_end_offset == end and log.segment_count == 1
    assert [r.offset for r in all_records(log)] == list(range(end))  # reads see every record meanwhile

    jobs.run()
    assert pending.rolled.result(0) is None
    assert log.segment_count == 2 and log._segments[-1].base_offset == end
    assert segment_files(tmp_path / "p") == [f"{0:020d}.log", f"{end:020d}.log"]
    first = log.append(RECORD, roll_off_thread=True)
    second = log.append(RECORD, roll_off_thread=True)
    assert (first.base_offset, second.base_offset) == (end, end + 2)  # appended again, in their order
    assert [r.offset for r in all_records(log)] == list(range(end + 4))


def test_the_sealed_segment_keeps_its_last_index_entries_and_reopens_without_a_scan(tmp_path):
    log, jobs = rolling_log(tmp_path / "p", settings=config(segment_bytes=300, index_interval_bytes=1))
    pending = append_until_rolling(log)
    sealed = log._segments[0]
    entries = sealed.offset_index.entries()
    assert entries  # held in memory until the roller writes them
    jobs.run()
    pending.rolled.result(0)
    log.close()
    reopened = PartitionLog(tmp_path / "p", SMALL, Clock())
    assert reopened._segments[0].offset_index.entries() == entries
    assert reopened._segments[0].time_index.last_entry == (sealed.max_timestamp, sealed.offset_of_max_timestamp)


def test_a_roll_the_disk_refuses_fails_the_waiting_appends_and_the_next_roll_succeeds(tmp_path):
    log, jobs = rolling_log(tmp_path / "p")
    pending = append_until_rolling(log)
    end = log.log_end_offset
    blocker = segment_file(str(tmp_path / "p"), end, ".log")
    os.mkdir(blocker)  # the new segment's log file cannot be created
    jobs.run()
    with pytest.raises(KafkaError) as failed:
        pending.rolled.result(0)
    assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert log.segment_count == 1 and log.log_end_offset == end
    assert [r.offset for r in all_records(log)] == list(range(end))
    os.rmdir(blocker)
    retried = append_until_rolling(log)  # the batch's retry asks for the roll again
    jobs.run()
    retried.rolled.result(0)
    assert log.append(RECORD, roll_off_thread=True).base_offset == end
    assert log.segment_count == 2


class ThreadedRoller(list):
    """Each roll on a thread of its own; the futures say when each is over."""

    def __call__(self, job) -> None:
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.append(done)
        threading.Thread(target=lambda: (job(), done.set_result(None))).start()


def wait_for_files(directory, base: int) -> None:
    """Until the roller has made the segment at ``base`` (its time index is the last of its files)."""
    deadline = time.monotonic() + 10
    while not os.path.exists(segment_file(str(directory), base, ".timeindex")):
        assert time.monotonic() < deadline, "the roller did not make the new segment's files"
        time.sleep(0.01)


def test_a_crash_while_the_roller_makes_the_new_segment_recovers_every_record(tmp_path):
    """The roller made the new segment's files but has not made it active when the process dies."""
    made = ThreadedRoller()
    log, _ = rolling_log(tmp_path / "p", made)
    with log._lock:  # the roller can make the files, not make the new segment active
        pending = append_until_rolling(log)
        end = log.log_end_offset
        wait_for_files(tmp_path / "p", end)
        shutil.copytree(tmp_path / "p", tmp_path / "crashed")
    pending.rolled.result(10)
    made[0].result(10)
    recovered = PartitionLog(tmp_path / "crashed", SMALL, Clock())
    assert recovered.log_end_offset == end
    assert recovered._segments[-1].base_offset == end  # the empty new segment is the active one
    assert [r.offset for r in all_records(recovered)] == list(range(end))
    assert recovered.append(RECORD).base_offset == end


def test_a_crash_before_the_roller_ran_recovers_every_record(tmp_path):
    log, _jobs = rolling_log(tmp_path / "p")
    append_until_rolling(log)
    end = log.log_end_offset
    log.close_without_checkpoint()  # the process dies; the roll never runs
    recovered = PartitionLog(tmp_path / "p", SMALL, Clock())
    assert recovered.log_end_offset == end
    assert [r.offset for r in all_records(recovered)] == list(range(end))


def test_a_log_closed_during_a_roll_is_left_without_the_new_segment(tmp_path):
    log, jobs = rolling_log(tmp_path / "p")
    pending = append_until_rolling(log)
    end = log.log_end_offset
    log.close_without_checkpoint()  # its topic deleted
    jobs.run()
    pending.rolled.result(0)
    assert not os.path.exists(segment_file(str(tmp_path / "p"), end, ".log"))
    with pytest.raises(KafkaError) as closed:
        log.append(RECORD, roll_off_thread=True)
    assert closed.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_truncation_and_close_wait_for_a_roll_under_way(tmp_path):
    rolls: list = []
    log, _ = rolling_log(tmp_path / "p", rolls.append)
    pending = append_until_rolling(log)
    end = log.log_end_offset
    truncating = threading.Thread(target=log.truncate_to, args=(2,))
    truncating.start()
    truncating.join(0.2)
    assert truncating.is_alive()  # waiting for the roll
    rolls.pop()()
    truncating.join(10)
    pending.rolled.result(0)
    assert log.log_end_offset == 2 and log.segment_count == 1  # the rolled segment went with the truncation
    assert not os.path.exists(segment_file(str(tmp_path / "p"), end, ".log"))
    append_until_rolling(log)
    closing = threading.Thread(target=log.close)
    closing.start()
    closing.join(0.2)
    assert closing.is_alive()
    rolls.pop()()
    closing.join(10)
    assert log.closed and not closing.is_alive()
    reopened = PartitionLog(tmp_path / "p", SMALL, Clock())
    assert [r.offset for r in all_records(reopened)] == list(range(reopened.log_end_offset))


def test_a_follower_appends_up_to_the_roll_and_the_rest_after_it(tmp_path):
    leader = PartitionLog(tmp_path / "leader", config(), Clock())
    for _ in range(7):
        leader.append(RECORD)
    fetched = leader.read(0, 1 << 20)  # one leader's answer: seven batches, which need three rolls here
    follower, jobs = rolling_log(tmp_path / "follower")
    rolls = 0
    while follower.log_end_offset < leader.log_end_offset:
        before = follower.log_end_offset
        try:
            append_leader_batches(follower, fetched, before)
        except RollPending as pending:
            assert follower.log_end_offset > before and follower.log_end_offset == follower._segments[-1].next_offset
            jobs.run()
            pending.rolled.result(0)
            assert follower._segments[-1].base_offset == follower.log_end_offset  # the next fetch starts there
            rolls += 1
    assert rolls == 3 and follower.segment_count == 4
    assert all_records(follower) == all_records(leader)


def test_a_recovery_point_noted_earlier_never_replaces_one_written_later(tmp_path):
    """The flusher writes the point it noted after a roll's fsync without the log's lock: a close, flush or
    truncation may write a newer one meanwhile, which stays."""
    log, _ = rolling_log(tmp_path / "p")
    with log._lock:
        early = log._note_recovery_point(5)
        late = log._note_recovery_point(9)
    log._write_recovery_point(*late)
    log._write_recovery_point(*early)
    assert read_int(os.path.join(tmp_path / "p", RECOVERY_POINT_FILE)) == 9


def test_an_empty_segment_rolls_on_the_roller_and_its_files_go(tmp_path):
    """A follower's batch past the empty active segment's 32-bit range (the leader's log start moved far)."""
    follower, jobs = rolling_log(tmp_path / "p")
    far = 2**31 + 10
    produced = batch(2)
    moved = bytes(patched_header(produced, far, 0)) + produced[HEADER_SIZE:]
    with pytest.raises(RollPending) as pending:
        follower.append_replicated(moved, roll_off_thread=True)
    assert len(jobs) == 1 and segment_files(tmp_path / "p") == [f"{0:020d}.log"]  # nothing made on this thread
    assert follower.log_end_offset == 0 and all_records(follower) == []
    with pytest.raises(RollPending) as again:
        follower.append(RECORD, roll_off_thread=True)
    assert again.value.rolled is pending.value.rolled

    jobs.run()
    pending.value.rolled.result(0)
    assert segment_files(tmp_path / "p") == [f"{far:020d}.log"]  # the empty segment went with its files
    assert follower.segment_count == 1 and follower.log_end_offset == far
    assert follower.append_replicated(moved, roll_off_thread=True) == far + 2
    assert [r.offset for r in all_records(follower, far)] == [far, far + 1]


def log_of_three_segments(directory) -> tuple[PartitionLog, Jobs]:
    log, jobs = rolling_log(directory)
    for _ in range(6):
        log.append(RECORD)  # rolls on this thread: no roll_off_thread
    assert log.segment_count == 3 and log.log_end_offset == 12
    log.delete_records_before(5)
    log.flush()  # the log start checkpoint written (the test's flusher runs nothing)
    return log, jobs


def test_a_truncation_that_empties_the_log_rolls_on_the_roller(tmp_path):
    log, jobs = log_of_three_segments(tmp_path / "p")
    before = segment_files(tmp_path / "p")
    log.truncate_to(3, roll_off_thread=True)  # below the log start: the log restarts at 3
    assert (log.log_start_offset, log.log_end_offset, log.segment_count) == (3, 3, 1)
    assert len(jobs) == 1 and segment_files(tmp_path / "p") == before  # no file made, renamed or written here
    assert all_records(log) == [] and log.latest_epoch == -1
    with pytest.raises(RollPending) as pending:
        log.append(RECORD, roll_off_thread=True)
    waiting = threading.Thread(target=log.append, args=(RECORD,))  # an append without roll_off_thread waits
    waiting.start()
    waiting.join(0.2)
    assert waiting.is_alive() and log.log_end_offset == 3

    jobs.run()
    waiting.join(10)
    pending.value.rolled.result(0)
    assert segment_files(tmp_path / "p") == [f"{3:020d}.log"]
    assert log.append(RECORD, roll_off_thread=True).base_offset == 5
    assert [r.offset for r in all_records(log)] == [3, 4, 5, 6]
    assert read_int(os.path.join(tmp_path / "p", LOG_START_FILE)) == 3
    log.close()
    reopened = PartitionLog(tmp_path / "p", SMALL, Clock())
    assert (reopened.log_start_offset, [r.offset for r in all_records(reopened)]) == (3, [3, 4, 5, 6])


def test_a_crash_before_a_truncations_roll_finds_the_old_log(tmp_path):
    log, _jobs = log_of_three_segments(tmp_path / "p")
    records = all_records(log)
    log.truncate_to(3, roll_off_thread=True)
    log.close_without_checkpoint()  # the process dies; the roller never ran: as if the truncation had not begun
    recovered = PartitionLog(tmp_path / "p", SMALL, Clock())
    assert (recovered.log_start_offset, all_records(recovered)) == (5, records)


def test_a_truncations_roll_that_fails_leaves_a_log_at_its_new_start_and_is_made_again(tmp_path):
    """The roller wrote the checkpoints and renamed the old segments, then could not make the new segment: what a
    crash at that moment leaves too."""
    log, jobs = log_of_three_segments(tmp_path / "p")
    blocker = segment_file(str(tmp_path / "p"), 3, ".log")
    log.truncate_to(3, roll_off_thread=True)
    os.mkdir(blocker)
    jobs.run()
    assert segment_files(tmp_path / "p") == [f"{3:020d}.log"] and os.path.isdir(blocker)  # the old ones renamed
    shutil.copytree(tmp_path / "p", tmp_path / "crashed", ignore=shutil.ignore_patterns("*.log"))  # all but the blocker
    crashed = PartitionLog(tmp_path / "crashed", SMALL, Clock())
    assert (crashed.log_start_offset, crashed.log_end_offset, crashed.latest_epoch) == (3, 3, -1)

    retried = append_until_rolling(log)  # the next append makes the roll again
    jobs.run()
    with pytest.raises(KafkaError) as failed:
        retried.rolled.result(0)
    assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    os.rmdir(blocker)
    again = append_until_rolling(log)
    jobs.run()
    again.rolled.result(0)
    assert log.append(RECORD, roll_off_thread=True).base_offset == 3
    assert [r.offset for r in all_records(log)] == [3, 4]


def test_a_truncations_roll_that_failed_before_the_renames_is_made_on_close(tmp_path):
    log, jobs = log_of_three_segments(tmp_path / "p")
    blocker = os.path.join(tmp_path / "p", LOG_START_FILE)
    os.unlink(blocker)
    os.mkdir(blocker)  # the new log start cannot be written: the roll fails before it renames anything
    log.truncate_to(3, roll_off_thread=True)
    jobs.run()
    assert log.log_end_offset == 3 and len(segment_files(tmp_path / "p")) == 2
    os.rmdir(blocker)
    log.close()
    reopened = PartitionLog(tmp_path / "p", SMALL, Clock())
    assert (reopened.log_start_offset, reopened.log_end_offset, all_records(reopened)) == (3, 3, [])


def test_a_crash_while_an_empty_segment_rolls_recovers_at_the_new_base(tmp_path):
    """The roller made the new segment's log file (not its indexes) and has not taken the empty one out."""
    made = ThreadedRoller()
    follower, _ = rolling_log(tmp_path / "p", made)
    far = 2**31 + 10
    moved = bytes(patched_header(RECORD, far, 0)) + RECORD[HEADER_SIZE:]
    with follower._lock:  # the roller can make the files, not make the new segment active
        with pytest.raises(RollPending) as pending:
            follower.append_replicated(moved, roll_off_thread=True)
        wait_for_files(tmp_path / "p", far)
        shutil.copytree(tmp_path / "p", tmp_path / "crashed")
    pending.value.rolled.result(10)
    made[0].result(10)
    for suffix in (".index", ".timeindex"):
        os.unlink(segment_file(str(tmp_path / "crashed"), far, suffix))
    recovered = PartitionLog(tmp_path / "crashed", SMALL, Clock())
    assert recovered.log_end_offset == far and recovered._segments[-1].base_offset == far
    assert recovered.append_replicated(moved) == far + 2
    assert [r.offset for r in all_records(recovered, far)] == [far, far + 1]


def test_retention_rolls_the_active_segment_on_the_roller_with_the_lock_released(tmp_path):
    clock = Clock()
    jobs = Jobs()
    log = PartitionLog(tmp_path / "p", config(retention_ms=1000), clock, background=Jobs().append, roll_in=jobs.append)
    log.append(RECORD)
    clock.advance(5000)
    deleted: list[int] = []
    retention = threading.Thread(target=lambda: deleted.append(log.apply_retention()))
    retention.start()
    deadline = time.monotonic() + 10
    while not jobs:
        assert time.monotonic() < deadline, "retention did not hand its roll to the roller"
        time.sleep(0.01)
    with pytest.raises(RollPending):  # the lock is free: the event loop's append is answered, and waits
        log.append(RECORD, roll_off_thread=True)
    assert [r.offset for r in all_records(log)] == [0, 1]  # reads see every record meanwhile
    assert segment_files(tmp_path / "p") == [f"{0:020d}.log"]
    jobs.run()
    retention.join(10)
    assert deleted == [1] and (log.log_start_offset, log.log_end_offset, log.segment_count) == (2, 2, 1)
    assert log.append(RECORD, roll_off_thread=True).base_offset == 2


def test_a_crash_while_the_roller_makes_a_restarted_logs_segment_recovers_at_its_start(tmp_path):
    """The roller wrote the checkpoints, renamed the old segments and made the new segment's log file (not its
    indexes), and has not made it active."""
    made = ThreadedRoller()
    log, _ = log_of_three_segments(tmp_path / "p")
    log._roll_in = made
    with log._lock:
        log.truncate_to(3, roll_off_thread=True)
        wait_for_files(tmp_path / "p", 3)
        shutil.copytree(tmp_path / "p", tmp_path / "crashed")
    made[0].result(10)
    for suffix in (".index", ".timeindex"):
        os.unlink(segment_file(str(tmp_path / "crashed"), 3, suffix))
    recovered = PartitionLog(tmp_path / "crashed", SMALL, Clock())
    assert (recovered.log_start_offset, recovered.log_end_offset, all_records(recovered)) == (3, 3, [])
    assert recovered.append(RECORD).base_offset == 3
