"""Connection security of the broker, in Kafka's own configuration terms: listeners and TLS."""
