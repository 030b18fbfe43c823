"""Idempotent producers on a partition log: retries, sequence gaps, epochs (Kafka 2.5+ semantics)."""

from __future__ import annotations

import pytest
from log_harness import Clock, all_records, batch, config

from broker.errors import ErrorCode, KafkaError
from broker.log.partition import PartitionLog

PID = 1000
INT32_MAX = 2**31 - 1


def send(log: PartitionLog, count: int, sequence: int, *, epoch: int = 0, pid: int = PID):
    return log.append(batch(count, producer=(pid, epoch, sequence)))


@pytest.fixture
def log(tmp_path):
    return PartitionLog(tmp_path / "p", config(segment_bytes=1 << 20), Clock())


# (description, batches sent before: (count, sequence, epoch), the batch under test, expected outcome)
# outcome: "ok", "dup:<base offset>", or an ErrorCode
CASES = [
    ("first batch of a new producer", [], (2, 0, 0), "ok"),
    ("unknown producer may start at any sequence", [], (2, 17, 0), "ok"),
    ("next in sequence", [(2, 0, 0)], (3, 2, 0), "ok"),
    ("retry of the last batch", [(2, 0, 0), (3, 2, 0)], (3, 2, 0), "dup:2"),
    ("retry of an older batch among the last five", [(1, s, 0) for s in range(5)], (1, 0, 0), "dup:0"),
    (
        "a batch older than the last five is out of order",
        [(1, s, 0) for s in range(6)],
        (1, 0, 0),
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    ),
    (
        "same first sequence, different length is not a retry",
        [(2, 0, 0)],
        (3, 0, 0),
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    ),
    ("gap in sequence", [(2, 0, 0)], (1, 3, 0), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("sequence going backwards", [(2, 0, 0), (2, 2, 0)], (1, 1, 0), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("older epoch is fenced", [(1, 0, 3)], (1, 1, 2), ErrorCode.INVALID_PRODUCER_EPOCH),
    ("older epoch retry is fenced too", [(1, 0, 2), (1, 0, 3)], (1, 0, 2), ErrorCode.INVALID_PRODUCER_EPOCH),
    ("new epoch starts at zero", [(4, 0, 0)], (1, 0, 1), "ok"),
    ("new epoch must start at zero", [(4, 0, 0)], (1, 4, 1), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("sequence wraps after INT32_MAX", [(2, INT32_MAX - 1, 0)], (2, 0, 0), "ok"),
    ("a multi-record batch continues the sequence", [(1, 10, 0)], (3, 11, 0), "ok"),
]


@pytest.mark.parametrize(
    "before, under_test, outcome", [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_idempotence_table(log, before, under_test, outcome):
    for count, sequence, epoch in before:
        assert not send(log, count, sequence, epoch=epoch).duplicate
    end_before = log.log_end_offset
    count, sequence, epoch = under_test
    if isinstance(outcome, ErrorCode):
        with pytest.raises(KafkaError) as err:
            send(log, count, sequence, epoch=epoch)
        assert err.value.code == outcome
        assert log.log_end_offset == end_before
    elif outcome.startswith("dup:"):
        result = send(log, count, sequence, epoch=epoch)
        assert result.duplicate
        assert (result.base_offset, result.last_offset) == (int(outcome[4:]), int(outcome[4:]) + count - 1)
        assert log.log_end_offset == end_before
    else:
        result = send(log, count, sequence, epoch=epoch)
        assert not result.duplicate
        assert result.base_offset == end_before


def test_producers_are_independent(log):
    send(log, 2, 0, pid=1)
    send(log, 2, 0, pid=2)
    assert send(log, 2, 0, pid=1).duplicate
    assert send(log, 1, 2, pid=2).base_offset == 4


def test_non_idempotent_batches_are_never_deduplicated(log):
    log.append(batch(2))
    assert not log.append(batch(2)).duplicate
    assert len(all_records(log)) == 4


def test_producer_whose_batches_were_deleted_starts_afresh(log):
    send(log, 2, 0)
    send(log, 2, 2)
    log.append(batch(1))
    log.delete_records_before(5)
    # The partition no longer knows the producer: any sequence is accepted (no UNKNOWN_PRODUCER_ID).
    assert not send(log, 1, 40).duplicate
    with pytest.raises(KafkaError) as err:
        send(log, 1, 42)
    assert err.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_producers_idle_for_producer_id_expiration_ms_are_forgotten(log):
    send(log, 1, 0)
    last = log.producer_state().get(PID).last_timestamp
    log.expire_producers(last + 59_999, max_idle_ms=60_000)
    assert send(log, 1, 0).duplicate  # not idle long enough: a retry is still known
    log.expire_producers(last + 60_000, max_idle_ms=60_000)
    assert log.producer_state().get(PID) is None
    assert not send(log, 1, 0).duplicate


def test_truncation_rebuilds_producer_state(log):
    send(log, 2, 0)
    send(log, 2, 2)
    log.truncate_to(2)
    # The second batch is gone, so re-sending it is a new append, not a retry.
    result = send(log, 2, 2)
    assert not result.duplicate and result.base_offset == 2
