"""Fixtures shared by the unit tests, and the guard that keeps them pure."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

# What a unit test may not do: reach the network (a socket's connect, bind or sendto; a socketpair needs
# none of them, so an event loop's self-pipe still works) or start a process. Such a test belongs in
# tests/integration.
_IMPURE: list[tuple[Any, str]] = [
    (socket.socket, "connect"),
    (socket.socket, "connect_ex"),
    (socket.socket, "bind"),
    (socket.socket, "sendto"),
    (subprocess.Popen, "_execute_child"),
    (os, "fork"),
    (os, "posix_spawn"),
    (os, "posix_spawnp"),
]


def _refuse(name: str) -> Any:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"a unit test called {name}: unit tests are pure (no sockets, no processes); "
                           f"move this test to tests/integration")
    return refused


@contextlib.contextmanager
def _pure() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for owner, name in _IMPURE:
            patch.setattr(owner, name, _refuse(f"{owner.__name__}.{name}"))
        yield


# Around setup and teardown as well as the call, so a module- or session-scoped fixture that starts a server
# is refused too. (A conftest's run-test hooks apply only to the tests of its own folder.)
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _pure():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _pure():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    # The session's last test also tears down the session's fixtures, which may be integration ones.
    with _pure() if nextitem is not None else contextlib.nullcontext():
        return (yield)


class SelfSigned(NamedTuple):
    store: Path  # key + certificate in one PEM file (a Kafka PEM keystore)
    certificate: Path  # the certificate alone (also its own CA)
    key: Path


@pytest.fixture
def self_signed(tmp_path: Path) -> SelfSigned:
    """A self-signed certificate for 127.0.0.1, made here (no private key is checked in)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "broker")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                  critical=False)
                   .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    cert_pem = certificate.public_bytes(serialization.Encoding.PEM)
    made = SelfSigned(tmp_path / "self-signed.pem", tmp_path / "self-signed.crt", tmp_path / "self-signed.key")
    made.store.write_bytes(key_pem + cert_pem)
    made.certificate.write_bytes(cert_pem)
    made.key.write_bytes(key_pem)
    return made
