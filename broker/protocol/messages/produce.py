"""Writing records: Produce, and InitProducerId for idempotent producers.

Transcribed from Apache Kafka's JSON message specs (clients/src/main/resources/common/message/ and
group-coordinator/src/main/resources/common/message/, trunk of 2024-10-25), restricted to the versions
this codec supports. Field names are the specs' names in snake_case."""

from broker.protocol.schema import Array, Field, Message, Struct

PRODUCE_REQUEST = Message(
    "ProduceRequest",
    "request",
    api_key=0,
    versions="0-9",
    flexible="9+",
    fields=(
        Field("transactional_id", "string", "3+", nullable="3+", default=None),
        Field("acks", "int16", "0+"),
        Field("timeout_ms", "int32", "0+"),
        Field("topic_data", versions="0+", type=Array(Struct("TopicProduceData", (
            Field("name", "string", "0+"),
            Field("partition_data", versions="0+", type=Array(Struct("PartitionProduceData", (
                Field("index", "int32", "0+"),
                Field("records", "records", "0+", nullable="0+"),
            )))),
        )))),
    ),
)

PRODUCE_RESPONSE = Message(
    "ProduceResponse",
    "response",
    api_key=0,
    versions="0-9",
    flexible="9+",
    fields=(
        Field("responses", versions="0+", type=Array(Struct("TopicProduceResponse", (
            Field("name", "string", "0+"),
            Field("partition_responses", versions="0+", type=Array(Struct("PartitionProduceResponse", (
                Field("index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("base_offset", "int64", "0+"),
                Field("log_append_time_ms", "int64", "2+", default=-1),
                Field("log_start_offset", "int64", "5+", default=-1),
                Field("record_errors", versions="8+", type=Array(Struct("BatchIndexAndErrorMessage", (
                    Field("batch_index", "int32", "8+"),
                    Field("batch_index_error_message", "string", "8+", nullable="8+", default=None),
                )))),
                Field("error_message", "string", "8+", nullable="8+", default=None),
            )))),
        )))),
        Field("throttle_time_ms", "int32", "1+", default=0),
    ),
)

INIT_PRODUCER_ID_REQUEST = Message(
    "InitProducerIdRequest",
    "request",
    api_key=22,
    versions="0-4",
    flexible="2+",
    fields=(
        Field("transactional_id", "string", "0+", nullable="0+"),
        Field("transaction_timeout_ms", "int32", "0+"),
        Field("producer_id", "int64", "3+", default=-1),
        Field("producer_epoch", "int16", "3+", default=-1),
    ),
)

INIT_PRODUCER_ID_RESPONSE = Message(
    "InitProducerIdResponse",
    "response",
    api_key=22,
    versions="0-4",
    flexible="2+",
    fields=(
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("producer_id", "int64", "0+", default=-1),
        Field("producer_epoch", "int16", "0+"),
    ),
)

MESSAGES = (
    PRODUCE_REQUEST,
    PRODUCE_RESPONSE,
    INIT_PRODUCER_ID_REQUEST,
    INIT_PRODUCER_ID_RESPONSE,
)
