"""Who may use the HTTP API: basic auth with hashed passwords and bearer tokens, two roles.

Burrow's API is open to anyone who reaches it, including the requests that delete a group or change the
log level. A listener that names an ``http-auth`` profile checks every request:

- readers may GET (and HEAD) everything: the v3 API, ``/metrics``, the dashboard;
- admins may also change things: DELETE of a group or topic, the log level (PUT/POST), anything that is
  not a read;
- paths listed in ``open-paths`` are served without credentials (by default only Burrow's health checks
  ``/burrow/admin`` and ``/burrow/admin/ready``); an entry ending in ``/`` opens everything under it. CORS preflights (OPTIONS) are
  open, as browsers send them without credentials.

Credentials in the config are never the secrets themselves: passwords are scrypt hashes
(``burrowpy hash-password``), tokens are SHA-256 digests (``burrowpy new-token`` prints a token and its
digest). Every comparison is constant-time. A wrong or missing credential gets 401 with a
``WWW-Authenticate`` challenge (so a browser asks for a password), a reader asking for a change gets 403,
both with Burrow's JSON error body. A successful password check is remembered for a minute (by a digest of
the header), since scrypt is slow on purpose and the dashboard asks several times a second.

scrypt runs on one thread of its own, never on the event loop, so a storm of password guesses costs at most
one core and the API goes on answering. Failed password checks are limited per user and per client address
(by default a burst of ``LOGIN_BURST``, then one per ``LOGIN_REFILL_S`` seconds; a listener's
``login-burst`` and ``login-refill`` change them); past that a request gets 429 with
``Retry-After`` and Burrow's JSON error, without a password check. An unknown user's password is checked
against a made-up hash, so the time taken does not tell which users exist.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import concurrent.futures
import contextlib
import getpass
import hashlib
import hmac
import math
import os
import secrets
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the config loader imports this module; aiohttp only matters once a listener starts
    from aiohttp import web

READER = "reader"
ADMIN = "admin"
READ_METHODS = frozenset({"GET", "HEAD"})
REALM = "burrowpy"
# scrypt parameters for new hashes (RFC 7914 interactive-login strength: ~50 ms, 16 MiB).
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
_REMEMBER_S = 60.0
_REMEMBER_MAX = 1024
# Failed logins per user and per address: a burst of 10, then 10 a minute. A person mistyping is not
# stopped; a guesser gets 14,400 tries a day per address instead of the ~20 a second scrypt allows.
CHECKER_NICENESS = 10
LOGIN_BURST = 10
LOGIN_REFILL_S = 6.0
_THROTTLED_MAX = 4096

Handler = Callable[["web.Request"], Awaitable["web.StreamResponse"]]


# --- secrets in the config ----------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """``scrypt:N:r:p:salt:hash`` (base64url) of a password, for the ``readers``/``admins`` maps."""
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=32)
    return f"scrypt:{SCRYPT_N}:{SCRYPT_R}:{SCRYPT_P}:{_b64(salt)}:{_b64(digest)}"


@dataclass(frozen=True)
class PasswordHash:
    n: int
    r: int
    p: int
    salt: bytes
    digest: bytes

    @classmethod
    def parse(cls, text: str) -> PasswordHash:
        """Read a stored hash; ValueError says what is wrong with it."""
        parts = text.split(":")
        if len(parts) != 6 or parts[0] != "scrypt":
            raise ValueError("is not a password hash of `burrowpy hash-password` (scrypt:N:r:p:salt:hash)")
        try:
            n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
            salt, digest = _unb64(parts[4]), _unb64(parts[5])
        except (ValueError, binascii.Error):
            raise ValueError("has a malformed scrypt parameter, salt or hash") from None
        if n < 2 or n & (n - 1) or r < 1 or p < 1 or not salt or len(digest) < 16:
            raise ValueError("has scrypt parameters out of range (N a power of two, r and p at least 1)")
        return cls(n, r, p, salt, digest)

    def matches(self, password: str) -> bool:
        """scrypt: ~50 ms of CPU on purpose. Blocking: run it off the event loop."""
        try:
            candidate = hashlib.scrypt(password.encode(), salt=self.salt, n=self.n, r=self.r, p=self.p,
                                       dklen=len(self.digest), maxmem=256 * 1024 * 1024)
        except ValueError:  # parameters the host cannot afford
            return False
        return hmac.compare_digest(candidate, self.digest)


def new_token() -> str:
    return secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    """``sha256:<hex>`` of a bearer token, for the ``reader-tokens``/``admin-tokens`` lists."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def parse_token_digest(text: str) -> bytes:
    kind, _, hex_digest = text.partition(":")
    try:
        digest = bytes.fromhex(hex_digest)
    except ValueError:
        digest = b""
    if kind != "sha256" or len(digest) != 32:
        raise ValueError("is not a token digest of `burrowpy new-token` (sha256:<64 hex digits>)")
    return digest


# --- the profile and the check --------------------------------------------------------------------------


class TooManyAttempts(Exception):
    """Failed logins for this user or from this address are over the limit; retry after ``retry_after_s``."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"too many failed logins: retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


class LoginThrottle:
    """A token bucket per key (a user, an address): each failed login takes a token, ``burst`` at most,
    one more every ``refill_s`` seconds. Sans-IO: the caller passes the time."""

    def __init__(self, burst: int = LOGIN_BURST, refill_s: float = LOGIN_REFILL_S) -> None:
        self.burst, self.refill_s = burst, refill_s
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, when counted)

    def _tokens(self, key: str, now: float) -> float:
        tokens, since = self._buckets.get(key, (self.burst, now))
        return min(self.burst, tokens + (now - since) / self.refill_s)

    def wait_s(self, keys: tuple[str, ...], now: float) -> float:
        """How long until every key has a token (0: now)."""
        return max(max(0.0, (1 - self._tokens(key, now)) * self.refill_s) for key in keys)

    def take(self, keys: tuple[str, ...], now: float, count: int = 1) -> None:
        """Take ``count`` tokens of each key (a negative count gives them back)."""
        if len(self._buckets) >= _THROTTLED_MAX:  # buckets that are full again hold nothing worth keeping
            self._buckets = {key: (tokens, since) for key, (tokens, since) in self._buckets.items()
                             if self._tokens(key, now) < self.burst}
        for key in keys:
            self._buckets[key] = (self._tokens(key, now) - count, now)


@dataclass(frozen=True)
class HttpAuthProfile:
    """One ``http-auth.NAME`` section, parsed."""

    name: str
    users: Mapping[str, tuple[str, PasswordHash]]  # user -> (role, password hash)
    tokens: tuple[tuple[bytes, str], ...]  # (SHA-256 of the token, role)
    open_paths: tuple[str, ...] = ("/burrow/admin", "/burrow/admin/ready")
    _remembered: dict[bytes, tuple[float, str, str]] = field(default_factory=dict, compare=False, repr=False)
    # one thread for every scrypt of the profile: a storm of guesses takes one core, not the event loop
    _checker: concurrent.futures.ThreadPoolExecutor = field(
        default_factory=lambda: concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="password-check",
                                                                      initializer=_yield_the_cpu),
        compare=False, repr=False)

    def to_json(self) -> dict[str, object]:
        return {"users": sorted(self.users), "tokens": len(self.tokens), "open-paths": list(self.open_paths)}

    @classmethod
    def from_maps(cls, name: str, readers: Mapping[str, str], admins: Mapping[str, str],
                  reader_tokens: list[str], admin_tokens: list[str], open_paths: list[str]) -> HttpAuthProfile:
        """Build a profile from the config's maps and lists; ValueError names the key and entry at fault."""
        users: dict[str, tuple[str, PasswordHash]] = {}
        for key, role, entries in (("readers", READER, readers), ("admins", ADMIN, admins)):
            for user, stored in entries.items():
                if user in users:
                    raise ValueError(f"{key}.{user}: is also a {users[user][0]}; a user has one role")
                if not user or ":" in user:
                    raise ValueError(f"{key}.{user}: a user name is not empty and has no ':'")
                try:
                    users[user] = (role, PasswordHash.parse(stored))
                except ValueError as exc:
                    raise ValueError(f"{key}.{user}: {exc}") from None
        tokens = []
        for key, role, digests in (("reader-tokens", READER, reader_tokens), ("admin-tokens", ADMIN, admin_tokens)):
            for number, text in enumerate(digests):
                try:
                    tokens.append((parse_token_digest(text), role))
                except ValueError as exc:
                    raise ValueError(f"{key}[{number}]: {exc}") from None
        if not users and not tokens:
            raise ValueError("readers: no user or token at all would lock everyone out; configure one, or "
                             "leave the listener's auth empty for an open API")
        for path in open_paths:
            if not path.startswith("/"):
                raise ValueError(f"open-paths: {path!r} is not a path (it starts with /)")
        return cls(name, users, tuple(tokens), tuple(open_paths))

    def is_open(self, path: str) -> bool:
        return any(path.startswith(entry) if entry.endswith("/") else path == entry for entry in self.open_paths)

    async def identify(self, authorization: str | None, address: str,
                       throttle: LoginThrottle) -> tuple[str, str] | None:
        """(who, role) for an Authorization header from ``address``, or None when it proves nothing; raises
        TooManyAttempts when that user or address has failed too often lately (counted in ``throttle``)."""
        if not authorization:
            return None
        scheme, _, credentials = authorization.strip().partition(" ")
        scheme = scheme.lower()
        credentials = credentials.strip()
        if scheme == "bearer":
            return self._token(credentials)
        if scheme == "basic":
            return await self._basic(credentials, address, throttle)
        return None

    def _token(self, token: str) -> tuple[str, str] | None:
        digest = hashlib.sha256(token.encode()).digest()
        found = None
        for known, role in self.tokens:  # every entry is compared, so timing does not tell which one matched
            if hmac.compare_digest(digest, known):
                found = ("token", role)
        return found

    async def _basic(self, credentials: str, address: str, throttle: LoginThrottle) -> tuple[str, str] | None:
        key = hashlib.sha256(credentials.encode()).digest()
        now = time.monotonic()
        remembered = self._remembered.get(key)
        if remembered is not None and remembered[0] > now:
            return remembered[1], remembered[2]
        try:
            user, separator, password = base64.b64decode(credentials, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        if not separator:
            return None
        counted = (f"user:{user}", f"address:{address}")
        wait = throttle.wait_s(counted, now)
        if wait > 0:
            raise TooManyAttempts(math.ceil(wait))
        throttle.take(counted, now)  # before the check: guesses sent at once count at once
        role, stored = self.users.get(user) or ("", _UNKNOWN_USER_HASH)
        matched = await asyncio.get_running_loop().run_in_executor(self._checker, stored.matches, password)
        if not matched or not role:
            return None
        throttle.take(counted, time.monotonic(), -1)
        if len(self._remembered) >= _REMEMBER_MAX:
            self._remembered.clear()
        self._remembered[key] = (now + _REMEMBER_S, user, role)
        return user, role


def _yield_the_cpu() -> None:
    """Lower the password-check thread's scheduling priority (Linux schedules threads one by one): on a busy
    machine the event loop gets the CPU first, and a storm of guesses waits instead of the API."""
    with contextlib.suppress(AttributeError, OSError):  # no per-thread priorities on this platform
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), CHECKER_NICENESS)


# What an unknown user's password is checked against: the parameters of new hashes and a digest no password
# is known for, so that the check takes as long as a known user's.
_UNKNOWN_USER_HASH = PasswordHash(SCRYPT_N, SCRYPT_R, SCRYPT_P, secrets.token_bytes(16), secrets.token_bytes(32))


def auth_middleware(profile: HttpAuthProfile, error: Callable[[web.Request, int, str], web.Response],
                    throttle: LoginThrottle) -> Any:
    """aiohttp middleware enforcing ``profile``, failed logins limited by ``throttle``; ``error`` builds
    Burrow's JSON error response."""
    from aiohttp import web

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "OPTIONS" or profile.is_open(request.path):
            return await handler(request)
        try:
            identity = await profile.identify(request.headers.get("Authorization"), request.remote or "", throttle)
        except TooManyAttempts as exc:
            response = error(request, 429, str(exc))
            response.headers["Retry-After"] = str(exc.retry_after_s)
            return response
        if identity is None:
            response = error(request, 401, "authentication required: basic auth or a bearer token")
            response.headers["WWW-Authenticate"] = f'Basic realm="{REALM}", charset="UTF-8"'
            return response
        who, role = identity
        if request.method not in READ_METHODS and role != ADMIN:
            return error(request, 403, f"forbidden: {request.method} needs the admin role, {who} is a {role}")
        return await handler(request)

    return middleware


# --- commands -------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", choices=("hash-password", "new-token"),
                        help="hash-password: read a password (stdin, or asked twice on a terminal) and print "
                             "its hash for readers/admins; new-token: print a new bearer token and the digest "
                             "to put in reader-tokens/admin-tokens")


def run(args: argparse.Namespace) -> int:
    if args.what == "new-token":
        token = new_token()
        print(f"token:  {token}")
        print(f"digest: {token_digest(token)}")
        return 0
    if sys.stdin.isatty():
        password = getpass.getpass("password: ")
        if password != getpass.getpass("again: "):
            print("the passwords differ", file=sys.stderr)
            return 1
    else:
        password = sys.stdin.readline().rstrip("\n")
    if not password:
        print("an empty password is refused", file=sys.stderr)
        return 1
    print(hash_password(password))
    return 0
