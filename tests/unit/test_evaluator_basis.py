"""A group evaluated again from its kept basis (storage unchanged) gives exactly a fresh evaluation's answer.

The caching evaluator keeps each group's basis (everything its evaluation takes from the windows, without the
clock) and evaluates it again at a later time when storage says nothing it was made from has changed. Random
windows, changes and clocks, against the real inmemory storage: after every step the evaluator's answer is
compared with :func:`assess_group` of a fresh storage answer at the same time, and a step that changed nothing
the group's evaluation reads must have reused the basis. The same again through ``evaluations`` (the trend
sampler's: the group asked with another in one storage request).

Broker offset refreshes read the same newest offsets (an idle fleet's) or move one, and topics gain partitions;
some steps are not followed by an evaluation, so the evaluator's kept version can be several changes old. A
refresh that moved no newest offset must not have made storage copy the group's commits again: storage answers a
lagging topic's new samples alone, which the kept basis takes (``GroupBasis.resampled``).
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
    SetBrokerOffsets,
    SetConsumerOffset,
    SetConsumerOwner,
    SetDeletePartitionOffsets,
    SetRecordTimes,
    Status,
)
from burrowpy.storage.inmemory import InMemoryStorage
from burrowpy.storage.state import StorageState

START = 1_700_000_000.0
CLUSTER, GROUP = "local", "g"
TOPICS = {"a": 3, "b": 2}  # topic -> partitions at the start
GROWN = 4  # partitions a topic can grow to ("grow")


class FakeClock:
    def __init__(self) -> None:
        self.now = START

    def time(self) -> float:
        return self.now


# A partition the topic may not have yet ("grow" adds them): a commit to it is dropped by storage as Burrow's is.
partition = st.tuples(st.sampled_from(sorted(TOPICS)), st.integers(0, GROWN - 1))
steps = st.one_of(
    st.tuples(st.just("tick"), st.floats(0.0, 400.0)),
    st.tuples(st.just("broker"), partition, st.sampled_from([0, 0, 0, 1, 7, 120])),
    st.tuples(st.just("grow"), st.sampled_from(sorted(TOPICS)), st.sampled_from([0, 0, 3])),
    st.tuples(st.just("commit"), partition, st.integers(-20, 60), st.integers(0, 90_000)),
    st.tuples(st.just("catch up"), partition, st.integers(0, 90_000)),
    st.tuples(st.just("owner"), partition, st.sampled_from(["c1", "c2"])),
    st.tuples(st.just("times"), partition, st.integers(0, 900_000)),
    st.tuples(st.just("forget"), partition),
)


class CountedState(StorageState):
    """The real storage state, counting its whole answers of a group (every commit of it copied)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.whole_answers = 0

    def _consumer_topics(self, cluster, group):  # type: ignore[no-untyped-def]
        self.whole_answers += 1
        return super()._consumer_topics(cluster, group)


async def run(changes: list[tuple], allowed_lag: int, max_lag_seconds: float, batched: bool = False,
              unseen: frozenset[int] = frozenset()) -> None:
    """``changes`` applied in turn, the group evaluated after each but those whose index is in ``unseen``."""
    clock = FakeClock()
    storage = InMemoryStorage("s", Section("b.yaml", "storage.s", {"intervals": 4}), [CLUSTER], clock,
                              structlog.get_logger())
    keys = {"expire-cache": 0, "allowed-lag": allowed_lag, "max-lag-seconds": max_lag_seconds}
    evaluator = CachingEvaluator("e", Section("b.yaml", "evaluator.e", keys), storage, clock, structlog.get_logger())
    state = storage.state = CountedState([CLUSTER], storage.intervals, storage.expire_group, storage.min_distance)
    await storage.start()
    await evaluator.start()
    try:
        counts = dict(TOPICS)
        newest = {(topic, p): 1000 for topic in TOPICS for p in range(GROWN)}
        committed = dict.fromkeys(newest, 900)
        order = 0

        def refresh() -> None:  # as the cluster module hands a refresh over: a request a topic
            for topic, count in counts.items():
                storage.submit(SetBrokerOffsets(CLUSTER, topic, count, list(range(count)),
                                                [newest[topic, p] for p in range(count)], int(clock.now * 1000)))

        refresh()
        await storage.flush()
        for back in (300, 200, 50, 0):  # full windows (the arrays' path takes only those), over 90 s
            for (topic, p), offset in committed.items():
                if p >= counts[topic]:
                    continue
                order += 1
                storage.submit(SetConsumerOffset(CLUSTER, GROUP, topic, p, offset - back, order,
                                                 int(clock.now * 1000) - back * 300))
        await storage.flush()
        previous = None
        seen_before = False  # the evaluator was asked after the step before
        for index, change in enumerate(changes):
            kind = change[0]
            idle = False  # a refresh that moves no newest offset
            if kind == "tick":
                clock.now += change[1]
            elif kind == "broker":  # a refresh of every partition, one of them grown
                newest[change[1]] += change[2]
                idle = change[2] == 0
                refresh()
            elif kind == "grow":  # the topic gains a partition, whose log end is already where it is
                topic, end = change[1:]
                if counts[topic] < GROWN:
                    newest[topic, counts[topic]] = end
                    counts[topic] += 1
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
            if index in unseen:
                seen_before = False
                continue
            answers_before = state.whole_answers
            if batched:  # as the trend sampler asks: with other groups, in one storage request
                evaluation, absent = await evaluator.evaluations(CLUSTER, [GROUP, "absent"])
                assert absent.status is Status.NOTFOUND
            else:
                evaluation = await evaluator.evaluation(CLUSTER, GROUP)
            if idle and seen_before:
                assert state.whole_answers == answers_before, "an idle refresh made storage copy the group again"
            just_ticked = kind == "tick" and seen_before and previous is not None
            seen_before = True
            topics = state.consumer(CLUSTER, GROUP, int(clock.now))
            if topics is None:
                assert evaluation.status is Status.NOTFOUND
                return
            fresh = assess_group(CLUSTER, GROUP, topics, clock.now, allowed_lag, max_lag_seconds=max_lag_seconds)
            for showall in (True, False):
                assert evaluation.result(showall) == fresh.result(showall)
            if just_ticked:
                # Nothing changed but the time: the windows were not gone through again (the same basis, whose
                # make each evaluation holds).
                assert all(topic.make is before.make for topic, before in zip(evaluation.topics,
                                                                               previous.topics, strict=True))
            previous = evaluation
    finally:
        await evaluator.stop()
        await storage.stop()


@pytest.mark.parametrize("batched", [False, True], ids=["alone", "batched"])
@pytest.mark.parametrize("columns_from", [1, 10**9], ids=["arrays", "partition-by-partition"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(steps, min_size=1, max_size=25), allowed_lag=st.sampled_from([0, 0, 5]),
       max_lag_seconds=st.sampled_from([0.0, 0.0, 90.0]), unseen=st.frozensets(st.integers(0, 24), max_size=8))
# A group caught up everywhere falls behind again on one topic: its samples count again, also on the refreshes
# after.
@example(changes=[*(("catch up", tp, 0) for tp in (("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1))),
                  ("broker", ("b", 0), 7), ("tick", 60.0), ("broker", ("b", 0), 0), ("tick", 60.0)],
         allowed_lag=0, max_lag_seconds=0.0, unseen=frozenset())
# Behind, but neither stopping (caught up within the window) nor with a forecast yet: lag in seconds still grows.
@example(changes=[("catch up", ("b", 0), 0), ("catch up", ("b", 1), 0), ("broker", ("b", 0), 7), ("tick", 100.0)],
         allowed_lag=0, max_lag_seconds=0.0, unseen=frozenset())
# A lagging group through idle refreshes: the oldest samples leave the window (4 of them), the newest offsets stay;
# two of the refreshes unseen, so the kept version is two refreshes old.
@example(changes=[("broker", ("a", 0), 0), ("tick", 10.0), ("broker", ("a", 0), 0), ("tick", 10.0),
                  ("broker", ("a", 0), 0), ("tick", 10.0), ("broker", ("a", 0), 0), ("tick", 10.0),
                  ("broker", ("a", 0), 0), ("tick", 400.0), ("broker", ("a", 0), 0)],
         allowed_lag=0, max_lag_seconds=90.0, unseen=frozenset({2, 4}))
# A topic grows by a partition between two idle refreshes.
@example(changes=[("broker", ("b", 0), 0), ("tick", 30.0), ("grow", "b", 3), ("tick", 30.0), ("broker", ("b", 0), 0),
                  ("commit", ("b", 2), 0, 0), ("broker", ("b", 0), 0), ("tick", 30.0)],
         allowed_lag=0, max_lag_seconds=0.0, unseen=frozenset())
def test_an_evaluation_from_the_kept_basis_is_a_fresh_one(monkeypatch, columns_from, batched, changes, allowed_lag,
                                                          max_lag_seconds, unseen):
    monkeypatch.setattr(group_module, "COLUMNS_FROM", columns_from)
    asyncio.run(run(changes, allowed_lag, max_lag_seconds, batched, unseen))
