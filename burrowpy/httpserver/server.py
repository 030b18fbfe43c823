"""The HTTP server coordinator: one listener per ``[httpserver.NAME]``, all serving the same API.

Listeners are not modules (they have no class-name), as in Burrow. TLS certificates are loaded when the
coordinator is built so that a bad certificate is a config error, not a failure half-way through startup.
"""

from __future__ import annotations

import ssl

from aiohttp import web

from broker.process_metrics import register_process_metrics
from burrowpy.config import ConfigError, HttpListenerConfig
from burrowpy.context import ApplicationContext
from burrowpy.httpauth import LoginThrottle
from burrowpy.httpserver.api import build_app
from burrowpy.httpserver.ui.trends import GroupTrends


class HttpServerCoordinator:
    def __init__(self, ctx: ApplicationContext) -> None:
        self.ctx = ctx
        self.log = ctx.logger.bind(type="coordinator", name="httpserver")
        self.listeners: dict[str, HttpListenerConfig] = dict(ctx.config.httpserver)
        self._ssl: dict[str, ssl.SSLContext] = {}
        for name, listener in self.listeners.items():
            if listener.tls is not None:
                try:
                    self._ssl[name] = listener.tls.server_context()
                except (OSError, ssl.SSLError) as exc:
                    raise ConfigError(ctx.config.file, f"httpserver.{name}.tls",
                                      f"cannot load the certificate or key of TLS profile {listener.tls.name!r}: "
                                      f"{exc}") from None
        register_process_metrics(ctx.registry)
        self._runners: list[web.AppRunner] = []
        # One history for the dashboard, shared by every listener (none when its sampling is turned off).
        dashboard = ctx.config.dashboard
        self.trends = GroupTrends(ctx, dashboard.sample_interval, dashboard.retention) \
            if dashboard.sample_interval else None
        # Bound (host, port) of each listener once started; port 0 in the config becomes the real port here.
        self.addresses: dict[str, list[tuple[str, int]]] = {}

    async def start(self) -> None:
        if self.trends is not None:
            await self.trends.start()
        try:
            for name, listener in self.listeners.items():
                await self._start_listener(name, listener)
        except Exception:
            await self.stop()
            raise

    async def _start_listener(self, name: str, listener: HttpListenerConfig) -> None:
        throttle = LoginThrottle(listener.login_burst, listener.login_refill)
        runner = web.AppRunner(build_app(self.ctx, self.trends, listener.auth, throttle), access_log=None,
                               handle_signals=False, keepalive_timeout=listener.timeout)
        await runner.setup()
        self._runners.append(runner)
        site = web.TCPSite(runner, listener.host or None, listener.port, ssl_context=self._ssl.get(name),
                           reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            self.log.error("failed to listen", listener=listener.address, error=str(exc))
            raise
        self.addresses[name] = [(address[0], address[1]) for address in runner.addresses]
        for host, port in self.addresses[name]:
            self.log.info("started listener", listener=f"{host}:{port}", tls=name in self._ssl,
                          auth=listener.auth.name if listener.auth else "none: the API is open to anyone who reaches it")

    async def stop(self) -> None:
        while self._runners:
            await self._runners.pop().cleanup()
        if self.trends is not None:
            await self.trends.stop()
        self.addresses.clear()

    def url(self, name: str | None = None) -> str:
        """A URL for reaching a started listener (the first one by default), for tools and tests."""
        name = name or next(iter(self.addresses))
        host, port = self.addresses[name][0]
        host = "127.0.0.1" if host in ("0.0.0.0", "") else "[::1]" if host == "::" else host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        scheme = "https" if name in self._ssl else "http"
        return f"{scheme}://{host}:{port}"
