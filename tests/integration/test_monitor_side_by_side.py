"""burrowpy next to Burrow: the same Kafka, the same groups, the same settings; both monitors must give the
same group list, partition counts, lag figures and statuses. Two pairings run the same scenario:

- ``burrow-1.2.1``: Debian's Burrow 1.2.1 (2018) and burrowpy, both reading our own broker;
- ``burrow-current``: the current Burrow (v1.9.5, built by ``make install``) and burrowpy, both reading a
  real Apache Kafka 4.4 node (KRaft). It skips, saying why, on a machine where no current Burrow could be
  built (the Go module proxy refuses github.com/linkedin/Burrow, so ``make install`` builds it from a git
  snapshot of Burrow's repository when one is there).

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
- burrowpy lists one more group than Burrow 1.2.1, ``burrow-local``: its consumer module reports its own
  position in ``__consumer_offsets``, as the current Burrow's does (Burrow 1.2.1 has no self-reporting).
- Owners: our broker writes group metadata value v3 (as Kafka 2.3+ does), which Burrow 1.2.1 does not
  decode, so Burrow 1.2.1 shows no owner or client id for Kafka-committed groups; burrowpy does. The
  current Burrow decodes the classic group metadata Kafka 4.4 writes and shows the same owners and client
  ids as burrowpy. Burrow 1.2.1's kafka_zk module never reads the owners znode; the current Burrow's and
  burrowpy's do.
- Completeness of a partition a group never committed (side-partial's third): the current Burrow keeps an
  empty window for it and counts one empty slot as filled (1/intervals); burrowpy and Burrow 1.2.1 say 0.
- Lag figures are compared where they are settled (groups that stopped committing); for live groups the
  two monitors read commits and broker offsets at different moments, so only their statuses are compared.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from burrow_support import (
    BURROW_BINARY,
    CLUSTER,
    CURRENT_BURROW_BINARY,
    BurrowProcess,
    BurrowpyProcess,
    MonitorProcess,
    MonitorSettings,
    current_burrow_version,
)
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from harness import wait_until
from kazoo.client import KazooClient
from monitor_support import (
    OFFSETS_TOPIC,
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
COMMITTED_EVERY_ROUND = ("side-ok", "side-stop", "side-partial")  # INTERVALS commits each: full windows
LIVE_KAFKA_GROUPS = ("side-stall", "side-warn", "side-rewind")


@dataclass(frozen=True)
class Pairing:
    """One Burrow and the Kafka it shares with burrowpy."""

    burrow: Path
    kafka_version: str  # Burrow's client-profile kafka-version: what Sarama speaks
    kafka_fixture: str  # the fixture giving the Kafka: ``broker`` (ours) or ``kafka`` (Apache Kafka 4.4)
    bootstrap: str = ""

    @property
    def zookeeper_path(self) -> str:
        """Where this pairing's old-style consumers keep offsets (both pairings share one ZooKeeper)."""
        return f"/side-{self.kafka_fixture}"


PAIRINGS = {
    "burrow-1.2.1": Pairing(BURROW_BINARY, "0.10.0", "broker"),
    "burrow-current": Pairing(CURRENT_BURROW_BINARY, "4.0.0", "kafka"),
}


@pytest.fixture(scope="module", params=list(PAIRINGS))
def pairing(request) -> Pairing:
    chosen = PAIRINGS[request.param]
    if chosen.burrow == CURRENT_BURROW_BINARY and current_burrow_version() is None:
        pytest.skip(f"no current Burrow at {CURRENT_BURROW_BINARY}: the Go module proxy refuses "
                    "github.com/linkedin/Burrow and make install found no git snapshot of it (BURROW_GIT)")
    return Pairing(chosen.burrow, chosen.kafka_version, chosen.kafka_fixture,
                   request.getfixturevalue(chosen.kafka_fixture).bootstrap)


@pytest.fixture(scope="module")
def monitors(pairing, zookeeper_module, tmp_path_factory) -> Iterator[tuple[BurrowpyProcess, BurrowProcess]]:
    zk = KazooClient(hosts=zookeeper_module.hosts)
    zk.start(30)
    zk.ensure_path(f"{pairing.zookeeper_path}/consumers")  # Burrow 1.2.1 watches it from the start
    zk.stop()
    zk.close()
    settings = MonitorSettings(pairing.bootstrap, intervals=INTERVALS, offset_refresh=1, topic_refresh=1,
                               expire_cache=1, minimum_complete=1.0,
                               zookeeper_offsets=(zookeeper_module.hosts, pairing.zookeeper_path))
    directory = tmp_path_factory.mktemp("side-by-side")
    with BurrowpyProcess(directory / "burrowpy", settings) as ours:
        # A new Apache Kafka has no offsets topic until a group needs one; burrowpy starts anyway and waits
        # for it, Burrow gives up when its partitions have no leaders yet, so it starts after.
        offsets_topic_with_leaders(pairing.bootstrap)
        with BurrowProcess(directory / "burrow", settings, zookeeper=zookeeper_module.hosts,
                           kafka_version=pairing.kafka_version, binary=pairing.burrow) as burrow:
            yield ours, burrow


def offsets_topic_with_leaders(bootstrap: str) -> None:
    """Have the cluster create ``__consumer_offsets`` (a coordinator lookup does) and wait for its leaders.
    (A consumer asks, not the AdminClient: confluent-kafka 2.16.1's list_consumer_group_offsets crashes the
    process against Kafka 4.4.)"""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "side-offsets-topic"})

    def coordinator_answers() -> bool:
        consumer.committed([ConfluentPartition(OFFSETS_TOPIC, 0)], timeout=10)
        return True

    def every_partition_led() -> bool:
        topic = admin.list_topics(OFFSETS_TOPIC, timeout=10).topics.get(OFFSETS_TOPIC)
        return (topic is not None and topic.error is None and len(topic.partitions) > 0
                and all(p.leader >= 0 and p.error is None for p in topic.partitions.values()))
    try:
        wait_until(coordinator_answers, 60, interval=0.25, message="a group coordinator (creating the offsets topic)")
    finally:
        consumer.close()
    wait_until(every_partition_led, 60, interval=0.25, message="every offsets topic partition to have a leader")


def test_burrowpy_waits_for_a_new_clusters_offsets_topic(pairing, monitors, groups):
    ours, _ = monitors
    waited = "offsets topic not found yet" in ours.log_path.read_text()
    assert waited == (pairing.kafka_fixture == "kafka")  # our broker creates the topic when it starts


def wait_for_topic(monitors: tuple[MonitorProcess, ...], topic: str, offsets: list[int]) -> None:
    """Both monitors know the topic's broker offsets (commits that arrive earlier are dropped by both)."""
    for monitor in monitors:
        wait_until(lambda m=monitor: broker_offsets(m, topic) == offsets, 60, interval=0.1,
                   message=f"{monitor.name} to see broker offsets {offsets} of {topic}")


@pytest.fixture(scope="module")
def producer(pairing) -> Iterator[Producer]:
    producer = Producer({"bootstrap.servers": pairing.bootstrap, "linger.ms": 0})
    yield producer
    producer.flush(10)
    del producer  # librdkafka would keep reconnecting to a stopped broker


@pytest.fixture(scope="module")
def groups(pairing, monitors, zookeeper_module, producer) -> Iterator[dict[str, CommitLoop]]:
    """Every group of the table above; the live ones keep committing until the module's tests are done."""
    bootstrap = pairing.bootstrap
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
        base = f"{pairing.zookeeper_path}/consumers/side-zk"
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


def wait_for_expected_status(monitor: MonitorProcess, group: str, full_windows: bool = False) -> dict:
    """The group's /lag view once it shows the expected statuses and, with ``full_windows``, once every
    partition the group committed has a full window (with minimum-complete 1.0 a group is OK before its last
    commits are read, and an answer is cached for a second)."""
    partition_status, group_status = EXPECTED[group]

    def reached() -> dict | None:
        view = lag_view(monitor, group)
        if view is None or view["status"] != group_status:
            return None
        if full_windows and any(p["end"] and p["complete"] != 1 for p in view["partitions"]):
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


def test_same_group_and_topic_lists_apart_from_burrowpys_own_group(pairing, monitors, groups):
    def lists() -> tuple[list[str], list[str]] | None:
        answers = [m.get(f"/v3/kafka/{CLUSTER}/consumer")[1]["consumers"] for m in monitors]
        return answers if all(set(EXPECTED) <= set(a) for a in answers) else None
    our_groups, burrows_groups = wait_until(lists, 60, interval=0.25, message="both monitors to list every group")
    assert sorted(our_groups) == sorted([*EXPECTED, SELF_GROUP])
    self_reporting = [] if pairing.burrow == BURROW_BINARY else [SELF_GROUP]
    assert sorted(burrows_groups) == sorted([*EXPECTED, *self_reporting])
    our_topics, burrows_topics = (sorted(m.get(f"/v3/kafka/{CLUSTER}/topic")[1]["topics"]) for m in monitors)
    assert our_topics == burrows_topics == sorted(["__consumer_offsets", *EXPECTED])


@pytest.mark.parametrize("group", SETTLED)
def test_settled_groups_same_partition_counts_lags_and_statuses(pairing, monitors, groups, group):
    ours, burrow = monitors
    full_windows = group in COMMITTED_EVERY_ROUND
    our_view = wait_for_expected_status(ours, group, full_windows)
    burrow_view = wait_for_expected_status(burrow, group, full_windows)
    if group == "side-partial" and pairing.burrow != BURROW_BINARY:
        # The partition the group never committed: the current Burrow keeps an empty window for it and its
        # evaluator counts one empty slot as filled (complete 1/intervals); burrowpy says 0, as Burrow 1.2.1.
        never_committed = burrow_view["partitions"][2]
        assert (never_committed["partition"], never_committed["complete"]) == (2, 1 / INTERVALS)
        assert our_view["partitions"][2]["complete"] == 0
        never_committed["complete"] = 0
    assert settled_figures(our_view) == settled_figures(burrow_view)


@pytest.mark.parametrize("group", LIVE_KAFKA_GROUPS)
def test_live_groups_same_statuses(monitors, groups, group):
    ours, burrow = monitors
    our_view = wait_for_expected_status(ours, group)
    burrow_view = wait_for_expected_status(burrow, group)
    assert our_view["partition_count"] == burrow_view["partition_count"] == 2
    assert [p["status"] for p in our_view["partitions"]] == [p["status"] for p in burrow_view["partitions"]]


def test_owners(pairing, monitors, groups):
    """burrowpy shows every owner; Burrow 1.2.1 none, the current Burrow the same as burrowpy."""
    ours, burrow = monitors
    for group in LIVE_KAFKA_GROUPS:
        client_id = groups[group].client_id
        our_partitions = wait_for_expected_status(ours, group)["partitions"]
        burrow_partitions = wait_for_expected_status(burrow, group)["partitions"]
        assert {(p["owner"], p["client_id"]) for p in our_partitions} == {("/127.0.0.1", client_id)}
        burrows_owners = {("", "")} if pairing.burrow == BURROW_BINARY else {("/127.0.0.1", client_id)}
        assert {(p["owner"], p["client_id"]) for p in burrow_partitions} == burrows_owners
    zk_owners = [[p["owner"] for p in wait_for_expected_status(m, "side-zk")["partitions"]] for m in monitors]
    burrows_zk_owners = ["", ""] if pairing.burrow == BURROW_BINARY else ["side-zk_host-1-0", ""]
    assert zk_owners == [["side-zk_host-1-0", ""], burrows_zk_owners]
