"""PartitionLog under any sequence of appends, truncations, flushes and clean restarts (hypothesis): every offset
reads back from the batch that holds it, the indexes point at batch starts, and after a clean close the index
files hold exactly the entries the log had in memory (entries held back from their files included)."""

from __future__ import annotations

import shutil
import struct
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from log_harness import BASE_TS, Clock, batch, config

from broker.log.partition import PartitionLog
from broker.protocol.records import BatchHeader
from tests.examples import examples

# segments of about 80 batches, an index entry for every batch: each segment's index has groups of entries
# written to its file and entries held in memory
CONFIG = config(segment_bytes=8_000, index_interval_bytes=50)

OPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4), st.integers(1, 12)),
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("restart")),
), min_size=1, max_size=12)


def index_entries_on_disk(path: str, entry: struct.Struct) -> list[tuple[int, int]]:
    with open(path, "rb") as file:
        return list(entry.iter_unpack(file.read()))


def check_reads(log: PartitionLog) -> None:
    for offset in range(log.log_start_offset, log.log_end_offset):
        header = BatchHeader.parse(log.read(offset, 1)[:61])
        assert header.base_offset <= offset <= header.base_offset + header.last_offset_delta, offset


def check_indexes(log: PartitionLog) -> None:
    for segment in log._segments:
        for offset, position in segment.offset_index.entries():
            assert BatchHeader.parse(segment.read(position, 61)).base_offset == offset


def in_memory(log: PartitionLog) -> list[tuple[list, list]]:
    return [(segment.offset_index.entries(), segment.time_index.entries()) for segment in log._segments]


def on_disk(log: PartitionLog) -> list[tuple[list, list]]:
    result = []
    for segment in log._segments:
        base = segment.base_offset
        offsets = [(base + rel, pos) for rel, pos in index_entries_on_disk(segment.offset_index.path,
                                                                            struct.Struct(">ii"))]
        times = [(ts, base + rel) for ts, rel in index_entries_on_disk(segment.time_index.path, struct.Struct(">qi"))]
        result.append((offsets, times))
    return result


@settings(max_examples=examples(60, 20), deadline=None)
@given(OPS)
def test_reads_and_index_files_hold_whatever_the_operations(ops):
    directory = Path(tempfile.mkdtemp(prefix="log-properties-"))
    clock = Clock()
    log = PartitionLog(directory / "p", CONFIG, clock)
    appended = 0
    try:
        for op in ops:
            if op[0] == "append":
                _, batches, records = op
                for _ in range(batches * 10):
                    log.append(batch(records, ts=BASE_TS + appended), now_ms=clock.now_ms)
                    appended += records
            elif op[0] == "truncate":
                target = log.log_start_offset + int(op[1] * (log.log_end_offset - log.log_start_offset))
                log.truncate_to(target)
                assert log.log_end_offset <= target
            elif op[0] == "flush":
                log.flush()
            else:
                before = in_memory(log)
                end = log.log_end_offset
                log.close()
                closed = in_memory(log)  # closing may add the active segment's largest timestamp to its time index
                for (offsets, times), (offsets_closed, times_closed) in zip(before, closed, strict=True):
                    assert offsets_closed == offsets and times_closed[:len(times)] == times
                assert on_disk(log) == closed  # the held entries reached the files, the cut ones did not
                log = PartitionLog(directory / "p", CONFIG, clock)
                assert log.log_end_offset == end
                assert in_memory(log) == closed
            check_reads(log)
            check_indexes(log)
    finally:
        log.close()
        shutil.rmtree(directory)
