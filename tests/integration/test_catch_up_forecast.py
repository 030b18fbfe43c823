"""The catch-up forecast end to end, on our broker and on Apache Kafka 4.4: a producer writes at a steady
rate, three real consumer groups commit on the same partition at their own rates (one catching up, one
keeping pace, one falling behind), and ``burrowpy serve`` says so through the v3 JSON and ``/metrics``.
Nothing is faked: commit times are the broker's, broker offset samples the monitor's wall clock.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from burrow_support import CLUSTER, BurrowpyProcess, MonitorSettings
from confluent_kafka import Producer
from harness import wait_until
from monitor_support import committing, create_topic, produce, wait_until_offsets_topic_read
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.integration

TOPIC = "forecast-events"
RATE = 100  # records/s produced
BACKLOG = 4_000  # records written before the groups start
# Each group's committed offset, ``elapsed`` seconds after the groups start, against the log end offset
# BACKLOG + RATE * elapsed: two producers' worth from 0 (net +100/s, caught up after 40 s), the log end
# less 300 (keeping pace), half the produce rate from 300 behind (net -50/s).
GROUPS = {
    "forecast-catching-up": lambda elapsed, end: min(end, int(2 * RATE * elapsed)),
    "forecast-keeping-pace": lambda elapsed, end: end - 300,
    "forecast-falling-behind": lambda elapsed, end: BACKLOG - 300 + int(RATE / 2 * elapsed),
}


class SteadyProducer:
    """Writes RATE records/s to partition 0 of TOPIC from its own thread, paced by the clock."""

    def __init__(self, bootstrap: str, start_offset: int) -> None:
        self.producer: Producer | None = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        self.start_offset = start_offset
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)

    def end_at(self, now: float) -> int:
        """The log end offset the producer is due to have reached at monotonic time ``now``."""
        return self.start_offset + int(RATE * (now - self.started))

    def _run(self) -> None:
        written = self.start_offset
        while not self._stop.is_set():
            for _ in range(self.end_at(time.monotonic()) - written):
                self.producer.produce(TOPIC, value=b"event", partition=0)
                written += 1
            self.producer.poll(0)
            self._stop.wait(0.005)  # the pace: a few records at a time, not a burst a second
        assert self.producer.flush(30) == 0
        self.producer = None  # librdkafka would keep reconnecting to the broker once it is stopped

    def __enter__(self) -> SteadyProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the producer thread did not stop"


@pytest.fixture(scope="module", params=["burrowpy-broker", "kafka-4.4"])
def cluster(request, tmp_path_factory) -> Iterator[tuple[str, BurrowpyProcess]]:
    server = request.getfixturevalue("broker" if request.param == "burrowpy-broker" else "kafka")
    # 12 commits 0.4 s apart and 12 broker samples 1 s apart: rates over about 5 s.
    settings = MonitorSettings(server.bootstrap, intervals=12, offset_refresh=1, topic_refresh=1, expire_cache=0)
    with BurrowpyProcess(tmp_path_factory.mktemp("burrowpy"), settings) as process:
        yield server.bootstrap, process


def forecast_metrics(monitor: BurrowpyProcess) -> dict[tuple[str, str], float]:
    status, text = monitor.get("/metrics")
    assert status == 200
    names = ("burrow_kafka_consumer_group_catch_up_seconds",
             "burrow_kafka_consumer_group_falling_behind_records_per_second")
    return {(sample.name, sample.labels["consumer_group"]): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples
            if sample.name in names and sample.labels["cluster"] == CLUSTER}


def lag_answers(monitor: BurrowpyProcess) -> dict[str, dict]:
    answers = {}
    for group in GROUPS:
        status, body = monitor.get(f"/v3/kafka/{CLUSTER}/consumer/{group}/lag")
        if status == 200 and body["status"]["partitions"]:
            answers[group] = body["status"]
    return answers


def commit_schedule(producer: SteadyProducer,
                    offset_for: Callable[[float, int], int]) -> Callable[[int], dict[int, int]]:
    """A CommitLoop's offsets: the group's offset for the time of each commit."""
    def offsets(_round: int) -> dict[int, int]:
        now = time.monotonic()
        return {0: offset_for(now - producer.started, producer.end_at(now))}
    return offsets


def test_groups_catching_up_keeping_pace_and_falling_behind(cluster):
    bootstrap, monitor = cluster
    create_topic(bootstrap, TOPIC, 1)
    backlog = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    produce(backlog, TOPIC, 0, BACKLOG)
    del backlog
    with SteadyProducer(bootstrap, BACKLOG) as producer, contextlib.ExitStack() as stack:
        loops = [stack.enter_context(committing("confluent", bootstrap, group, TOPIC,
                                                commit_schedule(producer, offset_for), partitions=1))
                 for group, offset_for in GROUPS.items()]
        for loop in loops:
            wait_until(lambda loop=loop: loop.committed(1), 60, message=f"{loop.client_id}'s first commit")
        wait_until_offsets_topic_read(monitor)
        expected = {"forecast-catching-up": "catching_up", "forecast-keeping-pace": "keeping_pace",
                    "forecast-falling-behind": "falling_behind"}

        def forecasts_settled() -> dict[str, dict] | None:
            # Rates from full windows: the first few commits after a group joins span too little to judge by.
            answers = lag_answers(monitor)
            full = all(answer["partitions"][0]["complete"] == 1.0 for answer in answers.values())
            states = {group: answer["catch_up_forecast"] for group, answer in answers.items()}
            return answers if full and states == expected else None
        answers = wait_until(forecasts_settled, 60, interval=0.3, message="each group's forecast")
        metrics = forecast_metrics(monitor)

    catching = answers["forecast-catching-up"]
    (partition,) = catching["partitions"]
    # It consumes 200/s while 100/s arrive: its lag shrinks by 100 records/s.
    assert partition["catch_up_forecast"] == "catching_up" and partition["falling_behind_per_second"] is None
    assert partition["catch_up_seconds"] == pytest.approx(partition["current_lag"] / 100, rel=0.25)
    assert catching["catch_up_seconds"] == partition["catch_up_seconds"]
    assert catching["falling_behind_per_second"] is None

    keeping = answers["forecast-keeping-pace"]
    assert keeping["partitions"][0]["current_lag"] > 0
    assert (keeping["catch_up_seconds"], keeping["falling_behind_per_second"]) == (None, None)

    falling = answers["forecast-falling-behind"]
    assert falling["catch_up_seconds"] is None
    assert falling["falling_behind_per_second"] == pytest.approx(50, rel=0.25)
    assert falling["partitions"][0]["falling_behind_per_second"] == falling["falling_behind_per_second"]

    # /metrics, scraped just after: a catch-up time only for the group catching up, a growth only for the
    # group falling behind.
    assert {key for key in metrics} == {("burrow_kafka_consumer_group_catch_up_seconds", "forecast-catching-up"),
                                        ("burrow_kafka_consumer_group_falling_behind_records_per_second",
                                         "forecast-falling-behind")}
    assert metrics[("burrow_kafka_consumer_group_catch_up_seconds", "forecast-catching-up")] == pytest.approx(
        catching["catch_up_seconds"], rel=0.5)
    assert metrics[("burrow_kafka_consumer_group_falling_behind_records_per_second",
                    "forecast-falling-behind")] == pytest.approx(50, rel=0.25)
