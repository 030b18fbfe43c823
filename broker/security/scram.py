"""SASL SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) on the broker, with Kafka's credential store.

Credentials are what Kafka keeps: per user and mechanism a salt, the iteration count, the stored key and the
server key -- never the password. They come from:

* ``burrowpy broker --add-scram 'SCRAM-SHA-256=[name=alice,password-file=/run/secrets/alice]'`` at start-up,
  in the syntax of Kafka's ``kafka-storage.sh format --add-scram`` (``iterations=`` optional, 4096 by
  default), except that the password is read from a file (``-``: a line of standard input) or an environment
  variable (``password-env=NAME``): a command line is visible to every user of the machine;
* AlterUserScramCredentials (``kafka-configs.sh --alter --add-config 'SCRAM-SHA-512=[password=...]'
  --entity-type users --entity-name bob``, the AdminClient), where the client sends the salted password.

They are kept in ``<data dir>/scram-credentials.json`` (written atomically) and survive restarts.

A login is two SaslAuthenticate rounds: client-first (``n,,n=<user>,r=<nonce>``) gets server-first
(``r=<nonce+ours>,s=<salt>,i=<iterations>``); client-final (``c=biws,r=...,p=<proof>``) gets server-final
(``v=<signature>``) once the proof checks out. An unknown user goes through the same steps with a made-up
salt and fails at the proof, so the answers do not tell which users exist. Comparisons are constant-time.

The server never derives a key from a password (credentials hold the derived keys), not even for an unknown
user: that one's salt comes from an HMAC of the name under a key of the server's (kept in ``scram-server.key``
beside the store, or given: a cluster's, so every broker answers alike), and its keys are random, so a made-up
login costs what a real one costs and its salt stays the same across tries and restarts, as a real user's does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from broker.log.background import write_later, written
from broker.log.files import keep_private, write_atomically

# Kafka's ScramMechanism type ids, as AlterUserScramCredentials and DescribeUserScramCredentials carry them.
MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {number: name for name, number in MECHANISM_IDS.items()}
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
STORE_FILE = "scram-credentials.json"
SERVER_KEY_FILE = "scram-server.key"
_GS2_HEADER = "n,,"


class ScramError(Exception):
    """A login that failed: bad messages, wrong nonce, wrong proof, unknown user."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(mechanism: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, _HASHES[mechanism]).digest()


def _hash(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(_HASHES[mechanism], data).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)


def credential_from_salted(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    client_key = _hmac(mechanism, salted, b"Client Key")
    return ScramCredential(salt, _hash(mechanism, client_key), _hmac(mechanism, salted, b"Server Key"), iterations)


def credential_from_password(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                             salt: bytes | None = None) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations)


# --- the store ---------------------------------------------------------------------------------------------

class ScramStore:
    """user -> mechanism -> credential, kept in a JSON file (base64 fields).

    ``server_key`` makes the salts of unknown users; without one it is read from (or first written to)
    ``scram-server.key`` beside ``path``, and is the process's own for a store without a file."""

    def __init__(self, path: Path | None, server_key: bytes | None = None) -> None:
        self.path = path
        self.server_key = server_key if server_key is not None else _load_server_key(path)
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self.saved = written()  # the last write of the file, which runs off the event loop
        if path is not None and path.exists():
            keep_private(str(path))
            for user, mechanisms in json.loads(path.read_text())["users"].items():
                self._users[user] = {m: ScramCredential(base64.b64decode(c["salt"]), base64.b64decode(c["stored_key"]),
                                                        base64.b64decode(c["server_key"]), c["iterations"])
                                     for m, c in mechanisms.items()}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def stand_in(self, user: str, mechanism: str) -> ScramCredential:
        """What an unknown user is answered with: a salt that is the same on every try, keys that match no
        password, and no key derivation (a real user's login derives none either)."""
        salt = hmac.new(self.server_key, f"{mechanism}:{user}".encode(), "sha256").digest()
        size = hashlib.new(_HASHES[mechanism]).digest_size
        return ScramCredential(salt, secrets.token_bytes(size), secrets.token_bytes(size), DEFAULT_ITERATIONS)

    def users(self) -> dict[str, dict[str, int]]:
        """user -> mechanism -> iterations."""
        return {user: {m: c.iterations for m, c in mechanisms.items()} for user, mechanisms in self._users.items()}

    def apply(self, upserts: list[tuple[str, str, ScramCredential]], deletions: list[tuple[str, str]]) -> None:
        for user, mechanism in deletions:
            self._users.get(user, {}).pop(mechanism, None)
            if not self._users.get(user, True):
                del self._users[user]
        for user, mechanism, credential in upserts:
            self._users.setdefault(user, {})[mechanism] = credential
        self._save()

    def replace(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        """Hold exactly ``users`` (a cluster's, from its metadata); the file is rewritten only on a change."""
        if users != self._users:
            self._users = {user: dict(mechanisms) for user, mechanisms in users.items()}
            self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        document = {"version": 1, "users": {
            user: {m: {"salt": base64.b64encode(c.salt).decode(), "stored_key": base64.b64encode(c.stored_key).decode(),
                       "server_key": base64.b64encode(c.server_key).decode(), "iterations": c.iterations}
                   for m, c in mechanisms.items()}
            for user, mechanisms in self._users.items()}}
        self.saved = write_later(str(self.path), json.dumps(document, indent=1).encode(), private=True)


_PROCESS_KEY = secrets.token_bytes(32)


def _load_server_key(store_path: Path | None) -> bytes:
    if store_path is None:
        return _PROCESS_KEY
    path = store_path.with_name(SERVER_KEY_FILE)
    try:
        key = path.read_bytes()
        if len(key) == 32:
            return key
    except FileNotFoundError:
        pass
    key = secrets.token_bytes(32)
    # a damaged or missing key is replaced: unknown users' salts change once, which tells nothing about real ones
    write_atomically(str(path), key, private=True)
    return key


_ADD_SCRAM = re.compile(r"^(SCRAM-SHA-256|SCRAM-SHA-512)=\[(.*)\]$")
_PASSWORD_SOURCES = ("password-file", "password-env")


def parse_add_scram(text: str, environ: Mapping[str, str], stdin: TextIO) -> tuple[str, str, ScramCredential]:
    """``SCRAM-SHA-256=[name=alice,password-env=ALICE_PASSWORD,iterations=8192]`` (kafka-storage's syntax, the
    password from ``password-file=PATH`` or ``password-env=NAME``): (user, mechanism, credential). Raises
    ValueError naming what is wrong."""
    found = _ADD_SCRAM.match(text.strip())
    if not found:
        raise ValueError(f"{text!r}: expected SCRAM-SHA-256=[name=<user>,password-file=<path>] "
                         "(or SCRAM-SHA-512=[...], password-env=<variable>)")
    mechanism, body = found.groups()
    fields: dict[str, str] = {}
    for part in body.split(","):
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"{text!r}: {part!r} is not key=value")
        fields[key.strip()] = value.strip().strip('"')
    if "password" in fields:
        # the message must not repeat the password: it goes to a terminal or a log
        raise ValueError(f"{mechanism}=[name={fields.get('name', '')},password=...]: a password on the command line "
                         "is visible to every user of the machine (ps, /proc); give password-file=PATH "
                         "(- for a line of standard input) or password-env=VARIABLE instead")
    sources = set(_PASSWORD_SOURCES) & set(fields)
    unknown = set(fields) - {"name", "iterations", *_PASSWORD_SOURCES}
    if unknown or "name" not in fields or len(sources) != 1:
        raise ValueError(f"{text!r}: needs name= and one of password-file= or password-env= (and may have "
                         f"iterations=), not {', '.join(sorted(unknown)) or 'this'}")
    iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"{text!r}: iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
    [source] = sources
    password = _read_password(source, fields[source], environ, stdin)
    if not password:
        raise ValueError(f"{text!r}: the password from {source}={fields[source]} is empty")
    return fields["name"], mechanism, credential_from_password(mechanism, password, iterations)


def _read_password(source: str, where: str, environ: Mapping[str, str], stdin: TextIO) -> str:
    """The password ``source`` names; a file's or a line's newline is not part of it."""
    if source == "password-env":
        if where not in environ:
            raise ValueError(f"password-env={where}: no such environment variable")
        return environ[where]
    if where == "-":
        return stdin.readline().removesuffix("\n").removesuffix("\r")
    try:
        with open(where) as handle:
            return handle.read().removesuffix("\n").removesuffix("\r")
    except OSError as exc:
        raise ValueError(f"password-file={where}: {exc.strerror}") from None


# --- one login ---------------------------------------------------------------------------------------------

def _attributes(message: str) -> dict[str, str]:
    attributes = {}
    for part in message.split(","):
        name, sep, value = part.partition("=")
        if not sep or not name:
            raise ScramError(f"malformed SCRAM attribute {part!r}")
        attributes[name] = value
    return attributes


def _saslname(value: str) -> str:
    if re.search(r"=(?!2C|3D)", value):
        raise ScramError("invalid escape in the user name")
    return value.replace("=2C", ",").replace("=3D", "=")


class ScramExchange:
    """The server side of one SCRAM login: :meth:`first`, then :meth:`final`."""

    def __init__(self, mechanism: str, store: ScramStore, server_nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.store = store
        # letters and digits, as Kafka's (a 130-bit number in base 36): clients copy it back verbatim, and
        # librdkafka 2.0 does not cope with base64's + and /
        self.server_nonce = server_nonce or _base36(secrets.randbits(130))
        self.user: str | None = None
        self._credential: ScramCredential | None = None
        self._known = False
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def first(self, message: bytes) -> bytes:
        try:
            text = message.decode()
        except UnicodeDecodeError as exc:
            raise ScramError("client-first message is not UTF-8") from exc
        if not text.startswith(("n,", "y,")):
            raise ScramError("channel binding is not supported (gs2 header must be n,, or y,,)")
        gs2, _, bare = text.partition(",")[2].partition(",")
        if gs2 and not gs2.startswith("a="):
            raise ScramError("malformed gs2 header")
        attributes = _attributes(bare)
        if "n" not in attributes or "r" not in attributes or not attributes["r"]:
            raise ScramError("client-first message needs n= and r=")
        extensions = set(attributes) - {"n", "r"}
        if extensions:  # e.g. Kafka's delegation tokens (tokenauth): no tokens are issued here
            raise ScramError(f"unsupported SCRAM extensions: {', '.join(sorted(extensions))}")
        user = _saslname(attributes["n"])
        if gs2 and _saslname(gs2[2:]) != user:
            raise ScramError("acting as another user (authzid) is not allowed")
        credential = self.store.get(user, self.mechanism)
        self._known = credential is not None
        # an unknown user gets a stand-in and fails at the proof, like any wrong password
        self._credential = credential or self.store.stand_in(user, self.mechanism)
        self.user = user
        self._client_first_bare = bare
        self._nonce = attributes["r"] + self.server_nonce
        self._server_first = (f"r={self._nonce},s={base64.b64encode(self._credential.salt).decode()},"
                              f"i={self._credential.iterations}")
        return self._server_first.encode()

    def final(self, message: bytes) -> tuple[str, bytes]:
        """(the user now logged in, server-final message); raises ScramError when the proof is wrong."""
        if self._credential is None or self.user is None:
            raise ScramError("client-final before client-first")
        try:
            text = message.decode()
        except UnicodeDecodeError as exc:
            raise ScramError("client-final message is not UTF-8") from exc
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramError("client-final message has no proof")
        attributes = _attributes(without_proof)
        expected_binding = base64.b64encode(_GS2_HEADER.encode()).decode()
        if attributes.get("c") not in (expected_binding, base64.b64encode(b"y,,").decode()):
            raise ScramError("channel binding does not match the gs2 header")
        # Kafka's rule: the nonce must end with the one agreed (librdkafka before 2.1 puts its own nonce in
        # front of it once more); the proof covers the message as sent either way
        nonce = attributes.get("r", "")
        if len(nonce) < len(self._nonce) or not hmac.compare_digest(nonce[len(nonce) - len(self._nonce):].encode(),
                                                                    self._nonce.encode()):
            raise ScramError("nonce does not match")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError as exc:
            raise ScramError("proof is not base64") from exc
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self.mechanism, self._credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(_hash(self.mechanism, client_key), self._credential.stored_key) or not self._known:
            raise ScramError("invalid credentials")
        server_signature = _hmac(self.mechanism, self._credential.server_key, auth_message)
        return self.user, f"v={base64.b64encode(server_signature).decode()}".encode()


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while number:
        number, remainder = divmod(number, 36)
        out = digits[remainder] + out
    return out or "0"


class ScramClient:
    """The client side of a SCRAM login (a broker logging in to another): :meth:`first`, :meth:`final`,
    then :meth:`verify` of the server's signature."""

    def __init__(self, mechanism: str, user: str, password: str) -> None:
        self.mechanism = mechanism
        self.password = password
        self._nonce = _base36(secrets.randbits(130))
        self._client_first_bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return (_GS2_HEADER + self._client_first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        attributes = _attributes(server_first.decode())
        nonce, salt, iterations = attributes.get("r", ""), attributes.get("s"), attributes.get("i", "")
        if not nonce.startswith(self._nonce) or salt is None or not iterations.isdigit():
            raise ScramError("malformed server-first message")
        salted = salted_password(self.mechanism, self.password, base64.b64decode(salt), int(iterations))
        client_key = _hmac(self.mechanism, salted, b"Client Key")
        stored_key, server_key = _hash(self.mechanism, client_key), _hmac(self.mechanism, salted, b"Server Key")
        without_proof = f"c={base64.b64encode(_GS2_HEADER.encode()).decode()},r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first.decode()},{without_proof}".encode()
        signature = _hmac(self.mechanism, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = _hmac(self.mechanism, server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        attributes = _attributes(server_final.decode())
        if "e" in attributes:
            raise ScramError(f"the server refused the login: {attributes['e']}")
        if not hmac.compare_digest(base64.b64decode(attributes.get("v", "")), self._server_signature):
            raise ScramError("the server's signature does not match: it does not know the password")
