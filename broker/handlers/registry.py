"""Where API handlers register themselves, and what they are given.

A handler is ``async def handle(ctx: RequestContext, request: dict) -> dict | None``: it receives the
decoded request body and returns the response body (``None`` means no response is sent, e.g. Produce with
acks=0). Handler modules register with ``@handler(ApiKey.X)`` and are imported by ``broker.handlers``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.broker import Broker


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    listener: str = "PLAINTEXT"  # the listener the request came in on: Metadata answers with its addresses
    api_versions: dict[int, tuple[int, int]] | None = None  # what this listener serves, if not the broker's


Handler = Callable[[RequestContext, dict[str, Any]], Awaitable[dict[str, Any] | None]]

HANDLERS: dict[int, Handler] = {}


def handler(api_key: int) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        if api_key in HANDLERS:
            raise RuntimeError(f"two handlers for api key {api_key}")
        HANDLERS[api_key] = fn
        return fn

    return register
