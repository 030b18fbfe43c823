"""A follower's truncation that keeps records (``truncate_to`` with ``roll_off_thread``, as the fetcher asks) changes
the log in memory at once and leaves every file change to the roller: the later segments' renames, the cut
segment's new length and indexes, the producer snapshots past the end, the transaction indexes, the leader epochs'
checkpoint. The files the calling thread changes are watched with audit hooks (PEP 578), not guessed from the
directory. A crash at any point of the roller's work recovers a prefix of the old log at least as long as the new
one, with its epochs; a failed file work is made again before the next append."""

from __future__ import annotations

import os
import random
import shutil
import threading
from collections.abc import Callable

import pytest
from file_audit import file_changes
from log_harness import BASE_TS, Clock, all_records, batch, config

from broker.errors import ErrorCode, KafkaError
from broker.log.partition import PartitionLog, RollPending
from broker.log.segment import LogSegment, segment_file
from broker.protocol.records import HEADER_SIZE, BatchHeader, patched_header

SMALL = config(segment_bytes=300, index_interval_bytes=1)
RECORD = batch(2, value=b"x" * 30)  # two fit a segment


class Jobs(list):
    """The roller (or the flusher) as a list: jobs wait until the test runs them."""

    def run(self) -> None:
        while self:
            self.pop(0)()


def four_segments(directory) -> tuple[PartitionLog, Jobs, Jobs]:
    """Offsets 0-15 in four segments of two batches, leader epochs 1-4 (one a segment), flushed; the roller's and
    the flusher's jobs wait for the test."""
    roller, flusher = Jobs(), Jobs()
    log = PartitionLog(directory, SMALL, Clock(), background=flusher.append, roll_in=roller.append)
    for i in range(8):
        log.append(RECORD, leader_epoch=i // 2 + 1)  # rolls on this thread: no roll_off_thread
    assert log.segment_count == 4 and log.log_end_offset == 16
    log.flush()
    flusher.run()
    return log, roller, flusher


def files(directory) -> dict[str, int]:
    return {name: os.path.getsize(os.path.join(directory, name)) for name in sorted(os.listdir(directory))}


def test_a_truncation_that_keeps_records_changes_no_file_on_the_calling_thread(tmp_path):
    log, roller, flusher = four_segments(tmp_path / "p")
    before = files(tmp_path / "p")
    assert f"{8:020d}.snapshot" in before  # written by the rolls
    with file_changes() as changes:
        log.truncate_to(6, roll_off_thread=True)  # inside the second segment, after its first batch
    assert changes == [] and files(tmp_path / "p") == before
    assert len(roller) == 1
    # the log as it is now, to every reader
    assert (log.log_end_offset, log.segment_count, log.high_watermark) == (6, 2, 6)
    assert [r.offset for r in all_records(log)] == list(range(6))
    assert log.leader_epoch_entries() == [(1, 0), (2, 4)]
    with pytest.raises(RollPending) as pending:
        log.append(RECORD, roll_off_thread=True)

    with file_changes() as roller_changes:
        roller.run()
    assert roller_changes  # the changes the calling thread made before, made here
    pending.value.rolled.result(0)
    after = files(tmp_path / "p")
    assert [name for name in after if name.endswith(".log")] == [f"{0:020d}.log", f"{4:020d}.log"]
    assert after[f"{4:020d}.log"] == len(RECORD)
    assert not any(name.endswith(".snapshot") and int(name.split(".")[0]) > 6 for name in after)
    flusher.run()
    assert log.append(RECORD, roll_off_thread=True, leader_epoch=7).base_offset == 6
    log.close()
    reopened = PartitionLog(tmp_path / "p", SMALL, Clock())
    assert [r.offset for r in all_records(reopened)] == list(range(8))
    assert reopened.leader_epoch_entries() == [(1, 0), (2, 4), (7, 6)]


def recovered_at_each_change(tmp_path, roller, flusher, at_first=None) -> list[tuple[str, object, PartitionLog, list]]:
    """The roller's and then the flusher's file work (the epochs' checkpoint, the fsyncs) run, the directory copied
    at each file change as a crash at that moment leaves it, and once more at the end (``at_first`` runs at the
    first change); each copy opened: (the change, its path, the log recovered, its records)."""
    copies: list[tuple[str, object, object]] = []

    def crash(event: str, path: object) -> None:
        if not copies and at_first is not None:
            at_first()
        copies.append((event, path, shutil.copytree(tmp_path / "p", tmp_path / f"crash-{len(copies)}")))

    with file_changes(crash):
        roller.run()
    with file_changes(crash):
        flusher.run()
    copies.append(("after", None, shutil.copytree(tmp_path / "p", tmp_path / "after")))
    assert len(copies) > 10
    opened = []
    for event, path, copy in copies:
        recovered = PartitionLog(copy, SMALL, Clock())
        opened.append((event, path, recovered, all_records(recovered)))
    return opened


def test_a_crash_at_any_point_of_a_truncations_file_work_recovers_a_prefix_of_the_old_log(tmp_path):
    log, roller, flusher = four_segments(tmp_path / "p")
    old = all_records(log)
    old_epochs = log.leader_epoch_entries()
    log.truncate_to(6, roll_off_thread=True)
    ends = []
    for event, path, recovered, records in recovered_at_each_change(tmp_path, roller, flusher):
        end = recovered.log_end_offset
        assert records == old[:end] and end >= 6, (event, path)
        assert recovered.leader_epoch_entries() == [entry for entry in old_epochs if entry[1] < end], (event, path)
        ends.append(end)
    assert ends == sorted(ends, reverse=True) and ends[0] == 16 and ends[-1] == 6


def test_a_truncation_whose_file_work_fails_is_made_again_before_the_next_append(tmp_path):
    log, roller, _ = four_segments(tmp_path / "p")
    index = segment_file(str(tmp_path / "p"), 4, ".index")
    os.unlink(index)
    os.mkdir(index)  # the cut segment's index cannot be written
    log.truncate_to(6, roll_off_thread=True)
    with pytest.raises(RollPending) as pending:
        log.append(RECORD, roll_off_thread=True)
    roller.run()
    with pytest.raises(KafkaError) as failed:
        pending.value.rolled.result(0)
    assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert log.log_end_offset == 6 and [r.offset for r in all_records(log)] == list(range(6))
    with pytest.raises(RollPending) as again:  # the retry of the append asks for the file work again
        log.append(RECORD, roll_off_thread=True)
    os.rmdir(index)
    roller.run()
    again.value.rolled.result(0)
    assert log.append(RECORD, roll_off_thread=True).base_offset == 6
    log.close()
    reopened = PartitionLog(tmp_path / "p", SMALL, Clock())
    assert [r.offset for r in all_records(reopened)] == list(range(8))


def test_truncations_asked_before_the_roller_ran_follow_each_other_without_waiting(tmp_path):
    log, roller, _ = four_segments(tmp_path / "p")
    log.truncate_to(13, roll_off_thread=True)
    log.truncate_to(9, roll_off_thread=True)  # the fetcher's next round: queued, the calling thread does not wait
    assert len(roller) == 1 and log.log_end_offset == 8
    roller.run()
    assert [name for name in files(tmp_path / "p") if name.endswith(".log")] == [
        f"{base:020d}.log" for base in (0, 4, 8)]
    assert os.path.getsize(segment_file(str(tmp_path / "p"), 8, ".log")) == 0
    assert log.append(RECORD, roll_off_thread=True).base_offset == 8
    log.close()
    reopened = PartitionLog(tmp_path / "p", SMALL, Clock())
    assert [r.offset for r in all_records(reopened)] == list(range(10))


def test_a_segment_cut_in_memory_has_the_statistics_of_one_rebuilt_from_its_file(tmp_path):
    """cut() reads only past the last index entry kept; a rebuild scans the whole file."""
    rng = random.Random(31)
    for trial in range(60):
        directory = str(tmp_path / f"t{trial}")
        os.makedirs(directory)
        interval = rng.choice([1, 60, 200, 4096])
        segment = LogSegment.create(directory, 0, interval, BASE_TS)
        offset = 0
        for _ in range(rng.randrange(1, 25)):
            count = rng.randrange(1, 4)
            produced = batch(count, ts=BASE_TS + rng.randrange(-50, 50), value=b"v" * rng.randrange(1, 90))
            header = BatchHeader.parse(produced)
            segment.append((patched_header(produced, offset, 0), memoryview(produced)[HEADER_SIZE:]), offset,
                           offset + count, header.max_timestamp)
            offset += count
        at = rng.randrange(0, offset)
        segment.truncate_to(at)
        reopened = LogSegment.open(directory, 0, interval, BASE_TS)  # the files the cut wrote are trusted as they are
        on_disk = reopened.offset_index.entries(), reopened.time_index.entries()
        reopened.close()
        rebuilt = LogSegment.open(directory, 0, interval, BASE_TS)
        rebuilt.rebuild_indexes()
        got = (segment.size, segment.next_offset, segment.max_timestamp, segment.offset_of_max_timestamp,
               segment.offset_index.entries(), segment.time_index.entries(), segment._bytes_since_index_entry)
        want = (rebuilt.size, rebuilt.next_offset, rebuilt.max_timestamp, rebuilt.offset_of_max_timestamp,
                rebuilt.offset_index.entries(), rebuilt.time_index.entries(), rebuilt._bytes_since_index_entry)
        assert got == want, (trial, interval, at)
        assert on_disk == want[4:6]
        segment.close()
        rebuilt.close()


def test_a_truncation_that_empties_the_log_changes_no_file_on_the_calling_thread(tmp_path):
    """Its roll was the roller's already; the producer snapshots of the old log went on the calling thread."""
    log, roller, _ = four_segments(tmp_path / "p")
    before = files(tmp_path / "p")
    with file_changes() as changes:
        log.truncate_to(0, roll_off_thread=True)
    assert changes == [] and files(tmp_path / "p") == before
    assert (log.log_start_offset, log.log_end_offset, all_records(log)) == (0, 0, [])
    roller.run()
    assert [name for name in files(tmp_path / "p") if name.endswith((".log", ".snapshot"))] == [
        f"{0:020d}.log", f"{0:020d}.snapshot"]
    assert log.append(RECORD, roll_off_thread=True).base_offset == 0
    log.close()
    reopened = PartitionLog(tmp_path / "p", SMALL, Clock())
    assert [r.offset for r in all_records(reopened)] == [0, 1]


def without_waiting(call: Callable[[], object], timeout: float = 5.0) -> list[tuple[str, object]]:
    """Run ``call`` on a thread of its own, as the event loop would; the file changes it made there. Fails if it has
    not returned within ``timeout`` (it waits for the roller)."""
    made: list[list[tuple[str, object]]] = []

    def run() -> None:
        with file_changes() as changes:
            call()
        made.append(changes)

    thread = threading.Thread(target=run, daemon=True)  # left waiting on a failure: the roller's end wakes it
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "the call waited for the roller"
    assert made, "the call failed"
    return made[0]


def four_segments_of_a_producer(directory) -> tuple[PartitionLog, Jobs, Jobs]:
    """As :func:`four_segments`, the batches an idempotent producer's (id 7): the log has a producer state."""
    roller, flusher = Jobs(), Jobs()
    log = PartitionLog(directory, SMALL, Clock(), background=flusher.append, roll_in=roller.append)
    for i in range(8):
        log.append(batch(2, value=b"x" * 30, producer=(7, 0, 2 * i)), leader_epoch=i // 2 + 1)
    assert log.segment_count == 4 and log.log_end_offset == 16
    log.flush()
    flusher.run()
    return log, roller, flusher


def test_a_truncation_that_empties_the_log_while_the_roller_cuts_it_queues_behind_the_cut(tmp_path):
    """The fetcher's next round empties the log while the roller is still cutting it for the round before: the
    calling thread neither waits for the cut nor changes a file; the log is empty at once, and the roller makes the
    restart's roll once the cut is written, the cut's replayed producer state left aside."""
    log, roller, flusher = four_segments_of_a_producer(tmp_path / "p")
    log.truncate_to(6, roll_off_thread=True)
    assert len(roller) == 1
    seen: list[tuple[list[tuple[str, object]], int, int]] = []

    def at_the_cuts_first_change(event: str, path: object) -> None:  # the cut under way, without the lock
        if not seen:
            changes = without_waiting(lambda: log.truncate_to(0, roll_off_thread=True))
            with pytest.raises(RollPending):
                log.append(RECORD, roll_off_thread=True)
            seen.append((changes, log.log_end_offset, len(all_records(log))))

    with file_changes(at_the_cuts_first_change):
        roller.run()
    assert seen == [([], 0, 0)]
    assert len(roller) == 0 and not log._file_work and log._rolling is None  # one job made both
    after = files(tmp_path / "p")
    assert [name for name in after if name.endswith((".log", ".snapshot"))] == [
        f"{0:020d}.log", f"{0:020d}.snapshot"]
    assert log._producers.get(7) is None  # the restart's empty state, not the cut's replay
    flusher.run()
    assert log.leader_epoch_entries() == []
    assert log.append(RECORD, roll_off_thread=True, leader_epoch=9).base_offset == 0
    log.close()
    reopened = PartitionLog(tmp_path / "p", SMALL, Clock())
    assert [r.offset for r in all_records(reopened)] == [0, 1]
    assert reopened.leader_epoch_entries() == [(9, 0)] and reopened._producers.get(7) is None
    reopened.close()


def test_a_crash_while_a_restart_queued_behind_a_cut_is_made_recovers_a_run_of_the_old_log(tmp_path):
    """Each file change of the cut and then of the queued restart's roll, as a crash at that moment leaves the
    directory: the log recovered holds a run of the old log's records with their epochs (a prefix, while the cut is
    made), never longer than the state before, and ends empty."""
    log, roller, flusher = four_segments_of_a_producer(tmp_path / "p")
    old = all_records(log)
    old_epochs = log.leader_epoch_entries()
    log.truncate_to(6, roll_off_thread=True)
    ends = []

    def emptied() -> None:  # at the cut's first file change, a truncation that empties the log
        without_waiting(lambda: log.truncate_to(0, roll_off_thread=True))

    for event, path, recovered, records in recovered_at_each_change(tmp_path, roller, flusher, emptied):
        start = records[0].offset if records else recovered.log_end_offset
        assert records == old[start:recovered.log_end_offset], (event, path)
        assert all(entry in old_epochs for entry in recovered.leader_epoch_entries()[1:]), (event, path)
        ends.append(recovered.log_end_offset if records else 0)
        recovered.close()
    assert ends[0] == 16 and ends == sorted(ends, reverse=True) and ends[-1] == 0, ends


def test_a_queued_restart_whose_roll_fails_is_made_again_before_the_next_append(tmp_path):
    log, roller, _ = four_segments_of_a_producer(tmp_path / "p")
    log.truncate_to(6, roll_off_thread=True)
    cutting = log._rolling
    queued: list[bool] = []

    def fail_the_restarts_roll(event: str, path: object) -> None:
        if not queued:
            without_waiting(lambda: log.truncate_to(0, roll_off_thread=True))
            queued.append(True)
        elif "recovery-point" in str(path):  # the restart's roll writes it before renaming the old segments
            raise OSError(28, "No space left on device")

    with file_changes(fail_the_restarts_roll):
        roller.run()
    assert cutting is not None
    with pytest.raises(KafkaError) as failed:
        cutting.result(0)
    assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert (log.log_end_offset, all_records(log)) == (0, [])
    with pytest.raises(RollPending) as again:  # the retry of the append asks for the restart's roll again
        log.append(RECORD, roll_off_thread=True)
    roller.run()
    again.value.rolled.result(0)
    assert [name for name in files(tmp_path / "p") if name.endswith(".log")] == [f"{0:020d}.log"]
    assert log.append(RECORD, roll_off_thread=True).base_offset == 0
    log.close()
    reopened = PartitionLog(tmp_path / "p", SMALL, Clock())
    assert [r.offset for r in all_records(reopened)] == [0, 1]
    reopened.close()
