"""PySpark data sources for Kafka-protocol brokers (ours or Apache Kafka), through librdkafka.

Spark's own Kafka connector is a JVM jar that is not on PyPI, so the pipeline reads brokers with the
Python Data Source API and confluent-kafka. Two sources:

``burrowpy-kafka`` reads the records of topics, batch and streaming, one Spark partition per topic
partition and offset range. Options and columns follow Spark's ``kafka`` source, so a job can switch
to it where the jar exists: ``kafka.bootstrap.servers`` (required), ``subscribe`` (comma-separated
topics), ``startingOffsets`` / ``endingOffsets`` (``earliest``, ``latest`` or JSON such as
``{"t": {"0": 12, "1": -2}}`` where -2 is earliest and -1 latest), ``maxOffsetsPerTrigger``
(streaming), ``pollTimeoutMs``; any other ``kafka.*`` option is passed to librdkafka.
Columns: key, value, topic, partition, offset, timestamp, timestampType.

``burrowpy-broker-offsets`` samples the log-end offset of every partition (ListOffsets, as the
monitor's cluster module does) and yields history-format broker rows. Options:
``kafka.bootstrap.servers``, ``cluster`` (name written in the rows, default ``local``), ``subscribe``
(default: every topic), ``sampleIntervalMs`` (streaming; default 10000, Burrow's offset-refresh).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
    SimpleDataSourceStreamReader,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from .history import HISTORY_SPARK_SCHEMA
from .offsets_decoder import broker_offset_row

RECORD_SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"

EARLIEST = -2
LATEST = -1

DEFAULT_POLL_TIMEOUT_MS = 30_000
DEFAULT_SAMPLE_INTERVAL_MS = 10_000
ARROW_BATCH_ROWS = 10_000

# Offsets as Spark checkpoints them: {topic: {partition (as a string, JSON keys are strings): offset}}
Offsets = dict[str, dict[str, int]]


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


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Records [start, end) of one topic partition: one Spark task."""

    topic: str
    partition: int
    start: int
    end: int


class BrokerClient:
    """Metadata and ListOffsets through a librdkafka consumer that never joins a group."""

    def __init__(self, config: Mapping[str, str], timeout_s: float) -> None:
        from confluent_kafka import Consumer

        self.timeout_s = timeout_s
        self._consumer = Consumer({"group.id": "burrowpy-spark", "enable.auto.commit": False, **config})

    def partitions(self, topics: list[str] | None, missing_ok: bool = False) -> dict[str, list[int]]:
        """Partition ids per topic; every topic of the cluster (internal ones included) when ``topics`` is None.

        With ``missing_ok`` a topic that does not exist yet is left out instead of being an error.
        """
        metadata = self._consumer.list_topics(timeout=self.timeout_s)
        found = {name: sorted(t.partitions) for name, t in metadata.topics.items() if t.error is None}
        if topics is None:
            return found
        missing = [t for t in topics if t not in found]
        if missing and not missing_ok:
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


def parse_offsets_option(value: str | None, default: int) -> Offsets | int:
    """An offsets option: the EARLIEST/LATEST sentinel or a {topic: {partition: offset}} mapping."""
    if value is None:
        return default
    text = value.strip().lower()
    if text == "earliest":
        return EARLIEST
    if text == "latest":
        return LATEST
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as error:
        raise KafkaSourceError(f"offsets must be earliest, latest or JSON: {error}") from None
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise KafkaSourceError('offsets JSON must look like {"topic": {"0": 12}}')
    return {topic: {str(p): int(o) for p, o in parts.items()} for topic, parts in parsed.items()}


def resolve_offsets(
    client: BrokerClient, layout: dict[str, list[int]], spec: Offsets | int, fallback: int
) -> Offsets:
    """Concrete offsets for every partition of ``layout``: sentinels become watermarks.

    Partitions that a JSON spec does not mention take ``fallback`` (EARLIEST or LATEST). Offsets past
    the log end are clamped to it, offsets before the log start are raised to it.
    """
    resolved: Offsets = {}
    for topic, partitions in layout.items():
        resolved[topic] = {}
        for partition in partitions:
            wanted = spec if isinstance(spec, int) else spec.get(topic, {}).get(str(partition), fallback)
            low, high = client.watermarks(topic, partition)
            if wanted == EARLIEST:
                offset = low
            elif wanted == LATEST:
                offset = high
            else:
                offset = min(max(wanted, low), high)
            resolved[topic][str(partition)] = offset
    return resolved


def offset_ranges(start: Offsets, end: Offsets) -> list[OffsetRange]:
    """One range per partition with records between ``start`` and ``end``; new partitions start at 0."""
    ranges = []
    for topic in sorted(end):
        for partition, stop in sorted(end[topic].items(), key=lambda item: int(item[0])):
            begin = start.get(topic, {}).get(partition, 0)
            if stop > begin:
                ranges.append(OffsetRange(topic, int(partition), begin, stop))
    return ranges


def read_range(config: Mapping[str, str], offset_range: OffsetRange, poll_timeout_ms: int) -> Iterator[Any]:
    """Records [start, end) of one partition as Arrow batches in RECORD_SCHEMA.

    Compacted topics and transaction markers leave holes in the offsets, so reading stops at the
    first record at or past ``end`` or at the partition end, not after a count of records.
    """
    import pyarrow as pa
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    schema = pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("timestampType", pa.int32()),
        ]
    )
    consumer = Consumer(
        {
            "group.id": "burrowpy-spark",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **config,
        }
    )
    try:
        consumer.assign([TopicPartition(offset_range.topic, offset_range.partition, offset_range.start)])
        columns: dict[str, list] = {name: [] for name in schema.names}
        position = offset_range.start
        deadline = time.monotonic() + poll_timeout_ms / 1000
        while position < offset_range.end:
            messages = consumer.consume(num_messages=ARROW_BATCH_ROWS, timeout=0.5)
            if not messages:
                if time.monotonic() > deadline:
                    raise KafkaSourceError(
                        f"no records from {offset_range.topic}/{offset_range.partition} at offset {position} "
                        f"within {poll_timeout_ms} ms (expected up to {offset_range.end})"
                    )
                continue
            deadline = time.monotonic() + poll_timeout_ms / 1000
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        position = offset_range.end
                        break
                    raise KafkaSourceError(f"{offset_range.topic}/{offset_range.partition}: {error}")
                offset = message.offset()
                if offset >= offset_range.end:
                    position = offset_range.end
                    break
                timestamp_type, timestamp_ms = message.timestamp()
                columns["key"].append(message.key())
                columns["value"].append(message.value())
                columns["topic"].append(offset_range.topic)
                columns["partition"].append(offset_range.partition)
                columns["offset"].append(offset)
                columns["timestamp"].append(timestamp_ms * 1000 if timestamp_ms >= 0 else None)
                columns["timestampType"].append(timestamp_type - 1 if timestamp_type > 0 else -1)
                position = offset + 1
            if len(columns["offset"]) >= ARROW_BATCH_ROWS or (
                position >= offset_range.end and columns["offset"]
            ):
                yield pa.RecordBatch.from_pydict(columns, schema=schema)
                columns = {name: [] for name in schema.names}
    finally:
        consumer.close()


class KafkaTopicDataSource(DataSource):
    """``spark.read.format("burrowpy-kafka")``: records of Kafka topics, batch or streaming."""

    @classmethod
    def name(cls) -> str:
        return "burrowpy-kafka"

    def schema(self) -> str:
        return RECORD_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return KafkaBatchReader(self.options)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return KafkaStreamReader(self.options)


class _KafkaReaderBase:
    """Options shared by the batch and stream readers; the broker client lives only on the driver."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.config = client_config(options)
        self.topics = parse_topics(options)
        if not self.topics:
            raise KafkaSourceError("option subscribe (comma-separated topics) is required")
        self.poll_timeout_ms = int(options.get("pollTimeoutMs", DEFAULT_POLL_TIMEOUT_MS))
        self._client: BrokerClient | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None  # a live librdkafka handle cannot travel to executors
        return state

    @property
    def client(self) -> BrokerClient:
        if self._client is None:
            self._client = BrokerClient(self.config, self.poll_timeout_ms / 1000)
        return self._client

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, OffsetRange):
            raise TypeError(f"expected an OffsetRange, got {partition!r}")
        return read_range(self.config, partition, self.poll_timeout_ms)


class KafkaBatchReader(_KafkaReaderBase, DataSourceReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options)
        self.starting = parse_offsets_option(options.get("startingOffsets"), EARLIEST)
        self.ending = parse_offsets_option(options.get("endingOffsets"), LATEST)

    def partitions(self) -> list[OffsetRange]:
        try:
            layout = self.client.partitions(self.topics)
            start = resolve_offsets(self.client, layout, self.starting, EARLIEST)
            end = resolve_offsets(self.client, layout, self.ending, LATEST)
        finally:
            self.client.close()
            self._client = None
        return offset_ranges(start, end)


class KafkaStreamReader(_KafkaReaderBase, DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options)
        self.starting = parse_offsets_option(options.get("startingOffsets"), LATEST)
        max_offsets = options.get("maxOffsetsPerTrigger")
        self.max_offsets_per_trigger = int(max_offsets) if max_offsets else None

    def initialOffset(self) -> Offsets:
        # A stream may start before its topics exist (``__consumer_offsets`` appears with the first
        # group); their partitions are picked up by latestOffset and read from offset 0.
        layout = self.client.partitions(self.topics, missing_ok=True)
        return resolve_offsets(self.client, layout, self.starting, LATEST)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_offsets_per_trigger:
            return ReadMaxRows(self.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        latest = resolve_offsets(
            self.client, self.client.partitions(self.topics, missing_ok=True), LATEST, LATEST
        )
        if isinstance(limit, ReadMaxRows):
            return limit_offsets(start, latest, limit.max_rows)
        return latest

    def partitions(self, start: Offsets, end: Offsets) -> list[OffsetRange]:
        return offset_ranges(start, end)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def limit_offsets(start: Offsets, latest: Offsets, max_records: int) -> Offsets:
    """Advance at most ``max_records`` past ``start`` in total, sharing the budget evenly between partitions."""
    pending = {
        (t, p): stop - start.get(t, {}).get(p, 0) for t, parts in latest.items() for p, stop in parts.items()
    }
    grant = {key: 0 for key in pending}
    budget = max_records
    waiting = sorted(key for key, count in pending.items() if count > 0)
    while budget > 0 and waiting:
        share = max(1, budget // len(waiting))
        still_waiting = []
        for key in waiting:
            take = min(share, pending[key] - grant[key], budget)
            grant[key] += take
            budget -= take
            if grant[key] < pending[key]:
                still_waiting.append(key)
            if budget == 0:
                break
        waiting = still_waiting
    return {t: {p: start.get(t, {}).get(p, 0) + grant[(t, p)] for p in parts} for t, parts in latest.items()}


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
