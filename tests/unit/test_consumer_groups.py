"""KIP-848 groups without IO: the assignors, revocation before assignment, epochs, timeouts, and the groups
rebuilt from the records they wrote."""

from __future__ import annotations

from dataclasses import replace

from group_harness import CONFIG, FakeClock

from broker.errors import ErrorCode
from broker.groups.assignors import RANGE, UNIFORM, assign
from broker.groups.consumer import (
    STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    ConsumerGroups,
    HeartbeatRequest,
    HeartbeatResult,
)
from broker.groups.timers import Deadlines
from broker.protocol import consumer_offsets

T1, T2 = b"\x01" * 16, b"\x02" * 16
TOPICS = {"orders": (T1, 4), "payments": (T2, 2)}


def test_uniform_spreads_evenly_and_keeps_what_it_can():
    subscriptions = {"a": frozenset({T1}), "b": frozenset({T1})}
    first = assign(UNIFORM, {"a": frozenset({T1})}, {T1: 4}, {})
    assert first == {"a": {T1: frozenset({0, 1, 2, 3})}}
    second = assign(UNIFORM, subscriptions, {T1: 4}, first)
    assert sorted(len(second[m][T1]) for m in "ab") == [2, 2]
    assert second["a"][T1] <= first["a"][T1]  # a keeps two of its four, b gets the other two
    third = assign(UNIFORM, {**subscriptions, "c": frozenset({T1})}, {T1: 4}, second)
    assert sorted(sum(len(p) for p in third[m].values()) for m in "abc") == [1, 1, 2]
    moved = sum(len(second[m][T1] - third[m].get(T1, frozenset())) for m in "ab")
    assert moved == 1  # only one partition changes hands


def test_range_gives_contiguous_ranges_per_topic():
    target = assign(RANGE, {"b": frozenset({T1, T2}), "a": frozenset({T1, T2})}, {T1: 5, T2: 2}, {})
    assert target == {"a": {T1: frozenset({0, 1, 2}), T2: frozenset({0})},
                      "b": {T1: frozenset({3, 4}), T2: frozenset({1})}}


class Groups:
    """ConsumerGroups with a fake clock and an in-memory log."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.deadlines = Deadlines()
        self.written: list[tuple[bytes, bytes | None]] = []
        config = replace(CONFIG, consumer_session_timeout_ms=10_000)
        self.groups = ConsumerGroups(config, self.clock, self.deadlines,
                                     lambda group, batch, done: (self.written.extend(batch), done(ErrorCode.NONE)),
                                     lambda: dict(TOPICS))

    def heartbeat(self, member: str, epoch: int, *, topics: list[str] | None = None,
                  owned: dict[bytes, list[int]] | None = None, assignor: str | None = None) -> HeartbeatResult:
        answers: list[HeartbeatResult] = []
        owned_wire = None if owned is None else [{"topic_id": t, "partitions": p} for t, p in owned.items()]
        self.groups.heartbeat(HeartbeatRequest(
            group_id="g", member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
            rebalance_timeout_ms=30_000, subscribed_topic_names=topics, subscribed_topic_regex=None,
            server_assignor=assignor, owned=owned_wire, client_id=member, client_host="/127.0.0.1", version=1),
            answers.append)
        return answers[0]

    def join(self, member: str, topics: list[str]) -> HeartbeatResult:
        return self.heartbeat(member, 0, topics=topics, owned={})


def partitions(result: HeartbeatResult) -> set[tuple[bytes, int]]:
    return {(t, p) for t, parts in (result.assignment or {}).items() for p in parts}


def test_partitions_are_revoked_before_another_member_gets_them():
    g = Groups()
    a = g.join("a", ["orders"])
    assert (a.error, a.member_epoch, partitions(a)) == (ErrorCode.NONE, 1, {(T1, p) for p in range(4)})
    b = g.join("b", ["orders"])
    assert b.member_epoch == 2 and partitions(b) == set()  # its target is still held by a
    assert g.groups.groups["g"].members["b"].state == UNRELEASED_PARTITIONS
    a = g.heartbeat("a", 1)
    kept = partitions(a)
    assert len(kept) == 2 and a.member_epoch == 1  # told to revoke two, keeps its epoch until it has
    assert g.groups.groups["g"].members["a"].state == UNREVOKED_PARTITIONS
    g.heartbeat("b", 2)
    assert not g.groups.groups["g"].members["b"].assigned  # nothing for b while a still owns them
    a = g.heartbeat("a", 1, owned={T1: sorted(p for _, p in kept)})  # a has given them up
    assert a.member_epoch == 2 and g.groups.groups["g"].members["a"].state == STABLE
    b = g.heartbeat("b", 2)
    assert partitions(b) == {(T1, p) for p in range(4)} - kept
    assert g.groups.groups["g"].state == "Stable"


def test_group_consumer_assignors_are_those_a_group_may_ask_for_the_first_its_default():
    g = Groups()
    g.groups.config = replace(g.groups.config, consumer_assignors=(RANGE,))
    refused = g.heartbeat("a", 0, topics=["orders"], owned={}, assignor=UNIFORM)
    assert refused.error == ErrorCode.UNSUPPORTED_ASSIGNOR and "not one of range" in refused.message
    g.join("a", ["orders"])
    assert g.groups.describe("g", {})["assignor_name"] == RANGE


def test_epochs_fencing_leaving_and_session_timeouts():
    g = Groups()
    g.join("a", ["orders", "payments"])
    assert g.heartbeat("a", 7).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert g.heartbeat("x", 1).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert g.heartbeat("a", 0, topics=["orders"], owned={}, assignor="sticky").error == ErrorCode.UNSUPPORTED_ASSIGNOR
    g.join("b", ["orders"])
    group = g.groups.groups["g"]
    epoch = group.epoch
    assert g.heartbeat("b", -1).member_epoch == -1 and "b" not in group.members and group.epoch == epoch + 1
    g.clock.now += 10_001
    g.deadlines.expire(g.clock(), lambda key: g.groups.on_timer(key[0], key[1], key[2]))
    assert group.members == {} and group.state == "Empty"


def test_groups_are_rebuilt_from_their_records():
    g = Groups()
    g.join("a", ["orders"])
    g.join("b", ["orders"])
    a = g.heartbeat("a", 1)
    g.heartbeat("a", 1, owned={T1: sorted(p for _, p in partitions(a))})
    g.heartbeat("b", 2)
    g.join("c", ["payments"])
    g.heartbeat("c", -1)
    rebuilt: dict = {}
    for key, value in g.written:
        ConsumerGroups.replay(rebuilt, consumer_offsets.decode_key(key), value)
    original, copy = g.groups.groups["g"], rebuilt["g"]
    assert (copy.epoch, copy.assignment_epoch) == (original.epoch, original.assignment_epoch)
    assert set(copy.members) == {"a", "b"} and copy.target == {m: original.target[m] for m in "ab"}
    for member_id in "ab":
        mine, theirs = copy.members[member_id], original.members[member_id]
        assert (mine.member_epoch, mine.state, mine.assigned, mine.subscribed, mine.client_id) == (
            theirs.member_epoch, theirs.state, theirs.assigned, theirs.subscribed, theirs.client_id)


def test_regex_subscriptions_match_whole_topic_names():
    g = Groups()
    answers: list[HeartbeatResult] = []
    request = HeartbeatRequest(group_id="g", member_id="r", member_epoch=0, instance_id=None, rack_id=None,
                               rebalance_timeout_ms=30_000, subscribed_topic_names=[], subscribed_topic_regex="pay.*",
                               server_assignor=None, owned=[], client_id="r", client_host="/127.0.0.1", version=1)
    g.groups.heartbeat(request, answers.append)
    assert partitions(answers[0]) == {(T2, 0), (T2, 1)}  # "payments", not "orders"
    g.groups.heartbeat(replace(request, member_id="bad", subscribed_topic_regex="pay(ments"), answers.append)
    assert answers[1].error == ErrorCode.INVALID_REGULAR_EXPRESSION and "pay(ments" in answers[1].message


def test_an_older_member_epoch_commits_only_partitions_held_since_then():
    """KIP-1251 (Kafka 4.3): the member's own epoch commits anything and a newer one nothing; an older one
    commits the partitions the member already held at that epoch and still holds, and nothing else."""
    g = Groups()
    g.join("a", ["orders"])
    g.join("b", ["orders"])
    kept = sorted(p for _, p in partitions(g.heartbeat("a", 1)))
    assert g.heartbeat("a", 1, owned={T1: kept}).member_epoch == 2  # a held these since epoch 1
    given = sorted(p for _, p in partitions(g.heartbeat("b", 2)))
    assert len(kept) == len(given) == 2
    g.heartbeat("b", -1)
    a = g.heartbeat("a", 2)
    assert a.member_epoch == 3 and partitions(a) == {(T1, p) for p in range(4)}  # b's two at epoch 3

    def check(epoch: int, chosen: list, member: str = "a") -> ErrorCode | None:
        return g.groups.check_commit("g", member, epoch, [("orders", p) for p in chosen])

    assert check(3, [0, 1, 2, 3]) is None
    assert check(4, kept) == ErrorCode.STALE_MEMBER_EPOCH
    assert check(2, kept) is None and check(1, kept) is None
    assert check(2, given) == ErrorCode.STALE_MEMBER_EPOCH  # a got them at epoch 3
    assert check(2, [*kept, given[0]]) == ErrorCode.STALE_MEMBER_EPOCH  # one refused partition refuses all
    assert g.groups.check_commit("g", "a", 2, [("payments", 0)]) == ErrorCode.STALE_MEMBER_EPOCH
    assert check(2, kept, member="b") == ErrorCode.UNKNOWN_MEMBER_ID

    # The epochs are in the current-assignment records (a tagged field), so a group rebuilt from them keeps them.
    rebuilt: dict = {}
    for key, value in g.written:
        ConsumerGroups.replay(rebuilt, consumer_offsets.decode_key(key), value)
    assert rebuilt["g"].members["a"].assignment_epochs == g.groups.groups["g"].members["a"].assignment_epochs
    g.groups.adopt(rebuilt)
    assert check(2, kept) is None and check(2, given) == ErrorCode.STALE_MEMBER_EPOCH


def test_assignment_epochs_are_written_as_kafka_writes_them():
    """Each TopicPartitions entry of a current-assignment record ends with tagged field 0, the compact int32
    array of its partitions' epochs (Kafka 4.3+); without epochs it ends with an empty tag section."""
    def value(epochs: list[int] | None) -> bytes:
        entry = {"topic_id": T1, "partitions": [0, 1]} | ({} if epochs is None else {"assignment_epochs": epochs})
        return consumer_offsets.consumer_group_value(consumer_offsets.CURRENT_ASSIGNMENT_RECORD, {
            "member_epoch": 5, "previous_member_epoch": 4, "state": STABLE, "assigned_partitions": [entry],
            "partitions_pending_revocation": []})

    partitions = b"\x03" + (0).to_bytes(4, "big") + (1).to_bytes(4, "big")  # compact array: length + 1
    epochs = b"\x03" + (2).to_bytes(4, "big") + (5).to_bytes(4, "big")
    assert T1 + partitions + b"\x00" in value(None)
    assert T1 + partitions + b"\x01\x00" + bytes([len(epochs)]) + epochs in value([2, 5])


def test_a_current_assignment_record_without_epochs_holds_everything_since_the_member_epoch():
    """What a broker before Kafka 4.3 wrote: no assignment epochs, so only the member's own epoch commits."""
    key = consumer_offsets.consumer_group_key(consumer_offsets.CURRENT_ASSIGNMENT_RECORD, "g", "a")
    value = consumer_offsets.consumer_group_value(consumer_offsets.CURRENT_ASSIGNMENT_RECORD, {
        "member_epoch": 5, "previous_member_epoch": 4, "state": STABLE,
        "assigned_partitions": [{"topic_id": T1, "partitions": [0, 1]}], "partitions_pending_revocation": []})
    rebuilt: dict = {}
    ConsumerGroups.replay(rebuilt, consumer_offsets.decode_key(key), value)
    g = Groups()
    g.groups.adopt(rebuilt)
    assert rebuilt["g"].members["a"].assignment_epochs == {}
    assert g.groups.check_commit("g", "a", 5, [("orders", 0)]) is None
    assert g.groups.check_commit("g", "a", 4, [("orders", 0)]) == ErrorCode.STALE_MEMBER_EPOCH


def test_group_consumer_max_size_refuses_a_new_member_and_keeps_the_others():
    g = Groups()
    g.groups.config = replace(g.groups.config, consumer_group_max_size=2)
    g.join("a", ["orders"])
    g.join("b", ["orders"])
    refused = g.join("c", ["orders"])
    assert (refused.error, refused.message) == (
        ErrorCode.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity of 2 members.")
    assert set(g.groups.groups["g"].members) == {"a", "b"}
    assert g.join("a", ["orders"]).error == ErrorCode.NONE  # a member rejoining keeps its place
