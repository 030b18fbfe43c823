"""Reading Kafka frames off a connection without copying them around in user space.

asyncio's streams read 256 KiB at a time into a new ``bytes``, append it to the connection's buffer (which grows
as it goes), and slice each frame out of that buffer again: a 1 MB Produce request is copied three or four
times before the decoder sees it (measured: a quarter of the broker's CPU under four kcat producers of 1 KiB
records, bench/README.md). Here a frame of ``DIRECT_FROM`` bytes or more is received straight into a buffer of
its own size (the transport's ``recv_into``, or the TLS layer's read into it), so its bytes are copied once,
by the kernel. Smaller reads (size prefixes, small requests) go through the stream's buffer as before, in
reads of ``SCRATCH_BYTES``: small, because the read that brings a frame's size prefix comes before the frame
has a buffer of its own, and whatever else it brings is copied into the stream's buffer and out again (with
asyncio's 256 KiB reads that was a quarter of each 1 MB Produce request from a producer with several in
flight, and the stream's buffer grew and shrank the heap on every request; with 16 KiB reads four kcat
producers of 1 KiB records went 1.06-1.25x as fast, bench/README.md).

Those buffers come from a :class:`FramePool` shared by the server's connections and go back to it when the
request is done with (:meth:`FrameReader.release_frame`) and nothing refers to them any more: a new
``bytearray`` of 1 MB is zero-filled and faulted in page by page, which cost the broker about a tenth of its CPU
under four producers of 1 MB requests (bench/README.md).

:func:`start_frame_server` is ``asyncio.start_server`` with this reader and protocol; the connection callback
gets a :class:`FrameReader` (a ``StreamReader`` with :meth:`FrameReader.read_frame`) and the usual writer.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

# frames this large are received into their own buffer; smaller ones through the stream's buffer
DIRECT_FROM = 64 * 1024
SCRATCH_BYTES = 16 * 1024  # what one read into the stream's buffer takes at most
POOL_BYTES = 64 * 1024 * 1024  # the most a FramePool keeps for later frames


class FramePool:
    """Buffers for large frames, in sizes of powers of two, kept for later frames up to ``keep_bytes`` in all."""

    def __init__(self, keep_bytes: int = POOL_BYTES) -> None:
        self.keep_bytes = keep_bytes
        self.kept_bytes = 0
        self._free: dict[int, list[bytearray]] = {}

    def take(self, size: int) -> bytearray:
        """A buffer of at least ``size`` bytes: a kept one when there is one of its size, else a new one."""
        capacity = 1 << (size - 1).bit_length()
        free = self._free.get(capacity)
        if free:
            self.kept_bytes -= capacity
            return free.pop()
        return bytearray(capacity)

    def give_back(self, view: memoryview) -> bool:
        """Keep the buffer under ``view`` for a later frame, unless something still refers to it (a view of the
        records a handler kept, say) or the pool is full; True if kept."""
        buffer = view.obj
        try:
            view.release()
        except BufferError:  # a consumer still holds the view's bytes
            return False
        # references now: ``buffer`` here and getrefcount's argument; any more and someone still holds it
        if type(buffer) is not bytearray or sys.getrefcount(buffer) > 2:
            return False
        if self.kept_bytes + len(buffer) > self.keep_bytes:
            return False
        self._free.setdefault(len(buffer), []).append(buffer)
        self.kept_bytes += len(buffer)
        return True


class FrameReader(asyncio.StreamReader):
    """A StreamReader that also reads a whole frame of known size into a buffer of its own."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop, pool: FramePool | None = None) -> None:
        super().__init__(limit=limit, loop=loop)
        self.pool = pool if pool is not None else FramePool()
        self.frame: bytearray | None = None  # the buffer of the frame being received straight from the socket
        self.size = 0  # the frame's size (the buffer may be larger)
        self.filled = 0  # how much of it has arrived

    def frame_room(self) -> memoryview | None:
        """Where the next bytes of the frame go, or None when no frame is waiting for bytes."""
        if self.frame is None or self.filled >= self.size:
            return None
        return memoryview(self.frame)[self.filled:self.size]

    def frame_received(self, count: int) -> None:
        """``count`` more bytes of the frame arrived where :meth:`frame_room` said."""
        self.filled += count
        if self.filled >= self.size:
            self._wakeup_waiter()

    async def read_frame(self, size: int) -> bytes | memoryview:
        """The next ``size`` bytes (``readexactly``), received without copies when the frame is large. Hand
        the frame to :meth:`release_frame` when done with it."""
        if size < DIRECT_FROM or len(self._buffer) >= size:
            return await self.readexactly(size)
        buffer = self.pool.take(size)
        have = len(self._buffer)
        buffer[:have] = self._buffer
        self._buffer.clear()
        self.frame, self.size, self.filled = buffer, size, have
        try:
            while self.filled < size:
                if self._exception is not None:
                    raise self._exception
                if self._eof:
                    raise asyncio.IncompleteReadError(bytes(buffer[:self.filled]), size)
                await self._wait_for_data("read_frame")
        finally:
            self.frame = None
        return memoryview(buffer)[:size]

    def release_frame(self, frame: bytes | memoryview) -> None:
        """The request in ``frame`` (from :meth:`read_frame`) is done with: its buffer may serve a later frame."""
        if type(frame) is memoryview:
            self.pool.give_back(frame)


class FrameProtocol(asyncio.StreamReaderProtocol, asyncio.BufferedProtocol):
    """The stream protocol, as a buffered protocol: the transport reads into the buffer we give it, the
    waiting frame's when there is one."""

    def __init__(self, reader: FrameReader, connected: Callable[..., Any], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(reader, connected, loop=loop)
        self._scratch = memoryview(bytearray(SCRATCH_BYTES))
        self._into_frame = False  # whether the buffer last handed out was the waiting frame's

    def get_buffer(self, sizehint: int) -> memoryview:
        reader = self._stream_reader
        room = reader.frame_room() if reader is not None else None
        self._into_frame = room is not None
        return room if room is not None else self._scratch

    def data_received(self, data: bytes) -> None:
        """Bytes from a loop that reads into buffers of its own (uvloop sees a ``Protocol`` here and never asks
        for a buffer): the waiting frame takes its share, the stream's buffer the rest."""
        reader = self._stream_reader
        if reader is None:
            return
        room = reader.frame_room()
        if room is not None:
            taken = min(len(room), len(data))
            room[:taken] = memoryview(data)[:taken]
            reader.frame_received(taken)
            if taken == len(data):
                return
            data = memoryview(data)[taken:]
        reader.feed_data(data)

    def buffer_updated(self, nbytes: int) -> None:
        reader = self._stream_reader
        if reader is None:
            return
        if self._into_frame:
            reader.frame_received(nbytes)
        else:
            reader.feed_data(self._scratch[:nbytes])


async def start_frame_server(connected: Callable[[FrameReader, asyncio.StreamWriter], Awaitable[None]],
                             host: str, port: int, *, limit: int, **kwargs: Any) -> asyncio.Server:
    """``asyncio.start_server`` whose connections read with :class:`FrameReader`."""
    loop = asyncio.get_running_loop()
    pool = FramePool()

    def protocol() -> FrameProtocol:
        return FrameProtocol(FrameReader(limit, loop, pool), connected, loop)

    return await loop.create_server(protocol, host, port, **kwargs)
