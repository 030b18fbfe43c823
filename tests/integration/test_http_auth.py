"""The HTTP API's authentication: hashed passwords and token digests from the config, two roles, open
paths, 401/403 with Burrow's JSON errors, over plain HTTP and HTTPS, and the `burrowpy auth` command."""

from __future__ import annotations

import base64
import io
import ssl
import subprocess
import sys
from contextlib import asynccontextmanager

import aiohttp
import pytest
from test_http_server import certificate  # noqa: F401  (a fixture)

from burrowpy.config import ConfigError, parse_config
from burrowpy.context import ApplicationContext
from burrowpy.coordinators.base import Coordinator
from burrowpy.daemon import module_classes
from burrowpy.httpauth import (
    LOGIN_BURST,
    LOGIN_REFILL_S,
    LoginThrottle,
    PasswordHash,
    hash_password,
    token_digest,
)
from burrowpy.httpserver import HttpServerCoordinator
from burrowpy.logging import LogControl

READER_TOKEN = "reader-token-for-tests"
ADMIN_TOKEN = "admin-token-for-tests"
# One scrypt hash per password for the whole module: hashing is slow on purpose.
HASHES = {password: hash_password(password) for password in ("grafana-pass", "alice-pass")}


def auth_profile(**overrides) -> dict:
    profile = {
        "readers": {"grafana": HASHES["grafana-pass"]},
        "admins": {"alice": HASHES["alice-pass"]},
        "reader-tokens": [token_digest(READER_TOKEN)],
        "admin-tokens": [token_digest(ADMIN_TOKEN)],
    }
    profile.update(overrides)
    return profile


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def ask(url: str, method: str = "GET", **kwargs) -> tuple[int, dict[str, str], str]:
    async with aiohttp.ClientSession() as session, session.request(method, url, **kwargs) as response:
        return response.status, dict(response.headers), await response.text()


@asynccontextmanager
async def serving(doc: dict):
    """The HTTP server of a monitor with storage and evaluator running (no Kafka), as the daemon builds it."""
    config = parse_config({"cluster": {"local": {"class-name": "kafka", "servers": ["k1:9092"]}}, **doc},
                          "burrowpy.yaml", {})
    log_control = LogControl(config.logging, stream=io.StringIO(), name="burrowpy.test_http_auth")
    ctx = ApplicationContext(config=config, logger=log_control.logger, log_control=log_control)
    classes = module_classes()
    modules = [Coordinator("storage", ctx, classes["storage"], default_class="inmemory")]
    ctx.storage = modules[0].modules["default"]
    modules.append(Coordinator("evaluator", ctx, classes["evaluator"], default_class="caching"))
    ctx.evaluator = modules[1].modules["default"]
    for module in modules:
        await module.start()
    running = HttpServerCoordinator(ctx)
    await running.start()
    try:
        yield running
    finally:
        await running.stop()
        for module in reversed(modules):
            await module.stop()
        log_control.close()


@pytest.fixture
async def server():
    doc = {"http-auth": {"ops": auth_profile(**{"open-paths": ["/burrow/admin", "/ui/static/"]})},
           "httpserver": {"checked": {"address": "127.0.0.1:0", "auth": "ops"},
                          "open": {"address": "127.0.0.1:0"}}}
    async with serving(doc) as running:
        yield running


async def test_no_credentials_get_401_with_a_challenge_and_burrows_json_error(server):
    status, headers, body = await ask(server.url("checked") + "/v3/kafka")
    assert status == 401
    assert headers["WWW-Authenticate"] == 'Basic realm="burrowpy", charset="UTF-8"'
    assert headers["Content-Type"] == "application/json"
    assert body.startswith('{"error":true,"message":"authentication required')
    assert '"request":{"url":"/v3/kafka"' in body


async def test_wrong_or_malformed_credentials_are_refused(server):
    url = server.url("checked") + "/v3/kafka"
    for headers in (basic("grafana", "wrong"), basic("nobody", "grafana-pass"), bearer("not-a-token"),
                    {"Authorization": "Basic !!!not-base64"}, {"Authorization": "Digest abc"},
                    {"Authorization": "Basic " + base64.b64encode(b"no-colon").decode()}):
        assert (await ask(url, headers=headers))[0] == 401, headers


async def test_failed_logins_are_limited_per_user_and_per_address(server):
    url = server.url("checked") + "/v3/kafka"
    for number in range(LOGIN_BURST):  # a user mistyping, or a guesser's first tries: checked, refused
        assert (await ask(url, headers=basic("grafana" if number % 2 else "nobody", f"guess-{number}")))[0] == 401
    status, headers, body = await ask(url, headers=basic("grafana", "guess"))
    assert status == 429 and 0 < int(headers["Retry-After"]) <= LOGIN_REFILL_S
    assert headers["Content-Type"] == "application/json"
    assert body.startswith('{"error":true,"message":"too many failed logins: retry after')
    # the address is over its limit, whoever it names; tokens (not guessable) still work
    assert (await ask(url, headers=basic("alice", "alice-pass")))[0] == 429
    assert (await ask(url, headers=bearer(READER_TOKEN)))[0] == 200


async def test_a_listener_sets_its_own_login_limits():
    doc = {"http-auth": {"ops": auth_profile()},
           "httpserver": {"strict": {"address": "127.0.0.1:0", "auth": "ops", "login-burst": 2, "login-refill": 120}}}
    async with serving(doc) as running:
        url = running.url("strict") + "/v3/kafka"
        for number in range(2):
            assert (await ask(url, headers=basic("grafana", f"guess-{number}")))[0] == 401
        status, headers, _ = await ask(url, headers=basic("grafana", "guess"))
        assert status == 429 and LOGIN_REFILL_S < int(headers["Retry-After"]) <= 120


def test_the_login_throttle_refills_and_gives_back_what_succeeded():
    throttle = LoginThrottle(burst=3, refill_s=10.0)
    keys = ("user:grafana", "address:10.0.0.1")
    for _ in range(3):
        assert throttle.wait_s(keys, 0.0) == 0
        throttle.take(keys, 0.0)
    assert throttle.wait_s(keys, 0.0) == 10.0
    assert throttle.wait_s(("user:grafana", "address:10.0.0.2"), 0.0) == 10.0  # the user is limited anywhere
    assert throttle.wait_s(("user:alice", "address:10.0.0.2"), 0.0) == 0
    assert throttle.wait_s(keys, 4.0) == 6.0
    assert throttle.wait_s(keys, 10.0) == 0
    throttle.take(keys, 10.0)
    throttle.take(keys, 10.0, -1)  # that login succeeded
    assert throttle.wait_s(keys, 10.0) == 0


async def test_readers_read_everything_and_change_nothing(server):
    base = server.url("checked")
    for headers in (basic("grafana", "grafana-pass"), bearer(READER_TOKEN)):
        assert (await ask(base + "/v3/kafka", headers=headers))[0] == 200
        assert (await ask(base + "/metrics", headers=headers))[0] == 200
        assert (await ask(base + "/ui/", headers=headers))[0] == 200
        status, _, body = await ask(base + "/v3/admin/loglevel", "POST", headers=headers, json={"level": "debug"})
        assert status == 403 and '"message":"forbidden: POST needs the admin role' in body
        assert (await ask(base + "/v3/kafka/local/consumer/g", "DELETE", headers=headers))[0] == 403


async def test_admins_may_change_things(server):
    base = server.url("checked")
    for headers in (basic("alice", "alice-pass"), bearer(ADMIN_TOKEN)):
        status, _, body = await ask(base + "/v3/admin/loglevel", "POST", headers=headers, json={"level": "info"})
        assert status == 200, body
        # Past authentication to Burrow's own answer (200 even for a group it does not know).
        status, _, body = await ask(base + "/v3/kafka/local/consumer/g", "DELETE", headers=headers)
        assert status == 200 and '"error":false' in body


async def test_open_paths_and_preflights_need_no_credentials(server):
    base = server.url("checked")
    assert (await ask(base + "/burrow/admin"))[:1] == (200,)
    assert (await ask(base + "/ui/static/app.js"))[0] == 200  # a prefix entry opens what is under it
    assert (await ask(base + "/ui/"))[0] == 401  # ... and nothing else
    assert (await ask(base + "/v3/kafka", "OPTIONS"))[0] == 200


async def test_a_listener_without_auth_stays_open_as_burrows(server):
    assert (await ask(server.url("open") + "/v3/kafka"))[0] == 200


async def test_https_with_authentication(certificate):  # noqa: F811
    cert, key = certificate
    doc = {"tls": {"web": {"certfile": str(cert), "keyfile": str(key)}},
           "http-auth": {"ops": auth_profile()},
           "httpserver": {"secure": {"address": "127.0.0.1:0", "tls": "web", "auth": "ops"}}}
    async with serving(doc) as running:
        trusted = ssl.create_default_context(cafile=str(cert))
        url = running.url("secure") + "/v3/kafka"
        assert (await ask(url, ssl=trusted))[0] == 401
        assert (await ask(url, ssl=trusted, headers=bearer(READER_TOKEN)))[0] == 200


@pytest.mark.parametrize(
    ("profile", "path", "message"),
    [
        ({"readers": {"bob": "plain-text"}}, "http-auth.ops.readers.bob", "is not a password hash"),
        ({"readers": {"bob": "scrypt:3:8:1:c2FsdA:aGFzaA"}}, "http-auth.ops.readers.bob", "out of range"),
        ({"readers": {"bob": HASHES["grafana-pass"]}, "admins": {"bob": HASHES["alice-pass"]}},
         "http-auth.ops.admins.bob", "a user has one role"),
        ({"admin-tokens": ["md5:abc"]}, "http-auth.ops.admin-tokens[0]", "is not a token digest"),
        ({}, "http-auth.ops.readers", "would lock everyone out"),
        ({"reader-tokens": [token_digest("x")], "open-paths": ["metrics"]}, "http-auth.ops.open-paths",
         "is not a path"),
        ({"reader-tokens": [token_digest("x")], "users": {}}, "http-auth.ops.users", "unknown key"),
    ],
)
def test_config_errors_name_the_key(profile, path, message):
    with pytest.raises(ConfigError) as caught:
        parse_config({"http-auth": {"ops": profile}}, "burrowpy.yaml", {})
    assert caught.value.path == path and message in caught.value.message


def test_a_listener_naming_an_unknown_profile_is_a_config_error():
    with pytest.raises(ConfigError, match="httpserver.api.auth: names http-auth profile 'ops', which is not"):
        parse_config({"httpserver": {"api": {"address": ":0", "auth": "ops"}}}, "burrowpy.yaml", {})


def test_the_auth_command_makes_what_the_config_takes():
    run = [sys.executable, "-m", "burrowpy.cli", "auth"]
    hashed = subprocess.run([*run, "hash-password"], input="correct horse\n", capture_output=True, text=True,
                            check=True).stdout.strip()
    assert PasswordHash.parse(hashed).matches("correct horse")
    assert not PasswordHash.parse(hashed).matches("correct horse ")
    empty = subprocess.run([*run, "hash-password"], input="\n", capture_output=True, text=True)
    assert empty.returncode == 1 and "empty password" in empty.stderr
    lines = subprocess.run([*run, "new-token"], capture_output=True, text=True, check=True).stdout.splitlines()
    token, digest = lines[0].removeprefix("token:  "), lines[1].removeprefix("digest: ")
    assert digest == token_digest(token) and len(token) >= 40
