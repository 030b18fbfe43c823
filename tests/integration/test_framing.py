"""broker.framing: frames read off a real TCP connection, large ones straight into their own buffer, whatever
way the sender cuts its writes; over TLS too. Buffers of released frames serve later frames, never while
something still refers to them."""

from __future__ import annotations

import asyncio
import hashlib
import random
import ssl
import struct
import subprocess

import pytest

from broker.framing import (
    DIRECT_FROM,
    FIRST_BYTES,
    SCRATCH_BYTES,
    FramePool,
    FrameProtocol,
    FrameReader,
    MemoryBudget,
    start_frame_server,
)


async def serve_and_send(frames: list[bytes], cut: int | None, tls: tuple | None = None, *,
                         release: bool = False) -> list[tuple[int, str, str]]:
    """Send ``frames`` (size-prefixed) to a frame server in writes of ``cut`` bytes (all at once when None);
    the server answers each with its length, digest and the type it was read into (and, with ``release``,
    releases each frame after that, as the broker does)."""
    got: list[tuple[int, str, str]] = []
    done = asyncio.Event()

    async def connected(reader, writer):
        while len(got) < len(frames):
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            frame = await reader.read_frame(size)
            got.append((len(frame), hashlib.sha256(frame).hexdigest(), type(frame).__name__))
            if release:
                reader.release_frame(frame)
        done.set()
        writer.close()

    server = await start_frame_server(connected, "127.0.0.1", 0, limit=1 << 20,
                                      ssl=tls[0] if tls else None)
    port = server.sockets[0].getsockname()[1]
    try:
        _reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=tls[1] if tls else None,
                                                        server_hostname="localhost" if tls else None)
        wire = b"".join(struct.pack(">i", len(frame)) + frame for frame in frames)
        step = cut or len(wire)
        for start in range(0, len(wire), step):
            writer.write(wire[start:start + step])
            await writer.drain()
        await asyncio.wait_for(done.wait(), 30)
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
    return got


def check(got: list[tuple[int, str, str]], frames: list[bytes]) -> None:
    """Every frame whole and in order; small ones always through the stream's buffer, and a frame larger than
    the stream may buffer (2 x its limit, 2 MiB) always straight into its own (a large frame that arrived
    whole before it was asked for is sliced from the buffer: either way is right for those)."""
    assert [(size, digest) for size, digest, _ in got] == [(len(f), hashlib.sha256(f).hexdigest()) for f in frames]
    for (_size, _, kind), frame in zip(got, frames, strict=True):
        if len(frame) < DIRECT_FROM:
            assert kind == "bytes"
        elif len(frame) > 2 << 20:
            assert kind == "memoryview"


FRAMES = [random.Random(seed).randbytes(size) for seed, size in
          enumerate([0, 10, DIRECT_FROM - 1, DIRECT_FROM, 1_000_000, 3, 2_500_000, 200_000, 17])]


@pytest.mark.parametrize("cut", [None, 1, 7, 4096, 65_537, 300_000])
def test_frames_arrive_whole_and_in_order_however_the_writes_are_cut(cut):
    frames = FRAMES if cut != 1 else FRAMES[:4] + FRAMES[5:6]  # byte by byte: the small ones and one direct
    check(asyncio.run(serve_and_send(frames, cut)), frames)


def test_released_frames_lend_their_buffers_to_later_ones_of_any_size():
    frames = [random.Random(seed).randbytes(size) for seed, size in
              enumerate([1_000_000, 700_000, 600_000, 1_000_000, 65_536, 100_000, 2_500_000, 1_048_576])]
    for cut in (None, 4096, 300_000):
        check(asyncio.run(serve_and_send(frames, cut, release=True)), frames)


def test_a_frame_still_referred_to_keeps_its_buffer():
    """A handler that keeps a view of its request (records it has not written yet, say): the next frame of
    the same size must not land in that buffer."""
    first, second = random.Random(1).randbytes(900_000), random.Random(2).randbytes(900_000)

    async def run():
        seen = {}

        async def connected(reader, writer):
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            frame = await reader.read_frame(size)
            kept = frame[1000:2000]
            reader.release_frame(frame)
            seen["kept_after_release"] = reader.pool.kept_bytes
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            frame = await reader.read_frame(size)
            seen["second"] = bytes(frame)
            seen["kept"] = bytes(kept)
            del kept
            reader.release_frame(frame)
            seen["kept_at_end"] = reader.pool.kept_bytes
            writer.close()

        server = await start_frame_server(connected, "127.0.0.1", 0, limit=1 << 20)
        port = server.sockets[0].getsockname()[1]
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(struct.pack(">i", len(first)) + first)
        await writer.drain()
        writer.write(struct.pack(">i", len(second)) + second)
        await writer.drain()
        for _ in range(1000):
            if "kept_at_end" in seen:
                break
            await asyncio.sleep(0.01)
        writer.close()
        server.close()
        await server.wait_closed()
        return seen

    seen = asyncio.run(run())
    assert seen["kept_after_release"] == 0  # not given back: a view of it was alive
    assert seen["second"] == second and seen["kept"] == first[1000:2000]
    assert seen["kept_at_end"] == 1 << 20  # the second one, released with nothing holding it, was


def test_large_frames_sent_back_to_back_pass_little_through_the_streams_buffer(monkeypatch):
    """Two 1 MB frames in one write, as a producer with requests in flight sends them: only the read that
    brings each size prefix (before the frame has a buffer) goes through the stream's buffer, a small one; the
    rest of each frame is received straight into its own."""
    through_stream = []
    feed_data = FrameReader.feed_data

    def counted(self, data):
        through_stream.append(len(data))
        feed_data(self, data)

    monkeypatch.setattr(FrameReader, "feed_data", counted)
    frames = [random.Random(seed).randbytes(1_000_000) for seed in (1, 2)]
    got = asyncio.run(serve_and_send(frames, None, release=True))
    assert [(size, digest) for size, digest, _ in got] == [(len(f), hashlib.sha256(f).hexdigest()) for f in frames]
    assert [kind for _, _, kind in got] == ["memoryview", "memoryview"]
    assert sum(through_stream) <= 2 * SCRATCH_BYTES and sum(through_stream) < 64 * 1024, through_stream


@pytest.mark.parametrize("cut", [7, 4096, 65_537, 300_000])
def test_bytes_handed_to_data_received_fill_the_frames_too(cut):
    """A loop that reads into buffers of its own calls ``data_received`` instead of asking for a buffer (uvloop
    does: the protocol is a ``Protocol`` too): frames still arrive whole and in order, the large ones in their
    own buffer, where a plain StreamReaderProtocol would leave them in the stream's buffer and the read hang."""
    frames = FRAMES if cut > 7 else FRAMES[:4] + FRAMES[5:6]
    wire = b"".join(struct.pack(">i", len(frame)) + frame for frame in frames)

    async def run():
        loop = asyncio.get_running_loop()
        reader = FrameReader(1 << 20, loop)
        protocol = FrameProtocol(reader, None, loop)
        got = []

        async def read_all():
            for _ in frames:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.read_frame(size)
                got.append((len(frame), hashlib.sha256(frame).hexdigest(), type(frame).__name__))

        reading = asyncio.create_task(read_all())
        for start in range(0, len(wire), cut):
            protocol.data_received(wire[start:start + cut])
            await asyncio.sleep(0)
        await asyncio.wait_for(reading, 30)
        return got

    got = asyncio.run(run())
    check(got, frames)
    assert "memoryview" in {kind for _, _, kind in got}


def test_frame_pool_sizes_reuse_and_bound():
    pool = FramePool(keep_bytes=3 << 20)
    buffer = pool.take(1_000_000)
    assert len(buffer) == 1 << 20
    assert pool.give_back(memoryview(buffer)[:1_000_000]) is False  # the test's own name still refers to it
    del buffer
    first = pool.take(700_000)
    address = id(first)
    view = memoryview(first)[:700_000]
    del first
    assert pool.give_back(view) is True and pool.kept_bytes == 1 << 20
    again = pool.take(524_289)
    assert id(again) == address and pool.kept_bytes == 0
    smaller = pool.take(524_288)
    assert len(smaller) == 1 << 19
    held = memoryview(again)[:10]
    view = memoryview(again)[:524_289]
    del again
    assert pool.give_back(view) is False  # ``held`` still looks into it
    views = [memoryview(pool.take(2_000_000)) for _ in range(2)]
    assert [pool.give_back(v) for v in views] == [True, False]  # 4 MiB would pass the 3 MiB bound
    assert pool.kept_bytes == 2 << 20 and held.tobytes() == bytes(10)


def test_a_connection_closed_in_the_middle_of_a_large_frame_ends_the_read():
    async def run():
        failures = []

        async def connected(reader, writer):
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            try:
                await reader.read_frame(size)
            except asyncio.IncompleteReadError as exc:
                failures.append((len(exc.partial), exc.expected))
            writer.close()

        server = await start_frame_server(connected, "127.0.0.1", 0, limit=1 << 20)
        port = server.sockets[0].getsockname()[1]
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(struct.pack(">i", 500_000) + bytes(123_456))
        await writer.drain()
        writer.close()
        for _ in range(500):
            if failures:
                break
            await asyncio.sleep(0.01)
        server.close()
        await server.wait_closed()
        return failures

    assert asyncio.run(run()) == [(123_456, 500_000)]


def test_frames_over_tls(tmp_path):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
                   check=True, capture_output=True)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    client_context = ssl.create_default_context(cafile=str(cert))
    for cut in (None, 5000):
        check(asyncio.run(serve_and_send(FRAMES, cut, (server_context, client_context))), FRAMES)


def test_a_frame_buffer_grows_with_its_bytes_not_with_its_announced_size():
    """A 100 MB frame of which 300 KB have arrived holds a buffer of FIRST_BYTES; as the rest arrives the buffer
    doubles, and the frame comes out whole."""
    body = random.Random(7).randbytes(5_000_000)

    async def run():
        loop = asyncio.get_running_loop()
        reader = FrameReader(1 << 20, loop)
        protocol = FrameProtocol(reader, None, loop)
        reading = asyncio.create_task(reader.read_frame(100_000_000))
        await asyncio.sleep(0)
        protocol.data_received(body[:300_000])
        assert len(reader.frame) == FIRST_BYTES and reader.filled == 300_000
        reading.cancel()
        reader = FrameReader(1 << 20, loop)
        protocol = FrameProtocol(reader, None, loop)
        reading = asyncio.create_task(reader.read_frame(len(body)))
        await asyncio.sleep(0)
        sizes = set()
        for start in range(0, len(body), 100_000):
            protocol.data_received(body[start:start + 100_000])
            if reader.frame is not None:
                sizes.add(len(reader.frame))
                assert len(reader.frame) <= max(FIRST_BYTES, 2 * reader.filled)
        assert sizes == {1 << 20, 2 << 20, 4 << 20, 8 << 20}
        return bytes(await reading)

    assert asyncio.run(run()) == body


def test_frames_wait_for_the_budget_and_their_connection_is_read_no_further():
    """queued.max.request.bytes of 3 MB: a frame held by its handler (2.5 MB) leaves room, so a second frame
    on another connection gets its 2 MB (Kafka's pool lends past its end to a request that finds any room), a
    third waits, unread, until one of the two is released."""
    frames = [random.Random(seed).randbytes(size) for seed, size in enumerate([2_500_000, 2_000_000, 1_500_000])]

    async def run():
        budget = MemoryBudget(3_000_000)
        received: list[tuple[int, object]] = []
        readers: list = []

        async def connected(reader, writer):
            readers.append(reader)
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            frame = await reader.read_frame(size)
            received.append((size, reader, frame))
            await asyncio.Event().wait()  # held until the test releases it (and the server is closed)

        server = await start_frame_server(connected, "127.0.0.1", 0, limit=1 << 20, budget=budget)
        port = server.sockets[0].getsockname()[1]
        writers = []
        try:
            for frame in frames[:2]:
                _reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writers.append(writer)
                writer.write(struct.pack(">i", len(frame)) + frame)
                await poll_until(lambda count=len(writers): len(received) == count)
            assert budget.available == 3_000_000 - 4_500_000
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writers.append(writer)
            writer.write(struct.pack(">i", len(frames[2])) + frames[2])
            await poll_until(lambda: len(readers) == 3 and readers[2]._held)
            assert len(received) == 2
            size, reader, frame = received[0]
            assert bytes(frame) == frames[0]
            reader.release_frame(frame)
            await poll_until(lambda: len(received) == 3)
            assert bytes(received[2][2]) == frames[2] and not readers[2]._held
            return budget.available
        finally:
            for writer in writers:
                writer.close()
            server.close()
            await server.wait_closed()

    assert asyncio.run(run()) == 3_000_000 - 2_000_000 - 1_500_000


async def poll_until(condition, timeout: float = 20.0):
    for _ in range(int(timeout / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")
