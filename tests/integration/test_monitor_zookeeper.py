"""ZooKeeper-committed offsets end to end: old consumers' znodes in a real ZooKeeper, our broker for the
broker offsets, and the monitor (cluster module ``kafka``, consumer module ``kafka_zk``) answering over HTTP.

Old Kafka consumers kept ``<chroot>/consumers/<group>/offsets/<topic>/<partition>`` (the offset as decimal
text) and ``.../owners/<topic>/<partition>`` (the owning consumer thread). The test writes them with kazoo
the way those consumers did, then breaks ZooKeeper twice: the module's session is expired (another client
takes it over and closes it, the standard way to expire a ZooKeeper session), and the server is killed
with SIGKILL and started again. Each time a new commit must still reach the HTTP API, so the module has
rebuilt (or kept) its watches.

The monitor runs in process so the test can reach the module's session; everything it talks to is real.
"""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from notifier_support import CONFIG_FILE, capturing_logger, eventually
from zk import free_port

from burrowpy.config import parse_config
from burrowpy.daemon import Monitor

pytestmark = pytest.mark.integration

CHROOT = "/kafka-cluster"
TOPIC = "zk-orders"
PRODUCED = (100, 50)  # records in partitions 0 and 1


def monitor_config(bootstrap: str, zookeeper_hosts: str, http_port: int) -> dict:
    return {
        "storage": {"default": {"class-name": "inmemory", "intervals": 3}},
        "evaluator": {"default": {"class-name": "caching", "expire-cache": 0}},
        "httpserver": {"default": {"address": f"127.0.0.1:{http_port}"}},
        "cluster": {"local": {"class-name": "kafka", "servers": [bootstrap], "offset-refresh": 1, "topic-refresh": 1}},
        "consumer": {"old": {"class-name": "kafka_zk", "cluster": "local", "servers": [zookeeper_hosts],
                             "zookeeper-path": CHROOT, "zookeeper-timeout": 2}},
    }


def fill_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, len(PRODUCED), 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in enumerate(PRODUCED):
        for number in range(count):
            producer.produce(TOPIC, value=b"order %d" % number, partition=partition)
    assert producer.flush(30) == 0


class OldConsumer:
    """Writes a group's offsets and owners to ZooKeeper as Kafka's ZooKeeper-based consumer did."""

    def __init__(self, zk: KazooClient, group: str) -> None:
        self.zk = zk
        self.base = f"{CHROOT}/consumers/{group}"

    def commit(self, partition: int, offset: int) -> None:
        path = f"{self.base}/offsets/{TOPIC}/{partition}"
        if self.zk.exists(path):
            self.zk.set(path, str(offset).encode())
        else:
            self.zk.create(path, str(offset).encode(), makepath=True)

    def own(self, partition: int, owner: str) -> None:
        self.zk.create(f"{self.base}/owners/{TOPIC}/{partition}", owner.encode(), ephemeral=True, makepath=True)


class Api:
    def __init__(self, session: aiohttp.ClientSession, port: int) -> None:
        self.session = session
        self.base = f"http://127.0.0.1:{port}/v3/kafka/local"

    async def get(self, path: str) -> tuple[int, dict]:
        async with self.session.get(self.base + path) as response:
            return response.status, await response.json()

    async def groups(self) -> list[str]:
        return (await self.get("/consumer"))[1]["consumers"]

    async def lags(self, group: str) -> list[int] | None:
        """Current lag per partition from ``/lag``, or None while the group is unknown."""
        status, body = await self.get(f"/consumer/{group}/lag")
        if status != 200:
            return None
        return [p["current_lag"] for p in sorted(body["status"]["partitions"], key=lambda p: p["partition"])]


async def test_zookeeper_offsets_reach_the_api_and_survive_session_expiry_and_a_zookeeper_crash(broker, zookeeper):
    await asyncio.to_thread(fill_topic, broker.bootstrap)
    writer = KazooClient(hosts=zookeeper.hosts)
    await asyncio.to_thread(writer.start, 30)
    early, late = OldConsumer(writer, "zk-early"), OldConsumer(writer, "zk-late")
    # One group has committed before the monitor starts (read at start), the other commits afterwards
    # (found through the watch on <chroot>/consumers).
    await asyncio.to_thread(early.commit, 0, 60)
    await asyncio.to_thread(early.commit, 1, 50)
    await asyncio.to_thread(early.own, 0, "zk-early_host-1-0")

    http_port = free_port()
    logger, logs = capturing_logger()
    monitor = Monitor(parse_config(monitor_config(broker.bootstrap, zookeeper.hosts, http_port), CONFIG_FILE), logger)
    session = aiohttp.ClientSession()
    api = Api(session, http_port)
    try:
        await monitor.start()
        topic_offsets = f"/topic/{TOPIC}"
        await eventually(lambda: _offsets_are(api, topic_offsets, list(PRODUCED)), what="the broker offsets")
        await eventually(lambda: _lags_are(api, "zk-early", [40, 0]), what="zk-early's lag")
        status, detail = await api.get("/consumer/zk-early")
        partitions = detail["topics"][TOPIC]
        assert [p["owner"] for p in partitions] == ["zk-early_host-1-0", ""]
        assert [p["offsets"][-1]["offset"] for p in partitions] == [60, 50]

        await asyncio.to_thread(late.commit, 0, 90)
        await asyncio.to_thread(late.commit, 1, 10)
        await eventually(lambda: _lags_are(api, "zk-late", [10, 40]), what="zk-late's lag")
        assert await api.groups() == ["zk-early", "zk-late"]
        await asyncio.to_thread(early.commit, 0, 70)
        await eventually(lambda: _lags_are(api, "zk-early", [30, 0]), what="a data watch to deliver 70")

        # Session expiry: kazoo reconnects with a new session, the module rebuilds every watch.
        consumer_module = monitor.ctx.modules["consumer"]["old"]
        session_id, password = consumer_module._zk.client_id
        intruder = KazooClient(hosts=zookeeper.hosts, client_id=(session_id, password))
        await asyncio.to_thread(intruder.start, 30)
        await asyncio.to_thread(intruder.stop)
        await asyncio.to_thread(intruder.close)
        await eventually(lambda: any(e["event"].startswith("ZooKeeper session lost") for e in logs.entries),
                         what="the module to notice its session expired")
        await eventually(lambda: (consumer_module._zk.client_id or (session_id,))[0] != session_id,
                         what="a new ZooKeeper session")
        await asyncio.to_thread(early.commit, 0, 80)
        await asyncio.to_thread(OldConsumer(writer, "zk-after-expiry").commit, 1, 45)
        await eventually(lambda: _lags_are(api, "zk-early", [20, 0]), what="a rebuilt data watch to deliver 80")
        await eventually(lambda: _lags_are(api, "zk-after-expiry", [0, 5]), what="a group created after expiry")

        # The server dies (SIGKILL) and comes back with its data: the same or a new session, watches work.
        await asyncio.to_thread(zookeeper.kill)
        await asyncio.to_thread(zookeeper.start)
        await eventually(lambda: writer.connected, what="the writer to reconnect")
        await asyncio.to_thread(early.commit, 0, 90)
        await eventually(lambda: _lags_are(api, "zk-early", [10, 0]), timeout=60,
                         what="a watch to deliver 90 after the ZooKeeper restart")
        assert await api.groups() == ["zk-after-expiry", "zk-early", "zk-late"]
    finally:
        await session.close()
        await monitor.stop()
        await asyncio.to_thread(writer.stop)
        await asyncio.to_thread(writer.close)
    assert not [e for e in logs.entries if e["log_level"] == "error"]


async def _offsets_are(api: Api, path: str, expected: list[int]) -> bool:
    status, body = await api.get(path)
    return status == 200 and body["offsets"] == expected


async def _lags_are(api: Api, group: str, expected: list[int]) -> bool:
    return await api.lags(group) == expected
