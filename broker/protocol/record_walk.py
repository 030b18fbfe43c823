"""Walking the records of a v2 batch without building them: Kafka's log validator, and bounded reads.

A produced batch is checked record by record before it is stored, as Kafka's ``LogValidator`` does:
the records present must be exactly the ones the header counts (no trailing bytes), each record's fields
must add up to its length, offset deltas must run 0, 1, 2, ..., keys must be present on compacted
topics and CreateTime timestamps must lie within ``message.timestamp.before/after.max.ms``. The walk
yields the largest record timestamp, which the log stores instead of the header's claim (Kafka sets the
batch's max timestamp from its records the same way).

Nothing is decoded into objects: an uncompressed batch is walked in place; a compressed one is inflated
as a stream, a chunk at a time, and every record's declared body is checked against the topic's
``max.decompressed.message.bytes`` before its bytes are read. Keys, values and header values are skipped,
not copied, so a record larger than a chunk costs no more memory than a chunk. The walk stops after the
counted records, so a batch inflating past them (a decompression bomb) is refused after one more chunk.

:func:`timestamp_at_offset` reads one record's timestamp from a fetched batch with the same bounds, and
stops at that record.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import NamedTuple

import cramjam
import lz4.frame
import numpy as np
import zstandard

from broker.errors import ErrorCode, KafkaError
from broker.protocol.records import (
    ATTR_LOG_APPEND_TIME,
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NAMES,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    HEADER_SIZE,
    NO_TIMESTAMP,
    BatchHeader,
    Buffer,
    _read_varint,
)

# Decompressed bytes taken from a codec at a time: the memory a compressed batch's walk holds, beyond
# one record smaller than BIG_RECORD.
CHUNK = 256 * 1024
# A record whose body is larger is walked field by field from the stream instead of being gathered whole.
BIG_RECORD = 1024 * 1024
# An uncompressed batch of at least this many records has its fields read with numpy, not one by one
# (below it numpy's fixed cost, about 80-120 us a batch, outweighs what it saves: 128 records of 100 B or
# 1 KiB take 120 us with numpy and 150-160 us walked, 96 records about as long either way; bench/HISTORY.md).
VECTOR_MIN_RECORDS = 128
_GZIP_ANY_HEADER = 32 + zlib.MAX_WBITS
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16
_MAX_VARINT_BYTES = 10


class RecordChecks(NamedTuple):
    """What the topic asks of each produced record."""

    max_record_bytes: int  # max.decompressed.message.bytes: the largest decompressed record body
    compacted: bool  # records without a key are refused
    earliest_ms: int | None  # CreateTime bounds; None on LogAppendTime topics (timestamps not checked)
    latest_ms: int | None
    topic_partition: str


def _malformed(why: str) -> KafkaError:
    # Kafka's DefaultRecord and its batch iterator throw InvalidRecordException: INVALID_RECORD, no record errors.
    return KafkaError(ErrorCode.INVALID_RECORD, why)


class _Walk:
    """The state of one batch's walk: where the records are checked and the largest timestamp gathered."""

    __slots__ = ("base_timestamp", "checks", "count", "errors", "index", "invalid_timestamp", "max_timestamp")

    def __init__(self, header: BatchHeader, checks: RecordChecks) -> None:
        self.base_timestamp = header.base_timestamp
        self.checks = checks
        self.count = header.records_count
        self.index = 0
        self.max_timestamp = NO_TIMESTAMP
        self.errors: list[tuple[int, str]] = []
        self.invalid_timestamp = False

    def check_record(self, index: int, key_length: int, timestamp: int) -> None:
        """Kafka's validateKey, then validateTimestamp: one error per record, the key's first."""
        checks = self.checks
        if checks.compacted and key_length < 0:
            self.errors.append((index, "Compacted topic cannot accept message without key in topic partition "
                                       f"{checks.topic_partition}"))
        elif checks.earliest_ms is not None and checks.latest_ms is not None and timestamp != NO_TIMESTAMP and not (
                checks.earliest_ms <= timestamp <= checks.latest_ms):
            self.invalid_timestamp = True
            self.errors.append((index, f"Timestamp {timestamp} of message with offset {index} is out of range. "
                                       f"The timestamp should be within [{checks.earliest_ms}, {checks.latest_ms}]"))

    def walk(self, data: Buffer, pos: int, end: int, final: bool, limit: int) -> int:
        """Check the whole records in ``data[pos:end]``; return where the first one not wholly there starts.

        ``final``: no more data follows, so a record cut short is malformed rather than awaited. ``limit``:
        the largest record body. The hot path of every produce request: varints of one and two bytes are read inline.
        """
        index = self.index
        count = self.count
        base_timestamp = self.base_timestamp
        max_delta = self.max_timestamp - base_timestamp
        compacted = self.checks.compacted
        # Bounds on the timestamp delta, so that a record inside them costs two comparisons and no call.
        earliest = -(2**63) if self.checks.earliest_ms is None else self.checks.earliest_ms - base_timestamp
        latest = 2**63 if self.checks.latest_ms is None else self.checks.latest_ms - base_timestamp
        read = _read_varint
        try:
            while index < count and pos < end:
                byte = data[pos]
                if byte < 0x80:
                    length = (byte >> 1) ^ -(byte & 1)
                    start = pos + 1
                elif pos + 1 < end and data[pos + 1] < 0x80:
                    byte = (byte & 0x7F) | (data[pos + 1] << 7)
                    length = (byte >> 1) ^ -(byte & 1)
                    start = pos + 2
                elif final or end - pos >= _MAX_VARINT_BYTES:
                    length, start = read(data, pos)
                else:
                    try:
                        length, start = read(data, pos)
                    except IndexError:
                        break
                if length > limit:
                    raise _malformed(f"a record of {length} bytes decompressed exceeds max.decompressed.message.bytes "
                                     f"{limit}")
                if length < 0:
                    raise _malformed(f"invalid record size {length}")
                record_end = start + length
                if record_end > end:
                    if final:
                        raise _malformed("the batch ends inside a record")
                    break
                p = start + 1  # after the attributes byte, which Kafka leaves unused
                byte = data[p]
                if byte < 0x80:
                    timestamp_delta = (byte >> 1) ^ -(byte & 1)
                    p = p + 1
                elif data[p + 1] < 0x80:
                    byte = (byte & 0x7F) | (data[p + 1] << 7)
                    timestamp_delta = (byte >> 1) ^ -(byte & 1)
                    p = p + 2
                else:
                    timestamp_delta, p = read(data, p)
                byte = data[p]
                if byte < 0x80:
                    offset_delta = (byte >> 1) ^ -(byte & 1)
                    p = p + 1
                elif data[p + 1] < 0x80:
                    byte = (byte & 0x7F) | (data[p + 1] << 7)
                    offset_delta = (byte >> 1) ^ -(byte & 1)
                    p = p + 2
                else:
                    offset_delta, p = read(data, p)
                if offset_delta != index:
                    raise _malformed(f"record {index} of the batch has offset delta {offset_delta}")
                byte = data[p]
                if byte < 0x80:
                    key_length = (byte >> 1) ^ -(byte & 1)
                    p = p + 1
                elif data[p + 1] < 0x80:
                    byte = (byte & 0x7F) | (data[p + 1] << 7)
                    key_length = (byte >> 1) ^ -(byte & 1)
                    p = p + 2
                else:
                    key_length, p = read(data, p)
                if key_length > 0:
                    p += key_length
                elif key_length < -1:
                    raise _malformed(f"invalid key size {key_length}")
                byte = data[p]
                if byte < 0x80:
                    value_length = (byte >> 1) ^ -(byte & 1)
                    p = p + 1
                elif data[p + 1] < 0x80:
                    byte = (byte & 0x7F) | (data[p + 1] << 7)
                    value_length = (byte >> 1) ^ -(byte & 1)
                    p = p + 2
                else:
                    value_length, p = read(data, p)
                if value_length > 0:
                    p += value_length
                elif value_length < -1:
                    raise _malformed(f"invalid value size {value_length}")
                byte = data[p]
                if byte:
                    headers, p = read(data, p)
                    p = _skip_headers(data, p, headers, record_end)
                else:
                    p += 1
                if p != record_end:
                    raise _malformed(f"record {index} is {length} bytes long but its fields take {p - start}")
                if timestamp_delta > max_delta:
                    max_delta = timestamp_delta
                if not earliest <= timestamp_delta <= latest or (compacted and key_length < 0):
                    self.check_record(index, key_length, base_timestamp + timestamp_delta)
                index += 1
                pos = record_end
        except IndexError:
            raise _malformed(f"record {index} extends past the end of the batch") from None
        finally:
            self.index = index
            self.max_timestamp = base_timestamp + max_delta
        return pos

    def walk_streamed(self, stream: _Stream) -> None:
        """One record read field by field from ``stream`` (its bytes need not all be there at once)."""
        length, key_length, timestamp_delta, offset_delta = _stream_record(stream, self.checks.max_record_bytes)
        index = self.index
        if offset_delta != index:
            raise _malformed(f"record {index} of the batch has offset delta {offset_delta}")
        timestamp = self.base_timestamp + timestamp_delta
        self.max_timestamp = max(self.max_timestamp, timestamp)
        if self.checks.compacted or self.checks.earliest_ms is not None:
            self.check_record(index, key_length, timestamp)
        self.index = index + 1

    def finish(self) -> int:
        """Refuse the batch for its records' errors, in Kafka's words (KIP-467), or return its max timestamp."""
        errors = self.errors
        if errors:
            if self.invalid_timestamp:
                raise KafkaError(ErrorCode.INVALID_TIMESTAMP,
                                 "One or more records have been rejected due to invalid timestamp", errors)
            shown = ", ".join(f"RecordError(batchIndex={index}, message='{text}')" for index, text in errors[:3])
            raise KafkaError(ErrorCode.INVALID_RECORD,
                             f"One or more records have been rejected due to {len(errors)} record errors in total, "
                             f"and only showing the first three errors at most: [{shown}]", errors)
        return self.max_timestamp


def _skip_headers(data: Buffer, pos: int, count: int, end: int) -> int:
    """Step over a record's headers, which must end by ``end``, the record's end."""
    # every header takes at least two bytes: a count beyond what the record holds is a lie, not a loop to run
    if not 0 <= count <= (end - pos) // 2:
        raise _malformed(f"invalid number of record headers {count}")
    for _ in range(count):
        key_length, pos = _read_varint(data, pos)
        if key_length < 0:
            raise _malformed(f"invalid negative header key size {key_length}")
        value_length, pos = _read_varint(data, pos + key_length)
        if value_length > 0:
            pos += value_length
        elif value_length < -1:
            raise _malformed(f"invalid header value size {value_length}")
    return pos


def validate_records(batch: Buffer, header: BatchHeader, checks: RecordChecks) -> int:
    """Walk every record of a produced batch whose header :func:`validate_batch` has passed; return the
    largest record timestamp (NO_TIMESTAMP when no record carries one).

    Raises KafkaError: INVALID_RECORD for records that are not what the header says (with no record
    errors, as Kafka's record iterator refuses them) and for records a compacted topic cannot take (with
    KIP-467 record errors), INVALID_TIMESTAMP for timestamps out of bounds (with record errors),
    CORRUPT_MESSAGE for compressed data that does not decompress.
    """
    walk = _Walk(header, checks)
    end = header.size
    if header.compression == COMPRESSION_NONE:
        if walk.count >= VECTOR_MIN_RECORDS:
            checked = _checked_at_once(batch, end, walk)
            if checked is not None:
                return checked
        # Kafka bounds only decompressed records; an uncompressed one is already bounded by max.message.bytes.
        pos = walk.walk(batch, HEADER_SIZE, end, True, end)
        if walk.index < walk.count:
            raise _malformed(f"the batch holds {walk.index} records, its header says {walk.count}")
        if pos != end:
            raise _malformed(f"{end - pos} bytes follow the batch's {walk.count} records")
        return walk.finish()
    stream = _Stream(inflate(header.compression, memoryview(batch)[HEADER_SIZE:end]))
    while walk.index < walk.count:
        stream.pos = walk.walk(stream.buf, stream.pos, len(stream.buf), stream.exhausted, checks.max_record_bytes)
        if walk.index == walk.count:
            break
        if stream.exhausted:
            raise _malformed(f"the batch holds {walk.index} records, its header says {walk.count}")
        if len(stream.buf) - stream.pos > BIG_RECORD:
            # The record still is not whole after BIG_RECORD bytes: read it without gathering it.
            walk.walk_streamed(stream)
        else:
            stream.pull()
    if stream.pos < len(stream.buf) or stream.pull():
        raise _malformed(f"decompressed bytes follow the batch's {walk.count} records")
    return walk.finish()


def _checked_at_once(batch: Buffer, end: int, walk: _Walk) -> int | None:
    """The largest timestamp of an uncompressed batch whose records are all well formed and pass the
    topic's checks, or None for any other batch, which the record-by-record walk then refuses in detail.

    The chain of record lengths is followed by guessing runs of one length and checking them at once
    (:func:`_record_ends`), which also gives where each record's fields start; every record's fields are then
    read at once, one field after the other, with numpy: a fraction of the walk's cost for a batch of many
    records.
    """
    count = walk.count
    data = np.frombuffer(batch, np.uint8, end)
    found = _record_ends(batch, data, end, count)
    if found is None:
        return None
    # the lengths are not negative: the chain and the guesses both refuse a batch with one
    record_ends, at = found
    found = _varints_at(data, at + 1)  # past the attributes byte
    if found is None:
        return None
    timestamp_deltas, at = found
    found = _varints_at(data, at)
    if found is None:
        return None
    offset_deltas, at = found
    if np.count_nonzero(offset_deltas != np.arange(count)):
        return None
    found = _varints_at(data, at)
    if found is None:
        return None
    key_lengths, at = found
    if np.count_nonzero(key_lengths < (0 if walk.checks.compacted else -1)):
        return None
    at += np.maximum(key_lengths, 0)
    if np.count_nonzero(at >= record_ends):
        return None
    found = _varints_at(data, at)
    if found is None:
        return None
    value_lengths, at = found
    if np.count_nonzero(value_lengths < -1):
        return None
    at += np.maximum(value_lengths, 0)
    if np.count_nonzero(at >= record_ends):
        return None
    found = _varints_at(data, at)
    if found is None:
        return None
    header_counts, at = found
    # records with headers are left to the walk
    if np.count_nonzero(header_counts) or np.count_nonzero(at != record_ends):
        return None
    largest, smallest = int(timestamp_deltas.max()), int(timestamp_deltas.min())
    checks = walk.checks
    base = walk.base_timestamp
    if (checks.earliest_ms is not None and base + smallest < checks.earliest_ms) or (
            checks.latest_ms is not None and base + largest > checks.latest_ms):
        return None
    return max(NO_TIMESTAMP, base + largest)


def _chained_ends(batch: Buffer, pos: int, end: int, count: int) -> np.ndarray | None:
    """Where each record from ``pos`` on ends, following the chain of record lengths in Python; None unless
    the chain holds exactly ``count`` records and ends at ``end``."""
    ends: list[int] = []
    append = ends.append
    try:
        while pos < end:
            byte = batch[pos]
            if byte < 0x80:
                if byte & 1:
                    return None  # a negative length
                pos += (byte >> 1) + 1
            elif batch[pos + 1] < 0x80:
                byte = (byte & 0x7F) | (batch[pos + 1] << 7)
                if byte & 1:
                    return None
                pos += (byte >> 1) + 2
            else:
                length, pos = _read_varint(batch, pos)
                if length < 0:
                    return None
                pos += length
            append(pos)
    except (IndexError, KafkaError):
        return None
    if pos != end or len(ends) != count:
        return None
    return np.array(ends, np.int64)


# Rounds of guessing in a row that confirm fewer records than this hand the rest of a batch to the chain.
_SHORT_RUN = 16


def _record_ends(batch: Buffer, data: np.ndarray, end: int, count: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Where each of the batch's ``count`` records ends and where its fields start (past its length), or None
    unless the chain of record lengths holds exactly ``count`` records and ends at ``end``.

    Following the chain in Python, record by record, was most of the broker's CPU per produced record of
    100 B (bench/README.md, "CPU per record"). Records mostly come in runs of one length (fixed-size values,
    and the varints of offset and timestamp deltas growing a byte now and then), so the next records are
    guessed to have the length of the one at hand and every guess is checked at once, with numpy: a guessed
    record counts only if its length field is byte for byte the one at hand (so it has that length and leads
    exactly to the next guessed record), and the first that is not is where the next guess starts. Comparing
    the length's bytes costs a third of decoding every guessed length (bench/HISTORY.md, "The 1 KiB produce
    rows per core"). A batch whose lengths keep changing goes back to the chain.
    """
    end_pieces, field_pieces = [], []
    pos, found, window, short = HEADER_SIZE, 0, 1024, 0
    while pos < end:
        if short == 3:
            rest = _chained_ends(batch, pos, end, count - found)
            if rest is None:
                return None
            starts = np.empty_like(rest)
            starts[0] = pos
            starts[1:] = rest[:-1]
            read = _varints_at(data, starts)
            if read is None:
                return None
            end_pieces.append(rest)
            field_pieces.append(read[1])
            found, pos = count, end
            break
        try:
            length, after = _read_varint(batch, pos)
        except (IndexError, KafkaError):
            return None
        width = after - pos
        stride = width + length
        guesses = min(window, (end - pos) // stride, count - found) if length >= 0 else 0
        if guesses < 1:
            return None  # a negative length, a record past the end, or more records than counted
        starts = pos + stride * np.arange(guesses, dtype=np.int64)
        # every guessed record lies within the batch (guesses <= (end - pos) // stride), its length field too
        same = data.take(starts) == batch[pos]
        for byte in range(1, width):
            same &= data.take(starts + byte) == batch[pos + byte]
        # the record at pos is its own first guess: at least one is confirmed
        confirmed = guesses if same.all() else int(same.argmin())
        end_pieces.append(starts[:confirmed] + stride)
        field_pieces.append(starts[:confirmed] + width)
        found += confirmed
        pos += stride * confirmed
        if confirmed == guesses:
            window *= 2
        elif confirmed < _SHORT_RUN:
            short += 1
    if pos != end or found != count:
        return None
    if len(end_pieces) == 1:
        return end_pieces[0], field_pieces[0]
    return np.concatenate(end_pieces), np.concatenate(field_pieces)


def _varints_at(data: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The zigzag varints starting at each of the positions ``at`` and the positions after them, or
    None when one is longer than nine bytes (a value no record field honestly holds).

    ``data`` is the batch itself: a read past its end takes its last byte instead (``mode="clip"``). Only a
    malformed batch reads there, and its fields then end past the records' ends, which the callers refuse.
    """
    byte = data.take(at, mode="clip")
    more = byte >= 0x80
    if not np.count_nonzero(more):
        value = byte.astype(np.int64)
        return (value >> 1) ^ -(value & 1), at + 1
    second = data.take(at + 1, mode="clip")
    if not np.count_nonzero(more & (second >= 0x80)):
        # one or two bytes each: record lengths from 64 B to 8 KiB, and deltas past 63, all land here
        value = (byte & 0x7F).astype(np.int64)
        value += ((second & 0x7F).astype(np.int64) << 7) * more
        return (value >> 1) ^ -(value & 1), at + 1 + more
    value = (byte & 0x7F).astype(np.int64)
    size = 1 + more
    shift = 7
    while True:
        byte = second if shift == 7 else data.take(at + size - 1, mode="clip")
        value |= np.where(more, (byte & 0x7F).astype(np.int64) << shift, 0)
        more &= byte >= 0x80
        if not np.count_nonzero(more):
            return (value >> 1) ^ -(value & 1), at + size
        shift += 7
        if shift > 56:
            return None
        size += more


# --------------------------------------------------------------------------------------------------
# Streams of decompressed bytes


class _Stream:
    """Decompressed bytes pulled a chunk at a time; ``buf[pos:]`` is what has been pulled and not read."""

    __slots__ = ("_chunks", "buf", "exhausted", "pos", "pulled")

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self.buf = bytearray()
        self.pos = 0
        self.exhausted = False
        self.pulled = 0  # bytes taken from the chunks so far

    def pull(self) -> bool:
        """Add the next chunk to the buffer; False once there is none."""
        for chunk in self._chunks:
            if chunk:
                if self.pos:
                    del self.buf[: self.pos]
                    self.pos = 0
                self.buf += chunk
                self.pulled += len(chunk)
                return True
        self.exhausted = True
        return False

    def varint(self) -> tuple[int, int]:
        """(value, bytes it took) of the varint next in the stream."""
        while len(self.buf) - self.pos < _MAX_VARINT_BYTES and self.pull():
            pass
        start = self.pos
        try:
            value, self.pos = _read_varint(self.buf, start)
        except IndexError:
            raise _malformed("the batch ends inside a record") from None
        return value, self.pos - start

    def skip(self, size: int) -> None:
        """Step over ``size`` bytes, dropping the chunks they fill without keeping them."""
        available = len(self.buf) - self.pos
        if size <= available:
            self.pos += size
            return
        size -= available
        self.buf.clear()
        self.pos = 0
        while size > 0:
            if not self.pull():
                raise _malformed("the batch ends inside a record")
            taken = min(size, len(self.buf))
            self.pos = taken
            size -= taken


def _stream_record(stream: _Stream, limit: int) -> tuple[int, int, int, int]:
    """Read one record's fields from the stream, skipping key, value and header values:
    (length, key length, timestamp delta, offset delta)."""
    length, _ = stream.varint()
    if length > limit:
        raise _malformed(f"a record of {length} bytes decompressed exceeds max.decompressed.message.bytes {limit}")
    if length < 0:
        raise _malformed(f"invalid record size {length}")
    read = 0

    def field() -> int:
        nonlocal read
        value, size = stream.varint()
        read += size
        if read > length:
            raise _malformed(f"a record's fields take more than its {length} bytes")
        return value

    def skip(size: int) -> None:
        nonlocal read
        if size > length - read:
            raise _malformed(f"a field of {size} bytes extends past its record of {length}")
        stream.skip(size)
        read += size

    skip(1)  # attributes
    timestamp_delta = field()
    offset_delta = field()
    key_length = field()
    if key_length < -1:
        raise _malformed(f"invalid key size {key_length}")
    skip(max(key_length, 0))
    value_length = field()
    if value_length < -1:
        raise _malformed(f"invalid value size {value_length}")
    skip(max(value_length, 0))
    headers = field()
    if not 0 <= headers <= (length - read) // 2:
        raise _malformed(f"invalid number of record headers {headers}")
    for _ in range(headers):
        header_key = field()
        if header_key < 0:
            raise _malformed(f"invalid negative header key size {header_key}")
        skip(header_key)
        header_value = field()
        if header_value < -1:
            raise _malformed(f"invalid header value size {header_value}")
        skip(max(header_value, 0))
    if read != length:
        raise _malformed(f"a record is {length} bytes long but its fields take {read}")
    return length, key_length, timestamp_delta, offset_delta


def inflate(codec: int, data: memoryview) -> Iterator[bytes]:
    """The decompressed bytes of a batch's records, at most :data:`CHUNK` at a time, however much the
    data inflates to. Raises KafkaError CORRUPT_MESSAGE for data the codec cannot read."""
    try:
        if codec == COMPRESSION_ZSTD:
            # Kafka's zstd frames need not declare their content size; each read is bounded, across frames.
            reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
            while chunk := reader.read(CHUNK):
                yield chunk
        elif codec == COMPRESSION_GZIP:
            yield from _inflate_gzip(data)
        elif codec == COMPRESSION_LZ4:
            yield from _inflate_lz4(data)
        elif codec == COMPRESSION_SNAPPY:
            yield from _inflate_snappy(bytes(data))
        else:
            raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec {codec}")
    except KafkaError:
        raise
    except Exception as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                         f"cannot decompress {COMPRESSION_NAMES.get(codec, codec)} data: {exc}") from exc


def _truncated(codec: str) -> KafkaError:
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, f"cannot decompress {codec} data: it ends early")


def _inflate_gzip(data: memoryview) -> Iterator[bytes]:
    pending: Buffer = data
    while pending:  # gzip data may be several members, one after the other
        inflater = zlib.decompressobj(_GZIP_ANY_HEADER)
        while not inflater.eof:
            out = inflater.decompress(pending, CHUNK)
            pending = inflater.unconsumed_tail
            if out:
                yield out
            elif not pending:
                raise _truncated("gzip")
        pending = inflater.unused_data


def _inflate_lz4(data: memoryview) -> Iterator[bytes]:
    inflater = lz4.frame.LZ4FrameDecompressor()
    pending = bytes(data)
    while not inflater.eof:
        out = inflater.decompress(pending, max_length=CHUNK)
        pending = b""
        if out:
            yield out
        elif inflater.needs_input:
            raise _truncated("lz4")


def _inflate_snappy(data: bytes) -> Iterator[bytes]:
    """Raw snappy (librdkafka) is one block; Java's xerial framing is a header and blocks of
    [int32 length][raw block]. A block states its decompressed size and snappy inflates at most ~21x, so a
    block is bounded by the batch's own size."""
    if not data.startswith(_XERIAL_MAGIC):
        yield bytes(cramjam.snappy.decompress_raw(data))
        return
    pos = _XERIAL_HEADER_SIZE
    while pos < len(data):
        if pos + 4 > len(data):
            raise _truncated("snappy")
        block_length = int.from_bytes(data[pos : pos + 4], "big", signed=True)
        pos += 4
        if block_length < 0 or pos + block_length > len(data):
            raise _truncated("snappy")
        yield bytes(cramjam.snappy.decompress_raw(data[pos : pos + block_length]))
        pos += block_length


# --------------------------------------------------------------------------------------------------
# Reading one record's timestamp


def record_times(batch: Buffer, max_record_bytes: int, max_bytes: int | None = None) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of each record of the whole v2 batch at the start of ``batch``, in order.

    Records are read as they are asked for, compressed ones a chunk at a time, keys and values skipped, each
    bounded by ``max_record_bytes`` (KafkaError INVALID_RECORD beyond it) and all of them, when given, by
    ``max_bytes`` of record data (KafkaError RECORD_LIST_TOO_LARGE beyond it). A compacted batch may have
    gaps in its offset deltas. LogAppendTime batches give every record the batch's append time.
    """
    header = BatchHeader.parse(batch)
    data = memoryview(batch)[HEADER_SIZE : header.size]
    chunks = iter((bytes(data),)) if header.compression == COMPRESSION_NONE else inflate(header.compression, data)
    stream = _Stream(chunks)
    append_time = header.max_timestamp if header.attributes & ATTR_LOG_APPEND_TIME else None
    for _ in range(header.records_count):
        _, _, timestamp_delta, offset_delta = _stream_record(stream, max_record_bytes)
        if max_bytes is not None and stream.pulled > max_bytes:
            raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE, f"the batch's records pass {max_bytes} bytes")
        timestamp = header.base_timestamp + timestamp_delta if append_time is None else append_time
        yield header.base_offset + offset_delta, timestamp


def timestamp_at_offset(batch: Buffer, offset: int, max_record_bytes: int, max_bytes: int | None = None) -> int | None:
    """The timestamp of the first record at or after ``offset`` in the whole v2 batch at the start of
    ``batch``, or None when it has none; records after that one are not read (see :func:`record_times`)."""
    header = BatchHeader.parse(batch)
    if header.attributes & ATTR_LOG_APPEND_TIME:
        return header.max_timestamp
    for record_offset, timestamp in record_times(batch, max_record_bytes, max_bytes):
        if record_offset >= offset:
            return timestamp
    return None
