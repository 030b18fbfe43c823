"""Committed offsets in the pure group machine: commit validation, fetch, expiry, deletion, listing, replay."""

from __future__ import annotations

from dataclasses import replace

from group_harness import CONFIG, Harness, subscription

from broker.errors import ErrorCode
from broker.groups.requests import CommitRequest, PartitionCommit
from broker.protocol.consumer_offsets import GroupMetadataKey, OffsetCommitKey

E = ErrorCode
DAY = 24 * 3600 * 1000
RETENTION = CONFIG.offsets_retention_ms
CHECK = CONFIG.retention_check_interval_ms
TP = ("t", 0)


# --- commits ----------------------------------------------------------------------------------------------


def test_standalone_commit_creates_an_empty_group_and_is_answered_after_the_append():
    h = Harness(auto_append=False)
    answers = h.commit("simple", {("t", 0): 10, ("t", 1): 20})
    assert answers == [] and h.committed("simple", ("t", 0)) is None  # not visible before it is written
    ((partition, batch),) = h.log.appends
    assert partition == h.machine.partition_for("simple") and len(batch) == 2
    h.log.complete()
    assert answers == [{("t", 0): E.NONE, ("t", 1): E.NONE}]
    assert h.committed("simple", ("t", 1)) == 20
    group = h.machine.group("simple")
    assert group.state.value == "Empty" and group.protocol_type is None and group.generation_id == 0
    (_, key, value), _ = h.log.decoded()
    assert key == OffsetCommitKey("simple", "t", 0)
    assert (value.offset, value.leader_epoch, value.commit_timestamp) == (10, 5, h.clock.now)


def test_failed_append_is_not_visible_and_maps_the_error():
    h = Harness()
    h.log.fail_with = E.NOT_ENOUGH_REPLICAS
    assert h.commit("g", {TP: 1}) == [{TP: E.COORDINATOR_NOT_AVAILABLE}]
    assert h.machine.group("g") is None
    h.log.fail_with = E.MESSAGE_TOO_LARGE
    h.commit("g", {TP: 1})
    assert h.commit("g", {TP: 1}) == [{TP: E.INVALID_COMMIT_OFFSET_SIZE}]
    h.log.fail_with = E.NOT_LEADER_OR_FOLLOWER
    assert h.commit("g", {TP: 1}) == [{TP: E.NOT_COORDINATOR}]


def test_member_commits_are_validated():
    h = Harness()
    leader, follower = h.stable_group(count=2)
    assert h.commit("g", {TP: 1}, generation=1, member_id=leader) == [{TP: E.NONE}]
    assert h.commit("g", {TP: 1}) == [{TP: E.UNKNOWN_MEMBER_ID}]  # simple commit into a live group
    assert h.commit("g", {TP: 1}, generation=2, member_id=leader) == [{TP: E.ILLEGAL_GENERATION}]
    assert h.commit("g", {TP: 1}, generation=1, member_id="nobody") == [{TP: E.UNKNOWN_MEMBER_ID}]
    assert h.commit("g", {TP: 1}, generation=1, member_id=leader, instance_id="i") == [
        {TP: E.UNKNOWN_MEMBER_ID}
    ]
    assert h.commit("nothing", {TP: 1}, generation=3, member_id="m") == [{TP: E.ILLEGAL_GENERATION}]
    # PreparingRebalance still takes commits of the current generation
    h.join(member_id=leader, protocols=(("range", subscription("t", "u")),))
    assert h.state() == "PreparingRebalance"
    assert h.commit("g", {TP: 2}, generation=1, member_id=follower) == [{TP: E.NONE}]
    # CompletingRebalance does not: the member has not got its assignment yet
    h.join(member_id=follower)
    assert h.state() == "CompletingRebalance"
    assert h.commit("g", {TP: 3}, generation=2, member_id=follower) == [{TP: E.REBALANCE_IN_PROGRESS}]
    assert h.committed("g", TP) == 2


def test_static_member_commit_validation():
    h = Harness()
    (leader,) = h.stable_group(instance_ids=["i1"])
    assert h.commit("g", {TP: 1}, generation=1, member_id=leader, instance_id="i1") == [{TP: E.NONE}]
    assert h.commit("g", {TP: 1}, generation=1, member_id="zombie", instance_id="i1") == [
        {TP: E.FENCED_INSTANCE_ID}
    ]


def test_metadata_too_large_fails_only_that_partition():
    h = Harness()
    big = "x" * (CONFIG.offset_metadata_max_bytes + 1)
    answers = []
    h.machine.commit_offsets(
        CommitRequest(
            "g",
            -1,
            "",
            None,
            {("t", 0): PartitionCommit(1, metadata=big), ("t", 1): PartitionCommit(2, metadata=None)},
        ),
        answers.append,
    )
    assert answers == [{("t", 0): E.OFFSET_METADATA_TOO_LARGE, ("t", 1): E.NONE}]
    error, offsets = h.machine.fetch_offsets("g", None)
    assert list(offsets) == [("t", 1)] and offsets[("t", 1)].metadata == ""


def test_commit_keeps_a_member_alive():
    h = Harness()
    (leader,) = h.stable_group(session_ms=10000)
    for _ in range(5):
        h.advance(6000)
        assert h.commit("g", {TP: 1}, generation=1, member_id=leader) == [{TP: E.NONE}]
    assert h.state() == "Stable"


def test_commit_errors_for_groups_we_do_not_coordinate():
    h = Harness(own_all=False)
    assert h.commit("g", {TP: 1}) == [{TP: E.NOT_COORDINATOR}]
    h.machine.begin_loading(h.machine.partition_for("g"))
    assert h.commit("g", {TP: 1}) == [{TP: E.COORDINATOR_LOAD_IN_PROGRESS}]
    assert h.machine.fetch_offsets("g", [TP]) == (E.COORDINATOR_LOAD_IN_PROGRESS, {})


# --- fetch ------------------------------------------------------------------------------------------------


def test_fetch_unknown_offsets_and_whole_group():
    h = Harness()
    assert h.machine.fetch_offsets("nobody", [TP]) == (E.NONE, {TP: None})
    assert h.machine.fetch_offsets("nobody", None) == (E.NONE, {})
    h.commit("g", {("a", 0): 1, ("b", 3): 4})
    error, offsets = h.machine.fetch_offsets("g", None)
    assert {tp: o.offset for tp, o in offsets.items()} == {("a", 0): 1, ("b", 3): 4}
    assert h.machine.fetch_offsets("g", [("a", 1)]) == (E.NONE, {("a", 1): None})


def test_a_later_commit_wins():
    h = Harness(auto_append=False)
    h.commit("g", {TP: 1})
    h.commit("g", {TP: 2})
    h.log.complete()
    assert h.committed("g", TP) == 2


# --- expiry -----------------------------------------------------------------------------------------------


def test_standalone_offsets_expire_retention_after_their_commit():
    h = Harness()
    h.commit("s", {("t", 0): 1})
    h.advance(DAY // 2)
    h.commit("s", {("t", 1): 1})
    h.advance(DAY // 2)  # the retention check runs every 10 minutes; ("t", 0) is a day old now
    assert h.committed("s", ("t", 0)) is None and h.committed("s", ("t", 1)) == 1
    assert (h.machine.partition_for("s"), OffsetCommitKey("s", "t", 0), None) in h.log.decoded()
    h.advance(DAY // 2)
    assert h.machine.group("s") is None
    # a group that never had a generation gets no group tombstone
    assert not [k for _, k, _ in h.log.decoded() if isinstance(k, GroupMetadataKey)]


def test_consumer_group_offsets_expire_retention_after_the_group_became_empty():
    h = Harness()
    (leader,) = h.stable_group()
    h.commit("g", {TP: 7}, generation=1, member_id=leader)
    h.advance(2 * DAY)  # old commits do not expire while the group is Stable and subscribed to them
    assert h.heartbeat("g", leader, 1) == E.UNKNOWN_MEMBER_ID  # (its session ran out long ago)
    assert h.state() == "Empty" and h.committed("g", TP) == 7
    h.advance(RETENTION - CHECK)
    assert h.committed("g", TP) == 7
    h.advance(CHECK)
    assert h.committed("g", TP) is None and h.machine.group("g") is None
    tombstones = [k for _, k, v in h.log.decoded() if v is None]
    assert tombstones == [OffsetCommitKey("g", "t", 0), GroupMetadataKey("g")]


def test_stable_consumer_group_expires_offsets_of_topics_it_no_longer_consumes():
    h = Harness(CONFIG)
    (leader,) = h.stable_group(topics=("t",), session_ms=300000)
    h.commit("g", {("t", 0): 1, ("old", 0): 2}, generation=1, member_id=leader)
    for _ in range(int(RETENTION // 200000) + 1):
        h.advance(200000)
        h.heartbeat("g", leader, 1)
    assert h.state() == "Stable"
    assert h.committed("g", ("t", 0)) == 1 and h.committed("g", ("old", 0)) is None


def test_explicit_retention_time_sets_an_expire_timestamp():
    h = Harness()
    h.commit("s", {TP: 1}, retention_ms=CHECK)
    ((_, _, value),) = h.log.decoded()
    assert value.expire_timestamp == h.clock.now + CHECK
    h.advance(CHECK)
    assert h.committed("s", TP) is None


def test_empty_groups_without_offsets_are_removed_with_a_tombstone():
    h = Harness()
    (leader,) = h.stable_group()
    h.machine.leave_group("g", [(leader, None)])
    h.advance(CHECK)
    assert h.machine.group("g") is None
    assert h.log.decoded()[-1][1:] == (GroupMetadataKey("g"), None)


# --- deletion ---------------------------------------------------------------------------------------------


def test_delete_groups():
    h = Harness()
    h.stable_group("live")
    (leader,) = h.stable_group("done")
    h.commit("done", {("t", 0): 1, ("t", 1): 2}, generation=1, member_id=leader)
    h.machine.leave_group("done", [(leader, None)])
    h.commit("simple", {TP: 1})
    answers = []
    h.machine.delete_groups(["live", "done", "simple", "nobody", ""], answers.append)
    assert answers == [
        {
            "live": E.NON_EMPTY_GROUP,
            "done": E.NONE,
            "simple": E.NONE,
            "nobody": E.GROUP_ID_NOT_FOUND,
            "": E.GROUP_ID_NOT_FOUND,
        }
    ]
    assert h.machine.group("done") is None and h.machine.group("simple") is None
    assert h.committed("done", ("t", 1)) is None
    tombstones = {k for _, k, v in h.log.decoded() if v is None}
    assert tombstones == {
        OffsetCommitKey("done", "t", 0),
        OffsetCommitKey("done", "t", 1),
        GroupMetadataKey("done"),
        OffsetCommitKey("simple", "t", 0),
    }


def test_delete_groups_answers_after_the_tombstones_are_written():
    h = Harness(auto_append=False)
    h.commit("simple", {TP: 1})
    h.log.complete()
    answers = []
    h.machine.delete_groups(["simple"], answers.append)
    assert answers == []
    h.log.complete()
    assert answers == [{"simple": E.NONE}]


def test_offset_delete():
    h = Harness()
    (leader,) = h.stable_group(topics=("t",))
    h.commit("g", {("t", 0): 1, ("u", 0): 2}, generation=1, member_id=leader)
    answers = []
    h.machine.delete_offsets("g", [("t", 0), ("u", 0)], lambda *a: answers.append(a))
    assert answers == [(E.NONE, {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): E.NONE})]
    assert h.committed("g", ("t", 0)) == 1 and h.committed("g", ("u", 0)) is None
    assert h.log.decoded()[-1][1:] == (OffsetCommitKey("g", "u", 0), None)

    h.machine.delete_offsets("nobody", [TP], lambda *a: answers.append(a))
    assert answers[-1] == (E.GROUP_ID_NOT_FOUND, {})
    h.machine.leave_group("g", [(leader, None)])
    h.machine.delete_offsets("g", [("t", 0)], lambda *a: answers.append(a))
    assert answers[-1] == (E.NONE, {("t", 0): E.NONE})
    # Empty with no offsets left: kept until the periodic cleanup, as Kafka 4 does, so DeleteGroups finds it
    assert h.machine.group("g") is not None
    h.machine.expire_offsets()
    assert h.machine.group("g") is None


def test_offset_delete_in_a_live_non_consumer_group():
    h = Harness()
    h.join(protocol_type="connect")
    answers = []
    h.machine.delete_offsets("g", [TP], lambda *a: answers.append(a))
    assert answers == [(E.NON_EMPTY_GROUP, {})]


def test_a_commit_in_flight_does_not_resurrect_a_deleted_offset():
    h = Harness(auto_append=False)
    h.commit("s", {TP: 1, ("t", 1): 1})  # ("t", 1) keeps the group alive after the deletion
    h.log.complete()
    late = h.commit("s", {TP: 2})
    h.machine.delete_offsets("s", [TP], lambda *a: None)
    h.log.complete()
    assert late == [{TP: E.NONE}] and h.committed("s", TP) is None and h.committed("s", ("t", 1)) == 1


# --- listing and describing -------------------------------------------------------------------------------


def test_list_groups_with_states_filter():
    h = Harness()
    h.stable_group("a")
    h.commit("b", {TP: 1})
    h.join("c")
    error, listed = h.machine.list_groups()
    assert error == E.NONE
    assert {(g.group_id, g.protocol_type, g.state) for g in listed} == {
        ("a", "consumer", "Stable"),
        ("b", "", "Empty"),
        ("c", "consumer", "PreparingRebalance"),
    }
    assert [g.group_id for g in h.machine.list_groups(["stable", "Empty"])[1]] == ["a", "b"]


def test_describe_group():
    h = Harness()
    leader, follower = h.stable_group(count=2)
    error, described = h.machine.describe_group("g")
    assert (error, described.state, described.protocol_type, described.protocol_name) == (
        E.NONE,
        "Stable",
        "consumer",
        "range",
    )
    assert [(m.member_id, m.metadata) for m in described.members] == [
        (leader, subscription("t")),
        (follower, subscription("t")),
    ]
    assert described.members[0].assignment and described.members[0].client_host == "/127.0.0.1"
    h.join(member_id=leader)
    rebalancing = h.machine.describe_group("g")[1]
    assert rebalancing.protocol_name == "" and rebalancing.members[0].metadata == b""
    error, unknown = h.machine.describe_group("nobody")
    assert (error, unknown.state, unknown.members) == (E.NONE, "Dead", ())


# --- replay -----------------------------------------------------------------------------------------------


def replay_into_new_machine(h: Harness, config=CONFIG) -> Harness:
    """A second machine built from everything the first one wrote, as after a restart."""
    fresh = Harness(config, own_all=False)
    fresh.clock.now = h.clock.now
    by_partition: dict[int, list] = {}
    for partition, batch in h.log.appends:
        by_partition.setdefault(partition, []).extend(batch)
    for partition in range(config.offsets_partitions):
        fresh.machine.begin_loading(partition)
        for key, value in by_partition.get(partition, []):
            fresh.machine.replay(partition, key, value)
        fresh.machine.finish_loading(partition)
    return fresh


def test_replay_restores_offsets_groups_and_tombstones():
    h = Harness()
    (leader,) = h.stable_group("live", session_ms=30000)
    h.commit("live", {("t", 0): 11}, generation=1, member_id=leader)
    h.commit("simple", {("t", 0): 1, ("t", 1): 2})
    h.machine.delete_offsets("simple", [("t", 1)], lambda *a: None)
    h.commit("gone", {TP: 5})
    h.machine.delete_groups(["gone"], lambda r: None)
    (second,) = h.stable_group("emptied")
    h.machine.leave_group("emptied", [(second, None)])

    restarted = replay_into_new_machine(h).machine
    assert restarted.fetch_offsets("live", None)[1][("t", 0)].offset == 11
    assert set(restarted.fetch_offsets("simple", None)[1]) == {("t", 0)}
    assert restarted.group("gone") is None
    emptied = restarted.group("emptied")
    assert (
        emptied.state.value == "Empty" and emptied.generation_id == 2 and emptied.protocol_type == "consumer"
    )
    # As in Kafka, a group comes back as its last record left it, members included ...
    live = restarted.group("live")
    assert live.state.value == "Stable" and list(live.members) == [leader] and live.leader_id == leader
    assert live.members[leader].assignment and live.protocol_name == "range"
    assert restarted.heartbeat("live", leader, None, 1) == E.NONE


def test_replayed_members_that_do_not_come_back_are_expelled():
    h = Harness()
    (leader,) = h.stable_group(session_ms=30000)
    restarted = replay_into_new_machine(h)
    restarted.advance(30000)
    assert restarted.state() == "Empty" and restarted.machine.group("g").generation_id == 2


def test_replay_of_a_burrow_compatible_group_value():
    config = replace(CONFIG, group_metadata_value_version=1)
    h = Harness(config)
    (leader,) = h.stable_group()
    assert h.log.appends[-1][1][0][1][:2] == b"\x00\x01"
    restarted = replay_into_new_machine(h, config)
    assert list(restarted.machine.group("g").members) == [leader]


def test_undecodable_records_are_skipped():
    h = Harness(own_all=False)
    h.machine.begin_loading(0)
    h.machine.replay(0, b"\x00\x01garbage", b"x")
    h.machine.replay(0, None, b"x")
    h.machine.finish_loading(0)
    assert h.machine.owned_partitions == {0}


def test_unloading_answers_waiting_members_and_forgets_groups():
    h = Harness()
    waiting = h.join()
    h.machine.unload_partition(h.machine.partition_for("g"))
    assert waiting[0].error == E.NOT_COORDINATOR
    assert h.machine.group("g") is None and not h.machine.owns("g")
    assert h.heartbeat("g", "m", 1) == E.NOT_COORDINATOR


def test_a_machine_without_partitions_has_only_the_retention_timer():
    h = Harness(own_all=False)
    assert h.machine.next_deadline() == h.clock.now + CHECK
