"""The broker's metrics as a scrape renders them: histogram buckets, ISR changes, a broker not started yet."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.errors import ErrorCode
from broker.metrics import BrokerMetrics
from broker.protocol.api import ApiKey


def scrape(metrics: BrokerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    text = generate_latest(registry).decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def idle_broker(tmp_path) -> Broker:
    return Broker(BrokerConfig.load(None, data_dir=str(tmp_path / "data")))


def test_request_times_fall_in_cumulative_buckets_whose_bound_is_inclusive(tmp_path):
    metrics = idle_broker(tmp_path).metrics
    for seconds in (0.0005, 0.001, 0.003, 40.0):
        metrics.request_handled(ApiKey.LIST_OFFSETS, 7, {}, seconds)
    samples = scrape(metrics)

    def bucket(le: str) -> float:
        return samples[("kafka_network_requestmetrics_totaltimems_bucket", (("le", le), ("request", "ListOffsets")))]

    assert [bucket(le) for le in ("1.0", "2.5", "5.0", "30000.0", "+Inf")] == [2, 2, 3, 3, 4]
    assert samples[("kafka_network_requestmetrics_totaltimems_count", (("request", "ListOffsets"),))] == 4
    assert abs(samples[("kafka_network_requestmetrics_totaltimems_sum", (("request", "ListOffsets"),))]
               - 40004.5) < 1e-6
    assert samples[("kafka_network_requestmetrics_requests_total", (("request", "ListOffsets"), ("version", "7")))] == 4


def test_fetches_are_a_consumers_or_a_followers_as_in_kafka(tmp_path):
    metrics = idle_broker(tmp_path).metrics
    metrics.request_handled(ApiKey.FETCH, 12, {"replica_id": -1}, 0.5)
    metrics.request_handled(ApiKey.FETCH, 12, {"replica_id": 2}, 0.5)
    metrics.request_handled(ApiKey.FETCH, 11, {"replica_id": 3}, 0.5)
    samples = scrape(metrics)
    requests = {labels: value for (name, labels), value in samples.items()
                if name == "kafka_network_requestmetrics_requests_total"}
    assert requests == {(("request", "FetchConsumer"), ("version", "12")): 1,
                        (("request", "FetchFollower"), ("version", "11")): 1,
                        (("request", "FetchFollower"), ("version", "12")): 1}
    assert samples[("kafka_network_requestmetrics_totaltimems_count", (("request", "FetchFollower"),))] == 2


def test_the_all_topics_series_keeps_what_a_deleted_topic_counted(tmp_path):
    metrics = idle_broker(tmp_path).metrics
    metrics.appended("kept", 100, 3)
    metrics.appended("deleted", 50, 2)
    metrics.fetched("deleted", 40)
    metrics.forget_topic("deleted")
    samples = scrape(metrics)
    assert samples[("kafka_server_brokertopicmetrics_messagesin_total", ())] == 5
    assert samples[("kafka_server_brokertopicmetrics_bytesin_total", ())] == 150
    assert samples[("kafka_server_brokertopicmetrics_bytesout_total", ())] == 40
    assert ("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "deleted"),)) not in samples
    assert samples[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "kept"),))] == 3


def test_an_isr_change_counts_as_a_shrink_an_expansion_or_both(tmp_path):
    metrics = idle_broker(tmp_path).metrics
    metrics.isr_changed((1, 2, 3), (1, 2))
    metrics.isr_changed((1, 2), (1, 2, 3))
    metrics.isr_changed((1, 2), (1, 3))
    metrics.isr_changed((1, 2, 3), (1, 3, 2))  # the same members in another order: no change
    samples = scrape(metrics)
    assert samples[("kafka_server_replicamanager_isrshrinks_total", ())] == 2
    assert samples[("kafka_server_replicamanager_isrexpands_total", ())] == 2


def test_a_broker_not_started_scrapes_as_a_single_node_with_nothing_yet(tmp_path):
    samples = scrape(idle_broker(tmp_path).metrics)
    assert samples[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1
    assert samples[("kafka_server_replicamanager_partitioncount", ())] == 0
    assert samples[("kafka_server_brokertopicmetrics_messagesin_total", ())] == 0
    assert not any(name.startswith("kafka_server_raft_metrics") for name, _ in samples)


def test_produce_and_fetch_partitions_count_and_fail_as_in_kafka(tmp_path):
    """Kafka's TotalProduceRequests/FailedProduceRequests and the fetch pair: a stale view of the cluster or a
    failed disk is no failure, a refused batch is; a topic the broker does not have gets no series."""
    metrics = idle_broker(tmp_path).metrics
    for error in (ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.INVALID_RECORD,
                  ErrorCode.NOT_ENOUGH_REPLICAS):
        metrics.produce_answered("t", error)
    metrics.produce_answered("nowhere", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    for error in (ErrorCode.NONE, ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.CORRUPT_MESSAGE):
        metrics.fetch_answered("t", error)
    samples = scrape(metrics)
    for name, total, failed in (("produce", 4, 2), ("fetch", 3, 1)):
        assert samples[(f"kafka_server_brokertopicmetrics_total{name}requests_total", (("topic", "t"),))] == total
        assert samples[(f"kafka_server_brokertopicmetrics_failed{name}requests_total", (("topic", "t"),))] == failed
        assert samples[(f"kafka_server_brokertopicmetrics_failed{name}requests_total", ())] == failed
    assert ("kafka_server_brokertopicmetrics_totalproducerequests_total", (("topic", "nowhere"),)) not in samples
