"""Transactions in the partition log: the last stable offset, aborted-transaction indexes (``.txnindex``)
through restarts and crashes, retention and compaction of aborted records."""

from __future__ import annotations

import pytest
from log_harness import BASE_TS, Clock, all_records, config

from broker.errors import KafkaError
from broker.log.cleaner import clean_partition
from broker.log.partition import PartitionLog
from broker.log.txn_index import ENTRY, AbortedTxn, read_entries
from broker.protocol.records import Record, build_batch, build_marker_batch, marker_committed


def txn_batch(pid: int, sequence: int, values: list[bytes], *, epoch: int = 0, key: bytes = b"k") -> bytes:
    records = [Record(i, BASE_TS + i, key, value, []) for i, value in enumerate(values)]
    return build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=sequence, is_transactional=True)


def marker(pid: int, committed: bool, epoch: int = 0) -> bytes:
    return build_marker_batch(pid, epoch, committed, coordinator_epoch=0, timestamp_ms=BASE_TS)


def plain(value: bytes, key: bytes = b"k") -> bytes:
    return build_batch([Record(0, BASE_TS, key, value, [])])


def values(log: PartitionLog) -> list[bytes]:
    return [r.value for r in all_records(log)]


def test_markers_are_control_batches_clients_cannot_write(tmp_path):
    log = PartitionLog(tmp_path / "p", config(), Clock())
    assert marker_committed(marker(7, True)) is True and marker_committed(marker(7, False)) is False
    with pytest.raises(KafkaError, match="control batches"):
        log.append(marker(7, True))
    log.append(marker(7, True), from_coordinator=True)  # a marker without an open transaction is harmless
    assert log.log_end_offset == 1 and values(log) == []


def test_a_producer_remembers_the_coordinator_epoch_of_its_last_marker_through_a_restart(tmp_path):
    """What DescribeProducers reports: -1 before any marker, then the epoch of the coordinator that wrote the
    last one, and the first offset of an open transaction."""
    log = PartitionLog(tmp_path / "p", config(), Clock())
    log.append(txn_batch(3, 0, [b"a"]))
    assert [(e.coordinator_epoch, start) for e, start in log.producer_state().active()] == [(-1, 0)]
    log.append(build_marker_batch(3, 0, True, coordinator_epoch=5, timestamp_ms=BASE_TS), from_coordinator=True)
    log.append(txn_batch(3, 1, [b"b"]))
    assert [(e.coordinator_epoch, start) for e, start in log.producer_state().active()] == [(5, 2)]
    log.close()
    reopened = PartitionLog(tmp_path / "p", config(), Clock())
    assert [(e.coordinator_epoch, start) for e, start in reopened.producer_state().active()] == [(5, 2)]
    reopened.close()


def test_the_last_stable_offset_is_the_first_offset_of_the_oldest_open_transaction(tmp_path):
    log = PartitionLog(tmp_path / "p", config(), Clock())
    log.append(plain(b"before"))
    log.append(txn_batch(1, 0, [b"a1", b"a2"]))  # offsets 1-2
    log.append(txn_batch(2, 0, [b"b1"]))  # offset 3
    log.append(plain(b"after"))  # offset 4
    assert (log.high_watermark, log.last_stable_offset) == (5, 1)
    log.append(marker(2, committed=True), from_coordinator=True)  # offset 5
    assert log.last_stable_offset == 1  # producer 1 is still open
    log.append(marker(1, committed=False), from_coordinator=True)  # offset 6
    assert log.last_stable_offset == log.high_watermark == 7
    assert log.aborted_transactions(0, 7) == [AbortedTxn(1, 1, 6, 7)]
    assert log.aborted_transactions(7, 10) == []  # read from after its marker: nothing to skip
    assert log.aborted_transactions(0, 1) == []  # read below its first offset: nothing to skip


def test_aborted_transactions_survive_clean_and_unclean_restarts(tmp_path):
    directory = tmp_path / "p"
    log = PartitionLog(directory, config(segment_bytes=300), Clock())
    for round_ in range(6):
        pid = 10 + round_
        log.append(txn_batch(pid, 0, [b"x" * 40, b"y" * 40]))
        log.append(marker(pid, committed=round_ % 2 == 0), from_coordinator=True)
    aborted = log.aborted_entries()
    assert [e.producer_id for e in aborted] == [11, 13, 15] and log.segment_count > 2
    on_disk = sorted(directory.glob("*.txnindex"))
    assert sum(len(read_entries(str(path))) for path in on_disk) == 3
    assert all(path.stat().st_size % ENTRY.size == 0 for path in on_disk)
    log.close()

    reopened = PartitionLog(directory, config(segment_bytes=300), Clock())
    assert reopened.aborted_entries() == aborted
    # a crash: no clean-shutdown marker, the active segment's index file gone too; replay rebuilds it
    reopened.append(txn_batch(20, 0, [b"z"]))
    reopened.append(marker(20, committed=False), from_coordinator=True)
    expected = reopened.aborted_entries()
    active = reopened._segments[-1]
    assert read_entries(active.txn_index_path)  # the new entry went to the active segment's file
    reopened.close_without_checkpoint()
    (directory / active.txn_index_path).unlink()
    crashed = PartitionLog(directory, config(segment_bytes=300), Clock())
    assert crashed.aborted_entries() == expected
    assert read_entries(active.txn_index_path) == expected[-1:]  # and its file is written again


def test_an_open_transaction_survives_a_restart(tmp_path):
    directory = tmp_path / "p"
    log = PartitionLog(directory, config(), Clock())
    log.append(plain(b"before"))
    log.append(txn_batch(3, 0, [b"open"]))
    log.close()
    reopened = PartitionLog(directory, config(), Clock())
    assert reopened.last_stable_offset == 1
    reopened.append(marker(3, committed=False), from_coordinator=True)
    assert reopened.last_stable_offset == 3
    assert reopened.aborted_entries() == [AbortedTxn(3, 1, 2, 3)]


def test_truncation_forgets_markers_it_removes(tmp_path):
    log = PartitionLog(tmp_path / "p", config(), Clock())
    log.append(txn_batch(4, 0, [b"a"]))
    log.append(marker(4, committed=False), from_coordinator=True)
    assert len(log.aborted_entries()) == 1
    log.truncate_to(1)  # the marker goes: the transaction is open again
    assert log.aborted_entries() == [] and log.last_stable_offset == 0


def test_compaction_removes_aborted_records_and_keeps_committed_ones(tmp_path):
    log = PartitionLog(tmp_path / "p", config(cleanup_policy="compact", segment_bytes=200), Clock())
    log.append(txn_batch(1, 0, [b"committed-old"], key=b"a"))
    log.append(marker(1, committed=True), from_coordinator=True)
    log.append(txn_batch(2, 0, [b"aborted-new"], key=b"a"))  # newer, but aborted: must not win
    log.append(marker(2, committed=False), from_coordinator=True)
    log.append(txn_batch(5, 0, [b"open"], key=b"b"))  # an open transaction: its segment waits
    for i in range(6):
        log.append(plain(b"filler-%d" % i, key=b"f%d" % i))
    assert clean_partition(log, BASE_TS)
    kept = values(log)
    assert b"committed-old" in kept and b"aborted-new" not in kept and b"open" in kept
    assert log.aborted_entries()[0].producer_id == 2  # the index of the cleaned segment came along
