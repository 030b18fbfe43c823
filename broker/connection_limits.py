"""Kafka's connection limits: ``max.connections`` (the broker's, across its listeners),
``max.connections.per.ip``, ``max.connections.per.ip.overrides`` and ``max.connection.creation.rate``.

As in Kafka's acceptor, a listener at the broker-wide limit, or past the creation rate, accepts nothing until a
connection closes or the rate allows (the new ones wait in the listen backlog), except the inter-broker
listener, which Kafka lets through so that brokers keep replicating; a connection from an address at its own
limit is accepted and closed at once. The rate is measured over Kafka's quota window (``quota.window.num``
samples of ``quota.window.size.seconds``). The limits are read at each accept, so a dynamic change (these four
may change at run time, as on Kafka) applies to the next connection.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import structlog

log = structlog.get_logger("broker.connections")


def parse_ip_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` in Kafka's format, ``host:count,host:count``: address -> limit.
    Host names are resolved now, as Kafka resolves them; an IPv6 address keeps its colons (the count follows
    the last one). Raises ValueError naming the entry that is wrong."""
    overrides: dict[str, int] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        host, colon, count = entry.rpartition(":")
        host = host.strip().strip("[]")
        if not colon or not host:
            raise ValueError(f"{entry!r} is not host:count")
        try:
            limit = int(count)
        except ValueError:
            raise ValueError(f"{entry!r}: {count!r} is not a number of connections") from None
        if limit < 0:
            raise ValueError(f"{entry!r}: the number of connections must be at least 0")
        try:
            address = str(ipaddress.ip_address(host))
        except ValueError:
            try:
                address = socket.gethostbyname(host)
            except OSError as exc:
                raise ValueError(f"{entry!r}: cannot resolve {host!r} ({exc})") from None
        overrides[address] = limit
    return overrides


class ConnectionQuotas:
    """The broker's open connections, counted per address, against the limits in ``settings`` (the broker's
    live config)."""

    def __init__(self, settings: Callable[[str], Any], ip_throttle: Callable[[str], int] = lambda host: 0) -> None:
        self._settings = settings
        # a new connection's count against its address's connection_creation_rate: ms to hold it, then close it
        self._ip_throttle = ip_throttle
        self.total = 0
        self.per_host: dict[str, int] = {}
        self._freed = asyncio.Event()
        self._overrides_text: str | None = None
        self._overrides: dict[str, int] = {}
        self._accepted: deque[float] = deque()  # when connections were accepted, within the quota window

    def _ip_limit(self, host: str) -> int:
        text = self._settings("max.connections.per.ip.overrides")
        if text != self._overrides_text:
            self._overrides_text = text
            try:
                self._overrides = parse_ip_overrides(text)
            except ValueError as exc:  # a value changed at run time: the last good one stays, accepting goes on
                log.error("max.connections.per.ip.overrides not applied", error=str(exc), value=text)
        return self._overrides.get(host, self._settings("max.connections.per.ip"))

    async def wait_for_slot(self) -> None:
        while True:
            if self.total >= self._settings("max.connections"):
                self._freed.clear()
                await self._freed.wait()
            elif (wait := self._rate_wait()) > 0:
                await asyncio.sleep(wait)
            else:
                return

    def _window(self) -> float:
        return self._settings("quota.window.num") * self._settings("quota.window.size.seconds")

    def _rate_wait(self) -> float:
        """Seconds until max.connection.creation.rate allows another connection (0: now)."""
        window = self._window()
        now = time.monotonic()
        while self._accepted and self._accepted[0] <= now - window:
            self._accepted.popleft()
        if len(self._accepted) < self._settings("max.connection.creation.rate") * window:
            return 0.0
        return self._accepted[0] + window - now

    def admit(self, host: str) -> bool:
        limit = self._ip_limit(host)
        if self.per_host.get(host, 0) >= limit:
            log.info("connection refused: its address has the most connections allowed", client=host, limit=limit,
                     key="max.connections.per.ip")
            return False
        self.per_host[host] = self.per_host.get(host, 0) + 1
        self.total += 1
        self._accepted.append(time.monotonic())
        return True

    def throttle_seconds(self, host: str) -> float:
        """How long to hold a connection just admitted from ``host`` before closing it, for its address's
        connection_creation_rate (KIP-612); 0 to serve it."""
        return self._ip_throttle(host) / 1000

    def release(self, host: str) -> None:
        self.total -= 1
        left = self.per_host[host] - 1
        if left:
            self.per_host[host] = left
        else:
            del self.per_host[host]
        self._freed.set()


class ListenerGate:
    """One listener's view of the broker's quotas; the inter-broker listener of a cluster does not wait for
    the broker-wide limit (Kafka's exemption, so that replication is never locked out by clients)."""

    def __init__(self, quotas: ConnectionQuotas, *, exempt: bool) -> None:
        self.quotas = quotas
        self.exempt = exempt

    async def wait_for_slot(self) -> None:
        if not self.exempt:
            await self.quotas.wait_for_slot()

    def admit(self, host: str) -> bool:
        return self.quotas.admit(host)

    def throttle_seconds(self, host: str) -> float:
        return 0.0 if self.exempt else self.quotas.throttle_seconds(host)

    def release(self, host: str) -> None:
        self.quotas.release(host)
