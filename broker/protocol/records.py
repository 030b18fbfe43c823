"""Kafka record batches: the v2 batch header on the hot path, full encode/decode everywhere else.

The broker never decodes records to append or serve them (DESIGN principle 2). A produced batch is
checked with :func:`validate_batch` (header fields and CRC-32C), gets its offsets and leader epoch with
:func:`patch_batch`, and is appended as bytes. :class:`BatchHeader` and :func:`iter_batches` read only
the fixed 61-byte header.

Decoding (:func:`decode_batch`, :func:`decode_records_any`) and encoding (:func:`build_batch`) are for
the group coordinator, the monitor's consumer, compaction, timestamp lookups and tests. They handle every
codec Kafka has used: gzip, snappy (raw, and Java's xerial framing on read), LZ4 frames (with the broken
header checksum of magic-0 messages repaired) and zstd, plus the legacy MessageSet v0/v1 format written
by old producers.

Byte layouts are in kafka-protocol.md section 4; the v2 header, all integers big-endian::

    0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8 | 17 crc u32
    21 attributes i16 | 23 lastOffsetDelta i32 | 27 baseTimestamp i64 | 35 maxTimestamp i64
    43 producerId i64 | 51 producerEpoch i16 | 53 baseSequence i32 | 57 recordsCount i32 | 61 records

The CRC-32C covers bytes 21 to the end, so offsets and the leader epoch can be patched without it.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import cramjam
import lz4.frame
import xxhash
import zstandard
from crc32c import crc32c

from broker.errors import ErrorCode, KafkaError

Buffer = bytes | bytearray | memoryview

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
# Bytes before batchLength's count starts: baseOffset and batchLength themselves.
LOG_OVERHEAD = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1

ATTR_COMPRESSION_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_LEGACY_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic (8), version (4), compatible version (4)


class BatchHeader(NamedTuple):
    """The fixed header of a v2 record batch (magic 2)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, buf: Buffer, pos: int = 0) -> BatchHeader:
        """Read the header at ``pos``; the caller has checked that 61 bytes are there."""
        return cls._make(HEADER.unpack_from(buf, pos))

    @property
    def size(self) -> int:
        """Bytes of the whole batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return TIMESTAMP_LOG_APPEND_TIME if self.attributes & ATTR_LOG_APPEND_TIME else TIMESTAMP_CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def delete_horizon_ms(self) -> int | None:
        """Set by compaction on batches holding tombstones (KIP-534); stored in baseTimestamp."""
        return self.base_timestamp if self.attributes & ATTR_DELETE_HORIZON else None

    @property
    def last_sequence(self) -> int:
        """Sequence number of the last record; sequences wrap from INT32_MAX to 0 as in Kafka."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def increment_sequence(sequence: int, increment: int) -> int:
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def crc_of(buf: Buffer, pos: int, size: int) -> int:
    """CRC-32C of a batch's checksummed part (attributes to the end)."""
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def iter_batches(buf: Buffer, start: int = 0) -> Generator[tuple[int, BatchHeader], None, int]:
    """Yield ``(position, header)`` of each whole v2 batch in ``buf``; stop quietly at a truncated tail.

    A fetch response may end with a partial batch, so a short tail is not an error. The generator's
    return value (``StopIteration.value``, or :func:`whole_batches_length`) is where it stopped. A batch
    that is not magic 2 or whose length is impossible raises KafkaError: nothing after it can be trusted.
    """
    pos = start
    end = len(buf)
    unpack = HEADER.unpack_from
    make = BatchHeader._make
    while end - pos >= HEADER_SIZE:
        header = make(unpack(buf, pos))
        if header.magic != 2:
            _raise_bad_magic(header.magic)
        size = header.batch_length + LOG_OVERHEAD
        if size < HEADER_SIZE:
            raise KafkaError(
                ErrorCode.CORRUPT_MESSAGE, f"record batch length {header.batch_length} is too small"
            )
        if pos + size > end:
            break
        yield pos, header
        pos += size
    return pos


def whole_batches_length(buf: Buffer, start: int = 0) -> int:
    """Where the last whole batch of ``buf`` ends (``start`` if there is none)."""
    batches = iter_batches(buf, start)
    while True:
        try:
            next(batches)
        except StopIteration as stop:
            end: int = stop.value  # iter_batches returns where its last whole batch ends
            return end


def _raise_bad_magic(magic: int) -> None:
    if magic in (0, 1):
        raise KafkaError(
            ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
            f"message format v{magic} is not accepted; this broker stores record batches v2 only",
        )
    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"invalid magic byte {magic}")


def validate_batch(buf: Buffer, *, from_coordinator: bool = False) -> BatchHeader:
    """Check a producer's batch the way Kafka's in-place path does, without decoding its records.

    ``buf`` must hold exactly one batch (Produce v3+). Raises KafkaError CORRUPT_MESSAGE for truncation,
    bad magic or a bad CRC; INVALID_RECORD for more than one batch, inconsistent offsets and counts,
    control batches and idempotent batches without a sequence; UNSUPPORTED_FOR_MESSAGE_FORMAT for
    magic 0/1; UNSUPPORTED_COMPRESSION_TYPE for an unknown codec; INVALID_TIMESTAMP when a client set
    the LogAppendTime flag itself. ``from_coordinator``: a batch the broker's own coordinators write
    (transaction markers, transactional offset commits), which may be a control batch and has no sequence.
    """
    length = len(buf)
    if length == 0:
        raise KafkaError(ErrorCode.INVALID_RECORD, "produce request holds no record batch")
    if length <= MAGIC_OFFSET:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{length} bytes are too short for a record batch")
    magic = buf[MAGIC_OFFSET]
    if magic != 2:
        _raise_bad_magic(magic if magic < 128 else magic - 256)
    if length < HEADER_SIZE:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{length} bytes are too short for a v2 batch header")
    header = BatchHeader.parse(buf)
    size = header.batch_length + LOG_OVERHEAD
    if size < HEADER_SIZE:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"record batch length {header.batch_length} is too small")
    if size > length:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"record batch of {size} bytes truncated to {length}")
    if size < length:
        raise KafkaError(ErrorCode.INVALID_RECORD, "produce request must hold exactly one record batch")
    if crc_of(buf, 0, size) != header.crc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record batch CRC-32C mismatch")
    if header.compression > COMPRESSION_ZSTD:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec {header.compression}"
        )
    count_from_offsets = header.last_offset_delta + 1
    if count_from_offsets <= 0:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"invalid last offset delta {header.last_offset_delta}")
    if header.records_count <= 0:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"invalid record count {header.records_count}")
    if header.records_count != count_from_offsets:
        raise KafkaError(
            ErrorCode.INVALID_RECORD,
            f"last offset delta {header.last_offset_delta} disagrees with record count {header.records_count}",
        )
    if header.attributes & ATTR_CONTROL and not from_coordinator:
        raise KafkaError(ErrorCode.INVALID_RECORD, "clients may not write control batches")
    if header.producer_id >= 0 and header.base_sequence < 0 and not from_coordinator:
        raise KafkaError(
            ErrorCode.INVALID_RECORD,
            f"invalid sequence {header.base_sequence} for producer id {header.producer_id}",
        )
    if header.attributes & ATTR_LOG_APPEND_TIME:
        raise KafkaError(
            ErrorCode.INVALID_TIMESTAMP, "producers may not set the LogAppendTime timestamp type"
        )
    return header


def patched_header(
    batch: Buffer,
    base_offset: int,
    leader_epoch: int,
    *,
    log_append_time_ms: int | None = None,
    max_timestamp: int | None = None,
) -> bytearray:
    """A copy of the batch's 61-byte header with its offsets and leader epoch assigned.

    ``header + batch[61:]`` is the patched batch, so the records need not be copied. Bytes 0-20 are
    outside the CRC. With ``log_append_time_ms`` the batch becomes LogAppendTime: attribute bit 3 and
    maxTimestamp are set. ``max_timestamp`` replaces a maxTimestamp that is not the records' own. The
    CRC is recomputed only when either changes a byte, since both lie inside it.
    """
    view = memoryview(batch)
    header = bytearray(view[:HEADER_SIZE])
    _INT64.pack_into(header, 0, base_offset)
    _INT32.pack_into(header, 12, leader_epoch)
    if log_append_time_ms is not None:
        attributes = _INT16.unpack_from(header, ATTRIBUTES_OFFSET)[0]
        _INT16.pack_into(header, ATTRIBUTES_OFFSET, attributes | ATTR_LOG_APPEND_TIME)
        max_timestamp = log_append_time_ms
    if max_timestamp is not None and (
            log_append_time_ms is not None or _INT64.unpack_from(header, MAX_TIMESTAMP_OFFSET)[0] != max_timestamp):
        _INT64.pack_into(header, MAX_TIMESTAMP_OFFSET, max_timestamp)
        size = _INT32.unpack_from(header, 8)[0] + LOG_OVERHEAD
        crc = crc32c(view[HEADER_SIZE:size], crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
        _UINT32.pack_into(header, CRC_OFFSET, crc)
    return header


def patch_batch(
    buf: bytearray,
    pos: int,
    base_offset: int,
    leader_epoch: int,
    *,
    log_append_time_ms: int | None = None,
) -> None:
    """:func:`patched_header` applied in place to the batch at ``pos`` of ``buf``."""
    buf[pos : pos + HEADER_SIZE] = patched_header(
        memoryview(buf)[pos:], base_offset, leader_epoch, log_append_time_ms=log_append_time_ms
    )


# --------------------------------------------------------------------------------------------------
# Records: varints, encode, decode


@dataclass(slots=True)
class Record:
    """One record with its absolute offset; ``headers`` keys are text, values raw bytes or None."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def _write_varint(out: bytearray, value: int) -> None:
    """Zigzag-encode a signed 64-bit value as a protobuf varint."""
    value = (value << 1) ^ (value >> 63)
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read a zigzag varint at ``pos``; return (value, next position)."""
    byte = buf[pos]
    pos += 1
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos
    result = byte & 0x7F
    shift = 7
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "varint longer than 10 bytes")


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(1)  # zigzag(-1)
    else:
        _write_varint(out, len(data))
        out += data


def _encode_record(out: bytearray, record: Record, offset_delta: int, base_timestamp: int) -> None:
    body = bytearray(b"\x00")  # record attributes: unused
    _write_varint(body, record.timestamp - base_timestamp)
    _write_varint(body, offset_delta)
    _write_bytes(body, record.key)
    _write_bytes(body, record.value)
    _write_varint(body, len(record.headers))
    for name, value in record.headers:
        _write_bytes(body, name.encode())
        _write_bytes(body, value)
    _write_varint(out, len(body))
    out += body


def _decode_records(
    data: Buffer, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> list[Record]:
    records: list[Record] = []
    pos = 0
    end = len(data)
    read = _read_varint
    for _ in range(count):
        length, pos = read(data, pos)
        record_end = pos + length
        if length < 0 or record_end > end:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record extends past the end of its batch")
        pos += 1  # attributes
        timestamp_delta, pos = read(data, pos)
        offset_delta, pos = read(data, pos)
        key_length, pos = read(data, pos)
        key = None
        if key_length >= 0:
            key = bytes(data[pos : pos + key_length])
            pos += key_length
        value_length, pos = read(data, pos)
        value = None
        if value_length >= 0:
            value = bytes(data[pos : pos + value_length])
            pos += value_length
        header_count, pos = read(data, pos)
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(header_count):
            name_length, pos = read(data, pos)
            if name_length < 0:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record header with a null key")
            name = bytes(data[pos : pos + name_length]).decode()
            pos += name_length
            header_value_length, pos = read(data, pos)
            header_value = None
            if header_value_length >= 0:
                header_value = bytes(data[pos : pos + header_value_length])
                pos += header_value_length
            headers.append((name, header_value))
        if pos != record_end:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record length disagrees with its fields")
        timestamp = log_append_time if log_append_time is not None else base_timestamp + timestamp_delta
        records.append(Record(base_offset + offset_delta, timestamp, key, value, headers))
    return records


# --------------------------------------------------------------------------------------------------
# Codecs


# Kafka's default levels (KIP-390): gzip's -1 is zlib's default, 6.
DEFAULT_LEVELS = {COMPRESSION_GZIP: 6, COMPRESSION_LZ4: 9, COMPRESSION_ZSTD: 3}


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """Compress a record sequence the way Kafka clients do (snappy written raw, LZ4 as a frame), at
    ``level`` (Kafka's compression.<codec>.level; None or gzip's -1 for the codec's default)."""
    if codec == COMPRESSION_NONE:
        return data
    if level is None or (codec == COMPRESSION_GZIP and level == -1):
        # snappy, the one codec without levels, takes none of the level below
        level = DEFAULT_LEVELS.get(codec, 0)
    if codec == COMPRESSION_GZIP:
        compressor = zlib.compressobj(level, zlib.DEFLATED, 31)
        return compressor.compress(data) + compressor.flush()
    if codec == COMPRESSION_SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == COMPRESSION_LZ4:
        # Independent 64 KiB blocks: what Kafka's Java LZ4 stream writes and reads.
        lz4_frame: bytes = lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                                              compression_level=level)
        return lz4_frame
    if codec == COMPRESSION_ZSTD:
        zstd_frame: bytes = zstandard.ZstdCompressor(level=level).compress(data)
        return zstd_frame
    raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec {codec}")


def decompress(codec: int, data: Buffer) -> bytes:
    """Inverse of :func:`compress`; also reads xerial-framed snappy and concatenated gzip members."""
    try:
        if codec == COMPRESSION_GZIP:
            return gzip.decompress(data)
        if codec == COMPRESSION_SNAPPY:
            return _snappy_decode(bytes(data))
        if codec == COMPRESSION_LZ4:
            lz4_data: bytes = lz4.frame.decompress(bytes(data))
            return lz4_data
        if codec == COMPRESSION_ZSTD:
            # Kafka's zstd frames need not declare their content size, so stream-decode.
            return zstandard.ZstdDecompressor().decompressobj().decompress(bytes(data))
    except KafkaError:
        raise
    except Exception as exc:
        codec_name = COMPRESSION_NAMES.get(codec, str(codec))
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"cannot decompress {codec_name} data: {exc}") from exc
    if codec == COMPRESSION_NONE:
        return bytes(data)
    raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec {codec}")


def _snappy_decode(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    # Java's snappy-java stream: a 16-byte header, then blocks of [int32 length][raw snappy block].
    out = bytearray()
    pos = _XERIAL_HEADER_SIZE
    while pos < len(data):
        if pos + 4 > len(data):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "truncated xerial snappy block length")
        block_length = _INT32.unpack_from(data, pos)[0]
        pos += 4
        if block_length < 0 or pos + block_length > len(data):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "truncated xerial snappy block")
        out += cramjam.snappy.decompress_raw(data[pos : pos + block_length])
        pos += block_length
    return bytes(out)


def _repair_legacy_lz4_header(frame: bytes) -> bytes:
    """Magic-0 Kafka messages hashed the LZ4 frame descriptor from the magic number on; recompute it."""
    if len(frame) < 7:
        return frame
    flags = frame[4]
    descriptor_end = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    if len(frame) <= descriptor_end:
        return frame
    checksum = (xxhash.xxh32(frame[4:descriptor_end]).intdigest() >> 8) & 0xFF
    return frame[:descriptor_end] + bytes([checksum]) + frame[descriptor_end + 1 :]


# --------------------------------------------------------------------------------------------------
# Whole batches


def build_batch(
    records: Iterable[Record],
    *,
    base_offset: int = 0,
    compression: int = COMPRESSION_NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    timestamp_type: int = TIMESTAMP_CREATE_TIME,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    last_offset_delta: int | None = None,
    max_timestamp: int | None = None,
    delete_horizon_ms: int | None = None,
    level: int | None = None,
) -> bytes:
    """Encode ``records`` (absolute offsets, ascending, all >= ``base_offset``) as one v2 batch.

    ``last_offset_delta`` overrides the delta of the last record (compaction keeps a batch's original
    offset range so producer sequence numbers stay right). ``max_timestamp`` overrides the computed
    maximum (LogAppendTime batches carry the append time there; empty batches need one).
    ``delete_horizon_ms`` marks a compacted batch holding tombstones: Kafka stores the horizon in
    baseTimestamp and sets attribute bit 6. ``level`` is the compression level (see :func:`compress`).
    """
    records = list(records)
    if records and records[0].offset < base_offset:
        raise ValueError(f"record offset {records[0].offset} is below the batch's base offset {base_offset}")
    if records:
        base_timestamp = records[0].timestamp
        computed_max = max(record.timestamp for record in records)
        computed_last_delta = records[-1].offset - base_offset
    else:
        base_timestamp = computed_max = NO_TIMESTAMP
        computed_last_delta = 0
    if max_timestamp is None:
        max_timestamp = computed_max
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    elif not records:
        base_timestamp = max_timestamp
    payload = bytearray()
    for record in records:
        _encode_record(payload, record, record.offset - base_offset, base_timestamp)
    body = compress(compression, bytes(payload), level)
    attributes = compression
    if timestamp_type == TIMESTAMP_LOG_APPEND_TIME:
        attributes |= ATTR_LOG_APPEND_TIME
    if is_transactional:
        attributes |= ATTR_TRANSACTIONAL
    if is_control:
        attributes |= ATTR_CONTROL
    if delete_horizon_ms is not None:
        attributes |= ATTR_DELETE_HORIZON
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        out,
        0,
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(body),
        partition_leader_epoch,
        2,
        0,
        attributes,
        computed_last_delta if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    out += body
    _UINT32.pack_into(out, CRC_OFFSET, crc_of(out, 0, len(out)))
    return bytes(out)


# Control records (transaction markers): key = version (int16, 0) + type; value = version (int16, 0) +
# coordinator epoch (int32).
CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


def build_marker_batch(producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                       timestamp_ms: int) -> bytes:
    """A COMMIT or ABORT marker for one producer's transaction, as the transaction coordinator writes it."""
    record = Record(offset=0, timestamp=timestamp_ms,
                    key=_CONTROL_KEY.pack(0, CONTROL_COMMIT if committed else CONTROL_ABORT),
                    value=_CONTROL_VALUE.pack(0, coordinator_epoch))
    return build_batch([record], producer_id=producer_id, producer_epoch=producer_epoch,
                       is_transactional=True, is_control=True)


class Marker(NamedTuple):
    committed: bool
    coordinator_epoch: int  # of the transaction coordinator that wrote it; -1 when the value does not say


def read_marker(batch: Buffer) -> Marker | None:
    """A COMMIT or ABORT marker batch's outcome and writer; None for any other control record."""
    _, records = decode_batch(batch, verify_crc=False)
    if not records or records[0].key is None or len(records[0].key) < _CONTROL_KEY.size:
        return None
    version, kind = _CONTROL_KEY.unpack_from(records[0].key)
    if version != 0 or kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        return None
    value = records[0].value
    epoch = _CONTROL_VALUE.unpack_from(value)[1] if value is not None and len(value) >= _CONTROL_VALUE.size else -1
    return Marker(kind == CONTROL_COMMIT, epoch)


def marker_committed(batch: Buffer) -> bool | None:
    """True for a COMMIT marker batch, False for ABORT, None for any other control record."""
    marker = read_marker(batch)
    return None if marker is None else marker.committed


def decode_batch(buf: Buffer, *, verify_crc: bool = True) -> tuple[BatchHeader, list[Record]]:
    """Decode the v2 batch at the start of ``buf`` (trailing bytes are ignored)."""
    if len(buf) < HEADER_SIZE:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "buffer too short for a record batch header")
    header = BatchHeader.parse(buf)
    if header.magic != 2:
        _raise_bad_magic(header.magic)
    size = header.size
    if size < HEADER_SIZE or size > len(buf):
        raise KafkaError(
            ErrorCode.CORRUPT_MESSAGE, f"record batch of {size} bytes in a {len(buf)}-byte buffer"
        )
    if verify_crc and crc_of(buf, 0, size) != header.crc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record batch CRC-32C mismatch")
    payload: memoryview | bytes = memoryview(buf)[HEADER_SIZE:size]
    if header.compression != COMPRESSION_NONE:
        payload = decompress(header.compression, payload)
    log_append_time = header.max_timestamp if header.attributes & ATTR_LOG_APPEND_TIME else None
    try:
        records = _decode_records(
            payload, header.records_count, header.base_offset, header.base_timestamp, log_append_time
        )
    except (IndexError, UnicodeDecodeError) as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"malformed record: {exc}") from exc
    return header, records


def decode_records_any(buf: Buffer, *, verify_crc: bool = True) -> list[Record]:
    """Decode every record in a fetched record set of any magic (0, 1 or 2); skip control batches.

    For tools reading topics that old producers wrote: MessageSet v0/v1 (CRC-32 IEEE, compressed
    wrapper messages with relative inner offsets in v1) and record batches v2 may even be mixed. A
    truncated tail, as a fetch response may have, is ignored.
    """
    records: list[Record] = []
    pos = 0
    end = len(buf)
    while end - pos > MAGIC_OFFSET:
        size = _INT32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD
        if pos + size > end:
            break
        magic = buf[pos + MAGIC_OFFSET]
        if magic == 2:
            header, batch_records = decode_batch(memoryview(buf)[pos : pos + size], verify_crc=verify_crc)
            if not header.is_control:
                records.extend(batch_records)
        elif magic in (0, 1):
            records.extend(_decode_legacy_entry(memoryview(buf)[pos : pos + size], verify_crc))
        else:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"invalid magic byte {magic}")
        pos += size
    return records


def _decode_legacy_entry(entry: memoryview, verify_crc: bool) -> list[Record]:
    """One MessageSet entry: a plain message, or a compressed wrapper holding an inner message set."""
    offset, magic, attributes, timestamp, key, value = _parse_legacy_message(entry, verify_crc)
    codec = attributes & ATTR_COMPRESSION_MASK
    if codec == COMPRESSION_NONE:
        return [Record(offset, timestamp, key, value, [])]
    if value is None:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "compressed wrapper message without a value")
    compressed = value
    if codec == COMPRESSION_LZ4 and magic == 0:
        compressed = _repair_legacy_lz4_header(compressed)
    inner = memoryview(decompress(codec, compressed))
    inner_messages = []
    pos = 0
    while len(inner) - pos > MAGIC_OFFSET:
        size = _INT32.unpack_from(inner, pos + 8)[0] + LOG_OVERHEAD
        if pos + size > len(inner):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "truncated message inside a compressed wrapper")
        inner_messages.append(_parse_legacy_message(inner[pos : pos + size], verify_crc))
        pos += size
    if not inner_messages:
        return []
    log_append_time = magic == 1 and bool(attributes & ATTR_LOG_APPEND_TIME)
    # v1 inner offsets are relative and the wrapper carries the absolute offset of the last one;
    # v0 inner offsets are absolute already.
    offset_shift = offset - inner_messages[-1][0] if magic == 1 else 0
    return [
        Record(
            inner_offset + offset_shift,
            timestamp if log_append_time else inner_timestamp,
            inner_key,
            inner_value,
            [],
        )
        for inner_offset, _, _, inner_timestamp, inner_key, inner_value in inner_messages
    ]


def _parse_legacy_message(
    entry: memoryview, verify_crc: bool
) -> tuple[int, int, int, int, bytes | None, bytes | None]:
    """Return (offset, magic, attributes, timestamp, key, value) of one v0/v1 message."""
    if len(entry) < 26:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "legacy message shorter than its fixed fields")
    offset, _, crc, magic, attributes = _LEGACY_PREFIX.unpack_from(entry, 0)
    if magic not in (0, 1):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"invalid magic byte {magic} in a message set")
    if verify_crc and zlib.crc32(entry[MAGIC_OFFSET:]) != crc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "legacy message CRC-32 mismatch")
    pos = 18
    timestamp = NO_TIMESTAMP
    if magic == 1:
        if len(entry) < 34:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "v1 message shorter than its fixed fields")
        timestamp = _INT64.unpack_from(entry, pos)[0]
        pos += 8
    key, pos = _read_legacy_bytes(entry, pos)
    value, pos = _read_legacy_bytes(entry, pos)
    return offset, magic, attributes, timestamp, key, value


def _read_legacy_bytes(entry: memoryview, pos: int) -> tuple[bytes | None, int]:
    if pos + 4 > len(entry):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "legacy message truncated")
    length = _INT32.unpack_from(entry, pos)[0]
    pos += 4
    if length < 0:
        return None, pos
    if pos + length > len(entry):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "legacy message field extends past its message")
    return bytes(entry[pos : pos + length]), pos + length


def recompress(batch: Buffer, codec: int, level: int | None = None) -> bytes:
    """The batch with its records compressed with ``codec`` instead (a topic's compression.type): offsets,
    timestamps, producer fields and attributes other than the codec stay as they were."""
    header, records = decode_batch(batch, verify_crc=False)
    attributes = header.attributes
    rebuilt = build_batch(
        records, base_offset=header.base_offset, compression=codec, producer_id=header.producer_id,
        producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
        timestamp_type=TIMESTAMP_LOG_APPEND_TIME if attributes & ATTR_LOG_APPEND_TIME else TIMESTAMP_CREATE_TIME,
        partition_leader_epoch=header.partition_leader_epoch, is_transactional=bool(attributes & ATTR_TRANSACTIONAL),
        is_control=bool(attributes & ATTR_CONTROL), last_offset_delta=header.last_offset_delta,
        max_timestamp=header.max_timestamp, level=level,
        delete_horizon_ms=header.base_timestamp if attributes & ATTR_DELETE_HORIZON else None)
    return rebuilt
