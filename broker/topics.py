"""Names of Kafka's internal topics, their configs, and the broker-wide partition bound."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.config import BrokerConfig

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTIONS_TOPIC = "__transaction_state"
# Listed as internal in Metadata, not writable by clients, not deletable.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTIONS_TOPIC})


def offsets_topic_configs(broker_config: BrokerConfig) -> dict[str, Any]:
    """`__consumer_offsets`' topic configs as Kafka creates it: compacted, in segments of
    ``offsets.topic.segment.bytes`` (small, so the cleaner reaches old commits sooner than in 1 GiB ones)."""
    return {"cleanup.policy": "compact", "segment.bytes": broker_config["offsets.topic.segment.bytes"]}


def partitions_past_limit(held: int, adding: int, limit: int) -> str | None:
    """Why ``adding`` partitions to the ``held`` ones would pass ``max.partitions`` (burrowpy's own bound: each
    partition costs memory, and files once it is used), or None when they fit."""
    if held + adding <= limit:
        return None
    return f"The cluster has {held} partitions; {adding} more would pass max.partitions ({limit})."
