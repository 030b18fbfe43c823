"""The broker-wide budget of the logs' open files: many partitions, each written and read in turn (segments
rolled, so that reads reach files other than the active one), stay under the budget however many there are,
and every read returns what was written; a Fetch region the budget has no room for comes back as bytes."""

from __future__ import annotations

import os

from log_harness import Clock, all_records, batch, config

from broker.log.descriptors import DescriptorBudget
from broker.log.partition import PartitionLog
from broker.protocol.types import FileRegion

BUDGET = 12
PARTITIONS = 60


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_many_partitions_written_and_read_stay_under_the_budget(tmp_path):
    budget = DescriptorBudget(BUDGET)
    before = open_files()
    logs = [PartitionLog(tmp_path / f"t-{p}", config(segment_bytes=2048, index_interval_bytes=64), Clock(),
                         descriptors=budget) for p in range(PARTITIONS)]
    try:
        most = 0
        for round_ in range(3):
            for number, log in enumerate(logs):
                log.append(batch(5, value=b"%d-%d" % (number, round_) * 40))
                most = max(most, open_files() - before)
                region = log.read_region(0, 1 << 20)
                assert isinstance(region, FileRegion)
                region.close()
        for number, log in enumerate(logs):
            records = all_records(log)
            assert [r.value for r in records] == [b"%d-%d" % (number, round_) * 40 for round_ in range(3)
                                                  for _ in range(5)]
            assert log.segment_count > 1
            most = max(most, open_files() - before)
        # one partition's own (its active segment and indexes, a rolled segment read) may pass it while in use
        assert most <= BUDGET + 4, most
        assert budget.open <= BUDGET
    finally:
        for log in logs:
            log.close()
    assert budget.open == 0


def test_a_read_past_the_budget_is_copied_and_a_region_counts_until_sent(tmp_path):
    budget = DescriptorBudget(2)
    logs = [PartitionLog(tmp_path / f"t-{p}", config(), Clock(), descriptors=budget) for p in range(2)]
    try:
        for log in logs:
            log.append(batch(3))
        held = logs[0].read_region(0, 1 << 20)  # a region not yet sent keeps its duplicate counted
        assert isinstance(held, FileRegion) and budget.open == 2
        copied = logs[1].read_region(0, 1 << 20)
        assert isinstance(copied, bytes) and copied == held.read()  # read() sends it: the loan ends
        assert budget.open <= 2
        assert isinstance(logs[1].read_region(0, 1 << 20), FileRegion)
    finally:
        for log in logs:
            log.close()
