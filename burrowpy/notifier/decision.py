"""When to notify: incidents and the open/close decision, as pure functions.

Every evaluation of a group goes through :func:`step`, which takes the group's notification state,
the group status just evaluated, the policies of the configured notifiers and the current time, and
returns the new state plus the notifications to send. Nothing here does IO or reads a clock; the
coordinator (``coordinator.py``) wires it to the evaluator and the notifier modules.

The rules are Burrow's (burrow-spec section 7.2), in this order for each notifier that accepts the
group (allowlist matches, denylist does not):

1. A group whose status rises above OK with no open incident starts one: a fresh id and start time.
2. An incident that existed before this evaluation and is now OK is closed: with ``send-close`` a
   CLOSE notification goes out whatever the threshold, and the notifier forgets its last open.
3. A status below the notifier's ``threshold`` sends nothing (threshold OK notifies healthy groups
   too, with an empty incident id and no start time).
4. With ``send-once``, an incident that was already notified sends nothing more.
5. Otherwise an OPEN notification goes out if the last one is older than ``send-interval``.
6. After every notifier has decided, an OK status clears the incident.

Where we deliberately differ from Burrow (both are bugs Burrow users hit):

* Burrow remembers the time of the last open notification per group and notifier, and only a CLOSE
  notification resets it. With ``send-once`` but without ``send-close`` that means the first incident
  of a group is the only one ever notified: every later incident is silenced forever. Here the last
  open notification remembers the incident it was for, and ``send-once`` means once *per incident*.
* For the same reason, in Burrow a new incident starting shortly after an earlier one was notified is
  held back until ``send-interval`` has passed since the old notification. Here the first open
  notification of a new incident is never delayed by an earlier incident; ``send-interval`` only
  spaces out the reminders of one incident (or, with threshold OK, of one healthy stretch).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from burrowpy.protocol import Status


class Action(Enum):
    OPEN = "open"
    CLOSE = "close"


@dataclass(frozen=True, slots=True)
class NotifyPolicy:
    """The part of one notifier's configuration that decides whether it is told about a group."""

    threshold: Status = Status.WARN
    send_interval: float = 60.0  # seconds between repeated OPEN notifications of one incident
    send_close: bool = False
    send_once: bool = False
    allowlist: re.Pattern[str] | None = None
    denylist: re.Pattern[str] | None = None

    def accepts(self, group: str) -> bool:
        """Burrow's group filter: the allowlist must match somewhere in the name, the denylist must not."""
        if self.allowlist is not None and not self.allowlist.search(group):
            return False
        return not (self.denylist is not None and self.denylist.search(group))


@dataclass(frozen=True, slots=True)
class Incident:
    id: str
    start: float  # seconds since the epoch


@dataclass(frozen=True, slots=True)
class LastOpen:
    """When a notifier last sent an OPEN notification for a group, and for which incident ("" if none)."""

    at: float
    incident_id: str


@dataclass(frozen=True, slots=True)
class GroupState:
    """What the coordinator remembers about one group between evaluations."""

    incident: Incident | None = None
    last_open: Mapping[str, LastOpen] = field(default_factory=dict)  # notifier name -> last OPEN


@dataclass(frozen=True, slots=True)
class Notification:
    notifier: str
    action: Action
    incident: Incident | None  # None for an OPEN about a healthy group (threshold OK)


def decide(policy: NotifyPolicy, status: Status, incident: Incident | None, last_open: LastOpen | None,
           now: float) -> tuple[Action | None, LastOpen | None]:
    """One notifier's decision for one evaluation: what to send, and its new last-open record.

    ``incident`` is the group's incident after rule 1 ran, so an incident together with an OK status
    means the incident existed before and is closing now.
    """
    if incident is not None and status == Status.OK and policy.send_close:
        return Action.CLOSE, None
    if status < policy.threshold:
        return None, last_open
    incident_id = incident.id if incident is not None else ""
    new_incident = incident is not None and (last_open is None or last_open.incident_id != incident_id)
    if new_incident or last_open is None:
        return Action.OPEN, LastOpen(now, incident_id)
    if policy.send_once:
        return None, last_open
    if now - last_open.at > policy.send_interval:
        return Action.OPEN, LastOpen(now, incident_id)
    return None, last_open


def step(state: GroupState, group: str, status: Status, policies: Mapping[str, NotifyPolicy], now: float,
         new_incident_id: Callable[[], str]) -> tuple[GroupState, list[Notification]]:
    """Apply one evaluation result of ``group`` to its state; returns the new state and what to send.

    A NOTFOUND status (the group vanished between the list refresh and the evaluation) changes nothing.
    """
    if status == Status.NOTFOUND:
        return state, []
    incident = state.incident
    if incident is None and status > Status.OK:
        incident = Incident(new_incident_id(), now)
    last_open = dict(state.last_open)
    notifications: list[Notification] = []
    for name, policy in policies.items():
        if not policy.accepts(group):
            continue
        action, record = decide(policy, status, incident, last_open.get(name), now)
        if record is None:
            last_open.pop(name, None)
        else:
            last_open[name] = record
        if action is not None:
            notifications.append(Notification(name, action, incident))
    if status == Status.OK:
        incident = None
    return GroupState(incident, last_open), notifications


def state_to_json(state: GroupState) -> dict:
    """The group's notification state as JSON, so that it can travel to the next sender (``kafka_lock.py``)."""
    incident = state.incident
    return {"incident": None if incident is None else {"id": incident.id, "start": incident.start},
            "last_open": {name: {"at": record.at, "incident_id": record.incident_id}
                          for name, record in sorted(state.last_open.items())}}


def state_from_json(data: Mapping) -> GroupState:
    """The inverse of :func:`state_to_json`; raises KeyError, TypeError or ValueError on a malformed record."""
    raw = data["incident"]
    incident = None if raw is None else Incident(str(raw["id"]), float(raw["start"]))
    last_open = {str(name): LastOpen(float(record["at"]), str(record["incident_id"]))
                 for name, record in data["last_open"].items()}
    return GroupState(incident, last_open)
