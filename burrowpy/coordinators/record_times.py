"""Reading the timestamps of the records groups are sitting at, for lag in seconds.

After each broker offset refresh the ``kafka`` cluster module asks storage which committed offsets lack a
record timestamp (:class:`~burrowpy.protocol.FetchRecordTimeWants`), reads them here and hands the answers
back (:class:`~burrowpy.protocol.SetRecordTimes`). Storage keeps each answer for as long as some group sits
at that offset, so a partition costs one small read per committed offset, not one per evaluation.

Reads are bounded: one Fetch per partition leader per refresh, at most ``limit`` partitions in it, a few
KiB per partition (a batch header is enough when the wanted record opens its batch; a batch cut short in
the middle is read again whole, alone in a second Fetch, where Kafka returns at least one whole batch).
Works with any Kafka broker that answers Fetch v4 or later, ours included.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from broker.errors import ErrorCode, KafkaError
from broker.protocol.api import ApiKey
from broker.protocol.record_walk import timestamp_at_offset
from broker.protocol.records import (
    ATTR_LOG_APPEND_TIME,
    HEADER_SIZE,
    BatchHeader,
    decode_records_any,
    iter_batches,
)
from burrowpy.coordinators.codec_request import CodecRequest

# Bytes asked per partition in the first Fetch: room for a few small batches.
PARTITION_BYTES = 8192
# A batch bigger than this is not read again whole; lag in seconds interpolates for that offset instead. A
# record is read only up to the wanted one, and one larger than this once decompressed is not read either.
MAX_BATCH_BYTES = 8 * 1024 * 1024
# Decompressed record bytes read from one batch to reach the wanted record (a few hundred thousand records at
# most); past them lag in seconds interpolates for that offset.
MAX_READ_BYTES = 2 * 1024 * 1024

# Errors meaning the record is not there any more (retention or deletion moved the log start past it).
_GONE = {ErrorCode.OFFSET_OUT_OF_RANGE}

Want = tuple[str, int, int]  # topic, partition, offset
Answer = tuple[str, int, int, int | None]  # topic, partition, offset, timestamp ms (None: gone)


def fetch_body(wants: Iterable[Want], partition_bytes: int) -> dict[str, Any]:
    """A read-uncommitted, sessionless Fetch that returns at once (min_bytes 0) for the wanted offsets."""
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for topic, partition, offset in wants:
        by_topic[topic].append({"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                                "last_fetched_epoch": -1, "log_start_offset": -1,
                                "partition_max_bytes": partition_bytes})
    total = sum(len(partitions) for partitions in by_topic.values())
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": partition_bytes * max(1, total),
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": partitions} for topic, partitions in by_topic.items()],
            "forgotten_topics_data": [], "rack_id": ""}


def timestamp_at(records: bytes | memoryview | None, offset: int) -> tuple[int | None, int | None]:
    """(timestamp of the first record at or after ``offset``, None) from fetched record data.

    When the data ends inside the batch holding that record, the answer is (None, size of that batch), so
    the caller can read the batch whole; (None, None) means there is no such record in the data.
    """
    if not records:
        return None, None
    data = memoryview(records)
    try:
        return _timestamp_in_batches(data, offset)
    except KafkaError:
        # Message sets of magic 0/1 (brokers before 0.11, old topics): decode what is whole.
        for record in decode_records_any(data):
            if record.offset >= offset and record.timestamp >= 0:
                return record.timestamp, None
        return None, None


def _timestamp_in_batches(data: memoryview, offset: int) -> tuple[int | None, int | None]:
    end_of_whole = 0
    for position, header in iter_batches(data):
        end_of_whole = position + header.size
        if header.next_offset <= offset or header.is_control:
            continue
        try:
            timestamp = timestamp_at_offset(data[position:end_of_whole], offset, MAX_BATCH_BYTES, MAX_READ_BYTES)
        except KafkaError:
            # A batch that does not decode within the bounds: no answer, and nothing after it is read.
            return None, None
        if timestamp is not None and timestamp >= 0:
            return timestamp, None
        # Records without timestamps: look further on.
    if len(data) - end_of_whole >= HEADER_SIZE:
        header = BatchHeader.parse(data, end_of_whole)
        if header.magic == 2 and header.next_offset > offset:
            if header.attributes & ATTR_LOG_APPEND_TIME or header.base_offset >= offset:
                # Whole-batch append time, or the wanted record opens the batch: its first timestamp.
                return header.max_timestamp if header.attributes & ATTR_LOG_APPEND_TIME else \
                    header.base_timestamp, None
            return None, header.size
    return None, None


class RecordTimeReader:
    """Reads record timestamps through an aiokafka client (the cluster module's, with its TLS/SASL)."""

    def __init__(self, client: Any, log: Any, limit: int) -> None:
        self._client = client
        self._log = log
        self.limit = limit

    async def read(self, wants: list[Want], leaders: Mapping[tuple[str, int], int]) -> list[Answer]:
        by_leader: dict[int, list[Want]] = defaultdict(list)
        for want in wants:
            leader = leaders.get((want[0], want[1]))
            if leader is not None and len(by_leader[leader]) < self.limit:
                by_leader[leader].append(want)
        results = await asyncio.gather(*(self._read_from(leader, batch) for leader, batch in by_leader.items()),
                                       return_exceptions=True)
        answers: list[Answer] = []
        for leader, result in zip(by_leader, results, strict=True):
            if isinstance(result, BaseException):
                self._log.warning("reading record timestamps failed", broker=leader, error=repr(result))
                continue
            answers.extend(result)
        return answers

    async def _read_from(self, leader: int, wants: list[Want]) -> list[Answer]:
        answers: list[Answer] = []
        whole_batches: list[tuple[Want, int]] = []
        for want, timestamp, batch_size in await self._fetch(leader, wants, PARTITION_BYTES):
            if batch_size is not None and batch_size <= MAX_BATCH_BYTES:
                whole_batches.append((want, batch_size))
            else:
                # A timestamp, the record gone, or a batch too big to read: None makes lag in seconds
                # interpolate for this offset instead of reading it again after every refresh.
                answers.append((*want, timestamp))
        for want, batch_size in whole_batches:
            # Alone in its Fetch, so the broker returns the whole batch even when it exceeds the limit.
            for again, timestamp, _ in await self._fetch(leader, [want], batch_size):
                if timestamp is not None:
                    answers.append((*again, timestamp))
        return answers

    async def _fetch(self, leader: int, wants: list[Want],
                     partition_bytes: int) -> list[tuple[Want, int | None, int | None]]:
        """(want, timestamp, size of a batch to read whole) for each wanted partition that answered.

        A partition whose record is gone gets (want, None, None) and is stored as gone; one with another
        error is left out, to be asked again after the next refresh.
        """
        answer = await self._client.send(leader, CodecRequest(ApiKey.FETCH, fetch_body(wants, partition_bytes),
                                                              min_version=4))
        offsets = {(topic, partition): offset for topic, partition, offset in wants}
        found: list[tuple[Want, int | None, int | None]] = []
        for topic_answer in answer["responses"]:
            topic = topic_answer["topic"]
            for partition_answer in topic_answer["partitions"]:
                partition = partition_answer["partition_index"]
                offset = offsets.get((topic, partition))
                if offset is None:
                    continue
                error = partition_answer["error_code"]
                if error in _GONE:
                    found.append(((topic, partition, offset), None, None))
                elif error:
                    self._log.debug("record timestamp not read", topic=topic, partition=partition,
                                    error_code=error)
                else:
                    timestamp, batch_size = timestamp_at(partition_answer["records"], offset)
                    if timestamp is not None or batch_size is not None:
                        found.append(((topic, partition, offset), timestamp, batch_size))
        return found
