"""``/metrics``: Burrow's Prometheus gauges, computed at scrape time, plus the daemon's own registry.

For every group of every cluster the evaluator is asked for the full status (showall), and NOTFOUND groups
are skipped, exactly as Burrow does (spec 6.4). Nothing is kept between scrapes, so a deleted or expired
group or topic simply stops appearing: Burrow needs explicit series deletion for that and misses cases.
The context's registry (process metrics, notifier counters) is appended to the same response.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from burrowpy.context import ApplicationContext
from burrowpy.evaluator.share import rule_settings
from burrowpy.protocol import (
    ConsumerGroupStatus,
    FetchClusters,
    FetchConsumers,
    FetchTopic,
    FetchTopics,
    PartitionStatus,
    Status,
)

GROUP_LABELS = ("cluster", "consumer_group")
PARTITION_LABELS = ("cluster", "consumer_group", "topic", "partition")


def _in_order(partitions: Iterable[PartitionStatus]) -> list[PartitionStatus]:
    return sorted(partitions, key=lambda partition: (partition.topic, partition.partition))


class _GroupFamilies:
    """What consumer groups and share groups both export, each kind under its own names (``(name, help)``):
    the group's status, and per partition its lag, status and position (a consumer group's newest commit, a
    share group's start offset). With ``full_window_only`` a partition's status and position wait for a full
    window, as Burrow's do; otherwise the status is always there and the position once there is one."""

    def __init__(self, group_label: str, *, full_window_only: bool, status: tuple[str, str],
                 partition_lag: tuple[str, str], partition_status: tuple[str, str],
                 position: tuple[str, str]) -> None:
        group_labels = ("cluster", group_label)
        partition_labels = (*group_labels, "topic", "partition")
        self.full_window_only = full_window_only
        self.status = GaugeMetricFamily(*status, labels=group_labels)
        self.partition_lag = GaugeMetricFamily(*partition_lag, labels=partition_labels)
        self.partition_status = GaugeMetricFamily(*partition_status, labels=partition_labels)
        self.position = GaugeMetricFamily(*position, labels=partition_labels)

    def every(self) -> list[Metric]:
        return [self.status, self.partition_status, self.position, self.partition_lag]

    def add(self, cluster: str, status: ConsumerGroupStatus) -> None:
        self.status.add_metric([cluster, status.group], int(status.status))
        for partition in _in_order(status.partitions):
            labels = [cluster, status.group, partition.topic, str(partition.partition)]
            self.partition_lag.add_metric(labels, partition.current_lag)
            if self.full_window_only and (partition.complete != 1.0 or partition.end is None):
                continue
            self.partition_status.add_metric(labels, int(partition.status))
            if partition.end is not None:
                self.position.add_metric(labels, partition.end.offset)


class _BurrowGauges:
    def __init__(self) -> None:
        self.lag_total = GaugeMetricFamily(
            "burrow_kafka_consumer_lag_total", "Sum of the current lag of every partition of the group",
            labels=GROUP_LABELS)
        self.groups = _GroupFamilies(
            "consumer_group", full_window_only=True,
            status=("burrow_kafka_consumer_status",
                    "Group status: 0 NOTFOUND, 1 OK, 2 WARN, 3 ERR (the worst of its partitions)"),
            partition_lag=("burrow_kafka_consumer_partition_lag",
                           "Messages the group is behind on the partition (newest broker offset minus newest commit)"),
            partition_status=("burrow_kafka_topic_partition_status",
                              "Partition status: 1 OK, 2 WARN, 4 STOP, 5 STALL, 6 REWIND "
                              "(partitions with a full window only)"),
            position=("burrow_kafka_consumer_current_offset",
                      "Newest committed offset stored for the partition (partitions with a full window only)"))
        self.topic_offset = GaugeMetricFamily(
            "burrow_kafka_topic_partition_offset", "Newest broker offset of the partition",
            labels=("cluster", "topic", "partition"))
        # Not Burrow's: lag in seconds (burrowpy.evaluator.timelag); partitions without a figure are left out.
        self.partition_lag_seconds = GaugeMetricFamily(
            "burrow_kafka_consumer_partition_lag_seconds",
            "Age in seconds of the oldest record of the partition the group has not consumed (0 when caught up)",
            labels=PARTITION_LABELS)
        self.max_lag_seconds = GaugeMetricFamily(
            "burrow_kafka_consumer_max_lag_seconds",
            "The largest partition lag in seconds of the group", labels=GROUP_LABELS)
        # Not Burrow's: the catch-up forecast (burrowpy.evaluator.forecast), each only while it applies.
        self.catch_up_seconds = GaugeMetricFamily(
            "burrow_kafka_consumer_group_catch_up_seconds",
            "Seconds until the group has consumed its lag at its window's consume and produce rates "
            "(its slowest partition's; 0 when caught up; absent while falling behind, keeping pace or unknown)",
            labels=GROUP_LABELS)
        self.falling_behind = GaugeMetricFamily(
            "burrow_kafka_consumer_group_falling_behind_records_per_second",
            "Records per second the group's lag grows by on the partitions it falls behind on "
            "(absent unless falling behind)", labels=GROUP_LABELS)

    def families(self) -> list[Metric]:
        """Families with at least one series, by name (as Go's client gathers them)."""
        every = [self.lag_total, *self.groups.every(), self.topic_offset, self.partition_lag_seconds,
                 self.max_lag_seconds, self.catch_up_seconds, self.falling_behind]
        return sorted((family for family in every if family.samples), key=lambda family: family.name)


async def _fetch(ctx: ApplicationContext, request_type: type, **fields: object) -> Any:
    return await ctx.fetch(request_type(**fields, reply=ctx.new_reply()))


async def burrow_metric_families(ctx: ApplicationContext) -> list[Metric]:
    gauges = _BurrowGauges()
    for cluster in sorted(await _fetch(ctx, FetchClusters) or []):
        groups = sorted(await _fetch(ctx, FetchConsumers, cluster=cluster) or [])
        statuses = await asyncio.gather(*(ctx.evaluator.evaluate(cluster, group, True) for group in groups))
        for group, status in zip(groups, statuses, strict=True):
            if status.status == Status.NOTFOUND:
                continue
            gauges.lag_total.add_metric([cluster, group], status.totallag)
            gauges.groups.add(cluster, status)
            if status.max_lag_seconds is not None:
                gauges.max_lag_seconds.add_metric([cluster, group], status.max_lag_seconds)
            if status.catch_up_seconds is not None:
                gauges.catch_up_seconds.add_metric([cluster, group], status.catch_up_seconds)
            if status.falling_behind_per_second is not None:
                gauges.falling_behind.add_metric([cluster, group], status.falling_behind_per_second)
            for partition in _in_order(status.partitions):
                if partition.lag_seconds is not None:
                    gauges.partition_lag_seconds.add_metric([cluster, group, partition.topic,
                                                             str(partition.partition)], partition.lag_seconds)
        topics = sorted(await _fetch(ctx, FetchTopics, cluster=cluster) or [])
        offsets = await asyncio.gather(*(_fetch(ctx, FetchTopic, cluster=cluster, topic=topic) for topic in topics))
        for topic, topic_offsets in zip(topics, offsets, strict=True):
            for index, offset in enumerate(topic_offsets or []):
                gauges.topic_offset.add_metric([cluster, topic, str(index)], offset)
    return gauges.families()


def share_group_metric_families(ctx: ApplicationContext) -> list[Metric]:
    """Not Burrow's: the share groups of every cluster module that reads them (burrowpy.evaluator.share)."""
    families = _GroupFamilies(
        "share_group", full_window_only=False,
        status=("burrow_kafka_share_group_status",
                "Share group status: 1 OK, 2 WARN, 3 ERR (the worst of its partitions)"),
        partition_lag=("burrow_kafka_share_group_partition_lag", "Records of the share-partition not yet "
                       "acknowledged by the share group (Kafka's DescribeShareGroupOffsets lag)"),
        partition_status=("burrow_kafka_share_group_partition_status", "Share-partition status from the window "
                          "rules on its start offset: 1 OK, 2 WARN, 4 STOP, 5 STALL, 6 REWIND"),
        position=("burrow_kafka_share_group_partition_start_offset",
                  "The share-partition start offset: every record below it is acknowledged"))
    in_flight = GaugeMetricFamily(
        "burrow_kafka_share_group_partition_in_flight", "Records of the share-partition acquired by a share "
        "consumer and not yet acknowledged (the brokers' JMX through the Prometheus JMX exporter; absent while "
        "unknown)", labels=("cluster", "share_group", "topic", "partition"))
    now = ctx.clock.time()
    for cluster, module in sorted(ctx.modules.get("cluster", {}).items()):
        windows = getattr(module, "share_groups", None)
        if windows is None:
            continue
        for group in windows.groups():
            evaluated = windows.evaluate(group, now, *rule_settings(ctx.evaluator))
            if evaluated is None:
                continue
            families.add(cluster, evaluated.status)
            for partition in _in_order(evaluated.status.partitions):
                if partition.in_flight is not None:
                    in_flight.add_metric([cluster, group, partition.topic, str(partition.partition)],
                                         partition.in_flight)
    return sorted((family for family in [*families.every(), in_flight] if family.samples),
                  key=lambda family: family.name)


PROBE_LABELS = ("cluster", "broker")


def probe_metric_families(ctx: ApplicationContext) -> list[Metric]:
    """Not Burrow's: the end-to-end probes of the clusters that run them (burrowpy.coordinators.probe)."""
    produce = HistogramMetricFamily(
        "burrow_kafka_probe_produce_seconds", "Time from sending a probe record to its acknowledgement (acks=all), "
        "by the broker leading its partition", labels=PROBE_LABELS)
    end_to_end = HistogramMetricFamily(
        "burrow_kafka_probe_end_to_end_seconds", "Time from sending a probe record to the monitor's consumer "
        "reading it, by the broker leading its partition", labels=PROBE_LABELS)
    commit = HistogramMetricFamily(
        "burrow_kafka_probe_commit_seconds", "Time an offset commit of the probe group took, by its coordinator",
        labels=PROBE_LABELS)
    attempts = CounterMetricFamily(
        "burrow_kafka_probe_attempts", "Probe records sent, by the broker leading their partition",
        labels=PROBE_LABELS)
    failures = CounterMetricFamily(
        "burrow_kafka_probe_failures", "Probe records not produced and read back within the probe timeout",
        labels=PROBE_LABELS)
    commit_failures = CounterMetricFamily(
        "burrow_kafka_probe_commit_failures", "Offset commits of the probe group that failed or timed out, "
        "by its coordinator", labels=PROBE_LABELS)
    ratio = GaugeMetricFamily(
        "burrow_kafka_probe_success_ratio", "Share of the probes of the last probe-window seconds that "
        "succeeded (absent before the first outcome)", labels=PROBE_LABELS)
    now = ctx.clock.time()
    for cluster, module in sorted(ctx.modules.get("cluster", {}).items()):
        running = getattr(module, "probe", None)
        if running is None:
            continue
        for broker, figures in sorted(running.brokers.items()):
            labels = [cluster, str(broker)]
            for family, histogram in ((produce, figures.produce), (end_to_end, figures.end_to_end),
                                      (commit, figures.commit)):
                if histogram.count:
                    family.add_metric(labels, histogram.buckets(), histogram.total)
            attempts.add_metric(labels, figures.attempts)
            failures.add_metric(labels, figures.failures)
            commit_failures.add_metric(labels, figures.commit_failures)
            share = figures.window.ratio(now)
            if share is not None:
                ratio.add_metric(labels, share)
    every = [produce, end_to_end, commit, attempts, failures, commit_failures, ratio]
    return sorted((family for family in every if family.samples), key=lambda family: family.name)


TOPIC_PARTITION_LABELS = ("cluster", "topic", "partition")


async def topic_health_metric_families(ctx: ApplicationContext) -> list[Metric]:
    """Not Burrow's: topic and partition health of the clusters whose modules read it
    (burrowpy.coordinators.topic_health). The high watermark is Burrow's burrow_kafka_topic_partition_offset."""
    def partition_gauge(name: str, text: str) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, text, labels=TOPIC_PARTITION_LABELS)

    def cluster_gauge(name: str, text: str) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, text, labels=("cluster",))

    low = partition_gauge("burrow_kafka_topic_partition_low_watermark", "Earliest offset still in the partition's log")
    size = partition_gauge("burrow_kafka_topic_partition_size_bytes",
                           "Size on disk of the partition's log on its leader (DescribeLogDirs)")
    replicas = partition_gauge("burrow_kafka_topic_partition_replicas", "Replicas the partition is assigned to")
    in_sync = partition_gauge("burrow_kafka_topic_partition_in_sync_replicas", "Replicas in the partition's ISR")
    leader = partition_gauge("burrow_kafka_topic_partition_leader", "Broker id of the partition's leader (-1: none)")
    under_replicated = partition_gauge("burrow_kafka_topic_partition_under_replicated",
                                       "1 while the partition's ISR is smaller than its replica list")
    min_isr = GaugeMetricFamily("burrow_kafka_topic_min_insync_replicas", "The topic's min.insync.replicas",
                                labels=("cluster", "topic"))
    rate = GaugeMetricFamily(
        "burrow_kafka_topic_produce_records_per_second", "Records per second written to the topic over the "
        "storage window (absent until every partition has two offset samples)", labels=("cluster", "topic"))
    counts = {
        "under_replicated": cluster_gauge("burrow_kafka_cluster_under_replicated_partitions",
                                          "Partitions whose ISR is smaller than their replica list"),
        "under_min_isr": cluster_gauge("burrow_kafka_cluster_under_min_isr_partitions", "Partitions without a "
                                       "leader or with fewer in-sync replicas than their topic's min.insync.replicas"),
        "offline": cluster_gauge("burrow_kafka_cluster_offline_partitions",
                                 "Partitions without a leader on a live broker"),
    }
    brokers = cluster_gauge("burrow_kafka_cluster_brokers", "Live brokers in the cluster's metadata")
    read_at = cluster_gauge("burrow_kafka_cluster_health_read_timestamp_seconds",
                            "When the topic health figures were last read")
    for cluster, module in sorted(ctx.modules.get("cluster", {}).items()):
        health = getattr(module, "health", None)
        if health is None:
            continue
        for key, count in health.counts().items():
            counts[key].add_metric([cluster], count)
        brokers.add_metric([cluster], len(health.live_brokers))
        read_at.add_metric([cluster], health.read_at_ms / 1000)
        topics = sorted(health.topics)
        rates = await asyncio.gather(*(module.produce_rates(topic) for topic in topics))
        for topic, topic_rates in zip(topics, rates, strict=True):
            partitions = health.topics[topic]
            if topic in health.min_isr:
                min_isr.add_metric([cluster, topic], health.min_isr[topic])
            if partitions and len(topic_rates) >= len(partitions) and None not in topic_rates:
                rate.add_metric([cluster, topic], sum(topic_rates))
            for index, partition in enumerate(partitions):
                labels = [cluster, topic, str(index)]
                if partition.low_watermark is not None:
                    low.add_metric(labels, partition.low_watermark)
                if partition.size_bytes is not None:
                    size.add_metric(labels, partition.size_bytes)
                replicas.add_metric(labels, len(partition.replicas))
                in_sync.add_metric(labels, len(partition.isr))
                leader.add_metric(labels, partition.leader)
                under_replicated.add_metric(labels, int(partition.under_replicated()))
    every = [low, size, replicas, in_sync, leader, under_replicated, min_isr, rate, *counts.values(), brokers,
             read_at]
    return sorted((family for family in every if family.samples), key=lambda family: family.name)


class _Snapshot:
    """One scrape: the computed families followed by everything in the context's registry."""

    def __init__(self, families: Iterable[Metric], registry: CollectorRegistry) -> None:
        self._families = families
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        yield from self._families
        yield from self._registry.collect()


async def render_metrics(ctx: ApplicationContext) -> tuple[bytes, str]:
    """The Prometheus text exposition of one scrape, and its content type."""
    families = sorted([*await burrow_metric_families(ctx), *probe_metric_families(ctx),
                       *share_group_metric_families(ctx), *await topic_health_metric_families(ctx)],
                      key=lambda family: family.name)
    return generate_latest(_Snapshot(families, ctx.registry)), CONTENT_TYPE_PLAIN_0_0_4
