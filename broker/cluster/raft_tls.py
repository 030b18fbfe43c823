"""Raft over TLS: pysyncobj's connections between brokers carried inside TLS, when the brokers reach each
other over TLS (an SSL or SASL_SSL ``inter.broker.listener.name``).

pysyncobj has its own TCP transport without TLS and knows its peers by their addresses, so TLS goes around
it rather than into it:

* the node's Raft address (``cluster.raft.listen``, the address its peers know it by) is served by a TLS
  server with the inter-broker listener's certificate (and its client-certificate rule); each connection
  is relayed to pysyncobj, which listens on a loopback port of its own;
* for each peer there is a loopback port that pysyncobj connects to instead of the peer's address
  (:func:`tunnelled_transport`); each connection there is relayed to the peer's Raft address over TLS,
  checking its certificate with the inter-broker listener's truststore. A voter added at run time (or replayed
  from the journal) gets its port the first time pysyncobj connects to it, so the voters may change.

Peers keep their names (addresses) and pysyncobj's own encryption (the cluster secret's raft key) stays on inside
the tunnel. The relays run on the broker's event loop.

What a stranger's connections may cost (:mod:`raft_guard` bounds them at pysyncobj's port, where every relayed
connection comes from loopback):

* an address may have at most ``raft_guard.UNPROVEN_PER_ADDRESS`` connections that are still within their time
  to prove themselves (the TLS handshake, :data:`HANDSHAKE_SECONDS`, then the secret, ``PROOF_SECONDS``);
  more are closed as they are accepted, before their handshake;
* each relayed connection leaves from a loopback port the tunnel chose before connecting, and tells the guard
  which address it stands for (:meth:`RaftTlsTunnels.origin`), so one address's unproven connections do not
  count against the others' (a stranger holding its share must not keep a peer's reconnection out).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
from functools import partial

import structlog
from pysyncobj.monotonic import monotonic
from pysyncobj.tcp_connection import CONNECTION_STATE
from pysyncobj.transport import TCPTransport

from broker.cluster import raft_guard
from broker.cluster.raft_guard import GuardedTransport

log = structlog.get_logger("broker.cluster.raft_tls")

_CHUNK = 1 << 16
HANDSHAKE_SECONDS = 10.0
_LOOPBACK = "127.0.0.1"


def _loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


class RaftTlsTunnels:
    def __init__(self, listen: str, peers: list[str], server_context: ssl.SSLContext,
                 client_context: ssl.SSLContext) -> None:
        self.listen = listen
        self.peers = list(peers)
        self.server_context = server_context
        self.client_context = client_context
        # where pysyncobj listens (loopback) and, per peer address, where it connects instead
        self.internal = f"127.0.0.1:{_loopback_port()}"
        self.local_ports: dict[str, int] = {}
        self._servers: list[asyncio.Server] = []
        self._pipes: set[asyncio.Task] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        # peers whose tunnel is being opened, and the tasks opening them
        self._opening: set[str] = set()
        self._openers: set[asyncio.Task] = set()
        # per address, its inbound connections still within their time to prove themselves (-> when opened)
        self._unsettled: dict[str, dict[object, float]] = {}
        # loopback port a relay to pysyncobj leaves from -> the address it was accepted from (read by pysyncobj's
        # thread: one dict lookup at a time)
        self._relayed_from: dict[int, str] = {}

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        host, port = _split(self.listen)
        # TLS is started by :meth:`_inbound`, once the connection is admitted
        self._servers.append(await asyncio.start_server(self._inbound, host, port, reuse_address=True))
        for peer in self.peers:
            await self._open(peer)
        log.info("raft traffic goes over TLS", listen=self.listen, internal=self.internal)

    async def _open(self, peer: str) -> None:
        server = await asyncio.start_server(partial(self._outbound, peer), "127.0.0.1", 0)
        self._servers.append(server)
        self.local_ports[peer] = server.sockets[0].getsockname()[1]

    def local_port(self, peer: str) -> int | None:
        """The loopback port of the tunnel to ``peer``, or None while it is being opened: called on pysyncobj's
        thread, which tries again after its connection retry time."""
        port = self.local_ports.get(peer)
        if port is None and peer not in self._opening and self._loop is not None:
            self._opening.add(peer)
            self._loop.call_soon_threadsafe(self._open_later, peer)
        return port

    def _open_later(self, peer: str) -> None:
        async def open_tunnel() -> None:
            try:
                await self._open(peer)
                log.info("raft tunnel opened for a new voter", peer=peer)
            except OSError as exc:
                log.warning("raft tunnel for a new voter not opened", peer=peer, error=str(exc))
            finally:
                self._opening.discard(peer)

        task = asyncio.ensure_future(open_tunnel())
        self._openers.add(task)
        task.add_done_callback(self._openers.discard)

    async def stop(self) -> None:
        for task in list(self._openers):
            task.cancel()
        await asyncio.gather(*self._openers, return_exceptions=True)
        for server in self._servers:
            server.close()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        for server in self._servers:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await server.wait_closed()
        self._servers.clear()

    def origin(self, peer: tuple[str, int]) -> str:
        """The address a connection pysyncobj accepted from ``peer`` stands for: where its relay's connection was
        accepted from, or its own address (not one of the relays)."""
        if peer[0] == _LOOPBACK:
            return self._relayed_from.get(peer[1], peer[0])
        return peer[0]

    def _admit(self, address: str, token: object) -> bool:
        """Count a new connection from ``address`` among its unsettled ones, unless it has its share already."""
        now = time.monotonic()
        window = HANDSHAKE_SECONDS + raft_guard.PROOF_SECONDS
        held = self._unsettled.setdefault(address, {})
        for key, opened in list(held.items()):
            if now - opened > window:
                del held[key]  # proven by now, or closed by the guard
        if len(held) >= raft_guard.UNPROVEN_PER_ADDRESS:
            return False
        held[token] = now
        return True

    def _settle(self, address: str, token: object) -> None:
        held = self._unsettled.get(address)
        if held is not None:
            held.pop(token, None)
            if not held:
                del self._unsettled[address]

    async def _inbound(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A peer's connection: its TLS handshake, then relayed to pysyncobj's loopback port."""
        peer = writer.get_extra_info("peername")
        address = peer[0] if isinstance(peer, tuple) else "?"
        token = object()
        task = asyncio.current_task()
        assert task is not None
        if not self._admit(address, token):
            raft_guard.refusals.warn("raft connection closed", reason="too many connections without proof from "
                                     "one address", peer=address, bound=raft_guard.UNPROVEN_PER_ADDRESS)
            writer.transport.abort()
            return
        self._pipes.add(task)  # cancelled by :meth:`stop` from now on, in its handshake too
        try:
            try:
                await writer.start_tls(self.server_context, ssl_handshake_timeout=HANDSHAKE_SECONDS)
            except (OSError, TimeoutError, ssl.SSLError) as exc:
                log.debug("raft TLS handshake failed", peer=address, error=repr(exc))
                writer.transport.abort()
                return
            await self._relay_inbound(address, reader, writer)
        finally:
            self._pipes.discard(task)
            self._settle(address, token)

    async def _relay_inbound(self, address: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = _split(self.internal)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        source: int | None = None
        try:
            try:
                sock.bind((_LOOPBACK, 0))
                source = sock.getsockname()[1]
                self._relayed_from[source] = address  # before pysyncobj can accept it
                await asyncio.get_running_loop().sock_connect(sock, (host, port))
                upstream_reader, upstream_writer = await asyncio.open_connection(sock=sock)
            except OSError:
                sock.close()
                writer.close()
                return
            await self._relay(reader, writer, upstream_reader, upstream_writer)
        finally:
            if source is not None:
                self._relayed_from.pop(source, None)

    async def _outbound(self, peer: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """pysyncobj connecting to ``peer``: relayed to the peer's Raft address over TLS."""
        host, port = _split(peer)
        try:
            async with asyncio.timeout(10):
                upstream_reader, upstream_writer = await asyncio.open_connection(
                    host, port, ssl=self.client_context, server_hostname=host)
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            log.debug("raft peer not reachable over TLS", peer=peer, error=repr(exc))
            writer.close()
            return
        await self._relay(reader, writer, upstream_reader, upstream_writer)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     upstream_reader: asyncio.StreamReader, upstream_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._pipes.add(task)
        try:
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        finally:
            self._pipes.discard(task)
            for w in (writer, upstream_writer):
                w.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until either side closes; then close the other one, so both ends see the connection end."""
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError, OSError):
        pass
    finally:
        writer.close()


def tunnelled_transport(tunnels: RaftTlsTunnels) -> type[TCPTransport]:
    """pysyncobj's TCP transport (:class:`GuardedTransport`), connecting to each peer through its loopback tunnel
    port (:meth:`RaftTlsTunnels.local_port`, None while there is none yet), and counting each accepted
    connection against the address its relay was accepted from."""
    local_port = tunnels.local_port

    class TunnelledTransport(GuardedTransport):
        def origin(self, peer: tuple[str, int]) -> str:
            return tunnels.origin(peer)

        def _connectIfNecessarySingle(self, node):  # noqa: N802 (pysyncobj's name)
            # pysyncobj's own logic (transport.py), with the tunnel's address in place of the peer's
            if node in self._connections and self._connections[node].state != CONNECTION_STATE.DISCONNECTED:
                return True
            if not self._shouldConnect(node):
                return False
            conf = self._syncObj.conf
            if node in self._lastConnectAttempt and monotonic() - self._lastConnectAttempt[node] < conf.connectionRetryTime:
                return False
            self._lastConnectAttempt[node] = monotonic()
            port = local_port(node.address)
            return port is not None and self._connections[node].connect("127.0.0.1", port)

    return TunnelledTransport

