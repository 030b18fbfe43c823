"""A ``burrowpy serve`` with end-to-end probes every 0.2 s, and what the probe tests read from it."""

from __future__ import annotations

from typing import Any

from burrow_support import CLUSTER, BurrowpyProcess
from harness import Scrape

PROBE_TOPIC = "burrowpy-probe"
PROBE_GROUP = f"burrowpy-probe-{CLUSTER}"


class ProbingBurrowpy(BurrowpyProcess):
    """Probes every 0.2 s, failing after 1 s, success ratio over the last 2 s."""

    def config(self) -> dict[str, Any]:
        config = super().config()
        config["cluster"][CLUSTER].update({"probe": True, "probe-interval": 0.2, "probe-timeout": 1,
                                           "probe-window": 2})
        return config

    def probe(self) -> dict[int, dict[str, Any]]:
        """The probe's figures by broker, from ``GET /v3/kafka/local/probe``."""
        status, body = self.get(f"/v3/kafka/{CLUSTER}/probe")
        assert status == 200 and not body["error"], body
        return {entry["broker"]: entry for entry in body["probe"]["brokers"]}

    def scrape(self) -> Scrape:
        return Scrape(self.port)


def probing_everywhere(monitor: ProbingBurrowpy, brokers: list[int]) -> bool:
    """Every broker leads a probe partition, and its probes have lately all succeeded."""
    figures = monitor.probe()
    return all(figures.get(b, {}).get("partitions") and figures[b]["success_ratio"] == 1.0 for b in brokers)
