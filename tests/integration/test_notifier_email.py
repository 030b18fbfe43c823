"""The email notifier against a real SMTP server (aiosmtpd) that demands STARTTLS and authentication."""

from __future__ import annotations

from pathlib import Path

import pytest
from notifier_support import (
    SMTP_PASSWORD,
    SMTP_USER,
    MonitorCore,
    capturing_logger,
    eventually,
    notifier_sections,
    self_signed_certificate,
    smtp_server,
)
from zk import free_port

from burrowpy.notifier.coordinator import NotifierCoordinator

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    return self_signed_certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def smtp(certificate):
    with smtp_server(*certificate) as running:
        yield running


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
        "auth-type": "plain", "username": SMTP_USER, "password": SMTP_PASSWORD,
        "from": "burrow@example.com", "to": "ops@example.com,dev@example.com",
        "template-open": "default-email-open.tmpl", "template-close": "default-email-close.tmpl",
        "retries": 1, "retry-backoff": 0.05,
    }
    keys.update(extra)
    return keys


@pytest.mark.parametrize("auth_type", ["plain", "login", "crammd5"])
async def test_open_and_close_emails_over_starttls_with_auth(monitor, smtp, certificate, auth_type):
    controller, mailbox = smtp
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
    assert secured and close_secured and user == SMTP_USER
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


async def test_wrong_password_is_a_permanent_failure(monitor, smtp, certificate):
    controller, mailbox = smtp
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
        monitor, smtp, certificate):
    controller, mailbox = smtp
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
