"""The ApplicationContext: what every coordinator and module of the monitor shares.

Modules never reach each other directly: cluster and consumer modules send storage requests through
:meth:`ApplicationContext.submit`, the HTTP server and the notifiers ask the evaluator, and the evaluator
asks storage. The daemon fills the context in startup order (storage and evaluator before the modules
that use them) and sets ``app_ready`` once every consumer module has started.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from burrowpy.config import Config
from burrowpy.evaluator.group import GroupEvaluation
from burrowpy.protocol import ConsumerGroupStatus


class Clock(Protocol):
    def time(self) -> float:
        """Seconds since the epoch."""


class SystemClock:
    def time(self) -> float:
        return time.time()


class Storage(Protocol):
    def submit(self, request: Any) -> None:
        """Queue a protocol.py storage request; Fetch requests are answered through their ``reply`` future."""

    def submit_many(self, requests: Iterable[Any]) -> None:
        """``submit`` each request, in order."""

    def pending(self) -> int:
        """Requests queued and not handled yet (readers that can outrun storage wait while it is large)."""


class Evaluator(Protocol):
    async def evaluate(self, cluster: str, group: str, showall: bool) -> ConsumerGroupStatus: ...

    async def evaluation(self, cluster: str, group: str) -> GroupEvaluation: ...

    async def evaluations(self, cluster: str, groups: Sequence[str]) -> list[GroupEvaluation]: ...


class HistoryRecorder(Protocol):
    def record(self, request: Any) -> None: ...

    def close(self) -> None: ...


class LogLevelControl(Protocol):
    @property
    def level(self) -> str: ...

    def set_level(self, name: str) -> bool: ...


@dataclass
class ApplicationContext:
    config: Config
    logger: Any  # structlog BoundLogger; modules bind their own fields (type, name)
    storage: Storage | None = None
    evaluator: Evaluator | None = None
    zookeeper: Any = None  # kazoo KazooClient, only when notifiers are configured
    clock: Clock = field(default_factory=SystemClock)
    app_ready: asyncio.Event = field(default_factory=asyncio.Event)
    history: HistoryRecorder | None = None
    # Level changes through /v3/admin/loglevel; None when the embedding program owns logging.
    log_control: LogLevelControl | None = None
    # What /metrics exposes besides Burrow's scrape-time gauges; private so several daemons can share a process.
    registry: CollectorRegistry = field(default_factory=lambda: CollectorRegistry(auto_describe=True))
    # Built modules by kind and name ("cluster" -> {"local": module}), for /v3/config and /v3/kafka/:cluster.
    modules: dict[str, dict[str, Any]] = field(default_factory=dict)
    notifier: Any = None  # the notifier coordinator, when notifiers are configured: who sends, for the API

    def submit(self, request: Any) -> None:
        """Send a storage Set request from a cluster or consumer module, teeing it to history capture."""
        if self.history is not None:
            self._record(request)
        self.storage.submit(request)

    def submit_many(self, requests: list[Any]) -> None:
        """:meth:`submit` each request, in order, at a lower cost per request (the offsets-topic reader)."""
        if self.history is not None:
            for request in requests:
                self._record(request)
        self.storage.submit_many(requests)

    def _record(self, request: Any) -> None:
        try:
            self.history.record(request)
        except Exception:
            # Losing history must not stop monitoring: storage still gets the request.
            self.logger.exception("history capture failed", request=type(request).__name__)

    async def fetch(self, request: Any) -> Any:
        """Send a storage Fetch request (built with ``reply=ctx.new_reply()``) and wait for its answer;
        None means the cluster, group or topic is unknown."""
        self.storage.submit(request)
        return await request.reply

    @staticmethod
    def new_reply() -> asyncio.Future:
        return asyncio.get_running_loop().create_future()
