"""Notifier module classes without a network: configuration, /v3/config detail, email parsing, retries."""

from __future__ import annotations

import ssl
from email.message import EmailMessage
from pathlib import Path

import pytest
import structlog
from structlog.testing import LogCapture

from burrowpy.config import Config, ConfigError, Section
from burrowpy.context import ApplicationContext
from burrowpy.notifier.base import DeliveryError, MessageError
from burrowpy.notifier.coordinator import build_notifier
from burrowpy.notifier.decision import Action, Incident, Notification
from burrowpy.notifier.email import EmailNotifier, build_message
from burrowpy.notifier.http import HttpNotifier
from burrowpy.notifier.null import NullNotifier
from burrowpy.protocol import ConsumerGroupStatus, Status

TEMPLATES = Path(__file__).resolve().parents[2] / "config" / "templates"


@pytest.fixture
def logs() -> LogCapture:
    return LogCapture()


@pytest.fixture
def ctx(logs) -> ApplicationContext:
    return ApplicationContext(
        config=Config(file="burrowpy.yaml"),
        logger=structlog.wrap_logger(structlog.PrintLogger(), processors=[logs]),
    )


def section(name: str = "alerts", **keys) -> Section:
    return Section(str(TEMPLATES / "burrowpy.yaml"), f"notifier.{name}", keys)


def http_keys(**extra) -> dict:
    keys = {
        "class-name": "http",
        "url-open": "http://127.0.0.1:9/{{ group }}",
        "template-open": "default-http-open.tmpl",
    }
    keys.update(extra)
    return keys


def email_keys(**extra) -> dict:
    keys = {
        "class-name": "email",
        "server": "mail.example.com",
        "port": 587,
        "from": "burrow@example.com",
        "to": "ops@example.com, dev@example.com",
        "template-open": "default-email-open.tmpl",
    }
    keys.update(extra)
    return keys


def status(value: Status = Status.WARN) -> ConsumerGroupStatus:
    return ConsumerGroupStatus("local", "payments", value, 1.0, [], 4, None, 30)


OPEN = Notification("alerts", Action.OPEN, Incident("id-1", 1_700_000_000.0))


# --- configuration ---------------------------------------------------------------------------------


def test_unknown_class_name_is_a_config_error(ctx):
    with pytest.raises(
        ConfigError,
        match=r"notifier\.alerts\.class-name: unknown notifier class 'slack' "
        r"\(known: email, http, null\)",
    ):
        build_notifier("alerts", section(**{"class-name": "slack"}), ctx)


def test_unknown_keys_are_rejected(ctx):
    with pytest.raises(ConfigError, match=r"notifier\.alerts\.url-opne: unknown key"):
        build_notifier("alerts", section(**http_keys(**{"url-opne": "x"})), ctx)


@pytest.mark.parametrize(
    "keys,message",
    [
        ({"url-open": None}, r"url-open: is required"),
        ({"send-close": True}, r"template-close: is required"),
        ({"send-close": True, "template-close": "default-http-close.tmpl"}, r"url-close: is required"),
        ({"method-open": "PO ST"}, r"method-open: 'PO ST' is not an HTTP method"),
        ({"threshold": 4}, r"threshold: must be 1 \(OK\), 2 \(WARN\) or 3 \(ERR\), got '4'"),
        ({"group-allowlist": "("}, r"group-allowlist: bad regular expression"),
        (
            {"extra-ca": "/nonexistent/ca.pem"},
            r"extra-ca: cannot load CA certificates from '/nonexistent/ca.pem'",
        ),
        ({"timeout": 0}, r"timeout: must be at least 1"),
        ({"url-open": "http://x/{{ group"}, r"url-open: bad template"),
    ],
)
def test_http_config_errors_name_the_key(ctx, keys, message):
    with pytest.raises(ConfigError, match=message):
        HttpNotifier("alerts", section(**http_keys(**keys)), ctx)


@pytest.mark.parametrize(
    "keys,message",
    [
        ({"server": None}, r"server: is required"),
        ({"from": None}, r"from: is required"),
        ({"to": ""}, r"to: must name at least one recipient"),
        ({"auth-type": "gssapi"}, r"auth-type: must be empty, plain, login or crammd5, got 'gssapi'"),
        ({"auth-type": "plain"}, r"username: is required with auth-type plain"),
        ({"port": 70000}, r"port: 70000 is not a TCP port"),
    ],
)
def test_email_config_errors_name_the_key(ctx, keys, message):
    with pytest.raises(ConfigError, match=message):
        EmailNotifier("alerts", section(**email_keys(**keys)), ctx)


def test_threshold_by_name_and_old_list_keys_with_a_warning(ctx, logs):
    notifier = NullNotifier(
        "alerts",
        section(
            **{"class-name": "null", "threshold": "err", "group-whitelist": "^pay", "group-blacklist": "test"}
        ),
        ctx,
    )
    assert notifier.policy.threshold == Status.ERR
    assert notifier.policy.accepts("payments") and not notifier.policy.accepts("payments-test")
    warnings = [e for e in logs.entries if e["log_level"] == "warning"]
    assert {(e["key"], e["new_key"]) for e in warnings} == {
        ("group-whitelist", "group-allowlist"),
        ("group-blacklist", "group-denylist"),
    }


def test_send_interval_defaults_to_interval(ctx):
    notifier = NullNotifier("n", section("n", **{"class-name": "null", "interval": 30}), ctx)
    assert notifier.policy.send_interval == 30
    notifier = NullNotifier(
        "n", section("n", **{"class-name": "null", "interval": 30, "send-interval": 300}), ctx
    )
    assert notifier.policy.send_interval == 300


def test_http_describe_has_burrows_fields(ctx):
    notifier = HttpNotifier(
        "alerts",
        section(
            **http_keys(
                **{
                    "send-close": True,
                    "url-close": "http://127.0.0.1:9/close",
                    "method-close": "delete",
                    "template-close": "default-http-close.tmpl",
                    "extras": {"app": "burrowpy"},
                    "group-allowlist": "^pay",
                    "noverify": True,
                }
            )
        ),
        ctx,
    )
    assert notifier.describe() == {
        "class-name": "http",
        "group-allowlist": "^pay",
        "interval": 60,
        "threshold": 2,
        "timeout": 5,
        "keepalive": 300,
        "url-open": "http://127.0.0.1:9/{{ group }}",
        "url-close": "http://127.0.0.1:9/close",
        "method-open": "POST",
        "method-close": "DELETE",
        "template-open": "default-http-open.tmpl",
        "template-close": "default-http-close.tmpl",
        "extra": {"app": "burrowpy"},
        "send-close": True,
        "extra-ca": "",
        "noverify": "true",
    }


def test_email_describe_has_burrows_fields_and_never_the_password(ctx):
    notifier = EmailNotifier(
        "alerts",
        section(**email_keys(**{"auth-type": "CRAMMD5", "username": "u", "password": "secret"})),
        ctx,
    )
    detail = notifier.describe()
    assert detail == {
        "class-name": "email",
        "group-allowlist": "",
        "interval": 60,
        "threshold": 2,
        "template-open": "default-email-open.tmpl",
        "template-close": "",
        "extra": {},
        "send-close": False,
        "server": "mail.example.com",
        "port": 587,
        "auth-type": "CRAMMD5",
        "username": "u",
        "from": "burrow@example.com",
        "to": "ops@example.com,dev@example.com",
        "extra-ca": "",
        "noverify": "false",
    }
    assert "secret" not in repr(detail)


def test_null_describe_is_the_common_fields(ctx):
    assert NullNotifier("n", section("n", **{"class-name": "null"}), ctx).describe() == {
        "class-name": "null",
        "group-allowlist": "",
        "interval": 60,
        "threshold": 2,
        "template-open": "",
        "template-close": "",
        "extra": {},
        "send-close": False,
    }


def test_noverify_turns_certificate_checks_off(ctx):
    assert HttpNotifier("a", section(**http_keys(noverify=True)), ctx).tls is False
    assert isinstance(HttpNotifier("a", section(**http_keys()), ctx).tls, ssl.SSLContext)
    email = EmailNotifier("a", section(**email_keys(noverify=True)), ctx)
    assert email.tls.verify_mode == ssl.CERT_NONE and not email.tls.check_hostname


# --- email messages --------------------------------------------------------------------------------


def test_build_message_takes_subject_and_recipients():
    message = build_message(
        "Subject: lag on payments\n\nline one\nline two\n",
        "burrow@example.com",
        ["ops@example.com", "dev@example.com"],
    )
    assert isinstance(message, EmailMessage)
    assert message["Subject"] == "lag on payments"
    assert message["From"] == "burrow@example.com"
    assert message["To"] == "ops@example.com, dev@example.com"
    assert message.get_content_type() == "text/plain"
    assert message.get_content() == "line one\nline two\n"


def test_build_message_content_type_and_mime_version_lines():
    message = build_message(
        "Subject: s\nContent-Type: text/html; charset=iso-8859-1\nMIME-version: 1.0;\n"
        "<p>caf\u00e9</p>\nSubject: not the subject\n",
        "a@example.com",
        ["b@example.com"],
    )
    assert message.get_content_type() == "text/html"
    assert message.get_content_charset() == "iso-8859-1"
    assert message["MIME-Version"] == "1.0"
    assert message.get_content() == "<p>caf\u00e9</p>\nSubject: not the subject\n"


def test_build_message_needs_the_subject_first():
    with pytest.raises(MessageError, match='does not start with "Subject: "'):
        build_message("\nSubject: late\n", "a@example.com", ["b@example.com"])


# --- rendering, retries and outcomes ---------------------------------------------------------------


class FlakyNotifier(NullNotifier):
    """A null notifier whose deliveries fail a given number of times first."""

    def __init__(self, *args, failures: int = 0, permanent: bool = False) -> None:
        super().__init__(*args)
        self.failures = failures
        self.permanent = permanent
        self.attempts = 0

    async def deliver(self, message):
        self.attempts += 1
        if self.attempts <= self.failures:
            raise DeliveryError(f"attempt {self.attempts} refused", permanent=self.permanent)
        await super().deliver(message)


def flaky(ctx, failures: int, permanent: bool = False, retries: int = 3) -> FlakyNotifier:
    keys = {"class-name": "null", "retries": retries, "retry-backoff": 0}
    return FlakyNotifier("alerts", section(**keys), ctx, failures=failures, permanent=permanent)


async def test_failed_deliveries_are_retried_and_counted(ctx, logs):
    notifier = flaky(ctx, failures=2)
    assert await notifier.notify(status(), OPEN) is True
    assert notifier.attempts == 3
    assert [c.incident_id for c in notifier.calls] == ["id-1"]
    assert (
        notifier.stats.retries == 2
        and notifier.stats.sent["open"] == 1
        and notifier.stats.failed["open"] == 0
    )
    assert [e["event"] for e in logs.entries] == ["notification failed, will retry"] * 2 + [
        "notification sent"
    ]
    assert logs.entries[0]["error"] == "attempt 1 refused" and logs.entries[0]["group"] == "payments"


async def test_retries_are_bounded(ctx, logs):
    notifier = flaky(ctx, failures=10, retries=2)
    assert await notifier.notify(status(), OPEN) is False
    assert notifier.attempts == 3 and not notifier.calls
    assert notifier.stats.failed["open"] == 1 and notifier.stats.retries == 2
    assert logs.entries[-1]["event"] == "notification not sent"
    assert logs.entries[-1]["gave_up"] == "out of retries"


async def test_permanent_failures_are_not_retried(ctx, logs):
    notifier = flaky(ctx, failures=1, permanent=True)
    assert await notifier.notify(status(), OPEN) is False
    assert notifier.attempts == 1 and notifier.stats.retries == 0
    assert logs.entries[-1]["gave_up"] == "permanent failure"


async def test_a_template_that_fails_is_logged_with_its_line_and_nothing_is_sent(ctx, logs, tmp_path):
    (tmp_path / "open.tmpl").write_text("Subject: {{ group }}\n{{ result.no_such_field }}\n")
    keys = {"class-name": "null", "template-open": str(tmp_path / "open.tmpl")}
    notifier = NullNotifier("alerts", section(**keys), ctx)
    assert await notifier.notify(status(), OPEN) is False
    assert not notifier.calls and notifier.stats.failed["open"] == 1
    (entry,) = logs.entries
    assert entry["event"] == "notification not sent: its template failed" and entry["log_level"] == "error"
    assert "open.tmpl line 2" in entry["error"] and "no_such_field" in entry["error"]


async def test_null_notifier_renders_configured_templates(ctx):
    keys = {"class-name": "null", "template-open": "default-http-close.tmpl"}
    notifier = NullNotifier("alerts", section(**keys), ctx)
    assert await notifier.notify(status(), OPEN)
    (call,) = notifier.calls
    assert (call.action, call.group, call.incident_id, call.status) == (
        Action.OPEN,
        "payments",
        "id-1",
        "WARN",
    )
    assert '"ids": ["id-1"]' in call.text
