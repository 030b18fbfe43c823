"""Crash recovery of a partition log: torn and corrupt tails, damaged indexes, interrupted compaction,
and a state machine mixing appends, crashes, truncation and DeleteRecords against a simple model."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from log_harness import BASE_TS, Clock, all_records, batch, config

from broker.errors import ErrorCode, KafkaError
from broker.log.partition import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE, PartitionLog
from broker.protocol.records import Record, build_batch

CFG = config(segment_bytes=1000, index_interval_bytes=100)


def log_files(directory, suffix: str) -> list[str]:
    return sorted(os.path.join(directory, name) for name in os.listdir(directory) if name.endswith(suffix))


def crashed_copy(
    source, target, *, cut_at: int | None = None, flip: int | None = None, file_index: int = -1
) -> None:
    """Copy a partition directory as a crash would leave it, optionally damaging one segment file."""
    shutil.copytree(source, target)
    if os.path.exists(os.path.join(target, CLEAN_SHUTDOWN_FILE)):
        os.unlink(os.path.join(target, CLEAN_SHUTDOWN_FILE))
    path = log_files(target, ".log")[file_index]
    if cut_at is not None:
        os.truncate(path, cut_at)
    if flip is not None:
        with open(path, "r+b") as f:
            f.seek(flip)
            byte = f.read(1)[0]
            f.seek(flip)
            f.write(bytes([byte ^ 0x55]))


@pytest.fixture
def crashed_log(tmp_path):
    """A log of 6 batches in one segment whose process died: (directory, start and end of the last batch)."""
    directory = tmp_path / "original"
    log = PartitionLog(directory, CFG, Clock())
    for i in range(6):
        log.append(batch(i + 1, ts=BASE_TS + i, value=b"r%d" % i * 5), now_ms=BASE_TS)
    last_start = log._segments[-1].find_batch(log.log_end_offset - 1)[0]
    size = log.size_bytes
    log.close_without_checkpoint()
    return directory, last_start, size


def test_torn_last_batch_is_cut_at_every_byte_position(tmp_path, crashed_log):
    source, last_start, size = crashed_log
    expected = list(range(15))  # batches of 1..5 records come before the last one
    for cut in range(last_start, size):
        target = tmp_path / f"cut{cut}"
        crashed_copy(source, target, cut_at=cut)
        log = PartitionLog(target, CFG, Clock())
        assert log.log_end_offset == 15, cut
        assert [r.offset for r in all_records(log)] == expected
        assert os.path.getsize(log_files(target, ".log")[-1]) == last_start
        assert log.append(batch(1)).base_offset == 15
        log.close_without_checkpoint()
        shutil.rmtree(target)


def test_corrupt_byte_anywhere_in_the_checked_part_of_the_last_batch(tmp_path, crashed_log):
    source, last_start, size = crashed_log
    # Bytes 0-7 (base offset) and 12-15 (leader epoch) are outside the CRC, as in Kafka.
    positions = [last_start + p for p in range(8, 12)] + list(range(last_start + 16, size))
    for position in positions:
        target = tmp_path / f"flip{position}"
        crashed_copy(source, target, flip=position)
        log = PartitionLog(target, CFG, Clock())
        assert log.log_end_offset == 15, position
        assert len(all_records(log)) == 15
        log.close_without_checkpoint()
        shutil.rmtree(target)


def test_corruption_in_an_older_segment_drops_everything_after_it(tmp_path):
    directory = tmp_path / "original"
    # as if nothing had ever been fsynced: the background syncs of rolled segments (which move the recovery
    # point) never run, so every segment is checked on recovery
    log = PartitionLog(directory, config(segment_bytes=300), Clock(), background=lambda job: None)
    for _ in range(12):
        log.append(batch(2, value=b"x" * 30))
    assert log.segment_count >= 4
    second = log._segments[1]
    second_base, second_end = second.base_offset, second.next_offset
    log.close_without_checkpoint()
    assert not os.path.exists(directory / RECOVERY_POINT_FILE)
    crashed_copy(
        directory,
        tmp_path / "damaged",
        flip=os.path.getsize(log_files(directory, ".log")[1]) - 3,
        file_index=1,
    )
    recovered = PartitionLog(tmp_path / "damaged", config(segment_bytes=300), Clock())
    assert recovered.segment_count == 2
    assert second_base < recovered.log_end_offset < second_end
    assert [r.offset for r in all_records(recovered)] == list(range(recovered.log_end_offset))
    assert len(log_files(tmp_path / "damaged", ".log")) == 2


def test_zero_filled_tail_is_cut(tmp_path, crashed_log):
    source, _, size = crashed_log
    target = tmp_path / "zeros"
    crashed_copy(source, target)
    with open(log_files(target, ".log")[-1], "ab") as f:
        f.write(bytes(4096))
    log = PartitionLog(target, CFG, Clock())
    assert log.log_end_offset == 21
    assert log.size_bytes == size


def test_clean_shutdown_skips_recovery_but_rebuilds_damaged_indexes(tmp_path):
    directory = tmp_path / "p"
    log = PartitionLog(directory, CFG, Clock())
    for i in range(60):
        log.append(batch(2, ts=BASE_TS + i * 10))
    expected_reads = {offset: log.read(offset, 300) for offset in range(0, 120, 7)}
    expected_ts = {ts: log.offset_for_timestamp(ts) for ts in range(BASE_TS, BASE_TS + 600, 13)}
    log.close()
    assert os.path.exists(directory / CLEAN_SHUTDOWN_FILE)
    indexes = log_files(directory, ".index")
    time_indexes = log_files(directory, ".timeindex")
    os.unlink(indexes[0])  # missing
    os.truncate(indexes[1], 5)  # torn
    with open(indexes[2], "r+b") as f:  # pointing past the end of the log
        f.write(b"\x00\x00\x00\x01\x7f\xff\xff\xff")
    with open(time_indexes[-1], "ab") as f:  # a timestamp going backwards
        f.write(b"\x00" * 12)
    reopened = PartitionLog(directory, CFG, Clock())
    assert not os.path.exists(directory / CLEAN_SHUTDOWN_FILE)
    assert reopened.log_end_offset == 120
    assert {offset: reopened.read(offset, 300) for offset in expected_reads} == expected_reads
    assert {ts: reopened.offset_for_timestamp(ts) for ts in expected_ts} == expected_ts
    for segment in reopened._segments:
        assert segment.offset_index.is_sane(segment.size)
        assert segment.time_index.is_sane(segment.next_offset)


def test_producer_state_survives_clean_and_unclean_restarts(tmp_path):
    directory = tmp_path / "p"
    producer_batch = batch(3, producer=(77, 0, 0))
    log = PartitionLog(directory, config(segment_bytes=400), Clock())
    first = log.append(producer_batch)
    for i in range(1, 8):
        log.append(batch(3, producer=(77, 0, 3 * i)))
    log.close()
    log = PartitionLog(directory, config(segment_bytes=400), Clock())
    retry = log.append(batch(3, producer=(77, 0, 21)))
    assert retry.duplicate and retry.base_offset == 21
    log.append(batch(3, producer=(77, 0, 24)))
    log.close_without_checkpoint()  # crash: state comes from the roll snapshot plus the headers after it
    log = PartitionLog(directory, config(segment_bytes=400), Clock())
    assert log.append(batch(3, producer=(77, 0, 24))).duplicate
    assert not log.append(batch(1, producer=(77, 0, 27))).duplicate
    assert first.base_offset == 0


def _cleaned_copy_of_first_segments(log: PartitionLog, keep: int) -> tuple[int, int]:
    """Write `*.cleaned` files replacing the first two segments with their first ``keep`` records."""
    first, second = log._segments[0], log._segments[1]
    cleaned = log.create_cleaned_segment(first.base_offset)
    kept = [r for r in all_records(log) if r.offset < second.next_offset][:keep]
    for record in kept:
        data = build_batch(
            [Record(record.offset, record.timestamp, record.key, record.value, [])], base_offset=record.offset
        )
        cleaned.append((data,), record.offset, record.offset + 1, record.timestamp)
    cleaned.close_for_appends()
    cleaned.flush()
    cleaned.close()
    return first.base_offset, second.next_offset


@pytest.mark.parametrize("stage", ["before-marker", "after-marker", "log-renamed"])
def test_interrupted_compaction_swap(tmp_path, stage):
    directory = tmp_path / "p"
    cfg = config(segment_bytes=300)
    log = PartitionLog(directory, cfg, Clock())
    for i in range(12):
        log.append(batch(2, ts=BASE_TS + i, value=b"x" * 30))
    original = [r.offset for r in all_records(log)]
    base, end = _cleaned_copy_of_first_segments(log, keep=3)
    old_second = log._segments[1].base_offset
    log.close_without_checkpoint()
    name = f"{base:020d}"
    if stage != "before-marker":
        with open(directory / f"{name}.cleaning", "w") as f:
            f.write(f'{{"end": {end}}}')
    if stage == "log-renamed":
        for old_base in (base, old_second):
            for suffix in (".log", ".index", ".timeindex"):
                os.unlink(directory / f"{old_base:020d}{suffix}")
        os.replace(directory / f"{name}.log.cleaned", directory / f"{name}.log")
    recovered = PartitionLog(directory, cfg, Clock())
    offsets = [r.offset for r in all_records(recovered)]
    if stage == "before-marker":
        assert offsets == original
    else:
        assert offsets == [0, 1, 2] + [o for o in original if o >= end]
    assert not [n for n in os.listdir(directory) if n.endswith((".cleaned", ".cleaning"))]


# --- state machine -------------------------------------------------------------------------------------------


class LogModel(RuleBasedStateMachine):
    """The log against a list of (base offset, records) batches and a log start offset."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="logmodel-")
        self.clock = Clock()
        self.config = config(segment_bytes=400, index_interval_bytes=64)
        self.log = PartitionLog(self.directory, self.config, self.clock)
        self.batches: list[tuple[int, list[tuple[int, bytes]]]] = []
        self.log_start = 0
        self.end = 0

    def teardown(self) -> None:
        self.log.close_without_checkpoint()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _reopen(self) -> None:
        self.log = PartitionLog(self.directory, self.config, self.clock)

    @rule(count=st.integers(1, 5), codec=st.sampled_from([0, 1, 4]), size=st.integers(0, 60))
    def append(self, count, codec, size):
        value = bytes([self.end % 251]) * size
        produced = batch(count, ts=BASE_TS + self.end, value=value, compression=codec)
        if len(produced) > self.config.segment_bytes:  # no segment could hold it: refused, the log as it was
            with pytest.raises(KafkaError) as refused:
                self.log.append(produced)
            assert refused.value.code == ErrorCode.RECORD_LIST_TOO_LARGE
            return
        result = self.log.append(produced)
        assert result.base_offset == self.end
        self.batches.append((self.end, [(self.end + i, value) for i in range(count)]))
        self.end += count

    @rule()
    def reopen_after_clean_shutdown(self):
        self.log.close()
        self._reopen()

    @rule(garbage=st.binary(max_size=90))
    def crash(self, garbage):
        self.log.close_without_checkpoint()
        with open(log_files(self.directory, ".log")[-1], "ab") as f:
            f.write(garbage)  # a write torn by the crash
        self._reopen()

    @precondition(lambda self: self.end > 0)
    @rule(data=st.data())
    def truncate(self, data):
        offset = data.draw(st.integers(max(self.log_start - 2, 0), self.end + 1))
        self.log.truncate_to(offset)
        if offset >= self.end:
            return
        if offset <= self.log_start:
            self.batches, self.log_start, self.end = [], offset, offset
            return
        holder = next(base for base, records in self.batches if base <= offset <= records[-1][0])
        if holder < self.log_start:
            self.batches, self.end = [], self.log_start
        else:
            self.batches = [(base, records) for base, records in self.batches if base < holder]
            self.end = holder

    @precondition(lambda self: self.end > 0)
    @rule(data=st.data())
    def delete_records(self, data):
        offset = data.draw(st.integers(0, self.end))
        assert self.log.delete_records_before(offset) == max(self.log_start, offset)
        self.log_start = max(self.log_start, offset)
        pending = self.log.pending_durability()
        if pending is not None:  # what DeleteRecords waits for before it answers
            pending.result(10)

    @invariant()
    def matches_model(self):
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.log_start
        expected = [(o, v) for _, records in self.batches for o, v in records if o >= self.log_start]
        assert [(r.offset, r.value) for r in all_records(self.log)] == expected


LogModel.TestCase.settings = settings(max_examples=25, stateful_step_count=15, deadline=None)
test_log_state_machine = LogModel.TestCase
