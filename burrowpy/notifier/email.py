"""The ``email`` notifier: the rendered template becomes a mail sent over SMTP (burrow-spec 7.5).

The rendered text must start with ``Subject: ``. As in Burrow, the first ``Subject: `` line is the
subject, a ``Content-Type: `` line sets the body's type (default text/plain), a ``MIME-version: `` line
sets that header, and every other line is the body. Unlike Burrow, a content type's parameters
(``text/html; charset=utf-8``) are understood instead of having their semicolons deleted.

SMTP: port 465 is implicit TLS; on any other port STARTTLS is used whenever the server offers it, with
the configured server name checked against its certificate (``extra-ca`` adds a CA, ``noverify`` turns
checking off). ``auth-type`` is none, ``plain``, ``login`` or ``crammd5`` (``cram-md5``); like Go's
SMTP client we refuse to send a plain or login password over an unencrypted connection except to the
local host. smtplib blocks, so every send runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Any

from burrowpy.config import Section
from burrowpy.notifier.base import DeliveryError, MessageError, Notifier, verifying_tls
from burrowpy.notifier.decision import Action
from burrowpy.notifier.templates import render

SUBJECT = "Subject: "
CONTENT_TYPE = "Content-Type: "
MIME_VERSION = "MIME-version: "
AUTH_TYPES = {"": "", "plain": "PLAIN", "login": "LOGIN", "crammd5": "CRAM-MD5", "cram-md5": "CRAM-MD5"}
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
IMPLICIT_TLS_PORT = 465


def build_message(text: str, sender: str, recipients: list[str]) -> EmailMessage:
    """Turn a rendered email template into a message, following Burrow's line conventions."""
    if not text.startswith(SUBJECT):
        raise MessageError('the rendered email does not start with "Subject: " '
                           "(an email template must begin with its subject line)")
    subject = None
    content_type = "text/plain"
    mime_version = None
    body_lines = []
    for line in text.split("\n"):
        if line.startswith(SUBJECT) and subject is None:
            subject = line[len(SUBJECT):].strip()
        elif line.startswith(CONTENT_TYPE):
            content_type = line[len(CONTENT_TYPE):].strip()
        elif line.startswith(MIME_VERSION):
            mime_version = line[len(MIME_VERSION):].strip().rstrip(";")
        else:
            body_lines.append(line)
    body = "\n".join(body_lines).strip("\n") + "\n"

    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = sender
    message["To"] = ", ".join(recipients)
    message["Date"] = formatdate(localtime=True)
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or None)
    media_type, _, parameters = content_type.partition(";")
    maintype, _, subtype = media_type.strip().lower().partition("/")
    charset = "utf-8"
    for parameter in parameters.split(";"):
        key, _, value = parameter.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip('"')
    if maintype == "text":
        message.set_content(body, subtype=subtype or "plain", charset=charset)
    else:
        if not maintype or not subtype:
            raise MessageError(f"the rendered email has a bad Content-Type line: {content_type!r}")
        message.set_content(body.encode(charset), maintype=maintype, subtype=subtype)
    if mime_version:
        message.replace_header("MIME-Version", mime_version)
    return message


def smtp_tls(section: Section) -> ssl.SSLContext:
    """STARTTLS's context: verifying (``extra-ca`` added to the system's roots), or accepting any server with
    ``noverify``."""
    if section.get_bool("noverify", False):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return verifying_tls(section)


class EmailNotifier(Notifier):
    class_name = "email"
    class_keys = ("server", "port", "auth-type", "username", "password", "from", "to", "extra-ca", "noverify",
                  "timeout")

    def __init__(self, name: str, section: Section, ctx: Any) -> None:
        super().__init__(name, section, ctx)
        self.server = section.get_str("server").strip()
        if not self.server:
            raise section.error("server", "must name the SMTP server")
        self.port = section.get_int("port", 25, minimum=1)
        if self.port > 65535:
            raise section.error("port", f"{self.port} is not a TCP port")
        auth_type = section.get_str("auth-type", "").strip().lower()
        if auth_type not in AUTH_TYPES:
            raise section.error("auth-type", f"must be empty, plain, login or crammd5, got {auth_type!r}")
        self.auth_mechanism = AUTH_TYPES[auth_type]
        self.username = section.get_str("username", "")
        self.password = section.get_str("password", "")
        if self.auth_mechanism and not self.username:
            raise section.error("username", f"is required with auth-type {auth_type}")
        self.sender = section.get_str("from").strip()
        if not self.sender:
            raise section.error("from", "must be an email address")
        self.recipients = section.get_list("to")
        if not self.recipients:
            raise section.error("to", "must name at least one recipient")
        self.timeout = section.get_int("timeout", 10, minimum=1)
        self.tls = smtp_tls(section)

    def describe(self) -> dict[str, Any]:
        section = self.section
        detail = super().describe()
        detail.update({
            "server": self.server,
            "port": self.port,
            "auth-type": section.get_str("auth-type", ""),
            "username": self.username,
            "from": self.sender,
            "to": ",".join(self.recipients),
            "extra-ca": section.get_str("extra-ca", ""),
            "noverify": str(section.get_bool("noverify", False)).lower(),
        })
        return detail

    def prepare(self, action: Action, data: dict[str, Any]) -> EmailMessage:
        template = self.template_close if action is Action.CLOSE else self.template_open
        assert template is not None  # this notifier needs templates: loaded for each action it sends
        return build_message(render(template, data), self.sender, self.recipients)

    async def deliver(self, message: EmailMessage) -> None:
        target = f"SMTP {self.server}:{self.port}"
        try:
            await asyncio.to_thread(self._send, message)
        except smtplib.SMTPRecipientsRefused as exc:
            temporary = all(400 <= code < 500 for code, _ in exc.recipients.values())
            raise DeliveryError(f"{target}: recipients refused: {exc.recipients}", permanent=not temporary) from None
        except smtplib.SMTPResponseException as exc:
            reply = exc.smtp_error.decode(errors="replace") if isinstance(exc.smtp_error, bytes) else exc.smtp_error
            raise DeliveryError(f"{target}: {type(exc).__name__}: {exc.smtp_code} {reply}",
                                permanent=exc.smtp_code >= 500) from None
        except (smtplib.SMTPNotSupportedError, ssl.SSLCertVerificationError) as exc:
            raise DeliveryError(f"{target}: {type(exc).__name__}: {exc}", permanent=True) from None
        except (smtplib.SMTPException, OSError) as exc:
            raise DeliveryError(f"{target}: {type(exc).__name__}: {exc or 'timed out'}") from None

    def _send(self, message: EmailMessage) -> None:
        if self.port == IMPLICIT_TLS_PORT:
            smtp: smtplib.SMTP = smtplib.SMTP_SSL(self.server, self.port, timeout=self.timeout, context=self.tls)
            encrypted = True
        else:
            smtp = smtplib.SMTP(self.server, self.port, timeout=self.timeout)
            encrypted = False
        with smtp:
            smtp.ehlo()
            if not encrypted and smtp.has_extn("starttls"):
                smtp.starttls(context=self.tls)
                smtp.ehlo()
                encrypted = True
            if self.auth_mechanism:
                self._authenticate(smtp, encrypted)
            smtp.send_message(message, from_addr=self.sender, to_addrs=self.recipients)

    def _authenticate(self, smtp: smtplib.SMTP, encrypted: bool) -> None:
        if not encrypted and self.auth_mechanism != "CRAM-MD5" and self.server not in LOCAL_HOSTS:
            raise smtplib.SMTPNotSupportedError(
                f"refusing {self.auth_mechanism} authentication over an unencrypted connection "
                f"(the server did not offer STARTTLS)")
        smtp.user, smtp.password = self.username, self.password
        if self.auth_mechanism == "PLAIN":
            smtp.auth("PLAIN", smtp.auth_plain)
        elif self.auth_mechanism == "LOGIN":
            smtp.auth("LOGIN", smtp.auth_login, initial_response_ok=False)
        else:
            smtp.auth("CRAM-MD5", smtp.auth_cram_md5, initial_response_ok=False)
