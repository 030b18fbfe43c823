"""Share groups through the window rules (burrowpy.evaluator.share): readings of start offsets and lags."""

from __future__ import annotations

from burrowpy.evaluator.share import (
    InFlightCounts,
    ShareGroupMember,
    ShareGroupWindows,
    SharePartitionOffset,
    share_lag,
)
from burrowpy.protocol import Status

T0 = 1_700_000_000_000  # ms


def feed(windows: ShareGroupWindows, readings: list[tuple[int, int]], log_end: int, *, group: str = "g",
         start_ms: int = T0, step_ms: int = 1000) -> int:
    """One reading per second of partition t/0 at (start offset, lag); the time of the last, in ms."""
    now = start_ms
    for number, (start, lag) in enumerate(readings):
        now = start_ms + number * step_ms
        windows.observe(group, "Stable", [SharePartitionOffset("t", 0, start, lag)], {("t", 0): log_end}, now)
    return now


def test_a_moving_start_offset_is_ok_and_a_still_one_with_records_waiting_stalls():
    windows = ShareGroupWindows("c", intervals=4)
    last = feed(windows, [(10, 8), (20, 6), (30, 6), (40, 5)], 45)
    status = windows.evaluate("g", last / 1000)
    assert status is not None and status.status.status == Status.OK
    last = feed(windows, [(40, 8), (40, 9), (40, 10), (40, 11)], 51, start_ms=last + 1000)
    status = windows.evaluate("g", last / 1000)
    assert status is not None
    assert [p.status for p in status.status.partitions] == [Status.STALL]
    assert status.status.status == Status.ERR and status.status.totallag == 11


def test_a_still_start_offset_with_nothing_waiting_is_ok():
    windows = ShareGroupWindows("c", intervals=3)
    last = feed(windows, [(40, 0), (40, 0), (40, 0)], 40)
    assert windows.evaluate("g", last / 1000).status.status == Status.OK


def test_readings_that_stop_arriving_make_stop():
    windows = ShareGroupWindows("c", intervals=3)
    last = feed(windows, [(10, 5), (20, 5), (30, 5)], 35)
    status = windows.evaluate("g", last / 1000 + 60)
    assert [p.status for p in status.status.partitions] == [Status.STOP]


def test_lag_is_kafkas_when_given_else_log_end_minus_start():
    assert share_lag(SharePartitionOffset("t", 0, 10, 3), 50) == 3
    assert share_lag(SharePartitionOffset("t", 0, 10, None), 50) == 40
    assert share_lag(SharePartitionOffset("t", 0, 10, -1), 50) == 40
    assert share_lag(SharePartitionOffset("t", 0, 10, None), None) == 0


def test_the_json_holds_start_offset_log_end_and_state():
    windows = ShareGroupWindows("c", intervals=2)
    last = feed(windows, [(10, 2), (12, 0)], 12)
    body = windows.evaluate("g", last / 1000).to_json()
    assert body["group_state"] == "Stable" and body["cluster"] == "c" and body["group"] == "g"
    [partition] = body["partitions"]
    assert (partition["start_offset"], partition["log_end_offset"], partition["current_lag"]) == (12, 12, 0)
    assert body["maxlag"]["start_offset"] == 12 and partition["complete"] == 1.0


def test_partitions_without_state_and_groups_kafka_no_longer_lists_go():
    windows = ShareGroupWindows("c", intervals=2)
    windows.observe("g", "Stable", [SharePartitionOffset("t", 0, 5, 0), SharePartitionOffset("t", 1, -1, None)],
                    {}, T0)
    assert [p.partition for p in windows.evaluate("g", T0 / 1000).status.partitions] == [0]
    windows.observe("g", "Stable", [SharePartitionOffset("t", 1, 7, 0)], {}, T0 + 1000)
    assert [p.partition for p in windows.evaluate("g", T0 / 1000 + 1).status.partitions] == [1]
    windows.observe("h", "Empty", [], {}, T0)
    assert windows.groups() == ["g", "h"]
    windows.retain(["h"])
    assert windows.groups() == ["h"] and windows.evaluate("g", T0 / 1000) is None
    assert windows.evaluate("h", T0 / 1000).status.status == Status.OK


def test_each_share_partition_names_its_members_as_owners_and_the_status_counts_them():
    windows = ShareGroupWindows("c", intervals=2)
    both = frozenset({("t", 0), ("t", 1)})
    members = [ShareGroupMember("m2", "worker-2", "/10.0.0.2", frozenset({("t", 0)})),
               ShareGroupMember("m1", "worker-1", "/10.0.0.1", both)]
    readings = [SharePartitionOffset("t", 0, 5, 0), SharePartitionOffset("t", 1, 7, 3)]
    windows.observe("g", "Stable", readings, {}, T0, members)
    body = windows.evaluate("g", T0 / 1000).to_json()
    assert body["members"] == 2
    first, second = body["partitions"]
    # several members share a partition in a share group: Burrow's fields list them all, comma-separated
    assert (first["owner"], first["client_id"]) == ("/10.0.0.1,/10.0.0.2", "worker-1,worker-2")
    assert [owner["member_id"] for owner in first["owners"]] == ["m1", "m2"]
    assert second["owners"] == [{"member_id": "m1", "client_id": "worker-1", "host": "/10.0.0.1"}]
    assert body["maxlag"]["owner"] == "/10.0.0.1"
    windows.observe("g", "Empty", readings, {}, T0 + 1000)  # the consumers left
    body = windows.evaluate("g", T0 / 1000 + 1).to_json()
    assert body["members"] == 0 and all(p["owners"] == [] and p["owner"] == "" for p in body["partitions"])


def test_a_log_end_polled_before_the_start_offset_moved_past_it_is_the_start_offset():
    windows = ShareGroupWindows("c", intervals=2)
    windows.observe("g", "Stable", [SharePartitionOffset("t", 0, 52, None)], {("t", 0): 50}, T0)
    [partition] = windows.evaluate("g", T0 / 1000).to_json()["partitions"]
    assert (partition["start_offset"], partition["log_end_offset"], partition["current_lag"]) == (52, 52, 0)


def test_in_flight_counts_show_per_partition_and_are_null_while_unknown():
    windows = ShareGroupWindows("c", intervals=2)
    readings = [SharePartitionOffset("t", 0, 10, 5), SharePartitionOffset("t", 1, 3, 0)]
    ends = {("t", 0): 15, ("t", 1): 3}
    windows.observe("g", "Stable", readings, ends, T0)
    assert [p["in_flight"] for p in windows.evaluate("g", T0 / 1000).to_json()["partitions"]] == [None, None]
    # every endpoint answered: a share-partition none reports has nothing acquired
    windows.observe("g", "Stable", readings, ends, T0 + 1000, in_flight=InFlightCounts({("g", "t", 0): 4}, True))
    status = windows.evaluate("g", T0 / 1000 + 1)
    body = status.to_json()
    assert [p["in_flight"] for p in body["partitions"]] == [4, 0] and body["maxlag"]["in_flight"] == 4
    assert [p.to_json()["in_flight"] for p in status.status.partitions] == [4, 0]
    # an endpoint failed: counts only where one was given
    windows.observe("g", "Stable", readings, ends, T0 + 2000, in_flight=InFlightCounts({("g", "t", 0): 2}, False))
    assert [p["in_flight"] for p in windows.evaluate("g", T0 / 1000 + 2).to_json()["partitions"]] == [2, None]
    assert "in_flight" not in windows.evaluate("g", T0 / 1000 + 2).status.partitions[1].to_json()
