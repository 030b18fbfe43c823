"""The narrow services a broker gives its handlers (each request's :class:`RequestContext` carries them)."""

from __future__ import annotations

from dataclasses import dataclass

from broker.cluster.view import ClusterView
from broker.handlers.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager


@dataclass(frozen=True, slots=True)
class Services:
    cluster: ClusterView  # live brokers, controller, partition leaders, the quorum's part in changes
    metadata_cache: MetadataCache  # what the Metadata handler keeps between requests
    replicas: ReplicaManager  # the partitions' logs, appends, the ISR's confirmation, long polls
