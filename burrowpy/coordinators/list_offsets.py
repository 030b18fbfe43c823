"""The cluster module's ListOffsets (latest offset of every partition a broker leads), encoded and decoded by hand.

At fleet scale one broker's answer lists tens of thousands of partitions. aiokafka decodes it into generic
structs (a tuple per field, per partition) inside its connection's reader, in one stretch on the event loop:
a 50,000-partition answer held the loop for a good part of a second. :class:`LatestOffsetsRequest` goes over
the same aiokafka connection (its ``prepare`` interface, as :mod:`~burrowpy.coordinators.codec_request`'s
requests do) but takes the answer frame as it is: :func:`decode_latest_offsets` reads it one topic at a time
(each partition's fixed-size fields with one ``struct.iter_unpack``), so the caller can give the loop to
others between topics.

Versions 1 to 5 (the ones aiokafka's ``OffsetRequest`` sends, all of them without flexible fields); the
highest that both sides support is used. A broker that knows only version 0 (Kafka before 0.10.1) is asked
through aiokafka's own request (:data:`None` from :func:`latest_offsets_version`).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from burrowpy.coordinators.prepared_request import PreparedRequest

LIST_OFFSETS = 2  # API key
LOWEST, HIGHEST = 1, 5
LATEST = -1  # the timestamp that asks for the log end offset
READ_UNCOMMITTED = 0

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_REQUEST_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id
_PARTITION_V1 = struct.Struct(">iq")  # partition, timestamp
_PARTITION_V4 = struct.Struct(">iiq")  # partition, current leader epoch, timestamp
_ANSWER_V1 = struct.Struct(">ihqq")  # partition, error code, timestamp, offset
_ANSWER_V4 = struct.Struct(">ihqqi")  # partition, error code, timestamp, offset, leader epoch


def latest_offsets_version(versions: dict[int, tuple[int, int]]) -> int | None:
    """The version to ask with, given a broker's ApiVersions; None when it supports none of 1 to 5."""
    theirs = versions.get(LIST_OFFSETS)
    if theirs is None:
        return None
    low, high = max(LOWEST, theirs[0]), min(HIGHEST, theirs[1])
    return high if low <= high else None


def _string(text: str) -> bytes:
    data = text.encode()
    return _INT16.pack(len(data)) + data


def encode_latest_offsets(version: int, correlation_id: int, client_id: str | None,
                          topics: Sequence[tuple[str, Sequence[int]]], timestamp: int = LATEST) -> bytes:
    """A ListOffsets request frame (without its size prefix) asking the latest offset of each partition (or,
    with ``timestamp`` -2, the earliest)."""
    parts = [_REQUEST_HEAD.pack(LIST_OFFSETS, version, correlation_id),
             _INT16.pack(-1) if client_id is None else _string(client_id),
             _INT32.pack(-1)]  # replica id: a consumer's
    if version >= 2:
        parts.append(bytes([READ_UNCOMMITTED]))
    parts.append(_INT32.pack(len(topics)))
    for topic, partitions in topics:
        parts.append(_string(topic))
        parts.append(_INT32.pack(len(partitions)))
        if version >= 4:
            pack = _PARTITION_V4.pack
            parts.extend(pack(partition, -1, timestamp) for partition in partitions)
        else:
            pack = _PARTITION_V1.pack
            parts.extend(pack(partition, timestamp) for partition in partitions)
    return b"".join(parts)


@dataclass(slots=True)
class TopicOffsets:
    """One topic of an answer: the partitions answered without error and their offsets, and the others. Not to
    be changed: with a memo (:func:`decode_latest_offsets`) the same object stands for the next answers that
    say the same; ``same_as_last`` is then True."""

    topic: str
    partitions: list[int]
    offsets: list[int]
    errors: list[tuple[int, int]]  # (partition, error code)
    same_as_last: bool = False  # this topic's part of the answer is byte for byte the last answer's


# What the last answer to a request that held a topic said of it: the topic's bytes, and what they were decoded
# to. (The request asks of the same topics every time: its answers hold the same ones.)
OffsetsMemo = dict[str, tuple[bytes, TopicOffsets]]


def decode_latest_offsets(version: int, frame: bytes, memo: OffsetsMemo | None = None) -> Iterator[TopicOffsets]:
    """The topics of a ListOffsets answer frame (correlation id first), one at a time, in the answer's order.
    Raises ValueError for a frame that does not hold what its counts say.

    With ``memo`` (what the last answer to the same request said of each topic, updated here), a topic whose
    bytes are the ones read last is not decoded again: its :class:`TopicOffsets` is the last one, with
    ``same_as_last`` set. At fleet scale most topics of an answer are those of partitions nobody wrote to."""
    try:
        pos = 4 + (4 if version >= 2 else 0)  # correlation id, throttle time
        (topic_count,) = _INT32.unpack_from(frame, pos)
        pos += 4
        layout = _ANSWER_V4 if version >= 4 else _ANSWER_V1
        size = layout.size
        for _ in range(topic_count):
            (length,) = _INT16.unpack_from(frame, pos)
            pos += 2
            if length < 0 or pos + length > len(frame):
                raise ValueError("topic name beyond the frame")
            topic = frame[pos:pos + length].decode()
            pos += length
            (count,) = _INT32.unpack_from(frame, pos)
            pos += 4
            end = pos + count * size
            if count < 0 or end > len(frame):
                raise ValueError(f"{count} partitions of {topic} beyond the frame")
            body = frame[pos:end]
            if memo is not None:
                last = memo.get(topic)
                if last is not None and last[0] == body:
                    pos = end
                    last[1].same_as_last = True
                    yield last[1]
                    continue
            partitions: list[int] = []
            offsets: list[int] = []
            errors: list[tuple[int, int]] = []
            for fields in layout.iter_unpack(body):
                if fields[1]:
                    errors.append((fields[0], fields[1]))
                else:
                    partitions.append(fields[0])
                    offsets.append(fields[3])
            pos = end
            found = TopicOffsets(topic, partitions, offsets, errors)
            if memo is not None:
                memo[topic] = (body, found)
            yield found
    except struct.error as exc:
        raise ValueError(f"truncated ListOffsets answer: {exc}") from None
    if pos != len(frame):
        raise ValueError(f"{len(frame) - pos} bytes after the ListOffsets answer")


class LatestOffsetsAnswer:
    """The undecoded answer of one broker: :meth:`topics` decodes it (with the memo of the request it answers:
    the topics its last answer said the same of are not decoded again)."""

    __slots__ = ("version", "frame", "memo")

    def __init__(self, version: int, frame: bytes, memo: OffsetsMemo | None = None) -> None:
        self.version = version
        self.frame = frame
        self.memo = memo

    def topics(self) -> Iterator[TopicOffsets]:
        return decode_latest_offsets(self.version, self.frame, self.memo)


class LatestOffsetsRequest:
    """An aiokafka request (``prepare``) for the latest offsets of ``topics`` (name, partitions) at the
    version :func:`latest_offsets_version` picks; its answer is a :class:`LatestOffsetsAnswer`. A broker
    that supports none of versions 1 to 5 is asked with aiokafka's ``OffsetRequest``, whose answer is
    aiokafka's struct (:func:`answered_topics` reads either).

    The same request is sent at every refresh until the partitions change: the body of each version is
    encoded once and kept, and so is what its last answer said of each topic (:data:`OffsetsMemo`): a topic
    whose part of the next answer is byte for byte the same is not decoded again. With ``timestamp`` -2 it
    asks for the earliest offsets instead."""

    def __init__(self, topics: Sequence[tuple[str, Sequence[int]]], timestamp: int = LATEST) -> None:
        self.topics = topics
        self.timestamp = timestamp
        self._bodies: dict[tuple[int, str | None], bytes] = {}
        # what the last answer said of each topic, by version (the answers of one version to decode against)
        self.memos: dict[int, OffsetsMemo] = {}

    def prepare(self, versions: dict[int, tuple[int, int]]) -> Any:
        version = latest_offsets_version(versions)
        if version is None:
            from aiokafka.protocol.offset import OffsetRequest

            return OffsetRequest(-1, 0, [(topic, [(partition, self.timestamp) for partition in partitions])
                                         for topic, partitions in self.topics]).prepare(versions)
        return _Prepared(version, self)

    def frame(self, version: int, correlation_id: int, client_id: str | None) -> bytes:
        """The request frame (without its size prefix): the kept body behind a new header."""
        key = (version, client_id)
        body = self._bodies.get(key)
        if body is None:
            body = self._bodies[key] = encode_latest_offsets(version, 0, client_id, self.topics, self.timestamp)
        # one copy of the body (a slice, then the sum, made two: at fleet scale a megabyte and a half each)
        return b"".join((_REQUEST_HEAD.pack(LIST_OFFSETS, version, correlation_id), memoryview(body)[_REQUEST_HEAD.size:]))


def answered_topics(answer: Any) -> Iterator[TopicOffsets]:
    """The topics of an answer to :class:`LatestOffsetsRequest`: ours, or aiokafka's struct (version 0)."""
    if isinstance(answer, LatestOffsetsAnswer):
        yield from answer.topics()
        return
    for topic, partitions in answer.topics:
        found = TopicOffsets(topic, [], [], [])
        for partition, error_code, *info in partitions:
            if error_code:
                found.errors.append((partition, error_code))
                continue
            offset = (info[0][0] if info[0] else None) if answer.API_VERSION == 0 else info[1]
            if offset is not None:
                found.partitions.append(partition)
                found.offsets.append(offset)
        yield found


class _Prepared(PreparedRequest):
    def __init__(self, version: int, request: LatestOffsetsRequest) -> None:
        super().__init__(LIST_OFFSETS, version)
        self._request = request

    def encode(self) -> bytes:
        return self._request.frame(self.api_version, self._correlation_id, self._client_id)

    def decode(self, _response: io.BytesIO) -> LatestOffsetsAnswer:
        return LatestOffsetsAnswer(self.api_version, self._frame, self._request.memos.setdefault(self.api_version, {}))
