"""How long a broker takes to answer another client while something else keeps it busy.

Run as a process of its own (``python loop_probe.py PORT``), so that the clients making the load, and the
test's own threads, do not delay its measurements: it connects, says ``ready`` once answered, then sends an
ApiVersions v0 request every few milliseconds until its stdin closes (or, with ``--count N``, N times), and
prints the answer times (ms) as JSON. :func:`probing` runs it from a test, :func:`baseline` for a count.

``python loop_probe.py http URL`` measures GET requests of the URL instead, over one kept-alive connection.

``python loop_probe.py scram-ghosts PORT SECONDS CONNECTIONS`` is a load: SCRAM-SHA-512 logins of users
that do not exist, each to its refusal at the proof, over that many connections at once for that long; it
prints how many logins were refused.

``python loop_probe.py producer-ids PORT COUNT CONNECTIONS`` is a load: COUNT InitProducerId requests of an
idempotent producer, spread over that many connections at once; it prints the largest producer id answered.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

INTERVAL_S = 0.005


class Probe:
    def __init__(self, target: int | str, count: int = 0) -> None:
        """``target``: a broker's port, or a URL to GET; ``count``: stop after that many answers."""
        arguments = [str(target)] if isinstance(target, int) else ["http", target]
        arguments += ["--count", str(count)] if count else []
        self.process = subprocess.Popen([sys.executable, str(Path(__file__)), *arguments], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        ready = self.process.stdout.readline().strip()
        if ready != "ready":
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"the probe did not reach {target}: {ready!r}")
        self.latencies_ms: list[float] = []

    def stop(self) -> list[float]:
        """End the probe and return its answer times (ms), in the order measured."""
        try:
            out, _ = self.process.communicate("", timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise
        self.latencies_ms = json.loads(out)
        assert self.latencies_ms, "the probe measured nothing"
        return self.latencies_ms


@contextlib.contextmanager
def probing(target: int | str, count: int = 0) -> Iterator[Probe]:
    probe = Probe(target, count)
    try:
        yield probe
    finally:
        if probe.process.poll() is None:
            probe.process.kill()
            probe.process.wait()


def baseline(target: int | str, count: int = 200) -> list[float]:
    """Answer times with nothing else going on (what the machine's own load costs), ``count`` of them."""
    with probing(target, count) as probe:
        return probe.stop()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def summary(latencies_ms: list[float]) -> str:
    return (f"{len(latencies_ms)} answers: p50 {percentile(latencies_ms, 0.5):.1f} ms, "
            f"p99 {percentile(latencies_ms, 0.99):.1f} ms, max {max(latencies_ms):.1f} ms")


def _ask(sock: socket.socket, correlation: int) -> None:
    request = struct.pack(">hhih", 18, 0, correlation, 5) + b"probe"
    sock.sendall(struct.pack(">i", len(request)) + request)
    size = struct.unpack(">i", _exactly(sock, 4))[0]
    _exactly(sock, size)


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        part = sock.recv(size - len(data))
        if not part:
            raise ConnectionError("the broker closed the connection")
        data += part
    return data


def _measure(ask: Callable[[int], None], count: int) -> None:
    stop = threading.Event()
    if not count:  # else the count ends it
        threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    ask(0)
    print("ready", flush=True)
    latencies = []
    number = 1
    while not stop.is_set() and not (count and len(latencies) >= count):
        started = time.perf_counter()
        ask(number)
        latencies.append((time.perf_counter() - started) * 1000)
        number += 1
        stop.wait(INTERVAL_S)
    print(json.dumps(latencies), flush=True)


def _main(port: int, count: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _measure(lambda number: _ask(sock, number), count)


def _http(url: str, count: int) -> None:
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)

    def ask(_: int) -> None:
        connection.request("GET", parts.path)
        response = connection.getresponse()
        response.read()
        assert response.status == 200, response.status

    _measure(ask, count)
    connection.close()


def _at_once(work: Callable[[int], None], connections: int) -> None:
    """``work(number)`` for that many connections at once; a failure of any fails the load."""
    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(work, range(connections)))


def _scram_ghosts(port: int, seconds: float, connections: int) -> None:
    from broker.protocol.api import ApiKey, decode_response, encode_request

    deadline = time.monotonic() + seconds
    refused = [0] * connections

    def call(sock: socket.socket, api_key: int, version: int, body: dict) -> dict:
        sock.sendall(encode_request(api_key, version, 1, "ghost", body))
        return decode_response(api_key, version, _exactly(sock, struct.unpack(">i", _exactly(sock, 4))[0]))[1]

    def logins(number: int) -> None:
        while time.monotonic() < deadline:
            user = f"ghost-{number}-{refused[number]}"
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})
                first = call(sock, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": f"n,,n={user},r=ghostnonce".encode()})
                nonce = bytes(first["auth_bytes"]).split(b",")[0][2:]
                final = call(sock, ApiKey.SASL_AUTHENTICATE, 1,
                             {"auth_bytes": b"c=biws,r=" + nonce + b",p=" + b"A" * 88})
                assert final["error_code"] != 0, final
                refused[number] += 1

    _at_once(logins, connections)
    print(sum(refused), flush=True)


def _producer_ids(port: int, count: int, connections: int) -> None:
    from broker.protocol.api import ApiKey, decode_response, encode_request

    largest = [-1] * connections
    request = encode_request(ApiKey.INIT_PRODUCER_ID, 4, 1, "ids", {
        "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1})

    def allocate(number: int) -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for _ in range(count // connections):
                sock.sendall(request)
                answer = decode_response(ApiKey.INIT_PRODUCER_ID, 4,
                                         _exactly(sock, struct.unpack(">i", _exactly(sock, 4))[0]))[1]
                assert answer["error_code"] == 0, answer
                largest[number] = max(largest[number], answer["producer_id"])

    _at_once(allocate, connections)
    print(max(largest), flush=True)


if __name__ == "__main__":
    arguments, count = sys.argv[1:], 0
    if "--count" in arguments:
        count = int(arguments.pop(arguments.index("--count") + 1))
        arguments.remove("--count")
    if arguments[0] == "http":
        _http(arguments[1], count)
    elif arguments[0] == "scram-ghosts":
        _scram_ghosts(int(arguments[1]), float(arguments[2]), int(arguments[3]))
    elif arguments[0] == "producer-ids":
        _producer_ids(int(arguments[1]), int(arguments[2]), int(arguments[3]))
    else:
        _main(int(arguments[0]), count)
