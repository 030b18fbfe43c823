"""The per-partition history rings of the storage: consumer commits and broker offsets.

Pure data structures with no clock and no IO: the in-memory storage module and the Spark pipeline both
replay events through these classes, so they end up with exactly the same window for a partition.

A :class:`CommitRing` models Burrow's ``container/ring`` of ``intervals`` commit slots (burrow-spec 3.4).
Burrow's ring only ever fills from the newest slot backwards without gaps, so it is kept here as the
list of occupied slots, oldest first; :meth:`CommitRing.entries` pads it with ``None`` for the empty
(oldest) slots exactly as Burrow's fetch does.
"""

from __future__ import annotations

from enum import IntEnum

from burrowpy.protocol import ConsumerOffset


class CommitOutcome(IntEnum):
    """What :meth:`CommitRing.add` did with a commit. Falsy only when the commit was dropped."""

    DROPPED = 0
    # Newer than every stored commit: appended (or merged into the newest by min-distance). Only
    # appends carry a lag and count as the group's latest commit.
    APPENDED = 1
    # Older than the newest stored commit: back-filled by ``order`` (or merged into its predecessor).
    INSERTED = 2


# The outcomes as plain module constants: looking a member up on its Enum class is slow for the hot path.
_DROPPED = CommitOutcome.DROPPED
_APPENDED = CommitOutcome.APPENDED
_INSERTED = CommitOutcome.INSERTED


class CommitRing:
    """The last ``intervals`` commits of one partition of one group, ordered by ``order``.

    ``order`` is the commit's position in its source log (``__consumer_offsets`` offset or ZooKeeper
    mzxid) and decides where a commit goes; timestamps only matter for the min-distance merge.
    Stored :class:`ConsumerOffset` objects are never mutated once stored (a change stores a new
    object), so callers may share them without copying.
    """

    __slots__ = ("intervals", "_stored")

    def __init__(self, intervals: int) -> None:
        if intervals < 1:
            raise ValueError(f"a commit ring needs at least one slot, got {intervals}")
        self.intervals = intervals
        self._stored: list[ConsumerOffset] = []  # occupied slots, oldest first

    def __len__(self) -> int:
        return len(self._stored)

    def entries(self) -> list[ConsumerOffset | None]:
        """All ``intervals`` slots oldest to newest (``None`` for empty ones), or [] if never written."""
        stored = self._stored
        if not stored:
            return []
        missing = self.intervals - len(stored)
        return [None] * missing + stored if missing else stored.copy()

    def newest(self) -> ConsumerOffset | None:
        return self._stored[-1] if self._stored else None

    def add(self, offset: int, order: int, timestamp_ms: int, now_ms: int, current_broker_offset: int,
            min_distance_ms: int = 0) -> CommitOutcome:
        """Store one commit following Burrow's rules; returns what happened (falsy when dropped).

        ``now_ms`` becomes the entry's ``observed_at``; ``current_broker_offset`` is the partition's
        newest broker offset, used for the lag of an appended commit (inserted ones get no lag).
        """
        # The usual case first, and kept cheap (it runs for every commit read): newer than the newest commit.
        # Stored commits are ordered, so such a commit cannot be older than a full ring's oldest one.
        stored = self._stored
        newest = stored[-1] if stored else None
        if newest is None or newest.order < order:
            lag = current_broker_offset - offset
            if lag < 0:
                lag = 0
            if newest is not None and timestamp_ms - newest.timestamp < min_distance_ms:
                # Too close to the newest commit: take its place but keep its timestamp, otherwise a
                # consumer committing more often than min-distance would never advance the ring.
                stored[-1] = ConsumerOffset(offset, newest.timestamp, now_ms, lag, order)
            else:
                if len(stored) == self.intervals:
                    del stored[0]
                stored.append(ConsumerOffset(offset, timestamp_ms, now_ms, lag, order))
            return _APPENDED

        full = len(stored) == self.intervals
        if full and stored[0].order >= order:
            return _DROPPED  # older than everything a full ring keeps

        # A back-fill: walk from the newest towards the oldest looking for the commit's place.
        index = len(stored) - 1
        while True:
            previous = stored[index]
            if previous.order == order:
                return _DROPPED  # the same commit seen twice
            if previous.order < order:
                break
            if index == 0:
                # Older than every stored commit. A ring with free slots gains it as its oldest entry;
                # Burrow's full ring never gets here (dropped above) except through its oldest slot,
                # whose order is known to be smaller.
                stored.insert(0, ConsumerOffset(offset, timestamp_ms, now_ms, None, order))
                return _INSERTED
            index -= 1
            if full and index == 0:
                # Burrow replaces the oldest slot of a full ring without looking at it (its order is
                # already known to be smaller): the commit takes the place of the oldest.
                stored[0] = ConsumerOffset(offset, timestamp_ms, now_ms, None, order)
                return _INSERTED

        if timestamp_ms - previous.timestamp < min_distance_ms:
            stored[index] = ConsumerOffset(offset, previous.timestamp, now_ms, None, order)
        else:
            stored.insert(index + 1, ConsumerOffset(offset, timestamp_ms, now_ms, None, order))
            if len(stored) > self.intervals:
                del stored[0]
        return _INSERTED


class BrokerRing:
    """The last ``intervals`` broker (log-end) offsets of one partition, from ListOffsets polls.

    Each offset keeps the time it was read (ms), which lag in seconds interpolates over, and the ring
    remembers since when the newest offset has not changed (``since``), beyond the window: while producers
    are idle that is the latest time the unconsumed records can have been written.
    """

    __slots__ = ("intervals", "_values", "_times", "_next", "since")

    def __init__(self, intervals: int) -> None:
        if intervals < 1:
            raise ValueError(f"a broker ring needs at least one slot, got {intervals}")
        self.intervals = intervals
        self._values: list[int] = []
        self._times: list[int] = []
        self._next = 0  # slot to overwrite once the ring is full (= the oldest value)
        # When the newest offset was first read (ms); None while it is the first offset ever read, whose
        # age nobody knows.
        self.since: int | None = None

    def add(self, offset: int, timestamp_ms: int = 0) -> None:
        values = self._values
        if values and offset != values[self._next - 1]:
            self.since = timestamp_ms
        if len(values) < self.intervals:
            values.append(offset)
            self._times.append(timestamp_ms)
        else:
            values[self._next] = offset
            self._times[self._next] = timestamp_ms
            self._next = (self._next + 1) % self.intervals

    def values(self) -> list[int]:
        """The stored offsets, oldest to newest."""
        return self._oldest_first(self._values)

    def times(self) -> list[int]:
        """When each stored offset was read (ms), in the order of :meth:`values`."""
        return self._oldest_first(self._times)

    def _oldest_first(self, slots: list[int]) -> list[int]:
        start = self._next
        return slots[start:] + slots[:start] if start else slots.copy()

    def newest(self) -> int | None:
        values = self._values
        if not values:
            return None
        return values[self._next - 1]
