"""The ``http`` notifier: a rendered JSON body sent to a URL that is itself a template (burrow-spec 7.4).

Requests carry ``Content-Type: application/json`` and then the configured ``headers`` (which may
override it), basic auth when ``username`` is set, and honour the proxy environment variables. A 2xx
answer is success. Unlike Burrow, connection failures, timeouts, 408, 429 and 5xx answers are retried
(see ``base.py``); other answers mean the request itself is wrong and are not.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

import aiohttp
from multidict import CIMultiDict

from burrowpy.config import Section
from burrowpy.notifier.base import DeliveryError, Notifier, verifying_tls
from burrowpy.notifier.decision import Action
from burrowpy.notifier.templates import compile_inline, render

RETRYABLE_STATUSES = frozenset({408, 429})


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    url: str
    body: str


def client_tls(section: Section) -> ssl.SSLContext | bool:
    """The ``ssl`` argument for aiohttp: system roots plus ``extra-ca``, or False with ``noverify``."""
    if section.get_bool("noverify", False):
        return False
    return verifying_tls(section)


class HttpNotifier(Notifier):
    class_name = "http"
    class_keys = ("url-open", "url-close", "method-open", "method-close", "timeout", "keepalive",
                  "disable-http-keepalive", "extra-ca", "noverify", "username", "password", "headers")

    def __init__(self, name: str, section: Section, ctx: Any) -> None:
        super().__init__(name, section, ctx)
        self.url_open = compile_inline(section, "url-open")
        self.method_open = self._method(section, "method-open")
        self.url_close = compile_inline(section, "url-close") if self.send_close else None
        self.method_close = self._method(section, "method-close")
        self.timeout = section.get_int("timeout", 5, minimum=1)
        self.keepalive = section.get_int("keepalive", 300, minimum=0)
        self.disable_keepalive = section.get_bool("disable-http-keepalive", False)
        self.tls = client_tls(section)
        self.headers = CIMultiDict({"Content-Type": "application/json"})
        username = section.get_str("username", "")
        if username:
            self.headers["Authorization"] = aiohttp.encode_basic_auth(username, section.get_str("password", ""))
        for header, value in section.get_map("headers", {}).items():
            self.headers[header] = value
        self._session: aiohttp.ClientSession | None = None

    @staticmethod
    def _method(section: Section, key: str) -> str:
        method = section.get_str(key, "POST").strip().upper()
        if not method.isalpha():
            raise section.error(key, f"{method!r} is not an HTTP method")
        return method

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(ssl=self.tls, force_close=self.disable_keepalive,
                                         keepalive_timeout=None if self.disable_keepalive else self.keepalive)
        self._session = aiohttp.ClientSession(connector=connector, trust_env=True,
                                              timeout=aiohttp.ClientTimeout(total=self.timeout))

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def describe(self) -> dict[str, Any]:
        section = self.section
        detail = super().describe()
        detail.update({
            "timeout": self.timeout,
            "keepalive": self.keepalive,
            "url-open": section.get_str("url-open"),
            "url-close": section.get_str("url-close", ""),
            "method-open": self.method_open,
            "method-close": self.method_close,
            "extra-ca": section.get_str("extra-ca", ""),
            "noverify": str(section.get_bool("noverify", False)).lower(),
        })
        return detail

    def prepare(self, action: Action, data: dict[str, Any]) -> HttpRequest:
        if action is Action.CLOSE:
            template, url, method = self.template_close, self.url_close, self.method_close
        else:
            template, url, method = self.template_open, self.url_open, self.method_open
        assert template is not None and url is not None  # loaded for each action it sends (close: send-close)
        return HttpRequest(method, render(url, data).strip(), render(template, data))

    async def deliver(self, message: HttpRequest) -> None:
        if self._session is None:
            raise DeliveryError("the notifier is not started", permanent=True)
        target = f"{message.method} {message.url}"
        try:
            async with self._session.request(message.method, message.url, data=message.body.encode(),
                                             headers=self.headers) as response:
                answer = (await response.text(errors="replace"))[:200]
        except (aiohttp.InvalidURL, aiohttp.ClientConnectorCertificateError, ValueError) as exc:
            raise DeliveryError(f"{target}: {type(exc).__name__}: {exc}", permanent=True) from None
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise DeliveryError(f"{target}: {type(exc).__name__}: {exc or 'timed out'}") from None
        if 200 <= response.status < 300:
            return
        retryable = response.status >= 500 or response.status in RETRYABLE_STATUSES
        raise DeliveryError(f"{target}: answered {response.status} {response.reason}: {answer!r}",
                            permanent=not retryable)
