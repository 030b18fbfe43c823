"""Fetched ``__consumer_offsets`` bytes straight to storage requests: the consumer module's hot path.

Reading the topic from its start means decoding every commit it still holds, so record objects and the
schema codec cost more than everything else the monitor does. :class:`OffsetsRecordDecoder` walks the raw
record set of a Fetch response instead: batch headers with broker/protocol/records.py, each record's framing
inline, and the layouts Kafka writes for nearly every record (offset-commit key v0/v1 with value v0-v4, and
offset tombstones) with precompiled struct layouts and a cache of decoded keys. Consecutive commits of one
group to one topic (one OffsetCommit's) come out as one run, :class:`~burrowpy.protocol.SetConsumerOffsets`,
which storage takes in with one lookup of the group and topic.

Anything else goes through :func:`~burrowpy.coordinators.offsets_topic.interpret` and the schema codec, so
every version stays supported and both paths give the same requests, runs taken one commit at a time
(tests/unit/test_offsets_topic_fastpath.py compares them): group metadata, unknown versions and malformed keys
or values per record; whole batches whose framing the inline parser does not take (record headers, invalid framing) through
:func:`~broker.protocol.records.decode_batch`; message sets v0/v1 through
:func:`~broker.protocol.records.decode_records_any`. Control batches carry no commits and are passed over.

Transactions: offset commits made inside a transaction (``TxnOffsetCommit``, Kafka Streams' exactly-once,
``send_offsets_to_transaction``) are written to the topic before the transaction ends. Given the aborted
transactions a read_committed Fetch lists, the decoder drops the records of aborted ones, as Kafka's own
consumer does, so a commit that was rolled back never reaches storage (Burrow reads them as commits).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from broker.errors import ErrorCode, KafkaError
from broker.protocol.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    decode_batch,
    decode_records_any,
    decompress,
)
from burrowpy.coordinators.group_members import MEMBER_EVENTS
from burrowpy.coordinators.offsets_topic import GroupFilter, RecordSkipped, interpret
from burrowpy.protocol import SetConsumerOffsets, SetDeletePartitionOffsets

# Decoded offset-commit keys kept at most (one per group and topic, see OffsetsRecordDecoder._keys); the cache
# starts over when full (keys are cheap to decode again).
KEY_CACHE_LIMIT = 1 << 16

_ENTRY_PREFIX = struct.Struct(">qi").unpack_from  # base offset and length of a batch or message set entry
_INT16 = struct.Struct(">h").unpack_from
_INT32 = struct.Struct(">i").unpack_from
_INT64 = struct.Struct(">q").unpack_from
# Offset-commit values after their int16 version. Kafka 2.1+ writes v3 and Kafka 4.x v4: with empty metadata
# (the usual case) either is one unpack once the version byte is read; the other versions take a second one
# for the timestamp.
_VALUE_V3 = struct.Struct(">2xqihq").unpack_from  # offset, leader epoch, metadata length, commit timestamp
_V3_SIZE = 24
_VALUE_V0_V2 = struct.Struct(">2xqh").unpack_from  # offset, metadata length (v0, v1, v2)
_V0_SIZE = 20  # with empty metadata and the commit timestamp; v1 has an expire timestamp more
_VALUE_V3_PREFIX = struct.Struct(">2xqih").unpack_from  # offset, leader epoch, metadata length
_VALUE_V4_PREFIX = struct.Struct(">2xqiB").unpack_from  # offset, leader epoch, compact metadata length (1 byte)
# Kafka 4.x writes v4: with empty metadata (compact length 1) the commit timestamp is at a fixed place, and the
# tag section after it is empty (one 0) or holds only the topic id (count 1, tag, length 16, the id).
_VALUE_V4 = struct.Struct(">2xqxxxxBq").unpack_from  # offset, compact metadata length, commit timestamp
_V4_TAGS_AT = 23
_NO_END = 1 << 63  # beyond every offset


class _UnusualFraming(Exception):
    """A record the inline parser leaves to the generic batch decoder (headers, long varints, bad bytes)."""


@dataclass(slots=True)
class DecodedRecords:
    """What one fetched record set of one partition gave, or one part of it (:meth:`decode_parts`)."""

    # Storage requests in record order; commits that follow each other for one group and topic come as one
    # run (SetConsumerOffsets), everything else one request per record.
    requests: list[Any] = field(default_factory=list)
    members: list[Any] = field(default_factory=list)  # consumer-protocol member events, in record order
    next_offset: int = 0  # where reading goes on: after the last whole batch (or the start offset)
    records: int = 0  # records read from the wanted range
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (offset, reason) of unusable records


def _tags_end_at(buf: bytes, pos: int, end: int) -> bool:
    """True if the tagged-field section at ``pos`` (count, then tag, size and bytes of each) ends at ``end``."""
    try:
        count, pos = _uvarint(buf, pos)
        for _ in range(count):
            _, pos = _uvarint(buf, pos)
            length, pos = _uvarint(buf, pos)
            pos += length
    except (IndexError, _UnusualFraming):
        return False
    return pos == end


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """A varint, not zigzag-decoded: (raw value, next position). The parser reads one-byte varints inline."""
    result = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise _UnusualFraming


class AbortedTransactions:
    """Kafka's read_committed filter over one Fetch answer: a producer's transactional batches are dropped
    from the first offset of one of its aborted transactions until that transaction's ABORT marker."""

    __slots__ = ("_pending", "_active")

    def __init__(self, aborted: list[tuple[int, int]]) -> None:
        self._pending = sorted(aborted, key=lambda entry: entry[1], reverse=True)  # popped from the end
        self._active: set[int] = set()

    def skips(self, producer_id: int, last_offset: int, abort_marker: bool) -> bool:
        """Whether a transactional batch ending at ``last_offset`` belongs to an aborted transaction."""
        pending = self._pending
        while pending and pending[-1][1] <= last_offset:
            self._active.add(pending.pop()[0])
        if abort_marker:
            self._active.discard(producer_id)
            return True
        return producer_id in self._active


def _is_abort_marker(data: bytes, pos: int, batch_end: int) -> bool:
    """A control batch whose record key says ABORT (key: int16 version, int16 type; 0 = ABORT, 1 = COMMIT)."""
    try:
        _, records = decode_batch(memoryview(data)[pos:batch_end], verify_crc=False)
    except KafkaError:
        return False
    key = records[0].key if records else None
    return key is not None and len(key) >= 4 and _INT16(key, 2)[0] == 0


class OffsetsRecordDecoder:
    """Storage requests for the records of a cluster's offsets topic, through a group allow/deny filter."""

    def __init__(self, cluster: str, groups: GroupFilter) -> None:
        self.cluster = cluster
        self.groups = groups
        self._aborted: AbortedTransactions | None = None  # of the Fetch answer being decoded
        # An offset-commit key's bytes but its last four (the partition) -> (group, topic, accepted by the filter):
        # one entry per group and topic rather than per partition. At fleet scale (50,750 partitions) the cache
        # of whole keys held 59,800 of them, 10.6 MiB (bench/README.md, "The whole monitor's memory at fleet
        # scale"); the partition is read from the key at each record instead. Only keys that end with their
        # partition are cached; a prefix found is then the whole key but its partition, since its two lengths
        # fix where the partition is.
        self._keys: dict[bytes, tuple[str, str, bool]] = {}
        self._names: dict[str, str] = {}  # one str object per group or topic name of the cached keys

    def decode(self, data: bytes, start: int, end: int | None = None) -> DecodedRecords:
        """The requests of the records of ``data`` (a fetched record set) with offsets in [start, end).

        A fetch may begin inside a batch and end with a partial one: earlier records are passed over, the
        partial tail is left for the next fetch. Raises KafkaError CORRUPT_MESSAGE when an entry's magic or
        length cannot be right, since nothing after it can be trusted.
        """
        (whole,) = self.decode_parts(data, start, end)
        return whole

    def decode_parts(self, data: bytes, start: int, end: int | None = None,
                     part_size: int | None = None,
                     aborted: list[tuple[int, int]] | None = None) -> Iterator[DecodedRecords]:
        """:meth:`decode` in parts of at least ``part_size`` records (all in one part when None), cut at
        batch boundaries, the last part perhaps empty; each part's ``next_offset`` is where the batches read
        so far end. A reader that hands each part to storage before decoding the next keeps few requests
        alive at a time, which spares the garbage collector most of its work. ``aborted`` is the (producer
        id, first offset) list of a read_committed Fetch answer: the records of those transactions are left
        out."""
        if not isinstance(data, bytes):
            data = bytes(data)
        self._aborted = AbortedTransactions(aborted) if aborted else None
        result = DecodedRecords(next_offset=start)
        stop = _NO_END if end is None else end
        pos = 0
        size = len(data)
        while size - pos > MAGIC_OFFSET:
            base_offset, length = _ENTRY_PREFIX(data, pos)
            if length < 0:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"negative entry length at offset {base_offset}")
            entry_end = pos + LOG_OVERHEAD + length
            if entry_end > size:
                break
            magic = data[pos + MAGIC_OFFSET]
            if magic == 2:
                if LOG_OVERHEAD + length < HEADER_SIZE:
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"record batch length {length} is too small")
                self._batch(data, pos, entry_end, start, stop, result)
            elif magic in (0, 1):
                self._message_set_entry(data[pos:entry_end], start, stop, result)
            else:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"invalid magic byte {magic} at offset {base_offset}")
            pos = entry_end
            if part_size is not None and result.records >= part_size:
                yield result
                result = DecodedRecords(next_offset=result.next_offset)
        yield result  # the rest, perhaps nothing but the position

    def _batch(self, data: bytes, pos: int, batch_end: int, start: int, stop: int, result: DecodedRecords) -> None:
        (base_offset, _, _, _, _, attributes, last_offset_delta, _, _, producer_id, _, _,
         count) = HEADER.unpack_from(data, pos)
        next_offset = base_offset + last_offset_delta + 1
        if next_offset > result.next_offset:
            result.next_offset = next_offset
        aborted = self._aborted
        if aborted is not None and attributes & ATTR_TRANSACTIONAL and aborted.skips(
                producer_id, next_offset - 1, attributes & ATTR_CONTROL and _is_abort_marker(data, pos, batch_end)):
            return
        if attributes & ATTR_CONTROL or next_offset <= start or base_offset >= stop:
            return
        # A batch that straddles the wanted range (only at the start of a read or at the end of a backfill)
        # goes to the generic decoder, which filters record by record; the inline parser takes whole batches.
        if start <= base_offset and next_offset <= stop:
            requests = result.requests
            marks = (len(requests), len(result.skipped), len(result.members))
            try:
                codec = attributes & ATTR_COMPRESSION_MASK
                if codec:
                    payload = decompress(codec, memoryview(data)[pos + HEADER_SIZE : batch_end])
                    self._records(payload, 0, len(payload), count, base_offset, result)
                else:
                    self._records(data, pos + HEADER_SIZE, batch_end, count, base_offset, result)
                return
            except (_UnusualFraming, IndexError, struct.error):
                del requests[marks[0] :], result.skipped[marks[1] :], result.members[marks[2] :]
            except KafkaError as exc:  # a codec that cannot decompress the payload
                result.skipped.append((base_offset, f"record batch: {exc}"))
                return
        try:
            _, records = decode_batch(memoryview(data)[pos:batch_end], verify_crc=False)
        except KafkaError as exc:
            result.skipped.append((base_offset, f"record batch: {exc}"))
            return
        for record in records:
            if start <= record.offset < stop:
                result.records += 1
                self._interpret(record.key, record.value, record.offset, result)

    def _message_set_entry(self, entry: bytes, start: int, stop: int, result: DecodedRecords) -> None:
        """One entry of a v0/v1 message set (old brokers' format), through the generic record decoder."""
        (last_offset,) = _INT64(entry, 0)  # a compressed wrapper carries its last inner offset
        if last_offset + 1 > result.next_offset:
            result.next_offset = last_offset + 1
        try:
            records = decode_records_any(entry, verify_crc=False)
        except KafkaError as exc:
            result.skipped.append((last_offset, f"message set entry: {exc}"))
            return
        for record in records:
            if start <= record.offset < stop:
                result.records += 1
                self._interpret(record.key, record.value, record.offset, result)

    def _interpret(self, key: bytes | None, value: bytes | None, offset: int, result: DecodedRecords) -> None:
        try:
            meant = interpret(self.cluster, key, value, offset, self.groups)
        except RecordSkipped as exc:
            result.skipped.append((offset, str(exc)))
            return
        for request in meant:
            (result.members if isinstance(request, MEMBER_EVENTS) else result.requests).append(request)

    def _offset_key(self, buf: bytes, pos: int, end: int) -> tuple[tuple[str, str, bool], int, bool] | None:
        """The fields of an offset-commit key v0/v1 at ``buf[pos:end]``: ((group, topic, accepted by the filter),
        partition, whether the key ends with the partition), or None when it is anything else."""
        if end - pos < 4 or buf[pos] != 0 or buf[pos + 1] > 1:
            return None
        (group_length,) = _INT16(buf, pos + 2)
        pos += 4
        if group_length < 0 or end - pos < group_length + 2:
            return None
        names = self._names
        group = str(buf[pos : pos + group_length], "utf-8", "replace")
        group = names.setdefault(group, group)
        pos += group_length
        (topic_length,) = _INT16(buf, pos)
        pos += 2
        if topic_length < 0 or end - pos < topic_length + 4:
            return None
        topic = str(buf[pos : pos + topic_length], "utf-8", "replace")
        topic = names.setdefault(topic, topic)
        (partition,) = _INT32(buf, pos + topic_length)
        return (group, topic, self.groups.accepts(group)), partition, pos + topic_length + 4 == end

    def _records(self, buf: bytes, pos: int, end: int, count: int, base_offset: int, result: DecodedRecords) -> None:
        """Parse ``count`` records of a batch from ``buf[pos:end]``; raise _UnusualFraming (or IndexError,
        struct.error) for anything the generic decoder must judge, before or after emitting requests."""
        cluster = self.cluster
        keys = self._keys
        known_key = keys.get
        emit = result.requests.append
        # Locals rather than globals: this loop runs once per commit of the topic.
        read_v3, v3_size, commit_run, delete_request = _VALUE_V3, _V3_SIZE, SetConsumerOffsets, SetDeletePartitionOffsets
        read_v4, read_partition = _VALUE_V4, _INT32
        # The commits of one group to one topic that follow each other become one run (SetConsumerOffsets).
        # A run does not go on past this batch: a batch the generic decoder must take instead is dropped
        # whole, runs and all, by the caller.
        run_group = run_topic = None
        run: list[int] = []  # the run being filled (a new list per run: the emitted request holds it)
        for _ in range(count):
            # Varints are zigzag-encoded: a raw value's low bit is the sign, and lengths must not be negative.
            # Record lengths, offset deltas and key lengths often take two bytes, which are read inline.
            raw = buf[pos]
            if raw < 0x80:
                pos += 1
            elif buf[pos + 1] < 0x80:
                raw = (raw & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                raw, pos = _uvarint(buf, pos)
            record_end = pos + (raw >> 1)
            if raw & 1 or record_end > end:
                raise _UnusualFraming
            pos += 1  # attributes, unused
            if buf[pos] < 0x80:  # timestamp delta, unused
                pos += 1
            else:
                _, pos = _uvarint(buf, pos)
            raw = buf[pos]
            if raw < 0x80:
                pos += 1
            elif buf[pos + 1] < 0x80:
                raw = (raw & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                raw, pos = _uvarint(buf, pos)
            offset = base_offset + ((raw >> 1) ^ -(raw & 1))
            raw = buf[pos]
            if raw < 0x80:
                pos += 1
            elif buf[pos + 1] < 0x80:
                raw = (raw & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                raw, pos = _uvarint(buf, pos)
            if raw & 1:  # a null key: the generic path says why the record is skipped
                raise _UnusualFraming
            key_start = pos
            pos += raw >> 1
            key_end = pos
            raw = buf[pos]
            if raw < 0x80:
                pos += 1
            else:
                raw, pos = _uvarint(buf, pos)
            value_start = pos
            value_length = -1 if raw & 1 else raw >> 1  # every negative length reads as a null value
            if value_length > 0:
                pos += value_length
            # A record ends with its header count; records with headers go to the generic decoder.
            if pos + 1 != record_end or buf[pos] != 0:
                raise _UnusualFraming
            pos = record_end

            # The key but its partition (key_start is past the record's framing, so key_end - 4 is not negative;
            # a key shorter than four bytes gives b"", never cached).
            prefix = buf[key_start:key_end - 4]
            named = known_key(prefix)
            if named is not None:
                (partition,) = read_partition(buf, key_end - 4)
            else:
                decoded = self._offset_key(buf, key_start, key_end)
                if decoded is None:
                    self._interpret(buf[key_start:key_end],
                                    buf[value_start:record_end - 1] if value_length >= 0 else None, offset, result)
                    run_group = None
                    continue
                named, partition, whole = decoded
                if whole:
                    if len(keys) >= KEY_CACHE_LIMIT:
                        keys.clear()
                        self._names.clear()
                    keys[prefix] = named
            group, topic, accepted = named
            if not accepted:
                continue
            if value_length <= 0:
                emit(delete_request(cluster, group, topic, partition))
                run_group = None
                continue
            committed = None
            if value_length >= v3_size and buf[value_start] == 0:  # the int16 version's high byte
                version = buf[value_start + 1]
                if version == 3:
                    committed, _, metadata_length, timestamp = read_v3(buf, value_start)
                    if metadata_length != 0:
                        committed = None
                elif version == 4:
                    committed, compact_length, timestamp = read_v4(buf, value_start)
                    tags = value_start + _V4_TAGS_AT
                    tags_size = record_end - 1 - tags
                    if compact_length != 1 or not (
                            (tags_size == 1 and buf[tags] == 0)
                            or (tags_size >= 3 and buf[tags] == 1 and buf[tags + 1] < 0x80
                                and buf[tags + 2] == tags_size - 3 and tags_size < 0x83)):
                        committed = None
            if committed is None:
                commit = self._commit_value(buf, value_start, record_end - 1)
                if commit is None:
                    self._interpret(buf[key_start:key_end], buf[value_start:record_end - 1], offset, result)
                    run_group = None
                    continue
                committed, timestamp = commit
            # Group and topic names are interned (see _offset_key): consecutive commits of one OffsetCommit
            # join one run by two identity checks.
            if group is not run_group or topic is not run_topic:
                run_group, run_topic, run = group, topic, []
                emit(commit_run(cluster, group, topic, run))
            run += (partition, committed, offset, timestamp)
        result.records += count

    @staticmethod
    def _commit_value(buf: bytes, pos: int, end: int) -> tuple[int, int] | None:
        """(offset, commit timestamp) of an offset-commit value v0-v4 at ``buf[pos:end]``, or None for
        anything the schema codec must judge (other versions, truncation, null metadata, tagged fields)."""
        size = end - pos
        if size < _V0_SIZE or buf[pos] != 0:
            return None
        version = buf[pos + 1]
        if version <= 2:
            committed, metadata_length = _VALUE_V0_V2(buf, pos)
            timestamp_at = pos + 12 + metadata_length
            needed = _V0_SIZE + metadata_length + (8 if version == 1 else 0)
        elif version == 3:
            if size < _V3_SIZE:
                return None
            committed, _, metadata_length = _VALUE_V3_PREFIX(buf, pos)
            timestamp_at = pos + 16 + metadata_length
            needed = _V3_SIZE + metadata_length
        elif version == 4:
            committed, _, compact_length = _VALUE_V4_PREFIX(buf, pos)
            if compact_length >= 0x80:
                return None
            metadata_length = compact_length - 1  # compact strings store length + 1, 0 (-1 here) being null
            timestamp_at = pos + 15 + metadata_length
            needed = 24 + metadata_length  # the timestamp is followed by a tag section: one 0 when empty
            if metadata_length < 0 or size < needed:
                return None
            if buf[pos + needed - 1] != 0 and not _tags_end_at(buf, pos + needed - 1, end):
                return None  # Kafka 4.x tags the topic id; anything the tag section does not explain is judged
            needed = size
        else:
            return None
        if metadata_length < 0 or size < needed:
            return None
        return committed, _INT64(buf, timestamp_at)[0]
