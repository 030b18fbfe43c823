"""Server-side assignors of the consumer group protocol (KIP-848): ``uniform`` (the default) and ``range``.

Both are pure functions of the members' subscriptions, the subscribed topics' partition counts and (for
``uniform``) the current target assignment, so that every coordinator computes the same thing.

* ``uniform`` spreads all partitions of all subscribed topics evenly over the members subscribed to them
  (counts differ by at most one among members with the same subscription) and is sticky: a partition stays
  with its member as long as that keeps the spread even, so a rebalance moves as few partitions as it can.
* ``range`` gives each member, topic by topic, a contiguous range of partitions (members in member id
  order, the first ones one partition more when the count does not divide), as the classic range assignor.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.config import ASSIGNORS, RANGE, UNIFORM

__all__ = ["ASSIGNORS", "RANGE", "UNIFORM", "Assignment", "assign"]  # the names, from the config that lists them

Assignment = dict[bytes, frozenset[int]]  # topic id -> partitions



def assign(assignor: str, subscriptions: Mapping[str, frozenset[bytes]], partitions: Mapping[bytes, int],
           current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """member id -> its target assignment. ``subscriptions``: member -> topic ids it subscribes to (topics
    that do not exist are left out by the caller); ``partitions``: topic id -> partition count."""
    if assignor == RANGE:
        return _range(subscriptions, partitions)
    return _uniform(subscriptions, partitions, current)


def _range(subscriptions: Mapping[str, frozenset[bytes]], partitions: Mapping[bytes, int]) -> dict[str, Assignment]:
    target: dict[str, dict[bytes, set[int]]] = {member: {} for member in subscriptions}
    for topic_id, count in partitions.items():
        members = sorted(m for m, topics in subscriptions.items() if topic_id in topics)
        if not members:
            continue
        share, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = share + (1 if i < extra else 0)
            if size:
                target[member][topic_id] = set(range(start, start + size))
            start += size
    return {m: {t: frozenset(p) for t, p in topics.items()} for m, topics in target.items()}


def _uniform(subscriptions: Mapping[str, frozenset[bytes]], partitions: Mapping[bytes, int],
             current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    target: dict[str, set[tuple[bytes, int]]] = {member: set() for member in subscriptions}
    # Members with the same subscription share its partitions evenly; groups of such members are handled
    # one after the other (a partition belongs to the first subscription group that wants it).
    by_subscription: dict[frozenset[bytes], list[str]] = {}
    for member, topics in sorted(subscriptions.items()):
        by_subscription.setdefault(topics, []).append(member)
    taken: set[tuple[bytes, int]] = set()
    for topics, members in sorted(by_subscription.items(), key=lambda item: sorted(item[0])):
        pool = [(t, p) for t in sorted(topics) if t in partitions for p in range(partitions[t])
                if (t, p) not in taken]
        taken.update(pool)
        if not pool:
            continue
        share, extra = divmod(len(pool), len(members))
        available = set(pool)
        # Stickiness: members keep what they have, up to their quota; the members keeping the most get
        # the extra partitions (one each) first.
        kept = {m: sorted((t, p) for t, parts in current.get(m, {}).items() for p in parts if (t, p) in available)
                for m in members}
        order = sorted(members, key=lambda m: (-len(kept[m]), m))
        quota = {m: share + (1 if i < extra else 0) for i, m in enumerate(order)}
        for member in order:
            for tp in kept[member][:quota[member]]:
                target[member].add(tp)
                available.discard(tp)
        free = sorted(available)
        for member in sorted(members, key=lambda m: (len(target[m]) - quota[m], m)):
            while len(target[member]) < quota[member] and free:
                target[member].add(free.pop(0))
    result: dict[str, Assignment] = {}
    for member, tps in target.items():
        by_topic: dict[bytes, set[int]] = {}
        for topic_id, partition in tps:
            by_topic.setdefault(topic_id, set()).add(partition)
        result[member] = {t: frozenset(p) for t, p in by_topic.items()}
    return result
