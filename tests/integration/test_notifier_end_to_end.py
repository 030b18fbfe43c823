"""End to end: a consumer group stops on our broker, the monitor sees it, an email goes out, and another
when the group catches up. Everything is real: the broker (a subprocess), aiokafka clients, the monitor
daemon (cluster and consumer modules reading the broker, storage, evaluator, notifier), and aiosmtpd."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from notifier_support import (
    CONFIG_FILE,
    SMTP_PASSWORD,
    SMTP_USER,
    capturing_logger,
    eventually,
    self_signed_certificate,
    smtp_server,
)
from zk import free_port

from burrowpy.config import parse_config
from burrowpy.daemon import Monitor
from burrowpy.protocol import FetchTopic

pytestmark = pytest.mark.integration

TOPIC = "notifier-e2e"
GROUP = "e2e-stopper"
PRODUCED = 300
COMMITS = 5  # = the storage intervals: the partition is judged once its window is full


def create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
        future.result(10)


def monitor_config(bootstrap: str, smtp_port: int, cert: str) -> dict:
    return {
        "storage": {"default": {"class-name": "inmemory", "intervals": COMMITS}},
        # minimum-complete 1.0: a partition is judged only on a full window, not on its first commits
        "evaluator": {"default": {"class-name": "caching", "expire-cache": 1, "minimum-complete": 1.0}},
        "httpserver": {"default": {"address": f"127.0.0.1:{free_port()}"}},
        "cluster": {"local": {"class-name": "kafka", "servers": [bootstrap], "offset-refresh": 1,
                              "topic-refresh": 1}},
        "consumer": {"local": {"class-name": "kafka", "cluster": "local", "servers": [bootstrap]}},
        "notifier": {"mail": {
            "class-name": "email", "interval": 1, "send-interval": 3600, "threshold": 3, "send-close": True,
            "server": "127.0.0.1", "port": smtp_port, "extra-ca": cert, "auth-type": "crammd5",
            "username": SMTP_USER, "password": SMTP_PASSWORD,
            "from": "burrow@example.com", "to": ["ops@example.com", "dev@example.com"],
            "template-open": "default-email-open.tmpl", "template-close": "default-email-close.tmpl",
        }},
    }


async def has_broker_offset(monitor: Monitor, offset: int) -> bool:
    return await monitor.ctx.fetch(FetchTopic("local", TOPIC, monitor.ctx.new_reply())) == [offset]


async def test_a_group_stopped_on_our_broker_is_emailed_and_so_is_its_recovery(broker, tmp_path):
    cert, key = self_signed_certificate(tmp_path)
    await asyncio.to_thread(create_topic, broker.bootstrap)
    logger, logs = capturing_logger()
    partition = TopicPartition(TOPIC, 0)
    with smtp_server(cert, key) as (controller, mailbox):
        monitor = Monitor(parse_config(monitor_config(broker.bootstrap, controller.port, str(cert)), CONFIG_FILE),
                          logger)
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap, group_id=GROUP,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        try:
            await producer.start()
            for number in range(PRODUCED):
                await producer.send(TOPIC, f"event {number}".encode(), partition=0)
            await producer.flush()
            # Joining the group makes the broker create __consumer_offsets, which the monitor reads.
            await consumer.start()
            await monitor.start()
            # Commits are only stored once the monitor knows the partition's broker offset.
            await eventually(lambda: has_broker_offset(monitor, PRODUCED), what="the broker offset in storage")
            # Five quick commits of five records each, then nothing: lag stays, commits stop -> STOP.
            for _ in range(COMMITS):
                batch = {}
                while not batch:
                    batch = await consumer.getmany(partition, timeout_ms=2000, max_records=5)
                await consumer.commit()
            committed = await consumer.committed(partition)
            await eventually(lambda: mailbox.mails, timeout=60, what="the open email")

            # The group catches up with everything produced: OK again, and the incident closes.
            while await consumer.position(partition) < PRODUCED:
                await consumer.getmany(partition, timeout_ms=2000, max_records=1000)
            await consumer.commit()
            await eventually(lambda: len(mailbox.mails) == 2, timeout=60, what="the close email")
        finally:
            await consumer.stop()
            await producer.stop()
            await monitor.stop()

    (envelope, opened, secured, user), (_, closed, _, _) = mailbox.mails
    assert secured and user == SMTP_USER
    assert envelope.rcpt_tos == ["ops@example.com", "dev@example.com"]
    assert opened["Subject"] == f"[burrowpy] Kafka consumer lag alert: {GROUP} on local is ERR"
    body = opened.get_payload(decode=True).decode()
    partition_lines = [line.strip() for line in body.splitlines() if line.startswith("          ")]
    assert len(partition_lines) == 1
    assert partition_lines[0].startswith(f"STOP {TOPIC}:0 lag {PRODUCED - committed} (")
    assert closed["Subject"] == f"[burrowpy] Resolved: {GROUP} on local is OK again"
    incident = next(line.split()[1] for line in body.splitlines() if line.startswith("Incident:"))
    assert f"Incident: {incident}" in closed.get_payload(decode=True).decode()
    assert not [e for e in logs.entries if e.get("log_level") == "error"]
