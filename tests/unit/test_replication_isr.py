"""PartitionLeaderState: high watermark, ISR membership, lag, epoch fencing, proposals (a fake clock)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.cluster.isr import UNKNOWN_OFFSET, PartitionLeaderState

LAG_S = 10.0
LEADER = 1


def leader_state(*, replicas=(1, 2, 3), isr=(1, 2, 3), end=100, hw=100, epoch=5, now=0.0, **kwargs):
    return PartitionLeaderState(
        leader_id=LEADER, leader_epoch=epoch, replicas=list(replicas), isr=list(isr), leader_end_offset=end,
        high_watermark=hw, lag_time_max_s=LAG_S, now=now, **kwargs,
    )


def fetch(state, replica, offset, now, *, epoch=5, end=None):
    return state.on_follower_fetch(replica, offset, epoch, state.leader_end_offset if end is None else end, now)


def test_high_watermark_is_the_smallest_log_end_of_the_isr():
    state = leader_state(end=100, hw=100)
    assert not state.on_leader_append(120)
    assert not fetch(state, 2, 110, now=1)  # follower 3 has not reported in this epoch
    assert state.high_watermark == 100
    assert fetch(state, 3, 105, now=1)
    assert state.high_watermark == 105
    assert fetch(state, 3, 120, now=2)
    assert state.high_watermark == 110
    assert fetch(state, 2, 120, now=2)
    assert state.high_watermark == 120


def test_a_leader_alone_in_the_isr_commits_every_append_at_once():
    state = leader_state(replicas=(1, 2), isr=(1,), end=10, hw=4)
    assert state.on_leader_append(10)
    assert state.high_watermark == 10
    assert state.on_leader_append(11)
    assert state.high_watermark == 11


def test_high_watermark_never_moves_back():
    state = leader_state(end=100, hw=90)
    fetch(state, 2, 95, now=1)
    fetch(state, 3, 97, now=1)
    assert state.high_watermark == 95
    fetch(state, 2, 50, now=2)  # a restarted follower that truncated reports a smaller log end
    assert state.high_watermark == 95


def test_new_leader_keeps_its_high_watermark_until_followers_report():
    state = leader_state(end=100, hw=80)
    assert state.high_watermark == 80
    assert all(follower.log_end_offset == UNKNOWN_OFFSET for follower in state.followers.values())
    assert state.epoch_start_offset == 100
    assert state.high_watermark_lags_epoch  # offsets from it would hide what the last leader acknowledged
    fetch(state, 2, 100, now=1)
    assert state.high_watermark_lags_epoch
    fetch(state, 3, 100, now=1)
    assert (state.high_watermark, state.high_watermark_lags_epoch) == (100, False)


def test_high_watermark_is_capped_by_the_leader_log_end():
    state = leader_state(end=50, hw=70)
    assert state.high_watermark == 50


def test_fetch_from_another_epoch_changes_nothing():
    state = leader_state(replicas=(1, 2), isr=(1, 2), end=100, hw=90)
    assert not fetch(state, 2, 100, now=1, epoch=4)
    assert not fetch(state, 2, 100, now=1, epoch=6)
    assert state.high_watermark == 90
    assert state.followers[2].log_end_offset == UNKNOWN_OFFSET
    assert fetch(state, 2, 100, now=1, epoch=5)
    assert state.high_watermark == 100


def test_fetch_without_an_epoch_is_counted():
    state = leader_state(replicas=(1, 2), isr=(1, 2), end=100, hw=90)
    assert fetch(state, 2, 100, now=1, epoch=-1)
    assert state.high_watermark == 100


def test_fetch_from_a_non_replica_or_past_the_leader_end_changes_nothing():
    state = leader_state(replicas=(1, 2), isr=(1, 2), end=100, hw=90)
    assert not fetch(state, 7, 100, now=1)
    assert 7 not in state.followers
    assert not fetch(state, 2, 101, now=1)  # a divergent log longer than ours
    assert state.followers[2].log_end_offset == UNKNOWN_OFFSET
    assert state.desired_isr(now=1) is None


def test_follower_joins_when_it_reaches_the_high_watermark_and_the_epoch_start():
    state = leader_state(replicas=(1, 2, 3), isr=(1, 2), end=100, hw=100)
    fetch(state, 2, 100, now=1)
    fetch(state, 3, 60, now=1)
    assert state.desired_isr(now=1) is None
    fetch(state, 3, 99, now=2)
    assert state.desired_isr(now=2) is None
    fetch(state, 3, 100, now=3)
    assert state.desired_isr(now=3) == (1, 2, 3)


def test_follower_must_reach_the_start_of_the_current_epoch_to_join():
    # The new leader's high watermark (80) lags its log end (100): a follower at 90 has the committed data
    # but maybe not what the previous leader acknowledged up to this epoch's start.
    state = leader_state(replicas=(1, 2, 3), isr=(1, 2), end=100, hw=80)  # 2 has not fetched yet
    fetch(state, 3, 90, now=1)
    assert state.high_watermark == 80
    assert state.desired_isr(now=1) is None
    fetch(state, 3, 100, now=2)
    assert state.desired_isr(now=2) == (1, 2, 3)


def test_follower_that_stops_fetching_leaves_after_the_lag_limit():
    state = leader_state(replicas=(1, 2, 3), isr=(1, 2, 3), end=100, hw=100, now=0)
    fetch(state, 2, 100, now=1)
    fetch(state, 3, 100, now=1)
    state.on_leader_append(130)
    fetch(state, 2, 130, now=2)
    assert state.desired_isr(now=1 + LAG_S) is None
    assert state.out_of_sync_followers(now=1 + LAG_S + 0.5) == [3]
    assert state.desired_isr(now=1 + LAG_S + 0.5) == (1, 2)


def test_idle_follower_that_has_everything_stays_in_sync():
    state = leader_state(replicas=(1, 2), isr=(1, 2), end=100, hw=100, now=0)
    fetch(state, 2, 100, now=1)
    assert state.out_of_sync_followers(now=1000) == []


def test_follower_keeping_up_with_a_stream_stays_in_sync():
    """Each fetch reaches the leader's end as of the previous fetch, never the current end."""
    state = leader_state(replicas=(1, 2), isr=(1, 2), end=0, hw=0, now=0)
    end = 0
    for second in range(1, 100):
        fetch(state, 2, end, now=second, end=end + 10)
        end += 10
        assert state.out_of_sync_followers(now=second) == []
    assert state.high_watermark == end - 10


def test_follower_falling_further_behind_leaves():
    state = leader_state(replicas=(1, 2), isr=(1, 2), end=0, hw=0, now=0)
    end = 0
    follower_end = 0
    for second in range(1, 40):
        end += 10
        follower_end += 5  # replicates half of what arrives
        fetch(state, 2, follower_end, now=second, end=end)
    assert state.out_of_sync_followers(now=39) == [2]


def test_lagging_follower_rejoins_after_catching_up():
    state = leader_state(replicas=(1, 2), isr=(1, 2), end=100, hw=100, now=0)
    removal = state.begin_isr_change(state.desired_isr(now=LAG_S + 1))
    assert removal.isr == (1,)
    state.finish_isr_change(removal, committed=True, now=LAG_S + 1)
    assert state.on_leader_append(150)  # alone in the ISR: commits at once
    fetch(state, 2, 120, now=LAG_S + 2)
    assert state.desired_isr(now=LAG_S + 2) is None
    fetch(state, 2, 150, now=LAG_S + 3)
    assert state.desired_isr(now=LAG_S + 3) == (1, 2)


def test_shrink_holds_the_high_watermark_until_committed():
    state = leader_state(replicas=(1, 2, 3), isr=(1, 2, 3), end=100, hw=100, now=0)
    fetch(state, 2, 100, now=1)
    fetch(state, 3, 100, now=1)
    state.on_leader_append(200)
    fetch(state, 2, 200, now=LAG_S + 5)
    assert state.high_watermark == 100
    change = state.begin_isr_change(state.desired_isr(now=LAG_S + 5))
    assert change.isr == (1, 2)
    assert state.high_watermark == 100  # 3 is still in the maximal ISR
    assert state.desired_isr(now=LAG_S + 6) is None  # one proposal at a time
    assert state.finish_isr_change(change, committed=True, now=LAG_S + 6)
    assert state.isr == (1, 2)
    assert state.high_watermark == 200


def test_pending_expansion_counts_for_the_high_watermark():
    state = leader_state(replicas=(1, 2), isr=(1,), end=100, hw=100, now=0)
    fetch(state, 2, 100, now=1)
    change = state.begin_isr_change(state.desired_isr(now=1))
    assert state.maximal_isr == (1, 2)
    state.on_leader_append(110)
    assert state.high_watermark == 100  # waits for 2 although the committed ISR is the leader alone
    fetch(state, 2, 110, now=2)
    assert state.high_watermark == 110
    state.finish_isr_change(change, committed=True, now=2)
    assert state.isr == (1, 2)


def test_refused_proposal_is_dropped_and_retried_after_a_pause():
    state = leader_state(replicas=(1, 2), isr=(1,), end=100, hw=100, now=0, proposal_retry_s=3.0)
    fetch(state, 2, 100, now=1)
    change = state.begin_isr_change(state.desired_isr(now=1))
    assert not state.finish_isr_change(change, committed=False, now=2)
    assert state.isr == (1,)
    assert state.maximal_isr == (1,)
    assert state.desired_isr(now=4.9) is None
    assert state.desired_isr(now=5) == (1, 2)


def test_answer_to_a_superseded_proposal_is_ignored():
    state = leader_state(replicas=(1, 2, 3), isr=(1,), end=100, hw=100, now=0)
    fetch(state, 2, 100, now=1)
    change = state.begin_isr_change(state.desired_isr(now=1))
    state.update_assignment([1, 2, 3], [1, 3], now=2)  # the controller decided otherwise meanwhile
    assert state.pending_change is None
    assert not state.finish_isr_change(change, committed=True, now=3)
    assert state.isr == (1, 3)


def test_assignment_update_keeps_progress_and_tracks_new_replicas():
    state = leader_state(replicas=(1, 2), isr=(1, 2), end=100, hw=100, now=0)
    fetch(state, 2, 100, now=1)
    state.update_assignment([1, 2, 4], [1, 2], now=5)
    assert state.followers[2].log_end_offset == 100
    assert state.followers[4].log_end_offset == UNKNOWN_OFFSET
    state.update_assignment([1, 4], [1, 4], now=6)
    assert set(state.followers) == {4}
    assert state.isr == (1, 4)


def test_leader_is_always_in_the_isr():
    state = leader_state(replicas=(1, 2), isr=(2,), end=10, hw=10)
    assert state.isr == (1, 2)


def test_min_insync_replicas_counts_the_committed_isr():
    state = leader_state(replicas=(1, 2, 3), isr=(1, 2), end=100, hw=100, now=0)
    assert state.has_enough_replicas(2)
    assert not state.has_enough_replicas(3)
    fetch(state, 3, 100, now=1)
    state.begin_isr_change(state.desired_isr(now=1))
    assert not state.has_enough_replicas(3)  # proposed, not committed


operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 5)),
        st.tuples(st.just("fetch"), st.sampled_from([2, 3, 4]), st.integers(-5, 5), st.sampled_from([-1, 4, 5, 6])),
        st.tuples(st.just("tick"), st.floats(0, 2 * LAG_S)),
        st.tuples(st.just("propose")),
        st.tuples(st.just("answer"), st.booleans()),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(operations)
def test_invariants_under_random_operations(ops):
    """The high watermark never moves back, never passes the leader's end or any maximal-ISR member's
    reported end; the leader never leaves the ISR; a follower only joins at or past the high watermark."""
    now = 0.0
    state = leader_state(replicas=(1, 2, 3), isr=(1, 2), end=20, hw=20, now=now)
    change = None
    for op in ops:
        before = state.high_watermark
        if op[0] == "append":
            state.on_leader_append(state.leader_end_offset + op[1])
        elif op[0] == "fetch":
            _, replica, delta, epoch = op
            follower = state.followers.get(replica)
            base = follower.log_end_offset if follower and follower.log_end_offset >= 0 else state.high_watermark
            offset = max(0, min(base + abs(delta), state.leader_end_offset + (1 if delta < 0 else 0)))
            state.on_follower_fetch(replica, offset, epoch, state.leader_end_offset, now)
        elif op[0] == "tick":
            now += op[1]
        elif op[0] == "propose":
            desired = state.desired_isr(now)
            if desired is not None:
                joining = set(desired) - set(state.isr)
                assert all(state.followers[r].log_end_offset >= state.high_watermark for r in joining)
                change = state.begin_isr_change(desired)
        elif op[0] == "answer" and change is not None:
            state.finish_isr_change(change, op[1], now)
            change = None
        assert state.high_watermark >= before
        assert state.high_watermark <= state.leader_end_offset
        assert LEADER in state.isr and LEADER in state.maximal_isr
        assert set(state.isr) <= {1, 2, 3}
        if state.high_watermark > before:
            for replica in state.maximal_isr:
                if replica != LEADER:
                    assert state.followers[replica].log_end_offset >= state.high_watermark
