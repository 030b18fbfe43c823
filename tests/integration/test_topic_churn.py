"""Requests about a topic while other clients delete and create it again and again: each is answered, with an
error code where the topic went away mid-request, never a handler failure that closes the asker's connection.

Found by the fuzzer (a long run, ``BURROWPY_FUZZ_EXAMPLES=300``): a Metadata that auto-created a topic waited for
the creation, a DeleteTopics removed the topic meanwhile, and the handler then looked the topic up unchecked
(KeyError: the broker logged "handler failed" and closed the connection). Kafka answers such a topic
UNKNOWN_TOPIC_OR_PARTITION."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from harness import BrokerProcess

from broker.client import KafkaConnection
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey

pytestmark = pytest.mark.integration

TOPIC = "churn"
SECONDS = 4.0
GONE = {ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.INVALID_PARTITIONS}


async def churn(bootstrap: str, until: float) -> int:
    """Delete the topic and create it again, until ``until``; how many rounds."""
    rounds = 0
    async with await KafkaConnection.connect(bootstrap, client_id="churn") as conn:
        while time.monotonic() < until:
            await conn.request(ApiKey.DELETE_TOPICS, {"topic_names": [TOPIC], "topics": [{"name": TOPIC}],
                                                      "timeout_ms": 5000})
            await conn.request(ApiKey.CREATE_TOPICS, {"topics": [{"name": TOPIC, "num_partitions": 1,
                                                                  "replication_factor": 1}], "timeout_ms": 5000})
            rounds += 1
    return rounds


async def ask(bootstrap: str, until: float) -> dict[str, set[int]]:
    """Ask about the topic in every way that looks it up after waiting on something (auto-creating Metadata,
    incremental AlterConfigs, CreatePartitions), until ``until``; the error codes each answered."""
    codes: dict[str, set[int]] = {"metadata": set(), "alter_configs": set(), "create_partitions": set()}
    async with await KafkaConnection.connect(bootstrap, client_id="asker") as conn:
        while time.monotonic() < until:
            answer = await conn.request(ApiKey.METADATA, {"topics": [{"name": TOPIC}],
                                                          "allow_auto_topic_creation": True})
            codes["metadata"].add(answer["topics"][0]["error_code"])
            answer = await conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, {"resources": [{
                "resource_type": 2, "resource_name": TOPIC, "configs": [
                    {"name": "cleanup.policy", "config_operation": 2, "value": "compact"}]}],
                "validate_only": False})
            codes["alter_configs"].add(answer["responses"][0]["error_code"])
            answer = await conn.request(ApiKey.CREATE_PARTITIONS, {"topics": [{"name": TOPIC, "count": 2,
                                                                               "assignments": None}],
                                                                   "timeout_ms": 5000, "validate_only": False})
            codes["create_partitions"].add(answer["results"][0]["error_code"])
    return codes


def run_churn(bootstrap: str) -> None:
    """Two clients deleting and making the topic, three asking about it, for SECONDS: every request answered
    (a connection closed fails its client), each answer's code one of GONE."""
    async def run() -> tuple[list[int], list[dict[str, set[int]]]]:
        until = time.monotonic() + SECONDS
        return await asyncio.gather(asyncio.gather(*(churn(bootstrap, until) for _ in range(2))),
                                    asyncio.gather(*(ask(bootstrap, until) for _ in range(3))))

    rounds, answered = asyncio.run(run())
    assert sum(rounds) > 10, rounds
    for codes in answered:
        for kind, seen in codes.items():
            assert seen <= GONE, (kind, seen)


def test_kafka_answers_a_churning_topic_with_error_codes(kafka):
    """The same load on Apache Kafka (the test is right only if Kafka passes it)."""
    run_churn(kafka.bootstrap)


def test_a_topic_deleted_and_made_again_under_the_requests_that_name_it(tmp_path):
    broker = BrokerProcess(tmp_path / "data", extra_config={"auto.create.topics.enable": True})
    broker.start()
    try:
        run_churn(broker.bootstrap)
        failures = [line for line in broker.log_text().splitlines() if '"level": "error"' in line or "Traceback" in line]
        assert not failures, "\n".join(json.loads(line).get("event", line) if line.startswith("{") else line
                                       for line in failures[:5])
    finally:
        broker.stop()
