"""A rolled segment is fsynced in the background, not on the append that rolled it (as Kafka's scheduler
flushes it), and the recovery point moves past it only once it is: a crash before that checks it again."""

from __future__ import annotations

import os
import shutil
import threading

import structlog
from log_harness import Clock, all_records, batch, config

from broker.log.background import BackgroundThread
from broker.log.files import read_int
from broker.log.partition import CLEAN_SHUTDOWN_FILE, LOG_START_FILE, RECOVERY_POINT_FILE, PartitionLog

SMALL = config(segment_bytes=300)


class Jobs(list):
    """The background as a list: jobs wait until the test runs them."""

    def run(self) -> None:
        while self:
            self.pop(0)()


def rolled_log(directory, rolls: int = 2) -> tuple[PartitionLog, Jobs]:
    jobs = Jobs()
    log = PartitionLog(directory, SMALL, Clock(), background=jobs.append)
    while log.segment_count < rolls + 1:
        log.append(batch(2, value=b"x" * 30))
    return log, jobs


def recovery_point(directory) -> int | None:
    return read_int(os.path.join(directory, RECOVERY_POINT_FILE))


def test_the_recovery_point_moves_past_a_rolled_segment_only_once_the_background_has_synced_it(tmp_path):
    log, jobs = rolled_log(tmp_path / "p")
    assert len(jobs) == 1  # the rolls share one job while it waits, none run on the appending thread
    assert recovery_point(tmp_path / "p") is None
    jobs.pop(0)()  # the first job syncs every segment waiting by then
    active = log._segments[-1].base_offset
    assert recovery_point(tmp_path / "p") == active
    jobs.run()
    assert recovery_point(tmp_path / "p") == active
    log.append(batch(2, value=b"x" * 30))
    assert [r.offset for r in all_records(log)] == list(range(log.log_end_offset))


def test_a_crash_before_the_background_synced_checks_the_rolled_segments_again(tmp_path):
    log, _jobs = rolled_log(tmp_path / "p")
    first_end = log._segments[0].next_offset
    log.close_without_checkpoint()  # the process dies; the jobs never run
    shutil.copytree(tmp_path / "p", tmp_path / "crashed")
    first = sorted(name for name in os.listdir(tmp_path / "crashed") if name.endswith(".log"))[0]
    with open(tmp_path / "crashed" / first, "r+b") as f:  # the unsynced segment came back damaged
        f.seek(os.path.getsize(tmp_path / "crashed" / first) - 3)
        f.write(b"\x00\x01\x02")
    recovered = PartitionLog(tmp_path / "crashed", SMALL, Clock())
    assert recovered.segment_count == 1
    assert recovered.log_end_offset < first_end
    assert [r.offset for r in all_records(recovered)] == list(range(recovered.log_end_offset))


def test_flush_and_close_sync_what_the_background_has_not_yet(tmp_path):
    log, jobs = rolled_log(tmp_path / "p")
    log.flush()
    assert recovery_point(tmp_path / "p") == log._segments[-1].base_offset
    while log.segment_count < 5:
        log.append(batch(2, value=b"x" * 30))
    log.close()
    assert recovery_point(tmp_path / "p") == log._segments[-1].base_offset
    assert os.path.exists(tmp_path / "p" / CLEAN_SHUTDOWN_FILE)
    jobs.run()  # late jobs of a closed log do nothing
    assert PartitionLog(tmp_path / "p", SMALL, Clock()).log_end_offset == log.log_end_offset


def test_segments_deleted_before_their_sync_are_skipped(tmp_path):
    log, jobs = rolled_log(tmp_path / "p", rolls=3)
    log.delete_records_before(log._segments[2].base_offset)  # the first two segments go
    assert log.segment_count == 2
    jobs.run()
    assert recovery_point(tmp_path / "p") == log._segments[-1].base_offset
    log.truncate_to(log._segments[-1].base_offset - 1)  # a follower cuts into the last rolled segment
    while log.segment_count < 4:
        log.append(batch(2, value=b"x" * 30))
    log.truncate_to(log._segments[1].base_offset)
    jobs.run()
    assert recovery_point(tmp_path / "p") <= log._segments[-1].base_offset
    assert [r.offset for r in all_records(log)] == list(range(log.log_start_offset, log.log_end_offset))


def test_the_default_background_syncs_on_its_own_thread(tmp_path):
    seen = []
    real_fsync = os.fsync

    def watched_fsync(fd):
        seen.append(threading.current_thread().name)
        real_fsync(fd)

    background = BackgroundThread("test-flusher")
    log = PartitionLog(tmp_path / "p", SMALL, Clock(), background=background.submit)
    log.append(batch(2, value=b"x" * 30))  # (the first append checkpoints the leader epoch, durably)
    os.fsync = watched_fsync
    try:
        while log.segment_count < 3:
            log.append(batch(2, value=b"x" * 30))
        assert background.wait_idle()
    finally:
        os.fsync = real_fsync
    assert seen and set(seen) == {"test-flusher"}
    assert recovery_point(tmp_path / "p") == log._segments[-1].base_offset


def test_flush_messages_and_delete_records_fsync_on_the_background_and_say_when_done(tmp_path, monkeypatch):
    synced_on = []
    real_fsync = os.fsync

    def watched_fsync(fd):
        synced_on.append(threading.current_thread().name)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", watched_fsync)
    jobs = Jobs()
    log = PartitionLog(tmp_path / "p", config(flush_messages=1), Clock(), background=jobs.append)
    first = log.append(batch(2))
    second = log.append(batch(2))
    assert first.durable is second.durable is log.pending_flush()  # one fsync serves both
    assert not first.durable.done() and synced_on == []  # nothing waited for the disk on this thread
    jobs.run()
    assert first.durable.done() and first.durable.exception() is None and log.pending_flush() is None
    assert synced_on and set(synced_on) == {threading.current_thread().name}  # the job's (here: the test's)

    log.delete_records_before(3)
    start_file = tmp_path / "p" / LOG_START_FILE
    assert not start_file.exists()  # written by the job
    pending = log.pending_durability()
    assert pending is not None and not pending.done()
    jobs.run()
    assert pending.done() and read_int(str(start_file)) == 3
    log.delete_records_before(4)
    log.close()  # what the job has not written yet, close writes
    assert read_int(str(start_file)) == 4
    jobs.run()  # the late job changes nothing
    assert read_int(str(start_file)) == 4 and pending.done()


def test_background_jobs_run_in_order_and_a_failing_one_is_logged(tmp_path):
    background = BackgroundThread("test-jobs")
    ran = []

    def failing() -> None:
        raise OSError("disk gone")

    with structlog.testing.capture_logs() as logs:
        background.submit(lambda: ran.append(1))
        background.submit(failing)
        background.submit(lambda: ran.append(2))
        assert background.wait_idle()
    assert ran == [1, 2]
    assert any(entry["event"] == "background log job failed" for entry in logs)
