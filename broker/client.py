"""A small asyncio Kafka client on our own codec: the `topics` CLI and broker-to-broker traffic use it.

It negotiates versions with ApiVersions and then sends each request at the highest version both sides
know (``request(api_key, body)``), or at an explicit version.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from typing import Any

from broker.protocol.api import SCHEMA_VERSIONS, ApiKey, decode_response, encode_request

_SIZE = struct.Struct(">i")


class ClientError(Exception):
    pass


class KafkaConnection:
    def __init__(self, host: str, port: int, *, client_id: str = "burrowpy", timeout: float = 30.0) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout = timeout
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
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), self.timeout)
        except (OSError, TimeoutError) as exc:
            raise ClientError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        answer = await self.request(ApiKey.API_VERSIONS, {}, version=0)
        if answer["error_code"]:
            raise ClientError(f"ApiVersions failed with error {answer['error_code']}")
        self.versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]}

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
                size_bytes = await asyncio.wait_for(self._reader.readexactly(4), self.timeout)
                (size,) = _SIZE.unpack(size_bytes)
                payload = await asyncio.wait_for(self._reader.readexactly(size), self.timeout)
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                await self.close()
                raise ClientError(f"request to {self.host}:{self.port} failed: {exc!r}") from None
        answered, response = decode_response(api_key, version, payload)
        if answered != correlation_id:
            raise ClientError(f"correlation id mismatch: sent {correlation_id}, got {answered}")
        return response
