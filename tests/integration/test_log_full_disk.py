"""A partition log on a disk that fills up (a small tmpfs, so this needs root): every write the disk refuses
is a KAFKA_STORAGE_ERROR with nothing appended, whether it fails writing a batch or starting a segment (on
the appending thread, or on the roller as the broker's appends roll), and once there is room again the log
takes writes and holds every batch it acknowledged, in order."""

from __future__ import annotations

import os

import pytest
from fault_harness import disk_filled, tmpfs

from broker.errors import ErrorCode, KafkaError
from broker.log.config import LogConfig
from broker.log.partition import PartitionLog, RollPending
from broker.protocol.records import Record, build_batch, decode_records_any

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")]


@pytest.mark.parametrize("roll_off_thread", [False, True], ids=["roll-inline", "roll-off-thread"])
def test_a_full_disk_refuses_writes_with_a_storage_error_and_loses_nothing(tmp_path, roll_off_thread):
    with tmpfs(tmp_path / "disk", "1m"):
        log = PartitionLog(tmp_path / "disk" / "p-0", LogConfig(segment_bytes=2048, index_interval_bytes=256))
        acknowledged: list[bytes] = []
        refused: list[KafkaError] = []
        sequence = 0

        def append() -> None:
            nonlocal sequence
            value = b"record-%06d-" % sequence + b"x" * 300
            batch = build_batch([Record(0, 1_700_000_000_000 + sequence, None, value)], producer_id=7,
                                producer_epoch=0, base_sequence=sequence)
            try:
                while True:
                    try:
                        log.append(batch, roll_off_thread=roll_off_thread)
                        break
                    except RollPending as pending:  # appended again once the roll is done, as the broker does
                        pending.rolled.result(30)
            except KafkaError as exc:
                refused.append(exc)
                return
            acknowledged.append(value)
            sequence += 1

        try:
            for _ in range(5):  # the next batch does not fit the segment: it needs a roll
                append()
            assert not refused and log.segment_count == 1
            with disk_filled(tmp_path / "disk"):
                for _ in range(10):
                    append()
                assert refused and all(e.code == ErrorCode.KAFKA_STORAGE_ERROR for e in refused), refused[:3]
                assert any("cannot roll" in e.message for e in refused), [e.message for e in refused[:5]]
            before = len(acknowledged)
            for _ in range(20):
                append()
            assert len(acknowledged) == before + 20
            stored = [r.value for r in decode_records_any(log.read(0, 1 << 30))]
            assert stored == acknowledged
        finally:
            log.close()
