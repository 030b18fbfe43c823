"""Requests in our own codec's schemas, sent over aiokafka's connections.

aiokafka knows a fixed set of API versions (Metadata up to v5, for instance, which has no topic ids).
:class:`CodecRequest` lets the monitor's modules ask anything the broker's schema codec can encode, at the
highest version both sides support, through the aiokafka client they already hold: its connections carry
the TLS and SASL settings of the module's client profile, and its version negotiation is reused. The answer
is our codec's decoded dict.

    answer = await client.send(node_id, CodecRequest(ApiKey.METADATA, body, min_version=10))

A large answer (the Metadata or DescribeLogDirs of tens of thousands of partitions) takes the codec a good part
of a second to decode, which aiokafka's connection would do on the event loop as the frame arrives. With
``decode_later`` the answer is a :class:`LaterAnswer` holding the frame, which the caller decodes, in a thread
if it likes (``await asyncio.to_thread(answer.decode)``): the loop then waits at most a switch interval of the
interpreter (5 ms) whenever it has work, instead of the whole decode.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import random
import struct
from typing import Any

from broker.protocol.api import SCHEMA_VERSIONS, ApiKey, decode_response, encode_request
from broker.protocol.types import (
    DecodeError,
    read_array_length,
    read_compact_array_length,
    read_uvarint,
    skip_tagged_fields,
)
from burrowpy.coordinators.prepared_request import PreparedRequest, ResponseHeader


class NoCommonVersion(Exception):
    """The broker and our codec share no version of the API at or above the one asked for."""


class CodecRequest:
    """An aiokafka request (its ``prepare`` interface) built from our codec's schemas."""

    def __init__(self, api_key: int, body: dict[str, Any], *, min_version: int = 0, max_version: int | None = None,
                 decode_later: bool = False) -> None:
        self.api_key = api_key
        self.body = body
        self.min_version = min_version
        self.max_version = max_version  # None: the highest both sides know
        self.decode_later = decode_later

    def prepare(self, versions: dict[int, tuple[int, int]]) -> _PreparedRequest:
        ours = SCHEMA_VERSIONS[self.api_key]
        theirs = versions.get(self.api_key)
        low = max(ours[0], self.min_version, theirs[0] if theirs else 0)
        high = min(ours[1], theirs[1], ours[1] if self.max_version is None else self.max_version) if theirs else -1
        if high < low:
            raise NoCommonVersion(f"API {self.api_key}: the broker supports {theirs}, we need {low}-{ours[1]}")
        return _PreparedRequest(self.api_key, high, self.body, self.decode_later)


class LaterAnswer:
    """The frame of an answer, decoded when asked (:meth:`decode`: our codec's dict)."""

    __slots__ = ("api_key", "api_version", "frame")

    def __init__(self, api_key: int, api_version: int, frame: bytes) -> None:
        self.api_key, self.api_version, self.frame = api_key, api_version, frame

    def decode(self) -> dict[str, Any]:
        return decode_response(self.api_key, self.api_version, self.frame)[1]

    def digest(self) -> bytes:
        """:func:`answer_digest` of this answer: equal digests, equal decoded answers."""
        return answer_digest(self.api_key, self.api_version, self.frame)


def answer_digest(api_key: int, api_version: int, frame: bytes) -> bytes:
    """A digest (BLAKE2b, 32 bytes) of an answer's API, version and frame but its correlation id (the first field
    of every response header): two answers with the same digest decode to the same value. At fleet scale an
    unchanged cluster answers Metadata or DescribeLogDirs with the same megabyte or two each time; a reader that
    keeps what it made of the last answer and its digest makes it again only when the digest differs, and keeps
    32 bytes rather than the frame. About 1 ms per megabyte."""
    return _digest_of(api_key, api_version, memoryview(frame)[4:])


def _digest_of(api_key: int, api_version: int, *parts: memoryview) -> bytes:
    hasher = hashlib.blake2b(digest_size=32)
    hasher.update(api_key.to_bytes(2, "big") + api_version.to_bytes(2, "big"))
    for part in parts:
        hasher.update(part)
    return hasher.digest()


_INT16 = struct.Struct(">h")
METADATA_FLEXIBLE = 9  # the first Metadata version with compact fields and tagged fields (response header v1)


def _controller_id_at(api_version: int, frame: bytes) -> int | None:
    """Where a Metadata answer's controller id lies in its frame (correlation id first): after the header, the
    throttle time (version 3 on), the brokers (id, host, port, rack) and the cluster id (version 2 on). None
    before version 1, which has no controller id. Raises IndexError, struct.error or DecodeError for a
    frame shorter than its fields say."""
    if api_version < 1:
        return None
    flexible = api_version >= METADATA_FLEXIBLE

    def string(pos: int) -> int:  # nullable or not: a null's length (-1, or 0 compact) skips nothing
        if flexible:
            length, pos = read_uvarint(frame, pos)
            return pos + max(length - 1, 0)
        (length,) = _INT16.unpack_from(frame, pos)
        return pos + 2 + max(length, 0)

    pos = 4
    if flexible:
        pos = skip_tagged_fields(frame, pos)
    if api_version >= 3:
        pos += 4  # throttle time
    count, pos = (read_compact_array_length if flexible else read_array_length)(frame, pos)
    for _ in range(max(count, 0)):
        pos = string(pos + 4) + 4  # node id, host, port
        pos = string(pos)  # rack
        if flexible:
            pos = skip_tagged_fields(frame, pos)
    if api_version >= 2:
        pos = string(pos)  # cluster id
    if pos + 4 > len(frame):
        raise IndexError("Metadata answer shorter than its brokers")
    return pos


def metadata_digest(api_version: int, frame: bytes) -> bytes:
    """:func:`answer_digest` of a Metadata answer but its controller id: two answers with the same digest decode to
    the same value but, perhaps, that id, which no reader here uses. A KRaft cluster's brokers cannot name the
    controller to clients (those do not reach the controllers), and name a live broker chosen at random instead:
    a cluster of several brokers at rest answered a different one from one reading to the next (Kafka 4.4, four
    nodes), which made every reading's megabytes look new, to be decoded and gone through again. A frame this
    cannot read is digested whole."""
    try:
        at = _controller_id_at(api_version, frame)
    except (IndexError, struct.error, DecodeError):
        at = None
    view = memoryview(frame)
    if at is None:
        return _digest_of(ApiKey.METADATA, api_version, view[4:])
    return _digest_of(ApiKey.METADATA, api_version, view[4:at], view[at + 4:])


class _PreparedRequest(PreparedRequest):
    """One request at one version: aiokafka encodes it, then hands the answer frame back for decoding."""

    def __init__(self, api_key: int, version: int, body: dict[str, Any], decode_later: bool) -> None:
        super().__init__(api_key, version)
        self.body = body
        self.decode_later = decode_later
        self._answer: dict[str, Any] | None = None

    def encode(self) -> bytes:
        frame = encode_request(self.api_key, self.api_version, self._correlation_id, self._client_id, self.body)
        return frame[4:]  # aiokafka writes the size prefix itself

    def parse_response_header(self, response: io.BytesIO) -> ResponseHeader:
        if self.decode_later:
            return super().parse_response_header(response)
        correlation_id, self._answer = decode_response(self.api_key, self.api_version, response.getvalue())
        return ResponseHeader(correlation_id)

    def decode(self, _response: io.BytesIO) -> dict[str, Any] | LaterAnswer:
        if self.decode_later:
            return LaterAnswer(self.api_key, self.api_version, self._frame)
        assert self._answer is not None, "the response header is parsed first"
        return self._answer


REQUEST_TIMEOUT_S = 10.0  # a broker that does not answer (paused, partitioned) costs a reading this much


async def send_undecoded(client: Any, node: int, request: CodecRequest,
                         timeout_s: float = REQUEST_TIMEOUT_S) -> LaterAnswer:
    """Send ``request`` to ``node``; its answer's frame, not decoded (for :func:`answer_digest`, or to decode in a
    thread)."""
    request.decode_later = True
    async with asyncio.timeout(timeout_s):
        answer: LaterAnswer = await client.send(node, request)
    return answer


async def send_decoded(client: Any, node: int, request: CodecRequest,
                       timeout_s: float = REQUEST_TIMEOUT_S) -> dict[str, Any]:
    """Send ``request`` to ``node`` and decode the answer in a thread: at fleet scale a Metadata or DescribeLogDirs
    answer takes the codec a good part of a second, which would hold the event loop."""
    answer = await send_undecoded(client, node, request, timeout_s)
    decoded: dict[str, Any] = await asyncio.to_thread(answer.decode)
    return decoded


async def every_topic_metadata(client: Any, timeout_s: float = REQUEST_TIMEOUT_S) -> dict[str, Any]:
    """Metadata of every topic (and the live brokers) from the first of the client's known brokers that answers,
    decoded off the event loop."""
    return await _metadata(client, None, timeout_s)


async def topics_metadata(client: Any, topics: list[str], timeout_s: float = REQUEST_TIMEOUT_S) -> dict[str, Any]:
    """Metadata of ``topics`` (and the live brokers), never creating one that does not exist, as
    :func:`every_topic_metadata`."""
    return await _metadata(client, [{"name": topic} for topic in topics], timeout_s)


async def _metadata(client: Any, topics: list[dict[str, Any]] | None, timeout_s: float) -> dict[str, Any]:
    answer = await _metadata_answer(client, topics, timeout_s)
    decoded: dict[str, Any] = await asyncio.to_thread(answer.decode)
    return decoded


async def _metadata_answer(client: Any, topics: list[dict[str, Any]] | None, timeout_s: float) -> LaterAnswer:
    """The undecoded Metadata answer of the first of the client's known brokers that answers."""
    nodes = [broker.nodeId for broker in client.cluster.brokers()]
    random.shuffle(nodes)
    failure: BaseException | None = None
    for node in nodes:
        try:
            return await send_undecoded(client, node, CodecRequest(ApiKey.METADATA, {
                "topics": topics, "allow_auto_topic_creation": False}, min_version=1), timeout_s)
        except Exception as exc:
            failure = exc
    raise RuntimeError(f"no broker answered Metadata: {failure!r}")


# How often follow_brokers has the aiokafka client refresh its brokers, and the pause between two refreshes.
FOLLOW_ATTEMPTS = 4
FOLLOW_PAUSE_S = 0.1


async def follow_brokers(client: Any, brokers: list[dict[str, Any]], attempts: int = FOLLOW_ATTEMPTS,
                         pause_s: float = FOLLOW_PAUSE_S) -> bool:
    """When a Metadata answer's ``brokers`` are not those the aiokafka client knows (by id, host and port), have it
    refresh them, since it connects by them; whether they differed.

    aiokafka asks a broker of its choosing, whose view may not hold yet a broker another one already lists (in a
    cluster each broker applies the metadata log at its own pace): a request to a broker the client does not know
    fails at once. So the refresh is asked again, ``attempts`` times at most, until the client knows every broker
    read here."""
    read = {(broker["node_id"], broker["host"], broker["port"]) for broker in brokers}

    def known() -> set[tuple[int, str, int]]:
        return {(broker.nodeId, broker.host, broker.port) for broker in client.cluster.brokers()}

    if read == known():
        return False
    for attempt in range(attempts):
        if attempt:
            await asyncio.sleep(pause_s)
        await client.force_metadata_update()
        if read <= known():
            break
    return True


class MetadataReading:
    """One whole-cluster Metadata answer and when its request was started (the event loop's clock). Its
    :attr:`digest` (:func:`metadata_digest`: the controller id left out) tells whether it is the answer a reader
    went by last time (then nothing needs decoding);
    :meth:`metadata` decodes it in a thread, once however many readers ask."""

    __slots__ = ("_answer", "_decoding", "digest", "serial", "started")

    def __init__(self, serial: int, started: float, answer: LaterAnswer) -> None:
        self.serial, self.started = serial, started
        self._answer: LaterAnswer | None = answer
        self.digest = metadata_digest(answer.api_version, answer.frame)
        self._decoding: asyncio.Future[dict[str, Any]] | None = None

    async def metadata(self) -> dict[str, Any]:
        """The decoded answer (decoded in a thread the first time; the frame is then let go)."""
        if self._decoding is None:
            answer = self._answer
            assert answer is not None
            self._decoding = asyncio.ensure_future(asyncio.to_thread(answer.decode))
            self._answer = None
        return await asyncio.shield(self._decoding)


class MetadataReader:
    """The whole-cluster Metadata readings of one cluster, shared by the modules that need them: topic health
    (:meth:`read`) and the cluster module (:meth:`take`, :meth:`take_unseen`). At fleet scale each one is the
    decode of tens of thousands of partitions.

    Readings are numbered in the order they are started, and two callers asking at the same time share one
    request. The newest reading the cluster module has not taken yet is kept until it takes it (the next poll),
    and no longer: the decoded answer is hundreds of thousands of objects, which the garbage collector's passes
    would walk as long as they are kept."""

    def __init__(self, client: Any, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self._client = client
        self._timeout_s = timeout_s
        self.started = 0  # readings started so far; the next one's serial is this plus one
        self._pending: asyncio.Future[MetadataReading] | None = None
        self._unseen: MetadataReading | None = None  # the newest reading the cluster module has not taken

    async def read(self) -> MetadataReading:
        """The reading in flight, or a new one."""
        if self._pending is not None:
            return await asyncio.shield(self._pending)
        return await self._new_reading()

    async def take(self, after: int) -> MetadataReading:
        """For the cluster module: a reading started after the ``after``-th, the one not taken yet if it is, else
        the one in flight if it is, else a new one."""
        unseen = self._unseen
        if unseen is not None and unseen.serial > after:
            self._unseen = None
            return unseen
        if self._pending is not None and self.started > after:
            reading = await asyncio.shield(self._pending)
        else:
            reading = await self._new_reading()
        if self._unseen is not None and self._unseen.serial <= reading.serial:
            self._unseen = None
        return reading

    def take_unseen(self) -> MetadataReading | None:
        """For the cluster module: the newest reading it has not taken, if any (then let go here)."""
        unseen, self._unseen = self._unseen, None
        return unseen

    async def _new_reading(self) -> MetadataReading:
        self.started += 1
        serial, started = self.started, asyncio.get_running_loop().time()
        pending = self._pending = asyncio.get_running_loop().create_future()
        try:
            reading = MetadataReading(serial, started, await _metadata_answer(self._client, None, self._timeout_s))
        except BaseException as exc:
            # those who joined get an error, not a cancellation of their own when this caller is cancelled
            pending.set_exception(exc if isinstance(exc, Exception) else RuntimeError(f"Metadata reading ended: {exc!r}"))
            pending.exception()  # retrieved: no "never retrieved" warning when no one else waited on it
            raise
        finally:
            if self._pending is pending:
                self._pending = None
        pending.set_result(reading)
        if self._unseen is None or serial > self._unseen.serial:
            self._unseen = reading
        return reading
