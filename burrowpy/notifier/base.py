"""What every notifier module shares: the common config of burrow-spec 7.1, rendering, retries, counts.

A module class only says how to turn rendered templates into a message (:meth:`Notifier.prepare`) and
how to deliver it once (:meth:`Notifier.deliver`). Delivery failures that may go away (connection
refused, timeouts, 5xx, SMTP 4xx) are retried ``retries`` times with exponential backoff starting at
``retry-backoff`` seconds; Burrow gives up after the first failure. Nothing a notifier does raises into
the coordinator: every failure is logged with what was being sent and why it failed, and counted.
"""

from __future__ import annotations

import asyncio
import ssl
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import jinja2

from burrowpy.config import Section
from burrowpy.notifier.decision import Action, Notification, NotifyPolicy
from burrowpy.notifier.templates import TemplateRenderError, load_template, template_data
from burrowpy.protocol import ConsumerGroupStatus, Status

COMMON_KEYS = ("class-name", "interval", "send-interval", "threshold", "group-allowlist", "group-denylist",
               "group-whitelist", "group-blacklist", "extras", "template-open", "template-close",
               "send-close", "send-once", "retries", "retry-backoff")
MAX_RETRY_DELAY = 60.0  # seconds; a notification later than this is worth little, better give up sooner
THRESHOLDS = {"OK": Status.OK, "WARN": Status.WARN, "ERR": Status.ERR}


def verifying_tls(section: Section) -> ssl.SSLContext:
    """A TLS context that checks the server against the system's roots and the section's ``extra-ca`` file
    (a config error naming that key when the file cannot be loaded)."""
    context = ssl.create_default_context()
    extra_ca = section.get_str("extra-ca", "")
    if extra_ca:
        try:
            context.load_verify_locations(cafile=extra_ca)
        except (OSError, ssl.SSLError) as exc:
            raise section.error("extra-ca", f"cannot load CA certificates from {extra_ca!r}: {exc}") from None
    return context


class MessageError(Exception):
    """A rendered template does not make a valid message (an email template without its Subject line)."""


class DeliveryError(Exception):
    """One delivery attempt failed. ``permanent`` failures (bad credentials, 4xx) are not retried."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


@dataclass
class DeliveryStats:
    """Outcomes per action ("open"/"close"): the coordinator exports them on /metrics."""

    sent: dict[str, int] = field(default_factory=lambda: {a.value: 0 for a in Action})
    failed: dict[str, int] = field(default_factory=lambda: {a.value: 0 for a in Action})
    retries: int = 0


class Notifier(ABC):
    """Base of the notifier module classes: ``Class(name, section, ctx)``, ``start``/``stop``/``describe``."""

    class_name: ClassVar[str]
    class_keys: ClassVar[tuple[str, ...]] = ()
    needs_templates: ClassVar[bool] = True

    def __init__(self, name: str, section: Section, ctx: Any) -> None:
        self.name = name
        self.section = section
        self.logger = ctx.logger.bind(coordinator="notifier", module=name, class_name=self.class_name)
        section.check_keys(COMMON_KEYS + self.class_keys)
        self.interval = section.get_int("interval", 60, minimum=1)
        self.send_close = section.get_bool("send-close", False)
        self.policy = NotifyPolicy(
            threshold=self._threshold(section),
            send_interval=section.get_int("send-interval", self.interval, minimum=0),
            send_close=self.send_close,
            send_once=section.get_bool("send-once", False),
            allowlist=self._group_filter(section, "group-allowlist", "group-whitelist"),
            denylist=self._group_filter(section, "group-denylist", "group-blacklist"),
        )
        self.extras = section.get_map("extras", {})
        self.retries = section.get_int("retries", 3, minimum=0)
        self.retry_backoff = section.get_float("retry-backoff", 1.0)
        if self.retry_backoff < 0:
            raise section.error("retry-backoff", "must not be negative")
        self.template_open: jinja2.Template | None = None
        self.template_close: jinja2.Template | None = None
        if self.needs_templates or section.has("template-open"):
            self.template_open = load_template(section, "template-open")
        if self.send_close and (self.needs_templates or section.has("template-close")):
            self.template_close = load_template(section, "template-close")
        self.stats = DeliveryStats()

    @staticmethod
    def _threshold(section: Section) -> Status:
        raw = section.get_str("threshold", "2").strip().upper()
        if raw in THRESHOLDS:
            return THRESHOLDS[raw]
        if raw.isdigit() and int(raw) in THRESHOLDS.values():
            return Status(int(raw))
        raise section.error("threshold", f"must be 1 (OK), 2 (WARN) or 3 (ERR), got {raw!r}")

    def _group_filter(self, section: Section, key: str, old_key: str):
        if section.has(old_key):
            if section.has(key):
                raise section.error(old_key, f"is the old name of {key}; give only {key}")
            self.logger.warning("deprecated config key, read as its new name", key=old_key, new_key=key)
            return section.get_regex(old_key)
        return section.get_regex(key)

    # start/stop are optional hooks: most classes have nothing to open or close.
    async def start(self) -> None:  # noqa: B027
        """Open whatever the module needs to send (sessions, clients)."""

    async def stop(self) -> None:  # noqa: B027
        """Release what ``start`` opened."""

    def describe(self) -> dict[str, Any]:
        """The module detail of ``/v3/config/notifier/NAME`` (Burrow's field names)."""
        section = self.section
        return {
            "class-name": self.class_name,
            "group-allowlist": self.policy.allowlist.pattern if self.policy.allowlist else "",
            "interval": self.interval,
            "threshold": int(self.policy.threshold),
            "template-open": section.get_str("template-open", ""),
            "template-close": section.get_str("template-close", ""),
            "extra": dict(self.extras),
            "send-close": self.send_close,
        }

    @abstractmethod
    def prepare(self, action: Action, data: dict[str, Any]) -> Any:
        """Render the templates of ``action`` into the message :meth:`deliver` sends."""

    @abstractmethod
    async def deliver(self, message: Any) -> None:
        """Send one prepared message once; raise DeliveryError on failure."""

    async def notify(self, status: ConsumerGroupStatus, notification: Notification) -> bool:
        """Render and deliver one notification, retrying; True when it was delivered. Never raises."""
        incident = notification.incident
        action = notification.action
        log = self.logger.bind(cluster=status.cluster, group=status.group, action=action.value,
                               id=incident.id if incident else "", status=status.status.name)
        data = template_data(status, incident.id if incident else "", incident.start if incident else None,
                             self.extras)
        try:
            message = self.prepare(action, data)
        except (TemplateRenderError, MessageError) as exc:
            log.error("notification not sent: its template failed", error=str(exc))
            self.stats.failed[action.value] += 1
            return False
        attempt = 1
        while True:
            try:
                await self.deliver(message)
            except DeliveryError as exc:
                if exc.permanent or attempt > self.retries:
                    log.error("notification not sent", error=str(exc), attempts=attempt,
                              gave_up="permanent failure" if exc.permanent else "out of retries")
                    self.stats.failed[action.value] += 1
                    return False
                delay = min(self.retry_backoff * 2 ** (attempt - 1), MAX_RETRY_DELAY)
                log.warning("notification failed, will retry", error=str(exc), attempt=attempt,
                            retry_in_seconds=delay)
                self.stats.retries += 1
                attempt += 1
                await asyncio.sleep(delay)
                continue
            log.info("notification sent", attempts=attempt)
            self.stats.sent[action.value] += 1
            return True
