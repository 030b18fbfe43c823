"""The narrow services a broker gives its handlers (each request's :class:`RequestContext` carries them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from broker.cluster.controller import BrokerSighting
from broker.cluster.metadata import ClusterMetadata
from broker.cluster.view import ClusterView
from broker.config import BrokerConfig
from broker.dynamic_config import DynamicBrokerConfigs
from broker.groups.coordinator import GroupCoordinator
from broker.handlers.metadata_cache import MetadataCache
from broker.log.manager import LogManager
from broker.quotas import Change, ClientQuotas, QuotaWindow
from broker.replica_manager import ReplicaManager
from broker.security.acl import Acl, Authorizer
from broker.security.scram import ScramCredential, ScramStore
from broker.txn.coordinator import ProducerIds, TransactionCoordinator


class TopicAdmin(Protocol):
    """The changes of the administrative APIs: straight to the local logs and stores on a single node, through
    the metadata quorum in a cluster (each in force here once the call returns)."""

    async def catch_up(self) -> None: ...

    async def create_topic(self, name: str, partitions: int, configs: dict[str, Any], replication_factor: int,
                           assignments: list[list[int]] | None = None) -> bytes: ...

    async def delete_topic(self, name: str) -> None: ...

    async def create_partitions(self, name: str, total: int, assignments: list[list[int]] | None = None) -> None: ...

    async def alter_configs(self, name: str, updates: dict[str, Any], *, replace: bool,
                            validate_only: bool) -> None: ...

    async def alter_broker_configs(self, scope: str, layer: dict[str, str]) -> None: ...

    async def alter_client_quotas(self, changes: list[Change]) -> None: ...

    async def change_acls(self, created: list[Acl], deleted: list[Acl]) -> None: ...

    async def alter_scram(self, upserts: list[tuple[str, str, ScramCredential]],
                          deletions: list[tuple[str, str]]) -> None: ...

    async def elect_leaders(self, preferred: bool, partitions: list[tuple[str, int]] | None,
                            timeout: float) -> list[tuple[str, int, int, str | None]]: ...


class RequestMetrics(Protocol):
    """The counters the Produce and Fetch answers move (:class:`broker.metrics.BrokerMetrics`)."""

    replication_bytes_out: int
    reassignment_bytes_out: int

    def produce_answered(self, topic: str, error: int) -> None: ...

    def fetch_answered(self, topic: str, error: int) -> None: ...

    def fetched(self, topic: str, size: int) -> None: ...


class VoterDirectory(Protocol):
    """What AddRaftVoter and RemoveRaftVoter read of a cluster's node besides its Raft node: the brokers gossip
    sees, and the voters added at run time (in the replicated metadata)."""

    @property
    def metadata(self) -> ClusterMetadata: ...

    def sightings(self) -> dict[int, BrokerSighting]: ...


@dataclass(frozen=True, slots=True)
class Services:
    cluster: ClusterView  # live brokers, controller, partition leaders, the quorum's part in changes
    metadata_cache: MetadataCache  # what the Metadata handler keeps between requests
    replicas: ReplicaManager  # the partitions' logs, appends, the ISR's confirmation, long polls
    node_id: int
    cluster_id: str
    api_versions: dict[int, tuple[int, int]]  # what ApiVersions advertises for the broker's listeners
    config: BrokerConfig  # the broker's configs, dynamic ones applied
    dynamic_configs: DynamicBrokerConfigs  # DescribeConfigs' and AlterConfigs' broker layers
    logs: LogManager  # the topics this broker knows of, and their local partitions
    topic_admin: TopicAdmin
    groups: GroupCoordinator
    transactions: TransactionCoordinator
    producer_ids: ProducerIds  # idempotent producers' ids
    authorizer: Authorizer | None  # ACLs, when authorizer.class.name is set
    client_quotas: ClientQuotas
    quota_window: Callable[[], QuotaWindow]  # the client quota window the configs give now
    scram: ScramStore  # SCRAM credentials
    metrics: RequestMetrics
    voters: VoterDirectory | None  # in a cluster
