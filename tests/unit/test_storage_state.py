"""The storage's data rules (spec 3.3-3.7), driven synchronously through StorageState."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from burrowpy.protocol import (
    ClearConsumerOwners,
    SamplesMoved,
    SetBrokerOffset,
    SetBrokerOffsets,
    SetConsumerOffset,
    SetConsumerOffsets,
    SetConsumerOwner,
    SetDeleteGroup,
    SetDeletePartitionOffsets,
    SetDeleteTopic,
    SetRecordTimes,
    TopicSamples,
    in_runs,
)
from burrowpy.storage.state import StorageState
from tests.examples import examples

NOW = 1_700_000_000
BASE_MS = NOW * 1000 - 100000


def make_state(**options):
    return StorageState(["local", "other"], **options)


def broker(state, offset, topic="t", partition=0, count=1, cluster="local"):
    return state.add_broker_offset(SetBrokerOffset(cluster, topic, partition, count, offset, NOW * 1000))


def commit(state, offset, order, timestamp=None, group="g", topic="t", partition=0, cluster="local", now=NOW):
    timestamp = BASE_MS + order * 1000 if timestamp is None else timestamp
    return state.add_consumer_offset(
        SetConsumerOffset(cluster, group, topic, partition, offset, order, timestamp), now
    )


def upstream_fixture(**options):
    """Burrow's fixture: broker offset 4321, ten commits 1000..1900 ten seconds apart, an owner."""
    state = make_state(min_distance_s=1, **options)
    broker(state, 4321)
    for i in range(10):
        assert commit(state, 1000 + i * 100, 500 + i, BASE_MS + i * 10000) is None
    state.add_consumer_owner(SetConsumerOwner("local", "g", "t", 0, "testhost.example.com", "test_client_id"), NOW)
    return state


def test_fetch_consumer_returns_the_ring_history_lag_and_owner():
    state = upstream_fixture()
    [partition] = state.consumer("local", "g", NOW)["t"]
    assert partition.current_lag == 2421
    assert (partition.owner, partition.client_id) == ("testhost.example.com", "test_client_id")
    assert partition.broker_offsets == [4321]
    assert [(o.offset, o.timestamp, o.observed_at, o.lag) for o in partition.offsets] == [
        (1000 + i * 100, BASE_MS + i * 10000, NOW * 1000, 3321 - i * 100) for i in range(10)
    ]


def test_consumer_detail_json_shape():
    state = make_state(intervals=4)
    broker(state, 50, count=2)
    commit(state, 40, 1)
    [first, second] = state.consumer("local", "g", NOW)["t"]
    assert first.to_json() == {
        "offsets": [
            None,
            None,
            None,
            {"offset": 40, "timestamp": BASE_MS + 1000, "observedAt": NOW * 1000, "lag": 10},
        ],
        "owner": "",
        "client_id": "",
        "current-lag": 10,
    }
    assert second.to_json() == {"offsets": [], "owner": "", "client_id": "", "current-lag": 0}


def test_broker_offsets_keep_history_per_partition():
    state = make_state(intervals=3)
    for offset in range(10, 60, 10):
        assert broker(state, offset, partition=1, count=2) is None
    broker(state, 7, partition=0, count=2)
    assert state.topic_offsets("local", "t") == [7, 50]
    assert state.clusters["local"].brokers["t"][1].values() == [30, 40, 50]


def test_fetch_topic_skips_partitions_without_offsets():
    state = make_state()
    broker(state, 99, partition=2, count=3)
    assert state.topic_offsets("local", "t") == [99]
    assert state.topic_offsets("local", "missing") is None
    assert state.topic_offsets("nowhere", "t") is None


def test_partition_count_grows_and_bad_broker_partitions_are_dropped():
    state = make_state()
    broker(state, 1, count=1)
    broker(state, 5, partition=3, count=4)
    assert state.topic_offsets("local", "t") == [1, 5]
    assert broker(state, 5, partition=9, count=4) == "partition beyond the topic's partition count"
    assert broker(state, 5, partition=-1, count=4) == "negative partition"
    assert broker(state, 5, topic="new", partition=2, count=1) is not None
    assert state.topic_names("local") == ["t"]
    assert broker(state, 5, cluster="nowhere") == "unknown cluster"


@pytest.mark.parametrize(
    ("request_args", "reason"),
    [
        ({"cluster": "nowhere"}, "unknown cluster"),
        ({"timestamp": (NOW - 604800) * 1000 - 1}, "old offset"),
        ({"group": "denied-group"}, "group not accepted by the allow/deny lists"),
        ({"topic": "unknown"}, "no broker data for the topic"),
        ({"partition": -1}, "negative partition"),
        ({"partition": 2}, "partition unknown to the brokers"),
        ({"partition": 1}, "no broker offset for the partition yet"),
    ],
)
def test_commits_are_dropped_without_creating_the_group(request_args, reason):
    state = make_state(accept_group=lambda group: not group.startswith("denied"))
    broker(state, 100, partition=0, count=2)
    args = {"offset": 10, "order": 1} | request_args
    assert commit(state, **args) == reason
    assert state.consumer_names("local") == []


def test_commit_at_the_expiry_edge_is_kept():
    state = make_state()
    broker(state, 100)
    assert commit(state, 10, 1, timestamp=(NOW - 604800) * 1000) is None


def test_duplicate_commit_is_reported_as_dropped():
    state = make_state()
    broker(state, 100)
    assert commit(state, 10, 1) is None
    assert commit(state, 10, 1) == "duplicate, or older than everything in a full window"


def test_first_commit_extends_the_group_to_every_broker_partition():
    state = make_state()
    broker(state, 100, partition=1, count=4)
    commit(state, 60, 1, partition=1)
    partitions = state.consumer("local", "g", NOW)["t"]
    assert [len(p.offsets) for p in partitions] == [0, 10, 0, 0]
    assert [p.current_lag for p in partitions] == [0, 40, 0, 0]
    # The topic grows to six partitions: a commit on partition 5 extends the group's list.
    broker(state, 100, partition=5, count=6)
    commit(state, 70, 2, partition=5)
    assert len(state.consumer("local", "g", NOW)["t"]) == 6


def test_consumer_ahead_of_the_broker_has_zero_lag():
    state = make_state()
    broker(state, 100)
    commit(state, 150, 1)
    [partition] = state.consumer("local", "g", NOW)["t"]
    assert partition.current_lag == 0 and partition.offsets[-1].lag == 0


def test_current_lag_uses_the_newest_broker_offset_and_commit():
    state = make_state()
    broker(state, 100)
    commit(state, 10, 1)
    broker(state, 400)
    commit(state, 50, 0)  # a back-fill does not change the newest commit
    [partition] = state.consumer("local", "g", NOW)["t"]
    assert partition.broker_offsets == [100, 400]
    assert partition.current_lag == 390


def test_group_expires_lazily_on_fetch():
    state = make_state(expire_group_s=60)
    broker(state, 100)
    commit(state, 10, 1, timestamp=NOW * 1000)
    assert state.consumer("local", "g", NOW + 60) is not None
    assert state.consumer_names("local") == ["g"]
    assert state.consumer("local", "g", NOW + 61) is None
    assert state.consumer_names("local") == []


def test_back_filled_commits_do_not_refresh_the_group():
    state = make_state(expire_group_s=60)
    broker(state, 100)
    commit(state, 10, 5, timestamp=NOW * 1000)
    commit(state, 5, 1, timestamp=(NOW + 30) * 1000)  # inserted before order 5: lastCommit unchanged
    assert state.consumer("local", "g", NOW + 61) is None


def test_owner_creates_group_and_partition_entries_without_commits():
    state = make_state()
    broker(state, 100, count=3)
    # Like a commit, an owner needs a broker offset for its own partition.
    assert state.add_consumer_owner(SetConsumerOwner("local", "g", "t", 2, "/10.0.0.1", "client"), NOW) is not None
    broker(state, 100, partition=2, count=3)
    assert state.add_consumer_owner(SetConsumerOwner("local", "g", "t", 2, "/10.0.0.1", "client"), NOW) is None
    assert state.consumer_names("local") == ["g"]
    entries = state.clusters["local"].groups["g"].topics["t"]
    assert [(e.owner, e.client_id, e.ring) for e in entries] == [
        ("", "", None),
        ("", "", None),
        ("/10.0.0.1", "client", None),
    ]
    # Never committed: unlike Burrow, a fetch does not delete it while its owners are recent...
    fetched = state.consumer("local", "g", NOW)
    assert fetched is not None and fetched["t"][2].owner == "/10.0.0.1"
    # ...it expires expire-group after its last owner update.
    assert state.consumer("local", "g", NOW + make_state().expire_group_s) is not None
    assert state.consumer("local", "g", NOW + make_state().expire_group_s + 1) is None


def test_owner_without_broker_data_creates_only_the_group():
    state = make_state()
    reason = state.add_consumer_owner(SetConsumerOwner("local", "g", "unknown", 0, "host", "client"), NOW)
    assert reason == "no broker data for the topic"
    assert state.clusters["local"].groups["g"].topics == {}
    assert state.add_consumer_owner(SetConsumerOwner("nowhere", "g", "t", 0, "h", "c"), NOW) == "unknown cluster"


def test_owner_respects_the_group_filter():
    state = make_state(accept_group=lambda group: group == "g")
    broker(state, 100)
    assert state.add_consumer_owner(SetConsumerOwner("local", "x", "t", 0, "h", "c"), NOW) is not None
    assert state.consumer_names("local") == []


def test_clear_owners_empties_every_partition():
    state = upstream_fixture()
    assert state.clear_consumer_owners(ClearConsumerOwners("local", "g")) is None
    [partition] = state.consumer("local", "g", NOW)["t"]
    assert (partition.owner, partition.client_id) == ("", "")
    assert state.clear_consumer_owners(ClearConsumerOwners("local", "nobody")) == "unknown group"


def test_delete_topic_removes_it_everywhere_and_keeps_the_group():
    state = upstream_fixture()
    broker(state, 10, topic="u")
    commit(state, 5, 1000, topic="u", group="h")
    assert state.delete_topic(SetDeleteTopic("local", "t")) is None
    assert state.consumer("local", "g", NOW) == {}
    assert state.topic_names("local") == ["u"]
    assert state.consumers_of_topic("local", "u") == ["h"]
    assert state.delete_topic(SetDeleteTopic("nowhere", "t")) == "unknown cluster"


def test_delete_group_whole_or_one_topic():
    state = upstream_fixture()
    broker(state, 10, topic="u")
    commit(state, 5, 1000, topic="u")
    commit(state, 5, 1000, topic="u", group="h")
    state.delete_group(SetDeleteGroup("local", "g", "t"))
    assert list(state.consumer("local", "g", NOW)) == ["u"]
    state.delete_group(SetDeleteGroup("local", "g", "u"))
    assert state.consumer_names("local") == ["h"]
    state.delete_group(SetDeleteGroup("local", "nobody"))
    state.delete_group(SetDeleteGroup("local", "h"))
    assert state.consumer_names("local") == []


def test_offset_tombstones_forget_partition_then_topic_then_group():
    state = make_state()
    broker(state, 100, count=2)
    broker(state, 100, partition=1, count=2)
    broker(state, 100, topic="u")
    commit(state, 10, 1, partition=0)
    commit(state, 20, 2, partition=1)
    commit(state, 30, 3, topic="u")
    state.delete_partition_offsets(SetDeletePartitionOffsets("local", "g", "t", 0))
    detail = state.consumer("local", "g", NOW)
    assert [len(p.offsets) for p in detail["t"]] == [0, 10]
    state.delete_partition_offsets(SetDeletePartitionOffsets("local", "g", "t", 1))
    assert list(state.consumer("local", "g", NOW)) == ["u"]
    state.delete_partition_offsets(SetDeletePartitionOffsets("local", "g", "u", 0))
    assert state.consumer_names("local") == []
    assert state.delete_partition_offsets(SetDeletePartitionOffsets("local", "g", "u", 0)) is not None


def test_lists_are_sorted_and_unknown_cluster_answers_none():
    state = make_state()
    for topic in ("b", "a", "c"):
        broker(state, 100, topic=topic)
    for group in ("z", "x", "y"):
        commit(state, 1, 1, group=group, topic="b")
    assert state.cluster_names() == ["local", "other"]
    assert state.topic_names("local") == ["a", "b", "c"]
    assert state.consumer_names("local") == ["x", "y", "z"]
    assert state.consumers_of_topic("local", "b") == ["x", "y", "z"]
    assert state.consumers_of_topic("local", "a") == []
    assert state.topic_names("other") == [] and state.consumer_names("other") == []
    for answer in (
        state.topic_names("nowhere"),
        state.consumer_names("nowhere"),
        state.consumers_of_topic("nowhere", "a"),
        state.consumer("nowhere", "x", NOW),
    ):
        assert answer is None


def test_clusters_do_not_share_data():
    state = make_state()
    broker(state, 100)
    commit(state, 1, 1)
    assert state.topic_names("other") == [] and state.consumer("other", "g", NOW) is None


def test_allowlist_and_denylist_regexes_are_unanchored_searches():
    allow, deny = re.compile("test"), re.compile("[0-9]+")

    def accept(group):
        return bool(allow.search(group)) and not deny.search(group)

    state = make_state(accept_group=accept)
    broker(state, 100)
    for group in ("mytestgroup", "test2", "other"):
        commit(state, 1, 1, group=group)
    assert state.consumer_names("local") == ["mytestgroup"]


# --- runs of commits ---------------------------------------------------------------------------------------

RUN_GROUPS = ["g", "h", "skip-me"]
RUN_TOPICS = ["t", "u", "unknown"]


@st.composite
def commit_streams(draw):
    """Commits as __consumer_offsets holds them: runs of one group and topic, with commits that must be
    dropped among them (old, beyond the partition count, negative, duplicate or back-filled orders)."""
    stream = []
    for _ in range(draw(st.integers(0, 12))):
        group, topic = draw(st.sampled_from(RUN_GROUPS)), draw(st.sampled_from(RUN_TOPICS))
        for _ in range(draw(st.integers(1, 8))):
            partition = draw(st.integers(-1, 4))
            order = draw(st.integers(0, 40))
            timestamp = draw(st.sampled_from([BASE_MS + order * 1000, (NOW - 604801) * 1000]))
            stream.append(SetConsumerOffset("local", group, topic, partition, draw(st.integers(0, 500)), order,
                                            timestamp))
    return stream


def everything(state):
    cluster = state.clusters["local"]
    return {name: (group.last_commit, {topic: [list(entry.ring.window()) if entry.ring else None for entry in entries]
                                       for topic, entries in group.topics.items()})
            for name, group in cluster.groups.items()}


@settings(deadline=None, max_examples=examples(150, 40))
@given(stream=commit_streams(), min_distance=st.sampled_from([0, 3]), intervals=st.sampled_from([3, 10]))
def test_runs_store_what_their_commits_store_one_by_one(stream, min_distance, intervals):
    """A run drops the same commits for the same reasons and leaves every window and group as the same commits
    taken one at a time do: groups made and partitions added in the middle of a run, filters, expiry."""
    options = {"min_distance_s": min_distance, "intervals": intervals,
               "accept_group": lambda group: not group.startswith("skip")}
    by_runs, one_by_one_state = make_state(**options), make_state(**options)
    for state in (by_runs, one_by_one_state):
        broker(state, 300, topic="t", count=3)
        broker(state, 200, topic="u", partition=1, count=2)
    dropped_by_runs = []
    for run in in_runs(stream):
        dropped_by_runs += [(run.commit(index), reason) for index, reason in by_runs.add_consumer_offsets(run, NOW)]
    dropped_one_by_one = [(request, reason) for request in stream
                          if (reason := one_by_one_state.add_consumer_offset(request, NOW)) is not None]
    assert dropped_by_runs == dropped_one_by_one
    assert everything(by_runs) == everything(one_by_one_state)


def test_a_run_names_each_dropped_commit():
    state = make_state()
    broker(state, 100, count=2)
    broker(state, 100, partition=1, count=2)
    run = SetConsumerOffsets("local", "g", "t", [0, 10, 1, BASE_MS, 5, 11, 2, BASE_MS, 1, 12, 3, BASE_MS,
                                                 0, 10, 1, BASE_MS])
    assert state.add_consumer_offsets(run, NOW) == [(1, "partition unknown to the brokers"),
                                                   (3, "duplicate, or older than everything in a full window")]
    assert state.add_consumer_offsets(SetConsumerOffsets("nowhere", "g", "t", [0, 1, 1, BASE_MS] * 2), NOW) == [
        (0, "unknown cluster"), (1, "unknown cluster")]
    assert [p.offsets[-1].offset for p in state.consumer("local", "g", NOW)["t"]] == [10, 12]


def test_a_refresh_that_moves_only_samples_answers_them_alone():
    """consumer_if_changed after a refresh that read the same newest offsets: a lagging topic's samples alone, as
    the whole answer has them (each group's own partitions: "h" knows two of "t", "g" three); a caught-up topic
    not at all; anything else moved (a newest offset, a record timestamp): the whole answer."""
    state = make_state()

    def refresh(topic, offsets, at_ms):
        state.add_broker_offsets(SetBrokerOffsets("local", topic, len(offsets), list(range(len(offsets))), offsets,
                                                  at_ms))

    refresh("t", [100, 100], NOW * 1000 - 30000)
    for partition in range(2):
        assert commit(state, 50, 1 + partition, group="h", partition=partition) is None
    refresh("t", [100, 100, 100], NOW * 1000 - 20000)  # a partition more: "h" does not commit to it
    refresh("u", [7], NOW * 1000 - 20000)
    order = 10
    for partition in range(3):
        order += 1
        assert commit(state, 50 + partition, order, partition=partition) is None
    order += 1
    assert commit(state, 7, order, topic="u") is None  # caught up on "u"
    known = {group: state.consumer_if_changed("local", group, NOW, None)[0] for group in ("g", "h")}
    refresh("t", [100, 100, 100], NOW * 1000 - 10000)
    refresh("u", [7], NOW * 1000 - 10000)
    for group, partitions in (("g", 3), ("h", 2)):  # "g" first: "h" must not be given "g"'s copy
        version, moved = state.consumer_if_changed("local", group, NOW, known[group])
        assert moved.__class__ is SamplesMoved and list(moved) == ["t"]
        whole = state.consumer("local", group, NOW)["t"]
        assert len(whole) == partitions
        assert moved["t"] == TopicSamples(whole.broker, whole.samples, whole.broker_since)
        assert state.consumer_if_changed("local", group, NOW, version)[1] is None
        known[group] = version
    refresh("t", [100, 101, 100], NOW * 1000)  # a newest offset moved
    version, answer = state.consumer_if_changed("local", "g", NOW, known["g"])
    assert answer.__class__ is dict and answer == state.consumer("local", "g", NOW)
    state.set_record_times(SetRecordTimes("local", [("t", 0, 50, NOW * 1000 - 60000)]))
    refresh("t", [100, 101, 100], NOW * 1000 + 10000)
    answer = state.consumer_if_changed("local", "g", NOW, version)[1]
    assert answer.__class__ is dict and answer == state.consumer("local", "g", NOW)
    assert answer["t"].record_times == [NOW * 1000 - 60000, None, None]


def test_a_groups_version_is_made_again_only_after_some_change(monkeypatch):
    """consumer_if_changed goes through a group's topics for its version only when some change took a version
    number since it last did (anywhere: another group's commit, a refresh of another topic), and gives the same
    version object meanwhile."""
    state = make_state()
    made = []
    group_version = StorageState._group_version
    monkeypatch.setattr(StorageState, "_group_version",
                        staticmethod(lambda cluster, group: made.append(1) or group_version(cluster, group)))
    broker(state, 100)
    broker(state, 5, topic="other")
    assert commit(state, 50, 1) is None
    version, _ = state.consumer_if_changed("local", "g", NOW, None)
    assert state.consumer_if_changed("local", "g", NOW, version) == (version, None)
    assert len(made) == 1
    changes = [lambda: commit(state, 5, 1, group="h", topic="other"), lambda: broker(state, 5, topic="other"),
               lambda: broker(state, 100)]
    for number, change in enumerate(changes, start=2):
        change()
        again, _ = state.consumer_if_changed("local", "g", NOW, version)
        assert len(made) == number
        assert state.consumer_if_changed("local", "g", NOW, again)[0] is again
        assert len(made) == number
        version = again
