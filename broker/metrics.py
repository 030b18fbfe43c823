"""The broker's Prometheus metrics, served over HTTP at ``metrics.listen`` (off unless set).

Names are those the Prometheus JMX exporter's usual Kafka rules give Kafka's own MBeans (lower-cased,
``kafka_<domain>_<type>_<name>``, ``_total`` for the ``...PerSec`` meters' counts), so that the dashboards
and alerts written for Kafka read this broker too; what Kafka has no MBean for is named ``burrowpy_broker_*``.

The produce, fetch and request paths only add to plain integers here (no locks, no label objects: the event
loop is the only writer); everything else is read from the broker's state when a scrape comes, as the
monitor's ``/metrics`` does, so nothing is kept for topics and partitions that are gone.
"""

from __future__ import annotations

import bisect
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.samples import Sample

from broker.cluster.metadata import NO_LEADER
from broker.cluster.view import ClusterView
from broker.errors import ErrorCode
from broker.process_metrics import register_process_metrics
from broker.protocol.api import ApiKey
from broker.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotas,
    QuotaWindow,
)

if TYPE_CHECKING:
    from broker.cluster.node import ClusterNode
    from broker.cluster.replication import ReplicaManager
    from broker.log.manager import LogManager
    from broker.log.partition import PartitionLog

log = structlog.get_logger("broker.metrics")

# Kafka's request names (RequestMetrics' request= tag): the API's name in camel case
REQUEST_NAMES = {int(key): "".join(word.capitalize() for word in key.name.split("_")) for key in ApiKey}
_FETCH = int(ApiKey.FETCH)
# upper bounds of the request-time histogram's buckets, in milliseconds (Kafka's TotalTimeMs is in ms)
LATENCY_BUCKETS_MS = (1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0,
                      30000.0)


# Errors Kafka's ReplicaManager does not count as a failed produce or fetch of a partition (the client's view of
# the cluster is behind, or the disk failed): its FailedProduceRequests and FailedFetchRequests leave these out.
_NOT_FAILED_PRODUCES = frozenset({ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                  ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                                  ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR})
_NOT_FAILED_FETCHES = frozenset({ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                 ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.FENCED_LEADER_EPOCH,
                                 ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
                                 ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.INCONSISTENT_TOPIC_ID})


class Listening(Protocol):
    """A listener as the connection count sees it (broker.server.KafkaServer, a sibling not imported here)."""

    @property
    def listener(self) -> str: ...
    @property
    def connection_count(self) -> int: ...


class MeteredBroker(Protocol):
    """The broker state a scrape reads: the broker hands itself over as this, so that the metrics never import
    the broker (issue 32: no import cycle)."""

    @property
    def node_id(self) -> int: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def logs(self) -> LogManager | None: ...
    @property
    def servers(self) -> Sequence[Listening]: ...
    @property
    def failed_log_dirs(self) -> set[str]: ...
    @property
    def storage_errors(self) -> Counter[str]: ...
    @property
    def cluster_view(self) -> ClusterView: ...
    @property
    def cluster(self) -> ClusterNode | None: ...
    @property
    def replica_manager(self) -> ReplicaManager | None: ...
    @property
    def client_quotas(self) -> ClientQuotas: ...

    def quota_window(self) -> QuotaWindow: ...


class _TopicCounts:
    __slots__ = ("messages_in", "bytes_in", "bytes_out", "produce_requests", "failed_produce_requests",
                 "fetch_requests", "failed_fetch_requests")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.produce_requests = 0
        self.failed_produce_requests = 0
        self.fetch_requests = 0
        self.failed_fetch_requests = 0


class _RequestTimes:
    """One API's request times: a count per bucket (not cumulative: one increment per request) and their sum."""

    __slots__ = ("buckets", "sum_ms")

    def __init__(self) -> None:
        self.buckets = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        self.sum_ms = 0.0


class BrokerMetrics:
    """What the broker counts as it works; :meth:`collect` turns it and the broker's state into families."""

    def __init__(self, broker: MeteredBroker) -> None:
        self.broker = broker
        self._topics: dict[str, _TopicCounts] = {}
        # what deleted topics had counted: the all-topics series keeps it, a counter never goes down
        self._forgotten = _TopicCounts()
        self._requests: dict[tuple[str, int], int] = {}  # (request name, version) -> requests handled
        self._times: dict[str, _RequestTimes] = {}
        self.replication_bytes_out = 0
        self.replication_bytes_in = 0
        # of those, the bytes of partitions a reassignment is moving (Kafka's ReassignmentBytesOut/InPerSec)
        self.reassignment_bytes_out = 0
        self.reassignment_bytes_in = 0
        self.requests_in_flight = 0
        self.isr_shrinks = 0
        self.isr_expands = 0

    # --- the hot paths --------------------------------------------------------------------------------------

    def _topic(self, topic: str) -> _TopicCounts:
        counts = self._topics.get(topic)
        if counts is None:
            counts = self._topics[topic] = _TopicCounts()
        return counts

    def appended(self, topic: str, size: int, messages: int) -> None:
        """A batch this broker appended as the partition's leader (Kafka's BytesIn and MessagesIn)."""
        counts = self._topic(topic)
        counts.messages_in += messages
        counts.bytes_in += size

    def fetched(self, topic: str, size: int) -> None:
        """Record bytes a consumer's Fetch answer carries (Kafka's BytesOut; followers' are counted apart)."""
        self._topic(topic).bytes_out += size

    def produce_answered(self, topic: str, error: int) -> None:
        """A partition of a Produce this broker tried to append to, and how that went (Kafka's
        TotalProduceRequests and FailedProduceRequests, counted per partition as Kafka's are)."""
        if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return  # Kafka never gets that far with a topic it does not have (nor keeps a series for its name)
        counts = self._topic(topic)
        counts.produce_requests += 1
        if error not in _NOT_FAILED_PRODUCES:
            counts.failed_produce_requests += 1

    def fetch_answered(self, topic: str, error: int) -> None:
        """A partition of a Fetch answered, consumer's or follower's (TotalFetchRequests, FailedFetchRequests)."""
        if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return
        counts = self._topic(topic)
        counts.fetch_requests += 1
        if error not in _NOT_FAILED_FETCHES:
            counts.failed_fetch_requests += 1

    def request_handled(self, api_key: int, api_version: int, body: dict[str, Any], seconds: float) -> None:
        # Kafka tells a consumer's Fetch from a follower's (FetchConsumer, FetchFollower), and has no Fetch
        if api_key == _FETCH:
            name = "FetchFollower" if body["replica_id"] >= 0 else "FetchConsumer"
        else:
            name = REQUEST_NAMES.get(api_key) or str(api_key)
        key = (name, api_version)
        self._requests[key] = self._requests.get(key, 0) + 1
        times = self._times.get(name)
        if times is None:
            times = self._times[name] = _RequestTimes()
        milliseconds = seconds * 1000
        times.buckets[bisect.bisect_left(LATENCY_BUCKETS_MS, milliseconds)] += 1
        times.sum_ms += milliseconds

    def isr_changed(self, before: tuple[int, ...], after: tuple[int, ...]) -> None:
        """The ISR of a partition this broker leads, before and after a committed change (the same when nothing
        changed): Kafka's IsrShrinks and IsrExpands. Counted whoever proposed the change, this leader or the
        controller fencing a broker, since either way a replica left or joined the ISR."""
        if before == after:
            return
        if set(before) - set(after):
            self.isr_shrinks += 1
        if set(after) - set(before):
            self.isr_expands += 1

    def forget_topic(self, topic: str) -> None:
        counts = self._topics.pop(topic, None)
        if counts is not None:
            for attribute in _TopicCounts.__slots__:
                setattr(self._forgotten, attribute, getattr(self._forgotten, attribute) + getattr(counts, attribute))

    # --- a scrape ------------------------------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        yield from self._topic_families()
        yield from self._request_families()
        yield from self._replica_families()
        yield from self._log_families()
        yield from self._raft_families()
        yield from self._quota_families()

    def _local_logs(self) -> Iterator[tuple[str, int, PartitionLog]]:
        logs = self.broker.logs
        if logs is None:
            return
        for name, topic in list(logs.topics.items()):
            for index, plog in enumerate(list(topic.partitions)):
                yield name, index, plog

    def _topic_families(self) -> Iterator[Metric]:
        # Kafka's meters exist per topic and for all topics at once (the series without a topic label)
        for name, attribute, help_text in (
                ("messagesin", "messages_in", "Records appended as leader"),
                ("bytesin", "bytes_in", "Record batch bytes appended as leader"),
                ("bytesout", "bytes_out", "Record bytes sent to consumers"),
                ("totalproducerequests", "produce_requests", "Partitions of Produce requests appended to or refused"),
                ("failedproducerequests", "failed_produce_requests",
                 "Partitions of Produce requests refused (not for a stale view of the cluster or a failed disk)"),
                ("totalfetchrequests", "fetch_requests", "Partitions of Fetch requests answered"),
                ("failedfetchrequests", "failed_fetch_requests",
                 "Partitions of Fetch requests failed (not for a stale view of the cluster, an offset out of range "
                 "or a failed disk)")):
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", help_text, labels=["topic"])
            total = getattr(self._forgotten, attribute)
            for topic in sorted(self._topics):
                value = getattr(self._topics[topic], attribute)
                total += value
                family.add_metric([topic], value)
            family.samples.append(Sample(family.name + "_total", {}, total))
            yield family
        yield CounterMetricFamily("kafka_server_brokertopicmetrics_replicationbytesout",
                                  "Record bytes sent to followers", value=self.replication_bytes_out)
        yield CounterMetricFamily("kafka_server_brokertopicmetrics_replicationbytesin",
                                  "Record bytes fetched from leaders", value=self.replication_bytes_in)
        yield CounterMetricFamily("kafka_server_brokertopicmetrics_reassignmentbytesout",
                                  "Record bytes sent to followers of partitions being reassigned",
                                  value=self.reassignment_bytes_out)
        yield CounterMetricFamily("kafka_server_brokertopicmetrics_reassignmentbytesin",
                                  "Record bytes fetched, as a replica a reassignment adds, from leaders",
                                  value=self.reassignment_bytes_in)

    def _request_families(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests handled",
                                       labels=["request", "version"])
        for (name, version), count in sorted(self._requests.items()):
            requests.add_metric([name, str(version)], count)
        yield requests
        times = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                      "Milliseconds handling a request took (decoded to answered, before encoding)",
                                      labels=["request"])
        for name, recorded in sorted(self._times.items()):
            cumulative, buckets = 0, []
            for bound, count in zip((*LATENCY_BUCKETS_MS, float("inf")), recorded.buckets, strict=True):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
            times.add_metric([name], buckets, recorded.sum_ms)
        yield times
        # not Kafka's RequestQueueSize: requests are handled as they are read, with no handler pool to queue for;
        # this counts those being handled, long polls and waits for the ISR or a group's join included
        yield GaugeMetricFamily("burrowpy_broker_requests_in_flight",
                                "Requests read and not answered yet (waiting ones included)",
                                value=self.requests_in_flight)
        connections = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                        "Open client and broker connections",
                                        labels=["listener", "networkprocessor"])
        for server in self.broker.servers:
            connections.add_metric([server.listener, "0"], server.connection_count)
        yield connections

    def _quota_families(self) -> Iterator[Metric]:
        """Kafka's per-client quota metrics, labelled with the tags of the rate a quota holds the client to (the
        user, the client id, or both, the other empty, as Kafka's default quota callback tags them); only clients
        held to a quota have them, as on Kafka."""
        families = {key: (GaugeMetricFamily(f"kafka_server_{kind}_{rate}", rate_help, labels=["user", "client_id"]),
                          GaugeMetricFamily(f"kafka_server_{kind}_throttle_time",
                                            f"Average throttle in ms of a {kind} request in the quota window",
                                            labels=["user", "client_id"]))
                    for key, kind, rate, rate_help in (
                        (PRODUCER_BYTE_RATE, "produce", "byte_rate", "Produce bytes a second"),
                        (CONSUMER_BYTE_RATE, "fetch", "byte_rate", "Fetch answer bytes a second"),
                        (REQUEST_PERCENTAGE, "request", "request_time",
                         "Percent of a thread's time spent on the client's requests"))}
        now_ms = int(time.monotonic() * 1000)  # the quotas' clock (broker.server records on it)
        for key, user, client_id, rate, throttle in self.broker.client_quotas.client_figures(
                now_ms, self.broker.quota_window()):
            if key in families:
                families[key][0].add_metric([user, client_id], rate)
                families[key][1].add_metric([user, client_id], throttle)
        for rate_family, throttle_family in families.values():
            yield rate_family
            yield throttle_family

    def _replica_families(self) -> Iterator[Metric]:
        broker = self.broker
        node = broker.node_id
        local = list(self._local_logs())
        offline_dirs = len(broker.failed_log_dirs)
        leaders = under_replicated = under_min_isr = at_min_isr = offline = partitions = topics = 0
        controller = broker.cluster_view.controller_id() == node
        if broker.cluster is None:
            leaders = len(local)
            partitions, topics = len(local), len(broker.logs.topics) if broker.logs is not None else 0
            # a single node is each partition's whole ISR
            under_min_isr = sum(1 for _, _, plog in local if plog.config.min_insync_replicas > 1)
            at_min_isr = sum(1 for _, _, plog in local if plog.config.min_insync_replicas == 1)
        else:
            metadata = broker.cluster.metadata
            topics = len(metadata.topics)
            for topic, index, state in metadata.partitions():
                partitions += 1
                if state.leader == NO_LEADER:
                    offline += 1
                if state.leader != node:
                    continue
                leaders += 1
                if len(state.isr) < len(state.replicas):
                    under_replicated += 1
                plog = broker.logs.get_log(topic, index) if broker.logs is not None else None
                if plog is not None and len(state.isr) < plog.config.min_insync_replicas:
                    under_min_isr += 1
                elif plog is not None and len(state.isr) == plog.config.min_insync_replicas:
                    at_min_isr += 1
        for name, help_text, value in (
                ("underreplicatedpartitions", "Partitions led here whose ISR lacks some of their replicas",
                 under_replicated),
                ("underminisrpartitioncount", "Partitions led here with fewer in sync than min.insync.replicas",
                 under_min_isr),
                ("atminisrpartitioncount", "Partitions led here with just min.insync.replicas in sync", at_min_isr),
                ("offlinereplicacount", "Replicas here in a log dir that fails writes", len(local) if offline_dirs
                 else 0),
                ("partitioncount", "Partitions with a replica here", len(local)),
                ("leadercount", "Partitions led here", leaders)):
            yield GaugeMetricFamily(f"kafka_server_replicamanager_{name}", help_text, value=value)
        replicas = broker.replica_manager
        max_lag = GaugeMetricFamily("kafka_server_replicafetchermanager_maxlag",
                                    "The largest replica lag (the leader's high watermark past this follower's next "
                                    "offset) of the partitions followed here", labels=["clientid"])
        max_lag.add_metric(["Replica"], max(replicas.follower_lags(), default=0) if replicas is not None else 0)
        yield max_lag
        if replicas is not None:
            # Kafka's replication quota sensors (kafka.server:type=LeaderReplication / FollowerReplication, byte-rate)
            now_ms = int(broker.clock() * 1000)
            for side, quota in (("leader", replicas.leader_quota), ("follower", replicas.follower_quota)):
                yield GaugeMetricFamily(f"kafka_server_{side}replication_byte_rate",
                                        f"Bytes a second of throttled replicas' replication, {side} side (what "
                                        f"{side}.replication.throttled.rate bounds)", value=quota.byte_rate(now_ms))
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks", "ISR shrinks of partitions led here",
                                  value=self.isr_shrinks)
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands", "ISR expansions of partitions led here",
                                  value=self.isr_expands)
        # as on Kafka, the controller's figures come from the active controller only (the others say 0), so
        # that a sum over the brokers is the cluster's
        for name, help_text, value in (
                ("activecontrollercount", "1 on the active controller", 1),
                ("offlinepartitionscount", "Partitions without a leader", offline),
                ("globalpartitioncount", "Partitions in the cluster", partitions),
                ("globaltopiccount", "Topics in the cluster", topics)):
            yield GaugeMetricFamily(f"kafka_controller_kafkacontroller_{name}", help_text,
                                    value=value if controller else 0)

    def _log_families(self) -> Iterator[Metric]:
        broker = self.broker
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's segments",
                                 labels=["topic", "partition"])
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "The partition's log end offset",
                                labels=["topic", "partition"])
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "The partition's log start offset",
                                  labels=["topic", "partition"])
        for topic, index, plog in self._local_logs():
            labels = [topic, str(index)]
            size.add_metric(labels, plog.size_bytes)
            end.add_metric(labels, plog.log_end_offset)
            start.add_metric(labels, plog.log_start_offset)
        yield from (size, end, start)
        yield GaugeMetricFamily("kafka_log_logmanager_offlinelogdirectorycount",
                                "Log dirs whose last write failed (full or failing disk), until one succeeds",
                                value=len(broker.failed_log_dirs))
        errors = CounterMetricFamily("burrowpy_broker_storage_errors",
                                     "Writes a log dir refused (answered KAFKA_STORAGE_ERROR)", labels=["logdir"])
        # the log dir's series exists from the start, at 0, so that increase() sees the first error
        counts = {broker.logs.data_dir: 0} if broker.logs is not None else {}
        counts.update(broker.storage_errors)
        for log_dir, count in sorted(counts.items()):
            errors.add_metric([log_dir], count)
        yield errors

    def _raft_families(self) -> Iterator[Metric]:
        cluster = self.broker.cluster
        if cluster is None:
            return
        progress = cluster.raft.progress()
        if progress is None:
            return
        for name, help_text, value in (
                ("current_leader", "Node id of the metadata quorum's leader (-1: none known)",
                 cluster.controller_id()),
                ("current_epoch", "The metadata quorum's term", progress.term),
                ("high_watermark", "Index of the last metadata entry the quorum committed", progress.commit_index)):
            yield GaugeMetricFamily(f"kafka_server_raft_metrics_{name}", help_text, value=value)
        yield GaugeMetricFamily("burrowpy_broker_raft_commit_lag",
                                "Metadata entries the leader committed that this broker has not applied yet",
                                value=progress.commit_lag)


class MetricsListenError(Exception):
    """metrics.listen names an address this process cannot listen on."""


class MetricsServer:
    """``GET /metrics`` on ``metrics.listen``: Prometheus' text format of :class:`BrokerMetrics` and the
    process's own figures (CPU, memory, descriptors, garbage collection), as the monitor serves them."""

    def __init__(self, metrics: BrokerMetrics, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(metrics)
        register_process_metrics(self.registry)
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._scrape)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        try:
            await site.start()
        except OSError as exc:
            await self.stop()
            raise MetricsListenError(f"metrics.listen: cannot listen on {self.host}:{self.port}: "
                                     f"{exc.strerror or exc}") from exc
        self.port = self._runner.addresses[0][1]
        log.info("metrics served", address=f"{self.host}:{self.port}", path="/metrics")

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _scrape(self, _request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})
