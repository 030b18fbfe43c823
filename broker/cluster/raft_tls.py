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
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Callable
from functools import partial

import structlog
from pysyncobj.monotonic import monotonic
from pysyncobj.tcp_connection import CONNECTION_STATE
from pysyncobj.transport import TCPTransport

from broker.cluster.raft_guard import GuardedTransport

log = structlog.get_logger("broker.cluster.raft_tls")

_CHUNK = 1 << 16


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

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        host, port = _split(self.listen)
        self._servers.append(await asyncio.start_server(self._inbound, host, port, ssl=self.server_context,
                                                        reuse_address=True, ssl_handshake_timeout=10.0))
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
                await asyncio.wait_for(server.wait_closed(), 2)
        self._servers.clear()

    async def _inbound(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A peer's TLS connection, relayed to pysyncobj's loopback port."""
        host, port = _split(self.internal)
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await self._relay(reader, writer, upstream_reader, upstream_writer)

    async def _outbound(self, peer: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """pysyncobj connecting to ``peer``: relayed to the peer's Raft address over TLS."""
        host, port = _split(peer)
        try:
            upstream_reader, upstream_writer = await asyncio.wait_for(asyncio.open_connection(
                host, port, ssl=self.client_context, server_hostname=host), 10)
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


def tunnelled_transport(local_port: Callable[[str], int | None]) -> type[TCPTransport]:
    """pysyncobj's TCP transport (:class:`GuardedTransport`), connecting to each peer through its loopback tunnel
    port (``local_port`` of its address, None while there is none yet)."""

    class TunnelledTransport(GuardedTransport):
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

