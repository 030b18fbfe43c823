"""TypedDicts of the fetch responses,
generated from ``broker.protocol.messages`` by ``python -m broker.protocol.typed_gen``: do not edit, regenerate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from broker.protocol.types import Buffer, Encoded, FileRegion


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
