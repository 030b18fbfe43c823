"""Notifiers: email and HTTP alerts about consumer groups, rendered from jinja2 templates (burrow-spec 7)."""

from burrowpy.notifier.coordinator import NOTIFIER_CLASSES, NotifierCoordinator

__all__ = ["NOTIFIER_CLASSES", "NotifierCoordinator"]
