"""HTTP listeners: several at once on one API, HTTPS from a TLS profile, failures that say what went wrong."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess

import aiohttp
import pytest
import structlog

from burrowpy.config import ConfigError, parse_config
from burrowpy.context import ApplicationContext
from burrowpy.httpserver import HttpServerCoordinator


def context(doc: dict) -> ApplicationContext:
    return ApplicationContext(config=parse_config(doc, "burrowpy.yaml", {}), logger=structlog.get_logger())


async def get_text(url: str, **kwargs) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url, **kwargs) as response:
        return response.status, await response.text()


async def test_every_listener_serves_the_api():
    server = HttpServerCoordinator(
        context(
            {"httpserver": {"a": {"address": "127.0.0.1:0"}, "b": {"address": "127.0.0.1:0", "timeout": 5}}}
        )
    )
    await server.start()
    try:
        ports = {name: addresses[0][1] for name, addresses in server.addresses.items()}
        assert set(ports) == {"a", "b"} and ports["a"] != ports["b"] and 0 not in ports.values()
        for name in ("a", "b"):
            assert await get_text(server.url(name) + "/burrow/admin") == (200, "GOOD")
    finally:
        await server.stop()
    with pytest.raises(aiohttp.ClientConnectionError):
        await get_text(f"http://127.0.0.1:{ports['a']}/burrow/admin")


async def test_without_listeners_configured_one_takes_a_free_port():
    server = HttpServerCoordinator(context({}))
    await server.start()
    try:
        assert list(server.addresses) == ["default"]
        assert await get_text(server.url() + "/burrow/admin") == (200, "GOOD")
    finally:
        await server.stop()


async def test_a_busy_port_fails_start_and_leaves_nothing_listening():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = HttpServerCoordinator(
            context(
                {"httpserver": {"free": {"address": "127.0.0.1:0"}, "busy": {"address": f"127.0.0.1:{port}"}}}
            )
        )
        with pytest.raises(OSError):
            await server.start()
        assert server.addresses == {}


@pytest.fixture
def certificate(tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_https_listener_from_a_tls_profile(certificate):
    cert, key = certificate
    ctx = context(
        {
            "tls": {"web": {"certfile": str(cert), "keyfile": str(key)}},
            "httpserver": {"secure": {"address": "127.0.0.1:0", "tls": "web"}},
        }
    )
    server = HttpServerCoordinator(ctx)
    await server.start()
    try:
        url = server.url("secure")
        assert url.startswith("https://127.0.0.1:")
        trusted = ssl.create_default_context(cafile=str(cert))
        assert await get_text(url + "/burrow/admin", ssl=trusted) == (200, "GOOD")
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await get_text(url + "/burrow/admin")  # not trusted by the system roots
    finally:
        await server.stop()


async def test_unreadable_certificate_is_a_config_error_naming_the_listener(tmp_path):
    cert = tmp_path / "cert.pem"
    cert.write_text("not a certificate")
    ctx = context(
        {
            "tls": {"web": {"certfile": str(cert), "keyfile": str(cert)}},
            "httpserver": {"secure": {"address": "127.0.0.1:0", "tls": "web"}},
        }
    )
    with pytest.raises(ConfigError) as caught:
        HttpServerCoordinator(ctx)
    assert caught.value.path == "httpserver.secure.tls" and "TLS profile 'web'" in caught.value.message


def test_a_tls_profile_without_a_key_cannot_serve_https(tmp_path):
    cafile = tmp_path / "ca.pem"
    cafile.write_text("x")
    with pytest.raises(
        ConfigError, match=r"httpserver\.secure\.tls: TLS profile 'ca' needs certfile and keyfile"
    ):
        parse_config(
            {
                "tls": {"ca": {"cafile": str(cafile)}},
                "httpserver": {"secure": {"address": ":0", "tls": "ca"}},
            },
            "burrowpy.yaml",
            {},
        )
