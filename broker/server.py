"""The broker's TCP front end: framing, one request at a time per connection, dispatch.

Kafka mutes a connection while one of its requests is being processed, so responses go back in request
order and a long-polling Fetch holds back the requests behind it on the same connection. We do the same
by handling each connection's requests sequentially; connections are served concurrently.

Bad input never takes the broker down. What Kafka closes the connection for, we close it for: a frame
larger than ``socket.request.max.bytes``, a header we cannot parse, an unknown API key, an unsupported
version of any API but ApiVersions (which is answered in v0 form, KIP-511), a body that does not decode.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Generator, Mapping
from typing import Any, Literal, Protocol

import structlog

from broker.client import set_buffer_size
from broker.cluster.view import ClusterView
from broker.config import BrokerConfig
from broker.connection_limits import ConnectionQuotas, ListenerGate
from broker.errors import ErrorCode
from broker.framing import FrameReader, FrameServer, MemoryBudget, start_frame_server
from broker.handlers import HANDLERS, RequestContext
from broker.handlers.services import Services
from broker.protocol.api import (
    ApiKey,
    DecodeError,
    FieldError,
    UnknownApiKeyError,
    UnsupportedVersionError,
    decode_request,
    encode_response,
    encode_response_chunks,
)
from broker.protocol.types import Chunk, FileRegion, StringTooLongError
from broker.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotas,
    QuotaWindow,
)
from broker.security.acl import ANONYMOUS, certificate_principal
from broker.security.broker_login import MECHANISM as BROKER_MECHANISM
from broker.security.broker_login import BrokerIdentity, BrokerLoginError, BrokerLoginServer
from broker.security.sasl import PLAIN, SaslSettings
from broker.security.scram import ScramError, ScramExchange, ScramStore

log = structlog.get_logger("broker.server")


class RequestMetrics(Protocol):
    """What the server counts of each request (broker.metrics.BrokerMetrics, a sibling it does not import)."""

    requests_in_flight: int

    def request_handled(self, api_key: int, api_version: int, body: dict[str, Any], seconds: float) -> None: ...


class ServedBroker(Protocol):
    """The part of the broker a listener serves: the broker builds its listeners and hands itself over as this,
    so the server never imports the broker (issue 32: no import cycle)."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def api_versions(self) -> dict[int, tuple[int, int]]: ...
    @property
    def services(self) -> Services: ...
    @property
    def metrics(self) -> RequestMetrics: ...
    @property
    def connection_quotas(self) -> ConnectionQuotas: ...
    @property
    def request_memory(self) -> MemoryBudget: ...
    @property
    def client_quotas(self) -> ClientQuotas: ...
    @property
    def scram(self) -> ScramStore: ...
    @property
    def inter_broker_key(self) -> bytes | None: ...
    @property
    def cluster_view(self) -> ClusterView: ...

    def quota_window(self) -> QuotaWindow: ...

_SIZE = struct.Struct(">i")
SASL_VERSIONS: dict[int, tuple[int, int]] = {ApiKey.SASL_HANDSHAKE: (0, 1), ApiKey.SASL_AUTHENTICATE: (0, 2)}


class _SaslSession:
    """One connection's login on a SASL listener: the mechanism chosen, then the user."""

    __slots__ = ("mechanism", "user", "bare_token", "scram", "expires_at", "reauth_from")

    def __init__(self) -> None:
        self.mechanism: str | None = None
        self.user: str | None = None
        self.bare_token = False  # SaslHandshake v0: the tokens follow as bare frames
        self.scram: ScramExchange | None = None  # a SCRAM login between its two rounds
        self.expires_at: float | None = None  # connections.max.reauth.ms: when the login runs out (monotonic)
        self.reauth_from: str | None = None  # the user of a re-authentication under way (KIP-368)


class _Watchdog:
    """Closes a connection idle for ``connections.max.idle.ms`` (no bytes in or out, no request being
    handled), as Kafka does, and one on a SASL listener whose client has not logged in that long after it
    connected: Kafka's idle check alone would let a client that trickles bytes hold an unauthenticated
    connection forever. The timer is set once per period, not per read: reads only note the time."""

    def __init__(self, reader: FrameReader, writer: asyncio.StreamWriter, idle_seconds: float,
                 session: _SaslSession | None, client: str) -> None:
        self.loop = asyncio.get_running_loop()
        self.reader, self.writer, self.idle, self.session, self.client = reader, writer, idle_seconds, session, client
        self.connected_at = self.loop.time()
        self.last_sent = self.connected_at
        self.busy = False  # a request is being handled (a long-polling Fetch is not idleness)
        self.handle = self.loop.call_at(self.connected_at + idle_seconds, self._check)

    def _check(self) -> None:
        now = self.loop.time()
        login_by = self.connected_at + self.idle if self.session is not None and self.session.user is None else None
        if login_by is not None and now >= login_by:
            return self._close("closing connection: no SASL login within connections.max.idle.ms")
        last = max(self.reader.last_active, self.last_sent)
        if self.busy:
            due = now + self.idle
        elif now - last >= self.idle:
            return self._close("closing idle connection (connections.max.idle.ms)")
        else:
            due = last + self.idle
        self.handle = self.loop.call_at(due if login_by is None else min(due, login_by), self._check)

    def _close(self, message: str) -> None:
        log.info(message, client=self.client, idle_ms=int(self.idle * 1000))
        self.writer.transport.abort()

    def answered(self) -> None:
        self.busy = False
        self.last_sent = self.loop.time()

    def cancel(self) -> None:
        self.handle.cancel()


class _BrokerPeer:
    """One connection's inter-broker login (:mod:`broker.security.broker_login`): under way, then proven."""

    __slots__ = ("login", "identity")

    def __init__(self) -> None:
        self.login: BrokerLoginServer | None = None
        self.identity: BrokerIdentity | None = None


class _Throttle:
    """How long a connection is muted after its last request for the client's quotas, and whether the client
    holds back by itself (KIP-219) or its answer is what waits."""

    __slots__ = ("ms", "client_side")

    def __init__(self) -> None:
        self.ms = 0
        self.client_side = True

    def reset(self) -> None:
        self.ms = 0
        self.client_side = True


# The first version of each API whose client holds back by itself when told to (Kafka's shouldClientThrottle);
# an API not here never does, so its answer waits out the throttle on the broker.
CLIENT_THROTTLES_FROM: dict[int, int] = {
    ApiKey.PRODUCE: 6, ApiKey.FETCH: 8, ApiKey.LIST_OFFSETS: 3, ApiKey.METADATA: 6, ApiKey.OFFSET_COMMIT: 4,
    ApiKey.OFFSET_FETCH: 4, ApiKey.FIND_COORDINATOR: 2, ApiKey.JOIN_GROUP: 3, ApiKey.HEARTBEAT: 2,
    ApiKey.LEAVE_GROUP: 2, ApiKey.SYNC_GROUP: 2, ApiKey.DESCRIBE_GROUPS: 2, ApiKey.LIST_GROUPS: 2,
    ApiKey.API_VERSIONS: 2, ApiKey.CREATE_TOPICS: 3, ApiKey.DELETE_TOPICS: 2, ApiKey.DELETE_RECORDS: 1,
    ApiKey.INIT_PRODUCER_ID: 1, ApiKey.ADD_PARTITIONS_TO_TXN: 1, ApiKey.ADD_OFFSETS_TO_TXN: 1, ApiKey.END_TXN: 1,
    ApiKey.TXN_OFFSET_COMMIT: 1, ApiKey.DESCRIBE_ACLS: 1, ApiKey.CREATE_ACLS: 1, ApiKey.DELETE_ACLS: 1,
    ApiKey.DESCRIBE_CONFIGS: 2, ApiKey.ALTER_CONFIGS: 1, ApiKey.DESCRIBE_LOG_DIRS: 1, ApiKey.CREATE_PARTITIONS: 1,
    ApiKey.DELETE_GROUPS: 1, ApiKey.INCREMENTAL_ALTER_CONFIGS: 0, ApiKey.OFFSET_DELETE: 0,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: 0, ApiKey.ALTER_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: 0,
}


def _quota_applies(ctx: RequestContext) -> bool:
    """Whether the client's quotas count this request: not ApiVersions (asked before anything else, as Kafka
    exempts it), nor what brokers of the cluster ask each other (replication is never throttled by clients')."""
    return ctx.api_key != ApiKey.API_VERSIONS and ctx.peer_broker is None


class _TimedCoroutine:
    """Runs a handler's coroutine and adds up the time its code ran on the event loop, not the time it waited
    (a long-polling Fetch, a Produce waiting for its ISR): Kafka's request time quota counts a request
    handler thread's time, not the purgatory's."""

    __slots__ = ("awaitable", "seconds")

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self.awaitable = awaitable
        self.seconds = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        coroutine = self.awaitable.__await__()
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            started = time.perf_counter()
            try:
                waiting_on = coroutine.send(sent) if thrown is None else coroutine.throw(thrown)
            except StopIteration as stop:
                return stop.value
            finally:
                self.seconds += time.perf_counter() - started
            try:
                sent, thrown = (yield waiting_on), None
            except BaseException as exc:  # a cancellation, given to the handler as the task would give it
                sent, thrown = None, exc


class _LastAnswer:
    """An answer after which the connection is closed (a failed or out-of-order login: Kafka's authentication
    errors, whose answer waits connection.failed.authentication.delay.ms)."""

    __slots__ = ("chunks",)

    def __init__(self, chunks: list) -> None:
        self.chunks = chunks


class KafkaServer:
    """One listener: plain TCP, or TLS with the listener's context (``ssl_context``)."""

    def __init__(self, broker: ServedBroker, host: str, port: int, max_request_bytes: int, *,
                 ssl_context: ssl.SSLContext | None = None, listener: str = "PLAINTEXT",
                 sasl: SaslSettings | None = None) -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self.max_request_bytes = max_request_bytes
        self.ssl_context = ssl_context
        self.listener = listener
        self.sasl = sasl
        # A SASL listener also serves the two SASL APIs (and nothing else before a client has logged in).
        self.api_versions: dict[int, tuple[int, int]] = (
            broker.api_versions if sasl is None else {**broker.api_versions, **SASL_VERSIONS})
        self._server: FrameServer | None = None
        self._serving = False
        self._connections: set[asyncio.Task] = set()

    def reconfigure(self, ssl_context: ssl.SSLContext | None, sasl: SaslSettings | None) -> None:
        """New TLS and SASL settings from the dynamic broker configs: connections accepted from now on use
        them; open ones carry on with the certificate they were handed (a logged-in user stays logged in until
        connections.max.reauth.ms asks again), as on Kafka."""
        self.sasl = sasl
        self.ssl_context = ssl_context
        if self._server is not None:
            self._server.ssl_context = ssl_context

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def _idle_seconds(self) -> float | None:
        """connections.max.idle.ms in seconds; None when negative (Kafka then closes no idle connection)."""
        idle_ms = self.broker.config["connections.max.idle.ms"]
        return idle_ms / 1000 if idle_ms >= 0 else None

    async def start(self, serve: bool = True) -> None:
        """Listen; accept connections now, or (``serve`` false) once ``serve()`` is called: until then the kernel
        queues them, as Kafka's acceptors do before a broker has caught up with the metadata."""
        config = self.broker.config
        # Kafka's exemption: brokers of a cluster reach each other whatever the clients hold
        exempt = config.cluster is not None and self.listener == config.inter_broker_listener
        # a TLS handshake is part of the login: the same deadline (a connection idle in its handshake is idle)
        self._server = await start_frame_server(self._serve_connection, self.host, self.port, limit=1 << 20,
                                                ssl=self.ssl_context, ssl_handshake_timeout=self._idle_seconds(),
                                                gate=ListenerGate(self.broker.connection_quotas, exempt=exempt),
                                                budget=self.broker.request_memory,
                                                backlog=config["socket.listen.backlog.size"], start_serving=False)
        self._size_socket_buffers()
        self._choose_congestion_control()
        self.port = self._server.sockets[0].getsockname()[1]
        if serve:
            await self.serve()

    async def serve(self) -> None:
        """Accept connections (once: a second call does nothing)."""
        assert self._server is not None
        if not self._serving:
            self._serving = True
            await self._server.start_serving()

    def _size_socket_buffers(self) -> None:
        """socket.receive.buffer.bytes and socket.send.buffer.bytes on the listening sockets, before the first
        connection: accepted sockets take both from the listener (Kafka sets the send size on each connection;
        the result is the same). A size the kernel caps (net.core.rmem_max, net.core.wmem_max) is named in a
        warning rather than left smaller without a word."""
        for key, option, limit in (("socket.receive.buffer.bytes", socket.SO_RCVBUF, "net.core.rmem_max"),
                                   ("socket.send.buffer.bytes", socket.SO_SNDBUF, "net.core.wmem_max")):
            wanted = self.broker.config.get(key, -1)
            if wanted == -1:
                continue
            for sock in self._server.sockets:
                granted = set_buffer_size(sock, option, wanted)
                if granted < wanted:
                    log.warning("socket buffer smaller than configured: the kernel caps it", key=key,
                                configured=wanted, granted=granted, limit=limit, listener=self.listener)

    def _choose_congestion_control(self) -> None:
        """socket.congestion.control on the listening sockets: the connections they accept keep the listener's
        choice (the kernel gives them the system's only when the listener has none of its own)."""
        name = self.broker.config.get("socket.congestion.control", "")
        if name:
            for sock in self._server.sockets:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, name.encode())

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await self._server.wait_closed()
        self._server = None

    async def _serve_connection(self, reader: FrameReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        client_host = peer[0] if peer else ""
        session = _SaslSession() if self.sasl is not None else None
        idle = self._idle_seconds()
        watchdog = _Watchdog(reader, writer, idle, session, client_host) if idle is not None else None
        try:
            await self._request_loop(reader, writer, client_host, session, watchdog)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection failed", client=client_host)
        finally:
            if watchdog is not None:
                watchdog.cancel()
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _request_loop(self, reader: FrameReader, writer: asyncio.StreamWriter, client_host: str,
                            session: _SaslSession | None, watchdog: _Watchdog | None) -> None:
        peer = _BrokerPeer()
        throttle = _Throttle()
        # Kafka's default principal: the SASL user once logged in, else the TLS client certificate's subject
        tls_principal = certificate_principal(writer.get_extra_info("peercert")) if self.ssl_context else ANONYMOUS
        while True:
            size_bytes = await reader.readexactly(4)
            (size,) = _SIZE.unpack(size_bytes)
            # before a login, Kafka's sasl.server.max.receive.size bounds a frame
            limit = (self.max_request_bytes if session is None or session.user
                     else self.broker.config["sasl.server.max.receive.size"])
            if size < 0 or size > limit:
                log.warning("closing connection: request size out of bounds", client=client_host, size=size,
                            limit=limit)
                return
            frame = await reader.read_frame(size)
            if watchdog is not None:
                watchdog.busy = True
            try:
                if session is not None and session.bare_token:
                    # After SaslHandshake v0 the tokens come as bare frames, and so do the answers.
                    answer = self._log_in(session, bytes(frame), client_host)
                    if answer is None:
                        await self._after_failed_login()
                        return
                    session.bare_token = session.user is None
                    writer.write(_SIZE.pack(len(answer)) + answer)
                    await writer.drain()
                    if watchdog is not None:
                        watchdog.answered()
                    continue
                principal = f"User:{session.user}" if session is not None and session.user else tls_principal
                throttle.reset()
                response = await self._handle_frame(frame, client_host, peer, session, principal, throttle)
            finally:
                reader.release_frame(frame)
            if response is False:
                return
            if isinstance(response, _LastAnswer):
                await self._after_failed_login()
                await _send(writer, response.chunks)
                return
            if throttle.ms and not throttle.client_side:
                # a client from before KIP-219 does not hold back by itself: its answer waits out the throttle
                await asyncio.sleep(throttle.ms / 1000)
            if response is not None:
                await _send(writer, response)
            if throttle.ms and throttle.client_side:
                # KIP-219: answered at once, then the connection is muted (nothing read from it) for the throttle
                await asyncio.sleep(throttle.ms / 1000)
            if watchdog is not None:
                watchdog.answered()

    async def _after_failed_login(self) -> None:
        """Kafka's connection.failed.authentication.delay.ms: the answer to a failed login, and the close, wait
        that long, so that a client guessing passwords (or a loop of bad logins) gets few tries a second."""
        await asyncio.sleep(self.broker.config["connection.failed.authentication.delay.ms"] / 1000)

    def _log_in(self, session: _SaslSession, token: bytes, client_host: str) -> bytes | None:
        """One SASL round: the bytes to answer with (the user is set once logged in), None on failure."""
        answer = self._login_round(session, token, client_host)
        if answer is None or session.scram is not None:
            return answer
        # a login (or a re-authentication) is complete
        if session.reauth_from is not None:
            if session.user != session.reauth_from:
                log.info("SASL re-authentication as another user refused", client=client_host,
                         listener=self.listener, before=session.reauth_from, after=session.user)
                return None
            log.info("SASL re-authentication", client=client_host, listener=self.listener, user=session.user)
            session.reauth_from = None
        lifetime_ms = self.broker.config["connections.max.reauth.ms"]
        session.expires_at = time.monotonic() + lifetime_ms / 1000 if lifetime_ms > 0 else None
        return answer

    def _login_round(self, session: _SaslSession, token: bytes, client_host: str) -> bytes | None:
        assert session.mechanism is not None  # SaslAuthenticate before SaslHandshake was refused
        if session.mechanism == PLAIN:
            session.user = self.sasl.check_plain(token)
            answer = b"" if session.user is not None else None
        else:
            try:
                if session.scram is None:
                    session.scram = ScramExchange(session.mechanism, self.broker.scram)
                    answer = session.scram.first(token)
                else:
                    session.user, answer = session.scram.final(token)
                    session.scram = None
            except ScramError as exc:
                log.info("SASL authentication failed", client=client_host, listener=self.listener,
                         mechanism=session.mechanism, reason=str(exc))
                return None
        if answer is None:
            log.info("SASL authentication failed", client=client_host, listener=self.listener,
                     mechanism=session.mechanism)
        return answer

    def _sasl(self, header: Any, body: dict[str, Any], session: _SaslSession,
              client_host: str) -> list[Chunk] | _LastAnswer:
        """SaslHandshake and SaslAuthenticate on a SASL listener (Kafka's order: handshake, then the token)."""
        version, correlation = header.api_version, header.correlation_id
        if header.api_key == ApiKey.SASL_HANDSHAKE:
            mechanisms = list(self.sasl.mechanisms)
            reauthenticating = (session.user is not None and session.scram is None and version >= 1
                                and session.reauth_from is None and session.expires_at is not None
                                and body["mechanism"] == session.mechanism)
            if (session.user is not None or session.mechanism is not None) and not reauthenticating:
                # a second login is a re-authentication (KIP-368): only with connections.max.reauth.ms set,
                # with SaslHandshake v1+ and the same mechanism
                return _LastAnswer(encode_response_chunks(ApiKey.SASL_HANDSHAKE, version, correlation, {
                    "error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": mechanisms}))
            if reauthenticating:
                session.reauth_from = session.user
            if body["mechanism"] not in mechanisms:
                return _LastAnswer(encode_response_chunks(ApiKey.SASL_HANDSHAKE, version, correlation, {
                    "error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": mechanisms}))
            session.mechanism = body["mechanism"]
            session.bare_token = version == 0
            return encode_response_chunks(ApiKey.SASL_HANDSHAKE, version, correlation,
                                          {"error_code": 0, "mechanisms": mechanisms})
        answer: dict[str, Any] = {"error_code": 0, "error_message": None, "auth_bytes": b"", "session_lifetime_ms": 0}
        if (session.user is not None and session.reauth_from is None) or session.mechanism is None:
            answer.update(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                          error_message="SaslAuthenticate comes once, after SaslHandshake")
            return _LastAnswer(encode_response_chunks(ApiKey.SASL_AUTHENTICATE, version, correlation, answer))
        reply = self._log_in(session, body["auth_bytes"], client_host)
        if reply is None:
            message = ("Authentication failed: Invalid username or password" if session.mechanism == PLAIN else
                       "Authentication failed during authentication due to invalid credentials with SASL "
                       f"mechanism {session.mechanism}")  # Kafka's words
            answer.update(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=message)
            return _LastAnswer(encode_response_chunks(ApiKey.SASL_AUTHENTICATE, version, correlation, answer))
        answer["auth_bytes"] = reply
        if session.scram is None and session.expires_at is not None:
            # v1+ clients re-authenticate within this (KIP-368)
            answer["session_lifetime_ms"] = max(int((session.expires_at - time.monotonic()) * 1000), 1)
        return encode_response_chunks(ApiKey.SASL_AUTHENTICATE, version, correlation, answer)

    async def _handle_frame(self, frame: bytes | memoryview, client_host: str, peer: _BrokerPeer,
                            session: _SaslSession | None = None, principal: str = ANONYMOUS,
                            throttle: _Throttle | None = None) -> list[Chunk] | _LastAnswer | None | Literal[False]:
        """The encoded response, None when the request gets no answer, False to close the connection.
        ``throttle`` gets how long the connection is to be muted for the client's quotas."""
        try:
            header, body = decode_request(frame)
        except UnsupportedVersionError as exc:
            if exc.header is not None and exc.header.api_key == ApiKey.API_VERSIONS:
                return [self._api_versions_fallback(exc.header.correlation_id)]
            log.info("closing connection: unsupported api version", client=client_host, error=str(exc))
            return False
        except UnknownApiKeyError as exc:
            log.info("closing connection: unknown api key", client=client_host, error=str(exc))
            return False
        except DecodeError as exc:
            log.info("closing connection: request does not decode", client=client_host, error=str(exc))
            return False
        if _is_broker_login(header, body, peer) and (session is None or session.user):
            # on any listener, after the listener's own login, and not advertised: no Kafka client asks for it
            return self._broker_login(header, body, peer, client_host)
        supported = self.api_versions.get(header.api_key)
        if supported is None or not supported[0] <= header.api_version <= supported[1]:
            if header.api_key == ApiKey.API_VERSIONS:
                return [self._api_versions_fallback(header.correlation_id)]
            log.info("closing connection: api version not advertised", client=client_host,
                     api_key=header.api_key, api_version=header.api_version)
            return False
        if session is not None and header.api_key in SASL_VERSIONS:
            return self._sasl(header, body, session, client_host)
        if session is not None and session.user is None and header.api_key != ApiKey.API_VERSIONS:
            log.info("closing connection: request before SASL authentication", client=client_host,
                     api_key=header.api_key)
            return False
        if session is not None and session.expires_at is not None and time.monotonic() > session.expires_at:
            log.info("closing connection: SASL session expired (connections.max.reauth.ms)", client=client_host,
                     user=session.user, api_key=header.api_key)
            return False
        handle = HANDLERS[header.api_key]
        ctx = RequestContext(self.broker.services, header.api_key, header.api_version,
                             header.correlation_id, header.client_id, client_host, self.listener, self.api_versions,
                             principal, peer.identity)
        metrics = self.broker.metrics
        metrics.requests_in_flight += 1
        started = time.perf_counter()
        # timed only while quotas are set: request_percentage needs it, nothing else does
        handling = _TimedCoroutine(handle(ctx, body)) if self.broker.client_quotas.entries else None
        try:
            result = await (handling if handling is not None else handle(ctx, body))
        except Exception:
            log.exception("handler failed; closing connection", api_key=header.api_key,
                          api_version=header.api_version, client=client_host)
            return False
        finally:
            metrics.requests_in_flight -= 1
            metrics.request_handled(header.api_key, header.api_version, body, time.perf_counter() - started)
        try:
            if throttle is not None and self.broker.client_quotas.entries and _quota_applies(ctx):
                busy = handling.seconds if handling is not None else 0.0
                result, chunks = self._throttled(ctx, len(frame), busy, result, throttle)
                if chunks is not None:
                    return chunks
            if result is None:
                return None
            return encode_response_chunks(header.api_key, header.api_version, header.correlation_id, result)
        except StringTooLongError as exc:
            # Kafka cannot serialize such an answer either; the client learns from the closed connection
            log.warning("closing connection: the answer cannot carry a string the request made too long",
                        api_key=header.api_key, api_version=header.api_version, client=client_host, error=str(exc))
            return False
        except FieldError as exc:
            # a bug in the handler (a misspelled, misplaced or forgotten field): no answer rather than a wrong one
            log.error("closing connection: the handler's answer does not match its message's fields",
                      api_key=header.api_key, api_version=header.api_version, client=client_host, error=str(exc))
            return False

    def _throttled(self, ctx: RequestContext, request_bytes: int, busy_seconds: float,
                   result: Mapping[str, Any] | None, throttle: _Throttle) -> tuple[Mapping[str, Any] | None,
                                                                                   list[Chunk] | None]:
        """Count the request against the client's quotas (Kafka's KafkaApis): its time against
        request_percentage, a Produce's size against producer_byte_rate, a Fetch's answer against
        consumer_byte_rate; a throttle the handler put in its answer (controller_mutation_rate) stands. Over a quota, the answer carries the longest throttle time and ``throttle`` mutes the
        connection; a throttled Fetch is answered with no data (its bytes are taken back from the rate). The
        answer to send, and its encoding where it was made here."""
        broker = self.broker
        quotas = broker.client_quotas
        window = broker.quota_window()
        now_ms = int(time.monotonic() * 1000)
        user, client_id = ctx.quota_client()
        # Kafka counts request time in percent of one thread: 100 per second of time
        throttle_ms = quotas.record(REQUEST_PERCENTAGE, user, client_id, busy_seconds * 100, now_ms, window,
                                    bounded=True)
        if result is not None:  # a throttle the handler found (controller_mutation_rate)
            throttle_ms = max(throttle_ms, result.get("throttle_time_ms", 0))
        chunks: list[Chunk] | None = None
        if ctx.api_key == ApiKey.PRODUCE:
            throttle_ms = max(throttle_ms, quotas.record(PRODUCER_BYTE_RATE, user, client_id, request_bytes, now_ms,
                                                         window))
        elif ctx.api_key == ApiKey.FETCH and result is not None:
            chunks = encode_response_chunks(ctx.api_key, ctx.api_version, ctx.correlation_id, result)
            size = sum(len(chunk) for chunk in chunks)
            throttle_ms = max(throttle_ms, quotas.record(CONSUMER_BYTE_RATE, user, client_id, size, now_ms, window))
            if throttle_ms:
                quotas.unrecord(CONSUMER_BYTE_RATE, user, client_id, size, now_ms, window)
                for chunk in chunks:
                    if type(chunk) is FileRegion:
                        chunk.close()
                chunks = None
                result = {"error_code": ErrorCode.NONE, "session_id": 0, "responses": []}
        if not throttle_ms:
            return result, chunks
        throttle.ms = throttle_ms
        throttle.client_side = ctx.api_version >= CLIENT_THROTTLES_FROM.get(ctx.api_key, 1 << 15)
        if result is None:
            return None, None
        return {**result, "throttle_time_ms": throttle_ms}, None

    def _broker_login(self, header: Any, body: dict[str, Any], peer: _BrokerPeer,
                      client_host: str) -> list | _LastAnswer:
        """The inter-broker login's SaslHandshake and two SaslAuthenticate rounds; a failure closes the
        connection after its answer, as a failed SASL login does."""
        version, correlation = header.api_version, header.correlation_id
        if header.api_key == ApiKey.SASL_HANDSHAKE:
            answer = {"error_code": ErrorCode.NONE, "mechanisms": [BROKER_MECHANISM]}
            if peer.login is not None or peer.identity is not None:
                answer["error_code"] = ErrorCode.ILLEGAL_SASL_STATE  # a broker logs in once per connection
            elif self.broker.inter_broker_key is None:
                answer.update(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=[])  # a single node
            if answer["error_code"]:
                return _LastAnswer(encode_response_chunks(ApiKey.SASL_HANDSHAKE, version, correlation, answer))
            assert self.broker.inter_broker_key is not None  # a single node answered UNSUPPORTED_SASL_MECHANISM
            peer.login = BrokerLoginServer(self.broker.inter_broker_key, self.broker.cluster_view.broker_epoch)
            return encode_response_chunks(ApiKey.SASL_HANDSHAKE, version, correlation, answer)
        login = peer.login
        assert login is not None  # _is_broker_login routes SaslAuthenticate here only during a login
        answer = {"error_code": 0, "error_message": None, "auth_bytes": b"", "session_lifetime_ms": 0}
        try:
            if not login.started:
                answer["auth_bytes"] = login.first(body["auth_bytes"])
            else:
                peer.identity, answer["auth_bytes"] = login.final(body["auth_bytes"])
                peer.login = None
                log.info("broker logged in", client=client_host, listener=self.listener,
                         node_id=peer.identity.node_id, broker_epoch=peer.identity.epoch)
        except BrokerLoginError as exc:
            log.warning("inter-broker login refused", client=client_host, listener=self.listener, reason=str(exc))
            answer.update(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(exc), auth_bytes=b"")
            return _LastAnswer(encode_response_chunks(ApiKey.SASL_AUTHENTICATE, version, correlation, answer))
        return encode_response_chunks(ApiKey.SASL_AUTHENTICATE, version, correlation, answer)

    def _api_versions_fallback(self, correlation_id: int) -> bytes:
        """KIP-511: an ApiVersions request of a version we do not know is answered as v0 with error 35."""
        low, high = self.broker.api_versions[ApiKey.API_VERSIONS]
        body = {"error_code": 35, "api_keys": [{"api_key": ApiKey.API_VERSIONS, "min_version": low,
                                                 "max_version": high}]}
        return encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body)


def _is_broker_login(header: Any, body: dict[str, Any], peer: _BrokerPeer) -> bool:
    """A SaslHandshake v1+ for the inter-broker mechanism, or a SaslAuthenticate of that login under way."""
    if header.api_key == ApiKey.SASL_HANDSHAKE:
        return header.api_version >= 1 and body["mechanism"] == BROKER_MECHANISM
    return header.api_key == ApiKey.SASL_AUTHENTICATE and peer.login is not None


async def _send(writer: asyncio.StreamWriter, chunks: list) -> None:
    """Write a response's chunks in order; records left in log files go from the file to the socket with
    ``sendfile``, except on TLS connections, where they have to be encrypted on their way: read in there."""
    regions = [index for index, chunk in enumerate(chunks) if type(chunk) is FileRegion]
    if regions and writer.get_extra_info("ssl_object") is not None:
        for index in regions:
            region = chunks[index]
            chunks[index] = region.read()
            if len(chunks[index]) != len(region):
                raise ConnectionError(f"log data shrank while being read ({len(chunks[index])} of {len(region)} bytes)")
        regions = []
    if not regions:
        writer.writelines(chunks)
        await writer.drain()
        return
    try:
        start = 0
        for index in regions:
            writer.writelines(chunks[start:index])
            await _send_region(writer, chunks[index])
            start = index + 1
        writer.writelines(chunks[start:])
        await writer.drain()
    finally:
        for index in regions:
            chunks[index].close()


async def _send_region(writer: asyncio.StreamWriter, region: FileRegion) -> None:
    """Each piece goes from its file to the socket with ``sendfile``: straight away while the transport has
    nothing buffered and the socket takes it; the rest, once the socket is full, by ``loop.sendfile``, which
    waits for room (it first holds reads and waits for the transport's buffer to empty: for every piece,
    that cost more than the send)."""
    loop = asyncio.get_running_loop()
    transport = writer.transport
    sock = transport.get_extra_info("socket")
    sock_fd = sock.fileno() if sock is not None else -1
    for fd, position, length in region.pieces:
        end = position + length
        if sock_fd >= 0 and not transport.get_write_buffer_size():
            with contextlib.suppress(BlockingIOError):
                while position < end:
                    sent = os.sendfile(sock_fd, fd, position, end - position)
                    if not sent:
                        break  # the file ends early
                    position += sent
        if position < end:
            with os.fdopen(fd, "rb", buffering=0, closefd=False) as file:
                position += await loop.sendfile(transport, file, position, end - position)
        if position != end:
            # The frame's size was announced: a log cut meanwhile (truncation) leaves no way to finish it.
            raise ConnectionError(f"log data shrank while being sent ({length - (end - position)} of {length} "
                                  "bytes)")
