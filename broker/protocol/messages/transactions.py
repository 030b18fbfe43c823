"""Transactions: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeTransactions,
ListTransactions, and the records of `__transaction_state`.

Transcribed from Apache Kafka's JSON message specs (clients/src/main/resources/common/message/ and
transaction-coordinator/src/main/resources/common/message/), restricted to the versions this codec
supports. Field names are the specs' names in snake_case."""

from broker.protocol.schema import Array, Field, Message, Struct

_ADD_PARTITIONS_TOPIC = Struct("AddPartitionsToTxnTopic", (
    Field("name", "string", "0+"),
    Field("partitions", Array("int32"), "0+"),
))

ADD_PARTITIONS_TO_TXN_REQUEST = Message(
    "AddPartitionsToTxnRequest",
    "request",
    api_key=24,
    versions="0-5",
    flexible="3+",
    fields=(
        Field("transactions", versions="4+", type=Array(Struct("AddPartitionsToTxnTransaction", (
            Field("transactional_id", "string", "4+"),
            Field("producer_id", "int64", "4+"),
            Field("producer_epoch", "int16", "4+"),
            Field("verify_only", "bool", "4+", default=False),
            Field("topics", Array(_ADD_PARTITIONS_TOPIC), "4+"),
        )))),
        Field("v3_and_below_transactional_id", "string", "0-3"),
        Field("v3_and_below_producer_id", "int64", "0-3"),
        Field("v3_and_below_producer_epoch", "int16", "0-3"),
        Field("v3_and_below_topics", Array(_ADD_PARTITIONS_TOPIC), "0-3"),
    ),
)

_ADD_PARTITIONS_TOPIC_RESULT = Struct("AddPartitionsToTxnTopicResult", (
    Field("name", "string", "0+"),
    Field("results_by_partition", versions="0+", type=Array(Struct("AddPartitionsToTxnPartitionResult", (
        Field("partition_index", "int32", "0+"),
        Field("partition_error_code", "int16", "0+"),
    )))),
))

ADD_PARTITIONS_TO_TXN_RESPONSE = Message(
    "AddPartitionsToTxnResponse",
    "response",
    api_key=24,
    versions="0-5",
    flexible="3+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "4+"),
        Field("results_by_transaction", versions="4+", type=Array(Struct("AddPartitionsToTxnResult", (
            Field("transactional_id", "string", "4+"),
            Field("topic_results", Array(_ADD_PARTITIONS_TOPIC_RESULT), "4+"),
        )))),
        Field("results_by_topic_v3_and_below", Array(_ADD_PARTITIONS_TOPIC_RESULT), "0-3"),
    ),
)

ADD_OFFSETS_TO_TXN_REQUEST = Message(
    "AddOffsetsToTxnRequest",
    "request",
    api_key=25,
    versions="0-4",
    flexible="3+",
    fields=(
        Field("transactional_id", "string", "0+"),
        Field("producer_id", "int64", "0+"),
        Field("producer_epoch", "int16", "0+"),
        Field("group_id", "string", "0+"),
    ),
)

ADD_OFFSETS_TO_TXN_RESPONSE = Message(
    "AddOffsetsToTxnResponse",
    "response",
    api_key=25,
    versions="0-4",
    flexible="3+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
    ),
)

END_TXN_REQUEST = Message(
    "EndTxnRequest",
    "request",
    api_key=26,
    versions="0-4",
    flexible="3+",
    fields=(
        Field("transactional_id", "string", "0+"),
        Field("producer_id", "int64", "0+"),
        Field("producer_epoch", "int16", "0+"),
        Field("committed", "bool", "0+"),
    ),
)

END_TXN_RESPONSE = Message(
    "EndTxnResponse",
    "response",
    api_key=26,
    versions="0-4",
    flexible="3+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
    ),
)

TXN_OFFSET_COMMIT_REQUEST = Message(
    "TxnOffsetCommitRequest",
    "request",
    api_key=28,
    versions="0-4",
    flexible="3+",
    fields=(
        Field("transactional_id", "string", "0+"),
        Field("group_id", "string", "0+"),
        Field("producer_id", "int64", "0+"),
        Field("producer_epoch", "int16", "0+"),
        Field("generation_id", "int32", "3+", default=-1),
        Field("member_id", "string", "3+", default=""),
        Field("group_instance_id", "string", "3+", nullable="3+", default=None),
        Field("topics", versions="0+", type=Array(Struct("TxnOffsetCommitRequestTopic", (
            Field("name", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("TxnOffsetCommitRequestPartition", (
                Field("partition_index", "int32", "0+"),
                Field("committed_offset", "int64", "0+"),
                Field("committed_leader_epoch", "int32", "2+", default=-1),
                Field("committed_metadata", "string", "0+", nullable="0+"),
            )))),
        )))),
    ),
)

TXN_OFFSET_COMMIT_RESPONSE = Message(
    "TxnOffsetCommitResponse",
    "response",
    api_key=28,
    versions="0-4",
    flexible="3+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("topics", versions="0+", type=Array(Struct("TxnOffsetCommitResponseTopic", (
            Field("name", "string", "0+"),
            Field("partitions", versions="0+", type=Array(Struct("TxnOffsetCommitResponsePartition", (
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
            )))),
        )))),
    ),
)

WRITE_TXN_MARKERS_REQUEST = Message(
    "WriteTxnMarkersRequest",
    "request",
    api_key=27,
    versions="0-1",
    flexible="1+",
    fields=(
        Field("markers", versions="0+", type=Array(Struct("WritableTxnMarker", (
            Field("producer_id", "int64", "0+"),
            Field("producer_epoch", "int16", "0+"),
            Field("transaction_result", "bool", "0+"),
            Field("topics", versions="0+", type=Array(Struct("WritableTxnMarkerTopic", (
                Field("name", "string", "0+"),
                Field("partition_indexes", Array("int32"), "0+"),
            )))),
            Field("coordinator_epoch", "int32", "0+"),
        )))),
    ),
)

WRITE_TXN_MARKERS_RESPONSE = Message(
    "WriteTxnMarkersResponse",
    "response",
    api_key=27,
    versions="0-1",
    flexible="1+",
    fields=(
        Field("markers", versions="0+", type=Array(Struct("WritableTxnMarkerResult", (
            Field("producer_id", "int64", "0+"),
            Field("topics", versions="0+", type=Array(Struct("WritableTxnMarkerTopicResult", (
                Field("name", "string", "0+"),
                Field("partitions", versions="0+", type=Array(Struct("WritableTxnMarkerPartitionResult", (
                    Field("partition_index", "int32", "0+"),
                    Field("error_code", "int16", "0+"),
                )))),
            )))),
        )))),
    ),
)

DESCRIBE_TRANSACTIONS_REQUEST = Message(
    "DescribeTransactionsRequest",
    "request",
    api_key=65,
    versions="0",
    flexible="0+",
    fields=(
        Field("transactional_ids", Array("string"), "0+"),
    ),
)

DESCRIBE_TRANSACTIONS_RESPONSE = Message(
    "DescribeTransactionsResponse",
    "response",
    api_key=65,
    versions="0",
    flexible="0+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("transaction_states", versions="0+", type=Array(Struct("TransactionState", (
            Field("error_code", "int16", "0+"),
            Field("transactional_id", "string", "0+"),
            Field("transaction_state", "string", "0+"),
            Field("transaction_timeout_ms", "int32", "0+"),
            Field("transaction_start_time_ms", "int64", "0+"),
            Field("producer_id", "int64", "0+"),
            Field("producer_epoch", "int16", "0+"),
            Field("topics", versions="0+", type=Array(Struct("TopicData", (
                Field("topic", "string", "0+"),
                Field("partitions", Array("int32"), "0+"),
            )))),
        )))),
    ),
)

LIST_TRANSACTIONS_REQUEST = Message(
    "ListTransactionsRequest",
    "request",
    api_key=66,
    versions="0-1",
    flexible="0+",
    fields=(
        Field("state_filters", Array("string"), "0+"),
        Field("producer_id_filters", Array("int64"), "0+"),
        Field("duration_filter", "int64", "1+", default=-1),
    ),
)

LIST_TRANSACTIONS_RESPONSE = Message(
    "ListTransactionsResponse",
    "response",
    api_key=66,
    versions="0-1",
    flexible="0+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("unknown_state_filters", Array("string"), "0+"),
        Field("transaction_states", versions="0+", type=Array(Struct("TransactionState", (
            Field("transactional_id", "string", "0+"),
            Field("producer_id", "int64", "0+"),
            Field("transaction_state", "string", "0+"),
        )))),
    ),
)

# `__transaction_state` records: key and value, each prefixed by its int16 version.

TRANSACTION_LOG_KEY = Message(
    "TransactionLogKey",
    "data",
    versions="0",
    flexible="none",
    fields=(
        Field("transactional_id", "string", "0"),
    ),
)

TRANSACTION_LOG_VALUE = Message(
    "TransactionLogValue",
    "data",
    versions="0-1",
    flexible="1+",
    fields=(
        Field("producer_id", "int64", "0+"),
        Field("previous_producer_id", "int64", "1+", default=-1, tag=0),
        Field("next_producer_id", "int64", "1+", default=-1, tag=1),
        Field("producer_epoch", "int16", "0+"),
        Field("transaction_timeout_ms", "int32", "0+"),
        Field("transaction_status", "int8", "0+"),
        Field("transaction_partitions", versions="0+", nullable="0+", type=Array(Struct("PartitionsSchema", (
            Field("topic", "string", "0+"),
            Field("partition_ids", Array("int32"), "0+"),
        )))),
        Field("transaction_last_update_timestamp_ms", "int64", "0+"),
        Field("transaction_start_timestamp_ms", "int64", "0+"),
        Field("client_transaction_version", "int16", "1+", default=0, tag=2),
    ),
)

MESSAGES = (
    ADD_PARTITIONS_TO_TXN_REQUEST,
    ADD_PARTITIONS_TO_TXN_RESPONSE,
    ADD_OFFSETS_TO_TXN_REQUEST,
    ADD_OFFSETS_TO_TXN_RESPONSE,
    END_TXN_REQUEST,
    END_TXN_RESPONSE,
    TXN_OFFSET_COMMIT_REQUEST,
    TXN_OFFSET_COMMIT_RESPONSE,
    WRITE_TXN_MARKERS_REQUEST,
    WRITE_TXN_MARKERS_RESPONSE,
    DESCRIBE_TRANSACTIONS_REQUEST,
    DESCRIBE_TRANSACTIONS_RESPONSE,
    LIST_TRANSACTIONS_REQUEST,
    LIST_TRANSACTIONS_RESPONSE,
)

DATA = (TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE)
