"""End-to-end probes (burrowpy.coordinators.probe) on a three-broker cluster of ours: the probe topic gets a
partition led by each broker, every broker's probes go through, and while one broker is paused with SIGSTOP
its probes fail and the others' keep succeeding."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from burrow_support import CLUSTER, MonitorSettings
from cluster_harness import BrokerCluster
from harness import wait_until
from probe_support import PROBE_GROUP, PROBE_TOPIC, ProbingBurrowpy, probing_everywhere

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[BrokerCluster]:
    brokers = BrokerCluster(tmp_path_factory.mktemp("probe-cluster"))
    try:
        brokers.start()
        yield brokers
    finally:
        brokers.stop()


def test_each_broker_is_probed_and_a_paused_one_fails_alone(cluster, tmp_path):
    settings = MonitorSettings(cluster.brokers[1].bootstrap, offset_refresh=1, topic_refresh=1, expire_cache=1)
    with ProbingBurrowpy(tmp_path / "burrowpy", settings) as monitor:
        wait_until(lambda: probing_everywhere(monitor, cluster.ids), 30, interval=0.2,
                   message="every broker probed successfully")
        def leaders() -> dict[int, int] | None:
            found = {p: info["leader_id"] for p, info in cluster.partitions(PROBE_TOPIC).items()}
            return found if sorted(found.values()) == cluster.ids else None
        leaders = wait_until(leaders, 30, interval=0.2, message="a probe partition led by each broker")
        figures = monitor.probe()
        assert {b: figures[b]["partitions"] for b in cluster.ids} == {b: [p] for p, b in leaders.items()}
        scrape = monitor.scrape()
        for broker in map(str, cluster.ids):
            assert scrape.value("burrow_kafka_probe_end_to_end_seconds_count", cluster=CLUSTER, broker=broker) > 0
            assert scrape.value("burrow_kafka_probe_produce_seconds_count", cluster=CLUSTER, broker=broker) > 0
            assert scrape.value("burrow_kafka_probe_success_ratio", cluster=CLUSTER, broker=broker) == 1.0
        assert scrape.value("burrow_kafka_probe_commit_seconds_count", cluster=CLUSTER) > 0
        # the probe group's commits reach the monitor like any group's
        wait_until(lambda: monitor.get(f"/v3/kafka/{CLUSTER}/consumer/{PROBE_GROUP}/lag")[0] == 200, 30,
                   interval=0.2, message="the probe group listed")

        paused = cluster.ids[-1]
        others = [b for b in cluster.ids if b != paused]
        failed_before = {b: monitor.probe()[b]["failures"] for b in others}
        with cluster.paused(paused):
            def paused_failing() -> bool:
                figures = monitor.probe()
                return figures[paused]["success_ratio"] == 0.0 and figures[paused]["failures"] > 0
            wait_until(paused_failing, 30, interval=0.2, message=f"broker {paused}'s probes failing")
            before = {b: monitor.probe()[b]["attempts"] - monitor.probe()[b]["failures"] for b in others}
            wait_until(lambda: all(monitor.probe()[b]["attempts"] - monitor.probe()[b]["failures"] > before[b] + 5
                                   for b in others), 30, interval=0.2, message="the other brokers' probes succeeding")
            figures = monitor.probe()
            assert figures[paused]["last_error"], figures[paused]
            scrape = monitor.scrape()
            assert scrape.value("burrow_kafka_probe_failures_total", cluster=CLUSTER, broker=str(paused)) > 0
            assert scrape.value("burrow_kafka_probe_success_ratio", cluster=CLUSTER, broker=str(paused)) == 0.0
            for broker in others:
                assert scrape.value("burrow_kafka_probe_failures_total", cluster=CLUSTER, broker=str(broker)) == \
                    failed_before[broker]
        wait_until(lambda: probing_everywhere(monitor, cluster.ids), 60, interval=0.2,
                   message="the resumed broker's probes succeeding again")
