"""TypedDicts of every response body, generated from ``broker.protocol.messages`` by
``python -m broker.protocol.typed_gen``: do not edit, regenerate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from broker.protocol.types import Buffer, Encoded, FileRegion


class AddOffsetsToTxnResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int


class AddPartitionsToTxnResponsePartitionResult(TypedDict, total=False):
    partition_index: int
    partition_error_code: int


class AddPartitionsToTxnResponseTopicResult(TypedDict, total=False):
    name: str
    results_by_partition: Sequence[AddPartitionsToTxnResponsePartitionResult | Encoded]


class AddPartitionsToTxnResponseResult(TypedDict, total=False):
    transactional_id: str
    topic_results: Sequence[AddPartitionsToTxnResponseTopicResult | Encoded]


class AddPartitionsToTxnResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    results_by_transaction: Sequence[AddPartitionsToTxnResponseResult | Encoded]
    results_by_topic_v3_and_below: Sequence[AddPartitionsToTxnResponseTopicResult | Encoded]


class AlterConfigsResponseResourceResponse(TypedDict, total=False):
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str


class AlterConfigsResponse(TypedDict, total=False):
    throttle_time_ms: int
    responses: Sequence[AlterConfigsResponseResourceResponse | Encoded]


class AlterUserScramCredentialsResponseResult(TypedDict, total=False):
    user: str
    error_code: int
    error_message: str | None


class AlterUserScramCredentialsResponse(TypedDict, total=False):
    throttle_time_ms: int
    results: Sequence[AlterUserScramCredentialsResponseResult | Encoded]


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


class ConsumerGroupDescribeResponseTopicPartitions(TypedDict, total=False):
    topic_id: bytes
    topic_name: str
    partitions: Sequence[int]


class ConsumerGroupDescribeResponseAssignment(TypedDict, total=False):
    topic_partitions: Sequence[ConsumerGroupDescribeResponseTopicPartitions | Encoded]


class ConsumerGroupDescribeResponseMember(TypedDict, total=False):
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: Sequence[str]
    subscribed_topic_regex: str | None
    assignment: ConsumerGroupDescribeResponseAssignment
    target_assignment: ConsumerGroupDescribeResponseAssignment


class ConsumerGroupDescribeResponseDescribedGroup(TypedDict, total=False):
    error_code: int
    error_message: str | None
    group_id: str
    group_state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: Sequence[ConsumerGroupDescribeResponseMember | Encoded]
    authorized_operations: int


class ConsumerGroupDescribeResponse(TypedDict, total=False):
    throttle_time_ms: int
    groups: Sequence[ConsumerGroupDescribeResponseDescribedGroup | Encoded]


class ConsumerGroupHeartbeatResponseTopicPartitions(TypedDict, total=False):
    topic_id: bytes
    partitions: Sequence[int]


class ConsumerGroupHeartbeatResponseAssignment(TypedDict, total=False):
    topic_partitions: Sequence[ConsumerGroupHeartbeatResponseTopicPartitions | Encoded]


class ConsumerGroupHeartbeatResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: ConsumerGroupHeartbeatResponseAssignment | None


class CreateAclsResponseAclCreationResult(TypedDict, total=False):
    error_code: int
    error_message: str | None


class CreateAclsResponse(TypedDict, total=False):
    throttle_time_ms: int
    results: Sequence[CreateAclsResponseAclCreationResult | Encoded]


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


class DeleteAclsResponseMatchingAcl(TypedDict, total=False):
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


class DeleteAclsResponseFilterResult(TypedDict, total=False):
    error_code: int
    error_message: str | None
    matching_acls: Sequence[DeleteAclsResponseMatchingAcl | Encoded]


class DeleteAclsResponse(TypedDict, total=False):
    throttle_time_ms: int
    filter_results: Sequence[DeleteAclsResponseFilterResult | Encoded]


class DeleteGroupsResponseDeletableGroupResult(TypedDict, total=False):
    group_id: str
    error_code: int


class DeleteGroupsResponse(TypedDict, total=False):
    throttle_time_ms: int
    results: Sequence[DeleteGroupsResponseDeletableGroupResult | Encoded]


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


class DescribeAclsResponseAclDescription(TypedDict, total=False):
    principal: str
    host: str
    operation: int
    permission_type: int


class DescribeAclsResponseResource(TypedDict, total=False):
    resource_type: int
    resource_name: str
    pattern_type: int
    acls: Sequence[DescribeAclsResponseAclDescription | Encoded]


class DescribeAclsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    resources: Sequence[DescribeAclsResponseResource | Encoded]


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


class DescribeClusterResponseBroker(TypedDict, total=False):
    broker_id: int
    host: str
    port: int
    rack: str | None


class DescribeClusterResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    endpoint_type: int
    cluster_id: str
    controller_id: int
    brokers: Sequence[DescribeClusterResponseBroker | Encoded]
    cluster_authorized_operations: int


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


class DescribeGroupsResponseDescribedGroupMember(TypedDict, total=False):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: Buffer
    member_assignment: Buffer


class DescribeGroupsResponseDescribedGroup(TypedDict, total=False):
    error_code: int
    group_id: str
    group_state: str
    protocol_type: str
    protocol_data: str
    members: Sequence[DescribeGroupsResponseDescribedGroupMember | Encoded]
    authorized_operations: int


class DescribeGroupsResponse(TypedDict, total=False):
    throttle_time_ms: int
    groups: Sequence[DescribeGroupsResponseDescribedGroup | Encoded]


class DescribeLogDirsResponsePartition(TypedDict, total=False):
    partition_index: int
    partition_size: int
    offset_lag: int
    is_future_key: bool


class DescribeLogDirsResponseTopic(TypedDict, total=False):
    name: str
    partitions: Sequence[DescribeLogDirsResponsePartition | Encoded]


class DescribeLogDirsResponseResult(TypedDict, total=False):
    error_code: int
    log_dir: str
    topics: Sequence[DescribeLogDirsResponseTopic | Encoded]
    total_bytes: int
    usable_bytes: int
    is_cordoned: bool


class DescribeLogDirsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    results: Sequence[DescribeLogDirsResponseResult | Encoded]


class DescribeProducersResponseProducerState(TypedDict, total=False):
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class DescribeProducersResponsePartitionResponse(TypedDict, total=False):
    partition_index: int
    error_code: int
    error_message: str | None
    active_producers: Sequence[DescribeProducersResponseProducerState | Encoded]


class DescribeProducersResponseTopicResponse(TypedDict, total=False):
    name: str
    partitions: Sequence[DescribeProducersResponsePartitionResponse | Encoded]


class DescribeProducersResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: Sequence[DescribeProducersResponseTopicResponse | Encoded]


class DescribeQuorumResponseReplicaState(TypedDict, total=False):
    replica_id: int
    replica_directory_id: bytes
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


class DescribeQuorumResponsePartitionData(TypedDict, total=False):
    partition_index: int
    error_code: int
    error_message: str | None
    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: Sequence[DescribeQuorumResponseReplicaState | Encoded]
    observers: Sequence[DescribeQuorumResponseReplicaState | Encoded]


class DescribeQuorumResponseTopicData(TypedDict, total=False):
    topic_name: str
    partitions: Sequence[DescribeQuorumResponsePartitionData | Encoded]


class DescribeQuorumResponseListener(TypedDict, total=False):
    name: str
    host: str
    port: int


class DescribeQuorumResponseNode(TypedDict, total=False):
    node_id: int
    listeners: Sequence[DescribeQuorumResponseListener | Encoded]


class DescribeQuorumResponse(TypedDict, total=False):
    error_code: int
    error_message: str | None
    topics: Sequence[DescribeQuorumResponseTopicData | Encoded]
    nodes: Sequence[DescribeQuorumResponseNode | Encoded]


class DescribeTopicPartitionsResponsePartition(TypedDict, total=False):
    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: Sequence[int]
    isr_nodes: Sequence[int]
    eligible_leader_replicas: Sequence[int] | None
    last_known_elr: Sequence[int] | None
    offline_replicas: Sequence[int]


class DescribeTopicPartitionsResponseTopic(TypedDict, total=False):
    error_code: int
    name: str | None
    topic_id: bytes
    is_internal: bool
    partitions: Sequence[DescribeTopicPartitionsResponsePartition | Encoded]
    topic_authorized_operations: int


class DescribeTopicPartitionsResponseCursor(TypedDict, total=False):
    topic_name: str
    partition_index: int


class DescribeTopicPartitionsResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: Sequence[DescribeTopicPartitionsResponseTopic | Encoded]
    next_cursor: DescribeTopicPartitionsResponseCursor | None


class DescribeTransactionsResponseTopicData(TypedDict, total=False):
    topic: str
    partitions: Sequence[int]


class DescribeTransactionsResponseTransactionState(TypedDict, total=False):
    error_code: int
    transactional_id: str
    transaction_state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    producer_id: int
    producer_epoch: int
    topics: Sequence[DescribeTransactionsResponseTopicData | Encoded]


class DescribeTransactionsResponse(TypedDict, total=False):
    throttle_time_ms: int
    transaction_states: Sequence[DescribeTransactionsResponseTransactionState | Encoded]


class DescribeUserScramCredentialsResponseCredentialInfo(TypedDict, total=False):
    mechanism: int
    iterations: int


class DescribeUserScramCredentialsResponseResult(TypedDict, total=False):
    user: str
    error_code: int
    error_message: str | None
    credential_infos: Sequence[DescribeUserScramCredentialsResponseCredentialInfo | Encoded]


class DescribeUserScramCredentialsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    results: Sequence[DescribeUserScramCredentialsResponseResult | Encoded]


class EndTxnResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int


class FetchResponseEpochEndOffset(TypedDict, total=False):
    epoch: int
    end_offset: int


class FetchResponseLeaderIdAndEpoch(TypedDict, total=False):
    leader_id: int
    leader_epoch: int


class FetchResponseSnapshotId(TypedDict, total=False):
    end_offset: int
    epoch: int


class FetchResponseAbortedTransaction(TypedDict, total=False):
    producer_id: int
    first_offset: int


class FetchResponsePartitionData(TypedDict, total=False):
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    diverging_epoch: FetchResponseEpochEndOffset
    current_leader: FetchResponseLeaderIdAndEpoch
    snapshot_id: FetchResponseSnapshotId
    aborted_transactions: Sequence[FetchResponseAbortedTransaction | Encoded] | None
    preferred_read_replica: int
    records: Buffer | FileRegion | None


class FetchResponseFetchableTopicResponse(TypedDict, total=False):
    topic: str
    partitions: Sequence[FetchResponsePartitionData | Encoded]


class FetchResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    session_id: int
    responses: Sequence[FetchResponseFetchableTopicResponse | Encoded]


class FindCoordinatorResponseCoordinator(TypedDict, total=False):
    key: str
    node_id: int
    host: str
    port: int
    error_code: int
    error_message: str | None


class FindCoordinatorResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    node_id: int
    host: str
    port: int
    coordinators: Sequence[FindCoordinatorResponseCoordinator | Encoded]


class HeartbeatResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int


class IncrementalAlterConfigsResponseAlterConfigsResourceResponse(TypedDict, total=False):
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str


class IncrementalAlterConfigsResponse(TypedDict, total=False):
    throttle_time_ms: int
    responses: Sequence[IncrementalAlterConfigsResponseAlterConfigsResourceResponse | Encoded]


class InitProducerIdResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    producer_id: int
    producer_epoch: int


class JoinGroupResponseMember(TypedDict, total=False):
    member_id: str
    group_instance_id: str | None
    metadata: Buffer


class JoinGroupResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    member_id: str
    members: Sequence[JoinGroupResponseMember | Encoded]


class LeaveGroupResponseMemberResponse(TypedDict, total=False):
    member_id: str
    group_instance_id: str | None
    error_code: int


class LeaveGroupResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    members: Sequence[LeaveGroupResponseMemberResponse | Encoded]


class ListGroupsResponseListedGroup(TypedDict, total=False):
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str


class ListGroupsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    groups: Sequence[ListGroupsResponseListedGroup | Encoded]


class ListOffsetsResponsePartitionResponse(TypedDict, total=False):
    partition_index: int
    error_code: int
    old_style_offsets: Sequence[int]
    timestamp: int
    offset: int
    leader_epoch: int


class ListOffsetsResponseTopicResponse(TypedDict, total=False):
    name: str
    partitions: Sequence[ListOffsetsResponsePartitionResponse | Encoded]


class ListOffsetsResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: Sequence[ListOffsetsResponseTopicResponse | Encoded]


class ListTransactionsResponseTransactionState(TypedDict, total=False):
    transactional_id: str
    producer_id: int
    transaction_state: str


class ListTransactionsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    unknown_state_filters: Sequence[str]
    transaction_states: Sequence[ListTransactionsResponseTransactionState | Encoded]


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


class OffsetCommitResponsePartition(TypedDict, total=False):
    partition_index: int
    error_code: int


class OffsetCommitResponseTopic(TypedDict, total=False):
    name: str
    partitions: Sequence[OffsetCommitResponsePartition | Encoded]


class OffsetCommitResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: Sequence[OffsetCommitResponseTopic | Encoded]


class OffsetDeleteResponsePartition(TypedDict, total=False):
    partition_index: int
    error_code: int


class OffsetDeleteResponseTopic(TypedDict, total=False):
    name: str
    partitions: Sequence[OffsetDeleteResponsePartition | Encoded]


class OffsetDeleteResponse(TypedDict, total=False):
    error_code: int
    throttle_time_ms: int
    topics: Sequence[OffsetDeleteResponseTopic | Encoded]


class OffsetFetchResponsePartition(TypedDict, total=False):
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    metadata: str | None
    error_code: int


class OffsetFetchResponseTopic(TypedDict, total=False):
    name: str
    partitions: Sequence[OffsetFetchResponsePartition | Encoded]


class OffsetFetchResponsePartitions(TypedDict, total=False):
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    metadata: str | None
    error_code: int


class OffsetFetchResponseTopics(TypedDict, total=False):
    name: str
    partitions: Sequence[OffsetFetchResponsePartitions | Encoded]


class OffsetFetchResponseGroup(TypedDict, total=False):
    group_id: str
    topics: Sequence[OffsetFetchResponseTopics | Encoded]
    error_code: int


class OffsetFetchResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: Sequence[OffsetFetchResponseTopic | Encoded]
    error_code: int
    groups: Sequence[OffsetFetchResponseGroup | Encoded]


class OffsetForLeaderEpochResponseEpochEndOffset(TypedDict, total=False):
    error_code: int
    partition: int
    leader_epoch: int
    end_offset: int


class OffsetForLeaderEpochResponseOffsetForLeaderTopicResult(TypedDict, total=False):
    topic: str
    partitions: Sequence[OffsetForLeaderEpochResponseEpochEndOffset | Encoded]


class OffsetForLeaderEpochResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: Sequence[OffsetForLeaderEpochResponseOffsetForLeaderTopicResult | Encoded]


class ProduceResponseBatchIndexAndErrorMessage(TypedDict, total=False):
    batch_index: int
    batch_index_error_message: str | None


class ProduceResponsePartitionProduceResponse(TypedDict, total=False):
    index: int
    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    record_errors: Sequence[ProduceResponseBatchIndexAndErrorMessage | Encoded]
    error_message: str | None


class ProduceResponseTopicProduceResponse(TypedDict, total=False):
    name: str
    partition_responses: Sequence[ProduceResponsePartitionProduceResponse | Encoded]


class ProduceResponse(TypedDict, total=False):
    responses: Sequence[ProduceResponseTopicProduceResponse | Encoded]
    throttle_time_ms: int


class SaslAuthenticateResponse(TypedDict, total=False):
    error_code: int
    error_message: str | None
    auth_bytes: Buffer
    session_lifetime_ms: int


class SaslHandshakeResponse(TypedDict, total=False):
    error_code: int
    mechanisms: Sequence[str]


class SyncGroupResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    protocol_type: str | None
    protocol_name: str | None
    assignment: Buffer


class TxnOffsetCommitResponsePartition(TypedDict, total=False):
    partition_index: int
    error_code: int


class TxnOffsetCommitResponseTopic(TypedDict, total=False):
    name: str
    partitions: Sequence[TxnOffsetCommitResponsePartition | Encoded]


class TxnOffsetCommitResponse(TypedDict, total=False):
    throttle_time_ms: int
    topics: Sequence[TxnOffsetCommitResponseTopic | Encoded]


class WriteTxnMarkersResponseWritableTxnMarkerPartitionResult(TypedDict, total=False):
    partition_index: int
    error_code: int


class WriteTxnMarkersResponseWritableTxnMarkerTopicResult(TypedDict, total=False):
    name: str
    partitions: Sequence[WriteTxnMarkersResponseWritableTxnMarkerPartitionResult | Encoded]


class WriteTxnMarkersResponseWritableTxnMarkerResult(TypedDict, total=False):
    producer_id: int
    topics: Sequence[WriteTxnMarkersResponseWritableTxnMarkerTopicResult | Encoded]


class WriteTxnMarkersResponse(TypedDict, total=False):
    markers: Sequence[WriteTxnMarkersResponseWritableTxnMarkerResult | Encoded]
