"""The replicated metadata state machine: commands, elections, ISR rules, snapshots, determinism."""

from __future__ import annotations

import copy
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.cluster.metadata import NO_LEADER, ClusterMetadata, assign_replicas
from broker.errors import ErrorCode

TOPIC_ID = "11" * 16
OTHER_ID = "22" * 16


def cluster(*nodes: int) -> ClusterMetadata:
    metadata = ClusterMetadata()
    for node in nodes:
        assert metadata.apply(register(node))["error_code"] == 0
    return metadata


def register(node: int) -> dict:
    return {"op": "register_broker", "node_id": node, "host": "127.0.0.1", "port": 9000 + node, "rack": None}


def create(name: str = "t", partitions: int = 6, rf: int = 3, topic_id: str = TOPIC_ID, **extra) -> dict:
    return {"op": "create_topic", "name": name, "topic_id": topic_id, "partitions": partitions,
            "replication_factor": rf, "configs": {}, **extra}


def test_every_applied_command_and_every_restored_snapshot_gets_a_version_never_seen_before():
    metadata = cluster(1, 2, 3)
    seen = {metadata.version}
    for command in (create("a", 3, 3), {"op": "fence_broker", "node_id": 1}, create("a", 3, 3), {"op": "nonsense"}):
        metadata.apply(command)  # refused commands too: a reader only needs the version to move on a change
        assert metadata.version not in seen
        seen.add(metadata.version)
    restored = ClusterMetadata.from_snapshot(json.loads(json.dumps(metadata.to_snapshot())))
    assert restored.version not in seen and ClusterMetadata().version not in seen


def test_a_barrier_is_accepted_and_changes_nothing():
    metadata = cluster(1, 2, 3)
    metadata.apply(create("a", 3, 3))
    before = json.dumps(metadata.to_snapshot(), sort_keys=True)
    assert metadata.apply({"op": "barrier"}) == {"error_code": 0, "error_message": None}
    assert json.dumps(metadata.to_snapshot(), sort_keys=True) == before


def test_max_partitions_is_checked_in_commit_order():
    """Two brokers each saw room for 6 of the 10 partitions and proposed at once: the second commit is refused,
    topic and partitions alike, and a refused command moves no assignment cursor."""
    metadata = cluster(1, 2, 3)
    assert metadata.apply(create("a", 6, 1, max_partitions=10))["error_code"] == 0
    refused = metadata.apply(create("b", 6, 1, topic_id=OTHER_ID, max_partitions=10))
    assert refused == {"error_code": ErrorCode.POLICY_VIOLATION,
                       "error_message": "The cluster has 6 partitions; 6 more would pass max.partitions (10)."}
    assert "b" not in metadata.topics and metadata.assignment_cursor == 1
    grow = {"op": "create_partitions", "name": "a", "count": 11, "max_partitions": 10}
    assert metadata.apply(grow)["error_code"] == ErrorCode.POLICY_VIOLATION
    assert metadata.apply({**grow, "count": 10})["error_code"] == 0
    assert metadata.apply(create("c", 1, 1, topic_id="33" * 16))["error_code"] == 0  # a command without a bound


def test_round_robin_assignment_spreads_leaders_and_followers():
    assert assign_replicas([1, 2, 3], 4, 2, start=0) == [[1, 2], [2, 3], [3, 1], [1, 2]]
    assert assign_replicas([1, 2, 3], 2, 3, start=1) == [[2, 3, 1], [3, 1, 2]]


def test_create_topic_assigns_live_brokers_and_rotates_between_topics():
    metadata = cluster(1, 2, 3)
    assert metadata.apply(create("a", 3, 3))["error_code"] == 0
    assert metadata.apply(create("b", 3, 1, topic_id=OTHER_ID))["error_code"] == 0
    a, b = metadata.topics["a"], metadata.topics["b"]
    assert [p.replicas for p in a.partitions] == [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
    assert [(p.leader, p.leader_epoch, p.isr) for p in a.partitions] == [
        (1, 0, [1, 2, 3]), (2, 0, [2, 3, 1]), (3, 0, [3, 1, 2])]
    assert [p.replicas for p in b.partitions] == [[2], [3], [1]]


def test_create_topic_errors():
    metadata = cluster(1, 2)
    assert metadata.apply(create(rf=3))["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR
    assert metadata.apply(create(partitions=0, rf=1))["error_code"] == ErrorCode.INVALID_PARTITIONS
    assert metadata.apply(create(rf=2))["error_code"] == 0
    # The same proposal again (a retry after an unknown outcome) succeeds; another one is refused.
    assert metadata.apply(create(rf=2))["error_code"] == 0
    assert metadata.apply(create(rf=2, topic_id=OTHER_ID))["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS
    assert metadata.apply(create("u", topic_id=TOPIC_ID))["error_code"] == ErrorCode.INVALID_REQUEST
    bad = create("v", topic_id=OTHER_ID, assignments=[[1, 2], [3, 1]])
    assert metadata.apply(bad)["error_code"] == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_explicit_assignments_are_kept():
    metadata = cluster(1, 2, 3)
    assert metadata.apply(create(assignments=[[3, 1], [2, 3]]))["error_code"] == 0
    assert [(p.replicas, p.leader) for p in metadata.topics["t"].partitions] == [([3, 1], 3), ([2, 3], 2)]


def test_malformed_or_unknown_commands_are_refused_not_raised():
    metadata = cluster(1)
    assert metadata.apply({"op": "launch"})["error_code"] == ErrorCode.INVALID_REQUEST
    assert metadata.apply({"op": "create_topic"})["error_code"] == ErrorCode.INVALID_REQUEST
    assert metadata.apply({"nothing": 1})["error_code"] == ErrorCode.INVALID_REQUEST
    assert metadata.apply(create(topic_id="zz"))["error_code"] == ErrorCode.INVALID_REQUEST


def test_fencing_the_leader_elects_the_next_live_isr_member_with_a_new_epoch():
    metadata = cluster(1, 2, 3)
    metadata.apply(create(partitions=3))
    assert metadata.apply({"op": "fence_broker", "node_id": 1})["error_code"] == 0
    parts = metadata.topics["t"].partitions
    assert [(p.leader, p.leader_epoch, p.isr) for p in parts] == [
        (2, 1, [2, 3]),  # led by 1: the next replica in order takes over, epoch bumped
        (2, 0, [2, 3]),  # 1 was a follower: ISR shrinks, the leader epoch stays
        (3, 0, [3, 2])]
    assert all(p.partition_epoch == 1 for p in parts)
    assert metadata.live_broker_ids() == [2, 3]


def test_the_last_isr_member_keeps_its_place_and_the_partition_waits_for_it():
    metadata = cluster(1, 2)
    metadata.apply(create(partitions=1, rf=2))
    metadata.apply({"op": "fence_broker", "node_id": 2})
    metadata.apply({"op": "fence_broker", "node_id": 1})
    state = metadata.partition("t", 0)
    assert (state.leader, state.leader_epoch, state.isr) == (NO_LEADER, 1, [1])
    # Broker 2 returning is no help: it is not in the ISR (no unclean election).
    metadata.apply(register(2))
    assert metadata.partition("t", 0).leader == NO_LEADER
    metadata.apply(register(1))
    state = metadata.partition("t", 0)
    assert (state.leader, state.leader_epoch, state.isr) == (1, 2, [1])


def test_unclean_election_lets_a_live_replica_outside_the_isr_lead():
    metadata = cluster(1, 2, 3)
    metadata.apply(create(partitions=1, rf=2, assignments=[[1, 2]]))
    assert metadata.apply({"op": "elect_unclean", "topic": "t", "partition": 0})["error_code"] == \
        ErrorCode.ELECTION_NOT_NEEDED
    metadata.apply({"op": "fence_broker", "node_id": 2})
    metadata.apply({"op": "fence_broker", "node_id": 1})
    assert metadata.offline_partitions() == []  # no replica alive: nothing could lead
    assert metadata.apply({"op": "elect_unclean", "topic": "t", "partition": 0})["error_code"] == \
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    metadata.apply(register(2))
    assert metadata.offline_partitions() == [("t", 0)]
    assert metadata.apply({"op": "elect_unclean", "topic": "t", "partition": 0})["error_code"] == 0
    state = metadata.partition("t", 0)
    assert (state.leader, state.leader_epoch, state.isr) == (2, 2, [2])
    assert metadata.offline_partitions() == []


def test_fencing_an_unknown_broker_is_refused():
    assert cluster(1).apply({"op": "fence_broker", "node_id": 7})["error_code"] == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_unregistering_drops_the_registration_and_moves_a_live_brokers_leaderships():
    metadata = cluster(1, 2, 3)
    metadata.apply(create(partitions=1))  # leader 1, ISR [1, 2, 3]
    metadata.apply({"op": "fence_broker", "node_id": 3})
    assert metadata.apply({"op": "unregister_broker", "node_id": 3}) == {"error_code": 0, "error_message": None}
    assert sorted(metadata.brokers) == [1, 2] and metadata.broker_epoch(3) is None
    # a broker still alive leaves the ISRs and its leaderships as if fenced, then its registration goes
    assert metadata.apply({"op": "unregister_broker", "node_id": 1})["error_code"] == 0
    state = metadata.partition("t", 0)
    assert (state.leader, state.leader_epoch, state.isr, state.replicas) == (2, 1, [2], [1, 2, 3])
    assert sorted(metadata.brokers) == [2]
    assert metadata.apply({"op": "unregister_broker", "node_id": 3}) == {
        "error_code": ErrorCode.BROKER_ID_NOT_REGISTERED, "error_message": "Broker ID 3 is not currently registered"}
    # it may register again (a broker still running does, as the controller sees it alive), with a new epoch
    metadata.apply(register(1))
    assert metadata.broker_epoch(1) == 3
    restored = ClusterMetadata.from_snapshot(json.loads(json.dumps(metadata.to_snapshot())))
    assert sorted(restored.brokers) == [1, 2]


def change_isr(isr: list[int], leader: int = 2, epoch: int = 1, partition: int = 0) -> dict:
    return {"op": "change_isr", "topic": "t", "partition": partition, "leader": leader, "leader_epoch": epoch,
            "isr": isr}


def test_isr_changes_come_from_the_current_leader_at_its_epoch():
    metadata = cluster(1, 2, 3)
    metadata.apply(create(partitions=1))
    metadata.apply({"op": "fence_broker", "node_id": 1})  # leader 2, epoch 1, ISR [2, 3]
    assert metadata.apply(change_isr([2, 3], leader=3))["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert metadata.apply(change_isr([2, 3], epoch=0))["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
    assert metadata.apply(change_isr([3]))["error_code"] == ErrorCode.INVALID_REQUEST
    assert metadata.apply(change_isr([2, 4]))["error_code"] == ErrorCode.INVALID_REQUEST
    assert metadata.apply(change_isr([1, 2, 3]))["error_code"] == ErrorCode.INELIGIBLE_REPLICA
    result = metadata.apply(change_isr([2]))
    assert (result["error_code"], result["isr"]) == (0, [2])
    metadata.apply(register(1))
    result = metadata.apply(change_isr([3, 1, 2]))
    assert (result["error_code"], result["isr"]) == (0, [1, 2, 3])  # kept in replica order


def test_preferred_leader_election_after_the_preferred_replica_rejoins_the_isr():
    metadata = cluster(1, 2, 3)
    metadata.apply(create(partitions=1))
    metadata.apply({"op": "fence_broker", "node_id": 1})
    metadata.apply(register(1))
    elect = {"op": "elect_preferred", "topic": "t", "partition": 0}
    assert metadata.preferred_elections_due() == []
    assert metadata.apply(elect)["error_code"] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    metadata.apply(change_isr([1, 2, 3]))
    assert metadata.preferred_elections_due() == [("t", 0)]
    assert metadata.apply(elect)["error_code"] == 0
    state = metadata.partition("t", 0)
    assert (state.leader, state.leader_epoch) == (1, 2)
    assert metadata.apply(elect)["error_code"] == ErrorCode.ELECTION_NOT_NEEDED


def test_elect_leaders_judges_each_partition_against_one_state():
    metadata = cluster(1, 2, 3)
    metadata.apply(create(partitions=3))  # preferred leaders 1, 2, 3
    metadata.apply({"op": "fence_broker", "node_id": 1})
    metadata.apply(register(1))
    metadata.apply(change_isr([1, 2, 3], partition=0))  # broker 1 in sync again, not leading partition 0
    listed = {"op": "elect_leaders", "preferred": True, "partitions": [["t", 0], ["t", 1], ["t", 9], ["u", 0]]}
    assert metadata.apply(listed)["results"] == [
        ["t", 0, 0, None],
        ["t", 1, ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."],
        ["t", 9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such partition as t-9"],
        ["u", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as u"]]
    assert metadata.partition("t", 0).leader == 1
    # every partition: only those that needed an election are answered
    assert metadata.apply({"op": "elect_leaders", "preferred": True, "all": True})["results"] == []
    assert metadata.apply({"op": "elect_leaders", "preferred": False, "all": True})["results"] == []
    unclean = metadata.apply({"op": "elect_leaders", "preferred": False, "partitions": [["t", 0]]})["results"]
    assert unclean == [["t", 0, ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."]]


def test_unclean_election_prefers_a_live_isr_member():
    metadata = cluster(1, 2, 3)
    metadata.apply(create(partitions=1, rf=3))
    metadata.partition("t", 0).leader = NO_LEADER  # as a snapshot of an older version could hold it
    result = metadata.apply({"op": "elect_leaders", "preferred": False, "partitions": [["t", 0]]})
    assert result["results"] == [["t", 0, 0, None]]
    state = metadata.partition("t", 0)
    assert (state.leader, state.isr) == (1, [1, 2, 3])  # a clean choice keeps the ISR


def reassign(replicas: list[int] | None, partition: int = 0) -> dict:
    return {"op": "alter_reassignment", "topic": "t", "partition": partition, "replicas": replicas}


def test_a_reassignment_adds_replicas_then_completes_when_they_join_the_isr_and_moves_leadership():
    metadata = cluster(1, 2, 3, 4, 5)
    metadata.apply(create(partitions=1, assignments=[[1, 2, 3]]))
    assert metadata.apply(reassign([4, 5, 2]))["error_code"] == 0
    state = metadata.partition("t", 0)
    # the target first, then the replicas being removed; leadership and ISR stay until the new ones catch up
    assert (state.replicas, state.adding, state.removing) == ([4, 5, 2, 1, 3], [4, 5], [1, 3])
    assert (state.leader, state.leader_epoch, state.isr) == (1, 0, [1, 2, 3])
    assert metadata.preferred_elections_due() == []  # 4 leads once it is in the ISR, not before
    assert metadata.apply(change_isr([1, 2, 3, 4], leader=1, epoch=0))["error_code"] == 0
    assert metadata.partition("t", 0).removing == [1, 3]  # 5 has not joined yet
    assert metadata.apply(change_isr([1, 2, 3, 4, 5], leader=1, epoch=0))["error_code"] == 0
    state = metadata.partition("t", 0)
    assert (state.replicas, state.adding, state.removing, state.isr) == ([4, 5, 2], [], [], [4, 5, 2])
    assert (state.leader, state.leader_epoch) == (4, 1)  # the removed leader handed over: a new epoch
    restored = ClusterMetadata.from_snapshot(json.loads(json.dumps(metadata.to_snapshot())))
    assert restored.topics == metadata.topics


def test_a_reassignment_within_the_isr_completes_at_once_and_keeps_its_leader():
    metadata = cluster(1, 2, 3)
    metadata.apply(create(partitions=1, assignments=[[1, 2, 3]]))
    assert metadata.apply(reassign([3, 1]))["error_code"] == 0
    state = metadata.partition("t", 0)
    assert (state.replicas, state.isr, state.reassigning, state.leader, state.leader_epoch) == \
        ([3, 1], [3, 1], False, 1, 0)  # the ISR in replica order


def test_cancelling_goes_back_to_the_original_replicas_and_errors():
    metadata = cluster(1, 2, 3, 4)
    metadata.apply(create(partitions=1, assignments=[[1, 2]]))
    assert metadata.apply(reassign(None))["error_code"] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    assert metadata.apply(reassign([]))["error_code"] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert metadata.apply(reassign([3, 3]))["error_code"] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert metadata.apply(reassign([3, 9]))["error_code"] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert metadata.apply(reassign([3, 4], partition=7))["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert metadata.apply(reassign([3, 4]))["error_code"] == 0
    assert metadata.apply(change_isr([1, 2, 3], leader=1, epoch=0))["error_code"] == 0
    # a new target replaces the one in progress, from the merged replicas
    assert metadata.apply(reassign([3, 2]))["error_code"] == 0
    assert metadata.partition("t", 0).isr == [3, 2]  # 3 was in the ISR already: done at once, 1 handed over
    assert metadata.partition("t", 0).leader == 3
    assert metadata.apply(reassign([1, 4]))["error_code"] == 0
    state = metadata.partition("t", 0)
    assert (state.replicas, state.adding, state.removing) == ([1, 4, 3, 2], [1, 4], [3, 2])
    before = copy.deepcopy(state)
    assert metadata.apply(reassign([1, 4]))["error_code"] == 0  # the same target again changes nothing
    assert metadata.partition("t", 0) == before
    assert metadata.apply(reassign(None))["error_code"] == 0
    state = metadata.partition("t", 0)
    assert (state.replicas, state.isr, state.leader, state.reassigning) == ([3, 2], [3, 2], 3, False)


def test_cancelling_when_no_original_replica_is_in_sync_takes_an_unclean_election():
    """Kafka's PartitionReassignmentRevert: the first original replica alone becomes the ISR, which only a topic
    allowing unclean elections accepts; otherwise the cancellation is refused and nothing changes."""
    metadata = cluster(1, 2, 3, 4)
    metadata.apply(create(partitions=1, assignments=[[1, 2]]))
    assert metadata.apply(reassign([3, 4]))["error_code"] == 0
    assert metadata.apply(change_isr([1, 3], leader=1, epoch=0))["error_code"] == 0  # 2 fell behind, 3 joined
    assert metadata.apply({"op": "fence_broker", "node_id": 1})["error_code"] == 0  # leadership goes to 3
    state = metadata.partition("t", 0)
    assert (state.replicas, state.isr, state.leader) == ([3, 4, 1, 2], [3], 3)
    before = copy.deepcopy(state)
    refused = metadata.apply(reassign(None))
    assert refused["error_code"] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert refused["error_message"] == ("Unable to revert partition assignment for t:0 because it would require an "
                                        "unclean leader election.")
    assert metadata.partition("t", 0) == before
    assert metadata.apply({**reassign(None), "unclean": True})["error_code"] == 0
    state = metadata.partition("t", 0)
    # broker 1, fenced, cannot lead: offline until it returns or the controller elects 2 uncleanly
    assert (state.replicas, state.isr, state.leader, state.reassigning) == ([1, 2], [1], NO_LEADER, False)
    assert metadata.offline_partitions() == [("t", 0)]


def test_delete_partitions_and_configs():
    metadata = cluster(1, 2, 3)
    metadata.apply(create(partitions=2, rf=2, configs={"cleanup.policy": "compact"}))
    assert metadata.apply({"op": "create_partitions", "name": "t", "count": 2})["error_code"] == \
        ErrorCode.INVALID_PARTITIONS
    assert metadata.apply({"op": "create_partitions", "name": "t", "count": 4})["error_code"] == 0
    assert [len(p.replicas) for p in metadata.topics["t"].partitions] == [2, 2, 2, 2]
    assert metadata.apply({"op": "alter_configs", "name": "t", "configs": {"retention.ms": 5},
                           "replace": False})["error_code"] == 0
    assert metadata.topics["t"].configs == {"cleanup.policy": "compact", "retention.ms": "5"}
    metadata.apply({"op": "alter_configs", "name": "t", "configs": {"cleanup.policy": None}, "replace": False})
    assert metadata.topics["t"].configs == {"retention.ms": "5"}
    metadata.apply({"op": "alter_configs", "name": "t", "configs": {"segment.ms": 9}, "replace": True})
    assert metadata.topics["t"].configs == {"segment.ms": "9"}
    assert metadata.apply({"op": "delete_topic", "name": "t"})["error_code"] == 0
    assert metadata.apply({"op": "delete_topic", "name": "t"})["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert metadata.apply({"op": "alter_configs", "name": "t", "configs": {},
                           "replace": True})["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_every_registration_gives_a_new_broker_epoch_and_fencing_takes_it_away():
    metadata = cluster(1, 2)
    first = metadata.broker_epoch(1)
    assert first is not None and metadata.broker_epoch(2) not in (None, first)
    assert metadata.broker_epoch(3) is None  # never registered
    metadata.apply({"op": "fence_broker", "node_id": 1})
    assert metadata.broker_epoch(1) is None
    metadata.apply(register(1))
    again = metadata.broker_epoch(1)
    assert again is not None and again > max(first, metadata.broker_epoch(2))
    restored = ClusterMetadata.from_snapshot(json.loads(json.dumps(metadata.to_snapshot())))
    assert (restored.broker_epoch(1), restored.broker_epoch(2)) == (again, metadata.broker_epoch(2))
    restored.apply(register(2))
    assert restored.broker_epoch(2) > again  # the counter survived the snapshot: no epoch is given twice
    older = metadata.to_snapshot()
    del older["next_broker_epoch"]
    older["brokers"] = [entry[:6] for entry in older["brokers"]]
    assert ClusterMetadata.from_snapshot(older).broker_epoch(1) == -1


def test_dynamic_broker_configs_by_scope_survive_a_snapshot():
    metadata = cluster(1, 2)
    assert metadata.apply({"op": "alter_broker_configs", "scope": "", "configs": {"log.retention.ms": 5}}) == \
        {"error_code": 0, "error_message": None}
    metadata.apply({"op": "alter_broker_configs", "scope": "2", "configs": {"num.io.threads": "4"}})
    assert metadata.broker_configs == {"": {"log.retention.ms": "5"}, "2": {"num.io.threads": "4"}}
    restored = ClusterMetadata.from_snapshot(json.loads(json.dumps(metadata.to_snapshot())))
    assert restored.broker_configs == metadata.broker_configs
    metadata.apply({"op": "alter_broker_configs", "scope": "", "configs": {}})
    assert metadata.broker_configs == {"2": {"num.io.threads": "4"}}
    older = metadata.to_snapshot()
    del older["broker_configs"]
    assert ClusterMetadata.from_snapshot(older).broker_configs == {}


def test_client_quotas_are_set_and_removed_by_key_and_survive_a_snapshot():
    metadata = cluster(1, 2)
    app, alice = '[["client-id", "app"]]', '[["user", "alice"]]'
    assert metadata.apply({"op": "alter_client_quotas", "changes": [[app, "producer_byte_rate", 1000],
                                                                     [app, "request_percentage", 50.5],
                                                                     [alice, "consumer_byte_rate", 9]]}) == \
        {"error_code": 0, "error_message": None}
    metadata.apply({"op": "alter_client_quotas", "changes": [[app, "producer_byte_rate", None],
                                                             [alice, "consumer_byte_rate", None]]})
    assert metadata.client_quotas == {app: {"request_percentage": 50.5}}  # an entity with no quota left is gone
    restored = ClusterMetadata.from_snapshot(json.loads(json.dumps(metadata.to_snapshot())))
    assert restored.client_quotas == metadata.client_quotas
    older = metadata.to_snapshot()
    del older["client_quotas"]
    assert ClusterMetadata.from_snapshot(older).client_quotas == {}


# --- properties over random command sequences ------------------------------------------------------------

NODES = [1, 2, 3, 4]
commands = st.one_of(
    st.builds(register, st.sampled_from(NODES)),
    st.builds(lambda n: {"op": "fence_broker", "node_id": n}, st.sampled_from(NODES)),
    st.builds(lambda name, parts, rf, tid: create(name, parts, rf, topic_id=f"{tid:032x}"),
              st.sampled_from("abc"), st.integers(1, 4), st.integers(1, 3), st.integers(1, 50)),
    st.builds(lambda name: {"op": "delete_topic", "name": name}, st.sampled_from("abc")),
    st.builds(lambda name, count: {"op": "create_partitions", "name": name, "count": count},
              st.sampled_from("abc"), st.integers(1, 6)),
    st.builds(lambda name, p, leader, epoch, isr: {"op": "change_isr", "topic": name, "partition": p,
                                                  "leader": leader, "leader_epoch": epoch, "isr": isr},
              st.sampled_from("abc"), st.integers(0, 3), st.sampled_from(NODES), st.integers(0, 3),
              st.lists(st.sampled_from(NODES), max_size=4)),
    st.builds(lambda name, p: {"op": "elect_preferred", "topic": name, "partition": p},
              st.sampled_from("abc"), st.integers(0, 3)),
    st.builds(lambda name, p: {"op": "elect_unclean", "topic": name, "partition": p},
              st.sampled_from("abc"), st.integers(0, 3)),
    st.builds(lambda name, p, replicas: {"op": "alter_reassignment", "topic": name, "partition": p,
                                         "replicas": replicas},
              st.sampled_from("abc"), st.integers(0, 3),
              st.none() | st.lists(st.sampled_from(NODES), max_size=4, unique=True)),
)


@settings(deadline=None, max_examples=150)
@given(st.lists(commands, max_size=40))
def test_invariants_hold_and_replicas_stay_identical(sequence):
    metadata, twin = ClusterMetadata(), ClusterMetadata()
    epochs: dict[tuple[str, bytes, int], tuple[int, int]] = {}
    for command in sequence:
        result = metadata.apply(command)
        assert twin.apply(json.loads(json.dumps(command))) == result
        # epochs rise while a topic exists; a deleted topic created again (the generator may reuse its id)
        # starts over
        present = {(name, metadata.topics[name].topic_id, index) for name, index, _ in metadata.partitions()}
        epochs = {key: value for key, value in epochs.items() if key in present}
        for name, index, state in metadata.partitions():
            assert set(state.isr) <= set(state.replicas) and state.isr
            assert set(state.adding) | set(state.removing) <= set(state.replicas)
            assert not set(state.adding) & set(state.removing) and set(state.target_replicas)
            assert state.leader == NO_LEADER or state.leader in state.isr
            if state.leader != NO_LEADER:
                assert metadata.brokers[state.leader].alive
            key = (name, metadata.topics[name].topic_id, index)
            before = epochs.get(key, (0, 0))
            assert state.leader_epoch >= before[0] and state.partition_epoch >= before[1]
            epochs[key] = (state.leader_epoch, state.partition_epoch)
    snapshot = json.loads(json.dumps(metadata.to_snapshot()))
    restored = ClusterMetadata.from_snapshot(snapshot)
    assert restored.to_snapshot() == metadata.to_snapshot() == twin.to_snapshot()
    assert restored.brokers == metadata.brokers and restored.topics == metadata.topics


def test_acls_scram_credentials_and_listener_endpoints_survive_a_snapshot():
    metadata = cluster(1, 2)
    metadata.apply({"op": "register_broker", "node_id": 3, "host": "h3", "port": 9094, "rack": None,
                    "endpoints": {"PLAINTEXT": ["h3", 9092], "SASL_SSL": ["h3", 9094]}})
    alice = [2, "orders", 3, "User:alice", "*", 3, 3]
    assert metadata.apply({"op": "create_acls", "acls": [alice, alice, [3, "g", 4, "User:*", "*", 2, 2]]}) == \
        {"error_code": 0, "error_message": None}
    assert metadata.acls == [alice, [3, "g", 4, "User:*", "*", 2, 2]]  # a duplicate is one ACL
    metadata.apply({"op": "delete_acls", "acls": [[3, "g", 4, "User:*", "*", 2, 2]]})
    metadata.apply({"op": "alter_scram", "upserts": [["alice", "SCRAM-SHA-512", "00", "11", "22", 4096],
                                                     ["bob", "SCRAM-SHA-256", "33", "44", "55", 8192]]})
    metadata.apply({"op": "alter_scram", "deletions": [["bob", "SCRAM-SHA-256"]]})
    assert metadata.scram == {"alice": {"SCRAM-SHA-512": ["00", "11", "22", 4096]}}
    restored = ClusterMetadata.from_snapshot(json.loads(json.dumps(metadata.to_snapshot())))
    assert (restored.acls, restored.scram) == ([alice], metadata.scram)
    assert restored.brokers[3].endpoints == {"PLAINTEXT": ["h3", 9092], "SASL_SSL": ["h3", 9094]}
    older = metadata.to_snapshot()
    del older["acls"], older["scram"]
    older["brokers"] = [entry[:5] for entry in older["brokers"]]
    restored = ClusterMetadata.from_snapshot(older)
    assert (restored.acls, restored.scram, restored.brokers[3].endpoints) == ([], {}, {})
    assert metadata.apply({"op": "create_acls", "acls": [["x"]]})["error_code"] != 0  # refused, not a crash


def test_a_voter_added_at_run_time_is_named_and_survives_a_snapshot():
    metadata = cluster(1, 2, 3)
    directory = bytes(range(16))
    assert metadata.apply({"op": "set_raft_voter", "node_id": 4, "address": "127.0.0.1:7004",
                           "directory_id": directory.hex()}) == {"error_code": 0, "error_message": None}
    restored = ClusterMetadata.from_snapshot(json.loads(json.dumps(metadata.to_snapshot())))
    assert restored.raft_voters == metadata.raft_voters == {4: ("127.0.0.1:7004", directory)}
    older = metadata.to_snapshot()
    del older["raft_voters"]
    assert ClusterMetadata.from_snapshot(older).raft_voters == {}
