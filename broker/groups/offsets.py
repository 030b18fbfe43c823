"""Committed offsets of one group, commits still being written, and Kafka's offset expiry rules.

A commit becomes visible (to OffsetFetch, to expiry) only once its record is in `__consumer_offsets`:
until then it is *pending*. Deleting a partition's offset drops its pending commits too, so a commit
whose append finishes after the tombstone was issued does not resurrect it in memory (the log has the
commit before the tombstone, so a replay agrees).

Transactional commits (TxnOffsetCommit) are in the log as soon as they are answered, but count only once
their transaction commits: until its COMMIT marker they wait per producer id in ``transactional``, and
an ABORT marker drops them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from broker.protocol.consumer_offsets import OffsetAndMetadata

TopicPartition = tuple[str, int]


class GroupOffsets:
    def __init__(self) -> None:
        self.committed: dict[TopicPartition, OffsetAndMetadata] = {}
        self._pending: Counter[TopicPartition] = Counter()
        # producer id -> offsets written by its open transaction
        self.transactional: dict[int, dict[TopicPartition, OffsetAndMetadata]] = {}

    def __bool__(self) -> bool:
        return bool(self.committed) or bool(self._pending) or bool(self.transactional)

    def add_transactional(self, producer_id: int, commits: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.transactional.setdefault(producer_id, {}).update(commits)

    def complete_transaction(self, producer_id: int, committed: bool) -> bool:
        """The producer's transaction ended; its offsets become committed if it committed. True if it
        had offsets here."""
        offsets = self.transactional.pop(producer_id, None)
        if offsets is None:
            return False
        if committed:
            self.committed.update(offsets)
        return True

    def unstable(self) -> set[TopicPartition]:
        """Partitions with an offset of an open transaction (OffsetFetch with require_stable refuses them)."""
        return {tp for offsets in self.transactional.values() for tp in offsets}

    def get(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        return self.committed.get(tp)

    def topics(self) -> set[str]:
        return {topic for topic, _ in self.committed}

    def prepare(self, tps: Iterable[TopicPartition]) -> None:
        """Commits for these partitions are being appended."""
        for tp in tps:
            self._pending[tp] += 1

    def complete(self, commits: dict[TopicPartition, OffsetAndMetadata], appended: bool) -> None:
        """The append of ``commits`` finished; on success they become the committed offsets."""
        for tp, committed in commits.items():
            if self._pending[tp] <= 0:
                continue  # deleted while the append was in flight
            self._pending[tp] -= 1
            if self._pending[tp] == 0:
                del self._pending[tp]
            if appended:
                self.committed[tp] = committed

    def remove(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Forget these partitions' offsets (and commits in flight); the ones that were committed."""
        removed = []
        for tp in tps:
            self._pending.pop(tp, None)
            if self.committed.pop(tp, None) is not None:
                removed.append(tp)
        return removed

    def remove_all(self) -> list[TopicPartition]:
        return self.remove(list(self.committed) + list(self._pending))

    def expired(self, now: int, retention_ms: int, base_timestamp: Callable[[OffsetAndMetadata], int],
                keep_topics: frozenset[str] = frozenset()) -> list[TopicPartition]:
        """Partitions whose offsets have expired (not removed here).

        An offset with an explicit expire timestamp (old clients' retention time) expires then; any other
        expires ``retention_ms`` after ``base_timestamp``. Topics in ``keep_topics`` and partitions with a
        commit in flight never expire.
        """
        expired = []
        for tp, committed in self.committed.items():
            if tp[0] in keep_topics or self._pending[tp] > 0:
                continue
            if committed.expire_timestamp is not None:
                if now >= committed.expire_timestamp:
                    expired.append(tp)
            elif now - base_timestamp(committed) >= retention_ms:
                expired.append(tp)
        return expired
