"""The email notifier against a real SMTP server (aiosmtpd) that demands STARTTLS and authentication."""

from __future__ import annotations

import hmac
import secrets
import ssl
import subprocess
from email import message_from_bytes
from email.message import Message
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session
from notifier_support import MonitorCore, capturing_logger, eventually, notifier_sections
from zk import free_port

from burrowpy.notifier.coordinator import NotifierCoordinator

pytestmark = pytest.mark.integration

USERNAME, PASSWORD = "burrow", "s3cret-pass"


class Mailbox:
    """aiosmtpd handler: keeps every accepted mail with how its session was secured and authenticated.

    PLAIN and LOGIN are aiosmtpd's own; CRAM-MD5 is implemented here (RFC 2195), since aiosmtpd has none.
    """

    def __init__(self) -> None:
        self.mails: list[tuple[Envelope, Message, bool, str]] = []  # envelope, message, TLS?, user

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        user = session.auth_data.login.decode() if session.auth_data else ""
        self.mails.append((envelope, message_from_bytes(envelope.original_content), session.ssl is not None, user))
        return "250 OK"

    async def auth_CRAM__MD5(self, server: SMTP, args: list[str]) -> AuthResult:
        challenge = f"<{secrets.token_hex(8)}@burrowpy.test>".encode()
        response = await server.challenge_auth(challenge)
        if not isinstance(response, bytes):
            return AuthResult(success=False, handled=True)
        login, _, digest = response.decode().rpartition(" ")
        expected = hmac.new(PASSWORD.encode(), challenge, "md5").hexdigest()
        ok = login == USERNAME and hmac.compare_digest(digest, expected)
        # handled=False: aiosmtpd then answers 535 itself (it assumes a failing hook already answered)
        return AuthResult(success=ok, handled=False, auth_data=LoginPassword(login.encode(), b""))


def authenticator(server, session, envelope, mechanism, auth_data) -> AuthResult:
    ok = isinstance(auth_data, LoginPassword) and auth_data.login == USERNAME.encode() and \
        auth_data.password == PASSWORD.encode()
    return AuthResult(success=ok, handled=False, auth_data=auth_data)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


@pytest.fixture
def smtp_server(certificate):
    cert, key = certificate
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    mailbox = Mailbox()
    controller = Controller(mailbox, hostname="127.0.0.1", port=free_port(), tls_context=tls,
                            require_starttls=True, auth_required=True, auth_require_tls=True,
                            authenticator=authenticator)
    controller.start()
    try:
        yield controller, mailbox
    finally:
        controller.stop()


@pytest.fixture
async def monitor():
    logger, logs = capturing_logger()
    core = MonitorCore(logger)
    core.logs = logs
    await core.start()
    yield core
    await core.stop()


def email_notifier(port: int, cert: Path, **extra) -> dict:
    keys = {
        "class-name": "email", "interval": 1, "send-interval": 3600, "send-close": True,
        "server": "127.0.0.1", "port": port, "extra-ca": str(cert),
        "auth-type": "plain", "username": USERNAME, "password": PASSWORD,
        "from": "burrow@example.com", "to": "ops@example.com,dev@example.com",
        "template-open": "default-email-open.tmpl", "template-close": "default-email-close.tmpl",
        "retries": 1, "retry-backoff": 0.05,
    }
    keys.update(extra)
    return keys


@pytest.mark.parametrize("auth_type", ["plain", "login", "crammd5"])
async def test_open_and_close_emails_over_starttls_with_auth(monitor, smtp_server, certificate, auth_type):
    controller, mailbox = smtp_server
    sections = notifier_sections(mail=email_notifier(controller.port, certificate[0], **{"auth-type": auth_type}))
    coordinator = NotifierCoordinator(monitor.ctx, sections)
    await monitor.stop_group("payments")
    await coordinator.start()
    try:
        await eventually(lambda: mailbox.mails, what="the open email")
        await monitor.recover_group("payments")
        await eventually(lambda: len(mailbox.mails) == 2, what="the close email")
    finally:
        await coordinator.stop()

    (envelope, opened, secured, user), (close_envelope, closed, close_secured, _) = mailbox.mails
    assert secured and close_secured and user == USERNAME
    assert envelope.mail_from == "burrow@example.com"
    assert envelope.rcpt_tos == close_envelope.rcpt_tos == ["ops@example.com", "dev@example.com"]
    assert opened["Subject"] == "[burrowpy] Kafka consumer lag alert: payments on local is ERR"
    assert opened["To"] == "ops@example.com, dev@example.com"
    body = opened.get_payload(decode=True).decode()
    assert "Errors:   1 partitions have problems" in body
    partition_lines = [line.strip() for line in body.splitlines() if line.startswith("          ")]
    assert len(partition_lines) == 1 and partition_lines[0].startswith("STOP orders:0 lag 700 (")
    incident = next(line.split()[1] for line in body.splitlines() if line.startswith("Incident:"))
    assert closed["Subject"] == "[burrowpy] Resolved: payments on local is OK again"
    assert f"Incident: {incident}" in closed.get_payload(decode=True).decode()


async def test_wrong_password_is_a_permanent_failure(monitor, smtp_server, certificate):
    controller, mailbox = smtp_server
    sections = notifier_sections(mail=email_notifier(controller.port, certificate[0], password="wrong"))
    coordinator = NotifierCoordinator(monitor.ctx, sections)
    await monitor.stop_group("payments")
    await coordinator.start()
    try:
        failed = await eventually(lambda: [e for e in monitor.logs.entries if e["event"] == "notification not sent"],
                                  what="the failure log")
    finally:
        await coordinator.stop()
    assert not mailbox.mails
    assert failed[0]["gave_up"] == "permanent failure" and failed[0]["attempts"] == 1
    assert "SMTPAuthenticationError: 535" in failed[0]["error"]


async def test_untrusted_certificate_and_unreachable_server_are_logged_and_the_daemon_goes_on(
        monitor, smtp_server, certificate):
    controller, mailbox = smtp_server
    cert = certificate[0]
    sections = notifier_sections(
        untrusted=email_notifier(controller.port, cert, **{"extra-ca": ""}),
        unreachable=email_notifier(free_port(), cert),
        working=email_notifier(controller.port, cert, **{"send-close": False}))
    coordinator = NotifierCoordinator(monitor.ctx, sections)
    await monitor.stop_group("payments")
    await coordinator.start()
    try:
        await eventually(lambda: mailbox.mails, what="the working notifier's email")
        failures = await eventually(
            lambda: {e["module"]: e for e in monitor.logs.entries if e["event"] == "notification not sent"}
            if len([e for e in monitor.logs.entries if e["event"] == "notification not sent"]) == 2 else None,
            what="both failures")
        evaluations = coordinator.evaluations
        await eventually(lambda: coordinator.evaluations > evaluations + 1, what="evaluations going on")
    finally:
        await coordinator.stop()
    assert len(mailbox.mails) == 1
    assert "SSLCertVerificationError" in failures["untrusted"]["error"]
    assert failures["untrusted"]["gave_up"] == "permanent failure"
    assert "ConnectionRefusedError" in failures["unreachable"]["error"]
    assert failures["unreachable"]["gave_up"] == "out of retries" and failures["unreachable"]["attempts"] == 2
