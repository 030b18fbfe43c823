"""The ``null`` notifier: records what it would have sent instead of sending it (burrow-spec 7.6).

Useful in tests and for trying templates out: when ``template-open``/``template-close`` are given they
are rendered, and the text is kept with the call, so a template error shows up in the log without
anything leaving the machine. Only the newest calls are kept, so a forgotten null notifier in
production does not grow without bound.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from burrowpy.notifier.base import Notifier
from burrowpy.notifier.decision import Action
from burrowpy.notifier.templates import render

KEPT_CALLS = 1000


@dataclass(frozen=True, slots=True)
class NullCall:
    action: Action
    cluster: str
    group: str
    incident_id: str
    status: str
    text: str | None  # the rendered template, when one is configured for this action


class NullNotifier(Notifier):
    class_name = "null"
    needs_templates = False

    def __init__(self, name: str, section: Any, ctx: Any) -> None:
        super().__init__(name, section, ctx)
        self.calls: deque[NullCall] = deque(maxlen=KEPT_CALLS)

    def prepare(self, action: Action, data: dict[str, Any]) -> NullCall:
        template = self.template_close if action is Action.CLOSE else self.template_open
        result = data["result"]
        return NullCall(action, data["cluster"], data["group"], data["id"], result.status.name,
                        render(template, data) if template is not None else None)

    async def deliver(self, message: NullCall) -> None:
        self.calls.append(message)
