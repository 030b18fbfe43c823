"""The notifier coordinator over the real in-memory storage and caching evaluator, with a fake clock."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
import structlog
from prometheus_client import CollectorRegistry, generate_latest
from structlog.testing import LogCapture

from burrowpy.config import Config, Section
from burrowpy.context import ApplicationContext
from burrowpy.evaluator.caching import CachingEvaluator
from burrowpy.evaluator.share import ShareGroupWindows, SharePartitionOffset
from burrowpy.notifier.coordinator import NotifierCoordinator
from burrowpy.notifier.decision import Action
from burrowpy.protocol import SetBrokerOffset, SetConsumerOffset, SetDeleteGroup
from burrowpy.storage.inmemory import InMemoryStorage

T0 = 1_700_000_000.0


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


@pytest.fixture
async def monitor():
    """A context with real storage (cluster "local") and evaluator, started; stopped afterwards."""
    clock = FakeClock(T0)
    logs = LogCapture()
    logger = structlog.wrap_logger(structlog.PrintLogger(), processors=[logs])
    storage = InMemoryStorage("default", Section("t.yaml", "storage.default", {}), ["local"], clock, logger)
    evaluator = CachingEvaluator(
        "default", Section("t.yaml", "evaluator.default", {"expire-cache": 0}), storage, clock, logger
    )
    ctx = ApplicationContext(
        config=Config(file="t.yaml"), logger=logger, storage=storage, evaluator=evaluator, clock=clock
    )
    ctx.logs = logs
    await storage.start()
    await evaluator.start()
    yield ctx
    await evaluator.stop()
    await storage.stop()


def notifiers(**modules: dict) -> dict[str, Section]:
    return {name: Section("t.yaml", f"notifier.{name}", keys) for name, keys in modules.items()}


async def stopped_group(ctx, group: str) -> None:
    """Commits 100, 200, 300 twenty to thirty seconds ago against a broker at 1000: STOP, group ERR."""
    now_ms = int(ctx.clock.time() * 1000)
    ctx.storage.submit(SetBrokerOffset("local", "orders", 0, 1, 1000, now_ms))
    await ctx.storage.flush()  # broker offsets and commits go to different workers; commits need the offset
    for order, (offset, age) in enumerate([(100, 30), (200, 25), (300, 20)], start=1):
        ctx.storage.submit(SetConsumerOffset("local", group, "orders", 0, offset, order, now_ms - age * 1000))
    await ctx.storage.flush()


async def caught_up(ctx, group: str) -> None:
    """A commit at the broker's offset: lag 0, the group is OK again."""
    ctx.storage.submit(SetConsumerOffset("local", group, "orders", 0, 1000, 10, int(ctx.clock.time() * 1000)))
    await ctx.storage.flush()


async def test_open_then_close_for_a_group_that_stops_and_recovers(monitor):
    sections = notifiers(alerts={"class-name": "null", "send-close": True, "interval": 10})
    coordinator = NotifierCoordinator(monitor, sections)
    await stopped_group(monitor, "payments")
    await coordinator.refresh_groups()
    assert list(coordinator.groups) == ["local"] and list(coordinator.groups["local"]) == ["payments"]

    await coordinator.evaluate_group("local", "payments")
    await coordinator.wait_idle()
    calls = coordinator.modules["alerts"].calls
    assert [(c.action, c.status) for c in calls] == [(Action.OPEN, "ERR")]
    incident = calls[0].incident_id
    assert len(incident) == 36  # a UUID, as Burrow's incident ids

    monitor.clock.now += 5
    await coordinator.evaluate_group("local", "payments")  # still stopped, send-interval not over
    await caught_up(monitor, "payments")
    await coordinator.evaluate_group("local", "payments")
    await coordinator.wait_idle()
    assert [(c.action, c.status, c.incident_id) for c in calls] == [
        (Action.OPEN, "ERR", incident),
        (Action.CLOSE, "OK", incident),
    ]


async def test_refresh_tracks_new_groups_with_jitter_and_forgets_deleted_ones(monitor):
    sections = notifiers(
        fast={"class-name": "null", "interval": 20}, slow={"class-name": "null", "interval": 90}
    )
    coordinator = NotifierCoordinator(monitor, sections, rng=random.Random(7))
    assert coordinator.min_interval == 20
    assert coordinator.group_refresh == 20  # a new group is noticed within one interval...
    slow = NotifierCoordinator(monitor, notifiers(slow={"class-name": "null", "interval": 300}))
    assert slow.group_refresh == 60  # ...or within Burrow's minute
    for group in ("a", "b", "c"):
        await stopped_group(monitor, group)
    await coordinator.refresh_groups()
    tracked = coordinator.groups["local"]
    assert sorted(tracked) == ["a", "b", "c"]
    assert all(T0 - 20 <= g.last_eval <= T0 for g in tracked.values())
    assert len({g.last_eval for g in tracked.values()}) == 3  # spread out, not all at once

    assert sorted(coordinator.due_groups(T0 + 20)) == [("local", "a"), ("local", "b"), ("local", "c")]
    assert coordinator.due_groups(T0 + 39) == []
    assert len(coordinator.due_groups(T0 + 40)) == 3

    monitor.storage.submit(SetDeleteGroup("local", "b"))
    await monitor.storage.flush()
    await coordinator.refresh_groups()
    assert sorted(coordinator.groups["local"]) == ["a", "c"]
    assert coordinator.groups["local"]["a"] is tracked["a"]  # state survives a refresh


async def test_each_notifier_gets_only_its_groups(monitor):
    sections = notifiers(
        payments={"class-name": "null", "group-allowlist": "^pay"},
        others={"class-name": "null", "group-denylist": "^pay"},
    )
    coordinator = NotifierCoordinator(monitor, sections)
    for group in ("payments", "orders"):
        await stopped_group(monitor, group)
    await coordinator.refresh_groups()
    for group in ("payments", "orders"):
        await coordinator.evaluate_group("local", group)
    await coordinator.wait_idle()
    assert [c.group for c in coordinator.modules["payments"].calls] == ["payments"]
    assert [c.group for c in coordinator.modules["others"].calls] == ["orders"]


async def test_unknown_and_healthy_groups_send_nothing(monitor):
    coordinator = NotifierCoordinator(monitor, notifiers(alerts={"class-name": "null"}))
    await stopped_group(monitor, "payments")
    await caught_up(monitor, "payments")
    await coordinator.refresh_groups()
    await coordinator.evaluate_group("local", "payments")
    await coordinator.evaluate_group("local", "no-such-group")
    await coordinator.wait_idle()
    assert not coordinator.modules["alerts"].calls
    assert coordinator.evaluations == 2


async def test_metrics_count_notifications_and_evaluations(monitor):
    registry = CollectorRegistry(auto_describe=True)
    coordinator = NotifierCoordinator(monitor, notifiers(alerts={"class-name": "null"}), registry=registry)
    await stopped_group(monitor, "payments")
    await coordinator.refresh_groups()
    await coordinator.evaluate_group("local", "payments")
    await coordinator.wait_idle()
    text = generate_latest(registry).decode()
    assert 'burrowpy_notifier_notifications_total{action="open",notifier="alerts",result="sent"} 1.0' in text
    assert (
        'burrowpy_notifier_notifications_total{action="close",notifier="alerts",result="failed"} 0.0' in text
    )
    assert 'burrowpy_notifier_retries_total{notifier="alerts"} 0.0' in text
    assert "burrowpy_notifier_evaluations_total 1.0" in text
    # no lock: the only instance sends
    assert f'burrowpy_notifier_leader{{instance="{coordinator.instance}",lock="none"}} 1.0' in text


async def eventually(condition, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def test_start_runs_the_refresh_and_evaluation_loops_and_stop_releases_the_registry(monitor):
    registry = CollectorRegistry(auto_describe=True)
    coordinator = NotifierCoordinator(
        monitor, notifiers(alerts={"class-name": "null"}), registry=registry, group_refresh=3600
    )
    await stopped_group(monitor, "payments")
    await coordinator.start()
    try:
        await eventually(lambda: "payments" in coordinator.groups.get("local", {}))  # refreshed at start
        assert coordinator.evaluations == 0  # its first evaluation is up to one interval away
        monitor.clock.now += 60
        await coordinator.refresh_groups()  # wakes the evaluation loop, which finds the group due
        await eventually(lambda: len(coordinator.modules["alerts"].calls) == 1)
        assert coordinator.modules["alerts"].calls[0].action is Action.OPEN
    finally:
        await coordinator.stop()
    assert "burrowpy_notifier" not in generate_latest(registry).decode()
    assert any(
        e["event"] == "no ZooKeeper configured: this instance sends every notification"
        for e in monitor.logs.entries
    )


class ShareGroupsModule:
    """What the notifier reads of a kafka cluster module: its share groups' windows."""

    def __init__(self, windows) -> None:
        self.share_groups = windows


async def test_a_stalled_share_group_opens_an_incident_rendered_as_a_share_group(monitor):
    template = Path(__file__).parents[2] / "config" / "templates" / "default-email-open.tmpl"
    sections = notifiers(alerts={"class-name": "null", "interval": 10, "template-open": str(template)})
    windows = ShareGroupWindows("local", intervals=3)
    monitor.modules["cluster"] = {"local": ShareGroupsModule(windows)}
    now_ms = int(monitor.clock.time() * 1000)
    for second in range(3):  # the start offset stays at 40 while 60 records wait
        windows.observe("jobs", "Empty", [SharePartitionOffset("work", 0, 40, 60)], {("work", 0): 100},
                        now_ms - (2 - second) * 1000)
    coordinator = NotifierCoordinator(monitor, sections)
    await coordinator.refresh_groups()
    assert coordinator.groups["local"]["jobs"].share

    await coordinator.evaluate_group("local", "jobs")
    await coordinator.wait_idle()
    [call] = coordinator.modules["alerts"].calls
    assert (call.action, call.group, call.status) == (Action.OPEN, "jobs", "ERR")
    assert call.text.startswith("Subject: [burrowpy] Kafka share group lag alert: jobs on local is ERR")
    assert "STALL work:0 lag 60" in call.text


async def test_stop_right_after_a_refresh_woke_the_evaluation_loop_stops_it(monitor):
    """The refresh wakes the evaluation loop and the stop cancels it in the same step of the event loop. Python
    3.11's ``asyncio.wait_for`` then returned the wake-up and dropped the cancel, and the loop ran on: ``stop``
    waited for it for ever (a CI run hung there until the suite's timeout)."""
    coordinator = NotifierCoordinator(monitor, notifiers(alerts={"class-name": "null"}), group_refresh=3600)
    await coordinator.start()
    await eventually(lambda: coordinator.groups.get("local") is not None)  # the first refresh is done
    for _ in range(3):
        await asyncio.sleep(0)  # the evaluation loop parks in its wait for a wake-up
    await coordinator.refresh_groups()  # sets the wake-up: no await between it and the cancels of stop
    stopping = asyncio.ensure_future(coordinator.stop())
    done, _ = await asyncio.wait([stopping], timeout=5)
    if not done:
        for task in coordinator._loops:
            task.cancel()  # let the test end; the failure is the hang
        await asyncio.wait([stopping], timeout=5)
    assert done, "the notifier coordinator did not stop within 5 s: a cancel was lost"
