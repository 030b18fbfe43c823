"""The keyed deadlines behind the group machine's timers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.groups.timers import Deadlines


def test_due_keys_fire_in_deadline_order_and_only_once():
    d = Deadlines()
    d.set("b", 20)
    d.set("a", 10)
    d.set("c", 30)
    fired = []
    d.expire(20, fired.append)
    assert fired == ["a", "b"] and d.next_deadline() == 30 and len(d) == 1
    d.expire(20, fired.append)
    assert fired == ["a", "b"]


def test_setting_again_replaces_and_cancel_removes():
    d = Deadlines()
    d.set("k", 10)
    d.set("k", 50)
    fired = []
    d.expire(40, fired.append)
    assert fired == [] and d.get("k") == 50
    d.cancel("k")
    d.expire(100, fired.append)
    assert fired == [] and d.next_deadline() is None and "k" not in d


def test_a_handler_cancelling_or_moving_a_later_due_key_is_respected():
    d = Deadlines()
    d.set("first", 1)
    d.set("cancelled", 2)
    d.set("moved", 3)
    fired = []

    def handle(key):
        fired.append(key)
        if key == "first":
            d.cancel("cancelled")
            d.set("moved", 100)

    d.expire(10, handle)
    assert fired == ["first"] and d.get("moved") == 100


def test_keys_set_during_expire_wait_for_the_next_call():
    d = Deadlines()
    d.set("loop", 0)
    fired = []

    def handle(key):
        fired.append(key)
        d.set("loop", 0)  # a zero timeout must not spin forever

    d.expire(0, handle)
    assert fired == ["loop"]
    d.expire(0, handle)
    assert fired == ["loop", "loop"]


@settings(deadline=None, max_examples=100)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 100)), max_size=30), st.integers(0, 100))
def test_expire_fires_exactly_the_latest_deadlines_that_are_due(sets, now):
    d = Deadlines()
    latest = {}
    for key, deadline in sets:
        d.set(key, deadline)
        latest[key] = deadline
    fired = []
    d.expire(now, fired.append)
    assert sorted(fired) == sorted(k for k, deadline in latest.items() if deadline <= now)
    assert [latest[k] for k in fired] == sorted(latest[k] for k in fired)
    assert d.next_deadline() == min((v for v in latest.values() if v > now), default=None)
