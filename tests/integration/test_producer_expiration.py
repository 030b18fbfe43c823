"""producer.id.expiration.ms against a real broker: a partition forgets an idle producer's sequences, so a batch
retried after that long is stored again rather than answered as a duplicate. Set at run time, as Kafka allows."""

from __future__ import annotations

import asyncio
import time

import pytest
from harness import unique_name

from broker.client import KafkaConnection
from broker.protocol.api import ApiKey
from broker.protocol.records import Record, build_batch

pytestmark = pytest.mark.integration

# how often the broker looks for idle producers (Kafka's default is ten minutes)
BROKER_CONFIG = {"producer.id.expiration.check.interval.ms": 100}


async def _produce(connection: KafkaConnection, topic: str, batch: bytes) -> int:
    answer = await connection.request(ApiKey.PRODUCE, {"transactional_id": None, "acks": -1, "timeout_ms": 10000,
                                                       "topic_data": [{"name": topic, "partition_data": [
                                                           {"index": 0, "records": batch}]}]})
    partition = answer["responses"][0]["partition_responses"][0]
    assert partition["error_code"] == 0, partition
    return partition["base_offset"]


async def _set_expiration(connection: KafkaConnection, value: str) -> None:
    answer = await connection.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, {"resources": [
        {"resource_type": 4, "resource_name": "", "configs": [
            {"name": "producer.id.expiration.ms", "config_operation": 0, "value": value}]}], "validate_only": False},
        version=1)
    assert answer["responses"][0]["error_code"] == 0, answer


async def test_a_producer_idle_past_producer_id_expiration_ms_is_forgotten(broker):
    topic = unique_name("expiring")
    async with await KafkaConnection.connect(broker.bootstrap) as connection:
        created = await connection.request(ApiKey.CREATE_TOPICS, {"topics": [{
            "name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 10000})
        assert created["topics"][0]["error_code"] == 0, created
        ids = await connection.request(ApiKey.INIT_PRODUCER_ID, {
            "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1},
            version=4)
        assert ids["error_code"] == 0, ids
        # stamped now: a producer's idle time runs from its last batch's timestamp (as in Kafka), and a batch
        # stamped 0 was idle for decades, forgotten at the first check even under the default of a day
        batch = build_batch([Record(0, int(time.time() * 1000), None, b"once")], producer_id=ids["producer_id"],
                            producer_epoch=ids["producer_epoch"], base_sequence=0)
        assert await _produce(connection, topic, batch) == 0
        # the default (a day): a retry of the same batch is a duplicate, answered with its first offset
        assert await _produce(connection, topic, batch) == 0
        await _set_expiration(connection, "300")
        # once the producer has been idle 300 ms and a check has run, the same batch is a new producer's
        # (a duplicate does not count as activity, so retrying it while waiting lets the producer go idle)
        deadline = time.monotonic() + 15
        while (offset := await _produce(connection, topic, batch)) == 0:
            assert time.monotonic() < deadline, "the idle producer was never forgotten"
            await asyncio.sleep(0.1)
        assert offset == 1
        await _set_expiration(connection, "86400000")
