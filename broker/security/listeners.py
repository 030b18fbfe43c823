"""Kafka's listener settings: ``listeners``, ``advertised.listeners``, ``listener.security.protocol.map``.

``listeners: PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093`` serves one socket per entry; the name picks
its security protocol through the map (Kafka's default maps each protocol name to itself), and clients
connected to a listener are told the brokers' addresses on that same listener (``advertised.listeners``,
by name; the listening address where none is given). A bare ``host:port`` is a PLAINTEXT listener, as
burrowpy's broker has always taken it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from broker.security import SecurityConfigError as ListenerError

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
DEFAULT_PROTOCOL_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"

_NAME = re.compile(r"^[A-Za-z0-9_]+$")


class NoProtocolError(ListenerError):
    """A listener whose name the security protocol map does not have."""

    def __init__(self, listener: str) -> None:
        super().__init__("listener.security.protocol.map",
                         f"listener {listener} has no security protocol: add {listener}:PROTOCOL to the map")
        self.listener = listener


@dataclass(frozen=True)
class Listener:
    name: str
    protocol: str
    host: str  # where to listen ("0.0.0.0" for every interface)
    port: int
    advertised_host: str  # what clients of this listener are told
    advertised_port: int

    @property
    def uses_tls(self) -> bool:
        return self.protocol in (SSL, SASL_SSL)


def _endpoints(text: str, key: str) -> dict[str, tuple[str, int]]:
    endpoints: dict[str, tuple[str, int]] = {}
    ports: set[int] = set()
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        name, sep, address = entry.partition("://")
        if not sep:
            name, address = PLAINTEXT, entry
        name = name.upper()
        if not _NAME.match(name):
            raise ListenerError(key, f"{entry!r}: a listener name is letters, digits and underscores")
        host, colon, port = address.rpartition(":")
        if not colon or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ListenerError(key, f"{entry!r} is not NAME://host:port")
        if name in endpoints:
            raise ListenerError(key, f"listener {name} is named twice")
        number = int(port)
        if number and number in ports and key == "listeners":
            raise ListenerError(key, f"port {number} is used by two listeners")
        ports.add(number)
        endpoints[name] = (host.strip("[]") or "0.0.0.0", number)
    if not endpoints:
        raise ListenerError(key, "no listener given")
    return endpoints


def protocol_map(text: str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        name, sep, protocol = entry.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not _NAME.match(name.strip()) or protocol not in PROTOCOLS:
            raise ListenerError("listener.security.protocol.map",
                                f"{entry!r} is not NAME:PROTOCOL with a protocol of {', '.join(PROTOCOLS)}")
        mapping[name.strip().upper()] = protocol
    return mapping


def parse_listeners(listeners: str, advertised: str, mapping_text: str) -> list[Listener]:
    """The listeners in the order given; ListenerError names the setting at fault."""
    bound = _endpoints(listeners, "listeners")
    told = _endpoints(advertised, "advertised.listeners") if advertised.strip() else {}
    mapping = protocol_map(mapping_text or DEFAULT_PROTOCOL_MAP)
    result = []
    for name, (host, port) in bound.items():
        protocol = mapping.get(name)
        if protocol is None:
            raise NoProtocolError(name)
        adv_host, adv_port = told.get(name, (host, port))
        if adv_host in ("0.0.0.0", "::", ""):
            adv_host = "127.0.0.1"
        result.append(Listener(name, protocol, host, port, adv_host, adv_port))
    for name in told.keys() - bound.keys():
        raise ListenerError("advertised.listeners", f"listener {name} is advertised but not in listeners")
    return result
