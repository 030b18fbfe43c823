"""TypedDicts of the admin responses,
generated from ``broker.protocol.messages`` by ``python -m broker.protocol.typed_gen``: do not edit, regenerate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from broker.protocol.types import Encoded


class AlterClientQuotasResponseEntityData(TypedDict, total=False):
    entity_type: str
    entity_name: str | None


class AlterClientQuotasResponseEntryData(TypedDict, total=False):
    error_code: int
    error_message: str | None
    entity: Sequence[AlterClientQuotasResponseEntityData | Encoded]


class AlterClientQuotasResponse(TypedDict, total=False):
    throttle_time_ms: int
    entries: Sequence[AlterClientQuotasResponseEntryData | Encoded]


class AlterConfigsResponseResourceResponse(TypedDict, total=False):
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str


class AlterConfigsResponse(TypedDict, total=False):
    throttle_time_ms: int
    responses: Sequence[AlterConfigsResponseResourceResponse | Encoded]


class AlterPartitionReassignmentsResponseReassignablePartitionResponse(TypedDict, total=False):
    partition_index: int
    error_code: int
    error_message: str | None


class AlterPartitionReassignmentsResponseReassignableTopicResponse(TypedDict, total=False):
    name: str
    partitions: Sequence[AlterPartitionReassignmentsResponseReassignablePartitionResponse | Encoded]


class AlterPartitionReassignmentsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    responses: Sequence[AlterPartitionReassignmentsResponseReassignableTopicResponse | Encoded]


class CreatePartitionsResponseTopicResult(TypedDict, total=False):
    name: str
    error_code: int
    error_message: str | None


class CreatePartitionsResponse(TypedDict, total=False):
    throttle_time_ms: int
    results: Sequence[CreatePartitionsResponseTopicResult | Encoded]


class CreateTopicsResponseCreatableTopicConfigs(TypedDict, total=False):
    name: str
    value: str | None
    read_only: bool
    config_source: int
    is_sensitive: bool


class CreateTopicsResponseCreatableTopicResult(TypedDict, total=False):
    name: str
    topic_id: bytes
    error_code: int
    error_message: str | None
    topic_config_error_code: int
    num_partitions: int
    replication_factor: int
    configs: Sequence[CreateTopicsResponseCreatableTopicConfigs | Encoded] | None


class CreateTopicsResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: Sequence[CreateTopicsResponseCreatableTopicResult | Encoded]


class DeleteRecordsResponsePartitionResult(TypedDict, total=False):
    partition_index: int
    low_watermark: int
    error_code: int


class DeleteRecordsResponseTopicResult(TypedDict, total=False):
    name: str
    partitions: Sequence[DeleteRecordsResponsePartitionResult | Encoded]


class DeleteRecordsResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: Sequence[DeleteRecordsResponseTopicResult | Encoded]


class DeleteTopicsResponseDeletableTopicResult(TypedDict, total=False):
    name: str | None
    topic_id: bytes
    error_code: int
    error_message: str | None


class DeleteTopicsResponse(TypedDict, total=False):
    throttle_time_ms: int
    responses: Sequence[DeleteTopicsResponseDeletableTopicResult | Encoded]


class DescribeClientQuotasResponseEntityData(TypedDict, total=False):
    entity_type: str
    entity_name: str | None


class DescribeClientQuotasResponseValueData(TypedDict, total=False):
    key: str
    value: float


class DescribeClientQuotasResponseEntryData(TypedDict, total=False):
    entity: Sequence[DescribeClientQuotasResponseEntityData | Encoded]
    values: Sequence[DescribeClientQuotasResponseValueData | Encoded]


class DescribeClientQuotasResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    entries: Sequence[DescribeClientQuotasResponseEntryData | Encoded] | None


class DescribeConfigsResponseSynonym(TypedDict, total=False):
    name: str
    value: str | None
    source: int


class DescribeConfigsResponseResourceResult(TypedDict, total=False):
    name: str
    value: str | None
    read_only: bool
    is_default: bool
    config_source: int
    is_sensitive: bool
    synonyms: Sequence[DescribeConfigsResponseSynonym | Encoded]
    config_type: int
    documentation: str | None


class DescribeConfigsResponseResult(TypedDict, total=False):
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    configs: Sequence[DescribeConfigsResponseResourceResult | Encoded]


class DescribeConfigsResponse(TypedDict, total=False):
    throttle_time_ms: int
    results: Sequence[DescribeConfigsResponseResult | Encoded]


class IncrementalAlterConfigsResponseAlterConfigsResourceResponse(TypedDict, total=False):
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str


class IncrementalAlterConfigsResponse(TypedDict, total=False):
    throttle_time_ms: int
    responses: Sequence[IncrementalAlterConfigsResponseAlterConfigsResourceResponse | Encoded]


class ListPartitionReassignmentsResponseOngoingPartitionReassignment(TypedDict, total=False):
    partition_index: int
    replicas: Sequence[int]
    adding_replicas: Sequence[int]
    removing_replicas: Sequence[int]


class ListPartitionReassignmentsResponseOngoingTopicReassignment(TypedDict, total=False):
    name: str
    partitions: Sequence[ListPartitionReassignmentsResponseOngoingPartitionReassignment | Encoded]


class ListPartitionReassignmentsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    topics: Sequence[ListPartitionReassignmentsResponseOngoingTopicReassignment | Encoded]
