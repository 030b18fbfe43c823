"""The consumer module's polls of a quiet ``__consumer_offsets``: a leader holds each fetch until a record arrives or
its max wait passes, so an idle monitor asks each leader once per max wait (a second's worth of polls counted
here), and a commit made while a poll is held still reaches the monitor at once, on our broker and on Apache Kafka
4.x. The max wait stays under the client profile's request timeout (half of it), or every idle poll would time out.

The whole monitor runs in this process (``burrowpy.daemon.Monitor``) with its cluster module quiet; the fetches
are counted at ``KafkaConsumer._fetch``; commits are made with librdkafka's consumer."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import structlog
from burrow_support import in_process_config
from confluent_kafka.admin import AdminClient, NewTopic
from harness import free_port, unique_name
from test_time_lag import commit  # a commit of partition 0, retried while the coordinator loads

from burrowpy.config import parse_config
from burrowpy.coordinators import consumer_kafka
from burrowpy.daemon import Monitor

pytestmark = pytest.mark.integration


def monitor_config(bootstrap: str, **profile: Any) -> dict[str, Any]:
    config = in_process_config(bootstrap, free_port(), **{"offset-refresh": 3600, "topic-refresh": 3600,
                                                          "topic-health-refresh": 0})
    config["consumer"] = {"local": {"class-name": "kafka", "cluster": "local", "servers": [bootstrap]}}
    if profile:
        config["client-profile"] = {"timeouts": profile}
        config["consumer"]["local"]["client-profile"] = "timeouts"
    return config


async def until(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {seconds} s"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("where", ["broker", "kafka"])
async def test_an_idle_offsets_topic_is_polled_seldom_and_a_commit_still_arrives_at_once(where, request, monkeypatch):
    server = request.getfixturevalue(where)
    topic, group = unique_name("idle-polls"), unique_name("idle-polls-group")
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        await asyncio.to_thread(future.result, 30)
    await asyncio.to_thread(commit, server.bootstrap, group, topic, 1)
    fetches: list[float] = []
    fetch = consumer_kafka.KafkaConsumer._fetch

    async def counted(self: consumer_kafka.KafkaConsumer, *args: Any) -> Any:
        fetches.append(time.monotonic())
        return await fetch(self, *args)

    monkeypatch.setattr(consumer_kafka.KafkaConsumer, "_fetch", counted)
    monitor = Monitor(parse_config(monitor_config(server.bootstrap), "burrowpy.yaml", {}), structlog.get_logger())
    await monitor.start()
    try:
        consumer = monitor.ctx.modules["consumer"]["local"]
        await until(lambda: consumer.records_read >= 1, 60, "first commit read")
        # the polls of the read's last answers: one second later, every poll held is a quiet one
        settled = time.monotonic() + 1
        await until(lambda: time.monotonic() >= settled, 2, "second")
        polled = len(fetches)
        window = time.monotonic() + 1
        await until(lambda: time.monotonic() >= window, 2, "second")
        # our broker and a one-node Kafka lead every offsets partition: one poll held at a time
        assert len(fetches) - polled <= 1, fetches[polled:]
        read, committed = consumer.records_read, time.monotonic()
        await asyncio.to_thread(commit, server.bootstrap, group, topic, 2)
        await until(lambda: consumer.records_read > read, consumer.fetch_max_wait_ms / 1000 / 2, "commit read")
        assert time.monotonic() - committed < consumer.fetch_max_wait_ms / 1000 / 2
    finally:
        await monitor.stop()


async def test_the_max_wait_stays_under_the_request_timeout():
    def max_wait(**profile: Any) -> int:
        monitor = Monitor(parse_config(monitor_config("127.0.0.1:9", **profile), "burrowpy.yaml", {}),
                          structlog.get_logger())
        monitor.configure()  # the modules built, not started
        return monitor.ctx.modules["consumer"]["local"].fetch_max_wait_ms  # type: ignore[no-any-return]

    assert max_wait() == consumer_kafka.FETCH_MAX_WAIT_MS
    assert max_wait(**{"read-timeout": 2}) == 1000
    assert max_wait(**{"dial-timeout": 4, "read-timeout": 3}) == 2000
