"""The `kafka_zk` consumer module: offsets that old consumers commit to ZooKeeper, watch-driven.

Layout read (Kafka's old consumer): ``<zookeeper-path>/consumers/<group>/offsets/<topic>/<partition>``
holds the offset as decimal text, ``.../owners/<topic>/<partition>`` the owner id. Every read or change
becomes a SetConsumerOffset (timestamp = the znode's mtime, order = its mzxid) and a SetConsumerOwner.

kazoo runs watches on its own thread; every storage request is handed to the event loop thread. When the
ZooKeeper session is lost, kazoo's watches die with it; on the next connection every watch is rebuilt
from scratch, as Burrow does.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from burrowpy.config import Section, valid_zookeeper_path
from burrowpy.context import ApplicationContext
from burrowpy.coordinators.consumer_kafka import consumer_basics, group_filter
from burrowpy.protocol import SetConsumerOffset, SetConsumerOwner

KEYS = ("class-name", "cluster", "servers", "zookeeper-path", "zookeeper-timeout", "group-allowlist",
        "group-denylist", "group-whitelist", "group-blacklist", "client-profile")


class KafkaZkConsumer:
    def __init__(self, name: str, section: Section, ctx: ApplicationContext) -> None:
        self.name, self.ctx, self.log, self.cluster, self.servers = consumer_basics(
            name, section, ctx, KEYS, "kafka_zk")
        chroot = section.get_str("zookeeper-path", "").rstrip("/")
        if chroot and not valid_zookeeper_path(chroot):
            raise section.error("zookeeper-path", f"{chroot!r} is not a ZooKeeper path such as /kafka-cluster")
        self.zookeeper_path = chroot
        self.consumers_path = f"{chroot}/consumers"
        self.timeout = section.get_int("zookeeper-timeout", 30, minimum=1)
        self.groups = group_filter(section, self.log)
        self._zk: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._generation = 0  # bumped on every rebuild; watches of an older generation stop themselves
        self._watched: set[str] = set()

    def describe(self) -> dict[str, Any]:
        return {"class-name": "kafka_zk", "cluster": self.cluster, "servers": self.servers,
                "group-allowlist": self.groups.allow.pattern if self.groups.allow else "",
                "zookeeper-path": self.zookeeper_path, "zookeeper-timeout": self.timeout,
                "client-profile": None, "offsets-topic": "", "start-latest": False}

    async def start(self) -> None:
        from kazoo.client import KazooClient

        self._loop = asyncio.get_running_loop()
        self._zk = KazooClient(hosts=",".join(self.servers), timeout=self.timeout)
        self._zk.add_listener(self._on_state)
        await asyncio.to_thread(self._zk.start, self.timeout)
        await asyncio.to_thread(self._rebuild)
        self.log.info("started", servers=self.servers, path=self.consumers_path)

    async def stop(self) -> None:
        if self._zk is not None:
            self._zk.remove_listener(self._on_state)  # kazoo reports its own stop as a lost session
            with self._lock:
                self._generation += 1
            await asyncio.to_thread(self._zk.stop)
            await asyncio.to_thread(self._zk.close)
            self._zk = None
        self.log.info("stopped")

    # --- kazoo thread side ----------------------------------------------------------------------------

    def _submit(self, request: Any) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self.ctx.submit, request)

    def _on_state(self, state: str) -> None:
        from kazoo.protocol.states import KazooState

        if state == KazooState.LOST:
            self.log.warning("ZooKeeper session lost; watches will be rebuilt on reconnect")
            with self._lock:
                self._generation += 1
                self._watched.clear()
        elif state == KazooState.CONNECTED and not self._watched:
            # Listeners must not block kazoo's event thread: rebuild on a thread of our own.
            threading.Thread(target=self._rebuild, name=f"kafka_zk-{self.name}-rebuild", daemon=True).start()

    def _rebuild(self) -> None:
        with self._lock:
            self._generation += 1
            generation = self._generation
            self._watched = {self.consumers_path}
        zk = self._zk
        if zk is None:
            return
        zk.ensure_path(self.consumers_path)
        zk.ChildrenWatch(self.consumers_path, lambda groups: self._on_groups(groups, generation))

    def _current(self, generation: int) -> bool:
        return generation == self._generation and self._zk is not None

    def _watch_once(self, path: str) -> bool:
        with self._lock:
            if path in self._watched:
                return False
            self._watched.add(path)
            return True

    def _on_groups(self, groups: list[str], generation: int) -> bool | None:
        if not self._current(generation):
            return False
        for group in groups:
            if not self.groups.accepts(group):
                continue
            path = f"{self.consumers_path}/{group}/offsets"
            if self._watch_once(path):
                self._watch_when_exists(path, lambda p=path, g=group: self._zk.ChildrenWatch(
                    p, lambda topics: self._on_topics(g, topics, generation)), generation)
        return None

    def _watch_when_exists(self, path: str, install, generation: int) -> None:
        """Install a children watch on ``path`` now, or as soon as it is created."""
        def exists_cb(event: Any = None) -> None:
            if not self._current(generation):
                return
            if self._zk.exists(path, watch=exists_cb):
                install()

        exists_cb()

    def _on_topics(self, group: str, topics: list[str], generation: int) -> bool | None:
        if not self._current(generation):
            return False
        for topic in topics:
            path = f"{self.consumers_path}/{group}/offsets/{topic}"
            if self._watch_once(path):
                self._zk.ChildrenWatch(path, lambda parts, t=topic: self._on_partitions(group, t, parts, generation))
        return None

    def _on_partitions(self, group: str, topic: str, partitions: list[str], generation: int) -> bool | None:
        if not self._current(generation):
            return False
        for name in partitions:
            if not name.isdigit():
                continue
            path = f"{self.consumers_path}/{group}/offsets/{topic}/{name}"
            if self._watch_once(path):
                # kazoo calls a data watch with (data, stat, event) first, so the partition must not be a
                # third parameter: it would receive the event (None on the first call).
                self._zk.DataWatch(path, lambda data, stat, event=None, p=int(name): self._on_offset(
                    group, topic, p, data, stat, generation))
        return None

    def _on_offset(self, group: str, topic: str, partition: int, data: bytes | None, stat: Any,
                   generation: int) -> bool | None:
        if not self._current(generation):
            return False
        if data is None or stat is None:
            return None
        try:
            offset = int(data.decode().strip())
        except (UnicodeDecodeError, ValueError):
            self.log.error("unparseable offset in ZooKeeper", group=group, topic=topic, partition=partition,
                           data=data[:64])
            return None
        self._submit(SetConsumerOffset(cluster=self.cluster, group=group, topic=topic, partition=partition,
                                       offset=offset, order=stat.mzxid, timestamp=stat.mtime))
        owner_path = f"{self.consumers_path}/{group}/owners/{topic}/{partition}"
        try:
            owner, _ = self._zk.get(owner_path)
        except Exception:
            owner = None
        if owner is not None:
            self._submit(SetConsumerOwner(cluster=self.cluster, group=group, topic=topic, partition=partition,
                                          owner=owner.decode(errors="replace"), client_id=""))
        return None
