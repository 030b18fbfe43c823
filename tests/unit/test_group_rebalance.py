"""The classic rebalance protocol of the pure group machine, state by state, with a fake clock."""

from __future__ import annotations

from group_harness import CONFIG, Harness, assignment, subscription

from broker.errors import ErrorCode
from broker.groups.machine import GroupConfig
from broker.groups.state import GroupState

E = ErrorCode
DELAY = CONFIG.initial_rebalance_delay_ms


# --- joining ---------------------------------------------------------------------------------------------


def test_single_member_join_sync_stable():
    h = Harness()
    first = h.join(require_known=True)
    assert first[0].error == E.MEMBER_ID_REQUIRED
    member_id = first[0].member_id
    assert member_id.startswith("client-")
    assert h.state() == "Empty"  # a handed-out id is not a member yet

    joined = h.join(member_id=member_id, require_known=True)
    assert joined == [] and h.state() == "PreparingRebalance"  # the initial delay runs first
    h.advance(DELAY - 1)
    assert joined == []
    h.advance(1)
    result = joined[0]
    assert (result.error, result.member_id, result.generation_id, result.leader_id) == (
        E.NONE,
        member_id,
        1,
        member_id,
    )
    assert result.protocol_type == "consumer" and result.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in result.members] == [(member_id, subscription("t"))]
    assert h.state() == "CompletingRebalance"

    synced = h.sync("g", member_id, 1, {member_id: assignment(("t", [0, 1]))})
    assert synced[0].error == E.NONE and synced[0].assignment == assignment(("t", [0, 1]))
    assert h.state() == "Stable"
    stored = h.log.group_values("g")[-1]
    assert stored.generation == 1 and stored.leader == member_id and stored.protocol == "range"
    assert [(m.member_id, m.assignment) for m in stored.members] == [(member_id, assignment(("t", [0, 1])))]


def test_three_members_share_one_generation_and_only_the_leader_gets_metadata():
    h = Harness()
    a = h.join(client_id="a")
    h.advance(1000)
    b = h.join(client_id="b")
    h.advance(1000)
    c = h.join(client_id="c")
    # A member joined during the first delay of a new group: another delay follows.
    h.advance(DELAY - 2000)
    assert a == b == c == []
    h.advance(DELAY)
    results = [a[0], b[0], c[0]]
    assert {r.generation_id for r in results} == {1}
    assert {r.leader_id for r in results} == {a[0].member_id}
    assert len(a[0].members) == 3 and b[0].members == () and c[0].members == ()

    ids = [r.member_id for r in results]
    follower_sync = h.sync("g", ids[1], 1)
    assert follower_sync == []  # waits for the leader's assignment
    leader_sync = h.sync("g", ids[0], 1, {ids[0]: b"A", ids[1]: b"B"})
    late_sync = h.sync("g", ids[2], 1)
    assert leader_sync[0].assignment == b"A" and follower_sync[0].assignment == b"B"
    assert late_sync[0].assignment == b""  # the leader left it out
    assert h.state() == "Stable"


def test_initial_delay_is_bounded_by_the_rebalance_timeout():
    h = Harness()
    first = h.join(rebalance_ms=5000)  # budget: 3000 delay, then at most 2000 more
    h.advance(2000)
    h.join(rebalance_ms=5000)
    h.advance(1000)
    assert first == []
    h.join(rebalance_ms=5000)
    h.advance(2000)
    assert first and first[0].generation_id == 1


def test_protocol_is_chosen_by_votes_among_those_everyone_supports():
    h = Harness()
    a = h.join(protocols=(("range", None), ("roundrobin", None), ("sticky", None)))
    h.join(protocols=(("roundrobin", None), ("range", None)))
    h.join(protocols=(("roundrobin", None), ("range", None), ("sticky", None)))
    h.finish_initial_delay(a)
    assert a[0].protocol_name == "roundrobin"


def test_inconsistent_protocols_are_refused():
    h = Harness()
    h.join(protocols=(("range", None),))
    assert h.join(protocols=(("roundrobin", None),))[0].error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(protocol_type="connect")[0].error == E.INCONSISTENT_GROUP_PROTOCOL
    assert Harness().join(protocols=())[0].error == E.INCONSISTENT_GROUP_PROTOCOL
    assert Harness().join(protocol_type="")[0].error == E.INCONSISTENT_GROUP_PROTOCOL


def test_a_protocol_listed_twice_by_one_member_is_not_supported_by_every_member():
    """Counted once per member: else a second member without "roundrobin" would be let in, and the rebalance
    would find no protocol at all every member supports."""
    h = Harness()
    a = h.join(protocols=(("roundrobin", None), ("roundrobin", None)))
    assert h.join(protocols=(("range", None),))[0].error == E.INCONSISTENT_GROUP_PROTOCOL
    b = h.join(protocols=(("range", None), ("roundrobin", None)))
    h.finish_initial_delay(a)
    assert a[0].error == b[0].error == E.NONE
    assert a[0].protocol_name == b[0].protocol_name == "roundrobin"


def test_a_group_id_too_long_for_the_offsets_topic_is_refused_before_anything_changes():
    """32767 bytes of invalid UTF-8 decode to three times as many: no `__consumer_offsets` key can hold the id."""
    too_long = "\ufffd" * 0x7FFF
    h = Harness()
    assert h.join(group=too_long)[0].error == E.INVALID_GROUP_ID
    assert h.sync(too_long, "m", 1)[0].error == E.INVALID_GROUP_ID
    assert h.commit(too_long, {("t", 0): 5})[0] == {("t", 0): E.INVALID_GROUP_ID}
    assert h.machine.group(too_long) is None
    longest = "\ufffd" * (0x7FFF // 3)  # the longest id that fits is a group like any other
    assert [a.error for a in h.join(group=longest)] in ([], [E.NONE], [E.MEMBER_ID_REQUIRED])
    assert h.machine.group(longest) is not None


def test_join_errors():
    h = Harness()
    assert h.join(group="")[0].error == E.INVALID_GROUP_ID
    assert h.join(session_ms=CONFIG.min_session_timeout_ms - 1)[0].error == E.INVALID_SESSION_TIMEOUT
    assert h.join(session_ms=CONFIG.max_session_timeout_ms + 1)[0].error == E.INVALID_SESSION_TIMEOUT
    assert h.join(member_id="nobody")[0].error == E.UNKNOWN_MEMBER_ID
    assert h.machine.group("g") is None  # failed requests leave no group behind
    h.stable_group()
    assert h.join(member_id="nobody")[0].error == E.UNKNOWN_MEMBER_ID


def test_not_coordinator_and_loading():
    h = Harness(own_all=False)
    partition = h.machine.partition_for("g")
    assert h.join()[0].error == E.NOT_COORDINATOR
    h.machine.begin_loading(partition)
    assert h.join()[0].error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.heartbeat("g", "m", 1) == E.NONE  # Kafka answers heartbeats blindly while loading
    assert h.sync("g", "m", 1)[0].error == E.REBALANCE_IN_PROGRESS
    h.machine.finish_loading(partition)
    assert h.machine.owns("g")
    assert h.join() == []


def test_rejoin_during_completing_rebalance_with_same_metadata_returns_current_generation():
    h = Harness()
    a = h.join()
    h.advance(DELAY)
    leader = a[0].member_id
    again = h.join(member_id=leader)
    assert again[0].generation_id == 1 and len(again[0].members) == 1
    assert h.state() == "CompletingRebalance"
    changed = h.join(member_id=leader, protocols=(("range", subscription("t", "u")),))
    # new metadata: a rebalance, which completes at once since every member (the only one) rejoined
    assert changed[0].generation_id == 2 and h.state() == "CompletingRebalance"


def test_follower_rejoin_in_stable_without_changes_does_not_rebalance():
    h = Harness()
    leader, follower = h.stable_group(count=2)
    same = h.join(member_id=follower)
    assert same[0].generation_id == 1 and same[0].members == ()
    assert h.state() == "Stable"
    assert h.join(member_id=leader) == [] and h.state() == "PreparingRebalance"


# --- syncing ---------------------------------------------------------------------------------------------------


def test_sync_errors():
    h = Harness()
    assert h.sync("g", "m", 1)[0].error == E.UNKNOWN_MEMBER_ID
    assert h.sync("", "m", 1)[0].error == E.INVALID_GROUP_ID
    leader, follower = h.stable_group(count=2)
    assert h.sync("g", "nobody", 1)[0].error == E.UNKNOWN_MEMBER_ID
    assert h.sync("g", leader, 7)[0].error == E.ILLEGAL_GENERATION
    assert h.sync("g", leader, 1, protocol_type="connect")[0].error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync("g", leader, 1, protocol_name="sticky")[0].error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync("g", leader, 1, protocol_type="consumer", protocol_name="range")[0].error == E.NONE
    h.join(member_id=leader)
    assert h.sync("g", follower, 1)[0].error == E.REBALANCE_IN_PROGRESS


def test_waiting_syncs_are_told_to_rejoin_when_a_member_joins():
    h = Harness()
    a = h.join()
    b = h.join()
    h.finish_initial_delay(a, b)
    waiting = h.sync("g", b[0].member_id, 1)
    assert waiting == []
    h.join()
    assert waiting[0].error == E.REBALANCE_IN_PROGRESS
    assert h.state() == "PreparingRebalance"
    assert a[0].leader_id == a[0].member_id


def test_assignment_is_given_out_only_after_it_is_written():
    h = Harness(auto_append=False)
    a = h.join()
    h.advance(DELAY)
    synced = h.sync("g", a[0].member_id, 1, {a[0].member_id: b"x"})
    assert synced == [] and h.state() == "CompletingRebalance" and len(h.log.waiting) == 1
    h.log.complete()
    assert synced[0].assignment == b"x" and h.state() == "Stable"


def test_failed_assignment_write_fails_the_sync_and_rebalances():
    h = Harness(auto_append=False)
    a = h.join()
    b = h.join()
    h.finish_initial_delay(a, b)
    follower = h.sync("g", b[0].member_id, 1)
    leader = h.sync("g", a[0].member_id, 1, {a[0].member_id: b"x", b[0].member_id: b"y"})
    h.log.complete(E.NOT_ENOUGH_REPLICAS)
    assert leader[0].error == follower[0].error == E.COORDINATOR_NOT_AVAILABLE
    assert h.state() == "PreparingRebalance"


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout():
    h = Harness()
    a = h.join(rebalance_ms=20000)
    b = h.join(rebalance_ms=20000)
    h.finish_initial_delay(a, b)
    h.sync("g", a[0].member_id, 1, {})
    assert h.state() == "Stable"
    for _ in range(2):  # both heartbeat, so no session expires
        h.advance(9000)
        assert h.heartbeat("g", a[0].member_id, 1) == h.heartbeat("g", b[0].member_id, 1) == E.NONE
    h.advance(2000)  # b got its JoinGroup answer 20 s ago and never sent SyncGroup
    group = h.machine.group("g")
    assert set(group.members) == {a[0].member_id}
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat("g", b[0].member_id, 1) == E.UNKNOWN_MEMBER_ID


# --- heartbeats and sessions -------------------------------------------------------------------------------------


def test_heartbeat_answers():
    h = Harness()
    assert h.heartbeat("g", "m", 0) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("", "m", 0) == E.INVALID_GROUP_ID
    leader, follower = h.stable_group(count=2)
    assert h.heartbeat("g", leader, 1) == E.NONE
    assert h.heartbeat("g", leader, 2) == E.ILLEGAL_GENERATION
    assert h.heartbeat("g", "nobody", 1) == E.UNKNOWN_MEMBER_ID
    h.join(member_id=leader)
    assert h.heartbeat("g", follower, 1) == E.REBALANCE_IN_PROGRESS


def test_heartbeat_in_completing_rebalance_is_fine():
    h = Harness()
    a = h.join()
    h.advance(DELAY)
    assert h.state() == "CompletingRebalance"
    assert h.heartbeat("g", a[0].member_id, 1) == E.NONE


def test_session_timeout_expels_a_member_and_rebalances():
    h = Harness()
    leader, follower = h.stable_group(count=2, session_ms=10000)
    for _ in range(2):
        h.advance(4000)
        assert h.heartbeat("g", leader, 1) == E.NONE
    h.advance(1999)
    assert h.state() == "Stable"
    h.advance(1)  # the follower's session (10 s since its sync) has expired
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat("g", follower, 1) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("g", leader, 1) == E.REBALANCE_IN_PROGRESS
    rejoined = h.join(member_id=leader)
    assert rejoined[0].generation_id == 2 and [m.member_id for m in rejoined[0].members] == [leader]


def test_session_does_not_expire_while_waiting_for_the_rebalance():
    h = Harness()
    leader, follower = h.stable_group(count=2, session_ms=6000, rebalance_ms=60000)
    h.join(member_id=leader)
    waiting = h.join(member_id=follower)
    assert waiting != []  # everyone rejoined: generation 2 at once
    h2 = Harness()
    leader, follower = h2.stable_group(count=2, session_ms=6000, rebalance_ms=60000)
    joined = h2.join(member_id=leader)
    for _ in range(5):
        h2.advance(5000)
        assert h2.heartbeat("g", follower, 1) == E.REBALANCE_IN_PROGRESS
    assert joined == [] and set(h2.machine.group("g").members) == {leader, follower}


def test_rebalance_timeout_drops_members_that_do_not_rejoin():
    h = Harness()
    leader, follower = h.stable_group(count=2, session_ms=30000, rebalance_ms=20000)
    rejoined = h.join(member_id=leader, rebalance_ms=20000)
    h.advance(19999)
    assert rejoined == []
    assert h.heartbeat("g", follower, 1) == E.REBALANCE_IN_PROGRESS  # alive, but does not rejoin
    h.advance(1)
    assert rejoined[0].generation_id == 2 and [m.member_id for m in rejoined[0].members] == [leader]
    assert h.heartbeat("g", follower, 1) == E.UNKNOWN_MEMBER_ID


def test_new_leader_is_elected_when_the_leader_does_not_rejoin():
    h = Harness()
    leader, follower = h.stable_group(count=2, session_ms=30000, rebalance_ms=20000)
    rejoined = h.join(member_id=follower, protocols=(("range", subscription("t", "u")),), rebalance_ms=20000)
    h.advance(20000)
    assert rejoined[0].leader_id == follower and rejoined[0].generation_id == 2


def test_a_member_id_that_is_never_used_expires():
    h = Harness()
    handed_out = h.join(require_known=True, session_ms=10000)[0].member_id
    assert h.machine.group("g").pending_members == {handed_out}
    h.advance(10000)
    assert h.machine.group("g") is None
    assert h.join(member_id=handed_out)[0].error == E.UNKNOWN_MEMBER_ID


def test_a_pending_member_holds_back_the_rebalance_until_it_joins():
    h = Harness()
    (leader,) = h.stable_group()
    handed_out = h.join(require_known=True)[0].member_id
    assert h.state() == "Stable"  # a pending member does not trigger a rebalance
    rejoin = h.join(member_id=leader)
    assert rejoin == []  # all members rejoined, but one handed-out id has not joined yet
    newcomer = h.join(member_id=handed_out)
    assert rejoin[0].generation_id == newcomer[0].generation_id == 2


def test_new_member_that_never_completes_a_join_is_dropped_after_the_join_timeout():
    config = GroupConfig(initial_rebalance_delay_ms=3000, new_member_join_timeout_ms=60000)
    h = Harness(config)
    leader, follower = h.stable_group(count=2, session_ms=300000, rebalance_ms=300000)
    h.join(member_id=leader, session_ms=300000, rebalance_ms=300000)
    newcomer = h.join(session_ms=300000, rebalance_ms=300000)
    h.advance(60000)
    assert newcomer[0].error == E.UNKNOWN_MEMBER_ID


# --- leaving ---------------------------------------------------------------------------------------------------


def test_leave_rebalances_and_the_last_leave_empties_the_group():
    h = Harness()
    leader, follower = h.stable_group(count=2)
    assert h.machine.leave_group("g", [(follower, None)]) == (E.NONE, [E.NONE])
    assert h.state() == "PreparingRebalance"
    rejoined = h.join(member_id=leader)
    assert rejoined[0].generation_id == 2
    h.sync("g", leader, 2, {leader: b"all"})
    assert h.machine.leave_group("g", [(leader, None)]) == (E.NONE, [E.NONE])
    assert h.state() == "Empty" and h.machine.group("g").generation_id == 3
    empty = h.log.group_values("g")[-1]
    assert (empty.generation, empty.protocol, empty.leader, empty.members) == (3, None, None, ())
    assert empty.protocol_type == "consumer"


def test_leave_errors():
    h = Harness()
    assert h.machine.leave_group("g", [("m", None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])
    assert h.machine.leave_group("", [("m", None)]) == (E.INVALID_GROUP_ID, [])
    h.stable_group(count=1, instance_ids=["i1"])
    assert h.machine.leave_group("g", [("nobody", None), ("", "unknown-instance"), ("other", "i1")]) == (
        E.NONE,
        [E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID],
    )
    # administrative removal of a static member by instance id alone
    assert h.machine.leave_group("g", [("", "i1")]) == (E.NONE, [E.NONE])
    assert h.state() == "Empty"


def test_leaving_while_waiting_for_join_answers_the_join():
    h = Harness()
    a = h.join()
    b = h.join()
    h.finish_initial_delay(a, b)
    h.sync("g", a[0].member_id, 1, {})
    waiting = h.join(member_id=b[0].member_id, protocols=(("range", subscription("x")),))
    h.machine.leave_group("g", [(b[0].member_id, None)])
    assert waiting[0].error == E.UNKNOWN_MEMBER_ID


# --- static membership ----------------------------------------------------------------------------------------


def test_static_member_restart_takes_its_seat_without_rebalance():
    h = Harness()
    leader, follower = h.stable_group(count=2, instance_ids=["i1", "i2"])
    records_before = len(h.log.appends)
    restarted = h.join(instance_id="i2")
    result = restarted[0]
    assert result.error == E.NONE and result.member_id != follower and result.member_id.startswith("i2-")
    assert result.generation_id == 1 and result.leader_id == leader and result.members == ()
    assert h.state() == "Stable"
    assert len(h.log.appends) == records_before + 1  # the new member id is written
    assert [m.member_id for m in h.log.group_values("g")[-1].members] == [leader, result.member_id]
    # the old incarnation is fenced; the new one gets the old seat's assignment
    assert h.heartbeat("g", follower, 1, instance_id="i2") == E.FENCED_INSTANCE_ID
    assert h.sync("g", result.member_id, 1, instance_id="i2")[0].assignment == assignment(("t", [1]))
    assert h.heartbeat("g", result.member_id, 1, instance_id="i2") == E.NONE


def test_static_leader_restart_is_not_told_it_leads():
    h = Harness()
    leader, follower = h.stable_group(count=2, instance_ids=["i1", "i2"])
    restarted = h.join(instance_id="i1")[0]
    assert restarted.leader_id == leader != restarted.member_id
    assert h.machine.group("g").leader_id == restarted.member_id


def test_static_member_restart_with_another_protocol_rebalances():
    h = Harness()
    h.stable_group(count=1, instance_ids=["i1"])
    # the group's protocol must still be offered, but the only member now prefers another one
    restarted = h.join(instance_id="i1", protocols=(("roundrobin", None), ("range", None)))
    assert restarted[0].protocol_name == "roundrobin" and restarted[0].generation_id == 2
    assert h.join(instance_id="i1", protocols=(("sticky", None),))[0].error == E.INCONSISTENT_GROUP_PROTOCOL


def test_static_member_restart_during_completing_rebalance_rebalances():
    h = Harness()
    a = h.join(instance_id="i1")
    b = h.join(instance_id="i2")
    h.finish_initial_delay(a, b)
    waiting = h.sync("g", b[0].member_id, 1, instance_id="i2")
    restarted = h.join(instance_id="i2")
    assert waiting[0].error == E.FENCED_INSTANCE_ID
    assert h.state() == "PreparingRebalance"
    h.join(member_id=a[0].member_id, instance_id="i1")
    assert restarted[0].generation_id == 2


def test_static_member_restart_fails_cleanly_when_the_write_fails():
    h = Harness()
    leader, follower = h.stable_group(count=2, instance_ids=["i1", "i2"])
    h.log.fail_with = E.NOT_LEADER_OR_FOLLOWER
    restarted = h.join(instance_id="i2")
    assert restarted[0].error == E.NOT_COORDINATOR
    assert h.heartbeat("g", follower, 1, instance_id="i2") == E.NONE  # the old incarnation keeps its seat


def test_static_members_are_not_dropped_by_the_rebalance_timeout():
    h = Harness()
    leader, follower = h.stable_group(
        count=2, instance_ids=["i1", "i2"], session_ms=60000, rebalance_ms=10000
    )
    rejoined = h.join(member_id=leader, instance_id="i1", session_ms=60000, rebalance_ms=10000)
    h.advance(10000)
    assert rejoined[0].generation_id == 2 and len(rejoined[0].members) == 2
    assert follower in h.machine.group("g").members


def test_static_join_with_unknown_instance_and_known_member_id():
    h = Harness()
    (leader,) = h.stable_group(count=1, instance_ids=["i1"])
    assert h.join(member_id="x", instance_id="i1")[0].error == E.FENCED_INSTANCE_ID
    assert h.join(member_id=leader, instance_id="i9")[0].error == E.UNKNOWN_MEMBER_ID
    assert h.state() == "Stable"


def test_group_states_follow_kafkas_diagram():
    h = Harness()
    group_states = []
    a = h.join()
    group_states.append(h.state())
    h.advance(DELAY)
    group_states.append(h.state())
    h.sync("g", a[0].member_id, 1, {})
    group_states.append(h.state())
    h.machine.leave_group("g", [(a[0].member_id, None)])
    group_states.append(h.state())
    assert group_states == ["PreparingRebalance", "CompletingRebalance", "Stable", "Empty"]
    assert h.machine.group("g").state is GroupState.EMPTY


def test_group_max_size_refuses_new_members_and_keeps_the_others():
    """group.max.size 2: once two are members, a third gets GROUP_MAX_SIZE_REACHED, before a member id as on
    Kafka, and so does one that was handed an id while there was room; the members rejoin as before."""
    from dataclasses import replace

    h = Harness(replace(CONFIG, group_max_size=2))
    a = h.join(client_id="a")
    while not a:  # the initial delay
        h.advance(DELAY)
    required = h.join(client_id="d", require_known=True)[0]
    assert required.error == E.MEMBER_ID_REQUIRED  # one member: room for another
    h.join(client_id="b")
    assert h.join(client_id="c")[0].error == E.GROUP_MAX_SIZE_REACHED
    assert h.join(member_id=required.member_id, client_id="d")[0].error == E.GROUP_MAX_SIZE_REACHED
    h.join(member_id=a[0].member_id, client_id="a")
    assert h.state() == "CompletingRebalance" and len(h.machine._groups["g"].members) == 2
