"""The dashboard's server side through aiohttp's test client, over the real storage and evaluator of
test_http_api's context (fake clock): the browser redirect at ``/``, the page and its assets, the
summaries under /ui/api/ and the bounded status history behind the charts."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest
from aiohttp.test_utils import TestClient, TestServer
from test_http_api import ctx  # noqa: F401  (the fixture: storage and evaluator with "healthy" and "stuck")

from burrowpy.httpserver import build_app
from burrowpy.httpserver.ui import STATIC, prefers_html
from burrowpy.httpserver.ui.trends import GroupSeries, GroupTrends
from burrowpy.protocol import SetDeleteGroup, Status

BURROW_404 = '{"error":true,"message":"invalid request type","result":{}}\n'
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"


@pytest.fixture
async def trends(ctx):  # noqa: F811
    return GroupTrends(ctx, interval=5, retention=30)


@pytest.fixture
async def client(ctx, trends):  # noqa: F811
    async with TestClient(TestServer(build_app(ctx, trends))) as test_client:
        yield test_client


async def get_json(client, path, status=200):
    response = await client.get(path)
    assert response.status == status, await response.text()
    assert response.headers["Content-Type"] == "application/json; charset=utf-8"
    return json.loads(await response.text())


@pytest.mark.parametrize(("accept", "html"), [
    (BROWSER_ACCEPT, True),
    ("text/html", True),
    ("text/html;q=0.9, application/json;q=0.5", True),
    ("text/html, application/json", True),
    ("application/json, text/html", False),
    ("application/json;q=1, text/html;q=0.5", False),
    ("text/html;q=0", False),
    ("*/*", False),
    ("application/json", False),
    ("", False),
    ("text/*", False),
])
def test_prefers_html(accept, html):
    assert prefers_html(accept) is html


async def test_a_browser_at_root_goes_to_the_dashboard_api_clients_keep_burrows_404(client):
    response = await client.get("/", headers={"Accept": BROWSER_ACCEPT}, allow_redirects=False)
    assert (response.status, response.headers["Location"]) == (302, "ui/")
    for accept in ("*/*", "application/json", "application/json, text/html", None):
        response = await client.get("/", headers={"Accept": accept} if accept else {}, skip_auto_headers=["Accept"],
                                    allow_redirects=False)
        assert response.status == 404
        assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
        assert await response.text() == BURROW_404
    response = await client.post("/", headers={"Accept": BROWSER_ACCEPT}, allow_redirects=False)
    assert (response.status, await response.text()) == (404, BURROW_404)


async def test_the_page_and_every_asset_it_names_are_served(client):
    response = await client.get("/ui", allow_redirects=False)
    assert (response.status, response.headers["Location"]) == (302, "ui/")
    response = await client.get("/ui/")
    assert response.status == 200 and response.headers["Content-Type"].startswith("text/html")
    page = await response.text()
    assets = re.findall(r'(?:src|href)="(static/[^"]+)"', page)
    assert {"static/app.js", "static/app.css", "static/vendor/uPlot.iife.min.js",
            "static/vendor/uPlot.min.css"} <= set(assets)
    for asset in assets:
        served = await client.get(f"/ui/{asset}")
        assert served.status == 200, asset
        assert await served.read() == (STATIC / asset.removeprefix("static/")).read_bytes()
    assert (STATIC / "vendor" / "uPlot.LICENSE").read_text().startswith("The MIT License")
    # Outside the dashboard's routes the API's router answers as before.
    response = await client.get("/ui/static/missing.js")
    assert response.status == 404


async def test_group_summary_agrees_with_burrows_status_and_carries_the_trend(ctx, client, trends):  # noqa: F811
    await trends.sample()
    ctx.clock.now += 5
    await trends.sample()
    body = await get_json(client, "/ui/api/groups")
    assert body["clusters"] == ["local", "remote"]
    assert (body["sample_interval"], body["retention"], body["now"]) == (5, 30, ctx.clock.now)
    assert [(g["cluster"], g["group"]) for g in body["groups"]] == [("local", "healthy"), ("local", "stuck")]
    for summary in body["groups"]:
        burrow = await client.get(f"/v3/kafka/local/consumer/{summary['group']}/lag")
        status = json.loads(await burrow.text())["status"]
        assert summary["status"] == status["status"]
        assert summary["totallag"] == status["totallag"]
        assert summary["max_lag_seconds"] == status["max_lag_seconds"]
        assert summary["partition_count"] == status["partition_count"]
        assert summary["maxlag"] == {key: status["maxlag"][key] for key in ("topic", "partition", "current_lag")}
        assert summary["trend"] == [status["totallag"]] * 2
    stuck = body["groups"][1]
    assert (stuck["status"], stuck["totallag"]) == ("ERR", 500)


async def test_sampling_reads_the_figures_without_building_any_partitions_answer(ctx, trends):  # noqa: F811
    await trends.sample()
    # The sample's own evaluation, kept by the evaluator (expire-cache 10 s, the clock stands still).
    evaluation = await ctx.evaluator.evaluation("local", "stuck")
    assert evaluation._results == {}  # an ERR group of 1,000 partitions would have had 1,000 built
    series = trends.series("local", "stuck")
    assert (list(series.total_lag), series.statuses[0]) == ([evaluation.totallag], Status.ERR)
    status = await ctx.evaluator.evaluate("local", "stuck", False)
    assert status.totallag == 500 and status.partitions


async def test_history_of_a_group_and_since(ctx, client, trends):  # noqa: F811
    first = ctx.clock.now
    for _ in range(3):
        await trends.sample()
        ctx.clock.now += 5
    body = await get_json(client, "/ui/api/history/local/stuck")
    assert (body["now"], body["retention"]) == (ctx.clock.now, 30)
    assert body["time"] == [first, first + 5, first + 10]
    assert body["totallag"] == [500] * 3
    assert body["status"] == ["ERR"] * 3
    assert len(body["max_lag_seconds"]) == 3 and all(v is None or v >= 0 for v in body["max_lag_seconds"])
    body = await get_json(client, f"/ui/api/history/local/stuck?since={first + 5}")
    assert body["time"] == [first + 10]
    body = await get_json(client, "/ui/api/history/local/stuck?since=yesterday", status=400)
    assert body["error"] is True
    body = await get_json(client, "/ui/api/history/local/nobody")
    assert body["time"] == [] and body["totallag"] == []


async def test_topic_summary_lists_offsets_and_readers(client):
    body = await get_json(client, "/ui/api/topics/local")
    assert body["topics"] == [  # no topic health read (burrowpy.coordinators.topic_health): none shown
        {"topic": "audit", "offsets": [42], "consumers": [], "health": None},
        {"topic": "orders", "offsets": [1000, 2000], "consumers": ["healthy", "stuck"], "health": None},
    ]
    assert body["health"] is None
    body = await get_json(client, "/ui/api/topics/elsewhere", status=404)
    assert body == {"error": True, "message": "cluster not found"}


async def test_topic_summary_with_health(client, ctx):  # noqa: F811
    from burrowpy.coordinators.topic_health import ClusterHealth, PartitionHealth

    ctx.modules["cluster"]["local"].health = ClusterHealth(1_700_000_000_000, frozenset({1, 2}), {
        "orders": [PartitionHealth(1, (1, 2), (1,), size_bytes=10), PartitionHealth(3, (3,), (3,), size_bytes=5)],
        "audit": [PartitionHealth(2, (2,), (2,), size_bytes=7)]}, {"orders": 2, "audit": 1})
    body = await get_json(client, "/ui/api/topics/local")
    assert body["health"] == {"under_replicated": 1, "under_min_isr": 2, "offline": 1, "brokers": 2,
                              "read_at": 1_700_000_000_000}
    orders = next(topic for topic in body["topics"] if topic["topic"] == "orders")["health"]
    assert "partitions" not in orders
    assert (orders["size_bytes"], orders["under_replicated"], orders["under_min_isr"], orders["offline"]) == \
        (15, 1, 2, 1)


async def test_history_is_bounded_and_forgets_deleted_groups(ctx):  # noqa: F811
    trends = GroupTrends(ctx, interval=1, retention=3)
    for _ in range(20):
        await trends.sample()
        ctx.clock.now += 1
    series = trends.series("local", "stuck")
    assert len(series.to_json()["time"]) == 3
    assert series.to_json()["time"][-1] == ctx.clock.now - 1
    assert len(series.times) < 2 * 3
    ctx.storage.submit(SetDeleteGroup("local", "stuck"))
    await ctx.storage.flush()
    await trends.sample()
    assert trends.series("local", "stuck") is None
    assert trends.series("local", "healthy") is not None


def test_series_keeps_missing_time_lag_as_null():
    series = GroupSeries(capacity=4)
    series.append(1.0, 10, None, Status.OK)
    series.append(2.0, 20, 3.5, Status.WARN)
    assert series.to_json() == {"time": [1.0, 2.0], "totallag": [10, 20], "max_lag_seconds": [None, 3.5],
                                "status": ["OK", "WARN"]}
    for n in range(3, 10):
        series.append(float(n), n, None, Status.OK)
    assert series.recent_total_lag(2) == [8, 9]
    assert series.recent_total_lag(60) == series.to_json()["totallag"] == [6, 7, 8, 9]


async def test_sampler_runs_on_its_timer_until_stopped(ctx):  # noqa: F811
    trends = GroupTrends(ctx, interval=0.01, retention=60)
    await trends.start()
    ctx.app_ready.set()
    try:
        deadline = time.monotonic() + 30
        while trends.series("local", "healthy") is None or len(trends.series("local", "healthy").times) < 3:
            assert time.monotonic() < deadline, "the sampler did not sample three times"
            await asyncio.sleep(0.01)
    finally:
        await trends.stop()
    assert trends._task is None


def test_the_sample_interval_and_retention_come_from_the_config():
    import structlog

    from burrowpy.config import parse_config
    from burrowpy.context import ApplicationContext
    from burrowpy.httpserver import HttpServerCoordinator

    doc = {"dashboard": {"sample-interval": 30, "retention": 7200}, "httpserver": {"a": {"address": "127.0.0.1:0"}}}
    server = HttpServerCoordinator(ApplicationContext(config=parse_config(doc, "b.yaml", {}),
                                                      logger=structlog.get_logger()))
    assert (server.trends.interval, server.trends.retention) == (30, 7200)
    default = HttpServerCoordinator(ApplicationContext(config=parse_config({}, "b.yaml", {}),
                                                       logger=structlog.get_logger()))
    assert (default.trends.interval, default.trends.retention) == (5, 3600)
    # a large fleet may turn the history off: no sampler evaluating every group, the pages without trends
    off = HttpServerCoordinator(ApplicationContext(config=parse_config({"dashboard": {"sample-interval": 0}}, "b.yaml",
                                                                       {}), logger=structlog.get_logger()))
    assert off.trends is None
