"""The lifecycle shared by the monitor's coordinators: build the modules of one config kind, start, stop.

As in Burrow, building (configuring) every coordinator happens before anything starts, so a bad config
fails with a ConfigError before a single connection is opened.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from burrowpy.config import Section
from burrowpy.context import ApplicationContext


class Module(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def describe(self) -> dict[str, Any]:
        """The module's settings as the /v3/config detail JSON shows them."""


ModuleFactory = Callable[[str, Section, ApplicationContext], Module]


class Coordinator:
    """Builds one module per ``[kind.NAME]`` section from its ``class-name``, and runs their lifecycle."""

    def __init__(self, kind: str, ctx: ApplicationContext, classes: Mapping[str, ModuleFactory], *,
                 default_class: str | None = None) -> None:
        self.kind = kind
        self.ctx = ctx
        self.log = ctx.logger.bind(type="coordinator", name=kind)
        self.modules: dict[str, Module] = {}
        self._started: list[tuple[str, Module]] = []
        for name, section in ctx.config.modules(kind).items():
            if default_class is None:
                class_name = section.get_str("class-name")
            else:
                class_name = section.get_str("class-name", default_class)
            factory = classes.get(class_name)
            if factory is None:
                known = ", ".join(sorted(classes)) or "none available"
                raise section.error("class-name", f"unknown class {class_name!r} for a {kind} module "
                                                  f"(known: {known})")
            self.modules[name] = factory(name, section, ctx)
        ctx.modules[kind] = self.modules

    async def start(self) -> None:
        """Start every module in config order; if one fails, stop those already started and re-raise."""
        self.log.info("starting", modules=list(self.modules))
        for name, module in self.modules.items():
            try:
                await module.start()
            except Exception:
                self.log.exception("module failed to start", module=name)
                await self.stop()
                raise
            self._started.append((name, module))

    async def stop(self) -> None:
        """Stop the started modules in reverse order; one module failing to stop does not keep the others up."""
        if self._started:
            self.log.info("stopping")
        while self._started:
            name, module = self._started.pop()
            try:
                await module.stop()
            except Exception:
                self.log.exception("module failed to stop", module=name)
