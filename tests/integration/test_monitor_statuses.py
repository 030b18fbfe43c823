"""Each partition status, end to end: real consumers (confluent-kafka and kafka-python) commit to our broker,
``burrowpy serve`` reads ``__consumer_offsets`` and polls broker offsets, and its HTTP API (``/status``,
``/lag``) and ``/metrics`` report what the consumer did.

Every group consumes a two-partition topic. Partition 0 shows the behaviour under test; partition 1 is
always caught up, so ``/status`` (problems only) and ``/lag`` (every partition) differ exactly by it.

The monitor keeps a window of ``INTERVALS`` commits and judges a partition only once the window is full
(``minimum-complete`` 1.0), so a status never comes from a half-filled window. Statuses that need a live
consumer (OK, WARN, STALL, REWIND) are observed while the consumer keeps committing in its own thread;
STOP is observed after it stopped. Nothing is faked: timestamps are the broker's commit times and the
monitor's wall clock.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from burrow_support import CLUSTER, BurrowpyProcess, MonitorSettings
from confluent_kafka import Producer
from harness import wait_until
from monitor_support import (
    CLIENTS,
    CommitLoop,
    broker_offsets,
    committing,
    create_topic,
    produce,
    wait_until_offsets_topic_read,
)
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.integration

INTERVALS = 4
PARTITION_CODES = {"OK": 1, "WARN": 2, "STOP": 4, "STALL": 5, "REWIND": 6}
GROUP_CODES = {"OK": 1, "WARN": 2, "ERR": 3}
CAUGHT_UP = 10  # records in partition 1, always committed in full


@pytest.fixture(scope="module")
def monitor(broker, tmp_path_factory) -> Iterator[BurrowpyProcess]:
    settings = MonitorSettings(broker.bootstrap, intervals=INTERVALS, offset_refresh=1, topic_refresh=1,
                               expire_cache=0, minimum_complete=1.0)
    with BurrowpyProcess(tmp_path_factory.mktemp("burrowpy"), settings) as process:
        yield process


@pytest.fixture
def producer(broker) -> Iterator[Producer]:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    yield producer
    producer.flush(10)
    del producer  # librdkafka would keep reconnecting to a stopped broker


# --- the monitor's answers -----------------------------------------------------------------------------


def wait_for_broker_offsets(monitor: BurrowpyProcess, topic: str, offsets: list[int]) -> None:
    """Commits reach storage only once it has the partition's broker offset (Burrow drops earlier ones)."""
    wait_until(lambda: broker_offsets(monitor, topic) == offsets, 30, interval=0.1,
               message=f"the monitor to see broker offsets {offsets} of {topic}")


def group_status(monitor: BurrowpyProcess, group: str, view: str) -> dict:
    status, body = monitor.get(f"/v3/kafka/{CLUSTER}/consumer/{group}/{view}")
    assert status in (200, 404), body
    return body["status"]


def metric_samples(monitor: BurrowpyProcess) -> dict[tuple[str, frozenset], float]:
    status, text = monitor.get("/metrics")
    assert status == 200
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def group_metrics(monitor: BurrowpyProcess, group: str, topic: str) -> dict[str, float]:
    """This group's series: ``status``, ``lag_total`` and, per partition p, ``lag:p``, ``status:p``, ``offset:p``."""
    names = {"burrow_kafka_consumer_status": "status", "burrow_kafka_consumer_lag_total": "lag_total",
             "burrow_kafka_consumer_partition_lag": "lag", "burrow_kafka_topic_partition_status": "status",
             "burrow_kafka_consumer_current_offset": "offset"}
    found = {}
    for (name, labels), value in metric_samples(monitor).items():
        labels = dict(labels)
        if name in names and labels.get("consumer_group") == group and labels.get("cluster") == CLUSTER:
            key = names[name] if "partition" not in labels else f"{names[name]}:{labels['partition']}"
            assert labels.get("topic", topic) == topic
            found[key] = value
    return found


def wait_for_partition_status(monitor: BurrowpyProcess, group: str, expected: str) -> dict:
    """Poll ``/lag`` until partition 0 has the expected status on a full window; returns that answer."""
    def reached() -> dict | None:
        lag = group_status(monitor, group, "lag")
        by_partition = {p["partition"]: p for p in lag["partitions"]}
        first = by_partition.get(0)
        return lag if first and first["status"] == expected and first["complete"] == 1.0 else None
    return wait_until(reached, 45, interval=0.2, message=f"partition 0 of {group} to be {expected}")


def check_answers(monitor: BurrowpyProcess, group: str, topic: str, expected: str, *, consumer: CommitLoop | None,
                  backlog: int | None) -> dict:
    """The group's ``/lag`` and ``/status`` and its ``/metrics`` series all say ``expected`` for partition 0
    and OK for partition 1; returns the ``/lag`` answer. ``backlog``: partition 0's broker offset when the
    test produces nothing more; ``consumer``: the consumer, when it is still a member of its group (then
    the partitions name it as their owner)."""
    group_expected = {"OK": "OK", "WARN": "WARN"}.get(expected, "ERR")
    if consumer is not None:
        # Storage, like Burrow's, drops a group that has owners but no commit yet the first time anyone asks
        # for it, and its owners with it: ask only once the monitor has taken in a commit.
        wait_until(lambda: consumer.committed(1), 60, message="the first commit")
        wait_until_offsets_topic_read(monitor)
    lag = wait_for_partition_status(monitor, group, expected)
    assert (lag["cluster"], lag["group"], lag["status"]) == (CLUSTER, group, group_expected)
    assert lag["partition_count"] == 2
    first, second = sorted(lag["partitions"], key=lambda p: p["partition"])
    assert first["topic"] == second["topic"] == topic
    if backlog is not None:
        assert first["current_lag"] == backlog - first["end"]["offset"]
    assert (second["status"], second["current_lag"], second["end"]["offset"]) == ("OK", 0, CAUGHT_UP)
    assert lag["totallag"] == first["current_lag"]
    if first["current_lag"]:
        assert lag["maxlag"]["partition"] == 0
    if consumer is not None:  # owners come from the group metadata record of a subscribed consumer
        assert first["client_id"] == second["client_id"] == consumer.client_id
        assert first["owner"].startswith("/127.0.0.1")

    def status_view_agrees() -> bool:
        status = group_status(monitor, group, "status")
        problems = [(p["partition"], p["status"]) for p in status["partitions"]]
        return status["status"] == group_expected and problems == ([] if expected == "OK" else [(0, expected)])
    wait_until(status_view_agrees, 20, interval=0.2, message=f"/status of {group} to show only partition 0")

    def metrics_agree() -> dict[str, float] | None:
        series = group_metrics(monitor, group, topic)
        agrees = (series.get("status") == GROUP_CODES[group_expected]
                  and series.get("status:0") == PARTITION_CODES[expected]
                  and series.get("status:1") == PARTITION_CODES["OK"]
                  and series.get("lag:1") == 0 and series.get("offset:1") == CAUGHT_UP)
        return series if agrees else None
    series = wait_until(metrics_agree, 20, interval=0.2, message=f"/metrics to report {expected} for {group}")
    assert series["lag_total"] == series["lag:0"] >= 0
    return lag


# --- one test per status and client ---------------------------------------------------------------------


def prepare(broker, monitor, producer, topic: str, backlog: int) -> None:
    """A two-partition topic with ``backlog`` records in partition 0 and CAUGHT_UP in partition 1."""
    create_topic(broker.bootstrap, topic, 2)
    produce(producer, topic, 0, backlog)
    produce(producer, topic, 1, CAUGHT_UP)
    wait_for_broker_offsets(monitor, topic, [backlog, CAUGHT_UP])


@pytest.mark.parametrize("client", CLIENTS)
def test_ok_a_consumer_that_keeps_up(broker, monitor, producer, client):
    group = topic = f"status-ok-{client}"
    prepare(broker, monitor, producer, topic, 0)

    def consume_everything(round_number: int) -> dict[int, int]:
        produce(producer, topic, 0, 5)  # records keep arriving; the consumer is always at the end
        return {0: 5 * (round_number + 1), 1: CAUGHT_UP}

    with committing(client, broker.bootstrap, group, topic, consume_everything) as consumer:
        wait_until(lambda: consumer.committed(INTERVALS), 60, message="a full window of commits")
        lag = check_answers(monitor, group, topic, "OK", consumer=consumer, backlog=None)
    first = lag["partitions"][0]
    # Every stored commit was at the end of the partition; a poll between a round's records and its
    # commit can show the records just produced as current lag for a moment.
    assert first["start"]["lag"] == first["end"]["lag"] == 0 and first["current_lag"] <= 5
    assert lag["complete"] == 1.0


@pytest.mark.parametrize("client", CLIENTS)
def test_warn_lag_grows_at_every_commit(broker, monitor, producer, client):
    group = topic = f"status-warn-{client}"
    prepare(broker, monitor, producer, topic, 0)

    def fall_behind(round_number: int) -> dict[int, int]:
        # 10 new records per round, 3 consumed: the lag the monitor stores with each commit grows by 7.
        # The commit waits until the monitor has the new broker offset, so each stored lag counts all 10.
        produced = 10 * (round_number + 1)
        produce(producer, topic, 0, 10)
        wait_for_broker_offsets(monitor, topic, [produced, CAUGHT_UP])
        return {0: 3 * (round_number + 1), 1: CAUGHT_UP}

    with committing(client, broker.bootstrap, group, topic, fall_behind) as consumer:
        lag = check_answers(monitor, group, topic, "WARN", consumer=consumer, backlog=None)
    first = lag["partitions"][0]
    assert first["start"]["lag"] < first["end"]["lag"]
    assert first["end"]["lag"] >= 7 * first["end"]["offset"] // 3  # more if a later poll came first


@pytest.mark.parametrize("client", CLIENTS)
def test_stop_commits_stop_while_lag_remains(broker, monitor, producer, client):
    group = topic = f"status-stop-{client}"
    prepare(broker, monitor, producer, topic, 40)

    def consume_some(round_number: int) -> dict[int, int]:
        return {0: 5 * (round_number + 1), 1: CAUGHT_UP}  # lag falls: 35, 30, 25, 20 (not WARN)

    with committing(client, broker.bootstrap, group, topic, consume_some, rounds=INTERVALS) as consumer:
        wait_until(lambda: consumer.committed(INTERVALS), 60, message="a full window of commits")
    # The consumer is gone; its last commit ages until it is older than the window is long.
    lag = check_answers(monitor, group, topic, "STOP", consumer=None, backlog=40)
    assert lag["partitions"][0]["end"]["offset"] == 5 * INTERVALS


@pytest.mark.parametrize("client", CLIENTS)
def test_stall_the_same_offset_committed_while_lag_remains(broker, monitor, producer, client):
    group = topic = f"status-stall-{client}"
    prepare(broker, monitor, producer, topic, 40)
    with committing(client, broker.bootstrap, group, topic, lambda _: {0: 15, 1: CAUGHT_UP}) as consumer:
        lag = check_answers(monitor, group, topic, "STALL", consumer=consumer, backlog=40)
    first = lag["partitions"][0]
    assert (first["start"]["offset"], first["end"]["offset"], first["current_lag"]) == (15, 15, 25)


@pytest.mark.parametrize("client", CLIENTS)
def test_rewind_an_offset_committed_backwards(broker, monitor, producer, client):
    group = topic = f"status-rewind-{client}"
    prepare(broker, monitor, producer, topic, 40)
    with committing(client, broker.bootstrap, group, topic, lambda n: {0: 30 - n, 1: CAUGHT_UP}) as consumer:
        lag = check_answers(monitor, group, topic, "REWIND", consumer=consumer, backlog=40)
    first = lag["partitions"][0]
    assert first["start"]["offset"] == first["end"]["offset"] + INTERVALS - 1
