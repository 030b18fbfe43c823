"""The pure parts of the end-to-end probes (burrowpy.coordinators.probe): slots on a fake clock, the success
ratio over a window, the histogram's buckets, and the probe settings of a cluster section with their errors."""

from __future__ import annotations

import pytest
import structlog

from burrowpy.config import Config, ConfigError, Section, parse_config
from burrowpy.context import ApplicationContext
from burrowpy.coordinators.base import Coordinator
from burrowpy.coordinators.probe import BUCKETS, LatencyHistogram, OutcomeWindow, ProbeSchedule, ProbeSettings


def test_schedule_fires_on_fixed_slots_and_skips_the_ones_an_overrun_missed():
    schedule = ProbeSchedule(10.0, start=1000.0)
    assert schedule.due(1000.0) and schedule.wait(1000.0) == 0.0
    schedule.taken(1000.0)
    assert not schedule.due(1009.9) and schedule.wait(1004.0) == pytest.approx(6.0)
    # a late wake-up keeps the slots where they were instead of drifting
    schedule.taken(1010.5)
    assert schedule.wait(1010.5) == pytest.approx(9.5)
    # a round that overran three slots fires once, at the next slot after it
    schedule.taken(1047.0)
    assert not schedule.due(1049.9) and schedule.due(1050.0)


def test_ratio_counts_only_the_outcomes_inside_the_window():
    window = OutcomeWindow(60.0)
    assert window.ratio(0.0) is None
    window.add(0.0, True)
    window.add(30.0, False)
    window.add(50.0, True)
    assert window.ratio(50.0) == pytest.approx(2 / 3)
    assert window.ratio(61.0) == pytest.approx(1 / 2)  # the success at 0 left the window
    assert window.ratio(100.0) == 1.0
    assert window.ratio(111.0) is None


def test_histogram_buckets_are_cumulative_with_inf_and_sum():
    histogram = LatencyHistogram()
    for seconds in (0.001, 0.02, 0.02, 7.0, 100.0):
        histogram.observe(seconds)
    buckets = dict(histogram.buckets())
    assert list(buckets) == [*map(str, BUCKETS), "+Inf"]
    assert (buckets["0.005"], buckets["0.025"], buckets["5.0"], buckets["10.0"], buckets["+Inf"]) == (1, 3, 3, 4, 5)
    assert histogram.total == pytest.approx(107.041) and histogram.last == 100.0


def cluster_config(settings: dict) -> Config:
    return parse_config({"cluster": {"local": {"class-name": "kafka", "servers": ["k:9092"], **settings}}},
                        "burrowpy.yaml", {})


def cluster_section(settings: dict) -> Section:
    return cluster_config(settings).modules("cluster")["local"]


def test_probe_settings_default_and_off():
    assert ProbeSettings.from_section("local", cluster_section({})) is None
    settings = ProbeSettings.from_section("local", cluster_section({"probe": True}))
    assert settings == ProbeSettings(topic="burrowpy-probe", group="burrowpy-probe-local", interval=10.0,
                                     timeout=10.0, window=60.0, replication_factor=1)
    fast = ProbeSettings.from_section("local", cluster_section({"probe": True, "probe-interval": 0.2}))
    assert (fast.interval, fast.timeout) == (0.2, 5.0)


@pytest.mark.parametrize(
    ("settings", "key", "message"),
    [
        ({"probe": "sometimes"}, "probe", "expected"),
        ({"probe": True, "probe-interval": 0}, "probe-interval", "must be a positive number of seconds"),
        ({"probe": True, "probe-interval": "often"}, "probe-interval", "expected a number"),
        ({"probe": True, "probe-timeout": -1}, "probe-timeout", "must be a positive number of seconds"),
        ({"probe": True, "probe-window": "nan"}, "probe-window", "must be a positive number of seconds"),
        ({"probe": True, "probe-replication-factor": 0}, "probe-replication-factor", "at least 1"),
        ({"probe-topic": "probes"}, "probe-topic", "probe settings need probe: true"),
    ],
)
def test_bad_probe_settings_name_the_file_and_key(settings, key, message):
    from burrowpy.daemon import module_classes

    ctx = ApplicationContext(config=cluster_config(settings), logger=structlog.get_logger())
    with pytest.raises(ConfigError) as caught:
        Coordinator("cluster", ctx, module_classes()["cluster"])
    assert str(caught.value).startswith(f"burrowpy.yaml: cluster.local.{key}: ")
    assert message in caught.value.message
