"""The topic's ``preallocate``: a new segment reserves its ``segment.bytes`` of disk at once, the file's size
stays that of the data, and the space past the data is freed when the segment stops taking appends (roll,
close, or the next start after an unclean shutdown)."""

from __future__ import annotations

import os

from log_harness import BASE_TS, Clock, all_records, batch, config

from broker.log import segment as segment_module
from broker.log.partition import PartitionLog

VALUE = b"v" * 1000
SEGMENT_BYTES = 8 << 20
PREALLOCATED = config(preallocate=True, segment_bytes=SEGMENT_BYTES)
SLACK = 64 * 1024  # file systems round allocations up to their blocks


def reserved(path) -> int:
    """Bytes of disk the file holds."""
    return os.stat(path).st_blocks * 512


def active_path(log: PartitionLog) -> str:
    return log._segments[-1].log_path


def fill(log: PartitionLog, batches: int) -> None:
    for i in range(batches):
        log.append(batch(10, ts=BASE_TS + i, value=VALUE), now_ms=BASE_TS)


def test_a_new_segment_reserves_its_segment_bytes_and_the_size_stays_the_datas(tmp_path):
    log = PartitionLog(tmp_path / "p", PREALLOCATED, Clock())
    path = active_path(log)
    assert os.path.getsize(path) == 0
    assert reserved(path) >= SEGMENT_BYTES
    fill(log, 30)
    assert os.path.getsize(path) == log.size_bytes < SEGMENT_BYTES
    assert reserved(path) >= SEGMENT_BYTES
    assert [r.value for r in all_records(log)] == [VALUE] * 300
    log.close()


def test_without_preallocate_nothing_is_reserved(tmp_path):
    log = PartitionLog(tmp_path / "p", config(segment_bytes=SEGMENT_BYTES), Clock())
    fill(log, 30)
    assert reserved(active_path(log)) < log.size_bytes + SLACK
    log.close()


def test_closing_frees_the_reservation_and_keeps_the_modification_time(tmp_path):
    log = PartitionLog(tmp_path / "p", PREALLOCATED, Clock())
    fill(log, 20)
    path = active_path(log)
    os.utime(path, ns=(1_000_000_000, 2_000_000_000))
    log.close()
    assert reserved(path) < os.path.getsize(path) + SLACK
    assert os.stat(path).st_mtime_ns == 2_000_000_000  # time-based retention may go by it
    reopened = PartitionLog(tmp_path / "p", PREALLOCATED, Clock())
    assert len(all_records(reopened)) == 200
    reopened.close()


def test_a_rolled_segment_frees_its_reservation_and_the_next_one_reserves(tmp_path):
    log = PartitionLog(tmp_path / "p", config(preallocate=True, segment_bytes=200_000), Clock())
    fill(log, 60)  # about 630 KB: three or four segments
    rolled = log._segments[:-1]
    assert len(rolled) >= 2
    for segment in rolled:
        assert reserved(segment.log_path) < segment.size + SLACK
    assert reserved(active_path(log)) >= 200_000
    assert len(all_records(log)) == 600
    log.close()


def test_an_unclean_shutdown_leaves_no_reservation_behind_the_next_start(tmp_path):
    log = PartitionLog(tmp_path / "p", PREALLOCATED, Clock())
    fill(log, 20)
    path = active_path(log)
    log.close_without_checkpoint()  # no clean-shutdown marker, the reservation still there
    assert reserved(path) >= SEGMENT_BYTES
    reopened = PartitionLog(tmp_path / "p", PREALLOCATED, Clock())
    assert reserved(path) < os.path.getsize(path) + SLACK
    assert len(all_records(reopened)) == 200
    reopened.close()


def test_a_file_system_that_cannot_reserve_is_written_as_before(tmp_path, monkeypatch):
    calls = []

    def cannot(fd, offset, length):
        calls.append((offset, length))
        return False

    monkeypatch.setattr(segment_module, "reserve_space", cannot)
    log = PartitionLog(tmp_path / "p", PREALLOCATED, Clock())
    fill(log, 30)
    assert calls == [(0, SEGMENT_BYTES)]
    assert [r.value for r in all_records(log)] == [VALUE] * 300
    log.close()


def test_a_reservation_that_cannot_be_freed_does_not_stop_the_roll_or_the_close(tmp_path, monkeypatch):
    def broken(fd, end):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(segment_module, "release_space_after", broken)
    log = PartitionLog(tmp_path / "p", config(preallocate=True, segment_bytes=200_000), Clock())
    fill(log, 60)  # rolls several times
    assert len(log._segments) >= 3
    log.close()
    reopened = PartitionLog(tmp_path / "p", config(), Clock())
    assert len(all_records(reopened)) == 600
    reopened.close()
