"""What the notifier integration tests share: a real monitor core, an SMTP server, config sections, polling.

:class:`MonitorCore` is the monitor's real in-memory storage and caching evaluator on the real clock,
behind a real ApplicationContext. Its groups are driven into STOP (commits that stopped while the
broker moved on) and back to OK (a commit that catches up) with the same storage requests the
consumer modules send, so the notifier sees real evaluations. Used in-process by the tests and in a
subprocess by notifier_peer.py.

:func:`smtp_server` runs aiosmtpd demanding STARTTLS and authentication (PLAIN, LOGIN, and CRAM-MD5,
which aiosmtpd lacks and :class:`Mailbox` implements); :func:`self_signed_certificate` makes its
certificate with openssl.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import inspect
import itertools
import secrets
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from email import message_from_bytes
from email.message import Message
from pathlib import Path
from typing import Any

import structlog
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session
from structlog.testing import LogCapture
from zk import free_port

from burrowpy.config import Config, Section
from burrowpy.context import ApplicationContext, SystemClock
from burrowpy.evaluator.caching import CachingEvaluator
from burrowpy.protocol import SetBrokerOffset, SetConsumerOffset
from burrowpy.storage.inmemory import InMemoryStorage

TEMPLATES = Path(__file__).resolve().parents[2] / "config" / "templates"
CONFIG_FILE = str(TEMPLATES / "burrowpy.yaml")  # relative template paths resolve next to it
CLUSTER = "local"
TOPIC = "orders"
BROKER_OFFSET = 1000
SMTP_USER, SMTP_PASSWORD = "burrow", "s3cret-pass"


def capturing_logger() -> tuple[Any, LogCapture]:
    """A structlog logger whose events are kept in ``capture.entries`` instead of printed."""
    capture = LogCapture()
    return structlog.wrap_logger(structlog.PrintLogger(), processors=[capture]), capture


def notifier_sections(**modules: dict[str, Any]) -> dict[str, Section]:
    return {name: Section(CONFIG_FILE, f"notifier.{name}", keys) for name, keys in modules.items()}


class MonitorCore:
    def __init__(self, logger: Any) -> None:
        clock = SystemClock()
        storage = InMemoryStorage("default", Section(CONFIG_FILE, "storage.default", {}), [CLUSTER], clock, logger)
        evaluator = CachingEvaluator("default", Section(CONFIG_FILE, "evaluator.default", {"expire-cache": 0}),
                                     storage, clock, logger)
        self.ctx = ApplicationContext(config=Config(file=CONFIG_FILE), logger=logger, storage=storage,
                                      evaluator=evaluator, clock=clock)
        self._order = itertools.count(1)

    async def start(self) -> None:
        await self.ctx.storage.start()
        await self.ctx.evaluator.start()

    async def stop(self) -> None:
        await self.ctx.evaluator.stop()
        await self.ctx.storage.stop()

    async def stop_group(self, group: str) -> None:
        """Commits 100, 200, 300 made 30 to 20 s ago while the broker is at 1000: the partition is
        STOPped (no commit for longer than the commits spanned) and the group ERR."""
        now_ms = int(time.time() * 1000)
        storage = self.ctx.storage
        storage.submit(SetBrokerOffset(CLUSTER, TOPIC, 0, 1, BROKER_OFFSET, now_ms))
        await storage.flush()  # broker offsets and commits go to different workers; commits need the offset
        for offset, age_s in ((100, 30), (200, 25), (300, 20)):
            storage.submit(SetConsumerOffset(CLUSTER, group, TOPIC, 0, offset, next(self._order),
                                             now_ms - age_s * 1000))
        await storage.flush()

    async def recover_group(self, group: str) -> None:
        """A commit at the broker's offset: no lag, the group is OK."""
        self.ctx.storage.submit(SetConsumerOffset(CLUSTER, group, TOPIC, 0, BROKER_OFFSET, next(self._order),
                                                  int(time.time() * 1000)))
        await self.ctx.storage.flush()


async def eventually(condition: Callable[[], Any], timeout: float = 30.0,
                     what: str | Callable[[], str] = "condition") -> Any:
    """Poll ``condition`` (a function, or a coroutine function) until it returns something true; fail
    after ``timeout`` seconds. ``what`` names the condition in the failure, or is called to describe it
    then (for state worth seeing only when it failed)."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            described = what() if callable(what) else what
            raise AssertionError(f"{described} not reached within {timeout} s")
        await asyncio.sleep(0.02)


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate (and its key) for 127.0.0.1 and localhost, valid for two days."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


class Mailbox:
    """aiosmtpd handler: keeps every accepted mail with how its session was secured and authenticated."""

    def __init__(self) -> None:
        self.mails: list[tuple[Envelope, Message, bool, str]] = []  # envelope, message, TLS?, user

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        user = session.auth_data.login.decode() if session.auth_data else ""
        self.mails.append((envelope, message_from_bytes(envelope.original_content), session.ssl is not None, user))
        return "250 OK"

    async def auth_CRAM__MD5(self, server: SMTP, args: list[str]) -> AuthResult:
        """RFC 2195: the client answers a challenge with its name and HMAC-MD5(password, challenge)."""
        challenge = f"<{secrets.token_hex(8)}@burrowpy.test>".encode()
        response = await server.challenge_auth(challenge)
        if not isinstance(response, bytes):
            return AuthResult(success=False, handled=True)
        login, _, digest = response.decode().rpartition(" ")
        expected = hmac.new(SMTP_PASSWORD.encode(), challenge, "md5").hexdigest()
        ok = login == SMTP_USER and hmac.compare_digest(digest, expected)
        # handled=False: aiosmtpd then answers 535 itself (it assumes a failing hook already answered)
        return AuthResult(success=ok, handled=False, auth_data=LoginPassword(login.encode(), b""))


def _check_password(server, session, envelope, mechanism, auth_data) -> AuthResult:
    ok = isinstance(auth_data, LoginPassword) and auth_data.login == SMTP_USER.encode() and \
        auth_data.password == SMTP_PASSWORD.encode()
    return AuthResult(success=ok, handled=False, auth_data=auth_data)


@contextlib.contextmanager
def smtp_server(cert: Path, key: Path) -> Iterator[tuple[Controller, Mailbox]]:
    """An SMTP server on 127.0.0.1 that requires STARTTLS and then authentication; stopped on exit."""
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    mailbox = Mailbox()
    controller = Controller(mailbox, hostname="127.0.0.1", port=free_port(), tls_context=tls,
                            require_starttls=True, auth_required=True, auth_require_tls=True,
                            authenticator=_check_password)
    controller.start()
    try:
        yield controller, mailbox
    finally:
        controller.stop()
