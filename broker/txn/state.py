"""A transactional id's state, and its records in `__transaction_state` (Kafka's layouts).

Key: version 0, the transactional id. Value: version 0, as Apache Kafka writes it while
``transaction.version`` is below 2 (the transaction protocol every client uses against this broker):
producer id and epoch, timeout, status, the transaction's partitions, last update and start times.
A tombstone (null value) removes an expired transactional id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from broker.protocol.api import decode_struct, encode_struct

KEY_VERSION = 0
VALUE_VERSION = 0
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# Kafka starts a new producer id once the epoch reaches Short.MAX_VALUE - 1.
MAX_PRODUCER_EPOCH = 32767 - 1


class TxnState(IntEnum):
    """Kafka's TransactionState ids; the names are what DescribeTransactions and ListTransactions show."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATE_BY_NAME = {name: state for state, name in _NAMES.items()}
# States in which a transaction may begin (or be bumped by InitProducerId) without ending another first.
IDLE_STATES = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    # In memory only, as in Kafka: the epoch a recovering producer (KIP-360) named in its last InitProducerId,
    # so that a retry of it gets the same epoch; a bump by a new instance or a fence forgets it.
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID

    def copy(self, **changes: Any) -> TxnMetadata:
        fields = {name: getattr(self, name) for name in self.__slots__}
        fields["partitions"] = set(self.partitions)
        fields.update(changes)
        return TxnMetadata(**fields)

    def sorted_partitions(self) -> dict[str, list[int]]:
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            topics.setdefault(topic, []).append(partition)
        return topics


def record_key(transactional_id: str) -> bytes:
    return encode_struct("TransactionLogKey", KEY_VERSION, {"transactional_id": transactional_id})


def record_value(meta: TxnMetadata) -> bytes:
    return encode_struct("TransactionLogValue", VALUE_VERSION, {
        "producer_id": meta.producer_id,
        "producer_epoch": meta.producer_epoch,
        "transaction_timeout_ms": meta.timeout_ms,
        "transaction_status": int(meta.state),
        "transaction_partitions": [{"topic": topic, "partition_ids": partitions}
                                   for topic, partitions in meta.sorted_partitions().items()],
        "transaction_last_update_timestamp_ms": meta.last_update_ms,
        "transaction_start_timestamp_ms": meta.start_ms,
    })


def decode_record(key: bytes, value: bytes | None) -> tuple[str, TxnMetadata | None]:
    """(transactional id, metadata or None for a tombstone); raises ProtocolError for bytes we cannot read."""
    _, key_body = decode_struct("TransactionLogKey", key)
    transactional_id = key_body["transactional_id"]
    if value is None:
        return transactional_id, None
    _, body = decode_struct("TransactionLogValue", value)
    partitions = {(entry["topic"], p) for entry in body["transaction_partitions"] or [] for p in entry["partition_ids"]}
    return transactional_id, TxnMetadata(
        transactional_id=transactional_id,
        producer_id=body["producer_id"],
        producer_epoch=body["producer_epoch"],
        timeout_ms=body["transaction_timeout_ms"],
        state=TxnState(body["transaction_status"]),
        partitions=partitions,
        start_ms=body["transaction_start_timestamp_ms"],
        last_update_ms=body["transaction_last_update_timestamp_ms"],
        previous_producer_id=body["previous_producer_id"],
    )
