"""The notifier coordinator: which groups exist, when to evaluate them, whom to tell (burrow-spec 7.2).

Every instance refreshes the group list from storage at start and then every ``interval`` seconds,
at most 60 (Burrow refreshes every 60 s only, and first after a minute, so with a short interval a new
group went unwatched for up to a minute). Only the instance holding the ZooKeeper lock
``<root-path>/notifier`` evaluates groups: every group is evaluated (``showall=False``, so templates
see only the partitions with problems) once per ``interval`` (the smallest of all notifiers), new
groups with a random offset so that evaluations spread out. Each result goes through the pure
:func:`~burrowpy.notifier.decision.step`, and the notifications it returns are sent in the background.
Without a ZooKeeper coordinator the instance assumes it is the only one and always sends. Instead of
ZooKeeper the lock can live in Kafka (``kafka_lock.py``); that lock also stores each group's notification
state, which a new sender reads before it evaluates anything, so incidents survive the handover.

Sends to one notifier about one group happen in order (a close never overtakes the open it closes),
while different groups and notifiers do not wait for each other, so a slow or failing endpoint (which
is retried, see ``base.py``) does not hold up anything else.

``/metrics``: the coordinator's :class:`NotifierMetrics` is a prometheus collector; pass ``registry``
or register ``coordinator.metrics`` with the HTTP server's registry.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import socket
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from burrowpy.config import Section
from burrowpy.coordinators.zookeeper import ZookeeperCoordinator
from burrowpy.evaluator.share import rule_settings
from burrowpy.notifier.base import Notifier
from burrowpy.notifier.decision import Action, GroupState, Notification, step
from burrowpy.notifier.email import EmailNotifier
from burrowpy.notifier.http import HttpNotifier
from burrowpy.notifier.null import NullNotifier
from burrowpy.protocol import ConsumerGroupStatus, FetchClusters, FetchConsumers, Status

NOTIFIER_CLASSES: dict[str, type[Notifier]] = {"http": HttpNotifier, "email": EmailNotifier, "null": NullNotifier}
GROUP_REFRESH_SECONDS = 60.0
STORAGE_REPLY_TIMEOUT = 10.0  # seconds; storage answers fetches from memory, so this is a stuck worker
IDLE_WAKEUP = 5.0  # seconds; the evaluation loop looks again at least this often


def build_notifier(name: str, section: Section, ctx: Any) -> Notifier:
    class_name = section.get_str("class-name")
    if class_name not in NOTIFIER_CLASSES:
        raise section.error("class-name", f"unknown notifier class {class_name!r} "
                                          f"(known: {', '.join(sorted(NOTIFIER_CLASSES))})")
    return NOTIFIER_CLASSES[class_name](name, section, ctx)


class NotifierLock(Protocol):
    """What the coordinator needs of a lock: the ZooKeeper one or the Kafka one."""

    identifier: str

    @property
    def held(self) -> bool: ...

    async def wait_held(self) -> None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class IncidentStore(Protocol):
    """Where a sender leaves each group's notification state for the next one (``kafka_lock.py``)."""

    @property
    def generation(self) -> int:
        """Changes each time this instance takes the lock."""

    async def load_states(self) -> dict[tuple[str, str], GroupState]: ...

    async def save_state(self, cluster: str, group: str, state: GroupState) -> None: ...


@dataclass
class TrackedGroup:
    last_eval: float
    state: GroupState = field(default_factory=GroupState)
    share: bool = False  # a share group, judged by its cluster module's windows (burrowpy.evaluator.share)


class NotifierMetrics:
    """Prometheus collector of the notifier: deliveries, retries, evaluations, and who is the sender."""

    def __init__(self, coordinator: NotifierCoordinator) -> None:
        self._coordinator = coordinator

    def collect(self) -> Iterator[Metric]:
        coordinator = self._coordinator
        notifications = CounterMetricFamily(
            "burrowpy_notifier_notifications", "Notifications by notifier, action (open/close) and result",
            labels=["notifier", "action", "result"])
        retries = CounterMetricFamily("burrowpy_notifier_retries", "Delivery attempts repeated after a failure",
                                      labels=["notifier"])
        for name, module in sorted(coordinator.modules.items()):
            for action in Action:
                notifications.add_metric([name, action.value, "sent"], module.stats.sent[action.value])
                notifications.add_metric([name, action.value, "failed"], module.stats.failed[action.value])
            retries.add_metric([name], module.stats.retries)
        yield notifications
        yield retries
        yield CounterMetricFamily("burrowpy_notifier_evaluations", "Group evaluations requested by the notifier",
                                  value=coordinator.evaluations)
        leader = GaugeMetricFamily("burrowpy_notifier_leader",
                                   "1 when this instance holds the notifier lock and sends notifications",
                                   labels=["instance", "lock"])
        leader.add_metric([coordinator.instance, coordinator.lock_kind], 1 if coordinator.is_leader else 0)
        yield leader


class NotifierCoordinator:
    """Builds the notifier modules of ``sections`` (name -> Section) and drives them."""

    def __init__(self, ctx: Any, sections: Mapping[str, Section], *,
                 zookeeper: ZookeeperCoordinator | None = None, lock: NotifierLock | None = None,
                 store: IncidentStore | None = None, registry: CollectorRegistry | None = None,
                 group_refresh: float | None = None, rng: random.Random | None = None) -> None:
        self.ctx = ctx
        self.logger = ctx.logger.bind(coordinator="notifier")
        self.modules = {name: build_notifier(name, section, ctx) for name, section in sections.items()}
        self.policies = {name: module.policy for name, module in self.modules.items()}
        self.min_interval = min((m.interval for m in self.modules.values()), default=GROUP_REFRESH_SECONDS)
        self.group_refresh = group_refresh if group_refresh is not None else min(GROUP_REFRESH_SECONDS,
                                                                                self.min_interval)
        self.groups: dict[str, dict[str, TrackedGroup]] = {}
        self.evaluations = 0
        if lock is None and zookeeper is not None:
            from burrowpy.notifier.zookeeper_state import ZookeeperIncidentStore

            # Burrow's lock, with the incidents' state beside it (Burrow keeps that in memory only)
            zookeeper_lock = zookeeper.lock("notifier")
            lock, store = zookeeper_lock, store or ZookeeperIncidentStore(zookeeper_lock)
        self._lock: NotifierLock | None = lock
        self.lock_kind = getattr(self._lock, "kind", "zookeeper") if self._lock is not None else "none"
        self.instance = (self._lock.identifier if self._lock is not None
                         else f"{socket.gethostname()}:{os.getpid()}")
        self._store = store
        self._loaded_generation = 0  # the store's generation whose states this instance has read
        self._carried: dict[tuple[str, str], GroupState] = {}  # read from the store, for groups not tracked yet
        self._saves: dict[tuple[str, str], asyncio.Task] = {}
        self.metrics = NotifierMetrics(self)
        self._registry = registry
        if registry is not None:
            registry.register(self.metrics)
        self._rng = rng or random.Random()
        self._wake = asyncio.Event()
        self._loops: list[asyncio.Task] = []
        self._deliveries: dict[tuple[str, str, str], asyncio.Task] = {}

    @property
    def is_leader(self) -> bool:
        """Whether this instance is the one that evaluates groups and sends notifications."""
        return self._lock is None or self._lock.held

    def describe(self) -> dict[str, Any]:
        """Who sends: this instance's part in the choice, for the HTTP API."""
        describe = getattr(self._lock, "describe", None)
        if describe is not None:
            return describe()
        return {"lock": self.lock_kind, "instance": self.instance, "sender": self.is_leader}

    async def start(self) -> None:
        if not self.modules:
            return
        for module in self.modules.values():
            await module.start()
        if self._lock is None:
            self.logger.info("no ZooKeeper configured: this instance sends every notification")
        else:
            await self._lock.start()
        self._loops = [asyncio.create_task(self._refresh_loop(), name="notifier-group-refresh"),
                       asyncio.create_task(self._evaluation_loop(), name="notifier-evaluation")]

    async def stop(self) -> None:
        for task in self._loops:
            task.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        if self._lock is not None:
            await self._lock.stop()
        pending = list(self._deliveries.values()) + list(self._saves.values())
        if pending:
            self.logger.warning("stopping with notifications still being sent; they are dropped", count=len(pending))
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for module in self.modules.values():
            await module.stop()
        if self._registry is not None:
            self._registry.unregister(self.metrics)

    # --- group list -----------------------------------------------------------------------------------

    async def refresh_groups(self) -> None:
        """Track exactly the groups storage knows and the share groups the cluster modules read; new ones get a
        random first evaluation time."""
        clusters = await self._fetch(lambda reply: FetchClusters(reply=reply)) or []
        now = self.ctx.clock.time()
        known: dict[str, dict[str, TrackedGroup]] = {}
        answered: set[str] = set()  # clusters whose group list storage gave: only there a missing group vanished
        for cluster in clusters:
            names = await self._fetch(lambda reply, c=cluster: FetchConsumers(cluster=c, reply=reply))
            if names is None:
                names = []
            else:
                answered.add(cluster)
            tracked = self.groups.get(cluster, {})
            known[cluster] = {
                group: tracked.get(group) or TrackedGroup(last_eval=now - self._rng.uniform(0, self.min_interval))
                for group in names
            }
            # Kafka keeps one namespace of group ids for every group type, so a name is never both kinds.
            windows = self._share_groups(cluster)
            for group in windows.groups() if windows is not None else ():
                known[cluster][group] = tracked.get(group) or TrackedGroup(
                    last_eval=now - self._rng.uniform(0, self.min_interval), share=True)
        # Only now, after the last await: a takeover while storage answered may have read states for new groups.
        for cluster, groups in known.items():
            previous = self.groups.get(cluster, {})
            for group, tracked_group in groups.items():
                if previous.get(group) is not tracked_group:
                    tracked_group.state = self._carried.pop((cluster, group), GroupState())
        for cluster in answered:
            for group, tracked_group in self.groups.get(cluster, {}).items():
                if group not in known[cluster] and tracked_group.state != GroupState():
                    self._forget(cluster, group)
        self.groups = known
        self._wake.set()

    def _forget(self, cluster: str, group: str) -> None:
        """Delete a vanished group's record in the state store (a tombstone in the Kafka lock's compacted topic,
        the znode beside the ZooKeeper lock), so the store does not keep every group that ever had an incident."""
        if self._store is not None and self.is_leader and self._states_current():
            self._save_after(self._store, cluster, group, GroupState(), [])

    def _share_groups(self, cluster: str) -> Any:
        return getattr(self.ctx.modules.get("cluster", {}).get(cluster), "share_groups", None)

    async def _fetch(self, make_request) -> Any:
        reply = asyncio.get_running_loop().create_future()
        request = make_request(reply)
        self.ctx.storage.submit(request)
        try:
            async with asyncio.timeout(STORAGE_REPLY_TIMEOUT):
                return await reply
        except TimeoutError:
            self.logger.warning("storage did not answer the group list request", request=type(request).__name__,
                                timeout_seconds=STORAGE_REPLY_TIMEOUT)
            return None

    async def _refresh_loop(self) -> None:
        while True:
            try:
                await self.refresh_groups()
            except Exception:  # a storage bug must not end group tracking for the life of the daemon
                self.logger.exception("refreshing the group list failed")
            await asyncio.sleep(self.group_refresh)

    # --- evaluation -----------------------------------------------------------------------------------

    def due_groups(self, now: float) -> list[tuple[str, str]]:
        """Groups whose last evaluation is at least one interval old; marks them evaluated at ``now``."""
        due = []
        for cluster, groups in self.groups.items():
            for group, tracked in groups.items():
                if tracked.last_eval <= now - self.min_interval:
                    tracked.last_eval = now
                    due.append((cluster, group))
        return due

    def _seconds_until_next_due(self, now: float) -> float:
        next_due = min((t.last_eval + self.min_interval for g in self.groups.values() for t in g.values()),
                       default=now + IDLE_WAKEUP)
        return min(max(next_due - now, 0.0), IDLE_WAKEUP)

    async def _evaluation_loop(self) -> None:
        while True:
            if self._lock is not None and not self._lock.held:
                self.logger.info("not the notifier lock holder: waiting to take over")
                await self._lock.wait_held()
                self.logger.info("this instance now evaluates groups and sends notifications")
            if self._store is not None and self._store.generation != self._loaded_generation:
                await self._take_over(self._store)
                continue  # the lock may have gone while the states were read
            self._wake.clear()
            due = self.due_groups(self.ctx.clock.time())
            if due:
                await asyncio.gather(*(self.evaluate_group(cluster, group) for cluster, group in due))
            delay = self._seconds_until_next_due(self.ctx.clock.time())
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wake.wait()

    async def evaluate_group(self, cluster: str, group: str) -> None:
        """Evaluate one group and send whatever the decision rules call for."""
        self.evaluations += 1
        tracked = self.groups.get(cluster, {}).get(group)
        try:
            status = await self._evaluate(cluster, group, tracked is not None and tracked.share)
        except Exception:  # an evaluator failure for one group must not end notification for all
            self.logger.exception("evaluating the group failed", cluster=cluster, group=group)
            return
        if status is None or status.status == Status.NOTFOUND:
            return
        tracked = self.groups.get(cluster, {}).get(group)
        if tracked is None or not self.is_leader or not self._states_current():
            return  # the group vanished, or the lock was lost, while the evaluator worked
        before = tracked.state
        tracked.state, notifications = step(tracked.state, group, status.status, self.policies,
                                            self.ctx.clock.time(), lambda: str(uuid.uuid4()))
        deliveries = [self._dispatch(status, notification) for notification in notifications]
        if self._store is not None and tracked.state != before:
            self._save_after(self._store, cluster, group, tracked.state, deliveries)

    def _states_current(self) -> bool:
        return self._store is None or self._store.generation == self._loaded_generation

    async def _take_over(self, store: IncidentStore) -> None:
        """Read the groups' states the previous sender left, before this instance decides anything."""
        generation = store.generation
        try:
            states = await store.load_states()
        except Exception as exc:  # without the states every open incident would be announced again: wait
            self.logger.error("cannot read the notification state; not sending until it can be read",
                              error=repr(exc), retry_seconds=IDLE_WAKEUP)
            await asyncio.sleep(IDLE_WAKEUP)
            return
        for cluster, groups in self.groups.items():
            for group, tracked in groups.items():
                tracked.state = states.pop((cluster, group), GroupState())
        self._carried = states
        self._loaded_generation = generation

    def _save_after(self, store: IncidentStore, cluster: str, group: str, state: GroupState,
                    deliveries: list[asyncio.Task]) -> None:
        """Record ``state`` once the notifications it records are delivered (or given up), after any earlier
        record of the group: a sender killed meanwhile leaves them to be sent again by the next one."""
        key = (cluster, group)
        generation = store.generation
        waits = deliveries + ([self._saves[key]] if key in self._saves else [])

        async def save() -> None:
            if waits:
                await asyncio.wait(waits)
            if not self.is_leader or store.generation != generation:
                return  # another instance sends now and has read the state without this change
            try:
                await store.save_state(cluster, group, state)
            except Exception as exc:
                self.logger.warning("could not record the group's notification state; a new sender would "
                                    "notify its open incident again", cluster=cluster, group=group, error=repr(exc))

        task = asyncio.create_task(save())
        self._saves[key] = task

        def forget(done: asyncio.Task) -> None:
            if self._saves.get(key) is done:
                del self._saves[key]

        task.add_done_callback(forget)

    async def _evaluate(self, cluster: str, group: str, share: bool) -> ConsumerGroupStatus | None:
        if not share:
            return await self.ctx.evaluator.evaluate(cluster, group, False)
        windows = self._share_groups(cluster)
        evaluated = (windows.evaluate(group, self.ctx.clock.time(), *rule_settings(self.ctx.evaluator))
                     if windows is not None else None)
        return evaluated.problems() if evaluated is not None else None

    def _dispatch(self, status: ConsumerGroupStatus, notification: Notification) -> asyncio.Task:
        key = (notification.notifier, status.cluster, status.group)
        previous = self._deliveries.get(key)
        task = asyncio.create_task(self._deliver_after(previous, status, notification))
        self._deliveries[key] = task

        def forget(done: asyncio.Task) -> None:
            if self._deliveries.get(key) is done:
                del self._deliveries[key]

        task.add_done_callback(forget)
        return task

    async def _deliver_after(self, previous: asyncio.Task | None, status: ConsumerGroupStatus,
                             notification: Notification) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        try:
            await self.modules[notification.notifier].notify(status, notification)
        except Exception:  # notify handles every expected failure; this is a bug, and must stay contained
            self.logger.exception("notifier failed unexpectedly", notifier=notification.notifier,
                                  cluster=status.cluster, group=status.group)

    async def wait_idle(self) -> None:
        """Wait until every notification dispatched so far has been sent or given up on."""
        while self._deliveries or self._saves:
            await asyncio.wait(list(self._deliveries.values()) + list(self._saves.values()))
