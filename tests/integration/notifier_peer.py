"""One burrowpy notifier instance in a process of its own, for the ZooKeeper lock tests.

    python notifier_peer.py ZK_HOSTS ROOT_PATH RECEIVER_URL NAME

Runs the real monitor core with the group "payments" stopped, the ZooKeeper coordinator, and the
notifier coordinator with an http notifier that POSTs open notifications to RECEIVER_URL with the
header ``X-Instance: NAME``. It prints "started" once running and "evaluated" after every group
evaluation (which only the lock holder makes), so that a test can see how long it has been the
sender; logs go to stderr as JSON lines. It runs until it is killed.
"""

from __future__ import annotations

import asyncio
import sys

import structlog
from notifier_support import CONFIG_FILE, MonitorCore, notifier_sections

from burrowpy.config import Section
from burrowpy.coordinators.zookeeper import ZookeeperCoordinator
from burrowpy.notifier.coordinator import NotifierCoordinator


class AnnouncingEvaluator:
    """The real evaluator, plus a line on stdout for every evaluation."""

    def __init__(self, evaluator) -> None:
        self._evaluator = evaluator

    async def evaluate(self, cluster: str, group: str, showall: bool):
        status = await self._evaluator.evaluate(cluster, group, showall)
        print("evaluated", flush=True)
        return status


async def main(hosts: str, root_path: str, url: str, name: str) -> None:
    logger = structlog.wrap_logger(structlog.PrintLogger(sys.stderr),
                                   processors=[structlog.processors.add_log_level,
                                               structlog.processors.TimeStamper(fmt="iso"),
                                               structlog.processors.JSONRenderer()])
    core = MonitorCore(logger.bind(instance=name))
    await core.start()
    await core.stop_group("payments")
    core.ctx.evaluator = AnnouncingEvaluator(core.ctx.evaluator)
    zookeeper = ZookeeperCoordinator(
        Section(CONFIG_FILE, "zookeeper", {"servers": [hosts], "timeout": 2, "root-path": root_path}), core.ctx)
    await zookeeper.start()
    notifier = {"class-name": "http", "interval": 1, "send-interval": 3600, "url-open": url,
                "template-open": "default-http-open.tmpl", "url-close": url.replace("/open", "/close"),
                "template-close": "default-http-close.tmpl", "send-close": True, "headers": {"X-Instance": name}}
    coordinator = NotifierCoordinator(core.ctx, notifier_sections(alerts=notifier), zookeeper=zookeeper)
    await coordinator.start()
    print("started", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
