"""Burrow's HTTP API, admin endpoints and /metrics on aiohttp."""

from burrowpy.httpserver.api import build_app
from burrowpy.httpserver.server import HttpServerCoordinator

__all__ = ["HttpServerCoordinator", "build_app"]
