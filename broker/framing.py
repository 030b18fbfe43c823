"""Reading Kafka frames off a connection without copying them around in user space.

asyncio's streams read 256 KiB at a time into a new ``bytes``, append it to the connection's buffer (which grows
as it goes), and slice each frame out of that buffer again: a 1 MB Produce request is copied three or four
times before the decoder sees it (measured: a quarter of the broker's CPU under four kcat producers of 1 KiB
records, bench/README.md). Here a frame of ``DIRECT_FROM`` bytes or more is received straight into a buffer of
its own size (the transport's ``recv_into``, or the TLS layer's read into it), so its bytes are copied once,
by the kernel. Smaller reads (size prefixes, small requests) go through the stream's buffer as before.

:func:`start_frame_server` is ``asyncio.start_server`` with this reader and protocol; the connection callback
gets a :class:`FrameReader` (a ``StreamReader`` with :meth:`FrameReader.read_frame`) and the usual writer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

# frames this large are received into their own buffer; smaller ones through the stream's buffer
DIRECT_FROM = 64 * 1024
_SCRATCH_BYTES = 256 * 1024  # what one read of the stream's buffer takes at most (asyncio's own read size)


class FrameReader(asyncio.StreamReader):
    """A StreamReader that also reads a whole frame of known size into a buffer of its own."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.frame: bytearray | None = None  # the frame being received straight from the socket
        self.filled = 0  # how much of it has arrived

    def frame_room(self) -> memoryview | None:
        """Where the next bytes of the frame go, or None when no frame is waiting for bytes."""
        if self.frame is None or self.filled >= len(self.frame):
            return None
        return memoryview(self.frame)[self.filled:]

    def frame_received(self, count: int) -> None:
        """``count`` more bytes of the frame arrived where :meth:`frame_room` said."""
        self.filled += count
        if self.filled >= len(self.frame):
            self._wakeup_waiter()

    async def read_frame(self, size: int) -> bytes | bytearray:
        """The next ``size`` bytes (``readexactly``), received without copies when the frame is large."""
        if size < DIRECT_FROM or len(self._buffer) >= size:
            return await self.readexactly(size)
        frame = bytearray(size)
        have = len(self._buffer)
        frame[:have] = self._buffer
        self._buffer.clear()
        self.frame, self.filled = frame, have
        try:
            while self.filled < size:
                if self._exception is not None:
                    raise self._exception
                if self._eof:
                    raise asyncio.IncompleteReadError(bytes(frame[:self.filled]), size)
                await self._wait_for_data("read_frame")
        finally:
            self.frame = None
        return frame


class FrameProtocol(asyncio.StreamReaderProtocol, asyncio.BufferedProtocol):
    """The stream protocol, as a buffered protocol: the transport reads into the buffer we give it, the
    waiting frame's when there is one."""

    def __init__(self, reader: FrameReader, connected: Callable[..., Any], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(reader, connected, loop=loop)
        self._scratch = memoryview(bytearray(_SCRATCH_BYTES))
        self._into_frame = False  # whether the buffer last handed out was the waiting frame's

    def get_buffer(self, sizehint: int) -> memoryview:
        reader = self._stream_reader
        room = reader.frame_room() if reader is not None else None
        self._into_frame = room is not None
        return room if room is not None else self._scratch

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

    def protocol() -> FrameProtocol:
        return FrameProtocol(FrameReader(limit, loop), connected, loop)

    return await loop.create_server(protocol, host, port, **kwargs)
