"""Replication throttles as Apache Kafka has them (KIP-73), what ``kafka-reassign-partitions --throttle`` sets.

Two rates, dynamic broker configs: ``leader.replication.throttled.rate`` bounds the bytes this broker sends to
followers' fetches of throttled replicas, ``follower.replication.throttled.rate`` the bytes it fetches for its
own throttled replicas. Which replicas are throttled is the topics' business: ``leader.replication.throttled.replicas``
and ``follower.replication.throttled.replicas`` list ``partition:broker`` pairs (or ``*``, every replica), and a
broker throttles a partition on a side when the list names its own replica of it.

A rate is Kafka's SimpleRate over ``replication.quota.window.num`` samples of
``replication.quota.window.size.seconds``. Nothing is refused or delayed with an error: while the rate is over
its bound, the leader answers a throttled partition's fetch with no records and the follower leaves it out of
its fetches. Replicas in the ISR are never held back (that would shrink the ISR: Kafka's "ISR thrashing"), but
their bytes count towards the rate, so that replication as a whole keeps to it.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.quotas import QuotaWindow, RateSensor

NO_THROTTLE = 2**63 - 1  # the rates' default: Long.MAX_VALUE bytes a second


def throttles_replica(entries: Sequence[str], partition: int, node_id: int) -> bool:
    """Whether a ``*.replication.throttled.replicas`` list (checked when it was set) names ``node_id``'s
    replica of ``partition``."""
    if [entry.strip() for entry in entries] == ["*"]:
        return True
    for entry in entries:
        listed_partition, _, listed_broker = entry.partition(":")
        if int(listed_partition) == partition and int(listed_broker) == node_id:
            return True
    return False


class ReplicationQuota:
    """One side's throttle (Kafka's ReplicationQuotaManager): its bound and the rate of the bytes it counted."""

    def __init__(self, window: QuotaWindow, bound: float = NO_THROTTLE) -> None:
        self.window = window
        self.bound = bound
        self._sensor = RateSensor()

    def byte_rate(self, now_ms: int) -> float:
        return self._sensor.rate(now_ms, self.window, simple=True)[0]

    def exceeded(self, now_ms: int) -> bool:
        return self.byte_rate(now_ms) > self.bound

    def record(self, size: int, now_ms: int) -> None:
        self._sensor.record(size, now_ms, self.window)
