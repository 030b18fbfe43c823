"""The pure open/close decision: Burrow's 18-row table (spec 7.2), our fixes to its quirks, properties."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from burrowpy.notifier.decision import (
    Action,
    GroupState,
    Incident,
    LastOpen,
    Notification,
    NotifyPolicy,
    decide,
    step,
)
from burrowpy.protocol import Status

OK, WARN, ERR = Status.OK, Status.WARN, Status.ERR
NOW = 1_700_000_000.0
EXISTING = Incident("testidstring", NOW - 600)


def ids():
    counter = itertools.count(1)
    return lambda: f"incident-{next(counter)}"


# threshold, status, incident before, send-close, send-once, an OPEN of this incident already sent,
# expected action, incident open afterwards
DECISION_TABLE = [
    (OK, OK, False, False, False, False, Action.OPEN, False),
    (OK, OK, False, True, False, False, Action.OPEN, False),
    (OK, OK, True, False, False, False, Action.OPEN, False),
    (OK, OK, True, True, False, False, Action.CLOSE, False),
    (OK, WARN, False, False, False, False, Action.OPEN, True),
    (OK, WARN, False, True, False, False, Action.OPEN, True),
    (OK, WARN, True, False, False, False, Action.OPEN, True),
    (OK, WARN, True, True, False, False, Action.OPEN, True),
    (OK, WARN, True, True, True, True, None, True),
    (OK, WARN, False, True, True, False, Action.OPEN, True),
    (ERR, WARN, False, False, False, False, None, True),
    (ERR, WARN, False, True, False, False, None, True),
    (ERR, WARN, True, False, False, False, None, True),
    (ERR, WARN, True, True, False, False, None, True),
    (WARN, OK, False, False, False, False, None, False),
    (WARN, OK, False, True, False, False, None, False),
    (WARN, OK, True, False, False, False, None, False),
    (WARN, OK, True, True, False, False, Action.CLOSE, False),
]


@pytest.mark.parametrize(
    "threshold,status,existing,send_close,send_once,already_sent,expected,incident_after",
    DECISION_TABLE,
    ids=[f"row{i}" for i in range(len(DECISION_TABLE))],
)
def test_decision_table(
    threshold, status, existing, send_close, send_once, already_sent, expected, incident_after
):
    policy = NotifyPolicy(threshold=threshold, send_interval=60, send_close=send_close, send_once=send_once)
    last_open = {"test": LastOpen(NOW - 1, EXISTING.id)} if already_sent else {}
    state = GroupState(EXISTING if existing else None, last_open)

    new_state, sent = step(state, "testgroup", status, {"test": policy}, NOW, ids())

    assert [n.action for n in sent] == ([expected] if expected else [])
    if incident_after:
        assert new_state.incident is not None
        assert new_state.incident == (EXISTING if existing else Incident("incident-1", NOW))
    else:
        assert new_state.incident is None
    if expected is Action.OPEN:
        assert new_state.last_open["test"] == LastOpen(
            NOW, state.incident.id if existing else (new_state.incident.id if new_state.incident else "")
        )
        assert sent[0].incident == (new_state.incident or state.incident)
    elif expected is Action.CLOSE:
        assert "test" not in new_state.last_open
        assert sent[0].incident == EXISTING  # the close carries the id and start of the incident it closes
    else:
        assert new_state.last_open == state.last_open


def test_the_table_has_eighteen_rows_covering_every_threshold():
    assert len(DECISION_TABLE) == 18
    assert {row[0] for row in DECISION_TABLE} == {OK, WARN, ERR}


def run(policy: NotifyPolicy, timeline: list[tuple[float, Status]]) -> list[tuple[float, Notification]]:
    """Feed (time, status) evaluations of one group through step; collect what is sent, with its time."""
    state, new_id, sent = GroupState(), ids(), []
    for now, status in timeline:
        state, notifications = step(state, "g", status, {"n": policy}, now, new_id)
        sent.extend((now, n) for n in notifications)
    return sent


def test_send_once_without_send_close_notifies_every_incident_once():
    # Burrow's quirk: the first incident silenced all later ones forever. Ours: once per incident.
    policy = NotifyPolicy(threshold=WARN, send_interval=10, send_once=True)
    sent = run(policy, [(0, WARN), (20, WARN), (40, ERR), (60, OK), (80, WARN), (100, WARN)])
    assert [(t, n.action, n.incident.id) for t, n in sent] == [
        (0, Action.OPEN, "incident-1"),
        (80, Action.OPEN, "incident-2"),
    ]


def test_new_incident_is_not_held_back_by_send_interval_of_the_previous_one():
    policy = NotifyPolicy(threshold=WARN, send_interval=3600)
    sent = run(policy, [(0, WARN), (10, OK), (20, WARN)])
    assert [(t, n.incident.id) for t, n in sent] == [(0, "incident-1"), (20, "incident-2")]


def test_reminders_of_one_incident_are_spaced_by_more_than_send_interval():
    policy = NotifyPolicy(threshold=WARN, send_interval=60)
    sent = run(policy, [(0, WARN), (30, WARN), (60, WARN), (61, ERR), (100, WARN), (122, WARN)])
    assert [t for t, _ in sent] == [0, 61, 122]
    assert {n.incident for _, n in sent} == {Incident("incident-1", 0)}


def test_close_carries_the_incident_and_resets_reminders():
    policy = NotifyPolicy(threshold=WARN, send_interval=3600, send_close=True)
    sent = run(policy, [(5, ERR), (6, OK), (7, OK), (8, WARN)])
    assert [(t, n.action, n.incident) for t, n in sent] == [
        (5, Action.OPEN, Incident("incident-1", 5)),
        (6, Action.CLOSE, Incident("incident-1", 5)),
        (8, Action.OPEN, Incident("incident-2", 8)),
    ]


def test_threshold_ok_notifies_healthy_groups_without_an_incident():
    policy = NotifyPolicy(threshold=OK, send_interval=60)
    sent = run(policy, [(0, OK), (30, OK), (61, OK)])
    assert [(t, n.action, n.incident) for t, n in sent] == [(0, Action.OPEN, None), (61, Action.OPEN, None)]


def test_notfound_changes_nothing():
    state = GroupState(EXISTING, {"n": LastOpen(1, EXISTING.id)})
    assert step(state, "g", Status.NOTFOUND, {"n": NotifyPolicy(threshold=OK)}, NOW, ids()) == (state, [])


def test_allow_and_deny_lists_choose_the_notifiers_of_a_group():
    policies = {
        "all": NotifyPolicy(),
        "payments": NotifyPolicy(allowlist=re.compile("^payments-")),
        "not-test": NotifyPolicy(denylist=re.compile("test")),
    }
    _, sent = step(GroupState(), "payments-test", ERR, policies, NOW, ids())
    assert sorted(n.notifier for n in sent) == ["all", "payments"]
    _, sent = step(GroupState(), "orders", ERR, policies, NOW, ids())
    assert sorted(n.notifier for n in sent) == ["all", "not-test"]


def test_notifiers_share_one_incident_but_decide_separately():
    policies = {"warn": NotifyPolicy(threshold=WARN), "err": NotifyPolicy(threshold=ERR)}
    state, sent = step(GroupState(), "g", WARN, policies, 100, ids())
    assert [(n.notifier, n.incident) for n in sent] == [("warn", Incident("incident-1", 100))]
    state, sent = step(state, "g", ERR, policies, 101, ids())
    assert [(n.notifier, n.incident) for n in sent] == [("err", Incident("incident-1", 100))]


def test_decide_is_strictly_greater_than_send_interval():
    policy = NotifyPolicy(threshold=WARN, send_interval=60)
    last = LastOpen(0, "a")
    assert decide(policy, WARN, Incident("a", 0), last, 60) == (None, last)
    assert decide(policy, WARN, Incident("a", 0), last, 60.5) == (Action.OPEN, LastOpen(60.5, "a"))


group_statuses = st.sampled_from([OK, WARN, ERR])


@settings(deadline=None, max_examples=150)
@given(
    threshold=group_statuses,
    send_close=st.booleans(),
    send_once=st.booleans(),
    send_interval=st.integers(0, 50),
    statuses=st.lists(group_statuses, max_size=40),
)
def test_invariants_over_any_history(threshold, send_close, send_once, send_interval, statuses):
    policy = NotifyPolicy(
        threshold=threshold, send_interval=send_interval, send_close=send_close, send_once=send_once
    )
    state, new_id = GroupState(), ids()
    opens_per_incident: dict[str, int] = {}
    for now, status in enumerate(statuses):
        before = state
        state, sent = step(state, "g", status, {"n": policy}, float(now * 10), new_id)
        assert len(sent) <= 1
        assert (state.incident is not None) == (status > OK)
        for notification in sent:
            if notification.action is Action.CLOSE:
                assert send_close and status == OK and before.incident is not None
                assert notification.incident == before.incident
            else:
                assert status >= threshold
                if notification.incident is not None:
                    opens_per_incident[notification.incident.id] = (
                        opens_per_incident.get(notification.incident.id, 0) + 1
                    )
        if before.incident is None and status > OK and status >= threshold:
            assert [n.action for n in sent] == [Action.OPEN]  # a new incident is always announced at once
    if send_once:
        assert all(count == 1 for count in opens_per_incident.values())
