"""Share-partitions' in-flight records, read from the brokers' JMX through the Prometheus JMX exporter.

Kafka 4.x's admin APIs give a share-partition's start offset and lag, not how many of its records are in
flight (acquired by a share consumer and not yet acknowledged): only the partition leader's JMX gauge
``kafka.server:type=SharePartitionMetrics,name=InFlightMessageCount`` (KIP-1103, tagged group, topic and
partition) has it. Operators get JMX out of Kafka with the Prometheus JMX exporter java agent; the rules of
``config/kafka-share-jmx-exporter.yml`` export the gauge as :data:`IN_FLIGHT_METRIC` with those three labels.
A cluster's ``broker-metrics`` key lists the exporters' endpoints, and every share-group reading scrapes them
all side by side. An endpoint that fails is logged when it starts failing and when it answers again; while it
fails, share-partitions no other endpoint reports have an unknown count (it may lead them).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from burrowpy.evaluator.share import InFlightCounts

IN_FLIGHT_METRIC = "kafka_server_share_partition_in_flight_messages"
_JMX_ESCAPES = {"n": "\n"}


def jmx_unquote(value: str) -> str:
    """A name as Kafka wrote it into an MBean name: one with a character JMX reserves (``,=:*?"`` or a newline)
    is quoted there (``ObjectName.quote``), and the exporter passes the quoted form on as the label."""
    if len(value) < 2 or not value.startswith('"') or not value.endswith('"'):
        return value
    out, escaped = [], False
    for char in value[1:-1]:
        if escaped:
            out.append(_JMX_ESCAPES.get(char, char))
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            out.append(char)
    return "".join(out)


def parse_in_flight(text: str) -> dict[tuple[str, str, int], int]:
    """The in-flight count per (group, topic, partition) in one exporter's Prometheus text. Raises ValueError
    on text that is not the Prometheus format or a sample of the metric without its three labels."""
    counts: dict[tuple[str, str, int], int] = {}
    for family in text_string_to_metric_families(text):
        if family.name != IN_FLIGHT_METRIC:
            continue
        for sample in family.samples:
            labels = sample.labels
            try:
                key = (jmx_unquote(labels["group"]), jmx_unquote(labels["topic"]), int(labels["partition"]))
            except (KeyError, ValueError):
                raise ValueError(f"{IN_FLIGHT_METRIC} sample without group, topic and partition labels: "
                                 f"{labels}") from None
            if not math.isfinite(sample.value) or sample.value < 0:
                raise ValueError(f"{IN_FLIGHT_METRIC}{labels} is {sample.value}, not a count")
            # Only a partition's leader holds acquired records; two endpoints give one partition only while its
            # leadership moves, when both may count the same records: the larger is the truer figure.
            counts[key] = max(counts.get(key, 0), int(sample.value))
    return counts


class BrokerMetricsScraper:
    """Scrapes the brokers' exporter endpoints for share-partitions' in-flight counts."""

    def __init__(self, urls: list[str], timeout: aiohttp.ClientTimeout, log: Any) -> None:
        self.urls = urls
        self._timeout = timeout
        self._log = log
        self._session: aiohttp.ClientSession | None = None
        self._failing: set[str] = set()  # endpoints whose failure was logged and that have not answered since

    async def in_flight(self) -> InFlightCounts:
        """One scrape of every endpoint; never raises (a failing endpoint makes the counts incomplete)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        results = await asyncio.gather(*(self._scrape(url) for url in self.urls))
        counts: dict[tuple[str, str, int], int] = {}
        for result in results:
            for key, value in (result or {}).items():
                counts[key] = max(counts.get(key, 0), value)
        return InFlightCounts(counts, complete=all(result is not None for result in results))

    async def _scrape(self, url: str) -> dict[tuple[str, str, int], int] | None:
        try:
            async with self._session.get(url) as response:  # type: ignore[union-attr]
                response.raise_for_status()
                counts = parse_in_flight(await response.text())
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            if url not in self._failing:
                self._failing.add(url)
                self._log.warning("scraping broker metrics failed; share-partitions' in-flight counts unknown "
                                  "until it answers", url=url, error=repr(exc))
            return None
        if url in self._failing:
            self._failing.discard(url)
            self._log.info("broker metrics answer again", url=url)
        return counts

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
