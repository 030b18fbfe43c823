"""Log compaction: latest record per key with original offsets, tombstone horizons, safe swaps."""

from __future__ import annotations

import os
import threading
import time

import pytest
from log_harness import BASE_TS, Clock, all_records, config, keyed_batch

from broker.log.cleaner import CleanerSettings, Throttler, clean_partition
from broker.log.manager import LogManager
from broker.log.partition import PartitionLog
from broker.protocol.records import BatchHeader, Record, build_batch, iter_batches

DAY_MS = 24 * 3600 * 1000


def compacted_log(tmp_path, **settings) -> PartitionLog:
    cfg = config(cleanup_policy="compact", segment_bytes=settings.pop("segment_bytes", 400), **settings)
    return PartitionLog(tmp_path / "p", cfg, Clock())


def write_history(
    log: PartitionLog, rounds: int, keys: int, *, compression: int = 0
) -> dict[bytes, tuple[int, bytes]]:
    """Each round writes every key once; returns key -> (offset, value) of the latest write."""
    latest = {}
    for round_ in range(rounds):
        pairs = [(b"key-%d" % k, b"round-%d-key-%d" % (round_, k)) for k in range(keys)]
        result = log.append(keyed_batch(pairs, ts=BASE_TS + round_, compression=compression))
        for i, (key, value) in enumerate(pairs):
            latest[key] = (result.base_offset + i, value)
    return latest


def active_start(log: PartitionLog) -> int:
    return log._segments[-1].base_offset


@pytest.mark.parametrize("compression", [0, 1, 4])
def test_keeps_latest_record_per_key_with_original_offsets(tmp_path, compression):
    log = compacted_log(tmp_path)
    write_history(log, rounds=30, keys=3, compression=compression)
    before = all_records(log)
    boundary = active_start(log)
    assert log.segment_count > 3
    end = log.log_end_offset
    assert clean_partition(log, BASE_TS)
    after = all_records(log)
    cleaned = [r for r in after if r.offset < boundary]
    # In the cleaned part, each key appears once: its latest write before the active segment.
    expected = {}
    for record in before:
        if record.offset < boundary:
            expected[record.key] = record
    assert sorted(cleaned, key=lambda r: r.offset) == sorted(expected.values(), key=lambda r: r.offset)
    assert [r for r in after if r.offset >= boundary] == [r for r in before if r.offset >= boundary]
    assert log.log_end_offset == end
    headers = [h for _, h in iter_batches(log.read(0, 1 << 20))]
    assert all(h.compression == compression for h in headers)
    assert [r.offset for r in after] == sorted(r.offset for r in after)
    # Nothing is dirty any more: a second pass does nothing.
    assert not clean_partition(log, BASE_TS)
    assert all_records(log) == after
    log.close()
    assert all_records(PartitionLog(tmp_path / "p", log.config, Clock())) == after


def test_active_segment_is_never_touched(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=1 << 20)
    write_history(log, rounds=10, keys=2)
    assert log.segment_count == 1
    assert not clean_partition(log, BASE_TS)
    assert len(all_records(log)) == 20


def test_min_compaction_lag_keeps_young_records_as_written(tmp_path):
    log = compacted_log(tmp_path, min_compaction_lag_ms=60_000)
    write_history(log, rounds=10, keys=2)  # timestamps BASE_TS .. BASE_TS + 9
    assert log.segment_count > 2
    assert not clean_partition(log, BASE_TS + 60_000)  # every record younger than the lag
    assert len(all_records(log)) == 20
    assert clean_partition(log, BASE_TS + 60_009)  # all old enough now (the active segment is never cleaned)
    assert len(all_records(log)) < 20


@pytest.mark.parametrize(("settings", "cleans_again"), [
    ({}, False),  # min.cleanable.dirty.ratio 0.5: a little new data waits for more
    ({"min_cleanable_dirty_ratio": 0.0}, True),
    ({"max_compaction_lag_ms": 1}, True),  # ... unless it has waited longer than max.compaction.lag.ms
])
def test_dirty_ratio_and_max_compaction_lag(tmp_path, settings, cleans_again):
    log = compacted_log(tmp_path, **settings)
    for key in range(60):  # sixty keys, one small batch each: several segments of records that all stay
        log.append(keyed_batch([(b"key-%d" % key, b"value")], ts=BASE_TS + key))
    clean_partition(log, BASE_TS + 100)  # everything is new, dirty ratio 1: a pass goes through it all
    assert log.cleaned_through_offset == log._segments[-1].base_offset
    clean_size = sum(segment.size for segment in log._segments[:-1])
    for round_ in range(15):  # a little more, some of it rolled out of the active segment
        log.append(keyed_batch([(b"key-0", b"late-%d" % round_)], ts=BASE_TS + 100 + round_))
    dirty_size = sum(segment.size for segment in log._segments[:-1]) - clean_size
    assert 0 < dirty_size < clean_size  # a dirty share well below one half
    assert clean_partition(log, BASE_TS + 200) is cleans_again


def test_reads_and_offsets_stay_consistent_after_cleaning(tmp_path):
    log = compacted_log(tmp_path, index_interval_bytes=50)
    write_history(log, rounds=40, keys=4)
    clean_partition(log, BASE_TS)
    survivors = all_records(log)
    for offset in range(log.log_end_offset):
        data = log.read(offset, 1)
        header = BatchHeader.parse(data)
        assert header.last_offset >= offset  # the batch holding the offset, or the next one left
        assert [r.offset for r in survivors if r.offset >= offset][0] >= header.base_offset
    assert log.offset_for_timestamp(BASE_TS + 39) is not None
    assert log.append(keyed_batch([(b"key-0", b"new")])).base_offset == 160


def test_tombstones_are_kept_until_the_delete_horizon(tmp_path):
    log = compacted_log(tmp_path, delete_retention_ms=DAY_MS, segment_bytes=300)
    log.append(keyed_batch([(b"a", b"1"), (b"b", b"1")]))
    log.append(keyed_batch([(b"a", None)]))  # delete a
    for i in range(8):
        log.append(keyed_batch([(b"filler-%d" % i, b"x" * 40)]))
    assert log.segment_count > 2

    assert clean_partition(log, BASE_TS)
    records = {r.key: r for r in all_records(log)}
    assert records[b"a"].value is None and records[b"a"].offset == 2
    tombstone_batch = BatchHeader.parse(log.read(2, 1))
    assert tombstone_batch.delete_horizon_ms == BASE_TS + DAY_MS
    assert records[b"a"].timestamp == BASE_TS  # the record keeps its own timestamp
    assert log.next_tombstone_expiry_ms == BASE_TS + DAY_MS

    assert not clean_partition(log, BASE_TS + DAY_MS - 1)
    assert b"a" in {r.key for r in all_records(log)}
    assert clean_partition(log, BASE_TS + DAY_MS)
    keys = [r.key for r in all_records(log)]
    assert b"a" not in keys and b"b" in keys
    assert log.next_tombstone_expiry_ms is None


def test_records_without_key_are_dropped(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=200)
    # A follower copies what the leader has, keyless records included; the cleaner drops them.
    keyless = build_batch([Record(0, BASE_TS, None, b"orphan"), Record(1, BASE_TS, b"k", b"v")])
    log.append_replicated(keyless)
    for i in range(6):
        log.append(keyed_batch([(b"f%d" % i, b"y" * 40)]))
    clean_partition(log, BASE_TS)
    assert [r.key for r in all_records(log)][:2] == [b"k", b"f0"]


def test_last_batch_of_an_idempotent_producer_survives_as_an_empty_batch(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=300)
    pid_batch = build_batch(
        [Record(0, BASE_TS, b"dup", b"old")], producer_id=9, producer_epoch=0, base_sequence=0
    )
    log.append(pid_batch)
    for i in range(8):
        log.append(keyed_batch([(b"dup", b"newer-%d" % i)]))
    assert clean_partition(log, BASE_TS)
    first = BatchHeader.parse(log.read(0, 1))
    assert (first.base_offset, first.records_count, first.producer_id, first.base_sequence) == (0, 0, 9, 0)
    log.close()
    reopened = PartitionLog(tmp_path / "p", log.config, Clock())
    assert reopened.append(pid_batch).duplicate  # the retry is still recognised


def test_swap_is_refused_when_the_log_changed(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=300)
    write_history(log, rounds=20, keys=2)
    version, segments, _ = log.cleaning_snapshot()
    cleaned = log.create_cleaned_segment(segments[0].base_offset)
    log.delete_records_before(segments[1].base_offset)
    assert log.replace_segments(version, segments[:1], cleaned) is None
    cleaned.delete()
    assert not [name for name in os.listdir(tmp_path / "p") if name.endswith(".cleaned")]


def test_cleaning_in_a_thread_while_appending_and_reading(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=600)
    write_history(log, rounds=50, keys=5)
    stop = threading.Event()
    errors: list[BaseException] = []

    def clean_repeatedly() -> None:
        try:
            while not stop.is_set():
                clean_partition(log, BASE_TS)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    cleaner = threading.Thread(target=clean_repeatedly)
    cleaner.start()
    latest = {}
    try:
        for round_ in range(60):
            pairs = [(b"key-%d" % (round_ % 5), b"live-%d" % round_)]
            result = log.append(keyed_batch(pairs))
            latest[pairs[0][0]] = (result.base_offset, pairs[0][1])
            offsets = [r.offset for r in all_records(log)]
            assert offsets == sorted(set(offsets))
    finally:
        stop.set()
        cleaner.join()
    assert not errors, errors
    clean_partition(log, BASE_TS)
    found = {r.key: (r.offset, r.value) for r in all_records(log)}
    assert found == latest


def test_manager_compacts_only_compacted_topics(tmp_path):
    logs = LogManager(tmp_path / "data", {"segment.bytes": 300})
    logs.create_topic("compacted", 2, {"cleanup.policy": "compact"})
    logs.create_topic("plain", 1, {})
    for partition_log in (
        logs.get_log("compacted", 0),
        logs.get_log("compacted", 1),
        logs.get_log("plain", 0),
    ):
        write_history(partition_log, rounds=20, keys=2)
    assert logs.run_compaction(BASE_TS) == 2
    assert len(all_records(logs.get_log("plain", 0))) == 40
    assert len(all_records(logs.get_log("compacted", 0))) < 40
    logs.close()


def test_batches_that_lose_nothing_are_copied_unchanged(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=300)
    for i in range(12):
        log.append(keyed_batch([(b"unique-%d" % i, b"z" * 40)], compression=1))
    before = log.read(0, 1 << 20)
    segments_before = log.segment_count
    log.config = config(cleanup_policy="compact", segment_bytes=10_000)  # AlterConfigs: bigger segments
    clean_partition(log, BASE_TS)
    # Small segments were merged, but every batch is byte for byte what the producer wrote.
    assert log.segment_count < segments_before
    assert log.read(0, 1 << 20) == before


def test_a_small_dedupe_buffer_splits_a_pass_with_the_same_result(tmp_path):
    """Kafka's offset map: 24 bytes a key at the load factor; a dirty section with more keys is cleaned up to
    the last offset mapped, and the next pass goes on from there."""
    settings = {"min_cleanable_dirty_ratio": 0}
    whole = compacted_log(tmp_path / "whole", **settings)
    split = compacted_log(tmp_path / "split", **settings)
    for log in (whole, split):
        write_history(log, rounds=8, keys=6)
    assert clean_partition(whole, BASE_TS)
    assert not clean_partition(whole, BASE_TS)
    four_keys = CleanerSettings(dedupe_buffer_size=4 * 24, load_factor=1.0)
    assert four_keys.max_keys == 4
    boundary = active_start(split)
    ends = [0]
    while True:
        clean_partition(split, BASE_TS, four_keys)
        if split.cleaned_through_offset == ends[-1]:
            break
        ends.append(split.cleaned_through_offset)
        assert len(ends) < 100
    # the first pass maps the first four keys and ends after them; every pass moves on
    assert ends[1] == 4
    assert len(ends) > 5 and ends == sorted(set(ends))
    assert split.cleaned_through_offset == boundary
    assert all_records(split) == all_records(whole)


def test_throttle_makes_a_pass_take_its_bytes_over_the_rate(tmp_path):
    """Kafka's Throttler at N bytes/s: a pass that reads and writes M bytes takes M/N seconds."""
    log = compacted_log(tmp_path, segment_bytes=4000)
    write_history(log, rounds=40, keys=4)
    stored = sum(segment.size for segment in log._segments[:-1])
    now = [0.0]
    observed = []
    throttler = Throttler(1000.0, check_interval_s=0.0, clock=lambda: now[0],
                          sleep=lambda seconds: now.__setitem__(0, now[0] + seconds))

    def counting(nbytes: int) -> None:
        observed.append(nbytes)
        throttler(nbytes)

    assert clean_partition(log, BASE_TS, CleanerSettings(throttler=counting))
    # the dirty segments are read twice (the key map, the rewrite) and what is kept is written
    assert sum(observed) > 2 * stored
    assert now[0] == pytest.approx(sum(observed) / 1000.0)


def test_throttle_on_a_real_clock(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=4000)
    write_history(log, rounds=40, keys=4)
    stored = sum(segment.size for segment in log._segments[:-1])
    rate = 2 * stored / 0.5  # reading the dirty section twice alone takes half a second
    # every observation is checked: with a longer interval, a pass whose reads all come within the
    # first interval (a fast disk, a large read buffer) is never slowed, as in Kafka
    started = time.monotonic()
    assert clean_partition(log, BASE_TS, CleanerSettings(throttler=Throttler(rate, check_interval_s=0.0)))
    took = time.monotonic() - started
    assert 0.45 <= took < 5


def test_reads_are_bounded_by_the_io_buffer(tmp_path):
    """log.cleaner.io.buffer.size: half of it is the read buffer (Kafka's split), a batch larger than
    that is read on its own."""
    log = compacted_log(tmp_path, segment_bytes=4000)
    write_history(log, rounds=40, keys=4)
    batch = max(header.size for _, header in iter_batches(log.read(0, 1 << 20)))
    for io_buffer, largest_read in ((4 * batch, 2 * batch), (0, batch), (1 << 20, 3000)):
        reads: list[int] = []
        clean_log = compacted_log(tmp_path / str(io_buffer), segment_bytes=4000)
        write_history(clean_log, rounds=40, keys=4)
        assert clean_partition(clean_log, BASE_TS,
                               CleanerSettings(io_buffer_size=io_buffer, throttler=reads.append))
        if io_buffer == 1 << 20:
            assert max(reads) >= largest_read  # whole segments at once
        else:
            assert max(reads) <= largest_read


def test_the_swap_makes_its_files_durable_outside_the_logs_lock(tmp_path, monkeypatch):
    """The directory fsyncs of a swap (~20 ms each on a loaded disk) leave the log's lock free: appends and
    reads of the partition, the event loop's among them, do not wait for them."""
    from broker.log import compaction_swap as swap_module

    log = compacted_log(tmp_path)
    write_history(log, rounds=30, keys=3)
    lock_free_during_fsync: list[bool] = []
    real_fsync_directory = swap_module.fsync_directory
    cleaning_thread = threading.current_thread()

    def watched(directory: str) -> None:
        if threading.current_thread() is not cleaning_thread:  # the background's fsyncs of rolled segments
            real_fsync_directory(directory)
            return

        def try_lock() -> None:
            # held by the cleaning thread (waiting on this one) it never comes; the background's holds are short
            taken = log._lock.acquire(timeout=1.0)
            if taken:
                log._lock.release()
            lock_free_during_fsync.append(taken)

        other = threading.Thread(target=try_lock)
        other.start()
        other.join()
        real_fsync_directory(directory)

    monkeypatch.setattr(swap_module, "fsync_directory", watched)
    assert clean_partition(log, BASE_TS)
    monkeypatch.undo()
    assert lock_free_during_fsync and all(lock_free_during_fsync)
    log.close()
