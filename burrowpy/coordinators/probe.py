"""End-to-end probes of a cluster, as KMinion's: produce a timestamped record, consume it, commit it.

A cluster module with ``probe: true`` runs one :class:`EndToEndProbe`. It uses a probe topic with a
partition led by each broker (created when missing, replication factor ``probe-replication-factor``, one
partition per broker with that broker first among its replicas, so Kafka makes it the leader), and every
``probe-interval`` seconds writes one record to each partition. A record counts as a success once the
monitor's own consumer (group ``probe-group``, partitions assigned by the probe, not by a rebalance) has
read it back within ``probe-timeout``; its offset is then committed. The figures are labelled with the
broker that led the partition when the record was sent (from Metadata), and commits with the group's
coordinator, so a slow or stalled broker shows up as its own series.

Records carry this process's id, so two monitors probing the same topic each count only their own.

The probe group commits like any consumer, so the monitor lists it as Burrow lists its own ``burrow-NAME``
group: it is OK while the probes go through, and lags only when they do not (deny it with the consumer
module's ``group-denylist`` to hide it).
"""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from burrowpy.config import Section
from burrowpy.coordinators.kafka_client import create_topics, stop_clients

KEYS = ("probe", "probe-topic", "probe-group", "probe-interval", "probe-timeout", "probe-window",
        "probe-replication-factor")

# Latency buckets in seconds: from a quick local round trip to the timeouts of a stalled broker.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
TOPIC_READY_S = 30.0  # how long a new probe topic may take to get a leader for every partition


@dataclass(frozen=True)
class ProbeSettings:
    topic: str
    group: str
    interval: float
    timeout: float
    window: float
    replication_factor: int

    @classmethod
    def from_section(cls, cluster: str, section: Section) -> ProbeSettings | None:
        """The probe settings of a cluster section, None when probes are off (the default)."""
        if not section.get_bool("probe", False):
            for key in KEYS[1:]:
                if section.has(key):
                    raise section.error(key, "probe settings need probe: true")
            return None
        interval = _positive(section, "probe-interval", 10.0)
        timeout = _positive(section, "probe-timeout", max(interval, 5.0))
        window = _positive(section, "probe-window", 60.0)
        return cls(topic=section.get_str("probe-topic", "burrowpy-probe"),
                   group=section.get_str("probe-group", f"burrowpy-probe-{cluster}"),
                   interval=interval, timeout=timeout, window=window,
                   replication_factor=section.get_int("probe-replication-factor", 1, minimum=1))

    def to_json(self) -> dict[str, Any]:
        return {"probe-topic": self.topic, "probe-group": self.group, "probe-interval": self.interval,
                "probe-timeout": self.timeout, "probe-window": self.window,
                "probe-replication-factor": self.replication_factor}


def _positive(section: Section, key: str, default: float) -> float:
    value = section.get_float(key, default)
    if not math.isfinite(value) or value <= 0:
        raise section.error(key, f"must be a positive number of seconds, got {value!r}")
    return value


class ProbeSchedule:
    """Fixed-rate slots every ``interval`` seconds from ``start``; a probe round that overran skips the slots
    it missed instead of firing them all at once."""

    def __init__(self, interval: float, start: float) -> None:
        self.interval = interval
        self._next = start

    def due(self, now: float) -> bool:
        return now >= self._next

    def taken(self, now: float) -> None:
        """The slot due at ``now`` was used: the next one is the first slot after ``now``."""
        missed = math.floor((now - self._next) / self.interval) + 1
        self._next += max(missed, 1) * self.interval

    def wait(self, now: float) -> float:
        return max(0.0, self._next - now)


class OutcomeWindow:
    """Successes and failures of the last ``window`` seconds, for a success ratio."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._outcomes: deque[tuple[float, bool]] = deque()

    def add(self, at: float, success: bool) -> None:
        self._outcomes.append((at, success))

    def ratio(self, now: float) -> float | None:
        """Successes over outcomes in the window; None when there was none."""
        while self._outcomes and self._outcomes[0][0] < now - self.window:
            self._outcomes.popleft()
        if not self._outcomes:
            return None
        return sum(1 for _, success in self._outcomes if success) / len(self._outcomes)


@dataclass
class LatencyHistogram:
    """A Prometheus histogram's state: cumulative counts come out at scrape time."""

    counts: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    total: float = 0.0
    count: int = 0
    last: float | None = None

    def observe(self, seconds: float) -> None:
        for index, bound in enumerate(BUCKETS):
            if seconds <= bound:
                self.counts[index] += 1
                break
        self.total += seconds
        self.count += 1
        self.last = seconds

    def buckets(self) -> list[tuple[str, int]]:
        cumulative, out = 0, []
        for bound, count in zip(BUCKETS, self.counts, strict=True):
            cumulative += count
            out.append((str(bound), cumulative))
        out.append(("+Inf", self.count))
        return out


@dataclass
class BrokerFigures:
    """What the probe knows of one broker (``produce`` and ``end_to_end`` for the partitions it leads,
    ``commit`` when it is the group's coordinator)."""

    window: OutcomeWindow
    produce: LatencyHistogram = field(default_factory=LatencyHistogram)
    end_to_end: LatencyHistogram = field(default_factory=LatencyHistogram)
    commit: LatencyHistogram = field(default_factory=LatencyHistogram)
    attempts: int = 0
    failures: int = 0
    commit_failures: int = 0
    partitions: set[int] = field(default_factory=set)
    last_success: float | None = None
    last_error: str | None = None

    def to_json(self, broker: int, now: float) -> dict[str, Any]:
        return {"broker": broker, "partitions": sorted(self.partitions), "attempts": self.attempts,
                "failures": self.failures, "success_ratio": self.window.ratio(now),
                "produce_seconds": self.produce.last, "end_to_end_seconds": self.end_to_end.last,
                "commit_seconds": self.commit.last, "commit_failures": self.commit_failures,
                "last_success": None if self.last_success is None else int(self.last_success * 1000),
                "last_error": self.last_error}


@dataclass
class _InFlight:
    broker: int
    sent: float
    received: asyncio.Future


class EndToEndProbe:
    """The probe loop of one cluster module; ``clock`` is the monitor's clock (seconds since the epoch)."""

    def __init__(self, cluster: str, servers: list[str], client_settings: dict[str, Any], settings: ProbeSettings,
                 clock: Any, log: Any) -> None:
        self.cluster = cluster
        self.servers = servers
        self.client_settings = client_settings
        self.settings = settings
        self.clock = clock
        self.log = log.bind(probe_topic=settings.topic)
        self.instance = uuid.uuid4().hex
        self.brokers: dict[int, BrokerFigures] = {}
        self.leaders: dict[int, int] = {}  # partition -> broker
        self._in_flight: dict[tuple[int, int], _InFlight] = {}
        self._sequence = 0
        self._producer: Any = None
        self._consumer: Any = None
        self._tasks: list[asyncio.Task] = []
        self._rounds: set[asyncio.Task] = set()
        self._to_commit: dict[Any, int] = {}
        self._commit_wanted = asyncio.Event()

    def figures(self, broker: int) -> BrokerFigures:
        if broker not in self.brokers:
            self.brokers[broker] = BrokerFigures(OutcomeWindow(self.settings.window))
        return self.brokers[broker]

    def to_json(self) -> dict[str, Any]:
        now = self.clock.time()
        return {"topic": self.settings.topic, "group": self.settings.group, "interval": self.settings.interval,
                "timeout": self.settings.timeout, "window": self.settings.window,
                "brokers": [self.brokers[b].to_json(b, now) for b in sorted(self.brokers)]}

    async def run(self, client: Any) -> None:
        """Set the probe up (``client`` is the cluster module's bootstrapped AIOKafkaClient), retrying every
        ``probe-interval`` while that fails (a topic it may not create, brokers still starting), then probe
        until cancelled. The rest of the monitor does not wait for it."""
        while True:
            try:
                await self._start(client)
                break
            except Exception as exc:
                self.log.warning("probe setup failed; retrying", error=repr(exc))
                await self._close_clients()
                await asyncio.sleep(self.settings.interval)
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            # the monitor stopped while the clients were starting, and one of them swallowed the cancellation:
            # end here (stop() cancels what _start began) rather than probe on and keep the stop waiting
            raise asyncio.CancelledError
        await asyncio.gather(*self._tasks)

    async def _start(self, client: Any) -> None:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

        await self._ensure_topic(client)
        self._producer = AIOKafkaProducer(bootstrap_servers=self.servers, acks="all", linger_ms=0,
                                          **self.client_settings)
        await self._producer.start()
        self._consumer = AIOKafkaConsumer(bootstrap_servers=self.servers, group_id=self.settings.group,
                                          enable_auto_commit=False, auto_offset_reset="latest",
                                          fetch_max_wait_ms=100, **self.client_settings)
        await self._consumer.start()
        self._consumer.assign([TopicPartition(self.settings.topic, p) for p in sorted(self.leaders)])
        await self._consumer.seek_to_end()
        self._tasks = [asyncio.create_task(self._consume_loop(), name=f"probe-{self.cluster}-consume"),
                       asyncio.create_task(self._commit_loop(), name=f"probe-{self.cluster}-commit"),
                       asyncio.create_task(self._send_loop(), name=f"probe-{self.cluster}-send")]
        self.log.info("probe started", partitions=len(self.leaders))

    async def stop(self) -> None:
        tasks = self._tasks + list(self._rounds)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        await self._close_clients()

    async def _close_clients(self) -> None:
        await stop_clients(self._consumer, self._producer)
        self._consumer = self._producer = None

    async def _ensure_topic(self, client: Any) -> None:
        from aiokafka.admin import NewTopic

        metadata = await client.fetch_all_metadata()
        if self.settings.topic not in metadata.topics(exclude_internal_topics=False):
            brokers = sorted(broker.nodeId for broker in metadata.brokers())
            factor = self.settings.replication_factor
            if factor > len(brokers):
                raise RuntimeError(f"probe-replication-factor {factor} is more than the cluster's "
                                   f"{len(brokers)} brokers")
            # Partition i's replicas start at broker i: each broker is the preferred leader of one partition.
            assignment = {i: [brokers[(i + k) % len(brokers)] for k in range(factor)] for i in range(len(brokers))}
            await create_topics(self.servers, self.client_settings,
                                [NewTopic(self.settings.topic, -1, -1, assignment)], "probe topic")
            self.log.info("probe topic created", assignment=assignment)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TOPIC_READY_S
        while not self._read_leaders(metadata := await client.fetch_all_metadata()):
            if loop.time() > deadline:
                raise RuntimeError(f"probe topic {self.settings.topic!r} has partitions without a leader")
            await asyncio.sleep(0.2)
        unprobed = sorted({broker.nodeId for broker in metadata.brokers()} - set(self.leaders.values()))
        if unprobed:
            # An existing topic is used as it is: reassigning a topic someone else may own is not the monitor's call.
            self.log.warning("brokers lead no partition of the probe topic and are not probed", brokers=unprobed)

    def _read_leaders(self, metadata: Any) -> bool:
        """Take the partition leaders from Metadata; False while the topic or a leader is missing."""
        from aiokafka.structs import TopicPartition

        partitions = metadata.partitions_for_topic(self.settings.topic)
        if not partitions:
            return False
        leaders = {p: metadata.leader_for_partition(TopicPartition(self.settings.topic, p)) for p in partitions}
        if any(leader is None or leader < 0 for leader in leaders.values()):
            return False
        self.leaders = leaders
        for broker in self.brokers.values():
            broker.partitions.clear()
        for partition, leader in leaders.items():
            self.figures(leader).partitions.add(partition)
        return True

    async def _send_loop(self) -> None:
        schedule = ProbeSchedule(self.settings.interval, self.clock.time())
        while True:
            await asyncio.sleep(schedule.wait(self.clock.time()))
            now = self.clock.time()
            if not schedule.due(now):
                continue
            schedule.taken(now)
            # The producer's metadata follows leader changes; a partition without a leader keeps the last one.
            self._read_leaders_from(self._producer.client.cluster)
            for partition, broker in sorted(self.leaders.items()):
                task = asyncio.create_task(self._probe(partition, broker))
                self._rounds.add(task)
                task.add_done_callback(self._rounds.discard)

    def _read_leaders_from(self, metadata: Any) -> None:
        from aiokafka.structs import TopicPartition

        for partition in list(self.leaders):
            leader = metadata.leader_for_partition(TopicPartition(self.settings.topic, partition))
            if leader is not None and leader >= 0 and leader != self.leaders[partition]:
                self.figures(self.leaders[partition]).partitions.discard(partition)
                self.figures(leader).partitions.add(partition)
                self.leaders[partition] = leader

    async def _probe(self, partition: int, broker: int) -> None:
        """One record on one partition: produced, read back and timed, or failed after ``probe-timeout``."""
        figures = self.figures(broker)
        figures.attempts += 1
        self._sequence += 1
        key = (partition, self._sequence)
        sent = self.clock.time()
        flight = _InFlight(broker, sent, asyncio.get_running_loop().create_future())
        self._in_flight[key] = flight
        value = json.dumps({"instance": self.instance, "sequence": self._sequence, "sent": sent}).encode()
        stage = "produce"
        try:
            async with asyncio.timeout(self.settings.timeout):
                await self._producer.send_and_wait(self.settings.topic, value, partition=partition)
                figures.produce.observe(self.clock.time() - sent)
                stage = "consume"
                await flight.received
        except Exception as exc:
            figures.failures += 1
            figures.last_error = (f"{stage} timed out after {self.settings.timeout:g} s"
                                  if isinstance(exc, TimeoutError) else f"{stage} failed: {exc!r}")
            figures.window.add(self.clock.time(), False)
            return
        finally:
            self._in_flight.pop(key, None)
        figures.last_success = self.clock.time()
        figures.window.add(figures.last_success, True)

    async def _consume_loop(self) -> None:
        from aiokafka import TopicPartition

        while True:
            batches = await self._consumer.getmany(timeout_ms=int(min(self.settings.interval, 1.0) * 1000))
            now = self.clock.time()
            commit: dict[Any, int] = {}
            for tp, records in batches.items():
                for record in records:
                    self._received(tp.partition, record.value, now)
                if records:
                    commit[TopicPartition(tp.topic, tp.partition)] = records[-1].offset + 1
            if commit:
                self._to_commit.update(commit)
                self._commit_wanted.set()

    def _received(self, partition: int, value: bytes | None, now: float) -> None:
        try:
            body = json.loads(value or b"")
            if body.get("instance") != self.instance:
                return
            flight = self._in_flight.get((partition, body["sequence"]))
        except (ValueError, KeyError, AttributeError, TypeError):
            self.log.warning("probe topic holds a record that is not a probe", partition=partition)
            return
        if flight is None or flight.received.done():
            return
        self.figures(flight.broker).end_to_end.observe(now - flight.sent)
        flight.received.set_result(None)

    async def _commit_loop(self) -> None:
        """One commit at a time, of the newest offsets read: a slow coordinator delays the next commit instead
        of piling commits up, and a commit is never cancelled half-way (aiokafka would drop the coordinator)."""
        while True:
            await self._commit_wanted.wait()
            self._commit_wanted.clear()
            offsets, self._to_commit = self._to_commit, {}
            # aiokafka keeps the group's coordinator only on its (internal) coordinator object.
            coordinator = getattr(self._consumer._coordinator, "coordinator_id", None)
            started = self.clock.time()
            commit = asyncio.create_task(self._consumer.commit(offsets))
            done, _ = await asyncio.wait({commit}, timeout=self.settings.timeout)
            if not done:
                self._commit_failed(coordinator, f"commit timed out after {self.settings.timeout:g} s")
            try:
                await commit
            except Exception as exc:
                if done:
                    self._commit_failed(coordinator, f"commit failed: {exc!r}")
                continue
            coordinator = getattr(self._consumer._coordinator, "coordinator_id", None) or coordinator
            if coordinator is not None:
                self.figures(coordinator).commit.observe(self.clock.time() - started)

    def _commit_failed(self, coordinator: int | None, error: str) -> None:
        if coordinator is not None:
            self.figures(coordinator).commit_failures += 1
        self.log.warning("probe commit failed", group_coordinator=coordinator, error=error)
