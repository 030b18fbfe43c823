"""burrowpy next to Debian's Burrow 1.2.1: one broker (ours), the same groups, the same settings; both
monitors must give the same group list, partition counts, lag figures and statuses.

The groups, each on its own topic (partition 0 carries the behaviour, the other partitions are caught up):

| group | consumer | what it does | status |
|---|---|---|---|
| side-ok | confluent-kafka | committed the end of both partitions four times, then left | OK |
| side-stop | kafka-python | four commits with lag (35, 30, 25, 20), then left | STOP |
| side-partial | confluent-kafka | commits two of its topic's three partitions, then left | OK, complete 2/3 |
| side-stall | kafka-python | keeps committing offset 15 of 40 | STALL |
| side-warn | confluent-kafka | 10 new records per round, 3 consumed | WARN |
| side-rewind | kafka-python | commits one offset lower each time | REWIND |
| side-zk | (ZooKeeper) | offsets 60 and 50 of 100 and 50 in /side/consumers | OK (window not full) |

Known differences, each asserted below so that a change on either side shows up:
- burrowpy lists one more group, ``burrow-local``: its consumer module reports its own position in
  ``__consumer_offsets`` (Burrow 1.2.1 has no self-reporting).
- Owners: our broker writes group metadata value v3 (as Kafka 2.3+ does), which Burrow 1.2.1 does not
  decode, so Burrow shows no owner or client id for Kafka-committed groups; burrowpy does. Burrow 1.2.1's
  kafka_zk module never reads the owners znode; burrowpy's does.
- Lag figures are compared where they are settled (groups that stopped committing); for live groups the
  two monitors read commits and broker offsets at different moments, so only their statuses are compared.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from burrow_support import CLUSTER, BurrowProcess, BurrowpyProcess, MonitorProcess, MonitorSettings
from confluent_kafka import Producer
from harness import wait_until
from kazoo.client import KazooClient
from monitor_support import (
    SELF_GROUP,
    CommitLoop,
    broker_offsets,
    committing,
    create_topic,
    produce,
    wait_until_offsets_topic_read,
)

pytestmark = pytest.mark.integration

INTERVALS = 4
ZOOKEEPER_PATH = "/side"
# group -> (partition 0 status, group status)
EXPECTED = {
    "side-ok": ("OK", "OK"),
    "side-stop": ("STOP", "ERR"),
    "side-partial": ("OK", "OK"),
    "side-stall": ("STALL", "ERR"),
    "side-warn": ("WARN", "WARN"),
    "side-rewind": ("REWIND", "ERR"),
    "side-zk": ("OK", "OK"),
}
SETTLED = ("side-ok", "side-stop", "side-partial", "side-zk")
LIVE_KAFKA_GROUPS = ("side-stall", "side-warn", "side-rewind")


@pytest.fixture(scope="module")
def monitors(broker, zookeeper_module, tmp_path_factory) -> Iterator[tuple[BurrowpyProcess, BurrowProcess]]:
    zk = KazooClient(hosts=zookeeper_module.hosts)
    zk.start(30)
    zk.ensure_path(f"{ZOOKEEPER_PATH}/consumers")  # Burrow 1.2.1 watches it from the start
    zk.stop()
    zk.close()
    settings = MonitorSettings(broker.bootstrap, intervals=INTERVALS, offset_refresh=1, topic_refresh=1,
                               expire_cache=1, minimum_complete=1.0,
                               zookeeper_offsets=(zookeeper_module.hosts, ZOOKEEPER_PATH))
    directory = tmp_path_factory.mktemp("side-by-side")
    with BurrowpyProcess(directory / "burrowpy", settings) as ours, \
            BurrowProcess(directory / "burrow", settings, zookeeper=zookeeper_module.hosts) as burrow:
        yield ours, burrow


def wait_for_topic(monitors: tuple[MonitorProcess, ...], topic: str, offsets: list[int]) -> None:
    """Both monitors know the topic's broker offsets (commits that arrive earlier are dropped by both)."""
    for monitor in monitors:
        wait_until(lambda m=monitor: broker_offsets(m, topic) == offsets, 60, interval=0.1,
                   message=f"{monitor.name} to see broker offsets {offsets} of {topic}")


@pytest.fixture(scope="module")
def producer(broker) -> Iterator[Producer]:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    yield producer
    producer.flush(10)
    del producer  # librdkafka would keep reconnecting to a stopped broker


@pytest.fixture(scope="module")
def groups(broker, monitors, zookeeper_module, producer) -> Iterator[dict[str, CommitLoop]]:
    """Every group of the table above; the live ones keep committing until the module's tests are done."""
    bootstrap = broker.bootstrap
    backlogs = {"side-ok": [20, 10], "side-stop": [40, 10], "side-partial": [30, 30, 30], "side-stall": [40, 10],
                "side-warn": [0, 10], "side-rewind": [40, 10], "side-zk": [100, 50]}
    for topic, backlog in backlogs.items():
        create_topic(bootstrap, topic, len(backlog))
        for partition, count in enumerate(backlog):
            produce(producer, topic, partition, count)
    for topic, backlog in backlogs.items():
        wait_for_topic(monitors, topic, backlog)

    def fall_behind(round_number: int) -> dict[int, int]:
        produce(producer, "side-warn", 0, 10)
        wait_for_topic(monitors, "side-warn", [10 * (round_number + 1), 10])
        return {0: 3 * (round_number + 1), 1: 10}

    with contextlib.ExitStack() as stack:
        finished = [
            stack.enter_context(committing("confluent", bootstrap, "side-ok", "side-ok", lambda _: {0: 20, 1: 10},
                                           rounds=INTERVALS)),
            stack.enter_context(committing("kafka-python", bootstrap, "side-stop", "side-stop",
                                           lambda n: {0: 5 * (n + 1), 1: 10}, rounds=INTERVALS)),
            stack.enter_context(committing("confluent", bootstrap, "side-partial", "side-partial",
                                           lambda _: {0: 30, 1: 30}, partitions=3, rounds=INTERVALS)),
        ]
        live = {
            "side-stall": stack.enter_context(committing("kafka-python", bootstrap, "side-stall", "side-stall",
                                                         lambda _: {0: 15, 1: 10})),
            "side-warn": stack.enter_context(committing("confluent", bootstrap, "side-warn", "side-warn",
                                                        fall_behind)),
            "side-rewind": stack.enter_context(committing("kafka-python", bootstrap, "side-rewind", "side-rewind",
                                                          lambda n: {0: 30 - n, 1: 10})),
        }
        zk = KazooClient(hosts=zookeeper_module.hosts)
        zk.start(30)
        stack.callback(zk.close)
        stack.callback(zk.stop)
        base = f"{ZOOKEEPER_PATH}/consumers/side-zk"
        zk.create(f"{base}/owners/side-zk/0", b"side-zk_host-1-0", makepath=True)
        zk.create(f"{base}/offsets/side-zk/0", b"60", makepath=True)
        zk.create(f"{base}/offsets/side-zk/1", b"50", makepath=True)

        for consumer in finished + list(live.values()):
            wait_until(lambda c=consumer: c.committed(1), 60, message="every consumer's first commit")
        # burrowpy's storage, like Burrow's, forgets the owners of a group asked about before its first
        # commit is stored: take every commit in before the tests ask.
        wait_until_offsets_topic_read(monitors[0])
        for consumer in finished:
            wait_until(lambda c=consumer: c.committed(INTERVALS), 60, message="four commits of each finished group")
        yield live


def lag_view(monitor: MonitorProcess, group: str) -> dict | None:
    status, body = monitor.get(f"/v3/kafka/{CLUSTER}/consumer/{group}/lag")
    return body["status"] if status == 200 else None


def wait_for_expected_status(monitor: MonitorProcess, group: str) -> dict:
    partition_status, group_status = EXPECTED[group]

    def reached() -> dict | None:
        view = lag_view(monitor, group)
        if view is None or view["status"] != group_status:
            return None
        first = next(p for p in view["partitions"] if p["partition"] == 0)
        return view if first["status"] == partition_status else None
    return wait_until(reached, 60, interval=0.25,
                      message=f"{monitor.name} to report {group} as {partition_status}/{group_status}")


def settled_figures(view: dict) -> dict:
    """What must be equal between the two monitors for a group that no longer commits."""
    return {
        "status": view["status"],
        "partition_count": view["partition_count"],
        "totallag": view["totallag"],
        "complete": view["complete"],
        "partitions": [(p["topic"], p["partition"], p["status"], p["current_lag"], p["complete"],
                        p["end"] and (p["end"]["offset"], p["end"]["lag"]))
                       for p in sorted(view["partitions"], key=lambda p: (p["topic"], p["partition"]))],
    }


def test_same_group_and_topic_lists_apart_from_burrowpys_own_group(monitors, groups):
    def lists() -> tuple[list[str], list[str]] | None:
        answers = [m.get(f"/v3/kafka/{CLUSTER}/consumer")[1]["consumers"] for m in monitors]
        return answers if all(set(EXPECTED) <= set(a) for a in answers) else None
    our_groups, burrows_groups = wait_until(lists, 60, interval=0.25, message="both monitors to list every group")
    assert sorted(our_groups) == sorted([*EXPECTED, SELF_GROUP])
    assert sorted(burrows_groups) == sorted(EXPECTED)
    our_topics, burrows_topics = (sorted(m.get(f"/v3/kafka/{CLUSTER}/topic")[1]["topics"]) for m in monitors)
    assert our_topics == burrows_topics == sorted(["__consumer_offsets", *EXPECTED])


@pytest.mark.parametrize("group", SETTLED)
def test_settled_groups_same_partition_counts_lags_and_statuses(monitors, groups, group):
    ours, burrow = monitors
    our_view = wait_for_expected_status(ours, group)
    burrow_view = wait_for_expected_status(burrow, group)
    assert settled_figures(our_view) == settled_figures(burrow_view)


@pytest.mark.parametrize("group", LIVE_KAFKA_GROUPS)
def test_live_groups_same_statuses(monitors, groups, group):
    ours, burrow = monitors
    our_view = wait_for_expected_status(ours, group)
    burrow_view = wait_for_expected_status(burrow, group)
    assert our_view["partition_count"] == burrow_view["partition_count"] == 2
    assert [p["status"] for p in our_view["partitions"]] == [p["status"] for p in burrow_view["partitions"]]


def test_owners_only_burrowpy_decodes(monitors, groups):
    ours, burrow = monitors
    for group in LIVE_KAFKA_GROUPS:
        client_id = groups[group].client_id
        our_partitions = wait_for_expected_status(ours, group)["partitions"]
        burrow_partitions = wait_for_expected_status(burrow, group)["partitions"]
        assert {(p["owner"], p["client_id"]) for p in our_partitions} == {("/127.0.0.1", client_id)}
        assert {(p["owner"], p["client_id"]) for p in burrow_partitions} == {("", "")}
    zk_owners = [[p["owner"] for p in wait_for_expected_status(m, "side-zk")["partitions"]] for m in monitors]
    assert zk_owners == [["side-zk_host-1-0", ""], ["", ""]]
