"""The leader's view of one replicated partition: follower progress, the ISR and the high watermark; and
whether a broker may act as a partition's leader at all (:func:`acts_as_leader`).

Pure logic (no IO, no clock of its own: every call that needs the time is given ``now`` in seconds), so the
rules below are unit-tested directly. ``broker.cluster.replication`` wires it to fetch requests, the log and
the metadata quorum. The rules are Kafka's:

* The high watermark is the smallest log end offset over the ISR, leader included, and never moves back.
  While an ISR change is being proposed the *maximal* ISR counts (committed members plus proposed ones), so
  a follower leaving the ISR holds the high watermark back until its removal is committed, and one joining
  counts as soon as it is proposed (KIP-497).
* A follower is caught up when it has fetched up to the leader's log end. A fetch that reaches the leader's
  log end as it was at the follower's previous fetch also counts, as caught up at that previous fetch time,
  so a follower that keeps up with a steady stream is not judged by data appended a moment ago.
* A follower leaves the ISR when its log end differs from the leader's and it has not been caught up for
  ``replica.lag.time.max.ms``. It joins when its log end reaches both the high watermark and the offset where
  the current leader epoch began (so it holds everything this leader may have acknowledged).
* A fetch from an older (or newer) leader epoch, from a broker that is not a replica, or beyond the leader's
  log end (a divergent log) changes nothing.
* ``min.insync.replicas`` is checked against the committed ISR.
* One ISR change is in flight at a time; after the quorum refuses one, the next waits
  ``proposal_retry_s`` so a leader the controller disagrees with does not propose on every fetch.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class FollowerProgress:
    """What the leader knows of one follower in the current leader epoch."""

    log_end_offset: int
    last_caught_up_time: float
    last_fetch_time: float
    leader_end_at_last_fetch: int

    def caught_up_at(self, leader_end_offset: int, now: float, lag_time_max_s: float) -> bool:
        return (
            self.log_end_offset == leader_end_offset
            or now - self.last_caught_up_time <= lag_time_max_s
        )


@dataclass(frozen=True, slots=True)
class IsrChange:
    """A proposed ISR, in flight to the metadata quorum. Identity matters: a late answer to an abandoned
    proposal must not be applied."""

    isr: tuple[int, ...]
    leader_epoch: int


class PartitionLeaderState:
    """One partition led by this broker in one leader epoch.

    ``leader_end_offset`` and ``high_watermark`` are the leader log's offsets when leadership began; the
    epoch begins at that log end.
    """

    def __init__(
        self,
        *,
        leader_id: int,
        leader_epoch: int,
        replicas: list[int],
        isr: list[int],
        leader_end_offset: int,
        high_watermark: int,
        lag_time_max_s: float,
        now: float,
        proposal_retry_s: float = 1.0,
    ) -> None:
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.lag_time_max_s = lag_time_max_s
        self.proposal_retry_s = proposal_retry_s
        self.no_proposal_before = float("-inf")
        self.epoch_start_offset = leader_end_offset
        self.leader_end_offset = leader_end_offset
        self.high_watermark = min(high_watermark, leader_end_offset)
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.pending_change: IsrChange | None = None
        self.followers: dict[int, FollowerProgress] = {}
        self.update_assignment(replicas, isr, now)

    # --- membership -------------------------------------------------------------------------------------

    def update_assignment(self, replicas: list[int], isr: list[int], now: float) -> None:
        """Replicas and committed ISR from the metadata (at leadership, or a later change in this epoch).

        Followers already tracked keep their progress. A newly tracked follower's log end is unknown until
        it fetches; one in the ISR counts as caught up now, so it is not dropped before it had a chance.
        Any proposal in flight is superseded by what the metadata says.
        """
        self.replicas = tuple(replicas)
        self.isr = tuple(r for r in isr if r in self.replicas or r == self.leader_id)
        if self.leader_id not in self.isr:
            self.isr = (self.leader_id, *self.isr)
        self.pending_change = None
        for replica in self.replicas:
            if replica == self.leader_id or replica in self.followers:
                continue
            caught_up = now if replica in self.isr else float("-inf")
            self.followers[replica] = FollowerProgress(
                log_end_offset=UNKNOWN_OFFSET,
                last_caught_up_time=caught_up,
                last_fetch_time=now,
                leader_end_at_last_fetch=self.leader_end_offset,
            )
        for gone in set(self.followers) - set(self.replicas):
            del self.followers[gone]

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The committed ISR plus members of a proposal in flight: what the high watermark waits for."""
        if self.pending_change is None:
            return self.isr
        extra = tuple(r for r in self.pending_change.isr if r not in self.isr)
        return self.isr + extra

    @property
    def high_watermark_lags_epoch(self) -> bool:
        """Whether the high watermark is still below the offset this leader epoch began at: a new leader's
        high watermark is the one it knew as a follower, which may be a fetch round behind what the previous
        leader acknowledged, until its ISR's fetches move it. Until then offsets answered from it could hide
        acknowledged records (Kafka answers OFFSET_NOT_AVAILABLE meanwhile)."""
        return self.high_watermark < self.epoch_start_offset

    def has_enough_replicas(self, min_insync_replicas: int) -> bool:
        return len(self.isr) >= min_insync_replicas

    # --- progress ---------------------------------------------------------------------------------------

    def on_leader_append(self, leader_end_offset: int) -> bool:
        """The leader's log grew; True if the high watermark moved (an ISR of one follows at once)."""
        self.leader_end_offset = leader_end_offset
        return self._advance_high_watermark()

    def on_follower_fetch(
        self, replica_id: int, fetch_offset: int, leader_epoch: int, leader_end_offset: int, now: float
    ) -> bool:
        """A follower fetches from ``fetch_offset`` (its log end); True if the high watermark moved.

        ``leader_epoch`` is the epoch the follower believes current (-1: not given, as by old fetchers).
        """
        self.leader_end_offset = leader_end_offset
        follower = self.followers.get(replica_id)
        if follower is None or (leader_epoch >= 0 and leader_epoch != self.leader_epoch):
            return False
        if fetch_offset > leader_end_offset:
            return False
        if fetch_offset >= leader_end_offset:
            follower.last_caught_up_time = max(follower.last_caught_up_time, now)
        elif fetch_offset >= follower.leader_end_at_last_fetch:
            follower.last_caught_up_time = max(follower.last_caught_up_time, follower.last_fetch_time)
        follower.leader_end_at_last_fetch = leader_end_offset
        follower.last_fetch_time = now
        follower.log_end_offset = fetch_offset
        return self._advance_high_watermark()

    def _log_end_of(self, replica: int) -> int:
        if replica == self.leader_id:
            return self.leader_end_offset
        follower = self.followers.get(replica)
        return UNKNOWN_OFFSET if follower is None else follower.log_end_offset

    def _advance_high_watermark(self) -> bool:
        candidate = min(self._log_end_of(replica) for replica in self.maximal_isr)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    # --- ISR changes ------------------------------------------------------------------------------------

    def out_of_sync_followers(self, now: float) -> list[int]:
        """ISR members (never the leader) that have not been caught up for longer than the lag limit."""
        return [
            replica
            for replica in self.isr
            if replica != self.leader_id
            and not self.followers[replica].caught_up_at(self.leader_end_offset, now, self.lag_time_max_s)
        ]

    def _eligible_to_join(self, replica: int) -> bool:
        log_end = self.followers[replica].log_end_offset
        return log_end >= self.high_watermark and log_end >= self.epoch_start_offset

    def desired_isr(self, now: float) -> tuple[int, ...] | None:
        """The ISR this leader should propose now, or None if it should stay (or a proposal is in flight, or
        the last one was refused less than ``proposal_retry_s`` ago).

        Lagging members leave and caught-up replicas join in one change; the order follows the replica
        assignment, leader always included.
        """
        if self.pending_change is not None or now < self.no_proposal_before:
            return None
        leaving = set(self.out_of_sync_followers(now))
        joining = {
            replica
            for replica in self.followers
            if replica not in self.isr and self._eligible_to_join(replica)
        }
        if not leaving and not joining:
            return None
        members = (set(self.isr) - leaving) | joining
        ordered = [r for r in self.replicas if r in members]
        if self.leader_id not in ordered:
            ordered.insert(0, self.leader_id)
        return tuple(ordered)

    def begin_isr_change(self, isr: tuple[int, ...]) -> IsrChange:
        """Record ``isr`` as proposed; the high watermark now waits for its members too."""
        change = IsrChange(isr, self.leader_epoch)
        self.pending_change = change
        return change

    def finish_isr_change(self, change: IsrChange, committed: bool, now: float) -> bool:
        """The quorum answered ``change``; True if the high watermark moved as a result.

        A committed change becomes the ISR; a refused one is dropped (the next check proposes afresh). An
        answer to a proposal that is no longer the pending one is ignored.
        """
        if change is not self.pending_change:
            return False
        self.pending_change = None
        if committed:
            self.isr = change.isr
        else:
            self.no_proposal_before = now + self.proposal_retry_s
        return self._advance_high_watermark()


def acts_as_leader(node_id: int, leader: int, leader_epoch: int, led_epoch: int | None, caught_up: bool) -> bool:
    """Whether broker ``node_id`` may act as a partition's leader (append, answer reads and offsets, acknowledge).

    ``leader``/``leader_epoch``: the partition's leader and epoch in this broker's view of the metadata;
    ``led_epoch``: the epoch in which its replica manager leads the partition (None: it does not); ``caught_up``:
    whether that view is the quorum's committed metadata as of some moment after this broker started. A view
    replayed from a journal before catching up may be long out of date (another broker may lead in a later
    epoch, with records this one lacks), and a leadership not yet taken up has no ISR to wait for.
    """
    return caught_up and leader == node_id and led_epoch == leader_epoch
