"""broker.cluster.replication_quota: which replicas a topic's throttled-replicas list names on a broker, and
Kafka's SimpleRate bound of a replication throttle, with the clock given."""

from __future__ import annotations

from broker.cluster.replication_quota import ReplicationQuota, throttles_replica
from broker.quotas import QuotaWindow

WINDOW = QuotaWindow(samples=11, size_ms=1000)


def test_a_list_names_partition_and_broker_pairs_or_every_replica():
    listed = ("0:1", "0:2", " 3:1")
    assert throttles_replica(listed, 0, 1) and throttles_replica(listed, 0, 2) and throttles_replica(listed, 3, 1)
    assert not throttles_replica(listed, 0, 3) and not throttles_replica(listed, 1, 1)
    assert throttles_replica(("*",), 7, 5)
    assert not throttles_replica((), 0, 1)


def test_the_rate_is_over_its_bound_until_time_brings_it_back():
    quota = ReplicationQuota(WINDOW, bound=200_000)
    assert not quota.exceeded(0)
    quota.record(1_000_000, 0)  # one fetch's worth at once: measured over one window at least
    assert quota.exceeded(0) and quota.exceeded(4_000)
    assert quota.byte_rate(4_000) == 250_000
    assert not quota.exceeded(5_000)  # 1 MB over 5 s is the bound
    quota.record(1_000_000, 5_000)
    assert quota.exceeded(9_000) and not quota.exceeded(10_000)


def test_no_bound_never_holds_anything_back():
    quota = ReplicationQuota(WINDOW)
    quota.record(10**12, 0)
    assert not quota.exceeded(0)


def test_the_rate_forgets_what_left_its_samples():
    quota = ReplicationQuota(WINDOW, bound=1_000)
    quota.record(50_000, 0)
    assert quota.byte_rate(10_000) == 5_000 and quota.exceeded(10_000)
    assert quota.byte_rate(11_000) == 0 and not quota.exceeded(11_000)  # older than all 11 samples: gone
