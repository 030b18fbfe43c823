"""Lag in seconds: how old the oldest record a group has not consumed yet is.

The definition (the same for the daemon and the Spark pipeline): ``now`` minus the timestamp of the record
at the group's committed offset, which is the next record the group will read. Three ways to the figure,
named in the answer so a reader knows how far to trust it:

- ``caught_up``: the committed offset has reached the partition's newest broker offset, nothing is waiting:
  0 seconds.
- ``fetch``: the record's own timestamp, read from the cluster (the ``kafka`` cluster module fetches it
  once per committed offset). Exact for LogAppendTime topics; for CreateTime topics it is the producer's
  clock, so a producer clock ahead of the monitor's could give a negative age, which is shown as 0.
- ``interpolated``: no record timestamp (not fetched yet, deleted by retention, or a cluster module that
  does not fetch): the time the broker's log end offset passed the committed offset, estimated from the
  timestamped broker offset samples storage keeps. Linear between the two samples around it; before the
  oldest sample, extrapolated at the window's average produce rate; when the log end offset did not move
  in the whole window (idle producers), the time it reached its current value, which the record cannot
  be younger than. No figure when even that is unknown (the monitor has only ever seen this offset).

Either way the figure keeps growing while the group is stuck, even once producers go idle: it is an age
measured from a fixed point in time, not lag divided by a rate (what goes wrong with producers paused).

Pure functions, no clock and no IO.
"""

from __future__ import annotations

from collections.abc import Sequence

CAUGHT_UP = "caught_up"
FETCH = "fetch"
INTERPOLATED = "interpolated"


def record_time_from_samples(offset: int, broker_offsets: Sequence[int], broker_times: Sequence[int],
                             unchanged_since: int | None = None) -> float | None:
    """When the record at ``offset`` was appended, in ms, estimated from (time, log end offset) samples.

    Samples are oldest first. The record exists once the log end offset is above ``offset``; it was
    appended between the last sample that did not have it and the first that did. ``unchanged_since``
    is when the newest log end offset was first read. None when no estimate can be made.
    """
    count = min(len(broker_offsets), len(broker_times))
    if count == 0:
        return None
    first_after = None
    for index in range(count):
        if broker_offsets[index] > offset:
            first_after = index
            break
    if first_after is None:
        return None
    if first_after > 0:
        before_offset, before_time = broker_offsets[first_after - 1], broker_times[first_after - 1]
        after_offset, after_time = broker_offsets[first_after], broker_times[first_after]
        # The record is number (offset - before_offset + 1) of the (after_offset - before_offset) appended
        # between the two samples; spread them evenly over the interval.
        share = (offset - before_offset + 1) / (after_offset - before_offset)
        return before_time + share * (after_time - before_time)
    # Appended before the oldest sample: go back from it at the window's produce rate.
    oldest_offset, oldest_time = broker_offsets[0], broker_times[0]
    newest_offset, newest_time = broker_offsets[count - 1], broker_times[count - 1]
    if newest_offset > oldest_offset and newest_time > oldest_time:
        ms_per_record = (newest_time - oldest_time) / (newest_offset - oldest_offset)
        return oldest_time - (oldest_offset - offset) * ms_per_record
    return None if unchanged_since is None else float(min(unchanged_since, oldest_time))


def partition_lag_seconds(committed: int | None, broker_offsets: Sequence[int], broker_times: Sequence[int],
                          record_time_ms: int | None, now_ms: float,
                          unchanged_since: int | None = None) -> tuple[float | None, str | None]:
    """(seconds, method) for one partition; (None, None) when there is nothing to go on.

    ``committed`` is the group's newest committed offset (None if it never committed), ``record_time_ms``
    the fetched timestamp of the record at that offset, if known; ``unchanged_since`` as for
    :func:`record_time_from_samples`.
    """
    appended, method = partition_appended(committed, broker_offsets, broker_times, record_time_ms, unchanged_since)
    return lag_seconds_at(appended, method, now_ms), method


def partition_appended(committed: int | None, broker_offsets: Sequence[int], broker_times: Sequence[int],
                       record_time_ms: float | None,
                       unchanged_since: int | None = None) -> tuple[float | None, str | None]:
    """The clock-free part of :func:`partition_lag_seconds`: (when the record at the commit was appended in ms,
    method); the time is None when caught up (nothing waits) or when there is no figure (method None)."""
    if committed is None or not broker_offsets:
        return None, None
    if committed >= broker_offsets[-1]:
        return None, CAUGHT_UP
    if record_time_ms is not None:
        return record_time_ms, FETCH
    appended = record_time_from_samples(committed, broker_offsets, broker_times, unchanged_since)
    if appended is None:
        return None, None
    return appended, INTERPOLATED


def lag_seconds_at(appended: float | None, method: str | None, now_ms: float) -> float | None:
    """:func:`partition_lag_seconds`' figure at ``now_ms`` from :func:`partition_appended`'s answer."""
    if appended is None:
        return None if method is None else 0.0
    return round(max(0.0, now_ms - appended) / 1000.0, 3)
