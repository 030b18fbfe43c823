"""The http notifier against a real aiohttp receiver, driven by the real storage and evaluator."""

from __future__ import annotations

import base64
import json
import ssl
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web
from notifier_support import (
    MonitorCore,
    capturing_logger,
    eventually,
    notifier_sections,
    self_signed_certificate,
)
from prometheus_client import CollectorRegistry, generate_latest
from zk import free_port

from burrowpy.notifier.coordinator import NotifierCoordinator

pytestmark = pytest.mark.integration


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: str
    answered: int


@dataclass
class Receiver:
    """An HTTP endpoint that records every request and fails the first ``failures`` of them with 500."""

    failures: int = 0
    requests: list[Received] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        answer = 500 if len(self.requests) < self.failures else 200
        self.requests.append(Received(request.method, request.path, dict(request.headers), await request.text(),
                                      answer))
        return web.Response(status=answer, text="boom" if answer == 500 else "ok")

    @property
    def accepted(self) -> list[Received]:
        return [r for r in self.requests if r.answered == 200]


async def serve(receiver: Receiver, tls: ssl.SSLContext | None = None) -> tuple[web.AppRunner, int]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", receiver.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=tls).start()
    return runner, port


@pytest.fixture
async def monitor():
    logger, logs = capturing_logger()
    core = MonitorCore(logger)
    core.logs = logs
    await core.start()
    yield core
    await core.stop()


def http_notifier(port: int, scheme: str = "http", **extra) -> dict:
    keys = {
        "class-name": "http", "interval": 1, "send-interval": 3600, "send-close": True,
        "url-open": f"{scheme}://127.0.0.1:{port}/events/{{{{ cluster }}}}/{{{{ group }}}}",
        "url-close": f"{scheme}://127.0.0.1:{port}/events/{{{{ id }}}}",
        "method-close": "DELETE",
        "template-open": "default-http-open.tmpl", "template-close": "default-http-close.tmpl",
        "headers": {"X-Api-Key": "key-123"}, "username": "burrow", "password": "s3cret",
        "extras": {"api_key": "k", "app": "burrowpy", "tier": "prod"},
        "retries": 3, "retry-backoff": 0.3,
    }
    keys.update(extra)
    return keys


async def test_open_and_close_arrive_with_json_headers_and_auth_despite_two_failures(monitor):
    receiver = Receiver(failures=2)
    runner, port = await serve(receiver)
    registry = CollectorRegistry(auto_describe=True)
    # Retries 1 s and 2 s after the failures, while the group is evaluated every second.
    sections = notifier_sections(alerts=http_notifier(port, **{"retry-backoff": 1.0}))
    coordinator = NotifierCoordinator(monitor.ctx, sections, registry=registry)
    await monitor.stop_group("payments")
    await coordinator.start()
    try:
        await eventually(lambda: receiver.requests, what="the first open attempt")
        # The group recovers while the open is still being retried: the close must wait for it.
        await monitor.recover_group("payments")
        await eventually(lambda: len(receiver.accepted) == 2, what="the open and the close")
        # The receiver records the close before the notifier has read the answer and counted it sent.
        close_sent = 'burrowpy_notifier_notifications_total{action="close",notifier="alerts",result="sent"} 1.0'

        def counted() -> str | None:
            text = generate_latest(registry).decode()
            return text if close_sent in text else None

        metrics = await eventually(counted, what="the close counted as sent")
    finally:
        await coordinator.stop()
        await runner.cleanup()

    assert [r.answered for r in receiver.requests] == [500, 500, 200, 200]
    opened, closed = receiver.accepted
    assert (opened.method, opened.path) == ("POST", "/events/local/payments")
    event = json.loads(opened.body)["events"][0]
    assert event["event"]["group"] == "payments" and event["event"]["severity"] == "ERR"
    assert [(p["topic"], p["partition"], p["status"]) for p in event["event"]["partitions"]] == \
        [("orders", 0, "STOP")]
    assert (closed.method, closed.path) == ("DELETE", f"/events/{event['id']}")
    assert json.loads(closed.body) == {"api_key": "k", "app": "burrowpy", "block": False, "ids": [event["id"]]}
    for request in (opened, closed):
        assert request.headers["Content-Type"] == "application/json"
        assert request.headers["X-Api-Key"] == "key-123"
        assert request.headers["Authorization"] == "Basic " + base64.b64encode(b"burrow:s3cret").decode()

    retries = [e for e in monitor.logs.entries if e["event"] == "notification failed, will retry"]
    assert [e["attempt"] for e in retries] == [1, 2]
    assert "answered 500 Internal Server Error: 'boom'" in retries[0]["error"]
    assert 'burrowpy_notifier_retries_total{notifier="alerts"} 2.0' in metrics
    assert 'burrowpy_notifier_notifications_total{action="open",notifier="alerts",result="sent"} 1.0' in metrics
    assert close_sent in metrics


async def test_unreachable_endpoint_is_logged_and_the_notifier_keeps_working(monitor):
    closed_port = free_port()  # nothing listens here
    receiver = Receiver()
    runner, port = await serve(receiver)
    sections = notifier_sections(
        broken=http_notifier(closed_port, retries=1, **{"retry-backoff": 0.05}),
        working=http_notifier(port))
    coordinator = NotifierCoordinator(monitor.ctx, sections)
    await monitor.stop_group("payments")
    await coordinator.start()
    try:
        given_up = await eventually(lambda: [e for e in monitor.logs.entries if e["event"] == "notification not sent"],
                                    what="the failure log")
        await eventually(lambda: receiver.accepted, what="the other notifier's open")
        await monitor.recover_group("payments")
        await eventually(lambda: len(receiver.accepted) == 2, what="the close after the failure")
    finally:
        await coordinator.stop()
        await runner.cleanup()
    entry = given_up[0]
    assert entry["log_level"] == "error" and entry["module"] == "broken" and entry["attempts"] == 2
    assert f"POST http://127.0.0.1:{closed_port}/events/local/payments: ClientConnectorError" in entry["error"]
    assert coordinator.modules["broken"].stats.failed["open"] == 1


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    return self_signed_certificate(tmp_path_factory.mktemp("tls"))


async def test_https_with_an_extra_ca_and_a_refused_certificate_without_it(monitor, certificate):
    cert, key = certificate
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    receiver = Receiver()
    runner, port = await serve(receiver, tls)
    sections = notifier_sections(
        trusted=http_notifier(port, "https", **{"extra-ca": str(cert), "send-close": False}),
        untrusted=http_notifier(port, "https", **{"send-close": False}))
    coordinator = NotifierCoordinator(monitor.ctx, sections)
    await monitor.stop_group("payments")
    await coordinator.start()
    try:
        await eventually(lambda: receiver.accepted, what="the open over HTTPS")
        refused = await eventually(
            lambda: [e for e in monitor.logs.entries if e["event"] == "notification not sent"],
            what="the certificate failure")
    finally:
        await coordinator.stop()
        await runner.cleanup()
    assert len(receiver.requests) == 1
    assert refused[0]["module"] == "untrusted" and refused[0]["gave_up"] == "permanent failure"
    assert "certificate verify failed" in refused[0]["error"]


async def test_a_template_that_fails_when_rendered_is_logged_and_others_still_send(monitor, tmp_path):
    (tmp_path / "broken.tmpl").write_text('{"group": {{ group | jsonencoder }},\n "lag": {{ result.total_lag }}}\n')
    receiver = Receiver()
    runner, port = await serve(receiver)
    sections = notifier_sections(
        broken=http_notifier(port, **{"template-open": str(tmp_path / "broken.tmpl"), "send-close": False}),
        working=http_notifier(port, **{"send-close": False}))
    coordinator = NotifierCoordinator(monitor.ctx, sections)
    await monitor.stop_group("payments")
    await coordinator.start()
    try:
        failed = await eventually(
            lambda: [e for e in monitor.logs.entries if e["event"] == "notification not sent: its template failed"],
            what="the template failure")
        await eventually(lambda: receiver.accepted, what="the working notifier's open")
        evaluations = coordinator.evaluations
        await eventually(lambda: coordinator.evaluations > evaluations + 1, what="evaluations going on")
    finally:
        await coordinator.stop()
        await runner.cleanup()
    assert len(receiver.requests) == 1
    assert failed[0]["module"] == "broken" and failed[0]["log_level"] == "error"
    assert "broken.tmpl line 2: UndefinedError" in failed[0]["error"] and "total_lag" in failed[0]["error"]
