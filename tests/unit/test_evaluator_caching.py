"""The caching evaluator against the real inmemory storage, with a fake clock (spec 1.1, 1.2, 1.6 group cases)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
import structlog

from burrowpy.config import ConfigError, Section
from burrowpy.evaluator import caching
from burrowpy.evaluator.caching import CachingEvaluator
from burrowpy.evaluator.group import assess_group, group_basis
from burrowpy.protocol import (
    EvaluatorRequest,
    SetBrokerOffset,
    SetBrokerOffsets,
    SetConsumerOffset,
    SetDeleteTopic,
    Status,
)
from burrowpy.storage.inmemory import InMemoryStorage


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


def evaluator_section(**keys):
    return Section("burrowpy.yaml", "evaluator.default", dict(keys))


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
async def storage(clock):
    """Burrow's evaluator fixture: broker offset 4321; "g" has a full ring, "g2" half of one."""
    module = InMemoryStorage(
        "default",
        Section("burrowpy.yaml", "storage.default", {}),
        ["local", "my cluster"],
        clock,
        structlog.get_logger(),
    )
    await module.start()
    start_ms = int(clock.now) * 1000 - 100000
    for cluster in ("local", "my cluster"):
        module.submit(SetBrokerOffset(cluster, "t", 0, 1, 4321, 0))
    await module.flush()  # broker offsets and commits go to different workers: commits need them first
    for cluster in ("local", "my cluster"):
        for i in range(10):
            module.submit(
                SetConsumerOffset(cluster, "g", "t", 0, 1000 + i * 100, 10 + i, start_ms + i * 10000)
            )
        for i in range(5):
            module.submit(
                SetConsumerOffset(cluster, "g2", "t", 0, 1000 + i * 100, 10 + i, start_ms + i * 10000)
            )
    await module.flush()
    yield module
    await module.stop()


@pytest.fixture
async def evaluator(storage, clock):
    module = CachingEvaluator(
        "default", evaluator_section(**{"expire-cache": 30}), storage, clock, structlog.get_logger()
    )
    await module.start()
    yield module
    await module.stop()


def test_config_defaults_and_describe(storage, clock):
    module = CachingEvaluator("default", evaluator_section(), storage, clock, structlog.get_logger())
    assert (module.expire_cache, module.minimum_complete, module.allowed_lag) == (10, 0.0, 0)
    assert module.describe() == {"class-name": "caching", "expire-cache": 10}


@pytest.mark.parametrize(
    ("keys", "key", "message"),
    [
        ({"minimum-complete": 1.5}, "minimum-complete", "between 0 and 1"),
        ({"minimum-complete": "most"}, "minimum-complete", "number"),
        ({"allowed-lag": -1}, "allowed-lag", "at least 0"),
        ({"expire-cache": "soon"}, "expire-cache", "integer"),
        ({"expire_cache": 5}, "expire_cache", "unknown key"),
    ],
)
def test_config_errors_name_the_key(storage, clock, keys, key, message):
    with pytest.raises(ConfigError) as error:
        CachingEvaluator("default", evaluator_section(**keys), storage, clock, structlog.get_logger())
    assert error.value.path == f"evaluator.default.{key}" and message in error.value.message


async def test_unknown_group_is_notfound_with_burrows_shape(evaluator):
    status = await evaluator.evaluate("local", "nosuchgroup", False)
    assert status.to_json() == {
        "cluster": "local",
        "group": "nosuchgroup",
        "status": "NOTFOUND",
        "complete": 1.0,
        "partitions": [],
        "partition_count": 0,
        "maxlag": None,
        "totallag": 0,
        "max_lag_seconds": None,  # burrowpy's additions after Burrow's fields
        "catch_up_forecast": None,
        "catch_up_seconds": None,
        "falling_behind_per_second": None,
    }
    assert (await evaluator.evaluate("nowhere", "g", True)).status is Status.NOTFOUND


async def test_full_ring_is_ok_and_showall_lists_every_partition(evaluator):
    status = await evaluator.evaluate("local", "g", False)
    assert (status.status, status.complete, status.partition_count, status.totallag) == (
        Status.OK,
        1.0,
        1,
        2421,
    )
    assert (status.cluster, status.group, status.partitions) == ("local", "g", [])
    everything = await evaluator.evaluate("local", "g", True)
    assert len(everything.partitions) == 1 and everything.maxlag is everything.partitions[0]


async def test_incomplete_ring_is_err(evaluator):
    status = await evaluator.evaluate("local", "g2", False)
    assert (status.status, status.complete, status.partition_count, status.totallag) == (
        Status.ERR,
        0.0,
        1,
        2921,
    )
    [partition] = status.partitions
    assert (partition.status, partition.complete) == (Status.STOP, 0.5)
    assert (status.maxlag.start.offset, status.maxlag.end.offset) == (1000, 1400)


async def test_group_with_its_topics_deleted_is_ok_and_empty(storage, evaluator):
    storage.submit(SetDeleteTopic("local", "t"))
    await storage.flush()
    status = await evaluator.evaluate("local", "g", True)
    assert (status.status, status.partitions, status.complete) == (Status.OK, [], 0.0)


async def test_cluster_names_with_spaces_work(evaluator):
    assert (await evaluator.evaluate("my cluster", "g", True)).status is Status.OK


async def test_results_are_cached_for_expire_cache_seconds(storage, evaluator, clock):
    first = await evaluator.evaluate("local", "g", True)
    # A commit that rewinds the group well below where it was: the cached OK stays until it expires.
    storage.submit(SetConsumerOffset("local", "g", "t", 0, 10, 100, int(clock.now) * 1000))
    await storage.flush()
    clock.now += 29
    assert await evaluator.evaluate("local", "g", True) is first
    clock.now += 1
    fresh = await evaluator.evaluate("local", "g", True)
    assert fresh is not first and fresh.status is Status.ERR
    assert fresh.partitions[0].status is Status.REWIND


async def test_notfound_is_cached_too(storage, evaluator, clock):
    assert (await evaluator.evaluate("local", "late", True)).status is Status.NOTFOUND
    storage.submit(SetConsumerOffset("local", "late", "t", 0, 4321, 1, int(clock.now) * 1000))
    await storage.flush()
    assert (await evaluator.evaluate("local", "late", True)).status is Status.NOTFOUND
    clock.now += 30
    assert (await evaluator.evaluate("local", "late", True)).status is Status.OK


async def test_concurrent_requests_share_one_evaluation(evaluator):
    results = await asyncio.gather(*(evaluator.evaluate("local", "g2", True) for _ in range(20)))
    assert all(result is results[0] for result in results)
    filtered = await asyncio.gather(*(evaluator.evaluate("local", "g2", False) for _ in range(3)))
    assert all(result.maxlag is results[0].maxlag for result in filtered)


async def test_many_groups_at_once_are_each_groups_own_evaluation(storage, evaluator, clock):
    """evaluations (the trend sampler's, one storage request for the groups): in order, each the one evaluation
    gives, kept as long, shared with concurrent callers, and a commit after the expiry seen (OK to ERR)."""
    first = await evaluator.evaluations("local", ["g", "g2", "absent"])
    assert [e.status for e in first] == [Status.OK, Status.ERR, Status.NOTFOUND]
    assert [await evaluator.evaluation("local", group) for group in ("g", "g2", "absent")] == first
    assert first[0].result(True) == dataclasses.replace(await evaluator.evaluate("my cluster", "g", True), cluster="local")
    storage.submit(SetConsumerOffset("local", "g", "t", 0, 10, 100, int(clock.now) * 1000))
    await storage.flush()
    clock.now += 29
    assert (await evaluator.evaluations("local", ["g"]))[0] is first[0]
    clock.now += 1
    batch, alone, again = await asyncio.gather(evaluator.evaluations("local", ["g", "g2"]),
                                               evaluator.evaluation("local", "g"), evaluator.evaluations("local", ["g"]))
    assert batch[0] is alone is again[0] and batch[0] is not first[0]
    assert batch[0].status is Status.ERR and batch[0].result(True).partitions[0].status is Status.REWIND
    assert batch[1].result(True) == first[1].result(True)  # g2 unchanged: the same answer, evaluated again


async def test_a_batch_hands_the_loop_back_between_groups_and_each_result_is_right(storage, evaluator, clock,
                                                                                   monkeypatch):
    """evaluations hands the loop back every EVALUATION_STEP seconds of work (here 0: after every group): a task
    running meanwhile sees the batch part done, and every group's evaluation is the one it gets alone."""
    groups = [f"many-{n:02d}" for n in range(24)]
    start_ms = int(clock.now) * 1000 - 100000
    for n, group in enumerate(groups):
        for i in range(10 if n % 3 else 4):  # two in three complete, lagging by n; the others short of a window
            storage.submit(SetConsumerOffset("local", group, "t", 0, 4321 - n - (9 - i) * n, 10 + i,
                                             start_ms + i * 10000))
    await storage.flush()
    monkeypatch.setattr(caching, "EVALUATION_STEP", 0.0, raising=False)
    seen: list[int] = []
    batch = asyncio.ensure_future(evaluator.evaluations("local", [*groups, "absent"]))

    async def watch() -> None:  # once a turn of the loop: how many of the batch's groups are evaluated
        while not batch.done():
            seen.append(sum((("local", group) in evaluator._cache) for group in groups))
            await asyncio.sleep(0)

    await asyncio.gather(batch, watch())
    assert any(0 < count < len(groups) for count in seen), seen
    results = batch.result()
    alone = CachingEvaluator("alone", evaluator_section(), storage, clock, structlog.get_logger())
    for group, evaluation in zip([*groups, "absent"], results, strict=True):
        assert evaluation.group == group
        assert evaluation.result(True) == (await alone.evaluation("local", group)).result(True)
    assert {e.status for e in results} == {Status.OK, Status.ERR, Status.NOTFOUND}
    await alone.stop()


async def test_channel_style_requests_are_answered(evaluator):
    reply = asyncio.get_running_loop().create_future()
    evaluator.submit(EvaluatorRequest("local", "g", True, reply))
    status = await asyncio.wait_for(reply, 5)
    assert status.status is Status.OK and len(status.partitions) == 1


async def test_storage_failures_are_raised_not_cached(clock):
    storage = InMemoryStorage(
        "default", Section("f", "storage.default", {}), ["local"], clock, structlog.get_logger()
    )
    evaluator = CachingEvaluator("default", evaluator_section(), storage, clock, structlog.get_logger())
    await evaluator.start()
    with pytest.raises(RuntimeError, match="not running"):
        await evaluator.evaluate("local", "g", True)
    with pytest.raises(RuntimeError, match="not running"):
        await evaluator.evaluations("local", ["g", "h"])
    reply = asyncio.get_running_loop().create_future()
    evaluator.submit(EvaluatorRequest("local", "g", True, reply))
    with pytest.raises(RuntimeError):
        await asyncio.wait_for(reply, 5)
    await storage.start()
    try:
        assert (await evaluator.evaluate("local", "g", True)).status is Status.NOTFOUND
    finally:
        await evaluator.stop()
        await storage.stop()


async def test_allowed_lag_and_minimum_complete_come_from_config(storage, clock):
    module = CachingEvaluator(
        "default", evaluator_section(**{"minimum-complete": 0.6}), storage, clock, structlog.get_logger()
    )
    assert (await module.evaluate("local", "g2", True)).status is Status.OK
    module = CachingEvaluator(
        "default", evaluator_section(**{"allowed-lag": 3000}), storage, clock, structlog.get_logger()
    )
    assert (await module.evaluate("local", "g2", True)).status is Status.OK


@pytest.mark.parametrize("partitions", [3, 60], ids=["partition-by-partition", "arrays"])
async def test_an_idle_refresh_takes_the_new_samples_into_the_kept_basis(clock, monkeypatch, partitions):
    """A lagging group after a broker offset refresh that read the same newest offsets: its kept basis takes the new
    samples (no group_basis, no whole answer from storage), with a fresh evaluation's answer; a refresh that moved a
    newest offset makes both again."""
    storage = InMemoryStorage("s", Section("b.yaml", "storage.s", {"intervals": 4}), ["local"], clock,
                              structlog.get_logger())
    evaluator = CachingEvaluator("e", evaluator_section(**{"expire-cache": 0}), storage, clock, structlog.get_logger())
    made = []
    whole = []
    monkeypatch.setattr(caching, "group_basis", lambda *args: made.append(args) or group_basis(*args))
    consumer_topics = storage.state._consumer_topics
    monkeypatch.setattr(storage.state, "_consumer_topics", lambda *args: whole.append(args) or consumer_topics(*args))
    await storage.start()
    await evaluator.start()
    offsets = [700] * partitions

    def refresh() -> None:
        nonlocal offsets
        storage.submit(SetBrokerOffsets("local", "t", partitions, list(range(partitions)), offsets,
                                        int(clock.now * 1000)))

    async def evaluated_as_fresh() -> None:
        evaluation = await evaluator.evaluation("local", "g")
        fresh = assess_group("local", "g", storage.state.consumer("local", "g", int(clock.now)), clock.now)
        whole.pop()  # the fresh answer's own
        assert evaluation.result(True) == fresh.result(True)
        assert (evaluation.max_lag_seconds, evaluation.forecast) == (fresh.max_lag_seconds, fresh.forecast)

    try:
        for order in range(4):  # producing 100 records and committing 100 every 10 s, 700 behind
            offsets = [offset + 100 * bool(order) for offset in offsets]
            refresh()
            await storage.flush()
            for partition in range(partitions):
                storage.submit(SetConsumerOffset("local", "g", "t", partition, 100 * order, order + 1,
                                                 int(clock.now * 1000)))
            await storage.flush()
            clock.now += 10
        await evaluated_as_fresh()
        assert (len(made), len(whole)) == (1, 1)
        for _ in range(6):  # idle refreshes, the window's oldest samples leaving it
            refresh()
            await storage.flush()
            clock.now += 10
            await evaluated_as_fresh()
        assert (len(made), len(whole)) == (1, 1)
        offsets[1] += 1
        refresh()
        await storage.flush()
        await evaluated_as_fresh()
        assert (len(made), len(whole)) == (2, 2)
    finally:
        await evaluator.stop()
        await storage.stop()


async def test_a_batch_leaves_no_evaluation_under_way(storage, evaluator, clock):
    """Once evaluations has answered, none of its groups is still an evaluation under way (a later call evaluates
    them again rather than sharing a finished one), also when storage fails."""
    clock.now += 60  # past expire-cache
    first = await evaluator.evaluations("local", ["g", "g2", "absent"])
    assert evaluator._evaluating == {}
    clock.now += 60
    again = await evaluator.evaluations("local", ["g", "g2", "absent"])
    assert all(before is not after for before, after in zip(first, again, strict=True))
    assert evaluator._evaluating == {}

    class Failing:
        def submit(self, request):
            request.reply.set_exception(RuntimeError("storage is gone"))

    evaluator._storage = Failing()
    clock.now += 60
    with pytest.raises(RuntimeError, match="storage is gone"):
        await evaluator.evaluations("local", ["g"])
    assert evaluator._evaluating == {}
