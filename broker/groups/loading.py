"""Rebuilding groups from a `__consumer_offsets` partition, record by record in log order.

The latest record per key wins and a tombstone removes the key, which is also what compaction keeps, so
replaying a compacted log gives the same groups as replaying the full one. Offsets written in a transaction
(a transactional batch) wait for their producer's marker: COMMIT applies them in the marker's place, ABORT
drops them, and those of a transaction still open at the end come back as its pending offsets.
"""

from __future__ import annotations

import structlog

from broker.groups.consumer import ConsumerGroup, ConsumerGroups
from broker.groups.state import ClassicGroup, GroupState, Member
from broker.protocol import consumer_offsets
from broker.protocol.consumer_offsets import (
    ConsumerGroupKey,
    GroupMetadataKey,
    GroupMetadataRecord,
    OffsetAndMetadata,
    OffsetCommitKey,
    OffsetsRecordError,
)

log = structlog.get_logger("broker.groups")


class PartitionReplay:
    def __init__(self, partition: int) -> None:
        self.partition = partition
        self._offsets: dict[tuple[str, str, int], OffsetAndMetadata | None] = {}
        self._groups: dict[str, GroupMetadataRecord | None] = {}
        # producer id -> offsets of its open transaction, in log order
        self._transactional: dict[int, dict[tuple[str, str, int], OffsetAndMetadata | None]] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}  # consumer-protocol groups (KIP-848)

    def apply(self, key: bytes | None, value: bytes | None, producer_id: int = -1) -> None:
        """One record (``producer_id`` set for a transactional batch's); records we cannot decode are logged
        and skipped (they cannot be served anyway)."""
        if key is None:
            return
        try:
            decoded = consumer_offsets.decode_key(key)
            if isinstance(decoded, OffsetCommitKey):
                target = self._offsets if producer_id < 0 else self._transactional.setdefault(producer_id, {})
                target[(decoded.group, decoded.topic, decoded.partition)] = (
                    consumer_offsets.decode_offset_commit_value(value) if value is not None else None)
            elif isinstance(decoded, ConsumerGroupKey):
                ConsumerGroups.replay(self.consumer_groups, decoded, value)
            elif isinstance(decoded, GroupMetadataKey):
                self._groups[decoded.group] = (
                    consumer_offsets.decode_group_metadata_value(value) if value is not None else None)
        except OffsetsRecordError as exc:
            log.warning("skipping undecodable __consumer_offsets record", partition=self.partition,
                        error=str(exc))

    def apply_marker(self, producer_id: int, committed: bool) -> None:
        offsets = self._transactional.pop(producer_id, None)
        if offsets and committed:
            self._offsets.update(offsets)

    def groups(self, now: int) -> dict[str, ClassicGroup]:
        """The groups the partition describes.

        As in Kafka, a group comes back in the state its last record describes: Stable with its members
        (whose sessions the caller starts) or Empty; offsets without a group record make a standalone group.
        """
        loaded = {group_id: group_from_record(group_id, value)
                  for group_id, value in self._groups.items() if value is not None}
        for (group_id, topic, index), committed in self._offsets.items():
            if committed is None:
                continue
            group = loaded.get(group_id)
            if group is None:
                group = loaded[group_id] = ClassicGroup(group_id, current_state_timestamp=now)
            group.offsets.committed[(topic, index)] = committed
        for producer_id, offsets in self._transactional.items():
            for (group_id, topic, index), pending in offsets.items():
                if pending is None:
                    continue
                group = loaded.get(group_id)
                if group is None:
                    group = loaded[group_id] = ClassicGroup(group_id, current_state_timestamp=now)
                group.offsets.add_transactional(producer_id, {(topic, index): pending})
        return loaded


def group_from_record(group_id: str, value: GroupMetadataRecord) -> ClassicGroup:
    group = ClassicGroup(
        group_id,
        state=GroupState.STABLE if value.members else GroupState.EMPTY,
        current_state_timestamp=None if value.current_state_timestamp == -1 else value.current_state_timestamp,
        generation_id=value.generation,
        protocol_type=value.protocol_type or None,
        protocol_name=value.protocol,
    )
    for m in value.members:
        member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                        m.session_timeout_ms, value.protocol_type, ((value.protocol or "", m.subscription),),
                        assignment=m.assignment)
        group.add(member, None)
    if value.leader in group.members:
        group.leader_id = value.leader
    group.subscribed_topics = group.compute_subscribed_topics(consumer_offsets.subscription_topics)
    return group
