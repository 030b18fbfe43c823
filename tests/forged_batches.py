"""Record batches that lie, for the tests of the produce validator: headers that say something else than
their records, and decompression bombs."""

from __future__ import annotations

import struct

import zstandard

from broker.protocol.records import CRC_OFFSET, HEADER, HEADER_SIZE, LOG_OVERHEAD, crc_of

_HEADER_FIELDS = ["base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
                  "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                  "base_sequence", "records_count"]


def relabel(batch: bytes, body: bytes | None = None, **fields: int) -> bytes:
    """The batch with header fields (and perhaps its record bytes) replaced, and a CRC that fits them."""
    values = dict(zip(_HEADER_FIELDS, HEADER.unpack_from(batch), strict=True))
    values.update(fields)
    body = batch[HEADER_SIZE:] if body is None else body
    values["batch_length"] = HEADER_SIZE - LOG_OVERHEAD + len(body)
    out = bytearray(HEADER.pack(*(values[name] for name in _HEADER_FIELDS)) + body)
    struct.pack_into(">I", out, CRC_OFFSET, crc_of(out, 0, len(out)))
    return bytes(out)


def zstd_of(head: bytes, zeros: int) -> bytes:
    """``head`` then ``zeros`` zero bytes (whole MiBs), zstd-compressed: tens of KB for a GiB."""
    compressor = zstandard.ZstdCompressor(level=1).compressobj()
    block = bytes(1 << 20)
    parts = [compressor.compress(head)] + [compressor.compress(block) for _ in range(zeros >> 20)]
    return b"".join(parts) + compressor.flush()


def varint(value: int) -> bytes:
    """The zigzag varint of a record field."""
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
