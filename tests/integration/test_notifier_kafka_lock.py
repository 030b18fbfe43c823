"""Two `burrowpy serve` processes choose one notifier sender through Kafka (the ``notifier-lock`` block of class
kafka), on our broker and on Apache Kafka 4.x: the sender is killed with -9 while a group is in ERR, the other
takes over within the group's session timeout, and the incident is announced once open and once closed, by the
instance that held the lock at each moment, with the same incident id. A sender whose process stalled stops
sending until the group coordinator confirms it again."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from pathlib import Path

import aiohttp
import pytest
import structlog
import yaml
from aiohttp import web
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from browser_support import chromium
from harness import BURROWPY, create_topics, free_port, unique_name, wait_until
from notifier_support import TEMPLATES, eventually
from prometheus_client.parser import text_string_to_metric_families

from burrowpy.config import Config, Section
from burrowpy.context import ApplicationContext
from burrowpy.notifier.kafka_lock import KafkaNotifierLock

pytestmark = [pytest.mark.integration, pytest.mark.alone]  # the assertions are failover times

PRODUCED = 300
COMMITS = 5  # = the storage intervals: the partition is judged once its window is full
SESSION_TIMEOUT = 6.0  # seconds, Kafka's smallest by default (group.min.session.timeout.ms)
# the coordinator expires the dead sender's session, then the survivor rejoins on its next heartbeat
TAKEOVER_BOUND = SESSION_TIMEOUT + SESSION_TIMEOUT / 3 + 3.0


@pytest.fixture(params=["ours", "kafka"])
def bootstrap(request) -> str:
    if request.param == "kafka":
        from kafka_harness import unavailable

        reason = unavailable()
        if reason:
            pytest.skip(reason)
    return request.getfixturevalue("broker" if request.param == "ours" else "kafka").bootstrap


class Receiver:
    """An HTTP endpoint for the notifier: keeps (instance, action, body) of every request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict]] = []
        self.port = free_port()
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{action}", self.handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append((request.headers["X-Instance"], request.match_info["action"],
                              json.loads(await request.text())))
        return web.Response(text="ok")


class Instance:
    """One `burrowpy serve` subprocess with its own config file, HTTP port and output file."""

    def __init__(self, name: str, directory: Path, config: dict) -> None:
        self.name = name
        self.port = free_port()
        config["httpserver"] = {"default": {"address": f"127.0.0.1:{self.port}"}}
        config["notifier"]["hooks"]["headers"] = {"X-Instance": name}
        config["notifier-lock"]["instance"] = name
        config["general"] = {"pidfile": str(directory / f"{name}.pid")}
        self.config_path = directory / f"{name}.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.output = directory / f"{name}.out"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with open(self.output, "wb") as output:
            self.proc = await asyncio.create_subprocess_exec(
                BURROWPY, "serve", "--config", str(self.config_path),
                stdout=output, stderr=asyncio.subprocess.STDOUT, cwd=self.config_path.parent, env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"})

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()

    async def get(self, session: aiohttp.ClientSession, path: str) -> tuple[int, str]:
        try:
            async with session.get(f"http://127.0.0.1:{self.port}{path}") as reply:
                return reply.status, await reply.text()
        except aiohttp.ClientError:
            return 0, ""

    async def sender(self, session: aiohttp.ClientSession) -> dict | None:
        status, text = await self.get(session, "/v3/admin/notifier")
        return json.loads(text)["notifier"] if status == 200 else None

    async def metric(self, session: aiohttp.ClientSession, name: str) -> dict[tuple, float]:
        status, text = await self.get(session, "/metrics")
        if status != 200:
            return {}
        return {tuple(sorted(s.labels.items())): s.value for family in text_string_to_metric_families(text)
                for s in family.samples if s.name == name}

    async def evaluations(self, session: aiohttp.ClientSession) -> float:
        return sum((await self.metric(session, "burrowpy_notifier_evaluations_total")).values())

    def text(self) -> str:
        return self.output.read_text(errors="replace")


def monitor_config(bootstrap: str, receiver: Receiver, lock_topic: str, lock_group: str) -> dict:
    return {
        "storage": {"default": {"class-name": "inmemory", "intervals": COMMITS}},
        "evaluator": {"default": {"class-name": "caching", "expire-cache": 1, "minimum-complete": 1.0}},
        "cluster": {"local": {"class-name": "kafka", "servers": [bootstrap], "offset-refresh": 1,
                              "topic-refresh": 1}},
        "consumer": {"local": {"class-name": "kafka", "cluster": "local", "servers": [bootstrap]}},
        "notifier": {"hooks": {
            "class-name": "http", "interval": 1, "send-interval": 3600, "threshold": 3, "send-close": True,
            "url-open": f"http://127.0.0.1:{receiver.port}/open",
            "url-close": f"http://127.0.0.1:{receiver.port}/close",
            "template-open": str(TEMPLATES / "default-http-open.tmpl"),
            "template-close": str(TEMPLATES / "default-http-close.tmpl"),
        }},
        "notifier-lock": {"class-name": "kafka", "cluster": "local", "topic": lock_topic, "group": lock_group,
                          "session-timeout": SESSION_TIMEOUT},
    }


def sender_lines(instances: list[Instance]) -> dict[str, str]:
    """The notifier line of each instance's Clusters page in the dashboard, once it shows one."""
    lines = {}
    with chromium() as browser:
        for instance in instances:
            browser.get(f"http://127.0.0.1:{instance.port}/ui/#/clusters")
            wait_until(lambda: browser.find_elements("css selector", ".notifier-sender .sender"), 30,
                       message=f"{instance.name}'s notifier line")
            lines[instance.name] = browser.find_element("css selector", ".notifier-sender .sender").text
    return lines


async def test_the_sender_killed_with_minus_9_is_replaced_and_the_incident_is_announced_once(bootstrap, tmp_path,
                                                                                              request):
    topic, group = unique_name("ha-orders"), unique_name("ha-stopper")
    await asyncio.to_thread(create_topics, {"bootstrap.servers": bootstrap}, topic)
    receiver = Receiver()
    await receiver.start()
    config = monitor_config(bootstrap, receiver, unique_name("__burrowpy_notifier"), unique_name("burrowpy-ha"))
    instances = [Instance(name, tmp_path, json.loads(json.dumps(config))) for name in ("A", "B")]
    partition = TopicPartition(topic, 0)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))

    def outputs() -> str:
        return "\n".join(f"--- {i.name} (exit status {i.proc and i.proc.returncode}):\n{i.text()[-4000:]}"
                         for i in instances)

    try:
        await producer.start()
        for number in range(PRODUCED):
            await producer.send(topic, f"event {number}".encode(), partition=0)
        await producer.flush()
        await consumer.start()  # joining makes the broker create __consumer_offsets, which the monitors read
        for instance in instances:
            await instance.start()

        async def both_know_the_log_end() -> bool:
            for instance in instances:
                status, text = await instance.get(session, f"/v3/kafka/local/topic/{topic}")
                if status != 200 or json.loads(text)["offsets"] != [PRODUCED]:
                    return False
            return True

        await eventually(both_know_the_log_end, timeout=60, what=lambda: "the monitors reading the broker\n" + outputs())

        async def one_sender() -> list[Instance]:
            """The sender, once both instances are members of one generation of the group (the second to join
            may take the partition from the first)."""
            choices = [await i.sender(session) or {} for i in instances]
            if not all(choice.get("joined") for choice in choices):
                return []
            senders = [i for i, choice in zip(instances, choices, strict=True) if choice["sender"]]
            return senders if len(senders) == 1 else []

        (sender,) = await eventually(one_sender, timeout=30, what=lambda: "one sender chosen\n" + outputs())
        (survivor,) = [i for i in instances if i is not sender]
        if request.node.callspec.params["bootstrap"] == "ours":  # the page is the same whichever broker
            lines = await asyncio.to_thread(sender_lines, instances)
            assert re.fullmatch(rf"Notifier: this instance \({sender.name}\) sends the notifications · kafka lock "
                                r"held since .+ \(.+ ago\)", lines[sender.name]), lines
            assert lines[survivor.name] == (f"Notifier: this instance ({survivor.name}) stands by while another "
                                            "instance sends the notifications · kafka lock"), lines
        assert (await survivor.metric(session, "burrowpy_notifier_leader")) == {
            (("instance", survivor.name), ("lock", "kafka")): 0.0}
        assert (await sender.metric(session, "burrowpy_notifier_leader")) == {
            (("instance", sender.name), ("lock", "kafka")): 1.0}

        # Five quick commits of five records each, then none while the lag stays: STOP, the group is ERR.
        for _ in range(COMMITS):
            batch = {}
            while not batch:
                batch = await consumer.getmany(partition, timeout_ms=2000, max_records=5)
            await consumer.commit()
        await eventually(lambda: receiver.requests, timeout=60, what=lambda: "the open notification\n" + outputs())

        # Steady state: the sender evaluates the group again and again and announces nothing more; the other
        # instance (which may have sent before the sender joined) evaluates nothing.
        seen, idle = await sender.evaluations(session), await survivor.evaluations(session)

        async def evaluated_on(instance: Instance, since: float) -> bool:
            return await instance.evaluations(session) >= since + 3

        await eventually(lambda: evaluated_on(sender, seen), what=lambda: f"the sender evaluating on from {seen}\n" + outputs())
        assert [(who, action) for who, action, _ in receiver.requests] == [(sender.name, "open")]
        assert await survivor.evaluations(session) == idle

        await sender.kill()
        killed_at = time.monotonic()
        await eventually(lambda: survivor.sender(session), what="the survivor answering")
        await eventually(lambda: _is_sender(survivor, session), timeout=TAKEOVER_BOUND + 5,
                         what=lambda: "the survivor taking over\n" + outputs())
        takeover = time.monotonic() - killed_at
        assert takeover < TAKEOVER_BOUND, f"took over after {takeover:.1f} s"
        # The survivor evaluates the group, still in ERR, and knows its incident was announced.
        await eventually(lambda: evaluated_on(survivor, idle), what="the survivor evaluating")
        assert [(who, action) for who, action, _ in receiver.requests] == [(sender.name, "open")]

        # The group catches up: OK again, and the survivor closes the incident the killed sender opened.
        while await consumer.position(partition) < PRODUCED:
            await consumer.getmany(partition, timeout_ms=2000, max_records=1000)
        await consumer.commit()
        await eventually(lambda: len(receiver.requests) == 2, timeout=60,
                         what=lambda: "the close notification\n" + outputs())
    finally:
        await session.close()
        for instance in instances:
            await instance.kill()
        await consumer.stop()
        await producer.stop()
        await receiver.stop()
    (opener, opened, open_body), (closer, closed, close_body) = receiver.requests
    assert (opener, opened, closer, closed) == (sender.name, "open", survivor.name, "close")
    assert open_body["events"][0]["event"]["group"] == group
    assert close_body["ids"] == [open_body["events"][0]["id"]]
    print(f"takeover after kill -9: {takeover:.2f} s (session timeout {SESSION_TIMEOUT} s)")


async def _is_sender(instance: Instance, session: aiohttp.ClientSession) -> bool:
    return bool((await instance.sender(session) or {}).get("sender"))


async def test_a_sender_that_stalled_stops_sending_until_the_coordinator_confirms_it(broker):
    config = Config(file=str(TEMPLATES / "burrowpy.yaml"))
    config.sections["cluster"] = {"local": Section(config.file, "cluster.local", {"servers": [broker.bootstrap]})}
    ctx = ApplicationContext(config=config, logger=structlog.get_logger())
    lock = KafkaNotifierLock(Section(config.file, "notifier-lock", {
        "class-name": "kafka", "cluster": "local", "topic": unique_name("__burrowpy_notifier"),
        "group": unique_name("burrowpy-stall"), "session-timeout": SESSION_TIMEOUT}), ctx)
    await lock.start()
    try:
        await eventually(lambda: lock.held, what="the lock")
        # The fault: the whole process stalls (a long pause, a blocked event loop) for more than half a session
        # timeout, so the group may have handed the partition to another instance without this one hearing of it.
        time.sleep(SESSION_TIMEOUT / 2 + 0.5)  # noqa: ASYNC251 (the stall is the fault under test)
        assert not lock.held, "a stalled sender must not send before the coordinator confirms it again"
        # Its session outlived the stall: the next commit confirms it, without a rebalance.
        generation = lock.generation
        await eventually(lambda: lock.held, timeout=SESSION_TIMEOUT, what="the lock confirmed again")
        assert lock.generation == generation
    finally:
        await lock.stop()
