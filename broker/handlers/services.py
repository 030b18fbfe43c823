"""The narrow services a broker gives its handlers (each request's :class:`RequestContext` carries them)."""

from __future__ import annotations

from dataclasses import dataclass

from broker.cluster.view import ClusterView
from broker.handlers.metadata_cache import MetadataCache


@dataclass(frozen=True, slots=True)
class Services:
    cluster: ClusterView  # live brokers, controller, partition leaders, the quorum's part in changes
    metadata_cache: MetadataCache  # what the Metadata handler keeps between requests
