"""End-to-end probes (burrowpy.coordinators.probe) on a three-broker cluster of ours: the probe topic gets a
partition led by each broker, every broker's probes go through, and while one broker is paused with SIGSTOP
its probes fail and the others' keep succeeding."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from burrow_support import CLUSTER, MonitorSettings
from cluster_harness import BrokerCluster
from harness import wait_until
from probe_support import (
    PROBE_GROUP,
    PROBE_TOPIC,
    ProbingBurrowpy,
    check_paused_broker_fails_alone,
    check_probes_everywhere,
)

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
        def leaders() -> dict[int, int] | None:
            found = {p: info["leader_id"] for p, info in cluster.partitions(PROBE_TOPIC).items()}
            return found if sorted(found.values()) == cluster.ids else None

        check_probes_everywhere(monitor, cluster.ids, wait_until(leaders, 30, interval=0.2,
                                                                 message="a probe partition led by each broker"))
        # the probe group's commits reach the monitor like any group's
        wait_until(lambda: monitor.get(f"/v3/kafka/{CLUSTER}/consumer/{PROBE_GROUP}/lag")[0] == 200, 30,
                   interval=0.2, message="the probe group listed")
        paused = cluster.ids[-1]
        check_paused_broker_fails_alone(monitor, paused, cluster.ids[:-1], cluster.paused(paused))
