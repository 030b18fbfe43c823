"""Catch-up forecast: when a group will have consumed what it is behind, at the rates of its window.

The rates are measured from one point in time both series know: ``start``, the later of the oldest commit's
time and the oldest broker offset sample's time. There the committed offset is read from the commits and
the log end offset from the broker samples (linear between the samples around it). The consume rate is
what the group committed from ``start`` to its newest commit, over that time; the produce rate what the log
end offset grew by from ``start`` to the newest sample, over that time. Each series ends at its own newest
point, so a steady consumer and a steady producer give their exact rates whenever they are sampled. A
series that has missed its beat (nothing new for more than twice its average gap, e.g. a consumer that
stopped committing) is measured up to ``now`` instead: its position has not moved since, as far as anyone
knows, and its rate falls as time goes on.

The lag shrinks at the difference of the two rates (the net rate):

- ``caught_up``: nothing to consume (current lag 0): 0 seconds, whatever the rates.
- ``keeping_pace``: the rates differ by no more than the noise: the lag is steady, neither a catch-up time
  nor a growth; the lag stays about where it is. The noise is ``PACE_TOLERANCE`` of the larger rate plus
  what random arrivals alone make of the produce rate: at a steady average, the count of records written
  in a span varies by about its square root, so the produce rate over ``t`` seconds by about
  sqrt(rate / t) records/s (10 % for 100 records, 1 % for 10,000).
- ``catching_up``: the group consumes faster: current lag / net rate seconds.
- ``falling_behind``: the producers are faster: no catch-up time, the lag's growth in records/s.

No forecast (None) without two commits and two broker samples, each pair at different times, and time
after ``start`` in both.

Pure functions, no clock and no IO: ``now_ms`` is given.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

CAUGHT_UP = "caught_up"
CATCHING_UP = "catching_up"
KEEPING_PACE = "keeping_pace"
FALLING_BEHIND = "falling_behind"

PACE_TOLERANCE = 0.05  # rates this close (a share of the larger) are one pace: sampling jitter, not a trend

# A group's forecast is its slowest partition's: this order, the later the slower.
_SLOWNESS = {CAUGHT_UP: 0, CATCHING_UP: 1, None: 2, KEEPING_PACE: 3, FALLING_BEHIND: 4}


class Forecast(NamedTuple):
    state: str
    catch_up_seconds: float | None = None  # set when caught up (0) or catching up
    falling_behind_per_second: float | None = None  # set when falling behind


# The answers without a figure of their own, made once: most partitions of a healthy group give one of them.
_CAUGHT_UP = Forecast(CAUGHT_UP, 0.0)
_KEEPING_PACE = Forecast(KEEPING_PACE)


def partition_forecast(current_lag: int, commit_offsets: Sequence[int], commit_times: Sequence[int],
                       broker_offsets: Sequence[int], broker_times: Sequence[int], now_ms: float) -> Forecast | None:
    """The forecast of one partition; None when its window does not give both rates yet.

    Commits and broker samples are oldest first; times in ms.
    """
    basis = forecast_basis(current_lag, commit_offsets, commit_times, broker_offsets, broker_times)
    return forecast_at(basis, now_ms) if basis.__class__ is ForecastBasis else basis  # type: ignore[return-value]


class ForecastBasis(NamedTuple):
    """A partition's forecast without the clock: both series' rates as of their newest points, and the
    forecast they give (``steady``), which holds until either series misses its beat."""

    current_lag: int
    consume: SeriesBasis
    produce: SeriesBasis
    steady: Forecast | None


def forecast_basis(current_lag: int, commit_offsets: Sequence[int], commit_times: Sequence[int],
                   broker_offsets: Sequence[int], broker_times: Sequence[int]) -> ForecastBasis | Forecast | None:
    """The clock-free part of :func:`partition_forecast`: the forecast itself when no clock can change it
    (caught up, or a series that never gives a rate), else a :class:`ForecastBasis` for :func:`forecast_at`."""
    if current_lag <= 0:
        return _CAUGHT_UP
    commits = min(len(commit_offsets), len(commit_times))
    samples = min(len(broker_offsets), len(broker_times))
    if commits < 2 or samples < 2:
        return None
    start = max(commit_times[0], broker_times[0])
    return forecast_of_series(current_lag, series_basis(start, commit_offsets, commit_times, commits),
                              series_basis(start, broker_offsets, broker_times, samples))


def forecast_of_series(current_lag: int, consume: SeriesBasis | None,
                       produce: SeriesBasis | None) -> ForecastBasis | Forecast | None:
    """:func:`forecast_basis` from both series' bases (measured from the same ``start``)."""
    if current_lag <= 0:
        return _CAUGHT_UP
    if consume is None or produce is None:
        return None
    return ForecastBasis(current_lag, consume, produce,
                         forecast_from_rates(current_lag, rate_at(consume, consume.newest),
                                             rate_at(produce, produce.newest)))


def forecast_at(basis: ForecastBasis, now_ms: float) -> Forecast | None:
    """:func:`partition_forecast` at ``now_ms`` of a partition reduced to its :class:`ForecastBasis`."""
    consume, produce = basis.consume, basis.produce
    if now_ms - consume.newest > consume.beat or now_ms - produce.newest > produce.beat:
        return forecast_from_rates(basis.current_lag, rate_at(consume, now_ms), rate_at(produce, now_ms))
    return basis.steady


def forecast_from_rates(current_lag: int, consume: tuple[float, float] | None,
                        produce: tuple[float, float] | None) -> Forecast | None:
    """The forecast of a partition with this lag and these (records/s, over seconds) rates, None when
    unknown."""
    if current_lag <= 0:
        return _CAUGHT_UP
    if consume is None or produce is None:
        return None
    consume_rate, produce_rate = consume[0], produce[0]
    net_rate = consume_rate - produce_rate
    noise = PACE_TOLERANCE * max(abs(consume_rate), abs(produce_rate)) + math.sqrt(abs(produce_rate) / produce[1])
    if abs(net_rate) <= noise:
        return _KEEPING_PACE
    if net_rate > 0:
        return Forecast(CATCHING_UP, round(current_lag / net_rate, 3))
    return Forecast(FALLING_BEHIND, None, round(-net_rate, 3))


# forecasts_from_rate_columns' codes: caught up, no forecast, keeping pace, catching up, falling behind.
_BY_CODE = (_CAUGHT_UP, None, _KEEPING_PACE)


def forecasts_from_rate_columns(np: Any, current_lags: Sequence[int], consume: tuple[Any, Any, Any],
                                produce: tuple[Any, Any, Any]) -> list[Forecast | None]:
    """:func:`forecast_from_rates` of many partitions at once: each series as arrays of (per second, over
    seconds, known), where known is False for a partition whose rate is None. The same float operations in the
    same order, so the same figures."""
    consume_rate, _, consume_known = consume
    produce_rate, produce_span, produce_known = produce
    lags = np.array(current_lags, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        net_rate = consume_rate - produce_rate
        noise = (PACE_TOLERANCE * np.maximum(np.abs(consume_rate), np.abs(produce_rate))
                 + np.sqrt(np.abs(produce_rate) / produce_span))
        catch_up_seconds = lags / net_rate
    behind = lags > 0
    known = behind & consume_known & produce_known
    pace = known & (np.abs(net_rate) <= noise)
    catching = known & ~pace & (net_rate > 0)
    falling = known & ~pace & ~catching
    codes = np.where(behind, np.where(pace, 2, 1), 0)
    forecasts: list[Forecast | None] = list(map(_BY_CODE.__getitem__, codes.tolist()))
    for index, forecast in zip(np.flatnonzero(catching).tolist(), each_rounded(
            np, catch_up_seconds[catching], lambda seconds: Forecast(CATCHING_UP, seconds)), strict=True):
        forecasts[index] = forecast
    for index, forecast in zip(np.flatnonzero(falling).tolist(), each_rounded(
            np, -net_rate[falling], lambda growth: Forecast(FALLING_BEHIND, None, growth)), strict=True):
        forecasts[index] = forecast
    return forecasts


def each_rounded(np: Any, values: Any, make: Callable[[float], Any]) -> list[Any]:
    """``[make(round(value, 3)) for value in values.tolist()]`` (a 1-d array), with each distinct value rounded and
    made once (the partitions of a topic often share their figures) and so shared by the partitions that have it."""
    if len(values) < 16:
        return [make(round(value, 3)) for value in values.tolist()]
    distinct, where = np.unique(values, return_inverse=True)
    made = [make(round(value, 3)) for value in distinct.tolist()]
    return list(map(made.__getitem__, where.tolist()))


def group_forecast(forecasts: Iterable[Forecast | None]) -> Forecast | None:
    """The group's forecast: its slowest partition's. The group has caught up when its last partition has.

    Any partition falling behind: the group falls behind, by the sum of those partitions' growth (the
    records/s its lag grows by where it grows). Else any keeping pace with a lag: the group keeps pace. Else
    any partition without a forecast (and a lag): None. Else the largest catch-up time (0 when every
    partition has caught up). None for a group without partitions.
    """
    slowest: Forecast | None = None
    slowest_rank = -1
    growth = 0.0
    slowness = _SLOWNESS
    for forecast in forecasts:
        state = forecast[0] if forecast is not None else None
        rank = slowness[state]
        if rank == 4:  # falling behind: its growth, summed in order (the same float sum as ever)
            growth += forecast[2]  # type: ignore[index, operator]  # a falling-behind one has it
        if rank > slowest_rank or (rank == slowest_rank and rank == 1
                                   and _catch_up_seconds(forecast) > _catch_up_seconds(slowest)):
            slowest, slowest_rank = forecast, rank
    if slowest is not None and slowest.state == FALLING_BEHIND:
        return Forecast(FALLING_BEHIND, None, round(growth, 3))
    return slowest


class SeriesBasis(NamedTuple):
    """What a series' rate since ``start`` takes from the series, without the clock (:func:`rate_at` adds it)."""

    start: float
    newest: int  # time of the newest point, ms
    beat: float  # a gap after ``newest`` longer than this (ms) means the series has missed its beat
    grown: float  # the newest value less the value at ``start``


def series_basis(start: float, values: Sequence[int], times: Sequence[int], count: int) -> SeriesBasis | None:
    """The clock-free part of a series' rate since ``start`` (:func:`rate_at`); None for a series without length
    in time (no rate, ever)."""
    first, newest = times[0], times[count - 1]
    if newest <= first:
        return None
    return SeriesBasis(start, newest, 2 * (newest - first) / (count - 1),
                       values[count - 1] - _value_at(start, values, times, count))


def rate_at(basis: SeriesBasis | None, now_ms: float) -> tuple[float, float] | None:
    """(per second, over seconds): how much the series grew from ``start`` to its end, its newest point or
    ``now_ms`` when it has missed its beat. None when the series has no length in time or ends at or before
    ``start``."""
    if basis is None:
        return None
    start, newest = basis.start, basis.newest
    end = now_ms if now_ms - newest > basis.beat else newest
    if end <= start:
        return None
    return basis.grown * 1000.0 / (end - start), (end - start) / 1000.0


def _value_at(when: float, values: Sequence[int], times: Sequence[int], count: int) -> float:
    """The series' value at ``when`` (not before its first time): linear between the samples around it,
    the newest value after the newest sample."""
    index = bisect_left(times, when, 1, count)  # the first point at or after ``when``, from the second on
    if index == count:
        return values[count - 1]
    before_time, after_time = times[index - 1], times[index]
    if after_time == before_time:
        return values[index]
    share = (when - before_time) / (after_time - before_time)
    return values[index - 1] + share * (values[index] - values[index - 1])


def _catch_up_seconds(forecast: Forecast | None) -> float:
    assert forecast is not None and forecast.catch_up_seconds is not None  # a catching-up one has it
    return forecast.catch_up_seconds
