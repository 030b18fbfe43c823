"""A ``burrowpy serve`` with end-to-end probes every 0.2 s, and what the probe tests read from it."""

from __future__ import annotations

import contextlib
from typing import Any

from burrow_support import CLUSTER, BurrowpyProcess
from harness import Scrape, wait_until

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


def check_probes_everywhere(monitor: ProbingBurrowpy, brokers: list[int], leaders: dict[int, int]) -> None:
    """Every broker's probes succeed, on the partition it leads (``leaders``: partition -> broker), with each
    figure in /metrics."""
    wait_until(lambda: probing_everywhere(monitor, brokers), 60, interval=0.2,
               message="every broker probed successfully")
    figures = monitor.probe()
    assert {b: figures[b]["partitions"] for b in brokers} == {b: [p] for p, b in leaders.items()}
    scrape = monitor.scrape()
    for broker in map(str, brokers):
        assert scrape.value("burrow_kafka_probe_end_to_end_seconds_count", cluster=CLUSTER, broker=broker) > 0
        assert scrape.value("burrow_kafka_probe_produce_seconds_count", cluster=CLUSTER, broker=broker) > 0
        assert scrape.value("burrow_kafka_probe_success_ratio", cluster=CLUSTER, broker=broker) == 1.0
    wait_until(lambda: monitor.scrape().value("burrow_kafka_probe_commit_seconds_count", cluster=CLUSTER) > 0, 30,
               interval=0.2, message="a commit of the probe group timed")


def check_paused_broker_fails_alone(monitor: ProbingBurrowpy, paused: int, others: list[int],
                                    pausing: contextlib.AbstractContextManager) -> None:
    """While ``pausing`` holds broker ``paused`` stopped, its probes fail and the others' keep succeeding;
    once it goes on, its probes succeed again."""
    failed_before = {b: monitor.probe()[b]["failures"] for b in others}
    with pausing:
        def paused_failing() -> bool:
            figures = monitor.probe()[paused]
            return figures["success_ratio"] == 0.0 and figures["failures"] > 0

        wait_until(paused_failing, 30, interval=0.2, message=f"broker {paused}'s probes failing")

        def succeeded() -> dict[int, int]:
            figures = monitor.probe()
            return {b: figures[b]["attempts"] - figures[b]["failures"] for b in others}

        before = succeeded()
        wait_until(lambda: all(count > before[b] + 5 for b, count in succeeded().items()), 30, interval=0.2,
                   message="the other brokers' probes succeeding")
        assert "timed out" in monitor.probe()[paused]["last_error"]
        scrape = monitor.scrape()
        assert scrape.value("burrow_kafka_probe_failures_total", cluster=CLUSTER, broker=str(paused)) > 0
        assert scrape.value("burrow_kafka_probe_success_ratio", cluster=CLUSTER, broker=str(paused)) == 0.0
        for broker in others:
            assert scrape.value("burrow_kafka_probe_failures_total", cluster=CLUSTER, broker=str(broker)) == \
                failed_before[broker]
    wait_until(lambda: probing_everywhere(monitor, [paused, *others]), 60, interval=0.2,
               message="the resumed broker's probes succeeding again")
