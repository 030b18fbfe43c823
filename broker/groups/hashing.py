"""Which `__consumer_offsets` partition holds a group: the same answer Apache Kafka gives.

Clients do not compute this, but Burrow-style readers and operators reason about it, and a cluster of
our brokers must agree with itself; matching Kafka exactly keeps both honest.
"""

from __future__ import annotations

_INT32_MIN = -(1 << 31)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: ``h = 31*h + c`` over UTF-16 code units, wrapped to a signed int32."""
    h = 0
    encoded = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(encoded), 2):
        h = (31 * h + ((encoded[i] << 8) | encoded[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: like ``abs`` but Integer.MIN_VALUE maps to 0 (Java's Math.abs keeps it negative)."""
    return 0 if n == _INT32_MIN else abs(n)


def offsets_partition_for(group_id: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hash(group_id)) % num_partitions
