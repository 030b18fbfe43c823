"""The pipeline's own PySpark data source, for what Spark's Kafka connector cannot do.

Topics (the offsets topic among them) are read with Spark's own Kafka source, ``format("kafka")`` from
``spark-sql-kafka-0-10`` (see :mod:`burrowpy.pipeline.session` for how its jars reach Spark). That source
reads records; it does not sample log-end offsets, which the history needs as its broker rows. So one
source of ours remains:

``burrowpy-broker-offsets`` samples the log-end offset of every partition (ListOffsets, as the
monitor's cluster module does, through librdkafka) and yields history-format broker rows. Options:
``kafka.bootstrap.servers``, ``cluster`` (name written in the rows, default ``local``), ``subscribe``
(default: every topic), ``sampleIntervalMs`` (streaming; default 10000, Burrow's offset-refresh),
``pollTimeoutMs``; any other ``kafka.*`` option is passed to librdkafka.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    InputPartition,
    SimpleDataSourceStreamReader,
)

from .history import HISTORY_SPARK_SCHEMA
from .offsets_decoder import broker_offset_row

DEFAULT_POLL_TIMEOUT_MS = 30_000
DEFAULT_SAMPLE_INTERVAL_MS = 10_000


class KafkaSourceError(RuntimeError):
    """The broker could not be read: unknown topic, timeout, or a client error."""


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings from data source options: every ``kafka.*`` option, without the prefix."""
    config = {
        key[len("kafka.") :]: value for key, value in options.items() if key.lower().startswith("kafka.")
    }
    if "bootstrap.servers" not in config:
        raise KafkaSourceError("option kafka.bootstrap.servers is required")
    return config


def parse_topics(options: Mapping[str, str]) -> list[str]:
    return [t.strip() for t in options.get("subscribe", "").split(",") if t.strip()]


class BrokerClient:
    """Metadata and ListOffsets through a librdkafka consumer that never joins a group."""

    def __init__(self, config: Mapping[str, str], timeout_s: float) -> None:
        from confluent_kafka import Consumer

        self.timeout_s = timeout_s
        self._consumer = Consumer({"group.id": "burrowpy-spark", "enable.auto.commit": False, **config})

    def partitions(self, topics: list[str] | None) -> dict[str, list[int]]:
        """Partition ids per topic; every topic of the cluster (internal ones included) when ``topics`` is None."""
        metadata = self._consumer.list_topics(timeout=self.timeout_s)
        found = {name: sorted(t.partitions) for name, t in metadata.topics.items() if t.error is None}
        if topics is None:
            return found
        missing = [t for t in topics if t not in found]
        if missing:
            raise KafkaSourceError(f"unknown topic(s): {', '.join(missing)}")
        return {t: found[t] for t in topics if t in found}

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(log-start offset, log-end offset) of a partition, asked from the broker (ListOffsets)."""
        from confluent_kafka import TopicPartition

        low, high = self._consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=self.timeout_s, cached=False
        )
        return low, high

    def close(self) -> None:
        self._consumer.close()


class BrokerOffsetsDataSource(DataSource):
    """``format("burrowpy-broker-offsets")``: log-end offset samples as history broker rows."""

    @classmethod
    def name(cls) -> str:
        return "burrowpy-broker-offsets"

    def schema(self) -> str:
        return HISTORY_SPARK_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return BrokerOffsetsBatchReader(self.options)

    def simpleStreamReader(self, schema: Any) -> SimpleDataSourceStreamReader:
        return BrokerOffsetsStreamReader(self.options)


def sample_broker_offsets(
    config: Mapping[str, str], cluster: str, topics: list[str] | None, timeout_s: float, now_ms: int
) -> list[tuple]:
    """One history broker row per partition: its log-end offset now."""
    client = BrokerClient(config, timeout_s)
    try:
        rows = []
        for topic, partitions in sorted(client.partitions(topics).items()):
            for partition in partitions:
                _, high = client.watermarks(topic, partition)
                rows.append(broker_offset_row(cluster, topic, partition, high, now_ms))
        return rows
    finally:
        client.close()


class _BrokerOffsetsOptions:
    def __init__(self, options: Mapping[str, str]) -> None:
        self.config = client_config(options)
        self.cluster = options.get("cluster", "local")
        self.topics = parse_topics(options) or None
        self.timeout_s = int(options.get("pollTimeoutMs", DEFAULT_POLL_TIMEOUT_MS)) / 1000
        self.sample_interval_ms = int(options.get("sampleIntervalMs", DEFAULT_SAMPLE_INTERVAL_MS))

    def sample(self) -> list[tuple]:
        return sample_broker_offsets(
            self.config, self.cluster, self.topics, self.timeout_s, int(time.time() * 1000)
        )


class BrokerOffsetsBatchReader(_BrokerOffsetsOptions, DataSourceReader):
    def read(self, partition: InputPartition) -> Iterator[tuple]:
        return iter(self.sample())


class BrokerOffsetsStreamReader(_BrokerOffsetsOptions, SimpleDataSourceStreamReader):
    """A sample every ``sampleIntervalMs``; the stream offset counts samples and records when the last was taken."""

    def initialOffset(self) -> dict[str, int]:
        return {"samples": 0, "taken_at_ms": 0}

    def read(self, start: dict[str, int]) -> tuple[Iterator[tuple], dict[str, int]]:
        now_ms = int(time.time() * 1000)
        if now_ms - start["taken_at_ms"] < self.sample_interval_ms:
            return iter(()), start
        rows = sample_broker_offsets(self.config, self.cluster, self.topics, self.timeout_s, now_ms)
        return iter(rows), {"samples": start["samples"] + 1, "taken_at_ms": now_ms}

    def readBetweenOffsets(self, start: dict[str, int], end: dict[str, int]) -> Iterator[tuple]:
        # A past sample cannot be taken again; after a failure the batch is re-run with a fresh sample,
        # which is as true a log-end offset as the lost one.
        return iter(self.sample())
