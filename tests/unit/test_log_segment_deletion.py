"""Segments leaving the log (retention, DeleteRecords, truncation) are renamed ``*.deleted`` at once and removed
``file.delete.delay.ms`` later on the background thread, as Kafka does: the caller (the event loop) does not
wait for the kernel to free their blocks, and a read that found a segment a moment before still gets its data."""

from __future__ import annotations

import os
import time

from log_harness import BASE_TS, Clock, all_records, batch, config

from broker.log.background import BackgroundThread
from broker.log.partition import PartitionLog
from broker.log.segment import DELETED_SUFFIX, SEGMENT_SUFFIXES
from broker.protocol.records import decode_records_any


class Jobs(list):
    """The background as a list: jobs wait until the test runs them."""

    def run(self) -> None:
        while self:
            self.pop(0)()


def files(directory, suffix: str) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(suffix))


def filled(directory, jobs, **settings) -> PartitionLog:
    log = PartitionLog(directory, config(segment_bytes=300, **settings), Clock(), background=jobs.append)
    for i in range(10):
        log.append(batch(2, ts=BASE_TS + i * 1000))
    jobs.clear()  # the fsyncs of the rolled segments
    return log


def test_retention_renames_the_segments_at_once_and_the_background_removes_them(tmp_path):
    jobs = Jobs()
    log = filled(tmp_path / "p", jobs, retention_ms=10_000, file_delete_delay_ms=0)
    live = files(tmp_path / "p", ".log")
    deleted = log.apply_retention(BASE_TS + 15_500)
    assert deleted >= 1
    # out of the log at once, under their new names: the log and both indexes of each segment
    assert files(tmp_path / "p", ".log") == live[deleted:]
    stems = [name.removesuffix(".log") for name in live[:deleted]]
    assert files(tmp_path / "p", DELETED_SUFFIX) == sorted(
        stem + suffix + DELETED_SUFFIX for stem in stems for suffix in SEGMENT_SUFFIXES
        if suffix != ".txnindex")  # no transaction was aborted: no .txnindex to rename
    assert len(jobs) == deleted  # one removal per segment, handed over once the delay (0 here) is up
    jobs.run()
    assert files(tmp_path / "p", DELETED_SUFFIX) == []
    assert [r.offset for r in all_records(log)][0] == log.log_start_offset


def test_delete_records_and_truncation_leave_the_segments_to_the_background_too(tmp_path):
    jobs = Jobs()
    log = filled(tmp_path / "p", jobs, file_delete_delay_ms=0)
    segments = log.segment_count
    log.delete_records_before(9)
    log.truncate_to(16)  # a batch boundary (batches of two)
    assert log.segment_count < segments
    renamed = files(tmp_path / "p", ".log" + DELETED_SUFFIX)
    assert len(renamed) == segments - log.segment_count
    assert len(jobs) == len(renamed)
    assert [r.offset for r in all_records(log)] == list(range(log.log_start_offset, 16))
    jobs.run()
    assert files(tmp_path / "p", DELETED_SUFFIX) == []


def test_a_followers_truncation_leaves_its_fsyncs_to_the_background(tmp_path):
    """The shorter file and the removed segments are made durable by the background, not by the caller (a
    follower's fetcher, on the event loop); what the log holds changes at once."""
    jobs = Jobs()
    log = PartitionLog(tmp_path / "p", config(segment_bytes=300, file_delete_delay_ms=60_000), Clock(),
                       background=jobs.append)
    for i in range(10):
        log.append(batch(2, ts=BASE_TS + i * 1000))
    jobs.run()  # the rolled segments' fsyncs
    assert log.pending_durability() is None
    log.truncate_to(17)  # inside a batch of two: the log ends at its base offset
    assert log.log_end_offset == 16
    durable = log.pending_durability()
    assert durable is not None and not durable.done()
    jobs.run()
    assert durable.done() and durable.exception() is None and log.pending_durability() is None


def test_the_files_stay_for_file_delete_delay_ms_then_go(tmp_path):
    background = BackgroundThread("test-deleter")
    log = PartitionLog(tmp_path / "p", config(segment_bytes=300, retention_ms=10_000, file_delete_delay_ms=300),
                       Clock(), background=background.submit)
    for i in range(10):
        log.append(batch(2, ts=BASE_TS + i * 1000))
    assert background.wait_idle()
    log.apply_retention(BASE_TS + 15_500)
    assert background.wait_idle()  # nothing was handed over yet: the timer holds the removal
    assert files(tmp_path / "p", ".log" + DELETED_SUFFIX) != []
    deadline = time.monotonic() + 10
    while files(tmp_path / "p", DELETED_SUFFIX) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert files(tmp_path / "p", DELETED_SUFFIX) == []
    log.close()


def test_a_read_that_found_a_segment_still_gets_its_records_after_retention_took_it(tmp_path):
    jobs = Jobs()
    log = filled(tmp_path / "p", jobs, retention_ms=10_000, file_delete_delay_ms=0)
    region = log.read_region(0, 1 << 20)  # a fetch answered with file descriptors, not yet sent
    log.apply_retention(BASE_TS + 100_000)
    jobs.run()  # even the renamed files are gone now
    assert files(tmp_path / "p", DELETED_SUFFIX) == []
    data = region.read()
    assert [r.offset for r in decode_records_any(data)][:2] == [0, 1]


def test_segments_deleted_before_a_crash_are_removed_when_the_log_opens(tmp_path):
    jobs = Jobs()
    log = filled(tmp_path / "p", jobs, retention_ms=10_000)
    log.apply_retention(BASE_TS + 15_500)
    start, end = log.log_start_offset, log.log_end_offset
    log.close_without_checkpoint()  # the process dies with the removals still waiting
    assert files(tmp_path / "p", DELETED_SUFFIX) != []
    reopened = PartitionLog(tmp_path / "p", config(segment_bytes=300, retention_ms=10_000), Clock())
    assert files(tmp_path / "p", DELETED_SUFFIX) == []
    assert (reopened.log_start_offset, reopened.log_end_offset) == (start, end)
    assert [r.offset for r in all_records(reopened)] == list(range(start, end))
    reopened.close()
