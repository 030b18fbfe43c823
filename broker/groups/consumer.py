"""Groups on the consumer protocol (KIP-848): members heartbeat, the coordinator assigns.

What a ConsumerGroupHeartbeat does, as in Kafka's group coordinator:

* A member joins with epoch 0 and its subscription, is given (or, v1+, brings) a member id, and from then
  on heartbeats with its member epoch, sending its subscription and owned partitions only when they change.
  Epoch -1 leaves; -2 leaves a static member's place open for its instance id.
* Any change to the membership or the subscriptions (or to a subscribed topic's partition count) bumps
  the **group epoch**; the assignor (``uniform`` or ``range``, the member's ``server_assignor``) then
  computes a **target assignment** for that epoch.
* Each member moves to the target on its own: first it is told to give up the partitions it must lose and
  keeps its epoch (UNREVOKED_PARTITIONS) until a heartbeat shows it no longer owns them; then it gets the
  new epoch and the partitions no other member still holds (UNRELEASED_PARTITIONS until all are free,
  else STABLE). A partition is never owned by two members at once.
* Members subscribe by topic names or by a regular expression that whole topic names must match (Python's
  ``re``; Kafka uses RE2/J, the same for the patterns topic names need); a new matching topic, or a
  subscribed topic growing partitions, is seen at the next heartbeat and bumps the group epoch.
* A member silent for ``group.consumer.session.timeout.ms``, or not revoking within its rebalance
  timeout, is removed.

Every change is written to `__consumer_offsets` in Kafka's record types (3 group epoch, 5 member metadata,
6 target assignment epoch, 7 a member's target assignment, 8 its current assignment, tombstones when a
member leaves), and a restart rebuilds the groups from them. Offsets stay in the classic coordinator's
bookkeeping (a consumer group's offsets are stored and expire like any group's); commits from members are
checked against their member epoch as Kafka 4.3 does (KIP-1251): the member's own epoch commits anything, a
newer one nothing, and an older one only partitions the member held already at that epoch and still holds,
so a commit sent just before a heartbeat answer raised the member's epoch is not refused. Each partition's
assignment epoch is written in the current-assignment record (its tagged field, as Kafka 4.3+ writes it); a
record written without them (Kafka before 4.3) holds every partition since the member's current epoch.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import structlog

from broker.errors import ErrorCode
from broker.groups.assignors import Assignment, assign
from broker.groups.requests import GroupDescription, MemberDescription
from broker.protocol import consumer_offsets
from broker.protocol.api import encode_struct

CONSUMER_PROTOCOL_TYPE = "consumer"

log = structlog.get_logger("broker.groups")

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
# Kafka's MemberState ids, as the current-assignment record stores them.
STABLE = 1
UNREVOKED_PARTITIONS = 2
UNRELEASED_PARTITIONS = 3

SESSION_TIMER = "cg-session"
REVOCATION_TIMER = "cg-revoke"

OffsetsRecord = tuple[bytes, bytes | None]
# (name, topic id, partition count) of each subscribed topic, sorted
TopicSignature = tuple[tuple[str, bytes, int], ...]


@dataclass(eq=False, slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed: tuple[str, ...] = ()
    regex: str | None = None
    rebalance_timeout_ms: int = 300000
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: int = STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # (topic id, partition) -> the member epoch since which the member holds it (KIP-1251); a partition
    # missing here is held since the current member epoch
    assignment_epochs: dict[tuple[bytes, int], int] = field(default_factory=dict)
    last_sent: Assignment | None = None  # what the member was last told (not persisted)
    # which topics its principal may describe, from its last heartbeat (not persisted; None: all of them)
    visible: Callable[[str], bool] | None = None

    def holding(self) -> set[tuple[bytes, int]]:
        """Every (topic id, partition) the member holds: assigned or still to be revoked."""
        return _flatten(self.assigned) | _flatten(self.pending_revocation)

    def topics(self, existing: Iterable[str]) -> set[str]:
        """The topics it subscribes to: by name, and the existing ones its regex matches (whole names) among
        those its principal may describe (ACLs; named topics were checked when it subscribed)."""
        chosen = set(self.subscribed)
        if self.regex:
            pattern = _compiled(self.regex)
            visible = self.visible
            chosen.update(name for name in existing if pattern.fullmatch(name) and (visible is None or visible(name)))
        return chosen


@dataclass(eq=False, slots=True)
class ConsumerGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    topic_signature: TopicSignature = ()  # the subscribed topics' ids and partition counts at the last assignment

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state != STABLE for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def assignor(self, default: str) -> str:
        """The assignor a member asked for, else ``default`` (the first of group.consumer.assignors)."""
        for member in self.members.values():
            if member.server_assignor:
                return member.server_assignor
        return default

    def subscribed_topics(self, topics: Iterable[str]) -> set[str]:
        return {topic for member in self.members.values() for topic in member.topics(topics)}


@functools.lru_cache(maxsize=256)
def _compiled(regex: str) -> re.Pattern[str]:
    return re.compile(regex)


def _flatten(assignment: Assignment) -> set[tuple[bytes, int]]:
    return {(topic, p) for topic, partitions in assignment.items() for p in partitions}


def _group(tps: Iterable[tuple[bytes, int]]) -> Assignment:
    topics: dict[bytes, set[int]] = {}
    for topic, partition in tps:
        topics.setdefault(topic, set()).add(partition)
    return {topic: frozenset(parts) for topic, parts in topics.items()}


def _wire(assignment: Assignment) -> list[dict[str, Any]]:
    return [{"topic_id": topic, "partitions": sorted(parts)} for topic, parts in sorted(assignment.items())]


def _from_wire(entries: list[dict[str, Any]] | None) -> Assignment:
    return {bytes(e["topic_id"]): frozenset(e["partitions"]) for e in entries or [] if e["partitions"]}


def _wire_with_epochs(assignment: Assignment, epochs: dict[tuple[bytes, int], int], held_since: int
                      ) -> list[dict[str, Any]]:
    """A current-assignment record's partitions with the epoch since which each is held (KIP-1251)."""
    wired = _wire(assignment)
    for entry in wired:
        entry["assignment_epochs"] = [epochs.get((entry["topic_id"], p), held_since) for p in entry["partitions"]]
    return wired


def _epochs_from_wire(entries: list[dict[str, Any]] | None) -> dict[tuple[bytes, int], int]:
    """The assignment epochs a current-assignment record carries; none from a record written without them."""
    return {(bytes(e["topic_id"]), partition): epoch for e in entries or []
            if len(e.get("assignment_epochs") or ()) == len(e["partitions"])
            for partition, epoch in zip(e["partitions"], e["assignment_epochs"], strict=True)}


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: list[dict[str, Any]] | None
    client_id: str
    client_host: str
    version: int
    topic_visible: Callable[[str], bool] | None = None  # the member's DESCRIBE right on a topic (ACLs)


@dataclass(slots=True)
class HeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    assignment: Assignment | None = None


class ConsumerGroups:
    """The consumer-protocol groups of the partitions a :class:`~broker.groups.machine.GroupMachine` owns.

    ``topics()`` gives the broker's topics as name -> (topic id, partition count); ``append`` writes records
    to `__consumer_offsets` as the machine's log does; ``deadlines`` is the machine's timer set.
    """

    def __init__(self, config: Any, clock: Callable[[], int], deadlines: Any,
                 append: Callable[[str, list[OffsetsRecord], Callable[[ErrorCode], None]], None],
                 topics: Callable[[], dict[str, tuple[bytes, int]]]) -> None:
        self.config = config
        self._clock = clock
        self._deadlines = deadlines
        self._append = append
        self._topics = topics
        self.groups: dict[str, ConsumerGroup] = {}

    # --- heartbeats ------------------------------------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest, reply: Callable[[HeartbeatResult], None]) -> None:
        error = self._validate(request)
        if error is not None:
            reply(HeartbeatResult(ErrorCode.INVALID_REQUEST, error))
            return
        regex_error = self._regex_error(request.subscribed_topic_regex)
        if regex_error is not None:
            reply(HeartbeatResult(ErrorCode.INVALID_REGULAR_EXPRESSION, regex_error))
            return
        assignors = self.config.consumer_assignors
        if request.server_assignor is not None and request.server_assignor not in assignors:
            reply(HeartbeatResult(ErrorCode.UNSUPPORTED_ASSIGNOR,
                                  f"assignor {request.server_assignor!r} is not one of {', '.join(assignors)}"))
            return
        group = self.groups.get(request.group_id)
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            self._leave(group, request, reply)
            return
        written: list[OffsetsRecord] = []
        if request.member_epoch == 0:
            if group is None:
                group = self.groups[request.group_id] = ConsumerGroup(request.group_id)
            member_id = request.member_id or str(uuid.uuid4())
            previous = group.members.get(member_id)
            if previous is None and request.instance_id is not None:
                # a static member coming back under a new member id takes its predecessor's place
                previous = next((m for m in group.members.values() if m.instance_id == request.instance_id), None)
            if previous is None and len(group.members) >= self.config.consumer_group_max_size:
                reply(HeartbeatResult(ErrorCode.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum "
                                      f"capacity of {self.config.consumer_group_max_size} members."))  # Kafka's words
                return
            if previous is not None:
                self._remove(group, previous, written)  # rejoining (after being fenced): start over
            member = group.members[member_id] = ConsumerMember(member_id)
            joined = True
        else:
            existing = group.members.get(request.member_id) if group is not None else None
            if group is None or existing is None:
                reply(HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, f"member {request.member_id} is not in the group"))
                return
            member = existing
            owned = _from_wire(request.owned) if request.owned is not None else None
            if request.member_epoch != member.member_epoch and not (
                    request.member_epoch == member.previous_member_epoch and owned is not None
                    and _flatten(owned) <= _flatten(member.assigned)):
                reply(HeartbeatResult(ErrorCode.FENCED_MEMBER_EPOCH,
                                      f"epoch {request.member_epoch} is not the member's epoch {member.member_epoch}"))
                return
            joined = False
        metadata_before = None if joined else self._member_metadata_record(group, member)
        subscription_changed = self._update_member(member, request)
        metadata = self._member_metadata_record(group, member)
        if metadata != metadata_before:
            written.append(metadata)
        if joined or subscription_changed or group.topic_signature != self._signature(group):
            group.epoch += 1
            written.append(self._group_epoch_record(group))
        if group.assignment_epoch < group.epoch:
            written += self._compute_target(group)
        owned = _from_wire(request.owned) if request.owned is not None else None
        written += self._reconcile(group, member, owned)
        self._deadlines.set((SESSION_TIMER, group.group_id, member.member_id),
                            self._clock() + self.config.consumer_session_timeout_ms)
        assignment = None
        if joined or member.last_sent != member.assigned or (owned is not None and owned != member.assigned):
            assignment = dict(member.assigned)
            member.last_sent = assignment
        result = HeartbeatResult(member_id=member.member_id, member_epoch=member.member_epoch, assignment=assignment)
        self._write(group, written, lambda err: reply(result if err == ErrorCode.NONE else HeartbeatResult(err)))

    def _validate(self, request: HeartbeatRequest) -> str | None:
        if not request.group_id:
            return "GroupId can't be empty"
        if request.member_epoch == 0:
            if request.rebalance_timeout_ms == -1:
                return "RebalanceTimeoutMs must be provided in first request"
            if request.owned is None or _from_wire(request.owned):
                return "TopicPartitions must be empty when (re-)joining"
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request"
            if request.version >= 1 and not request.member_id:
                return "MemberId can't be empty"
        elif not request.member_id:
            return "MemberId can't be empty"
        return None

    @staticmethod
    def _regex_error(regex: str | None) -> str | None:
        if not regex:
            return None
        try:
            _compiled(regex)
        except re.error as exc:
            return f"SubscribedTopicRegex {regex!r} is not a valid regular expression: {exc}"
        return None

    def _update_member(self, member: ConsumerMember, request: HeartbeatRequest) -> bool:
        """Apply what the heartbeat changes; True if the subscription changed (a new group epoch)."""
        changed = False
        member.visible = request.topic_visible
        if request.subscribed_topic_names is not None:
            subscribed = tuple(sorted(set(request.subscribed_topic_names)))
            changed = subscribed != member.subscribed
            member.subscribed = subscribed
        if request.subscribed_topic_regex is not None:  # "" clears it
            regex = request.subscribed_topic_regex or None
            changed = changed or regex != member.regex
            member.regex = regex
        if request.server_assignor is not None and request.server_assignor != member.server_assignor:
            member.server_assignor = request.server_assignor
            changed = True
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.instance_id is not None:
            member.instance_id = request.instance_id
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        member.client_id, member.client_host = request.client_id, request.client_host
        return changed

    def _signature(self, group: ConsumerGroup) -> TopicSignature:
        topics = self._topics()
        return tuple(sorted((name, *topics[name]) for name in group.subscribed_topics(topics) if name in topics))

    def _compute_target(self, group: ConsumerGroup) -> list[OffsetsRecord]:
        topics = self._topics()
        subscriptions = {m.member_id: frozenset(topics[name][0] for name in m.topics(topics) if name in topics)
                         for m in group.members.values()}
        partitions = {topic_id: count for topic_id, count in topics.values()}
        target = assign(group.assignor(self.config.consumer_assignors[0]), subscriptions, partitions, group.target)
        written: list[OffsetsRecord] = []
        for member_id, assignment in target.items():
            if group.target.get(member_id) != assignment:
                written.append((consumer_offsets.consumer_group_key(consumer_offsets.TARGET_ASSIGNMENT_MEMBER_RECORD, group.group_id,
                                                           member_id),
                                consumer_offsets.consumer_group_value(consumer_offsets.TARGET_ASSIGNMENT_MEMBER_RECORD,
                                                             {"topic_partitions": _wire(assignment)})))
        group.target = target
        group.assignment_epoch = group.epoch
        group.topic_signature = self._signature(group)
        written.append((consumer_offsets.consumer_group_key(consumer_offsets.TARGET_ASSIGNMENT_METADATA_RECORD, group.group_id),
                        consumer_offsets.consumer_group_value(consumer_offsets.TARGET_ASSIGNMENT_METADATA_RECORD,
                                                     {"assignment_epoch": group.assignment_epoch})))
        return written

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None
                   ) -> list[OffsetsRecord]:
        """Move the member towards its target (revocation first); the records of what changed."""
        before = (member.member_epoch, member.previous_member_epoch, member.state, member.assigned,
                  member.pending_revocation)
        target = _flatten(group.target.get(member.member_id, {}))
        if member.state == UNREVOKED_PARTITIONS:
            if owned is None or _flatten(owned) & _flatten(member.pending_revocation):
                return []  # still waiting for the member to give them up
            member.pending_revocation = {}
            self._deadlines.cancel((REVOCATION_TIMER, group.group_id, member.member_id))
        assigned = _flatten(member.assigned)
        revoke = assigned - target
        if revoke:
            member.assigned = _group(assigned & target)
            member.pending_revocation = _group(revoke)
            member.state = UNREVOKED_PARTITIONS
            self._deadlines.set((REVOCATION_TIMER, group.group_id, member.member_id),
                                self._clock() + member.rebalance_timeout_ms)
        else:
            held = set()
            for other in group.members.values():
                if other is not member:
                    held |= other.holding()
            wanted = target - assigned
            free = wanted - held
            member.assigned = _group(assigned | free)
            if member.member_epoch != group.assignment_epoch:
                member.previous_member_epoch = member.member_epoch
                member.member_epoch = group.assignment_epoch
            member.state = UNRELEASED_PARTITIONS if wanted - free else STABLE
            for partition in free:
                member.assignment_epochs[partition] = member.member_epoch
        holding = member.holding()
        member.assignment_epochs = {partition: epoch for partition, epoch in member.assignment_epochs.items()
                                    if partition in holding}
        after = (member.member_epoch, member.previous_member_epoch, member.state, member.assigned,
                 member.pending_revocation)
        if after == before:
            return []
        return [self._current_assignment_record(group, member)]

    # --- leaving and timeouts -----------------------------------------------------------------------------------

    def _leave(self, group: ConsumerGroup | None, request: HeartbeatRequest,
               reply: Callable[[HeartbeatResult], None]) -> None:
        member = group.members.get(request.member_id) if group is not None else None
        if group is None or member is None:
            reply(HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, f"member {request.member_id} is not in the group"))
            return
        written: list[OffsetsRecord] = []
        self._remove(group, member, written)
        self._write(group, written, lambda err: reply(HeartbeatResult(
            err, member_id=request.member_id, member_epoch=request.member_epoch)))

    def _remove(self, group: ConsumerGroup, member: ConsumerMember, written: list[OffsetsRecord]) -> None:
        """Take a member out (its partitions become free at once) and bump the group epoch."""
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        self._deadlines.cancel((SESSION_TIMER, group.group_id, member.member_id))
        self._deadlines.cancel((REVOCATION_TIMER, group.group_id, member.member_id))
        for record_type in (consumer_offsets.CURRENT_ASSIGNMENT_RECORD, consumer_offsets.TARGET_ASSIGNMENT_MEMBER_RECORD,
                            consumer_offsets.MEMBER_METADATA_RECORD):
            written.append((consumer_offsets.consumer_group_key(record_type, group.group_id, member.member_id), None))
        group.epoch += 1
        written.append(self._group_epoch_record(group))

    def on_timer(self, kind: str, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        reason = "its session timed out" if kind == SESSION_TIMER else "it did not revoke partitions in time"
        log.info("removing a consumer group member", group=group_id, member=member_id, reason=reason)
        written: list[OffsetsRecord] = []
        self._remove(group, member, written)
        self._write(group, written, lambda err: None)

    # --- records --------------------------------------------------------------------------------------------

    def _group_epoch_record(self, group: ConsumerGroup) -> OffsetsRecord:
        return (consumer_offsets.consumer_group_key(consumer_offsets.GROUP_EPOCH_RECORD, group.group_id),
                consumer_offsets.consumer_group_value(consumer_offsets.GROUP_EPOCH_RECORD, {"epoch": group.epoch}))

    def _member_metadata_record(self, group: ConsumerGroup, member: ConsumerMember) -> OffsetsRecord:
        return (consumer_offsets.consumer_group_key(consumer_offsets.MEMBER_METADATA_RECORD, group.group_id, member.member_id),
                consumer_offsets.consumer_group_value(consumer_offsets.MEMBER_METADATA_RECORD, {
                    "instance_id": member.instance_id, "rack_id": member.rack_id, "client_id": member.client_id,
                    "client_host": member.client_host, "subscribed_topic_names": list(member.subscribed),
                    "subscribed_topic_regex": member.regex, "rebalance_timeout_ms": member.rebalance_timeout_ms,
                    "server_assignor": member.server_assignor}))

    def _current_assignment_record(self, group: ConsumerGroup, member: ConsumerMember) -> OffsetsRecord:
        return (consumer_offsets.consumer_group_key(consumer_offsets.CURRENT_ASSIGNMENT_RECORD, group.group_id, member.member_id),
                consumer_offsets.consumer_group_value(consumer_offsets.CURRENT_ASSIGNMENT_RECORD, {
                    "member_epoch": member.member_epoch, "previous_member_epoch": member.previous_member_epoch,
                    "state": member.state,
                    "assigned_partitions": _wire_with_epochs(member.assigned, member.assignment_epochs,
                                                             member.member_epoch),
                    "partitions_pending_revocation": _wire_with_epochs(
                        member.pending_revocation, member.assignment_epochs, member.member_epoch)}))

    def _write(self, group: ConsumerGroup, written: list[OffsetsRecord], done: Callable[[ErrorCode], None]) -> None:
        if not written:
            done(ErrorCode.NONE)
            return
        self._append(group.group_id, written, done)

    # --- loading -------------------------------------------------------------------------------------------

    @staticmethod
    def replay(groups: dict[str, ConsumerGroup], key: consumer_offsets.ConsumerGroupKey, value: bytes | None) -> None:
        """One record of a partition being loaded (tombstones included), into ``groups``."""
        group = groups.get(key.group)
        if group is None:
            if value is None:
                return
            group = groups[key.group] = ConsumerGroup(key.group)
        if key.member is None:
            if value is None:
                if key.record_type == consumer_offsets.GROUP_EPOCH_RECORD:
                    del groups[key.group]
                return
            body = consumer_offsets.decode_consumer_group_value(key.record_type, value)
            if key.record_type == consumer_offsets.GROUP_EPOCH_RECORD:
                group.epoch = body["epoch"]
            else:
                group.assignment_epoch = body["assignment_epoch"]
            return
        if value is None:
            if key.record_type == consumer_offsets.MEMBER_METADATA_RECORD:
                group.members.pop(key.member, None)
            elif key.record_type == consumer_offsets.TARGET_ASSIGNMENT_MEMBER_RECORD:
                group.target.pop(key.member, None)
            return
        body = consumer_offsets.decode_consumer_group_value(key.record_type, value)
        if key.record_type == consumer_offsets.TARGET_ASSIGNMENT_MEMBER_RECORD:
            group.target[key.member] = _from_wire(body["topic_partitions"])
            return
        member = group.members.setdefault(key.member, ConsumerMember(key.member))
        if key.record_type == consumer_offsets.MEMBER_METADATA_RECORD:
            member.instance_id, member.rack_id = body["instance_id"], body["rack_id"]
            member.client_id, member.client_host = body["client_id"], body["client_host"]
            member.subscribed = tuple(body["subscribed_topic_names"])
            member.regex, member.server_assignor = body["subscribed_topic_regex"], body["server_assignor"]
            member.rebalance_timeout_ms = body["rebalance_timeout_ms"]
        else:
            member.member_epoch, member.previous_member_epoch = body["member_epoch"], body["previous_member_epoch"]
            member.state = body["state"]
            member.assigned = _from_wire(body["assigned_partitions"])
            member.pending_revocation = _from_wire(body["partitions_pending_revocation"])
            member.assignment_epochs = {**_epochs_from_wire(body["assigned_partitions"]),
                                        **_epochs_from_wire(body["partitions_pending_revocation"])}

    def adopt(self, loaded: dict[str, ConsumerGroup]) -> None:
        """Take over groups rebuilt by :meth:`replay`; their members must heartbeat within a session timeout."""
        for group_id, group in loaded.items():
            group.topic_signature = self._signature(group)
            self.groups[group_id] = group
            for member in group.members.values():
                member.last_sent = dict(member.assigned)
                self._deadlines.set((SESSION_TIMER, group_id, member.member_id),
                                    self._clock() + self.config.consumer_session_timeout_ms)

    def unload(self, group_ids: Iterable[str]) -> None:
        for group_id in group_ids:
            group = self.groups.pop(group_id, None)
            if group is None:
                continue
            for member_id in group.members:
                self._deadlines.cancel((SESSION_TIMER, group_id, member_id))
                self._deadlines.cancel((REVOCATION_TIMER, group_id, member_id))

    # --- offsets and admin ------------------------------------------------------------------------------------

    def delete(self, group_id: str) -> None:
        """DeleteGroups of a group without members: tombstones for its group-wide records."""
        del self.groups[group_id]
        self._append(group_id, [(consumer_offsets.consumer_group_key(record_type, group_id), None) for record_type in
                                (consumer_offsets.TARGET_ASSIGNMENT_METADATA_RECORD, consumer_offsets.GROUP_EPOCH_RECORD)],
                     lambda error: None)

    def classic_description(self, group_id: str) -> GroupDescription:
        """A consumer group as DescribeGroups (the classic API) shows it, as Kafka does for older tools:
        protocol type "consumer", the assignor as protocol, members with their subscription and assignment
        in the classic consumer protocol's layouts."""
        group = self.groups[group_id]
        names = {topic_id: name for name, (topic_id, _) in self._topics().items()}
        members = tuple(MemberDescription(
            m.member_id, m.instance_id, m.client_id, m.client_host,
            encode_struct("ConsumerProtocolSubscription", 0, {"topics": list(m.subscribed), "user_data": None}),
            encode_struct("ConsumerProtocolAssignment", 0, {"assigned_partitions": [
                {"topic": names.get(t, ""), "partitions": sorted(p)} for t, p in sorted(m.assigned.items())],
                "user_data": None}),
        ) for m in group.members.values())
        return GroupDescription(group_id, group.state, CONSUMER_PROTOCOL_TYPE,
                                group.assignor(self.config.consumer_assignors[0]), members)

    def check_commit(self, group_id: str, member_id: str, member_epoch: int,
                     partitions: Iterable[tuple[str, int]]) -> ErrorCode | None:
        """None if a commit of these (topic, partition) by this member at this epoch may proceed, or the group
        is not one of ours; else UNKNOWN_MEMBER_ID or STALE_MEMBER_EPOCH, for the whole commit. A commit
        without a member (an admin's) is let through only while the group has no members. An epoch older
        than the member's commits only partitions it has held since that epoch (KIP-1251)."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if not member_id and member_epoch < 0:
            return None if not group.members else ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch == member.member_epoch:
            return None
        if member_epoch > member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        ids = {name: topic_id for name, (topic_id, _) in self._topics().items()}
        holding = member.holding()
        for topic, partition in partitions:
            held = (ids.get(topic), partition)
            if held not in holding or member.assignment_epochs.get(held, member.member_epoch) > member_epoch:
                return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def describe(self, group_id: str, topic_names: dict[bytes, str]) -> dict[str, Any] | None:
        group = self.groups.get(group_id)
        if group is None:
            return None

        def described(assignment: Assignment) -> dict[str, Any]:
            return {"topic_partitions": [{"topic_id": t, "topic_name": topic_names.get(t, ""),
                                          "partitions": sorted(p)} for t, p in sorted(assignment.items())]}

        return {"group_id": group_id, "group_state": group.state, "group_epoch": group.epoch,
                "assignment_epoch": group.assignment_epoch, "assignor_name": group.assignor(self.config.consumer_assignors[0]),
                "members": [{"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                             "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
                             # Kafka 4 shows no regex as an empty one
                             "subscribed_topic_names": list(m.subscribed), "subscribed_topic_regex": m.regex or "",
                             "assignment": described(m.assigned),
                             "target_assignment": described(group.target.get(m.member_id, {}))}
                            for m in group.members.values()]}
