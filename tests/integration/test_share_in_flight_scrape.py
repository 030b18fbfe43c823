"""Scrapes of real HTTP endpoints for share-partitions' in-flight counts (burrowpy.coordinators.broker_metrics):
two endpoints merge; one that fails makes the counts it may hold unknown and is logged once, until it answers
again."""

from __future__ import annotations

import aiohttp
from aiohttp import web

from burrowpy.coordinators.broker_metrics import IN_FLIGHT_METRIC, BrokerMetricsScraper

EXPORTED = f"""\
# TYPE jvm_threads_current gauge
jvm_threads_current 93.0
# TYPE {IN_FLIGHT_METRIC} gauge
{IN_FLIGHT_METRIC}{{group="workers",partition="0",topic="jobs"}} 7.0
{IN_FLIGHT_METRIC}{{group="workers",partition="1",topic="jobs"}} 0.0
"""


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict]] = []

    def warning(self, event: str, **fields: object) -> None:
        self.lines.append(("warning", event, fields))

    def info(self, event: str, **fields: object) -> None:
        self.lines.append(("info", event, fields))


async def serve(handler) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_get("/metrics", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    return runner, f"http://127.0.0.1:{port}/metrics"


async def test_scrapes_merge_the_endpoints_and_a_failing_one_makes_counts_unknown_and_logs_once():
    answers = {"second": "ok"}

    async def first(_: web.Request) -> web.Response:
        return web.Response(text=EXPORTED, content_type="text/plain")

    async def second(_: web.Request) -> web.Response:
        if answers["second"] != "ok":
            return web.Response(status=503, text="starting")
        return web.Response(text=f'{IN_FLIGHT_METRIC}{{group="workers",partition="2",topic="jobs"}} 3.0\n',
                            content_type="text/plain")

    runners = []
    try:
        for handler in (first, second):
            runner, url = await serve(handler)
            runners.append((runner, url))
        log = Log()
        scraper = BrokerMetricsScraper([url for _, url in runners], aiohttp.ClientTimeout(total=5), log)
        try:
            counts = await scraper.in_flight()
            assert counts.complete and counts.of("workers", "jobs", 0) == 7 and counts.of("workers", "jobs", 2) == 3
            assert counts.of("workers", "jobs", 5) == 0  # reported by no leader: nothing acquired
            answers["second"] = "down"
            for _ in range(3):
                counts = await scraper.in_flight()
                assert not counts.complete and counts.of("workers", "jobs", 0) == 7
                assert counts.of("workers", "jobs", 2) is None
            assert [(level, fields["url"]) for level, _, fields in log.lines] == [("warning", runners[1][1])]
            answers["second"] = "ok"
            assert (await scraper.in_flight()).of("workers", "jobs", 2) == 3
            assert [level for level, _, _ in log.lines] == ["warning", "info"]
        finally:
            await scraper.close()
    finally:
        for runner, _ in runners:
            await runner.cleanup()
