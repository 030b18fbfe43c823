"""One classic consumer group: its state, members, generation, chosen protocol and committed offsets.

This is the bookkeeping half of the classic rebalance protocol (Kafka's ``GroupMetadata``): it knows which
members exist, who has rejoined, which protocols everyone supports and how a protocol is chosen. What
happens *when* (timers, persistence, the order of replies) is decided by :mod:`broker.groups.machine`.
Nothing here does IO or reads a clock; timestamps are passed in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from broker.groups.offsets import GroupOffsets, TopicPartition
from broker.protocol.consumer_offsets import OffsetAndMetadata

CONSUMER_PROTOCOL_TYPE = "consumer"

Protocols = tuple[tuple[str, bytes], ...]
Reply = Callable[[Any], None]


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalGroupTransition(RuntimeError):
    """A transition Kafka's state diagram does not have: a coordinator bug, never a client's fault."""


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    # A member added by a JoinGroup that has not seen a completed rebalance yet: it cannot heartbeat, so
    # its timer is the (long) new-member join timeout and it expires even while waiting for the join.
    is_new: bool = False
    join_reply: Reply | None = None
    sync_reply: Reply | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_reply is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_reply is not None

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: Protocols) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def survives_session_expiry(self) -> bool:
        """Whether a passed session deadline is ignored: members waiting in a rebalance are bounded by the
        rebalance timeout instead (Kafka's ``hasSatisfiedHeartbeat``)."""
        return not self.is_new and (self.awaiting_join or self.awaiting_sync)


@dataclass(slots=True)
class InitialJoinDelay:
    """The initial-rebalance delay of a group rebalancing from Empty (Kafka's ``InitialDelayedJoin``):
    each time a member joins during a delay, another delay follows, until the budget runs out."""

    delay_ms: int
    remaining_ms: int


def _names(protocols: Protocols) -> set[str]:
    """The protocol names a member offers, each once: a member that lists one twice still counts once toward
    "supported by every member"."""
    return {name for name, _ in protocols}


@dataclass(eq=False)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    current_state_timestamp: int | None = None
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: set[str] = field(default_factory=set)  # ids handed out with MEMBER_ID_REQUIRED
    pending_sync_members: set[str] = field(default_factory=set)
    supported_protocols: Counter[str] = field(default_factory=Counter)
    # Only a brand-new group (generation 0) stretches its initial delay for late joiners.
    new_member_added: bool = False
    initial_join: InitialJoinDelay | None = None
    subscribed_topics: frozenset[str] | None = None
    offsets: GroupOffsets = field(default_factory=GroupOffsets)

    # --- state -----------------------------------------------------------------------------------------

    def is_state(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState, now: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalGroupTransition(f"group {self.group_id}: {self.state.value} -> {state.value}")
        self.state = state
        self.current_state_timestamp = now

    def can_rebalance(self) -> bool:
        return self.is_state(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    # --- members ---------------------------------------------------------------------------------------

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def has_static_member(self, group_instance_id: str | None) -> bool:
        return group_instance_id is not None and group_instance_id in self.static_members

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """A request naming an instance id that now belongs to another member id: a zombie instance."""
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    def add(self, member: Member, join_reply: Reply | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(_names(member.protocols))
        member.join_reply = join_reply
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        """Drop a member (its replies must have been answered by the caller); the leader moves on."""
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.supported_protocols.subtract(_names(member.protocols))
        self.supported_protocols += Counter()  # drop protocols nobody supports any more
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(self, member: Member, protocols: Protocols, rebalance_timeout_ms: int,
                      session_timeout_ms: int, join_reply: Reply | None) -> None:
        self.supported_protocols.subtract(_names(member.protocols))
        member.protocols = protocols
        self.supported_protocols.update(_names(protocols))
        self.supported_protocols += Counter()
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.join_reply = join_reply

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        """Give a static member's seat to a new member id (its instance restarted). Replies still waiting
        for the old id are answered by the caller before this; the seat keeps leadership and assignment."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        self.static_members[group_instance_id] = new_member_id
        return member

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Make sure the leader is a member that rejoined; False when nobody has (or there is no leader)."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- protocol selection -------------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocol_names: set[str]) -> bool:
        """Whether a member offering these protocols may join: an empty group takes any non-empty offer; a
        group with members needs the same protocol type and a protocol every current member supports."""
        if not self.members:
            return bool(protocol_type) and bool(protocol_names)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[name] == len(self.members) for name in protocol_names)

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer; ties go to the earliest vote."""
        candidates = {name for name, count in self.supported_protocols.items() if count == len(self.members)}
        if not candidates:
            raise ValueError(f"group {self.group_id}: no protocol is supported by every member")
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return max(votes, key=lambda name: votes[name])

    # --- generations -------------------------------------------------------------------------------------

    def init_next_generation(self, now: int, subscription_topics: Callable[[bytes], frozenset[str]]) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics(subscription_topics)
            self.transition_to(GroupState.COMPLETING_REBALANCE, now)
        else:
            self.protocol_name = None
            self.subscribed_topics = None
            self.transition_to(GroupState.EMPTY, now)
        self.pending_sync_members.clear()

    def compute_subscribed_topics(self, subscription_topics: Callable[[bytes], frozenset[str]]
                                  ) -> frozenset[str] | None:
        """Topics the consumers subscribe to, or None when unknown (not a consumer group, or a member's
        subscription does not decode): then every topic counts as subscribed."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None or not self.members:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics |= subscription_topics(member.metadata(self.protocol_name))
        except (ValueError, KeyError):
            return None
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """What the leader is given to assign from: (member id, instance id, metadata of the chosen protocol)."""
        assert self.protocol_name is not None
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    # --- offsets -----------------------------------------------------------------------------------------

    def expired_offsets(self, now: int, retention_ms: int) -> list[TopicPartition]:
        """Offsets to expire under Kafka's 2.1+ rules (KIP-211).

        * a group with a protocol type that is Empty: ``retention_ms`` after it became Empty;
        * a Stable consumer group that knows its subscriptions: offsets of topics nobody subscribes to,
          ``retention_ms`` after their commit;
        * a standalone group (commits without ever joining): ``retention_ms`` after each commit;
        * otherwise nothing expires.
        """
        if self.protocol_type is not None and self.is_state(GroupState.EMPTY):
            became_empty = self.current_state_timestamp

            def since_empty(committed: OffsetAndMetadata) -> int:
                return became_empty if became_empty is not None else committed.commit_timestamp

            return self.offsets.expired(now, retention_ms, since_empty)
        if (self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None
                and self.is_state(GroupState.STABLE)):
            return self.offsets.expired(now, retention_ms, _commit_time, self.subscribed_topics)
        if self.protocol_type is None:
            return self.offsets.expired(now, retention_ms, _commit_time)
        return []


def _commit_time(committed: OffsetAndMetadata) -> int:
    return committed.commit_timestamp


def plain_protocol_names(protocols: Sequence[tuple[str, bytes]]) -> set[str]:
    return {name for name, _ in protocols}
