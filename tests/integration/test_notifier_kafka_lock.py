"""Two `burrowpy serve` processes choose one notifier sender through Kafka (the ``notifier-lock`` block of class
kafka), on our broker and on Apache Kafka 4.x: the sender is killed with -9 while a group is in ERR, the other
takes over within the group's session timeout, and the incident is announced once open and once closed, by the
instance that held the lock at each moment, with the same incident id. A sender stopped with SIGTERM leaves the
group, so the other takes over on its next heartbeat. A sender cut off from the broker while its process runs on
falls silent within half a session timeout, before the other takes over. A sender whose process stalled stops
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
from fault_harness import KafkaRelay
from harness import BURROWPY, BrokerProcess, create_topics, free_port, unique_name, wait_until
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
# a sender stopped cleanly leaves the group: the survivor rejoins on its next heartbeat, no session expires
CLEAN_HANDOVER_BOUND = SESSION_TIMEOUT / 3 + 2.0


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
        self.times: list[float] = []  # monotonic arrival time of each request
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
        self.times.append(time.monotonic())
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

    async def terminate(self) -> int:
        """SIGTERM, as a service manager stops it; the exit status once it has stopped."""
        assert self.proc is not None
        self.proc.terminate()
        return await asyncio.wait_for(self.proc.wait(), 30)

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


class Scenario:
    """A topic of PRODUCED records and a group of ours reading it, an HTTP receiver, and two `burrowpy serve`
    instances, A and B, sharing one Kafka notifier lock. ``client_ids`` gives each instance a client id of its
    own (``burrowpy-A``/``burrowpy-B``) on every connection, for a relay that cuts one of them off."""

    def __init__(self, bootstrap: str, tmp_path: Path, *, client_ids: bool = False, **notifier: object) -> None:
        self.topic, self.group = unique_name("ha-orders"), unique_name("ha-stopper")
        self.bootstrap = bootstrap
        self.receiver = Receiver()
        self.lock_topic = unique_name("__burrowpy_notifier")
        config = monitor_config(bootstrap, self.receiver, self.lock_topic, unique_name("burrowpy-ha"))
        config["notifier"]["hooks"].update(notifier)
        self.instances = []
        for name in ("A", "B"):
            own = json.loads(json.dumps(config))
            if client_ids:
                own["client-profile"] = {name: {"client-id": f"burrowpy-{name}"}}
                for module in ("cluster", "consumer"):
                    own[module]["local"]["client-profile"] = name
            self.instances.append(Instance(name, tmp_path, own))
        self.partition = TopicPartition(self.topic, 0)
        self.producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        self.consumer = AIOKafkaConsumer(self.topic, bootstrap_servers=bootstrap, group_id=self.group,
                                         enable_auto_commit=False, auto_offset_reset="earliest")
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
        self.sender: Instance | None = None
        self.survivor: Instance | None = None

    def outputs(self) -> str:
        return "\n".join(f"--- {i.name} (exit status {i.proc and i.proc.returncode}):\n{i.text()[-4000:]}"
                         for i in self.instances)

    async def start(self) -> None:
        """Everything running, and the instances agreed on one sender."""
        await asyncio.to_thread(create_topics, {"bootstrap.servers": self.bootstrap}, self.topic)
        await self.receiver.start()
        await self.producer.start()
        for number in range(PRODUCED):
            await self.producer.send(self.topic, f"event {number}".encode(), partition=0)
        await self.producer.flush()
        await self.consumer.start()  # joining makes the broker create __consumer_offsets, which the monitors read
        for instance in self.instances:
            await instance.start()

        async def both_know_the_log_end() -> bool:
            for instance in self.instances:
                status, text = await instance.get(self.session, f"/v3/kafka/local/topic/{self.topic}")
                if status != 200 or json.loads(text)["offsets"] != [PRODUCED]:
                    return False
            return True

        await eventually(both_know_the_log_end, timeout=60,
                         what=lambda: "the monitors reading the broker\n" + self.outputs())

        async def one_sender() -> list[Instance]:
            """The sender, once both instances are members of one generation of the group (the second to join
            may take the partition from the first)."""
            choices = [await i.sender(self.session) or {} for i in self.instances]
            if not all(choice.get("joined") for choice in choices):
                return []
            senders = [i for i, choice in zip(self.instances, choices, strict=True) if choice["sender"]]
            return senders if len(senders) == 1 else []

        (self.sender,) = await eventually(one_sender, timeout=30, what=lambda: "one sender chosen\n" + self.outputs())
        (self.survivor,) = [i for i in self.instances if i is not self.sender]

    async def open_incident(self) -> None:
        """Five quick commits of five records each, then none while the lag stays: STOP, the group is ERR."""
        for _ in range(COMMITS):
            batch = {}
            while not batch:
                batch = await self.consumer.getmany(self.partition, timeout_ms=2000, max_records=5)
            await self.consumer.commit()
        await eventually(lambda: self.receiver.requests, timeout=60,
                         what=lambda: "the open notification\n" + self.outputs())

    async def survivor_closes(self, idle: float) -> None:
        """After the handover: the survivor (which had made ``idle`` evaluations) evaluates the group, still in
        ERR, and knows its incident was announced; then the group catches up, OK again, and the survivor closes
        the incident the sender opened."""
        await eventually(lambda: self.evaluated_on(self.survivor, idle), what="the survivor evaluating")
        assert self.sent() == [(self.sender.name, "open")]
        while await self.consumer.position(self.partition) < PRODUCED:
            await self.consumer.getmany(self.partition, timeout_ms=2000, max_records=1000)
        await self.consumer.commit()
        await eventually(lambda: len(self.receiver.requests) == 2, timeout=60,
                         what=lambda: "the close notification\n" + self.outputs())

    def check_announced_once(self) -> None:
        """One open by the sender and one close by the survivor, of the same incident."""
        (opener, opened, open_body), (closer, closed, close_body) = self.receiver.requests
        assert (opener, opened, closer, closed) == (self.sender.name, "open", self.survivor.name, "close")
        assert open_body["events"][0]["event"]["group"] == self.group
        assert close_body["ids"] == [open_body["events"][0]["id"]]

    async def evaluated_on(self, instance: Instance, since: float) -> bool:
        return await instance.evaluations(self.session) >= since + 3

    async def takeover_seconds(self, since: float) -> float:
        """Seconds from ``since`` (monotonic) until the survivor says it is the sender."""
        await eventually(lambda: self.survivor.sender(self.session), what="the survivor answering")
        await eventually(lambda: _is_sender(self.survivor, self.session), timeout=TAKEOVER_BOUND + 5,
                         what=lambda: "the survivor taking over\n" + self.outputs())
        return time.monotonic() - since

    def sent(self) -> list[tuple[str, str]]:
        return [(who, action) for who, action, _ in self.receiver.requests]

    async def stop(self) -> None:
        await self.session.close()
        for instance in self.instances:
            await instance.kill()
        await self.consumer.stop()
        await self.producer.stop()
        await self.receiver.stop()


async def test_the_sender_killed_with_minus_9_is_replaced_and_the_incident_is_announced_once(bootstrap, tmp_path,
                                                                                              request):
    scenario = Scenario(bootstrap, tmp_path)
    try:
        await scenario.start()
        sender, survivor, session = scenario.sender, scenario.survivor, scenario.session
        if request.node.callspec.params["bootstrap"] == "ours":  # the page is the same whichever broker
            lines = await asyncio.to_thread(sender_lines, scenario.instances)
            assert re.fullmatch(rf"Notifier: this instance \({sender.name}\) sends the notifications · kafka lock "
                                r"held since .+ \(.+ ago\)", lines[sender.name]), lines
            assert lines[survivor.name] == (f"Notifier: this instance ({survivor.name}) stands by while another "
                                            "instance sends the notifications · kafka lock"), lines
        assert (await survivor.metric(session, "burrowpy_notifier_leader")) == {
            (("instance", survivor.name), ("lock", "kafka")): 0.0}
        assert (await sender.metric(session, "burrowpy_notifier_leader")) == {
            (("instance", sender.name), ("lock", "kafka")): 1.0}
        await scenario.open_incident()

        # Steady state: the sender evaluates the group again and again and announces nothing more; the other
        # instance (which may have sent before the sender joined) evaluates nothing.
        seen, idle = await sender.evaluations(session), await survivor.evaluations(session)
        await eventually(lambda: scenario.evaluated_on(sender, seen),
                         what=lambda: f"the sender evaluating on from {seen}\n" + scenario.outputs())
        assert scenario.sent() == [(sender.name, "open")]
        assert await survivor.evaluations(session) == idle

        await sender.kill()
        takeover = await scenario.takeover_seconds(time.monotonic())
        assert takeover < TAKEOVER_BOUND, f"took over after {takeover:.1f} s"
        await scenario.survivor_closes(idle)
    finally:
        await scenario.stop()
    scenario.check_announced_once()
    print(f"takeover after kill -9: {takeover:.2f} s (session timeout {SESSION_TIMEOUT} s)")


async def test_a_sender_stopped_cleanly_hands_over_at_once(bootstrap, tmp_path):
    """SIGTERM stops the monitor, whose consumer leaves the lock group: the survivor rejoins on its next heartbeat
    instead of waiting for a session to expire."""
    scenario = Scenario(bootstrap, tmp_path)
    try:
        await scenario.start()
        sender, survivor = scenario.sender, scenario.survivor
        await scenario.open_incident()
        idle = await survivor.evaluations(scenario.session)
        stopped_at = time.monotonic()
        assert await sender.terminate() == 0, scenario.outputs()
        takeover = await scenario.takeover_seconds(stopped_at)
        assert takeover < CLEAN_HANDOVER_BOUND, f"took over {takeover:.1f} s after SIGTERM"
        await scenario.survivor_closes(idle)
    finally:
        await scenario.stop()
    scenario.check_announced_once()
    print(f"takeover after SIGTERM: {takeover:.2f} s (session timeout {SESSION_TIMEOUT} s)")


async def test_a_sender_cut_off_from_kafka_falls_silent_while_the_other_takes_over(tmp_path):
    """Every connection of the sender to the broker is cut (a relay in front of the broker refuses its client id)
    while its process runs on. With reminders every two seconds, it keeps announcing the incident until it is cut
    off; then it must fall silent within half a session timeout, before the survivor is given the lock."""
    broker = BrokerProcess(tmp_path / "cut-broker" / "data")
    relay = KafkaRelay("127.0.0.1", broker.port).start()
    broker.extra_config = {"group.initial.rebalance.delay.ms": 200,
                           "advertised.listeners": f"PLAINTEXT://{relay.address}"}
    broker.data_dir.parent.mkdir()
    scenario = Scenario(relay.address, tmp_path, client_ids=True, **{"send-interval": 2})
    try:
        await asyncio.to_thread(broker.start)
        await scenario.start()
        sender, survivor, requests = scenario.sender, scenario.survivor, scenario.receiver.requests
        await scenario.open_incident()
        await eventually(lambda: len(requests) >= 2, what="a reminder from the sender")
        cut_at = time.monotonic()
        relay.refuse(f"burrowpy-{sender.name}")
        takeover = await scenario.takeover_seconds(cut_at)
        assert takeover < TAKEOVER_BOUND, f"took over {takeover:.1f} s after the cut"
        await eventually(lambda: scenario.sent()[-2:] == [(survivor.name, "open")] * 2, timeout=30,
                         what=lambda: f"two reminders from the survivor: {scenario.sent()}")
        assert sender.proc.returncode is None, "the cut-off sender must run on"
        assert not await _is_sender(sender, scenario.session)
    finally:
        await scenario.stop()
        relay.stop()
        await asyncio.to_thread(broker.stop)
    times = scenario.receiver.times
    from_sender = [t for (who, _, _), t in zip(requests, times, strict=True) if who == sender.name]
    from_survivor = [t for (who, _, _), t in zip(requests, times, strict=True) if who == survivor.name]
    assert max(from_sender) < cut_at + SESSION_TIMEOUT / 2 + 1.0, (
        f"the cut-off sender sent {max(from_sender) - cut_at:.1f} s after the cut: {scenario.sent()}")
    assert max(from_sender) < min(from_survivor), f"two senders at once: {scenario.sent()}"
    # the survivor reminds of the incident the cut-off sender opened: nothing is announced as new
    assert {body["events"][0]["id"] for _, _, body in requests} == {requests[0][2]["events"][0]["id"]}
    print(f"takeover after the cut: {takeover:.2f} s; the sender's last notification "
          f"{max(from_sender) - cut_at:.2f} s after the cut")


async def test_the_state_record_of_a_vanished_group_is_tombstoned(broker, tmp_path):
    """A group deleted while its incident is open leaves no record in the compacted state topic: the sender
    writes a tombstone for it, so the topic does not keep every group that ever had an incident."""
    scenario = Scenario(broker.bootstrap, tmp_path)
    try:
        await scenario.start()
        await scenario.open_incident()
        key = json.dumps(["local", scenario.group]).encode()

        async def last_record() -> list[bytes | None]:
            """The group's last record in the state topic, in a list (empty while it has none)."""
            return (await state_records(broker.bootstrap, f"{scenario.lock_topic}-state", key))[-1:]

        await eventually(lambda: last_record(), what="the open incident's state record")
        assert (await last_record())[0] is not None
        await scenario.consumer.stop()  # no member, no commit: nothing brings the group back
        url = f"http://127.0.0.1:{scenario.sender.port}/v3/kafka/local/consumer/{scenario.group}"
        async with scenario.session.delete(url) as reply:  # Burrow's removal of a group from the monitor
            assert reply.status == 200, await reply.text()

        async def tombstoned() -> bool:
            return await last_record() == [None]

        await eventually(tombstoned, what=lambda: "the tombstone\n" + scenario.outputs())
    finally:
        await scenario.stop()


async def state_records(bootstrap: str, topic: str, key: bytes) -> list[bytes | None]:
    """The values of ``key`` in the state topic, oldest first (None for a tombstone)."""
    partition = TopicPartition(topic, 0)
    reader = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    await reader.start()
    try:
        reader.assign([partition])
        end = (await reader.end_offsets([partition]))[partition]
        values = []
        while await reader.position(partition) < end:
            for record in (await reader.getmany(partition, timeout_ms=1000)).get(partition, []):
                if record.key == key:
                    values.append(record.value)
        return values
    finally:
        await reader.stop()


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
