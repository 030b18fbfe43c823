"""The history format writer: rows, rolling by time, atomic files, restart numbering."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from burrowpy.pipeline.history import (
    HISTORY_COLUMNS,
    HistoryWriter,
    history_arrow_schema,
    list_history_files,
    read_history,
)
from burrowpy.protocol import SetBrokerOffset, SetConsumerOffset, SetConsumerOwner, SetRecordTimes, in_runs


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def broker(offset: int, timestamp: int = 1_700_000_000_000, partition: int = 0) -> SetBrokerOffset:
    return SetBrokerOffset(
        cluster="c", topic="t", partition=partition, partition_count=4, offset=offset, timestamp=timestamp
    )


def commit(offset: int, order: int, timestamp: int = 1_700_000_000_500) -> SetConsumerOffset:
    return SetConsumerOffset(
        cluster="c", group="g", topic="t", partition=1, offset=offset, order=order, timestamp=timestamp
    )


def test_rows_follow_the_format(tmp_path):
    with HistoryWriter(tmp_path, roll_interval_s=60, clock=FakeClock()) as writer:
        writer.record(broker(100))
        writer.record(commit(90, order=7))
        writer.record(
            SetConsumerOwner(cluster="c", group="g", topic="t", partition=1, owner="h", client_id="i")
        )
    files = list_history_files(tmp_path)
    assert len(files) == 1
    table = pq.read_table(files[0])
    assert table.schema.equals(history_arrow_schema())
    assert table.column_names == list(HISTORY_COLUMNS)
    assert table.to_pylist() == [
        {
            "kind": "broker",
            "cluster": "c",
            "group": None,
            "topic": "t",
            "partition": 0,
            "offset": 100,
            "timestamp": 1_700_000_000_000,
            "order": None,
        },
        {
            "kind": "commit",
            "cluster": "c",
            "group": "g",
            "topic": "t",
            "partition": 1,
            "offset": 90,
            "timestamp": 1_700_000_000_500,
            "order": 7,
        },
    ]


def test_record_timestamps_read_for_lag_in_seconds_become_record_rows(tmp_path):
    with HistoryWriter(tmp_path, roll_interval_s=60, clock=FakeClock()) as writer:
        writer.record(SetRecordTimes("c", [("t", 1, 90, 1_699_999_000_000), ("t", 2, 5, None)]))
    assert read_history(tmp_path).to_pylist() == [
        {"kind": "record", "cluster": "c", "group": None, "topic": "t", "partition": 1, "offset": 90,
         "timestamp": 1_699_999_000_000, "order": None},
    ]  # a record that was gone when read says nothing


def test_nothing_is_written_before_the_roll_interval(tmp_path):
    clock = FakeClock()
    writer = HistoryWriter(tmp_path, roll_interval_s=60, clock=clock)
    writer.record(broker(1))
    clock.now += 59
    writer.record(broker(2))
    writer.flush()
    assert list_history_files(tmp_path) == []
    assert writer.buffered_rows == 2


def test_rolls_into_a_new_file_every_interval_with_names_sorted_by_time(tmp_path):
    clock = FakeClock()
    writer = HistoryWriter(tmp_path, roll_interval_s=60, clock=clock)
    for minute in range(3):
        writer.record(broker(minute * 10))
        clock.now += 30
        writer.record(broker(minute * 10 + 1))
        clock.now += 30
        writer.flush()  # an idle monitor rolls on its periodic flush
    files = list_history_files(tmp_path)
    assert len(files) == 3
    assert [pq.read_table(f).column("offset").to_pylist() for f in files] == [[0, 1], [10, 11], [20, 21]]
    assert files[0].name == "history-1700000000000-000000.parquet"
    assert files[1].name == "history-1700000060000-000001.parquet"


def test_a_full_buffer_is_written_at_once(tmp_path):
    writer = HistoryWriter(tmp_path, roll_interval_s=3600, clock=FakeClock(), max_buffered_rows=3)
    for offset in range(7):
        writer.record(broker(offset))
    assert [pq.read_table(f).num_rows for f in list_history_files(tmp_path)] == [3, 3]
    writer.close()
    assert read_history(tmp_path).column("offset").to_pylist() == list(range(7))


def test_force_flush_and_close(tmp_path):
    writer = HistoryWriter(tmp_path, roll_interval_s=3600, clock=FakeClock())
    writer.flush(force=True)
    assert list_history_files(tmp_path) == []  # nothing buffered, no empty file
    writer.record(commit(5, order=1))
    writer.flush(force=True)
    assert len(list_history_files(tmp_path)) == 1
    writer.close()
    with pytest.raises(ValueError):
        writer.record(commit(6, order=2))


def test_only_complete_files_are_visible(tmp_path):
    """A file being written has a hidden temporary name; readers list only renamed, complete files."""
    (tmp_path / ".history-1700000000000-000000.parquet.tmp").write_bytes(b"PAR1 half a file")
    assert list_history_files(tmp_path) == []
    assert read_history(tmp_path).num_rows == 0


def test_a_new_writer_continues_the_numbering(tmp_path):
    clock = FakeClock()
    with HistoryWriter(tmp_path, clock=clock) as first:
        first.record(broker(1))
    clock.now -= 100  # even if the clock went back, names stay unique
    with HistoryWriter(tmp_path, clock=clock) as second:
        second.record(broker(2))
    names = sorted(f.name for f in list_history_files(tmp_path))
    assert names == ["history-1699999900000-000001.parquet", "history-1700000000000-000000.parquet"]


def test_rejects_bad_settings(tmp_path):
    with pytest.raises(ValueError):
        HistoryWriter(tmp_path, roll_interval_s=0)
    with pytest.raises(ValueError):
        HistoryWriter(tmp_path, max_buffered_rows=0)


events = st.lists(
    st.one_of(
        st.builds(broker, offset=st.integers(0, 2**62), timestamp=st.integers(0, 2**41)),
        st.builds(
            commit, offset=st.integers(0, 2**62), order=st.integers(0, 2**62), timestamp=st.integers(0, 2**41)
        ),
    ),
    max_size=40,
)


@settings(deadline=None, max_examples=30)
@given(events=events, batch=st.integers(1, 10), in_runs_of_commits=st.booleans())
def test_every_event_is_read_back_in_order(tmp_path_factory, events, batch, in_runs_of_commits):
    """Also when the commits come in runs (SetConsumerOffsets), as the offsets-topic reader submits them."""
    directory = tmp_path_factory.mktemp("history")
    with HistoryWriter(directory, clock=FakeClock(), max_buffered_rows=batch) as writer:
        for event in in_runs(events) if in_runs_of_commits else events:
            writer.record(event)
    rows = read_history(directory).to_pylist()
    assert [(r["kind"], r["offset"], r["timestamp"], r["order"]) for r in rows] == [
        ("commit", e.offset, e.timestamp, e.order)
        if isinstance(e, SetConsumerOffset)
        else ("broker", e.offset, e.timestamp, None)
        for e in events
    ]
