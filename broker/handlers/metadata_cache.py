"""What the Metadata handler (:mod:`broker.handlers.cluster_info`) keeps between requests: each topic's encoded
entry, and whole every-topic answers, with what tells whether they still hold. One per broker."""

from __future__ import annotations

from collections.abc import Hashable

from broker.cluster.view import ClusterView
from broker.log.manager import LogManager
from broker.protocol.types import Encoded

# every-topic answers kept at once (versions, principals, ACL generations)
TOPIC_LISTS_KEPT = 64


class MetadataCache:
    def __init__(self, logs: LogManager, view: ClusterView) -> None:
        self._logs = logs
        self._view = view
        # (topic, version) -> (what its entry says, the entry encoded)
        self._entries: dict[tuple[str, int], tuple[Hashable, Encoded]] = {}
        # (version, who asks, the state they were made from) -> every topic's entries
        self._topic_lists: dict[Hashable, list[Encoded]] = {}

    def generation(self) -> tuple[int, int, bool]:
        """Changes whenever a topic is created, deleted or grown here or the cluster's metadata changes (its
        leaders, epochs, replicas, ISRs), or becomes the quorum's; taken before reading them, it tells whether
        an answer made from them earlier still holds."""
        return self._logs.generation, self._view.metadata_version(), self._view.caught_up

    def entry(self, key: tuple[str, int], signature: Hashable) -> Encoded | None:
        """A topic's entry kept for ``key``, if it was made from what ``signature`` says."""
        cached = self._entries.get(key)
        return cached[1] if cached is not None and cached[0] == signature else None

    def keep_entry(self, key: tuple[str, int], signature: Hashable, encoded: Encoded) -> None:
        if len(self._entries) > 4 * len(self._logs.topics) + 64:
            self._entries.clear()  # deleted topics' entries go
        self._entries[key] = (signature, encoded)

    def topic_list(self, key: Hashable) -> list[Encoded] | None:
        return self._topic_lists.get(key)

    def keep_topic_list(self, key: Hashable, entries: list[Encoded]) -> None:
        if len(self._topic_lists) >= TOPIC_LISTS_KEPT:
            self._topic_lists.clear()
        self._topic_lists[key] = entries
