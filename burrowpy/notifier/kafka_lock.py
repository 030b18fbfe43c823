"""The notifier lock in Kafka itself, for clusters without ZooKeeper (Kafka 4.x), and the state that travels with it.

Config, the ``notifier-lock`` block (not Burrow's; Burrow only has the ZooKeeper lock)::

    notifier-lock:
      class-name: kafka            # or zookeeper: the lock in the zookeeper block, as without this block
      cluster: local               # a cluster module: its servers and client-profile are used
      topic: __burrowpy_notifier   # one partition; the instance assigned it is the sender
      state-topic: __burrowpy_notifier-state   # compacted; the incidents' open/close state
      group: burrowpy-notifier     # the consumer group the instances join
      session-timeout: 10          # seconds: how soon a dead sender's partition goes to another instance
      replication-factor: 0        # of both topics when created; 0 means min(3, brokers)
      instance: ""                 # the name in /metrics and the API; default host:pid

Every instance joins ``group`` as a consumer of ``topic`` (both topics are created with Kafka's admin API when
missing). The group gives the topic's only partition to exactly one member: that member is the sender. When it
dies, the group coordinator expires its session after ``session-timeout`` and gives the partition to another
member, which rejoins on its next heartbeat (a third of the session timeout).

The sender writes each group's notification state (open incident, last open notification per notifier) to
``state-topic``, keyed by cluster and group, once the notifications that state records have been delivered; a
state with nothing in it, or a group that vanished from the monitor, is written as a tombstone, so the compacted
topic keeps only the groups that still have something to remember. A new sender reads the topic to its end
before it evaluates anything, so an incident already announced is not announced again, and its close is sent with
the same incident id. A sender killed while a notification was on its way does not record it, so the next sender
sends it again: an alert may be repeated then, never lost.

The sender confirms its ownership every second by committing offset 0 of the lock partition (the coordinator
accepts a commit only from the partition's owner in the group's current generation), and sends only while its
last confirmation is younger than half a session timeout: a process that stalled or was cut off from Kafka may
have been replaced without hearing of it yet.

Kafka unreachable at start or later never stops the daemon: the lock is not held while its consumer is down, and
joining is retried in the background, logged once per failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from typing import Any

from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from burrowpy.config import Section
from burrowpy.coordinators.kafka_client import client_settings, create_topics, stop_clients
from burrowpy.notifier.decision import GroupState, state_from_json, state_to_json

KEYS = ("class-name", "cluster", "topic", "state-topic", "group", "session-timeout", "replication-factor",
        "instance")
CLASSES = ("kafka", "zookeeper")
DEFAULT_TOPIC = "__burrowpy_notifier"
RETRY_DELAY = 2.0  # seconds before joining again after Kafka refused or could not be reached
POLL_TIMEOUT_MS = 1000  # the lock topic carries no records; polling only keeps the member alive
STATE_READ_TIMEOUT = 30.0  # seconds; a state topic that cannot be read to its end by then is read again later


def lock_class(section: Section) -> str:
    """The block's ``class-name``, checked (a config error naming the key otherwise)."""
    name = section.get_str("class-name")
    if name not in CLASSES:
        raise section.error("class-name", f"unknown notifier lock class {name!r} (known: {', '.join(CLASSES)})")
    return name


class KafkaNotifierLock:
    """Holds the lock while this instance's consumer owns the lock topic's partition; stores incident state."""

    kind = "kafka"

    def __init__(self, section: Section, ctx: Any) -> None:
        section.check_keys(KEYS)
        self.cluster = section.get_str("cluster")
        cluster_section = ctx.config.modules("cluster").get(self.cluster)
        if cluster_section is None:
            raise section.error("cluster", f"names the cluster {self.cluster!r}, which is not configured")
        self.servers = cluster_section.get_hostports("servers")
        self.settings = client_settings(ctx.config.client_profile(cluster_section.get_str("client-profile", "")),
                                        cluster_section)
        self.topic = section.get_str("topic", DEFAULT_TOPIC)
        self.state_topic = section.get_str("state-topic", f"{self.topic}-state")
        if not self.topic or not self.state_topic or self.topic == self.state_topic:
            raise section.error("state-topic", "the lock topic and the state topic must be two named topics")
        self.group = section.get_str("group", "burrowpy-notifier")
        self.session_timeout = section.get_float("session-timeout", 10.0)
        if self.session_timeout <= 0:
            raise section.error("session-timeout", "must be a positive number of seconds")
        self.replication_factor = section.get_int("replication-factor", 0, minimum=0)
        self.identifier = section.get_str("instance", "") or f"{socket.gethostname()}:{os.getpid()}"
        self.logger = ctx.logger.bind(coordinator="notifier", lock="kafka", topic=self.topic)
        self.clock = ctx.clock
        self.generation = 0  # bumped each time the lock is taken: the state must then be read again
        self.since: float | None = None  # when this instance last took the lock
        self.joined = False  # a member of the group's current generation (false while it rebalances)
        self._held = asyncio.Event()  # set while the group assigns us the lock partition
        self._confirmed = -float("inf")  # monotonic time the coordinator last accepted us as its owner
        self._consumer: Any = None
        self._producer: Any = None
        self._task: asyncio.Task | None = None

    @property
    def held(self) -> bool:
        """Owner of the lock partition, confirmed by the group coordinator within half a session timeout. A
        process that was paused, or cut off from Kafka, may have been replaced meanwhile without hearing of it
        yet: it stops sending until the coordinator confirms it again (or revokes the partition)."""
        return self._held.is_set() and time.monotonic() - self._confirmed < self.session_timeout / 2

    async def wait_held(self) -> None:
        await self._held.wait()

    def describe(self) -> dict[str, Any]:
        return {"lock": self.kind, "instance": self.identifier, "sender": self.held, "joined": self.joined,
                "since": self.since,
                "cluster": self.cluster, "group": self.group, "topic": self.topic, "state-topic": self.state_topic,
                "session-timeout": self.session_timeout}

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="notifier-kafka-lock")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._close_clients()  # the consumer leaves the group: another instance takes over at once

    # --- membership -----------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                await self._join()
                while True:
                    await self._consumer.getmany(timeout_ms=POLL_TIMEOUT_MS)
                    if self._held.is_set():
                        await self._confirm()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.logger.error("the Kafka notifier lock failed; this instance does not send until it joins "
                                  "again", error=repr(exc), servers=self.servers, retry_seconds=RETRY_DELAY)
                self._set_held(False)
                await self._close_clients()
                await asyncio.sleep(RETRY_DELAY)

    async def _join(self) -> None:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        await self._ensure_topics()
        self._producer = AIOKafkaProducer(bootstrap_servers=self.servers, acks="all", linger_ms=0, **self.settings)
        await self._producer.start()
        session_ms = int(self.session_timeout * 1000)
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.servers, group_id=self.group, enable_auto_commit=False,
            auto_offset_reset="latest", session_timeout_ms=session_ms,
            heartbeat_interval_ms=max(session_ms // 3, 100),
            # a rejoin after the sender's death waits for every live member at most this long
            rebalance_timeout_ms=session_ms, **self.settings)
        self._consumer.subscribe([self.topic], listener=_Listener(self))
        await self._consumer.start()
        self.logger.info("joined the notifier group", group=self.group, instance=self.identifier)

    async def _confirm(self) -> None:
        """Commit offset 0 of the lock partition: the coordinator accepts a commit only from a member of the
        group's current generation that owns the partition, so its answer is a fresh proof of ownership."""
        try:
            async with asyncio.timeout(self.session_timeout / 3):
                await self._consumer.commit({TopicPartition(self.topic, 0): 0})
        except (KafkaError, TimeoutError) as exc:
            self.logger.warning("the group coordinator did not confirm this instance as the sender; not sending "
                                "until it does", error=repr(exc))
            return
        self._confirmed = time.monotonic()

    async def _ensure_topics(self) -> None:
        from aiokafka import AIOKafkaClient
        from aiokafka.admin import NewTopic

        client = AIOKafkaClient(bootstrap_servers=self.servers, **self.settings)
        try:
            await client.bootstrap()
            metadata = await client.fetch_all_metadata()
        finally:
            await client.close()
        existing = metadata.topics(exclude_internal_topics=False)
        factor = self.replication_factor or min(3, len(metadata.brokers()))
        wanted = [NewTopic(self.topic, 1, factor)] if self.topic not in existing else []
        if self.state_topic not in existing:
            wanted.append(NewTopic(self.state_topic, 1, factor, topic_configs={"cleanup.policy": "compact"}))
        if not wanted:
            return
        await create_topics(self.servers, self.settings, wanted, "the notifier topic")
        self.logger.info("created the notifier topics", topics=[t.name for t in wanted], replication_factor=factor)

    async def _close_clients(self) -> None:
        await stop_clients(self._consumer, self._producer)
        self._consumer = self._producer = None
        self.joined = False
        self._set_held(False)

    def _set_held(self, held: bool) -> None:
        if held and not self._held.is_set():
            self._confirmed = time.monotonic()  # the assignment is the coordinator's answer of this moment
            self.generation += 1
            self.since = self.clock.time()
            self._held.set()
            self.logger.info("took the Kafka notifier lock: this instance sends notifications",
                             instance=self.identifier)
        elif not held and self._held.is_set():
            self._held.clear()
            self.logger.warning("gave up the Kafka notifier lock", instance=self.identifier)

    # --- the incidents' state -------------------------------------------------------------------------

    async def load_states(self) -> dict[tuple[str, str], GroupState]:
        """Every group's state in the state topic, read to the end it had when asked."""
        from aiokafka import AIOKafkaConsumer

        partition = TopicPartition(self.state_topic, 0)
        # earliest: a position aiokafka resolved before the seek below took effect is the log start too
        reader = AIOKafkaConsumer(bootstrap_servers=self.servers, group_id=None, enable_auto_commit=False,
                                  auto_offset_reset="earliest", **self.settings)
        await reader.start()
        states: dict[tuple[str, str], GroupState] = {}
        try:
            reader.assign([partition])
            end = (await reader.end_offsets([partition]))[partition]
            await reader.seek_to_beginning(partition)
            deadline = asyncio.get_running_loop().time() + STATE_READ_TIMEOUT
            while await reader.position(partition) < end:
                if asyncio.get_running_loop().time() > deadline:
                    raise TimeoutError(f"the state topic {self.state_topic!r} was not read to offset {end} within "
                                       f"{STATE_READ_TIMEOUT} s")
                for record in (await reader.getmany(partition, timeout_ms=POLL_TIMEOUT_MS)).get(partition, []):
                    self._apply(states, record.key, record.value, record.offset)
        finally:
            await reader.stop()
        self.logger.info("read the notification state of the groups", groups=len(states), end_offset=end)
        return states

    def _apply(self, states: dict[tuple[str, str], GroupState], key: bytes | None, value: bytes | None,
               offset: int) -> None:
        try:
            cluster, group = json.loads(key or b"")
            if value is None:
                states.pop((cluster, group), None)
            else:
                states[(cluster, group)] = state_from_json(json.loads(value))
        except (ValueError, TypeError, KeyError) as exc:
            # One malformed record must not keep the sender from sending for every other group.
            self.logger.warning("skipped a malformed record in the state topic", offset=offset, error=repr(exc))

    async def save_state(self, cluster: str, group: str, state: GroupState) -> None:
        """Record ``state`` for the next sender; an empty state deletes the group's record."""
        if self._producer is None:
            raise RuntimeError("the Kafka notifier lock is not connected")
        value = None if state == GroupState() else json.dumps(state_to_json(state)).encode()
        await self._producer.send_and_wait(self.state_topic, value, key=json.dumps([cluster, group]).encode(),
                                           partition=0)


class _Listener(ConsumerRebalanceListener):
    """aiokafka's rebalance callbacks: the lock is held exactly while the lock topic's partition 0 is ours."""

    def __init__(self, lock: KafkaNotifierLock) -> None:
        self.lock = lock

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self.lock.joined = False
        self.lock._set_held(False)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.lock.joined = True
        # partition 0 only: a lock topic someone created with more partitions must still choose one sender
        self.lock._set_held(any(tp.topic == self.lock.topic and tp.partition == 0 for tp in assigned))
