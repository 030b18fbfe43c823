"""Burrow's HTTP API (spec section 6.3): the same paths, status codes, messages and JSON.

Routing follows Burrow's router (httprouter) where clients can see it: an unknown path answers 404 with
Burrow's plain-text body, a known path with the wrong method answers 405 with an ``Allow`` header, OPTIONS
lists the methods, and a path that only differs by a trailing slash, doubled slashes or letter case is
redirected to the real one. Lists that Burrow returns in Go's random map order are sorted here.
"""

from __future__ import annotations

import json
import posixpath
import re
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from burrowpy.context import ApplicationContext
from burrowpy.evaluator.group import GroupEvaluation
from burrowpy.evaluator.share import ShareGroupWindows, rule_settings
from burrowpy.httpauth import HttpAuthProfile, LoginThrottle, auth_middleware
from burrowpy.httpserver import gojson
from burrowpy.httpserver.metrics import render_metrics
from burrowpy.httpserver.status_json import evaluation_json
from burrowpy.httpserver.ui import browser_entry, mount_dashboard
from burrowpy.httpserver.ui.trends import GroupTrends
from burrowpy.protocol import (
    FetchClusters,
    FetchConsumer,
    FetchConsumers,
    FetchConsumersForTopic,
    FetchTopic,
    FetchTopics,
    SetDeleteGroup,
    Status,
)

CONTEXT = web.AppKey("burrowpy_context", ApplicationContext)

NOT_FOUND_BODY = '{"error":true,"message":"invalid request type","result":{}}'
ENCODE_FAILURE_BODY = '{"error":true,"message":"could not encode JSON","result":{}}'
CONFIG_KINDS = ("storage", "evaluator", "cluster", "consumer", "notifier")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _request_info(request: web.Request) -> dict[str, str]:
    return {"url": request.path, "host": socket.gethostname()}


def _cors(request: web.Request, headers: dict[str, str]) -> dict[str, str]:
    origin = request.app[CONTEXT].config.general.access_control_allow_origin
    if origin:
        headers["Access-Control-Allow-Origin"] = origin
    return headers


def json_response(request: web.Request, status: int, body: dict[str, Any]) -> web.Response:
    headers = _cors(request, {"Content-Type": "application/json"})
    try:
        text = gojson.dumps(body)
    except (TypeError, ValueError):
        return web.Response(status=500, body=ENCODE_FAILURE_BODY.encode(), headers=headers)
    return web.Response(status=status, body=text.encode(), headers=headers)


def ok(request: web.Request, message: str, *, http_status: int = 200, request_first: bool = False,
       **fields: Any) -> web.Response:
    """A success body: error false, the message, the endpoint's fields and the request info, in the order
    of Burrow's Go structs (the /v3/config bodies put the request info before their fields)."""
    body: dict[str, Any] = {"error": False, "message": message}
    if request_first:
        body["request"] = _request_info(request)
    body.update(fields)
    body["request"] = _request_info(request)
    return json_response(request, http_status, body)


def error(request: web.Request, status: int, message: str) -> web.Response:
    return json_response(request, status, {"error": True, "message": message, "request": _request_info(request)})


def plain_error(status: int, text: str, headers: dict[str, str] | None = None) -> web.Response:
    """Go's http.Error: text/plain, the text plus a newline."""
    return web.Response(status=status, body=(text + "\n").encode(),
                        headers={"Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff",
                                 **(headers or {})})


def plain_text(request: web.Request, status: int, text: str) -> web.Response:
    return web.Response(status=status, body=text.encode(),
                        headers=_cors(request, {"Content-Type": "text/plain; charset=utf-8"}))


class BurrowApi:
    """The handlers; each reads the context the application was built with."""

    def __init__(self, ctx: ApplicationContext) -> None:
        self.ctx = ctx

    async def _fetch(self, request_type: type, **fields: Any) -> Any:
        return await self.ctx.fetch(request_type(**fields, reply=self.ctx.new_reply()))

    # --- health ------------------------------------------------------------------------------------

    async def admin(self, request: web.Request) -> web.Response:
        return plain_text(request, 200, "GOOD")

    async def ready(self, request: web.Request) -> web.Response:
        if self.ctx.app_ready.is_set():
            return plain_text(request, 200, "READY")
        return plain_text(request, 503, "STARTING")

    async def metrics(self, request: web.Request) -> web.Response:
        body, content_type = await render_metrics(self.ctx)
        return web.Response(body=body, headers={"Content-Type": content_type})

    # --- /v3/kafka ---------------------------------------------------------------------------------

    async def cluster_list(self, request: web.Request) -> web.Response:
        clusters = await self._fetch(FetchClusters) or []
        return ok(request, "cluster list returned", clusters=sorted(clusters))

    async def cluster_detail(self, request: web.Request) -> web.Response:
        module = self.ctx.modules.get("cluster", {}).get(request.match_info["cluster"])
        if module is None:
            return error(request, 404, "cluster module not found")
        return ok(request, "cluster module detail returned", module=module.describe())

    async def probe(self, request: web.Request) -> web.Response:
        """Not Burrow's: the latest end-to-end probe figures of the cluster (burrowpy.coordinators.probe)."""
        module = self.ctx.modules.get("cluster", {}).get(request.match_info["cluster"])
        if module is None:
            return error(request, 404, "cluster module not found")
        running = getattr(module, "probe", None)
        if running is None:
            return error(request, 404, "probes are not enabled for this cluster")
        return ok(request, "probe figures returned", probe=running.to_json())

    def _share_groups(self, request: web.Request) -> ShareGroupWindows | None:
        module = self.ctx.modules.get("cluster", {}).get(request.match_info["cluster"])
        return getattr(module, "share_groups", None)

    async def share_group_list(self, request: web.Request) -> web.Response:
        """Not Burrow's: the cluster's share groups (burrowpy.evaluator.share)."""
        windows = self._share_groups(request)
        if windows is None:
            return error(request, 404, "cluster not found")
        return ok(request, "share group list returned", share_groups=windows.groups())

    async def _share_status(self, request: web.Request, showall: bool) -> web.Response:
        windows = self._share_groups(request)
        if windows is None:
            return error(request, 404, "cluster not found")
        status = windows.evaluate(request.match_info["group"], self.ctx.clock.time(),
                                  *rule_settings(self.ctx.evaluator))
        if status is None:
            return error(request, 404, "share group not found")
        return ok(request, "share group status returned", status=status.to_json(showall))

    async def share_group_status(self, request: web.Request) -> web.Response:
        return await self._share_status(request, showall=False)

    async def share_group_lag(self, request: web.Request) -> web.Response:
        return await self._share_status(request, showall=True)

    async def topic_list(self, request: web.Request) -> web.Response:
        topics = await self._fetch(FetchTopics, cluster=request.match_info["cluster"])
        if topics is None:
            return error(request, 404, "cluster not found")
        return ok(request, "topic list returned", topics=sorted(topics))

    async def topic_detail(self, request: web.Request) -> web.Response:
        offsets = await self._fetch(FetchTopic, cluster=request.match_info["cluster"],
                                    topic=request.match_info["topic"])
        if offsets is None:
            return error(request, 404, "cluster or topic not found")
        # Not Burrow's: the topic's health (burrowpy.coordinators.topic_health), null until it is read.
        module = self.ctx.modules.get("cluster", {}).get(request.match_info["cluster"])
        reader = getattr(module, "topic_health", None)
        health = await reader(request.match_info["topic"]) if reader is not None else None
        return ok(request, "topic offsets returned", offsets=list(offsets), health=health)

    async def topic_consumers(self, request: web.Request) -> web.Response:
        groups = await self._fetch(FetchConsumersForTopic, cluster=request.match_info["cluster"],
                                   topic=request.match_info["topic"])
        if groups is None:
            return error(request, 404, "cluster not found")
        return ok(request, "consumers of topic returned", consumers=sorted(groups))

    async def consumer_list(self, request: web.Request) -> web.Response:
        groups = await self._fetch(FetchConsumers, cluster=request.match_info["cluster"])
        if groups is None:
            return error(request, 404, "cluster not found")
        return ok(request, "consumer list returned", consumers=sorted(groups))

    async def consumer_detail(self, request: web.Request) -> web.Response:
        topics = await self._fetch(FetchConsumer, cluster=request.match_info["cluster"],
                                   group=request.match_info["group"])
        if topics is None:
            return error(request, 404, "cluster or consumer not found")
        detail = {topic: [partition.to_json() for partition in partitions]
                  for topic, partitions in sorted(topics.items())}
        return ok(request, "consumer detail returned", topics=detail)

    async def _status(self, request: web.Request, showall: bool) -> web.Response:
        evaluation = await self.ctx.evaluator.evaluation(request.match_info["cluster"], request.match_info["group"])
        # Burrow answers an unknown group with the NOTFOUND status body, 404, and error false.
        code = 404 if evaluation.status == Status.NOTFOUND else 200
        return ok(request, "consumer status returned", http_status=code, status=encoded_status(evaluation, showall))

    async def consumer_status(self, request: web.Request) -> web.Response:
        return await self._status(request, showall=False)

    async def consumer_lag(self, request: web.Request) -> web.Response:
        return await self._status(request, showall=True)

    async def consumer_delete(self, request: web.Request) -> web.Response:
        self.ctx.storage.submit(SetDeleteGroup(cluster=request.match_info["cluster"],
                                               group=request.match_info["group"],
                                               topic=request.match_info.get("topic")))
        return ok(request, "consumer group removed")

    # --- /v3/config --------------------------------------------------------------------------------

    async def config_main(self, request: web.Request) -> web.Response:
        config = self.ctx.config
        return ok(request, "main config returned", request_first=True,
                  general=config.general.to_json(),
                  logging=config.logging.to_json(),
                  zookeeper=config.zookeeper.to_json(),
                  httpserver={name: listener.to_json() for name, listener in sorted(config.httpserver.items())})

    def _config_list(self, kind: str) -> Handler:
        async def handler(request: web.Request) -> web.Response:
            return ok(request, "module list returned", request_first=True, coordinator=kind,
                      modules=sorted(self.ctx.modules.get(kind, {})))
        return handler

    def _config_detail(self, kind: str) -> Handler:
        async def handler(request: web.Request) -> web.Response:
            module = self.ctx.modules.get(kind, {}).get(request.match_info["name"])
            if module is None:
                return error(request, 404, f"{kind} module not found")
            return ok(request, f"{kind} module detail returned", module=module.describe())
        return handler

    # --- /v3/admin ---------------------------------------------------------------------------------

    async def get_log_level(self, request: web.Request) -> web.Response:
        control = self.ctx.log_control
        level = control.level if control is not None else self.ctx.config.logging.level
        return ok(request, "log level returned", level=level)

    async def set_log_level(self, request: web.Request) -> web.Response:
        level = _decode_level(await request.text())
        if level is None:
            return error(request, 400, "could not decode message body")
        control = self.ctx.log_control
        if control is None or not control.set_level(level):
            return error(request, 404, "unknown log level")
        self.ctx.logger.info("log level changed", level=control.level)
        return ok(request, "set log level")

    async def notifier_sender(self, request: web.Request) -> web.Response:
        """Not Burrow's: whether this instance is the one notifier sender, and by which lock it was chosen."""
        notifier = self.ctx.notifier
        if notifier is None:
            return error(request, 404, "no notifiers are configured")
        return ok(request, "notifier sender returned", notifier=notifier.describe())

    def routes(self) -> list[tuple[str, str, Handler]]:
        table: list[tuple[str, str, Handler]] = [
            ("GET", "/burrow/admin", self.admin),
            ("GET", "/burrow/admin/ready", self.ready),
            ("GET", "/metrics", self.metrics),
            ("GET", "/v3/kafka", self.cluster_list),
            ("GET", "/v3/kafka/{cluster}", self.cluster_detail),
            ("GET", "/v3/kafka/{cluster}/probe", self.probe),
            ("GET", "/v3/kafka/{cluster}/share-group", self.share_group_list),
            ("GET", "/v3/kafka/{cluster}/share-group/{group}/status", self.share_group_status),
            ("GET", "/v3/kafka/{cluster}/share-group/{group}/lag", self.share_group_lag),
            ("GET", "/v3/kafka/{cluster}/topic", self.topic_list),
            ("GET", "/v3/kafka/{cluster}/topic/{topic}", self.topic_detail),
            ("GET", "/v3/kafka/{cluster}/topic/{topic}/consumers", self.topic_consumers),
            ("GET", "/v3/kafka/{cluster}/consumer", self.consumer_list),
            ("GET", "/v3/kafka/{cluster}/consumer/{group}", self.consumer_detail),
            ("GET", "/v3/kafka/{cluster}/consumer/{group}/status", self.consumer_status),
            ("GET", "/v3/kafka/{cluster}/consumer/{group}/lag", self.consumer_lag),
            ("DELETE", "/v3/kafka/{cluster}/consumer/{group}", self.consumer_delete),
            ("DELETE", "/v3/kafka/{cluster}/consumer/{group}/topic/{topic}", self.consumer_delete),
            ("GET", "/v3/config", self.config_main),
            ("GET", "/v3/config/cluster/{cluster}", self.cluster_detail),
            ("GET", "/v3/admin/loglevel", self.get_log_level),
            ("GET", "/v3/admin/notifier", self.notifier_sender),
            ("POST", "/v3/admin/loglevel", self.set_log_level),
        ]
        for kind in CONFIG_KINDS:
            table.append(("GET", f"/v3/config/{kind}", self._config_list(kind)))
            if kind != "cluster":
                table.append(("GET", f"/v3/config/{kind}/{{name}}", self._config_detail(kind)))
        return table


def encoded_status(evaluation: GroupEvaluation, showall: bool) -> gojson.RawJSON | dict[str, Any]:
    """The ``status`` object of ``/status`` (``showall`` False) or ``/lag`` of an evaluation, encoded."""
    # Every request for the group within expire-cache shares one evaluation, and so one encoding.
    body = evaluation.answers.get(showall)
    if body is None:
        try:
            body = evaluation.answers[showall] = gojson.RawJSON(evaluation_json(evaluation, showall))
        except (TypeError, ValueError):
            # Refused again by json_response, which answers as for any such body.
            body = evaluation.result(showall).to_json()
    return body  # type: ignore[no-any-return]


def _decode_level(body: str) -> str | None:
    """The level of a ``{"level": "..."}`` body as Go's decoder reads it: the first JSON value, field names
    matched case-insensitively, a missing field or null meaning ""; None if undecodable."""
    try:
        value, _ = json.JSONDecoder().raw_decode(body.lstrip())
    except ValueError:
        return None
    if value is None:
        return ""
    if not isinstance(value, dict):
        return None
    level = value.get("level")
    if "level" not in value:
        level = next((item for key, item in value.items() if key.lower() == "level"), None)
    if level is None:
        return ""
    return level if isinstance(level, str) else None


# --- routing as Burrow's router does it ------------------------------------------------------------

_PARAMETER = re.compile(r"^\{\w+\}$")


def _segments(path: str) -> list[str]:
    return path.split("/")[1:]


def _clean_path(path: str) -> str:
    """Collapse doubled slashes and . / .. segments, keeping a trailing slash."""
    cleaned = posixpath.normpath("/" + path)
    cleaned = "/" + cleaned.lstrip("/")
    if path.endswith("/") and cleaned != "/":
        cleaned += "/"
    return cleaned


def _fixed_path(path: str, method: str, routes: list[tuple[str, str, Handler]]) -> str | None:
    """The route path ``path`` was meant to be (case, trailing slash, doubled slashes), or None."""
    cleaned = _clean_path(path)
    candidates = [cleaned, cleaned[:-1] if cleaned.endswith("/") else cleaned + "/"]
    for candidate in candidates:
        wanted = _segments(candidate)
        for route_method, pattern, _ in routes:
            template = _segments(pattern)
            if route_method != method or len(template) != len(wanted):
                continue
            fixed = []
            for part, given in zip(template, wanted, strict=True):
                if _PARAMETER.match(part) and given:
                    fixed.append(given)
                elif part.lower() == given.lower():
                    fixed.append(part)
                else:
                    break
            else:
                return "/" + "/".join(fixed)
    return None


def _router_behaviour(routes: list[tuple[str, str, Handler]]) -> Any:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        failure = request.match_info.http_exception
        if failure is None:
            return await handler(request)
        if request.method != "CONNECT" and request.path != "/":
            fixed = _fixed_path(request.path, request.method, routes)
            if fixed is not None and fixed != request.path:
                location = fixed + (f"?{request.query_string}" if request.query_string else "")
                return web.Response(status=301 if request.method == "GET" else 308, headers={"Location": location})
        if isinstance(failure, web.HTTPMethodNotAllowed):
            allow = ", ".join(sorted({*failure.allowed_methods, "OPTIONS"}))
            if request.method == "OPTIONS":
                return web.Response(status=200, headers={"Allow": allow})
            return plain_error(405, "Method Not Allowed", {"Allow": allow})
        return plain_error(404, NOT_FOUND_BODY)
    return middleware


# What a page on another site can make a browser send here without a CORS preflight is a "simple request":
# GET, HEAD, or a POST whose Content-Type is text/plain, a form encoding, or absent. So a POST is accepted
# only with a JSON body, which a browser sends cross-site only after a preflight that this API never grants
# (its OPTIONS answers carry no Access-Control-Allow-* headers). PUT, PATCH and DELETE are never simple.
JSON_TYPE = "application/json"


@web.middleware
async def json_posts_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse a POST whose body is not JSON (see above): no change by cross-site request forgery."""
    if request.method == "POST" and request.match_info.http_exception is None and request.content_type != JSON_TYPE:
        return error(request, 415, f"a POST needs Content-Type: {JSON_TYPE}, "
                                   f"got {request.headers.get('Content-Type') or 'none'}")
    return await handler(request)


def build_app(ctx: ApplicationContext, trends: GroupTrends | None = None,
              auth: HttpAuthProfile | None = None, throttle: LoginThrottle | None = None) -> web.Application:
    """The API of one listener; with ``auth`` every request is checked first (:mod:`burrowpy.httpauth`), failed
    logins limited by ``throttle`` (the default limits unless given)."""
    api = BurrowApi(ctx)
    routes = api.routes()
    checks = [auth_middleware(auth, error, throttle or LoginThrottle())] if auth is not None else []
    app = web.Application(middlewares=[*checks, browser_entry, _router_behaviour(routes), json_posts_only])
    app[CONTEXT] = ctx
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)
    mount_dashboard(app, ctx, trends)
    return app
