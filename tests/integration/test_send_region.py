"""Responses with records left in log files go out with sendfile, straight to the socket while it takes them
and through the event loop once it is full: over a real TCP connection the peer gets every byte in order,
whichever way each piece went, and a log that shrank meanwhile ends the connection instead of a short frame."""

from __future__ import annotations

import asyncio
import os
import socket

import pytest

from broker.protocol.types import FileRegion
from broker.server import _send

SMALL_BUFFER = 64 * 1024  # the sender's socket fills long before a piece of several MiB is through


def region_of(path, pieces) -> FileRegion:
    return FileRegion([(os.open(path, os.O_RDONLY), position, length) for position, length in pieces])


async def send_and_receive(chunks_of, expected_length: int, *, before: bytes = b"",
                           after: list | None = None) -> tuple[bytes, BaseException | None]:
    """Serve one connection that writes ``before`` through the transport without waiting, sends
    ``chunks_of()`` with _send, then ``after`` (another answer) with _send; read everything the client gets."""
    failure: list[BaseException] = []
    sent = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_BUFFER)
        try:
            if before:
                writer.write(before)  # an earlier answer, still in the transport's buffer
            await _send(writer, chunks_of())
            if after is not None:
                await _send(writer, after)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            failure.append(exc)
        finally:
            sent.set()
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
        received = bytearray()
        while len(received) < expected_length:
            piece = await asyncio.wait_for(reader.read(1 << 16), 30)
            if not piece:
                break
            received += piece
        await asyncio.wait_for(sent.wait(), 30)
        writer.close()
        return bytes(received), failure[0] if failure else None
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
def segment(tmp_path):
    path = tmp_path / "segment"
    path.write_bytes(os.urandom(6 << 20))
    return path


def test_pieces_larger_than_the_socket_buffer_arrive_whole_and_in_order(segment):
    data = segment.read_bytes()
    pieces = [(0, 3 << 20), (5 << 20, 1 << 20), (100, 10)]
    expected = b"head" + data[:3 << 20] + data[5 << 20:6 << 20] + b"mid" + data[100:110] + b"tail"

    def chunks() -> list:
        return [b"head", region_of(segment, pieces[:2]), b"mid", region_of(segment, pieces[2:]), b"tail"]

    received, failure = asyncio.run(send_and_receive(chunks, len(expected)))
    assert failure is None
    assert received == expected


def test_bytes_larger_than_the_socket_buffer_between_regions_keep_their_place(segment):
    data = segment.read_bytes()
    head, middle = os.urandom(4 << 20), os.urandom(3 << 20)  # more than the socket takes at once
    expected = head + data[:2 << 20] + middle + data[3 << 20:4 << 20] + b"end"

    def chunks() -> list:
        return [head, region_of(segment, [(0, 2 << 20)]), middle, region_of(segment, [(3 << 20, 1 << 20)]), b"end"]

    received, failure = asyncio.run(send_and_receive(chunks, len(expected)))
    assert failure is None
    assert received == expected


def test_an_answer_after_bytes_still_waiting_in_the_transport_comes_after_them(segment):
    data = segment.read_bytes()
    earlier = os.urandom(4 << 20)  # the transport keeps what the socket does not take
    expected = earlier + b"head" + data[:2 << 20] + b"tail"

    def chunks() -> list:
        return [b"head", region_of(segment, [(0, 2 << 20)]), b"tail"]

    received, failure = asyncio.run(send_and_receive(chunks, len(expected), before=earlier))
    assert failure is None
    assert received == expected


def test_the_connection_serves_on_after_a_full_socket(segment):
    """After an answer that filled the socket (its rest sent by the event loop's sendfile once there was room),
    the next answer, plain bytes through the transport, still goes out on the same connection."""
    data = segment.read_bytes()
    expected = data[:5 << 20] + b"next answer"

    def chunks() -> list:
        return [region_of(segment, [(0, 5 << 20)])]

    received, failure = asyncio.run(send_and_receive(chunks, len(expected), after=[b"next answer"]))
    assert failure is None
    assert received == expected


def test_a_log_cut_before_its_piece_was_sent_ends_the_connection(segment):
    def chunks() -> list:
        region = region_of(segment, [(0, 1 << 20), (4 << 20, 2 << 20)])
        os.truncate(segment, 5 << 20)  # the second piece now ends 1 MiB early
        return [b"head", region]

    received, failure = asyncio.run(send_and_receive(chunks, 4 + (3 << 20)))
    assert isinstance(failure, ConnectionError)
    assert "shrank" in str(failure)
    assert len(received) < 4 + (3 << 20)
