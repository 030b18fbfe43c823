"""Storage's record-timestamp wants, worked out again only for the topics whose inputs changed, are those of a
walk through every group partition: random broker refreshes, commits, owners, timestamps, deletes and expiries
against the real storage state, and after each step the wants, the known timestamps kept and the topics whose
known timestamps changed are compared with a walk that starts from nothing."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from burrowpy.protocol import (
    SetBrokerOffset,
    SetConsumerOffset,
    SetConsumerOwner,
    SetDeleteGroup,
    SetDeletePartitionOffsets,
    SetDeleteTopic,
    SetRecordTimes,
)
from burrowpy.storage import state as state_module
from burrowpy.storage.state import StorageState, WantsWalk

START_S = 1_700_000_000
CLUSTER = "c"
TOPICS = ("a", "b", "c")
GROUPS = ("g1", "g2", "g3")

topic = st.sampled_from(TOPICS)
group = st.sampled_from(GROUPS)
steps = st.one_of(
    st.tuples(st.just("broker"), topic, st.integers(0, 3), st.sampled_from([0, 0, 1, 5])),
    st.tuples(st.just("commit"), group, topic, st.integers(0, 3), st.integers(0, 12)),
    st.tuples(st.just("owner"), group, topic, st.integers(0, 3)),
    st.tuples(st.just("times"), st.sampled_from([*TOPICS, "elsewhere"]), st.integers(0, 3), st.integers(0, 12),
              st.sampled_from([None, 5, 9])),
    st.tuples(st.just("delete topic"), topic),
    st.tuples(st.just("delete group"), group, st.sampled_from(["", *TOPICS])),
    st.tuples(st.just("forget"), group, topic, st.integers(0, 3)),
    st.tuples(st.just("tick"), st.sampled_from([1, 60, 200])),
    st.tuples(st.just("walk")),
)
# A walk in steps (as storage's workers run it), begun and taken that many steps at once, then one step after each
# change that follows, other walks waiting for it to end.
stepped = st.tuples(st.just("walk in steps"), st.integers(0, 3))


def from_nothing(state: StorageState) -> tuple[list, dict, set[str]]:
    """What a first walk of a copy of the state finds: every topic gone through."""
    fresh = copy.deepcopy(state)
    cluster = fresh.clusters[CLUSTER]
    cluster.wants = WantsWalk()
    cluster.wants.touched.update(key[0] for key in cluster.record_times)
    return walk(fresh)


def walk(state: StorageState) -> tuple[list, dict, set[str]]:
    cluster = state.clusters[CLUSTER]
    before = {name: versions.record_times for name, versions in cluster.versions.items()}
    wants = state.record_time_wants(CLUSTER)
    changed = {name for name, versions in cluster.versions.items() if before.get(name) != versions.record_times}
    return wants, copy.deepcopy(cluster.record_times), changed


@settings(max_examples=200, deadline=None)
@given(changes=st.lists(steps, min_size=1, max_size=40))
# Caught up, then behind once the broker offset moves: no group changed, the topic's offsets did.
@example(changes=[("commit", "g1", "a", 0, 10), ("walk",), ("broker", "a", 0, 1), ("walk",)])
# A record timestamp given, then a group leaves the topic: its commit is no longer sat at.
@example(changes=[("commit", "g1", "a", 0, 4), ("commit", "g1", "b", 0, 4), ("walk",), ("times", "a", 0, 4, 9),
                  ("walk",), ("delete group", "g1", "a"), ("walk",)])
# A group that starts committing to one more topic.
@example(changes=[("commit", "g1", "a", 0, 4), ("walk",), ("commit", "g1", "b", 0, 4), ("walk",)])
def test_wants_from_the_changed_topics_are_those_of_a_whole_walk(changes):
    apply_and_compare(changes, every_change=len(changes) < 8)


@settings(max_examples=200, deadline=None)
@given(changes=st.lists(st.one_of(steps, stepped), min_size=1, max_size=40))
# A commit while a walk in steps goes on, to a group it has gone through: the next walk wants its new offset.
@example(changes=[("commit", "g1", "a", 0, 4), ("commit", "g2", "b", 0, 4), ("broker", "a", 0, 5),
                  ("walk in steps", 1), ("commit", "g1", "a", 0, 6), ("walk",)])
# A timestamp given while a walk in steps goes on, of a topic that walk does not go through: the next walk does.
@example(changes=[("commit", "g2", "b", 0, 4), ("commit", "g1", "a", 0, 4), ("walk",), ("commit", "g1", "a", 0, 5),
                  ("walk in steps", 0), ("times", "b", 0, 4, 9), ("walk",)])
# A topic's broker offsets moving past a commit once the walk in steps has checked the topic (unchanged then).
@example(changes=[("commit", "g1", "a", 0, 12), ("walk",), ("commit", "g2", "b", 0, 4), ("walk in steps", 0),
                  ("broker", "a", 0, 5), ("walk",)])
def test_changes_while_a_walk_goes_on_in_steps_are_in_the_next_walk(changes):
    """The walk in steps answers with the data as it found it; the walk after it is a whole walk's, whatever
    changed between the steps. The check of which topics changed in steps of one topic or group, so that changes
    come between those too."""
    checks = state_module._CHECKS_PER_STEP
    state_module._CHECKS_PER_STEP = 1
    try:
        apply_and_compare(changes, every_change=False)
    finally:
        state_module._CHECKS_PER_STEP = checks


def apply_and_compare(changes: list, every_change: bool) -> None:
    """The changes applied in turn, a walk compared with one from nothing at each ("walk",), after every change with
    ``every_change``, and at the end."""
    state = StorageState([CLUSTER], intervals=3, expire_group_s=300)
    in_steps = None
    now_s = START_S
    newest = dict.fromkeys(((name, p) for name in TOPICS for p in range(2)), 10)
    counts = dict.fromkeys(TOPICS, 2)
    order = 0
    for name in TOPICS:
        for p in range(2):
            state.add_broker_offset(SetBrokerOffset(CLUSTER, name, p, 2, 10, now_s * 1000))
    for change in changes:
        kind = change[0]
        if kind == "walk" and in_steps is not None:
            in_steps = finish(in_steps)
        if kind == "walk in steps":
            if in_steps is None:
                in_steps = state.record_time_wants_in_steps(CLUSTER)
            in_steps = advance(in_steps, change[1] + 1)
        elif kind == "broker":  # a refresh of the topic, one partition grown, the topic perhaps with one more
            _, name, p, grown = change
            counts[name] = max(counts[name], p + 1)
            newest[name, p] = newest.get((name, p), 0) + grown
            for partition in range(counts[name]):
                offset = newest.setdefault((name, partition), 0)
                state.add_broker_offset(SetBrokerOffset(CLUSTER, name, partition, counts[name], offset,
                                                        now_s * 1000))
        elif kind == "commit":
            order += 1
            state.add_consumer_offset(SetConsumerOffset(CLUSTER, change[1], change[2], change[3], change[4], order,
                                                        now_s * 1000), now_s)
        elif kind == "owner":
            state.add_consumer_owner(SetConsumerOwner(CLUSTER, change[1], change[2], change[3], "o", "o-id"), now_s)
        elif kind == "times":
            state.set_record_times(SetRecordTimes(CLUSTER, [change[1:]]))
        elif kind == "delete topic":
            state.delete_topic(SetDeleteTopic(CLUSTER, change[1]))
            counts[change[1]] = 0
            for p in range(4):
                newest.pop((change[1], p), None)
        elif kind == "delete group":
            state.delete_group(SetDeleteGroup(CLUSTER, change[1], change[2]))
        elif kind == "forget":
            state.delete_partition_offsets(SetDeletePartitionOffsets(CLUSTER, change[1], change[2], change[3]))
        elif kind == "tick":  # groups nobody committed to for expire-group are purged when fetched
            now_s += change[1]
            for name in GROUPS:
                state.consumer(CLUSTER, name, now_s)
        if in_steps is not None and kind != "walk in steps":
            in_steps = advance(in_steps, 1)
        if in_steps is None and (kind == "walk" or every_change):
            expected = from_nothing(state)
            assert walk(state) == expected
    if in_steps is not None:
        finish(in_steps)
    expected = from_nothing(state)
    assert walk(state) == expected


def advance(in_steps: Any, count: int) -> Any:
    """The walk taken ``count`` steps; None once it has ended."""
    for _ in range(count):
        try:
            next(in_steps)
        except StopIteration:
            return None
    return in_steps


def finish(in_steps: Any) -> None:
    while advance(in_steps, 1) is not None:
        pass
