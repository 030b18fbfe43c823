"""The per-partition history rings of the storage: consumer commits and broker offsets.

Pure data structures with no clock and no IO: the in-memory storage module and the Spark pipeline both
replay events through these classes, so they end up with exactly the same window for a partition.

A :class:`CommitRing` models Burrow's ``container/ring`` of ``intervals`` commit slots (burrow-spec 3.4).
Burrow's ring only ever fills from the newest slot backwards without gaps, so it is kept here as the
occupied slots, oldest first; :meth:`CommitRing.window` pads them with ``None`` for the empty (oldest)
slots exactly as Burrow's fetch does.
"""

from __future__ import annotations

import struct
from array import array
from enum import IntEnum

from burrowpy.protocol import COMMIT_STRIDE, NO_LAG, CommitWindow, ConsumerOffset


class CommitOutcome(IntEnum):
    """What :meth:`CommitRing.add` did with a commit. Falsy only when the commit was dropped."""

    DROPPED = 0
    # Newer than every stored commit: appended (or merged into the newest by min-distance). Only
    # appends carry a lag and count as the group's latest commit.
    APPENDED = 1
    # Older than the newest stored commit: back-filled by ``order`` (or merged into its predecessor).
    INSERTED = 2


# One commit's COMMIT_STRIDE values as the bytes an array("q") holds them in (the C long long of both).
_PACK_COMMIT = struct.Struct(f"{COMMIT_STRIDE}q").pack

# The outcomes as plain module constants: looking a member up on its Enum class is slow for the hot path.
_DROPPED = CommitOutcome.DROPPED
_APPENDED = CommitOutcome.APPENDED
_INSERTED = CommitOutcome.INSERTED


class CommitRing:
    """The last ``intervals`` commits of one partition of one group, ordered by ``order``.

    ``order`` is the commit's position in its source log (``__consumer_offsets`` offset or ZooKeeper
    mzxid) and decides where a commit goes; timestamps only matter for the min-distance merge.
    Commits are packed in one int64 array (``COMMIT_STRIDE`` values each, oldest first): about 400
    bytes for a full 10-slot ring where ten :class:`ConsumerOffset` objects and their ints took ~1.8 KB.
    """

    __slots__ = ("intervals", "_slots")

    def __init__(self, intervals: int) -> None:
        if intervals < 1:
            raise ValueError(f"a commit ring needs at least one slot, got {intervals}")
        self.intervals = intervals
        self._slots = array("q")  # occupied slots, oldest first

    def __len__(self) -> int:
        return len(self._slots) // COMMIT_STRIDE

    def window(self) -> CommitWindow:
        """A snapshot of all ``intervals`` slots (what Burrow's fetch returns), unaffected by later commits."""
        return CommitWindow(array("q", self._slots), self.intervals)

    @property
    def packed(self) -> array[int]:
        """The stored commits as they are kept (``COMMIT_STRIDE`` values each, oldest first): the live
        array, for copying at once (a fetch joins many); not to be kept or changed."""
        return self._slots

    def entries(self) -> list[ConsumerOffset | None]:
        """All ``intervals`` slots oldest to newest (``None`` for empty ones), or [] if never written."""
        return list(self.window())

    def newest(self) -> ConsumerOffset | None:
        window = CommitWindow(self._slots[-COMMIT_STRIDE:], 1)
        return window[0] if window.stored else None

    def newest_offset(self) -> int | None:
        slots = self._slots
        return slots[len(slots) - COMMIT_STRIDE] if slots else None

    def add(self, offset: int, order: int, timestamp_ms: int, now_ms: int, current_broker_offset: int,
            min_distance_ms: int = 0) -> CommitOutcome:
        """Store one commit following Burrow's rules; returns what happened (falsy when dropped).

        ``now_ms`` becomes the entry's ``observed_at``; ``current_broker_offset`` is the partition's
        newest broker offset, used for the lag of an appended commit (inserted ones get no lag).
        """
        # The usual case first, and kept cheap (it runs for every commit read): newer than the newest commit.
        # Stored commits are ordered, so such a commit cannot be older than a full ring's oldest one.
        slots = self._slots
        size = len(slots)
        if size == 0 or slots[size - 1] < order:  # the newest commit's order is the last value
            lag = current_broker_offset - offset
            if lag < 0:
                lag = 0
            if size and timestamp_ms - slots[size - 4] < min_distance_ms:
                # Too close to the newest commit: take its place but keep its timestamp, otherwise a
                # consumer committing more often than min-distance would never advance the ring.
                slots[size - 5] = offset
                slots[size - 3] = now_ms
                slots[size - 2] = lag
                slots[size - 1] = order
            else:
                if size == self.intervals * COMMIT_STRIDE:
                    del slots[:COMMIT_STRIDE]
                # Packed once and copied in: about half the time of extending by a tuple of ints.
                slots.frombytes(_PACK_COMMIT(offset, timestamp_ms, now_ms, lag, order))
                if size == (self.intervals - 1) * COMMIT_STRIDE:
                    # Full from now on: an array of exactly its size (growing, it kept four values spare, 32 of
                    # a 10-slot ring's 432 bytes, 1.8 MiB at fleet scale), which an oldest commit's place taken
                    # then keeps (the array gives back nothing for 5 values deleted, needs nothing for 5 added).
                    self._slots = array("q", slots)
            return _APPENDED

        full = size == self.intervals * COMMIT_STRIDE
        if full and slots[4] >= order:
            return _DROPPED  # older than everything a full ring keeps

        # A back-fill: walk from the newest towards the oldest looking for the commit's place.
        index = size - COMMIT_STRIDE
        while True:
            previous_order = slots[index + 4]
            if previous_order == order:
                return _DROPPED  # the same commit seen twice
            if previous_order < order:
                break
            if index == 0:
                # Older than every stored commit. A ring with free slots gains it as its oldest entry;
                # Burrow's full ring never gets here (dropped above) except through its oldest slot,
                # whose order is known to be smaller.
                slots[0:0] = array("q", (offset, timestamp_ms, now_ms, NO_LAG, order))
                return _INSERTED
            index -= COMMIT_STRIDE
            if full and index == 0:
                # Burrow replaces the oldest slot of a full ring without looking at it (its order is
                # already known to be smaller): the commit takes the place of the oldest.
                slots[0:COMMIT_STRIDE] = array("q", (offset, timestamp_ms, now_ms, NO_LAG, order))
                return _INSERTED

        previous_timestamp = slots[index + 1]
        if timestamp_ms - previous_timestamp < min_distance_ms:
            slots[index:index + COMMIT_STRIDE] = array("q", (offset, previous_timestamp, now_ms, NO_LAG, order))
        else:
            after = index + COMMIT_STRIDE
            slots[after:after] = array("q", (offset, timestamp_ms, now_ms, NO_LAG, order))
            if len(slots) > self.intervals * COMMIT_STRIDE:
                del slots[:COMMIT_STRIDE]
        return _INSERTED


class BrokerRing:
    """The last ``intervals`` broker (log-end) offsets of one partition, from ListOffsets polls.

    Each offset keeps the time it was read (ms), which lag in seconds interpolates over, and the ring
    remembers since when the newest offset has not changed (``since``), beyond the window: while producers
    are idle that is the latest time the unconsumed records can have been written. Samples are packed as
    (offset, time) pairs in one int64 array, oldest first: a full ring drops its oldest pair on each add
    (a move of a few dozen bytes, once per poll), so that reading the window, which every evaluation of a
    group does for each of its partitions, is one slice per column.
    """

    __slots__ = ("intervals", "_samples", "since")

    def __init__(self, intervals: int) -> None:
        if intervals < 1:
            raise ValueError(f"a broker ring needs at least one slot, got {intervals}")
        self.intervals = intervals
        self._samples = array("q")
        # When the newest offset was first read (ms); None while it is the first offset ever read, whose
        # age nobody knows.
        self.since: int | None = None

    def add(self, offset: int, timestamp_ms: int = 0) -> None:
        self.add_moved(offset, timestamp_ms)

    def add_moved(self, offset: int, timestamp_ms: int = 0) -> bool:
        """:meth:`add`, and whether the newest offset is not what it was (or there was none)."""
        samples = self._samples
        size, full = len(samples), 2 * self.intervals
        if size:
            moved = offset != samples[-2]
            if moved:
                self.since = timestamp_ms
            if size == full:
                del samples[:2]
        else:
            moved = True
        samples.append(offset)
        samples.append(timestamp_ms)
        if size == full - 2:
            # Full from now on: an array of exactly its size, as a full commit ring's (appending left five values
            # spare at ten slots, 40 of 200 bytes, 1.9 MiB for a fleet's 50,000 partitions).
            self._samples = array("q", samples)
        return moved

    def values(self) -> list[int]:
        """The stored offsets, oldest to newest."""
        return self._samples[0::2].tolist()

    @property
    def packed(self) -> array[int]:
        """The (offset, time ms) pairs as they are kept, oldest first: the live array, for copying at once;
        not to be kept or changed."""
        return self._samples

    def times(self) -> list[int]:
        """When each stored offset was read (ms), in the order of :meth:`values`."""
        return self._samples[1::2].tolist()

    def newest(self) -> int | None:
        samples = self._samples
        return samples[-2] if samples else None

    def rate(self) -> float | None:
        """Records per second the log end grew by over the window; None with fewer than two samples at
        different times, or when it went back (a truncated log: no rate spans that)."""
        samples = self._samples
        if len(samples) < 4 or samples[-1] <= samples[1] or samples[-2] < samples[0]:
            return None
        return (samples[-2] - samples[0]) * 1000 / (samples[-1] - samples[1])
