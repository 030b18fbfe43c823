"""The built-in dashboard under ``/ui/``: static pages over Burrow's API, plus three summaries for them.

The page (static/index.html, static/app.js) reads the monitor through same-origin relative URLs, so
whatever authentication the HTTP server asks for is what the browser already sends. Burrow's API answers
one group at a time; the summaries under ``/ui/api/`` spare the group list one request per group:

- ``/ui/api/groups``: every group of every cluster with its status, total lag, largest lag in seconds and
  the recent trend of its total lag;
- ``/ui/api/history/{cluster}/{group}``: the group's sampled history (burrowpy.httpserver.ui.trends);
- ``/ui/api/topics/{cluster}``: every topic with its partitions' newest offsets, the groups reading it and
  its health (burrowpy.coordinators.topic_health), and the cluster's partition counts.

``/`` stays Burrow's 404 for API clients; only a request that prefers ``text/html`` (a browser) is
redirected to the dashboard.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from aiohttp import web

from burrowpy.context import ApplicationContext
from burrowpy.httpserver.ui.trends import GroupTrends, every_group_status
from burrowpy.protocol import FetchConsumersForTopic, FetchTopic, FetchTopics

STATIC = Path(__file__).with_name("static")
# Samples of total lag the group list draws as each group's trend line.
TREND_POINTS = 60


def _quality(parameters: list[str]) -> float:
    for parameter in parameters:
        name, _, value = parameter.strip().partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value)
            except ValueError:
                return 0.0
    return 1.0


def prefers_html(accept: str) -> bool:
    """True when an Accept header names text/html and ranks it above JSON (first listed wins a tie).

    Browsers send ``text/html,...,*/*;q=0.8``; curl sends ``*/*`` and HTTP libraries send ``*/*`` or
    ``application/json``, which keep Burrow's answer."""
    html: tuple[float, int] | None = None
    json_rank: tuple[float, int] | None = None
    for position, item in enumerate(accept.split(",")):
        media, *parameters = item.split(";")
        media = media.strip().lower()
        rank = (_quality(parameters), -position)
        if media == "text/html" and (html is None or rank > html):
            html = rank
        elif media in ("application/json", "application/*") and (json_rank is None or rank > json_rank):
            json_rank = rank
    return html is not None and html[0] > 0 and (json_rank is None or html > json_rank)


@web.middleware
async def browser_entry(request: web.Request, handler: Any) -> web.StreamResponse:
    if request.path == "/" and request.method in ("GET", "HEAD") and prefers_html(request.headers.get("Accept", "")):
        return web.Response(status=302, headers={"Location": "ui/"})
    return await handler(request)


def _json(body: dict[str, Any], status: int = 200) -> web.Response:
    return web.Response(status=status, text=json.dumps(body, separators=(",", ":")),
                        content_type="application/json", headers={"Cache-Control": "no-store"})


class Dashboard:
    def __init__(self, ctx: ApplicationContext, trends: GroupTrends | None) -> None:
        self.ctx = ctx
        self.trends = trends

    async def _fetch(self, request_type: type, **fields: Any) -> Any:
        return await self.ctx.fetch(request_type(**fields, reply=self.ctx.new_reply()))

    async def index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    async def to_index(self, request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": "ui/"})

    def _timing(self) -> dict[str, float | None]:
        return {"now": self.ctx.clock.time(),
                "sample_interval": self.trends.interval if self.trends else None,
                "retention": self.trends.retention if self.trends else None}

    async def groups(self, request: web.Request) -> web.Response:
        clusters, statuses = await every_group_status(self.ctx)
        rows = []
        for status in statuses:
            cluster, group = status.cluster, status.group
            series = self.trends.series(cluster, group) if self.trends else None
            trend = series.recent_total_lag(TREND_POINTS) if series else []
            maxlag = status.maxlag
            rows.append({
                "cluster": cluster, "group": group, "status": status.status.name,
                "complete": status.complete, "partition_count": status.partition_count,
                "totallag": status.totallag, "max_lag_seconds": status.max_lag_seconds,
                "maxlag": None if maxlag is None else {"topic": maxlag.topic, "partition": maxlag.partition,
                                                        "current_lag": maxlag.current_lag},
                "trend": trend,
            })
        return _json({**self._timing(), "clusters": clusters, "groups": rows})

    async def history(self, request: web.Request) -> web.Response:
        series = self.trends.series(request.match_info["cluster"], request.match_info["group"]) \
            if self.trends else None
        since = request.query.get("since")
        try:
            since_time = float(since) if since else None
        except ValueError:
            return _json({"error": True, "message": "since must be a number of seconds since the epoch"}, 400)
        samples = series.to_json(since_time) if series else {"time": [], "totallag": [], "max_lag_seconds": [],
                                                              "status": []}
        return _json({**self._timing(), **samples})

    async def topics(self, request: web.Request) -> web.Response:
        cluster = request.match_info["cluster"]
        topics = await self._fetch(FetchTopics, cluster=cluster)
        if topics is None:
            return _json({"error": True, "message": "cluster not found"}, 404)
        topics = sorted(topics)
        offsets = await asyncio.gather(*(self._fetch(FetchTopic, cluster=cluster, topic=t) for t in topics))
        readers = await asyncio.gather(*(self._fetch(FetchConsumersForTopic, cluster=cluster, topic=t)
                                         for t in topics))
        module = self.ctx.modules.get("cluster", {}).get(cluster)
        reading = getattr(module, "health", None)
        healths = await asyncio.gather(*(module.topic_health(t) for t in topics)) if reading is not None \
            else [None] * len(topics)
        summary = None if reading is None else {**reading.counts(), "brokers": len(reading.live_brokers),
                                                "read_at": reading.read_at_ms}
        return _json({**self._timing(), "cluster": cluster, "health": summary, "topics": [
            {"topic": topic, "offsets": list(topic_offsets or []), "consumers": sorted(groups or []),
             "health": None if health is None else {key: value for key, value in health.items()
                                                    if key != "partitions"}}
            for topic, topic_offsets, groups, health in zip(topics, offsets, readers, healths, strict=True)]})


def mount_dashboard(app: web.Application, ctx: ApplicationContext, trends: GroupTrends | None) -> None:
    """Add the dashboard's routes; without ``trends`` (an app built for tests) the history is empty."""
    dashboard = Dashboard(ctx, trends)
    app.router.add_get("/ui", dashboard.to_index)
    app.router.add_get("/ui/", dashboard.index)
    app.router.add_get("/ui/api/groups", dashboard.groups)
    app.router.add_get("/ui/api/history/{cluster}/{group}", dashboard.history)
    app.router.add_get("/ui/api/topics/{cluster}", dashboard.topics)
    app.router.add_static("/ui/static/", STATIC)
