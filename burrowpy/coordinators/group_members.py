"""Owners of the partitions of groups on the consumer protocol (KIP-848), from their records in
``__consumer_offsets``.

A classic group writes one record with every member and its assignment, which
:func:`~burrowpy.coordinators.offsets_topic.interpret` turns into owners directly. A consumer-protocol
group writes each member separately: its metadata (client id and host, record type 5) and its current
assignment (record type 8), the latter naming topics by id. :class:`ConsumerProtocolMembers` keeps the
members of every such group and, whenever one changes, gives the storage requests that replace that
group's owners: all of them cleared, then one owner per assigned partition of each member whose metadata
is known. Partitions of topics whose id is not known yet are left out until :meth:`learn_topic_ids`
brings their names (the consumer module asks the cluster's metadata for them).

Pure: no IO, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from burrowpy.protocol import ClearConsumerOwners, SetConsumerOwner


@dataclass(frozen=True, slots=True)
class SetMember:
    """A member's metadata record (type 5)."""

    group: str
    member_id: str
    client_id: str
    client_host: str


@dataclass(frozen=True, slots=True)
class SetMemberAssignment:
    """A member's current assignment record (type 8): (topic id, partitions) pairs."""

    group: str
    member_id: str
    assigned: tuple[tuple[bytes, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class RemoveMember:
    """A tombstone of a member's metadata or current assignment: the member has left."""

    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class RemoveGroupMembers:
    """A tombstone of the group's own record (type 3): the group is gone from the consumer protocol."""

    group: str


MemberEvent = SetMember | SetMemberAssignment | RemoveMember | RemoveGroupMembers
MEMBER_EVENTS = (SetMember, SetMemberAssignment, RemoveMember, RemoveGroupMembers)


@dataclass(slots=True)
class _Member:
    client_id: str | None = None
    client_host: str | None = None
    assigned: tuple[tuple[bytes, tuple[int, ...]], ...] = ()


@dataclass
class ConsumerProtocolMembers:
    cluster: str
    _groups: dict[str, dict[str, _Member]] = field(default_factory=dict)
    _topic_names: dict[bytes, str] = field(default_factory=dict)

    def apply(self, events: Iterable[MemberEvent]) -> list[Any]:
        """Take member events in log order; the storage requests for the owners of the groups they changed."""
        changed: dict[str, None] = {}
        for event in events:
            group = event.group
            if isinstance(event, RemoveGroupMembers):
                self._groups.pop(group, None)
            elif isinstance(event, RemoveMember):
                members = self._groups.get(group)
                if members is not None:
                    members.pop(event.member_id, None)
                    if not members:
                        del self._groups[group]
            else:
                member = self._groups.setdefault(group, {}).setdefault(event.member_id, _Member())
                if isinstance(event, SetMember):
                    member.client_id, member.client_host = event.client_id, event.client_host
                else:
                    member.assigned = event.assigned
            changed[group] = None
        return [request for group in changed for request in self.owners(group)]

    def owners(self, group: str) -> list[Any]:
        """Storage requests that make the group's owners what its members say now."""
        requests: list[Any] = [ClearConsumerOwners(cluster=self.cluster, group=group)]
        for member in self._groups.get(group, {}).values():
            if member.client_id is None:
                continue  # its metadata record has not been read yet
            for topic_id, partitions in member.assigned:
                topic = self._topic_names.get(topic_id)
                if topic is None:
                    continue
                requests.extend(SetConsumerOwner(cluster=self.cluster, group=group, topic=topic, partition=partition,
                                                 owner=member.client_host or "", client_id=member.client_id)
                                for partition in partitions)
        return requests

    def unknown_topic_ids(self) -> set[bytes]:
        """Topic ids some member is assigned that have no name yet."""
        return {topic_id for members in self._groups.values() for member in members.values()
                for topic_id, _ in member.assigned if topic_id not in self._topic_names}

    def learn_topic_ids(self, names: dict[bytes, str]) -> list[Any]:
        """Take topic id -> name pairs; the owner requests of every group that now resolves more partitions."""
        new = {topic_id: name for topic_id, name in names.items() if self._topic_names.get(topic_id) != name}
        if not new:
            return []
        self._topic_names.update(new)
        return [request for group, members in self._groups.items()
                if any(topic_id in new for member in members.values() for topic_id, _ in member.assigned)
                for request in self.owners(group)]
