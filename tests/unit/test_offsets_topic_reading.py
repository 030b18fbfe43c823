"""The consumer module's bookkeeping of one read of the offsets topic: positions, back-off, backfill ends."""

from __future__ import annotations

from burrowpy.coordinators.consumer_kafka import (
    EARLIEST,
    FETCH_MAX_BYTES,
    PARTITION_MAX_BYTES,
    RETRY_BACKOFF_S,
    Reading,
)


def test_partitions_in_a_fetch_or_backing_off_are_not_due():
    reading = Reading(positions={0: 10, 1: 20, 2: 30})
    reading.fetching.add(0)
    reading.back_off(1, now=100.0)
    assert reading.due(100.0) == [2]
    assert reading.next_retry() == 100.0 + RETRY_BACKOFF_S
    assert reading.due(100.0 + RETRY_BACKOFF_S) == [1, 2]


def test_positions_only_move_forward_and_progress_ends_a_back_off():
    reading = Reading(positions={0: EARLIEST})
    reading.back_off(0, now=5.0)
    reading.advance(0, 40)  # the log start, found by ListOffsets
    assert reading.positions == {0: 40} and reading.next_retry() is None
    reading.advance(0, 35)
    assert reading.positions == {0: 40}


def test_an_offset_out_of_range_reads_the_partition_again_from_its_start():
    reading = Reading(positions={0: 500})
    reading.restart(0)
    assert reading.positions == {0: EARLIEST}


def test_a_backfill_partition_is_done_at_its_end():
    reading = Reading(positions={0: EARLIEST, 1: EARLIEST}, ends={0: 10, 1: 3})
    reading.advance(1, 3)  # its log starts where the backfill ends: nothing to read
    reading.advance(0, 0)
    assert reading.positions == {0: 0}
    reading.advance(0, 12)  # the last batch went past the end
    assert reading.positions == {}
    reading.restart(0)
    assert reading.positions == {}


def test_a_partition_stuck_behind_a_large_batch_asks_for_more_bytes():
    reading = Reading(positions={0: 0})
    assert reading.fetch_size(0) == PARTITION_MAX_BYTES
    reading.too_small(0)
    assert reading.fetch_size(0) == 2 * PARTITION_MAX_BYTES
    for _ in range(20):
        reading.too_small(0)
    assert reading.fetch_size(0) == FETCH_MAX_BYTES


def test_partitions_that_got_records_are_fetched_last_next_time():
    """A leader fills a response in request order: served partitions go to the back so none starves."""
    reading = Reading(positions={0: 10, 1: 20, 2: 30})
    reading.advance(0, 15)
    reading.advance(2, 30)  # nothing new: keeps its place
    assert reading.due(0.0) == [1, 2, 0]
