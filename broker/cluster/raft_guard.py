"""What a connection to a broker's Raft port may cost it before and after the peer has shown it holds the secret.

pysyncobj reads each of its connections into one buffer until a whole frame (a 4-byte length, then a Fernet
token) is there, and only then checks the token. Its reader takes whatever length the first four bytes
announce, appends every read to an immutable buffer (a copy of everything held so far each time), and reads a
connection for as long as bytes keep coming. So anyone who could reach the Raft port, without the secret, could
announce a 2 GiB frame and stream bytes at it: the node's Raft thread spent its time copying them, the quorum
stopped committing, and memory grew with every byte sent.

:class:`GuardedConnection` keeps pysyncobj's protocol and replaces its reading:

* a frame may be at most :data:`UNPROVEN_FRAME_BYTES` until the connection has delivered two frames that
  decrypted (the peer's random key, then a message that carries ours back, which only a holder of the secret
  can make; a recorded first frame played again proves nothing), and at most :data:`FRAME_BYTES` after; a
  length past the bound, or below zero, closes the connection at once, before its bytes are read;
* bytes are gathered in a growing buffer, so holding N bytes costs N, not N squared;
* one readiness event reads at most :data:`READ_PER_EVENT` bytes, so one connection cannot keep the Raft thread
  from the others;
* a connection that has not proven itself within :data:`PROOF_SECONDS` of opening is closed, whether it
  sends anything or not (:class:`GuardedTransport` looks at the unproven ones at each of pysyncobj's ticks;
  pysyncobj kept a silent connection open for good, so enough of them took every descriptor the process may
  have, and with them Kafka's listener and the logs' files);
* an address may hold at most :data:`UNPROVEN_PER_ADDRESS` connections that have not proven themselves; more
  are closed as they are accepted. (Behind Raft over TLS every connection arrives from the tunnel on loopback:
  the tunnel tells which address each one was relayed from, :meth:`GuardedTransport.origin`, and bounds the
  connections of each address before their TLS handshake.)

:func:`install` puts the connection in place of pysyncobj's connection class, for the connections pysyncobj
accepts and those it opens (its modules name the class directly), and a node's transport is a
:class:`GuardedTransport`. The class overrides pysyncobj's private methods by
their mangled names; :func:`install` refuses to start a node if a pysyncobj release no longer has them.
"""

from __future__ import annotations

import errno
import struct
import time
import zlib
from typing import Any

import pysyncobj.pickle as pysyncobj_pickle
import structlog
from pysyncobj import tcp_server, transport
from pysyncobj.monotonic import monotonic as pysyncobj_clock
from pysyncobj.tcp_connection import TcpConnection
from pysyncobj.transport import TCPTransport

log = structlog.get_logger("broker.raft")

# A connection's first two frames are a random key and a node address (or a short admin command), a few hundred
# bytes once encrypted.
UNPROVEN_FRAME_BYTES = 64 * 1024
# Larger than any frame pysyncobj sends between brokers: its append batches and snapshot chunks are 64 KiB, and a
# single log entry (one metadata command) is sent whole; a command is a topic's assignment at most, megabytes.
FRAME_BYTES = 256 * 1024 * 1024
READ_PER_EVENT = 1024 * 1024
PROOF_SECONDS = 10.0
UNPROVEN_PER_ADDRESS = 16
_FRAMES_TO_PROVE = 2
_LENGTH = struct.Struct("i")  # pysyncobj's frame length: a native signed int
_AGAIN = (errno.EAGAIN, errno.EWOULDBLOCK)
_PRIVATE = ("_TcpConnection__socket", "_TcpConnection__recvBufferSize", "_TcpConnection__lastReadTime")
_OVERRIDDEN = ("_TcpConnection__tryReadBuffer", "_TcpConnection__processParseMessage")  # the only caller of its
# __processRead is __tryReadBuffer, replaced here


class _Throttled:
    """One warning per ``interval`` seconds at most, with how many were left out since the last: a peer that
    reconnects to send the same bad frame again cannot fill the log."""

    def __init__(self, interval: float = 10.0) -> None:
        self.interval = interval
        self._last = float("-inf")
        self._skipped = 0

    def warn(self, event: str, **fields: Any) -> None:
        now = time.monotonic()
        if now - self._last < self.interval:
            self._skipped += 1
            return
        log.warning(event, **fields, **({"similar_not_logged": self._skipped} if self._skipped else {}))
        self._last, self._skipped = now, 0


refusals = _Throttled()  # shared with the TLS tunnel (raft_tls)


class GuardedConnection(TcpConnection):
    """pysyncobj's connection, reading within the bounds above (see the module's docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._reset_reading()
        super().__init__(*args, **kwargs)

    def _reset_reading(self) -> None:
        self._inbox = bytearray()
        self._frames = 0
        self._opened = time.monotonic()

    @property
    def proven(self) -> bool:
        return self._frames >= _FRAMES_TO_PROVE

    def connect(self, host: str, port: int) -> bool:
        self._reset_reading()
        return bool(super().connect(host, port))

    def disconnect(self) -> None:
        self._reset_reading()
        super().disconnect()

    def overdue(self) -> bool:
        return not self.proven and time.monotonic() - self._opened > PROOF_SECONDS

    def peer(self) -> tuple[str, int] | None:
        sock = self._TcpConnection__socket  # type: ignore[attr-defined]
        try:
            address = sock.getpeername() if sock is not None else None
        except OSError:
            return None
        return (address[0], address[1]) if isinstance(address, tuple) else None

    def refuse(self, reason: str, **fields: Any) -> None:
        """Close the connection, saying why (throttled)."""
        peer = self.peer()
        refusals.warn("raft connection closed", reason=reason, peer=f"{peer[0]}:{peer[1]}" if peer else None,
                       proven=self.proven, **fields)
        self.disconnect()

    def _TcpConnection__tryReadBuffer(self) -> None:  # noqa: N802 (pysyncobj's mangled name)
        budget = READ_PER_EVENT
        while budget > 0:
            taken = self._read_once()
            if taken <= 0:
                break
            budget -= taken
        self._TcpConnection__lastReadTime = pysyncobj_clock()

    def _read_once(self) -> int:
        """One read into the buffer: the bytes read, 0 when there were none or the connection closed."""
        sock = self._TcpConnection__socket  # type: ignore[attr-defined]
        if sock is None:
            return 0
        try:
            incoming = sock.recv(self._TcpConnection__recvBufferSize)  # type: ignore[attr-defined]
        except OSError as exc:
            if exc.errno not in _AGAIN:
                self.disconnect()
            return 0
        if not incoming:
            self.disconnect()
            return 0
        self._inbox += incoming
        if self.overdue():
            self.refuse("no proof of the cluster secret in time", seconds=PROOF_SECONDS)
            return 0
        if len(self._inbox) >= _LENGTH.size and not self._length_allowed(_LENGTH.unpack_from(self._inbox)[0]):
            return 0
        return len(incoming)

    def _length_allowed(self, length: int) -> bool:
        bound = FRAME_BYTES if self.proven else UNPROVEN_FRAME_BYTES
        if 0 <= length <= bound:
            return True
        self.refuse("frame length out of bounds", length=length, bound=bound)
        return False

    def _TcpConnection__processParseMessage(self) -> Any:  # noqa: N802
        inbox = self._inbox
        if len(inbox) < _LENGTH.size:
            return None
        (length,) = _LENGTH.unpack_from(inbox)
        if not self._length_allowed(length):
            return None
        end = _LENGTH.size + length
        if len(inbox) < end:
            return None
        frame = bytes(inbox[_LENGTH.size:end])
        try:
            message = self._open(frame)
        except Exception as exc:  # noqa: BLE001 (a token, a compression or a pickle that does not hold: the peer's)
            self.refuse("frame refused", error=type(exc).__name__)
            return None
        del inbox[:end]
        self._frames += 1
        return message

    def _open(self, frame: bytes) -> Any:
        """pysyncobj's checks of a frame, in its order: the token's time not before the last one's, the token,
        the compressed pickle, and (once keys are exchanged) our random key carried back."""
        if self.encryptor is not None:
            stamped = self.encryptor.extract_timestamp(frame)
            last: int = self.recvLastTimestamp  # type: ignore[has-type]
            if stamped < last:
                raise ValueError("a token older than the last")
            self.recvLastTimestamp = stamped
            frame = self.encryptor.decrypt(frame)
        message = pysyncobj_pickle.loads(zlib.decompress(frame))
        if self.recvRandKey:
            key, message = message
            if key != self.recvRandKey:
                raise ValueError("not this connection's key")
        return message


class GuardedTransport(TCPTransport):
    """pysyncobj's TCP transport, closing the accepted connections that have not proven themselves in time or
    are more than :data:`UNPROVEN_PER_ADDRESS` from one address. Its connections are :class:`GuardedConnection`
    once :func:`install` has run."""

    def _onTick(self) -> None:  # noqa: N802 (pysyncobj's name)
        super()._onTick()
        for conn in list(self._unknownConnections):
            if isinstance(conn, GuardedConnection) and conn.overdue():
                conn.refuse("no proof of the cluster secret in time", seconds=PROOF_SECONDS)

    def origin(self, peer: tuple[str, int]) -> str:
        """The address a connection from ``peer`` counts against: its own (a relay says otherwise)."""
        return peer[0]

    def _onNewIncomingConnection(self, conn: TcpConnection) -> None:  # noqa: N802
        super()._onNewIncomingConnection(conn)
        if not isinstance(conn, GuardedConnection):
            return
        peer = conn.peer()
        if peer is None:
            return
        origin = self.origin(peer)
        unproven = sum(1 for other in self._unknownConnections
                       if isinstance(other, GuardedConnection) and not other.proven and (p := other.peer()) is not None
                       and self.origin(p) == origin)
        if unproven > UNPROVEN_PER_ADDRESS:
            conn.refuse("too many connections without proof from one address", bound=UNPROVEN_PER_ADDRESS)


def install() -> None:
    """Make pysyncobj open and accept :class:`GuardedConnection` s (idempotent)."""
    probe = TcpConnection(poller=None)
    missing = [name for name in _PRIVATE if not hasattr(probe, name)]
    missing += [name for name in _OVERRIDDEN if not hasattr(TcpConnection, name)]
    if missing:
        raise RuntimeError(f"this pysyncobj release reads its connections otherwise (no {', '.join(missing)}); "
                           "the Raft port's bounds (broker/cluster/raft_guard.py) must be brought up to date")
    tcp_server.TcpConnection = GuardedConnection  # type: ignore[misc]
    transport.TcpConnection = GuardedConnection  # type: ignore[misc]
