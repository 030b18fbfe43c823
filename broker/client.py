"""A small asyncio Kafka client on our own codec: the `topics` CLI and broker-to-broker traffic use it.

It negotiates versions with ApiVersions and then sends each request at the highest version both sides
know (``request(api_key, body)``), or at an explicit version.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import ssl
import struct
import sys
from dataclasses import dataclass
from typing import Any

from broker.protocol.api import SCHEMA_VERSIONS, ApiKey, decode_response, encode_request
from broker.security.broker_login import MECHANISM as BROKER_MECHANISM
from broker.security.broker_login import BrokerCredential, BrokerLoginClient, BrokerLoginError
from broker.security.scram import ScramClient, ScramError

_SIZE = struct.Struct(">i")


class ClientError(Exception):
    pass


@dataclass(frozen=True)
class ClientSecurity:
    """How to reach a secured listener: TLS (``ssl_context``; the host name is checked unless
    ``check_hostname`` is off) and/or a SASL login (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)."""

    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""


def set_buffer_size(sock: socket.socket, option: int, size: int) -> int:
    """Ask for a socket buffer (SO_RCVBUF or SO_SNDBUF) of ``size`` bytes; the size the kernel granted, which
    its limits (net.core.rmem_max, net.core.wmem_max) may make smaller."""
    sock.setsockopt(socket.SOL_SOCKET, option, size)
    granted = sock.getsockopt(socket.SOL_SOCKET, option)
    return granted // 2 if sys.platform == "linux" else granted  # Linux reports twice: the rest is bookkeeping


class KafkaConnection:
    def __init__(self, host: str, port: int, *, client_id: str = "burrowpy", timeout: float = 30.0,
                 security: ClientSecurity | None = None, broker_credential: BrokerCredential | None = None,
                 receive_buffer_bytes: int = -1) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout = timeout
        self.security = security
        # a broker's connection to another: after the listener's login, it proves it is a broker of the cluster
        self.broker_credential = broker_credential
        self.receive_buffer_bytes = receive_buffer_bytes  # SO_RCVBUF; -1: the kernel's own sizing
        self.receive_buffer_granted = -1  # what the kernel gave of receive_buffer_bytes (it caps it at rmem_max)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = itertools.count(1)
        self._lock = asyncio.Lock()
        self.versions: dict[int, tuple[int, int]] = {}

    @classmethod
    async def connect(cls, bootstrap: str, **kwargs: Any) -> KafkaConnection:
        host, _, port = bootstrap.rpartition(":")
        conn = cls(host or "127.0.0.1", int(port), **kwargs)
        await conn.open()
        return conn

    async def open(self) -> None:
        context = self.security.ssl_context if self.security else None
        try:
            async with asyncio.timeout(self.timeout):
                self._reader, self._writer = await self._open_streams(context)
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            raise ClientError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        answer = await self.request(ApiKey.API_VERSIONS, {}, version=0)
        if answer["error_code"]:
            raise ClientError(f"ApiVersions failed with error {answer['error_code']}")
        self.versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]}
        if self.security is not None and self.security.sasl_mechanism:
            await self._log_in(self.security)
        if self.broker_credential is not None:
            await self._log_in_as_broker(self.broker_credential)

    async def _open_streams(self, context: ssl.SSLContext | None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        hostname = self.host if context else None
        if self.receive_buffer_bytes == -1:
            return await asyncio.open_connection(self.host, self.port, ssl=context, server_hostname=hostname)
        # SO_RCVBUF before the connect, as Kafka's clients set it: the window scale is agreed in the handshake
        loop = asyncio.get_running_loop()
        family, kind, proto, _, address = (await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM))[0]
        sock = socket.socket(family, kind, proto)
        try:
            self.receive_buffer_granted = set_buffer_size(sock, socket.SO_RCVBUF, self.receive_buffer_bytes)
            sock.setblocking(False)
            await loop.sock_connect(sock, address)
            return await asyncio.open_connection(sock=sock, ssl=context, server_hostname=hostname)
        except BaseException:
            sock.close()
            raise

    async def _log_in(self, security: ClientSecurity) -> None:
        """SaslHandshake v1, then SaslAuthenticate: one round for PLAIN, two for SCRAM."""
        mechanism = security.sasl_mechanism
        assert mechanism is not None  # called for a SASL listener only
        handshake = await self.request(ApiKey.SASL_HANDSHAKE, {"mechanism": mechanism}, version=1)
        if handshake["error_code"]:
            await self.close()
            raise ClientError(f"{self.host}:{self.port} does not offer SASL {mechanism} "
                              f"(it offers {', '.join(handshake['mechanisms'])})")
        try:
            if mechanism == "PLAIN":
                await self._authenticate(b"\x00" + security.username.encode() + b"\x00" + security.password.encode())
            else:
                scram = ScramClient(mechanism, security.username, security.password)
                server_first = await self._authenticate(scram.first())
                # the client side derives the key from the password (PBKDF2): off the event loop
                final = await asyncio.to_thread(scram.final, server_first)
                scram.verify(await self._authenticate(final))
        except ScramError as exc:
            await self.close()
            raise ClientError(f"SASL {mechanism} login to {self.host}:{self.port} failed: {exc}") from None

    async def _log_in_as_broker(self, credential: BrokerCredential) -> None:
        """The inter-broker login (broker.security.broker_login): SaslHandshake v1, then two SaslAuthenticate
        rounds."""
        handshake = await self.request(ApiKey.SASL_HANDSHAKE, {"mechanism": BROKER_MECHANISM}, version=1)
        if handshake["error_code"]:
            await self.close()
            raise ClientError(f"{self.host}:{self.port} does not take the inter-broker login (error "
                              f"{handshake['error_code']}): not a broker of this cluster")
        login = BrokerLoginClient(credential)
        try:
            login.verify(await self._authenticate(login.final(await self._authenticate(login.first()))))
        except BrokerLoginError as exc:
            await self.close()
            raise ClientError(f"inter-broker login to {self.host}:{self.port} failed: {exc}") from None

    async def _authenticate(self, token: bytes) -> bytes:
        answer = await self.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token}, version=1)
        if answer["error_code"]:
            await self.close()
            raise ClientError(f"SASL login to {self.host}:{self.port} failed: {answer['error_message']}")
        return bytes(answer["auth_bytes"])

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass
            self._writer = None

    async def __aenter__(self) -> KafkaConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def best_version(self, api_key: int) -> int:
        ours = SCHEMA_VERSIONS[api_key]
        theirs = self.versions.get(api_key)
        if theirs is None:
            raise ClientError(f"the broker does not support API key {api_key}")
        version = min(ours[1], theirs[1])
        if version < max(ours[0], theirs[0]):
            raise ClientError(f"no common version for API key {api_key}")
        return version

    async def request(self, api_key: int, body: dict[str, Any], *, version: int | None = None) -> dict[str, Any]:
        if version is None:
            version = self.best_version(api_key)
        if self._writer is None or self._reader is None:
            raise ClientError("connection is closed")
        correlation_id = next(self._correlation)
        frame = encode_request(api_key, version, correlation_id, self.client_id, body)
        async with self._lock:
            try:
                self._writer.write(frame)
                await self._writer.drain()
                async with asyncio.timeout(self.timeout):
                    size_bytes = await self._reader.readexactly(4)
                (size,) = _SIZE.unpack(size_bytes)
                async with asyncio.timeout(self.timeout):
                    payload = await self._reader.readexactly(size)
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                await self.close()
                raise ClientError(f"request to {self.host}:{self.port} failed: {exc!r}") from None
        answered, response = decode_response(api_key, version, payload)
        if answered != correlation_id:
            raise ClientError(f"correlation id mismatch: sent {correlation_id}, got {answered}")
        return response
