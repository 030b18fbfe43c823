"""A Kafka-protocol broker that real Kafka clients use unchanged."""
