"""TypedDicts of the cluster responses,
generated from ``broker.protocol.messages`` by ``python -m broker.protocol.typed_gen``: do not edit, regenerate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from broker.protocol.types import Encoded


class ApiVersionsResponseApiVersion(TypedDict, total=False):
    api_key: int
    min_version: int
    max_version: int


class ApiVersionsResponseSupportedFeatureKey(TypedDict, total=False):
    name: str
    min_version: int
    max_version: int


class ApiVersionsResponseFinalizedFeatureKey(TypedDict, total=False):
    name: str
    max_version_level: int
    min_version_level: int


class ApiVersionsResponse(TypedDict, total=False):
    error_code: int
    api_keys: Sequence[ApiVersionsResponseApiVersion | Encoded]
    throttle_time_ms: int
    supported_features: Sequence[ApiVersionsResponseSupportedFeatureKey | Encoded]
    finalized_features_epoch: int
    finalized_features: Sequence[ApiVersionsResponseFinalizedFeatureKey | Encoded]
    zk_migration_ready: bool


class DescribeClusterResponseBroker(TypedDict, total=False):
    broker_id: int
    host: str
    port: int
    rack: str | None
    is_fenced: bool


class DescribeClusterResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    endpoint_type: int
    cluster_id: str
    controller_id: int
    brokers: Sequence[DescribeClusterResponseBroker | Encoded]
    cluster_authorized_operations: int


class MetadataResponseBroker(TypedDict, total=False):
    node_id: int
    host: str
    port: int
    rack: str | None


class MetadataResponsePartition(TypedDict, total=False):
    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: Sequence[int]
    isr_nodes: Sequence[int]
    offline_replicas: Sequence[int]


class MetadataResponseTopic(TypedDict, total=False):
    error_code: int
    name: str | None
    topic_id: bytes
    is_internal: bool
    partitions: Sequence[MetadataResponsePartition | Encoded]
    topic_authorized_operations: int


class MetadataResponse(TypedDict, total=False):
    throttle_time_ms: int
    brokers: Sequence[MetadataResponseBroker | Encoded]
    cluster_id: str | None
    controller_id: int
    topics: Sequence[MetadataResponseTopic | Encoded]
    cluster_authorized_operations: int
