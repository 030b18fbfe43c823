"""The inmemory storage module: configuration, workers, request routing and answers."""

from __future__ import annotations

import asyncio

import pytest
import structlog
from structlog.testing import capture_logs

from burrowpy.config import ConfigError, Section
from burrowpy.protocol import (
    ClearConsumerOwners,
    FetchClusters,
    FetchConsumer,
    FetchConsumers,
    FetchConsumersForTopic,
    FetchConsumersIfChanged,
    FetchRecordTimeWants,
    FetchTopic,
    FetchTopics,
    SetBrokerOffset,
    SetConsumerOffset,
    SetConsumerOffsets,
    SetConsumerOwner,
    SetDeleteGroup,
    SetDeletePartitionOffsets,
    SetDeleteTopic,
)
from burrowpy.storage import inmemory
from burrowpy.storage.inmemory import InMemoryStorage


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.5) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


def section(**keys):
    return Section("burrowpy.yaml", "storage.default", dict(keys))


def build(clock=None, **keys):
    return InMemoryStorage(
        "default", section(**keys), ["local"], clock or FakeClock(), structlog.get_logger()
    )


@pytest.fixture
async def storage():
    module = build(workers=4)
    await module.start()
    yield module
    await module.stop()


async def ask(storage, request_type, *args):
    reply = asyncio.get_running_loop().create_future()
    storage.submit(request_type(*args, reply))
    return await asyncio.wait_for(reply, 5)


def test_config_defaults_follow_burrow():
    module = build()
    assert (
        module.intervals,
        module.expire_group,
        module.worker_count,
        module.queue_depth,
        module.min_distance,
    ) == (10, 604800, 20, 1, 0)
    assert module.group_allowlist is None and module.group_denylist is None
    assert module.describe() == {
        "class-name": "inmemory",
        "intervals": 10,
        "min-distance": 0,
        "group-allowlist": "",
        "expire-group": 604800,
    }


def test_config_values_and_group_lists():
    module = build(
        **{
            "class-name": "inmemory",
            "intervals": 5,
            "expire-group": 60,
            "workers": 2,
            "queue-depth": 100,
            "min-distance": 1,
            "group-allowlist": "^app-",
            "group-denylist": "-test$",
        }
    )
    assert (
        module.intervals,
        module.expire_group,
        module.worker_count,
        module.queue_depth,
        module.min_distance,
    ) == (5, 60, 2, 100, 1)
    assert module.describe()["group-allowlist"] == "^app-"
    assert module.accept_group("app-orders")
    assert not module.accept_group("app-orders-test")
    assert not module.accept_group("billing")


@pytest.mark.parametrize(
    ("keys", "path", "message"),
    [
        ({"intervals": 0}, "storage.default.intervals", "at least 1"),
        ({"workers": "many"}, "storage.default.workers", "integer"),
        ({"group-allowlist": "["}, "storage.default.group-allowlist", "bad regular expression"),
        ({"group-denylist": "("}, "storage.default.group-denylist", "bad regular expression"),
        ({"expire-groups": 5}, "storage.default.expire-groups", "unknown key"),
        (
            {"group-whitelist": "a", "group-allowlist": "b"},
            "storage.default.group-whitelist",
            "set only group-allowlist",
        ),
    ],
)
def test_config_errors_name_the_key(keys, path, message):
    with pytest.raises(ConfigError) as error:
        build(**keys)
    assert error.value.path == path and message in error.value.message
    assert "burrowpy.yaml" in str(error.value)


def test_old_whitelist_and_blacklist_keys_are_accepted_with_a_warning():
    with capture_logs() as logs:
        module = build(**{"group-whitelist": "^app", "group-blacklist": "test"})
    assert (
        module.accept_group("app-1") and not module.accept_group("app-test") and not module.accept_group("x")
    )
    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert [w["key"] for w in warnings] == [
        "storage.default.group-whitelist",
        "storage.default.group-blacklist",
    ]
    assert [w["use"] for w in warnings] == ["group-allowlist", "group-denylist"]


async def test_commits_are_stored_and_fetched(storage):
    storage.submit(SetBrokerOffset("local", "t", 0, 2, 4321, 0))
    storage.submit(SetBrokerOffset("local", "t", 1, 2, 10, 0))
    now_ms = int(FakeClock().now) * 1000
    for i in range(10):
        storage.submit(
            SetConsumerOffset("local", "g", "t", 0, 1000 + i * 100, 10 + i, now_ms - 100000 + i * 10000)
        )
    storage.submit(SetConsumerOwner("local", "g", "t", 0, "/10.0.0.1", "client-1"))
    await storage.flush()
    topics = await ask(storage, FetchConsumer, "local", "g")
    [first, second] = topics["t"]
    assert first.current_lag == 2421 and first.owner == "/10.0.0.1" and len(first.offsets) == 10
    assert first.offsets[0].observed_at == int(FakeClock().now) * 1000
    assert second.offsets == [] and second.current_lag == 0
    assert await ask(storage, FetchClusters) == ["local"]
    assert await ask(storage, FetchConsumers, "local") == ["g"]
    assert await ask(storage, FetchTopics, "local") == ["t"]
    assert await ask(storage, FetchTopic, "local", "t") == [4321, 10]
    assert await ask(storage, FetchConsumersForTopic, "local", "t") == ["g"]


async def test_unknown_cluster_topic_or_group_answers_none(storage):
    assert await ask(storage, FetchConsumers, "nowhere") is None
    assert await ask(storage, FetchTopics, "nowhere") is None
    assert await ask(storage, FetchTopic, "local", "t") is None
    assert await ask(storage, FetchConsumer, "local", "g") is None
    assert await ask(storage, FetchConsumersForTopic, "nowhere", "t") is None


@pytest.fixture
async def eight_workers():
    """Storage of eight workers whose topic t has a broker offset of 10,000; and the clock's now in ms."""
    storage = build(workers=8)
    await storage.start()
    try:
        storage.submit(SetBrokerOffset("local", "t", 0, 1, 10_000, 0))
        await storage.flush()
        yield storage, int(FakeClock().now) * 1000
    finally:
        await storage.stop()


async def test_requests_of_one_group_are_handled_in_submission_order(eight_workers):
    storage, now_ms = eight_workers
    for group in ("a", "b", "c", "d"):
        for order in range(1, 31):
            if order == 21:
                storage.submit(SetDeleteGroup("local", group))
            storage.submit(SetConsumerOffset("local", group, "t", 0, order * 10, order, now_ms))
        storage.submit(SetConsumerOwner("local", group, "t", 0, f"host-{group}", ""))
        storage.submit(ClearConsumerOwners("local", group))
        storage.submit(SetConsumerOwner("local", group, "t", 0, f"owner-{group}", ""))
    for group in ("a", "b", "c", "d"):
        [partition] = (await ask(storage, FetchConsumer, "local", group))["t"]
        # In order, every commit after the delete is an append (so it has a lag) and the delete
        # came before the last ten.
        assert [(o.order, o.lag) for o in partition.offsets] == [
            (n, 10_000 - n * 10) for n in range(21, 31)
        ]
        assert partition.owner == f"owner-{group}"


async def test_many_groups_in_one_request_are_each_answered_after_what_was_submitted_about_them(eight_workers):
    """FetchConsumersIfChanged (the trend sampler's) is split among the workers of its groups: each group's answer
    has every commit submitted before it, with no flush between (more commits than a worker handles in one turn of
    the loop), and a version given back copies only the groups that changed since."""
    storage, now_ms = eight_workers
    groups = [f"group-{n}" for n in range(24)]
    for n, group in enumerate(groups):
        for order in range(1, 200 + n):
            storage.submit(SetConsumerOffset("local", group, "t", 0, order * 10, order, now_ms))
    answers = await ask(storage, FetchConsumersIfChanged, "local", [*groups, "absent"], [None] * 25)
    assert answers[-1] is None
    for n, (_, topics) in enumerate(answers[:-1]):
        [partition] = topics["t"]
        assert [o.offset for o in partition.offsets if o is not None][-1] == (199 + n) * 10
    storage.submit(SetConsumerOffset("local", "group-7", "t", 0, 9000, 900, now_ms))
    again = await ask(storage, FetchConsumersIfChanged, "local", groups, [version for version, _ in answers[:-1]])
    assert [n for n, (_, topics) in enumerate(again) if topics is not None] == [7]
    [partition] = again[7][1]["t"]
    assert partition.offsets[-1].offset == 9000
    assert await ask(storage, FetchConsumersIfChanged, "local", [], []) == []


async def test_topic_requests_keep_their_order(storage):
    for round_number in range(3):
        storage.submit(SetBrokerOffset("local", "t", 0, 1, round_number, 0))
        storage.submit(SetDeleteTopic("local", "t"))
    storage.submit(SetBrokerOffset("local", "t", 0, 1, 99, 0))
    assert await ask(storage, FetchTopic, "local", "t") == [99]


async def test_offset_tombstone_forgets_the_group(storage):
    storage.submit(SetBrokerOffset("local", "t", 0, 1, 100, 0))
    storage.submit(SetConsumerOffset("local", "g", "t", 0, 50, 1, int(FakeClock().now) * 1000))
    storage.submit(SetDeletePartitionOffsets("local", "g", "t", 0))
    assert await ask(storage, FetchConsumer, "local", "g") is None
    assert await ask(storage, FetchConsumers, "local") == []


async def test_groups_expire_when_the_clock_moves_on():
    clock = FakeClock()
    storage = build(clock, **{"expire-group": 60})
    await storage.start()
    try:
        storage.submit(SetBrokerOffset("local", "t", 0, 1, 100, 0))
        storage.submit(SetConsumerOffset("local", "g", "t", 0, 50, 1, int(clock.now) * 1000))
        assert await ask(storage, FetchConsumer, "local", "g") is not None
        clock.now += 61
        assert await ask(storage, FetchConsumer, "local", "g") is None
        assert await ask(storage, FetchConsumers, "local") == []
        # Commits older than expire-group are not even stored.
        storage.submit(SetConsumerOffset("local", "g", "t", 0, 60, 2, int(clock.now - 61) * 1000))
        await storage.flush()
        assert await ask(storage, FetchConsumers, "local") == []
    finally:
        await storage.stop()


async def test_put_waits_for_room_in_the_workers_backlog():
    storage = build(workers=1, **{"queue-depth": 4})
    await storage.start()
    try:
        await storage.put(SetBrokerOffset("local", "t", 0, 1, 1_000_000, 0))
        now_ms = int(FakeClock().now) * 1000
        most_waiting = 0
        for order in range(1, 501):
            await storage.put(SetConsumerOffset("local", "g", "t", 0, order, order, now_ms))
            most_waiting = max(most_waiting, storage.pending())
        assert most_waiting <= 4
        await storage.flush()
        assert storage.pending() == 0
        [partition] = (await ask(storage, FetchConsumer, "local", "g"))["t"]
        assert partition.offsets[-1].offset == 500
    finally:
        await storage.stop()


async def test_submit_never_waits_and_stop_finishes_the_backlog():
    storage = build(workers=2)
    await storage.start()
    storage.submit(SetBrokerOffset("local", "t", 0, 1, 1_000_000, 0))
    now_ms = int(FakeClock().now) * 1000
    for order in range(1, 2001):
        storage.submit(SetConsumerOffset("local", "g", "t", 0, order, order, now_ms))
    assert storage.pending() == 2001  # nothing ran yet: submit did not yield
    reply = asyncio.get_running_loop().create_future()
    storage.submit(FetchConsumer("local", "g", reply))
    await storage.stop()
    assert reply.done() and reply.result()["t"][0].offsets[-1].offset == 2000
    with pytest.raises(RuntimeError, match="not running"):
        storage.submit(FetchClusters(asyncio.get_running_loop().create_future()))


async def test_runs_of_commits_count_by_their_commits_and_log_each_drop():
    storage = build(workers=2)
    await storage.start()
    try:
        storage.submit(SetBrokerOffset("local", "t", 0, 2, 1_000_000, 0))
        await storage.flush()
        now_ms = int(FakeClock().now) * 1000
        commits = [value for order in range(1, 1001) for value in (0, order, order, now_ms)]
        storage.submit_many([SetConsumerOffsets("local", "g", "t", commits),
                             SetConsumerOffsets("local", "h", "t", [0, 5, 1, now_ms, 7, 6, 2, now_ms])])
        assert storage.pending() == 1002  # nothing ran yet: the runs' commits, not the two requests
        with capture_logs() as logs:
            await storage.flush()
        assert storage.pending() == 0
        [drop] = [entry for entry in logs if entry["event"] == "dropped"]
        assert drop["reason"] == "partition unknown to the brokers"
        assert drop["request"] == SetConsumerOffset("local", "h", "t", 7, 6, 2, now_ms)
        [partition, _] = (await ask(storage, FetchConsumer, "local", "g"))["t"]
        assert [commit.offset for commit in partition.offsets] == list(range(991, 1001))
    finally:
        await storage.stop()


async def test_unknown_request_type_gets_an_empty_answer(storage):
    class FetchSomethingElse:
        def __init__(self, reply):
            self.reply = reply

    with capture_logs() as logs:
        assert await ask(storage, FetchSomethingElse) is None
    assert any(entry["event"] == "unknown storage request type" for entry in logs)


async def test_a_failing_request_costs_only_itself(storage):
    storage.submit(SetBrokerOffset("local", "t", 0, 1, 100, 0))
    with capture_logs() as logs:
        storage.submit(SetConsumerOffset("local", "g", "t", 0, 5, 1, None))  # no timestamp: a bug upstream
        with pytest.raises(TypeError):
            await ask(storage, FetchConsumers, ["not", "a", "name"])
        await storage.flush()
    assert [entry["event"] for entry in logs if entry["log_level"] == "error"] == [
        "storage request failed"
    ] * 2
    storage.submit(SetConsumerOffset("local", "g", "t", 0, 5, 1, int(FakeClock().now) * 1000))
    assert await ask(storage, FetchConsumers, "local") == ["g"]


async def test_a_caller_that_gave_up_does_not_break_the_worker(storage):
    reply = asyncio.get_running_loop().create_future()
    storage.submit(FetchClusters(reply))
    reply.cancel()
    assert await ask(storage, FetchClusters) == ["local"]


async def test_a_walk_of_every_group_is_answered_over_passes_bounded_in_time(monkeypatch):
    """FetchRecordTimeWants goes through every group (tens of ms at fleet scale): a worker takes it a group at a
    time, resuming it first in its next pass once the pass's _PASS_SECONDS are up (perf_counter faked: each reading
    1.1 ms after the last, so a pass takes two steps), and the answer is the whole walk's."""
    monkeypatch.setattr(inmemory, "_PASS_SECONDS", 0.002, raising=False)
    readings = iter(range(10**6))
    monkeypatch.setattr(inmemory, "perf_counter", lambda: next(readings) * 0.0011, raising=False)
    storage = build(workers=1)
    await storage.start()
    try:
        groups = 30
        for partition in range(groups):
            storage.submit(SetBrokerOffset("local", "t", partition, groups, 100, 0))
        now_ms = int(FakeClock().now) * 1000
        storage.submit_many(SetConsumerOffset("local", f"g{n:02d}", "t", n, n, 1, now_ms) for n in range(groups))
        await storage.flush()
        reply = asyncio.get_running_loop().create_future()
        storage.submit(FetchRecordTimeWants("local", reply))
        after = asyncio.get_running_loop().create_future()
        storage.submit(FetchClusters(after))  # the same worker's next request: answered after the walk
        turns = 0
        while not reply.done():
            assert not after.done()
            turns += 1
            await asyncio.sleep(0)
        assert turns > groups // 2
        assert reply.result() == [("t", n, n) for n in range(groups)]
        assert await asyncio.wait_for(after, 5) == ["local"]
        assert storage.pending() == 0
    finally:
        await storage.stop()
