"""What the notifier integration tests share: a real monitor core, config sections, polling.

:class:`MonitorCore` is the monitor's real in-memory storage and caching evaluator on the real clock,
behind a real ApplicationContext. Its groups are driven into STOP (commits that stopped while the
broker moved on) and back to OK (a commit that catches up) with the same storage requests the
consumer modules send, so the notifier sees real evaluations. Used in-process by the tests and in a
subprocess by notifier_peer.py.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
from structlog.testing import LogCapture

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


async def eventually(condition: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll ``condition`` until it returns something true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        await asyncio.sleep(0.02)
