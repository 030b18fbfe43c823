"""Names of Kafka's internal topics, and the broker-wide partition bound."""

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTIONS_TOPIC = "__transaction_state"
# Listed as internal in Metadata, not writable by clients, not deletable.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTIONS_TOPIC})


def partitions_past_limit(held: int, adding: int, limit: int) -> str | None:
    """Why ``adding`` partitions to the ``held`` ones would pass ``max.partitions`` (burrowpy's own bound: each
    partition costs memory, and files once it is used), or None when they fit."""
    if held + adding <= limit:
        return None
    return f"The cluster has {held} partitions; {adding} more would pass max.partitions ({limit})."
