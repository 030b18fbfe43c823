"""A group evaluated again from its kept basis (storage unchanged) gives exactly a fresh evaluation's answer.

The caching evaluator keeps each group's basis (everything its evaluation takes from the windows, without the
clock) and evaluates it again at a later time when storage says nothing it was made from has changed. Random
windows, changes and clocks, against the real inmemory storage: after every step the evaluator's answer is
compared with :func:`assess_group` of a fresh storage answer at the same time, and a step that changed nothing
the group's evaluation reads must have reused the basis. The same again through ``evaluations`` (the trend
sampler's: the group asked with another in one storage request).
"""

from __future__ import annotations

import asyncio

import pytest
import structlog
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from burrowpy.config import Section
from burrowpy.evaluator import group as group_module
from burrowpy.evaluator.caching import CachingEvaluator
from burrowpy.evaluator.group import assess_group
from burrowpy.protocol import (
    SetBrokerOffset,
    SetConsumerOffset,
    SetConsumerOwner,
    SetDeletePartitionOffsets,
    SetRecordTimes,
    Status,
)
from burrowpy.storage.inmemory import InMemoryStorage

START = 1_700_000_000.0
CLUSTER, GROUP = "local", "g"
TOPICS = {"a": 3, "b": 2}  # topic -> partitions


class FakeClock:
    def __init__(self) -> None:
        self.now = START

    def time(self) -> float:
        return self.now


partition = st.tuples(st.sampled_from(sorted(TOPICS)), st.integers(0, 2)).filter(lambda tp: tp[1] < TOPICS[tp[0]])
steps = st.one_of(
    st.tuples(st.just("tick"), st.floats(0.0, 400.0)),
    st.tuples(st.just("broker"), partition, st.sampled_from([0, 0, 0, 1, 7, 120])),
    st.tuples(st.just("commit"), partition, st.integers(-20, 60), st.integers(0, 90_000)),
    st.tuples(st.just("catch up"), partition, st.integers(0, 90_000)),
    st.tuples(st.just("owner"), partition, st.sampled_from(["c1", "c2"])),
    st.tuples(st.just("times"), partition, st.integers(0, 900_000)),
    st.tuples(st.just("forget"), partition),
)


async def run(changes: list[tuple], allowed_lag: int, max_lag_seconds: float, batched: bool = False) -> None:
    clock = FakeClock()
    storage = InMemoryStorage("s", Section("b.yaml", "storage.s", {"intervals": 4}), [CLUSTER], clock,
                              structlog.get_logger())
    keys = {"expire-cache": 0, "allowed-lag": allowed_lag, "max-lag-seconds": max_lag_seconds}
    evaluator = CachingEvaluator("e", Section("b.yaml", "evaluator.e", keys), storage, clock, structlog.get_logger())
    await storage.start()
    await evaluator.start()
    try:
        newest = {(topic, p): 1000 for topic, count in TOPICS.items() for p in range(count)}
        committed = dict.fromkeys(newest, 900)
        order = 0

        def refresh() -> None:
            for (topic, p), offset in newest.items():
                storage.submit(SetBrokerOffset(CLUSTER, topic, p, TOPICS[topic], offset, int(clock.now * 1000)))

        refresh()
        await storage.flush()
        for back in (300, 200, 50, 0):  # full windows (the arrays' path takes only those), over 90 s
            for (topic, p), offset in committed.items():
                order += 1
                storage.submit(SetConsumerOffset(CLUSTER, GROUP, topic, p, offset - back, order,
                                                 int(clock.now * 1000) - back * 300))
        await storage.flush()
        previous = None
        for change in changes:
            kind = change[0]
            if kind == "tick":
                clock.now += change[1]
            elif kind == "broker":  # a refresh of every partition, one of them grown
                newest[change[1]] += change[2]
                refresh()
            elif kind in ("commit", "catch up"):
                (topic, p), *step, age = change[1:]
                committed[topic, p] = max(0, committed[topic, p] + step[0]) if step else newest[topic, p]
                order += 1
                storage.submit(SetConsumerOffset(CLUSTER, GROUP, topic, p, committed[topic, p], order,
                                                 int(clock.now * 1000) - age))
            elif kind == "owner":
                storage.submit(SetConsumerOwner(CLUSTER, GROUP, *change[1], change[2], change[2] + "-id"))
            elif kind == "times":
                (topic, p), age = change[1:]
                storage.submit(SetRecordTimes(CLUSTER, [(topic, p, committed[topic, p],
                                                         int(clock.now * 1000) - age)]))
            else:
                storage.submit(SetDeletePartitionOffsets(CLUSTER, GROUP, *change[1]))
            await storage.flush()
            if batched:  # as the trend sampler asks: with other groups, in one storage request
                evaluation, absent = await evaluator.evaluations(CLUSTER, [GROUP, "absent"])
                assert absent.status is Status.NOTFOUND
            else:
                evaluation = await evaluator.evaluation(CLUSTER, GROUP)
            topics = storage.state.consumer(CLUSTER, GROUP, int(clock.now))
            if topics is None:
                assert evaluation.status is Status.NOTFOUND
                return
            fresh = assess_group(CLUSTER, GROUP, topics, clock.now, allowed_lag, max_lag_seconds=max_lag_seconds)
            for showall in (True, False):
                assert evaluation.result(showall) == fresh.result(showall)
            if kind == "tick" and previous is not None:
                # Nothing changed but the time: the windows were not gone through again (the same basis, whose
                # make each evaluation holds).
                assert all(topic.make is before.make for topic, before in zip(evaluation.topics, previous.topics,
                                                                               strict=True))
            previous = evaluation
    finally:
        await evaluator.stop()
        await storage.stop()


@pytest.mark.parametrize("batched", [False, True], ids=["alone", "batched"])
@pytest.mark.parametrize("columns_from", [1, 10**9], ids=["arrays", "partition-by-partition"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(steps, min_size=1, max_size=25), allowed_lag=st.sampled_from([0, 0, 5]),
       max_lag_seconds=st.sampled_from([0.0, 0.0, 90.0]))
# A group caught up everywhere falls behind again on one topic: its samples count again, also on the refreshes
# after.
@example(changes=[*(("catch up", tp, 0) for tp in (("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1))),
                  ("broker", ("b", 0), 7), ("tick", 60.0), ("broker", ("b", 0), 0), ("tick", 60.0)],
         allowed_lag=0, max_lag_seconds=0.0)
# Behind, but neither stopping (caught up within the window) nor with a forecast yet: lag in seconds still grows.
@example(changes=[("catch up", ("b", 0), 0), ("catch up", ("b", 1), 0), ("broker", ("b", 0), 7), ("tick", 100.0)],
         allowed_lag=0, max_lag_seconds=0.0)
def test_an_evaluation_from_the_kept_basis_is_a_fresh_one(monkeypatch, columns_from, batched, changes, allowed_lag,
                                                          max_lag_seconds):
    monkeypatch.setattr(group_module, "COLUMNS_FROM", columns_from)
    asyncio.run(run(changes, allowed_lag, max_lag_seconds, batched))
