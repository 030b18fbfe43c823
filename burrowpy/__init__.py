"""burrowpy: Kafka consumer-lag monitoring in the style of LinkedIn's Burrow."""

__version__ = "0.1.0"
