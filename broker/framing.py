"""Reading Kafka frames off a connection without copying them around in user space.

asyncio's streams read 256 KiB at a time into a new ``bytes``, append it to the connection's buffer (which grows
as it goes), and slice each frame out of that buffer again: a 1 MB Produce request is copied three or four
times before the decoder sees it (measured: a quarter of the broker's CPU under four kcat producers of 1 KiB
records, bench/HISTORY.md). Here a frame of ``DIRECT_FROM`` bytes or more is received straight into a buffer of
its own size (the transport's ``recv_into``, or the TLS layer's read into it), so its bytes are copied once,
by the kernel. Smaller reads (size prefixes, small requests) go through the stream's buffer as before, in
reads of ``SCRATCH_BYTES``: small, because the read that brings a frame's size prefix comes before the frame
has a buffer of its own, and whatever else it brings is copied into the stream's buffer and out again (with
asyncio's 256 KiB reads that was a quarter of each 1 MB Produce request from a producer with several in
flight, and the stream's buffer grew and shrank the heap on every request; with 16 KiB reads four kcat
producers of 1 KiB records went 1.06-1.25x as fast, bench/HISTORY.md).

Those buffers come from a :class:`FramePool` shared by the server's connections and go back to it when the
request is done with (:meth:`FrameReader.release_frame`) and nothing refers to them any more: a new
``bytearray`` of 1 MB is zero-filled and faulted in page by page, which cost the broker about a tenth of its CPU
under four producers of 1 MB requests (bench/HISTORY.md).

:func:`start_frame_server` is ``asyncio.start_server`` with this reader and protocol, and a gate on accepting
(Kafka's connection limits); the connection callback gets a :class:`FrameReader` (a ``StreamReader`` with
:meth:`FrameReader.read_frame`) and the usual writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import structlog

log = structlog.get_logger("broker.framing")

# frames this large are received into their own buffer; smaller ones through the stream's buffer
DIRECT_FROM = 64 * 1024
SCRATCH_BYTES = 16 * 1024  # what one read into the stream's buffer takes at most
POOL_BYTES = 64 * 1024 * 1024  # the most a FramePool keeps for later frames
# the largest buffer a frame gets before its bytes arrive: a request of up to 1 MiB (a producer's usual) is
# received without a copy, a larger one is copied as its buffer doubles (at most its own size again)
FIRST_BYTES = 1024 * 1024
ACCEPT_RETRY_SECONDS = 0.1  # after accept fails (no descriptor left): the pause before trying again


class FramePool:
    """Buffers for large frames, in sizes of powers of two, kept for later frames up to ``keep_bytes`` in all."""

    def __init__(self, keep_bytes: int = POOL_BYTES) -> None:
        self.keep_bytes = keep_bytes
        self.kept_bytes = 0
        self._free: dict[int, list[bytearray]] = {}

    @staticmethod
    def capacity(size: int) -> int:
        """The size of the buffer :meth:`take` gives for ``size`` bytes."""
        return 1 << (size - 1).bit_length()

    def take(self, size: int) -> bytearray:
        """A buffer of at least ``size`` bytes: a kept one when there is one of its size, else a new one."""
        capacity = self.capacity(size)
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


class MemoryBudget:
    """The bytes all connections' frames may hold at once: Kafka's ``queued.max.request.bytes`` (0 or less, its
    default -1 among them: no bound). A frame reserves its whole size before its bytes are read (its buffer
    still grows only as they arrive), so that no frame ever waits for room half-read. As Kafka's memory pool
    does, a frame that finds any of the budget left gets what it asks for, even past the end, so that a large
    request is not starved by small ones; one that finds none waits, and its connection is read no further
    until frames are released."""

    def __init__(self, limit: int = -1) -> None:
        self.limit = limit
        self.available = limit
        self._waiting: list[Callable[[], None]] = []

    def try_take(self, size: int) -> bool:
        if self.limit <= 0:
            return True
        if self.available <= 0:
            return False
        self.available -= size
        return True

    def give_back(self, size: int) -> None:
        if self.limit <= 0:
            return
        self.available += size
        while self._waiting and self.available > 0:
            self._waiting.pop(0)()

    def wait(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (once) when some of the budget is free again."""
        if callback not in self._waiting:
            self._waiting.append(callback)

    def forget(self, callback: Callable[[], None]) -> None:
        with contextlib.suppress(ValueError):
            self._waiting.remove(callback)


class FrameReader(asyncio.StreamReader):
    """A StreamReader that also reads a whole frame of known size into a buffer of its own.

    That buffer is never the size the frame announces, which costs a client nothing to send: it starts at
    ``FIRST_BYTES`` at most and doubles each time the frame's bytes fill it. The frame's size is reserved in the
    broker-wide ``budget`` until :meth:`release_frame`."""

    if TYPE_CHECKING:
        # The internals of CPython's StreamReader this reader works with (typeshed leaves them out).
        _buffer: bytearray
        _transport: asyncio.Transport | None
        _paused: bool
        _exception: BaseException | None
        _eof: bool

        def _wakeup_waiter(self) -> None: ...

        def _maybe_resume_transport(self) -> None: ...

        async def _wait_for_data(self, func_name: str) -> None: ...

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop, pool: FramePool | None = None,
                 budget: MemoryBudget | None = None) -> None:
        super().__init__(limit=limit, loop=loop)
        self.pool = pool if pool is not None else FramePool()
        self.budget = budget if budget is not None else MemoryBudget()
        self.frame: bytearray | None = None  # the buffer of the frame being received straight from the socket
        self.size = 0  # the frame's size (its buffer may be larger, or smaller while it grows)
        self.filled = 0  # how much of it has arrived
        self.last_active = loop.time()  # when bytes last arrived (connections.max.idle.ms)
        self._held = False  # reading paused until the budget has room for the next frame

    def frame_room(self) -> memoryview | None:
        """Where the next bytes of the frame go, or None when no frame is waiting for bytes."""
        if self.frame is None or self.filled >= self.size:
            return None
        if self.filled >= len(self.frame):
            self._grow()
        return memoryview(self.frame)[self.filled:min(self.size, len(self.frame))]

    def frame_received(self, count: int) -> None:
        """``count`` more bytes of the frame arrived where :meth:`frame_room` said."""
        self.filled += count
        if self.filled >= self.size:
            self._wakeup_waiter()

    def _grow(self) -> None:
        """Move the frame's bytes so far into a buffer twice as large (at most the frame's size)."""
        assert self.frame is not None  # frame_room grows the frame being received only
        old = memoryview(self.frame)
        self.frame = self.pool.take(min(self.size, 2 * len(old)))
        self.frame[:self.filled] = old[:self.filled]
        self.pool.give_back(old)

    def _hold(self) -> None:
        if not self._held:
            self._held = True
            if self._transport is not None:
                self._transport.pause_reading()
        self.budget.wait(self._wakeup_waiter)

    def _unhold(self) -> None:
        if self._held:
            self._held = False
            self.budget.forget(self._wakeup_waiter)
            if self._transport is not None and not self._paused:
                self._transport.resume_reading()

    def _fill_from_stream(self) -> None:
        """Bytes of the frame that went through the stream's buffer (before it had a buffer of its own) move
        into it."""
        while self._buffer and self.filled < self.size:
            room = self.frame_room()
            assert room is not None  # a frame is being received and not whole yet
            count = min(len(room), len(self._buffer))
            room[:count] = memoryview(self._buffer)[:count]
            del self._buffer[:count]
            self.filled += count
        self._maybe_resume_transport()

    async def read_frame(self, size: int) -> bytes | memoryview:
        """The next ``size`` bytes (``readexactly``), received without copies when the frame is large. Hand
        the frame to :meth:`release_frame` when done with it."""
        if size < DIRECT_FROM or len(self._buffer) >= size:
            return await self.readexactly(size)
        try:
            while not self.budget.try_take(size):
                self._hold()
                await self._wait_or_fail(size)
        finally:
            self._unhold()
        self.frame, self.size, self.filled = self.pool.take(min(size, FIRST_BYTES)), size, 0
        try:
            while True:
                self._fill_from_stream()
                if self.filled >= size:
                    break
                await self._wait_or_fail(size)
        except BaseException:
            unfinished, self.frame = memoryview(self.frame), None
            self.budget.give_back(size)
            self.pool.give_back(unfinished)
            raise
        frame, self.frame = self.frame, None
        return memoryview(frame)[:size]

    async def _wait_or_fail(self, size: int) -> None:
        if self._exception is not None:
            raise self._exception
        if self._eof:
            raise asyncio.IncompleteReadError(bytes(self.frame[:self.filled]) if self.frame else b"", size)
        await self._wait_for_data("read_frame")

    def release_frame(self, frame: bytes | memoryview) -> None:
        """The request in ``frame`` (from :meth:`read_frame`) is done with: its memory goes back to the budget,
        and its buffer may serve a later frame."""
        if type(frame) is memoryview:
            self.budget.give_back(len(frame))
            self.pool.give_back(frame)


class FrameProtocol(asyncio.StreamReaderProtocol, asyncio.BufferedProtocol):
    """The stream protocol, as a buffered protocol: the transport reads into the buffer we give it, the
    waiting frame's when there is one."""

    if TYPE_CHECKING:
        # CPython's StreamReaderProtocol internals (typeshed leaves them out); the reader is the FrameReader given.
        _stream_reader: FrameReader | None
        _loop: asyncio.AbstractEventLoop

    def __init__(self, reader: FrameReader, connected: Callable[..., Any], loop: asyncio.AbstractEventLoop, *,
                 on_lost: Callable[[], None] | None = None) -> None:
        super().__init__(reader, connected, loop=loop)
        self._scratch = memoryview(bytearray(SCRATCH_BYTES))
        self._into_frame = False  # whether the buffer last handed out was the waiting frame's
        self._on_lost = on_lost  # the connection's slot, given back when it closes

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self._on_lost is not None:
            self._on_lost()

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
        reader.last_active = self._loop.time()
        rest: bytes | memoryview = data
        while rest and (room := reader.frame_room()) is not None:
            taken = min(len(room), len(rest))
            room[:taken] = memoryview(rest)[:taken]
            reader.frame_received(taken)
            rest = memoryview(rest)[taken:]
        if rest:
            reader.feed_data(rest)

    def buffer_updated(self, nbytes: int) -> None:
        reader = self._stream_reader
        if reader is None:
            return
        reader.last_active = self._loop.time()
        if self._into_frame:
            reader.frame_received(nbytes)
        else:
            reader.feed_data(self._scratch[:nbytes])


class ConnectionGate(Protocol):
    """Who may connect (broker.connection_limits.ConnectionQuotas): accepting waits for a free slot, a
    connection from a host at its limit is closed at once, and each admitted one is released once closed."""

    async def wait_for_slot(self) -> None: ...

    def admit(self, host: str) -> bool: ...

    def throttle_seconds(self, host: str) -> float: ...

    def release(self, host: str) -> None: ...


class FrameServer:
    """Listening sockets and their accept loops: ``asyncio.Server``'s part, with a gate before each
    connection is accepted (Kafka's acceptor waits for a slot under ``max.connections`` before it accepts, and
    closes a connection over ``max.connections.per.ip``) and a TLS handshake that holds its slot while it runs."""

    def __init__(self, sockets: list[socket.socket], protocol: Callable[[Callable[[], None]], FrameProtocol],
                 ssl_context: ssl.SSLContext | None, ssl_handshake_timeout: float | None,
                 gate: ConnectionGate | None) -> None:
        self.sockets = sockets
        self._protocol = protocol
        self.ssl_context = ssl_context  # replaced at run time: each accepted connection takes the current one
        self._ssl_handshake_timeout = ssl_handshake_timeout
        self._gate = gate
        self._tasks: set[asyncio.Task] = set()

    async def start_serving(self) -> None:
        loop = asyncio.get_running_loop()
        for sock in self.sockets:
            self._spawn(loop.create_task(self._accept(sock)))

    def _spawn(self, task: asyncio.Task) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if self._gate is not None:
                await self._gate.wait_for_slot()
            try:
                conn, address = await loop.sock_accept(sock)
            except OSError as exc:
                # out of descriptors, say: the connection waits in the backlog while some are closed
                log.warning("cannot accept a connection", error=str(exc), address=sock.getsockname())
                await asyncio.sleep(ACCEPT_RETRY_SECONDS)
                continue
            host = address[0] if isinstance(address, tuple) else ""
            if self._gate is not None and not self._gate.admit(host):
                conn.close()
                continue
            if self._gate is not None and (hold := self._gate.throttle_seconds(host)) > 0:
                # Kafka's connection_creation_rate: a connection past it is closed once its throttle time is over,
                # so that a client reconnecting at once cannot keep the rate up
                self._spawn(loop.create_task(self._close_later(conn, host, hold)))
                continue
            self._spawn(loop.create_task(self._open(conn, host)))

    async def _close_later(self, conn: socket.socket, host: str, seconds: float) -> None:
        try:
            await asyncio.sleep(seconds)
        finally:
            conn.close()
            assert self._gate is not None
            self._gate.release(host)

    async def _open(self, conn: socket.socket, host: str) -> None:
        released = False

        def release() -> None:
            nonlocal released
            if not released and self._gate is not None:
                released = True
                self._gate.release(host)

        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: self._protocol(release), conn, ssl=self.ssl_context,
                ssl_handshake_timeout=self._ssl_handshake_timeout if self.ssl_context else None)
        except BaseException as exc:
            # a handshake that failed or ran out of time: the connection never reached the protocol
            release()
            conn.close()
            if not isinstance(exc, Exception):
                raise
            log.info("connection closed before it was set up", client=host, error=str(exc) or type(exc).__name__)

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for sock in self.sockets:
            sock.close()

    async def wait_closed(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


async def _listening_sockets(host: str, port: int, backlog: int) -> list[socket.socket]:
    """A listening socket on each address ``host`` names (every interface when empty), as asyncio's server
    makes them."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host or None, port, family=socket.AF_UNSPEC, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    sockets = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, True)
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


async def start_frame_server(connected: Callable[[FrameReader, asyncio.StreamWriter], Awaitable[None]],
                             host: str, port: int, *, limit: int, ssl: ssl.SSLContext | None = None,
                             ssl_handshake_timeout: float | None = None, gate: ConnectionGate | None = None,
                             budget: MemoryBudget | None = None, backlog: int = 100,
                             start_serving: bool = True) -> FrameServer:
    """A server whose connections read with :class:`FrameReader` (``connected`` is called as
    ``asyncio.start_server``'s callback is), their frames charged to ``budget``, admitted by ``gate``."""
    loop = asyncio.get_running_loop()
    pool = FramePool()
    budget = budget if budget is not None else MemoryBudget()

    def protocol(release: Callable[[], None]) -> FrameProtocol:
        return FrameProtocol(FrameReader(limit, loop, pool, budget), connected, loop, on_lost=release)

    server = FrameServer(await _listening_sockets(host, port, backlog), protocol, ssl, ssl_handshake_timeout, gate)
    if start_serving:
        await server.start_serving()
    return server
