"""Burrow's consumer-lag evaluation rules as pure functions, one partition at a time (burrow-spec 1.4-1.5).

No clock, no IO: ``now`` is passed in (whole seconds, as Burrow truncates it). The caching evaluator,
the notifier, the HTTP server's ``/metrics`` and the Spark pipeline all call these, so they must stay
side-effect free and cheap.

Commits may be given as :class:`~burrowpy.protocol.ConsumerOffset` objects (storage's own type) or as
mappings with ``offset``, ``timestamp`` (ms) and ``lag`` keys (what tests and JSON users have);
mappings are turned into :class:`OffsetView` objects, which answer both ``view.offset`` and
``view["offset"]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from burrowpy.protocol import (
    COMMIT_STRIDE,
    NO_LAG,
    CommitWindow,
    ConsumerOffset,
    PartitionStatus,
    Status,
    commit_from_values,
)

_new_tuple = tuple.__new__

# The statuses as plain module constants: looking a member up on its Enum class costs ~70 ns, several
# times per partition in the loops below.
_OK, _WARN, _STOP, _STALL, _REWIND = Status.OK, Status.WARN, Status.STOP, Status.STALL, Status.REWIND


class OffsetView(ConsumerOffset):
    """A commit built from a mapping: a ConsumerOffset that can also be read like the mapping was."""

    __slots__ = ()

    def __getitem__(self, key: Any) -> Any:
        if not isinstance(key, str):  # an index or a slice: it is still the ConsumerOffset tuple
            return tuple.__getitem__(self, key)
        if key == "observedAt":
            return self.observed_at
        if key in ("offset", "timestamp", "observed_at", "lag", "order"):
            return getattr(self, key)
        raise KeyError(key)

    @classmethod
    def from_mapping(cls, item: Mapping[str, Any]) -> OffsetView:
        try:
            offset = item["offset"]
            timestamp = item["timestamp"]
        except KeyError:
            raise ValueError(f"a commit needs 'offset' and 'timestamp', got keys {sorted(item)}") from None
        observed_at = item.get("observedAt", item.get("observed_at", 0))
        return cls(int(offset), int(timestamp), int(observed_at or 0), _optional_int(item.get("lag")),
                   int(item.get("order") or 0))


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _as_offset(item: Any) -> Any:
    if isinstance(item, ConsumerOffset):  # the common case, checked first: Mapping checks are slow
        return item
    return OffsetView.from_mapping(item) if isinstance(item, Mapping) else item


# --- the individual rules (spec 1.5) ----------------------------------------------------------------
# They read a window of commits as columns (oldest first, no empty slots): storage hands its packed rings
# over as such (CommitWindow.column), and :func:`columns_of` builds them from commit objects.


class CommitColumns(NamedTuple):
    offsets: list[int]
    lags: list[int]  # NO_LAG for a commit without a lag (one stored out of order)
    first_timestamp: int  # ms, of the oldest and the newest commit (the rules need no other)
    last_timestamp: int


def columns_of(commits: Sequence[Any]) -> CommitColumns:
    """The columns of a window of commit objects (ConsumerOffset or anything with those attributes)."""
    return CommitColumns([item.offset for item in commits],
                         [NO_LAG if item.lag is None else item.lag for item in commits],
                         commits[0].timestamp, commits[-1].timestamp)


def is_lag_always_nonzero(commits: CommitColumns, allowed_lag: int) -> bool:
    """No stored lag is within ``allowed_lag`` (commits without a lag do not count either way)."""
    if allowed_lag == 0:  # the default: one scan in C instead of a generator
        return 0 not in commits.lags
    return not any(0 <= lag <= allowed_lag for lag in commits.lags)


def rewind_index(commits: CommitColumns) -> int:
    """Index of the first commit whose offset is smaller than its predecessor's, else -1."""
    offsets = commits.offsets
    if sorted(offsets) == offsets:  # never went back, the usual case: answered in C
        return -1
    for index in range(1, len(offsets)):
        if offsets[index] < offsets[index - 1]:
            return index
    return -1


def rewind_recovered(commits: CommitColumns, index: int) -> bool:
    """A commit at or after ``index`` got back to where the consumer was before the rewind."""
    offsets = commits.offsets
    before = offsets[index - 1]
    return any(offset >= before for offset in offsets[index:])


def stop_time(commits: CommitColumns) -> int:
    """The time (ms) after which the consumer has stopped: the time since the last commit exceeds the time the
    window spans (a single commit: any time)."""
    last = commits.last_timestamp
    return 2 * last - commits.first_timestamp


def is_stalled(commits: CommitColumns) -> bool:
    """Every commit in the window has the same offset."""
    offsets = commits.offsets
    return offsets.count(offsets[0]) == len(offsets)


def is_lag_not_decreasing(commits: CommitColumns) -> bool:
    """Walking the stored lags in order, none is smaller than the previous stored one."""
    previous = NO_LAG
    for lag in commits.lags:
        if lag != NO_LAG:
            if previous != NO_LAG and lag < previous:
                return False
            previous = lag
    return True


def is_recent_lag_zero(commits: CommitColumns, broker_offsets: Sequence[int]) -> bool:
    """Some recent broker offset was at or below the last commit: the consumer was caught up lately."""
    return bool(broker_offsets) and min(broker_offsets) <= commits.offsets[-1]


def partition_status(commits: CommitColumns, broker_offsets: Sequence[int], current_lag: int, now: int,
                     allowed_lag: int = 0) -> Status:
    """The rules of spec 1.5 in Burrow's order, on a non-empty window without empty slots."""
    status, stop_after = partition_verdict(commits, broker_offsets, current_lag, allowed_lag)
    return _STOP if now * 1000 > stop_after else status


# A partition that can never stop: the bound of :func:`partition_verdict` no clock passes (int64's largest).
NEVER = 2**63 - 1


def partition_verdict(commits: CommitColumns, broker_offsets: Sequence[int], current_lag: int,
                      allowed_lag: int = 0) -> tuple[Status, int]:
    """:func:`partition_status` without the clock: (the status while the partition has not stopped, the time
    in ms after which it has, NEVER when it cannot). STOP is the only rule that reads the clock, and it
    comes before the others, so the rest of the answer does not depend on when it is asked."""
    if current_lag <= allowed_lag:
        return _OK, NEVER  # a caught-up consumer is never in trouble, whatever its history
    stop_after = NEVER if is_recent_lag_zero(commits, broker_offsets) else stop_time(commits)
    # A rewind counts only until the consumer is back where it was: rebalances often re-commit a
    # slightly older offset, which is harmless.
    index = rewind_index(commits)
    if index > 0 and not rewind_recovered(commits, index):
        return _REWIND, stop_after
    if is_lag_always_nonzero(commits, allowed_lag):
        if is_stalled(commits):
            return _STALL, stop_after
        if is_lag_not_decreasing(commits):
            return _WARN, stop_after
    return _OK, stop_after


# --- partitions and groups (spec 1.3, 1.4) -----------------------------------------------------------


class WindowVerdict(NamedTuple):
    """A partition's window through the rules without the clock (:func:`window_verdict`)."""

    status: Status  # while the partition has not stopped
    stop_after: int  # ms; STOP once ``now * 1000`` passes it (NEVER: cannot stop)
    complete: float
    start: ConsumerOffset | None
    end: ConsumerOffset | None


def evaluate_partition(offsets: Sequence[Any], broker_offsets: Sequence[int], current_lag: int, now: float,
                       allowed_lag: int = 0, minimum_complete: float = 0.0, *, topic: str = "",
                       partition: int = 0, owner: str = "", client_id: str = "") -> PartitionStatus:
    """Evaluate one partition's window of commits (oldest first, leading ``None`` for empty slots).

    ``offsets`` is storage's :class:`~burrowpy.protocol.CommitWindow` or any sequence of commits
    (ConsumerOffset objects or mappings). ``now`` is in seconds and truncated to whole seconds like
    Burrow's. Returns a PartitionStatus whose ``status``, ``complete``, ``start`` and ``end`` are those
    of spec 1.4; topic, partition, owner and client id are only copied in (:mod:`burrowpy.evaluator.group`
    fills them). A ``None`` after the first commit (which storage never produces) is skipped rather than
    failing.
    """
    verdict = window_verdict(offsets, broker_offsets, current_lag, allowed_lag, minimum_complete)
    return PartitionStatus(topic, partition, _STOP if int(now) * 1000 > verdict.stop_after else verdict.status,
                           current_lag, verdict.complete, verdict.start, verdict.end, owner, client_id)


def window_verdict(offsets: Sequence[Any], broker_offsets: Sequence[int], current_lag: int, allowed_lag: int = 0,
                   minimum_complete: float = 0.0) -> WindowVerdict:
    """:func:`evaluate_partition` without the clock (see :func:`partition_verdict`)."""
    if offsets.__class__ is CommitWindow:
        return _packed_verdict(offsets, broker_offsets, current_lag, allowed_lag, minimum_complete)
    total = len(offsets)
    if total == 0:
        return WindowVerdict(_OK, NEVER, 0.0, None, None)  # never committed: nothing to judge, not complete
    first = 0
    while first < total and offsets[first] is None:
        first += 1
    if first == total:
        # Burrow keeps the final (empty) slot here, which makes the window 1/len complete; it would
        # then crash on the empty entry if the partition had lag. There is nothing to judge: stay OK.
        return WindowVerdict(_OK, NEVER, 1 / total, None, None)
    window = offsets[first:]
    for item in window:
        if item.__class__ is not ConsumerOffset:  # mappings or gaps: normalise
            window = [_as_offset(item) for item in window if item is not None]
            break
    complete = (total - first) / total if first else 1.0
    status, stop_after = _OK, NEVER
    # A caught-up partition is OK whatever its window holds (the rules' first one): no columns to build.
    if complete >= minimum_complete and current_lag > allowed_lag:
        status, stop_after = partition_verdict(columns_of(window), broker_offsets, current_lag, allowed_lag)
    return WindowVerdict(status, stop_after, complete, window[0], window[-1])


def _packed_verdict(window: CommitWindow, broker_offsets: Sequence[int], current_lag: int, allowed_lag: int,
                    minimum_complete: float) -> WindowVerdict:
    """:func:`window_verdict` of storage's packed window, the path a group's partitions take one by one: one
    list of the window's values, and columns only when the rules run."""
    slots = window.slots
    size = len(slots)
    if not size:
        return WindowVerdict(_OK, NEVER, 0.0, None, None)
    values = slots.tolist()
    stored = size // COMMIT_STRIDE
    complete = 1.0 if stored == window.intervals else stored / window.intervals
    status, stop_after = _OK, NEVER
    # A caught-up partition is OK whatever its window holds (the rules' first one): no columns to build.
    if complete >= minimum_complete and current_lag > allowed_lag:
        # Lists, not arrays: the rules read values several times, and an array boxes them on every read.
        columns = _new_tuple(CommitColumns, (values[0::COMMIT_STRIDE], values[3::COMMIT_STRIDE], values[1],
                                             values[size - COMMIT_STRIDE + 1]))
        status, stop_after = partition_verdict(columns, broker_offsets, current_lag, allowed_lag)
    return WindowVerdict(status, stop_after, complete, commit_from_values(values[:COMMIT_STRIDE]),
                         commit_from_values(values[size - COMMIT_STRIDE:]))


# --- a group from its partitions ---------------------------------------------------------------------

PARTITION_STATUSES = (_OK, _WARN, _STOP, _STALL, _REWIND)


def group_status_of(partition_status: Status) -> Status:
    """The group status a partition status makes: groups only know OK, WARN and ERR, and Burrow folds
    STOP, STALL and REWIND into ERR."""
    return Status.ERR if partition_status > Status.ERR else partition_status


def group_status(partition_statuses: Iterable[Status]) -> Status:
    """A group's status from its partitions' statuses: the worst, folded (OK for a group of none)."""
    return group_status_of(max(partition_statuses, default=_OK))


# What the pipeline's Spark aggregate ranks partition rows by (the fold as data a column expression takes).
GROUP_STATUS_OF_PARTITION = {status: group_status_of(status) for status in PARTITION_STATUSES}
