"""The process's own Prometheus metrics, which the monitor's ``/metrics`` and the broker's endpoint both serve."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector


def register_process_metrics(registry: CollectorRegistry) -> None:
    """The standard process, platform and garbage-collector metrics (Burrow exports Go's equivalents)."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
