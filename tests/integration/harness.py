"""Helpers for integration tests: free ports, polling with a deadline, a broker in a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from broker.client import KafkaConnection
from broker.protocol.api import ApiKey

ROOT = Path(__file__).resolve().parents[2]
BURROWPY = str(Path(sys.executable).with_name("burrowpy"))

T = TypeVar("T")


def unique_name(prefix: str) -> str:
    """A topic or group name no other test uses: the prefix and eight random hex digits."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topics(settings: dict[str, str], *names: str, partitions: int = 1, replication: int = 1) -> None:
    """Topics made through the AdminClient with ``settings`` (a secured listener's too); raises if one fails."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(settings)  # kept alive until the futures are done
    for future in admin.create_topics([NewTopic(name, partitions, replication) for name in names]).values():
        future.result(30)


def _ephemeral_ports_start() -> int:
    """The first port of the kernel's range for outgoing connections' local ports."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_EPHEMERAL_START = _ephemeral_ports_start()
_LOWEST_PORT = 10000
_handed_out: set[int] = set()


def secret_file(directory: Path, name: str, secret: str) -> Path:
    """A file holding ``secret`` for the owner only: how passwords reach a broker (``--add-scram``'s
    ``password-file=``), never on its command line."""
    path = Path(directory) / name
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
        handle.write(secret + "\n")
    return path


def _port_slice() -> tuple[int, int]:
    """This test process's share of the ports below the ephemeral range: with pytest-xdist's workers each has a
    slice of its own, so one worker never picks a port another has handed out and not yet bound."""
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    width = (_EPHEMERAL_START - _LOWEST_PORT) // max(count, 1)
    return _LOWEST_PORT + index * width, _LOWEST_PORT + (index + 1) * width


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on, for a server a test starts next.

    Taken below the kernel's range for outgoing connections: a port from that range (what binding port 0
    gives) can become the local port of any client's connection between this call and the server's bind,
    such as one broker node connecting to the others while a third is still starting (seen in CI as
    "address already in use"). Never the same port twice in one test run.
    """
    low, high = _port_slice()
    if high - low >= 1000:
        for _ in range(1000):
            port = random.randrange(low, high)
            if port in _handed_out:
                continue
            with socket.socket() as sock:
                try:
                    sock.bind((host, port))
                except OSError:
                    continue
            _handed_out.add(port)
            return port
    with socket.socket() as sock:  # an unusual port range: let the kernel choose
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_until(condition: Callable[[], T], timeout: float = 30.0, interval: float = 0.05,
               message: str = "condition") -> T:
    """Poll ``condition`` until it returns something truthy; fail with ``message`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = condition()
            if result:
                return result
        except Exception as exc:  # the condition may fail until the thing it polls is up
            last_error = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}"
                         + (f" (last error: {last_error!r})" if last_error else ""))


async def poll_until(condition: Callable[[], T], timeout: float = 20.0, message: str = "condition") -> T:
    """:func:`wait_until` for servers that run in the test's own event loop: yield to them between checks."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


class Scrape:
    """One scrape of a Prometheus endpoint (a broker's ``metrics.listen``), parsed."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as reply:
            self.content_type = reply.headers["Content-Type"]
            text = reply.read().decode()
        self.samples = [sample for family in text_string_to_metric_families(text) for sample in family.samples]

    def value(self, name: str, **labels: str) -> float:
        """The sum of the samples named ``name`` that have ``labels`` among theirs (0 when there are none); a
        label given as "" is one the sample must not have (Kafka's all-topics series has no topic)."""
        return sum(sample.value for sample in self.samples if sample.name == name
                   and all(sample.labels.get(key, "") == wanted for key, wanted in labels.items()))

    def names(self) -> set[str]:
        return {sample.name for sample in self.samples}


def set_quota(bootstrap: str, entity: list[tuple[str, str | None]], key: str, value: float | None) -> None:
    """AlterClientQuotas of one key straight from our client (None removes it; test_client_quotas checks Kafka's
    tool, whose JVM takes seconds to start)."""

    async def alter() -> dict[str, Any]:
        async with await KafkaConnection.connect(bootstrap) as connection:
            return await connection.request(ApiKey.ALTER_CLIENT_QUOTAS, {"entries": [{
                "entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity],
                "ops": [{"key": key, "value": value or 0.0, "remove": value is None}]}], "validate_only": False},
                version=1)

    answer = asyncio.run(alter())
    assert [entry["error_code"] for entry in answer["entries"]] == [0], answer


def alter_broker_configs(bootstrap: str, configs: dict[str, str | None], node: str = "1",
                         validate_only: bool = False) -> tuple[int, str | None]:
    """IncrementalAlterConfigs on one BROKER resource (None deletes a config): (error code, message)."""
    async def ask() -> dict[str, Any]:
        async with await KafkaConnection.connect(bootstrap) as connection:
            return await connection.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, {"resources": [
                {"resource_type": 4, "resource_name": node, "configs": [
                    {"name": name, "config_operation": 0 if value is not None else 1, "value": value}
                    for name, value in configs.items()]}], "validate_only": validate_only}, version=1)
    response = asyncio.run(ask())["responses"][0]
    return response["error_code"], response["error_message"]


def describe_broker_configs(bootstrap: str, node: str = "1") -> dict[str, dict[str, Any]]:
    """DescribeConfigs (with synonyms) of one BROKER resource: name -> entry."""
    async def ask() -> dict[str, Any]:
        async with await KafkaConnection.connect(bootstrap) as connection:
            return await connection.request(ApiKey.DESCRIBE_CONFIGS, {"resources": [
                {"resource_type": 4, "resource_name": node, "configuration_keys": None}],
                "include_synonyms": True, "include_documentation": False}, version=4)
    result = asyncio.run(ask())["results"][0]
    assert result["error_code"] == 0, result
    return {entry["name"]: entry for entry in result["configs"]}


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    """``size`` bytes from a socket, over as many reads as they take (a broker may send a response in
    several writes, and a socket with a timeout returns what has arrived); fewer only if it closes."""
    parts = []
    while size > 0:
        part = sock.recv(size)
        if not part:
            break
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


def broker_side_buffers(port: int, tls: ssl.SSLContext | None = None) -> tuple[int, int]:
    """(receive, send) buffer sizes of the broker's end of a fresh connection to ``port`` (over TLS with the
    ``tls`` context) that has had one answer, read from outside the broker with ``ss`` (Linux reports twice
    the size asked for: the other half is its bookkeeping)."""
    shown = broker_side_socket(port, tls)
    found = re.search(r"\brb(\d+),t\d+,tb(\d+)", shown)
    assert found, f"ss showed no buffer sizes of the broker end of the connection: {shown!r}"
    return int(found.group(1)), int(found.group(2))


def broker_side_socket(port: int, tls: ssl.SSLContext | None = None) -> str:
    """What ``ss -tmin`` shows of the broker's end of a fresh connection to ``port`` (over TLS with the ``tls``
    context) that has had one answer: its memory, and TCP's own figures (the congestion control first)."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    with tls.wrap_socket(raw, server_hostname="127.0.0.1") if tls else raw as sock:
        assert _api_versions_answered(sock)  # the broker has set the connection up
        client_port = sock.getsockname()[1]
        shown = subprocess.run(["ss", "-Htmin", "state", "established",
                                f"( sport = :{port} and dport = :{client_port} )"],
                               capture_output=True, text=True, check=True).stdout
    assert shown.strip(), f"ss showed no broker end of the connection to port {port}"
    return shown


def _answers_api_versions(port: int) -> bool:
    """True when a broker on the port answers an ApiVersions v0 request."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        return _api_versions_answered(sock)


def _api_versions_answered(sock: socket.socket) -> bool:
    """Send an ApiVersions v0 request on ``sock``; True when a whole answer comes back."""
    request = struct.pack(">hhih", 18, 0, 1, 4) + b"ping"
    sock.sendall(struct.pack(">i", len(request)) + request)
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    return size > 0 and len(recv_exactly(sock, size)) == size


class BrokerProcess:
    """`burrowpy broker` as a real subprocess on 127.0.0.1."""

    def __init__(self, data_dir: Path, port: int | None = None, node_id: int = 1,
                 config: Path | None = None, extra_config: dict | None = None, args: tuple[str, ...] = (),
                 env: dict[str, str] | None = None, new_session: bool = False) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.node_id = node_id
        self.config = config
        self.extra_config = extra_config
        self.args = args  # more command-line arguments (e.g. --add-scram)
        self.env = env or {}  # more environment (e.g. PYTHONPATH for another checkout's code)
        # a session of its own, as a broker run by a service manager or from its own shell has: with the kernel's
        # autogroup scheduling, its threads then share the CPU as one group against the clients' session
        self.new_session = new_session
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir.parent / f"broker-{self.node_id}-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        self.launch()
        return self.wait_ready(timeout)

    def launch(self) -> None:
        """Start the process without waiting for it: a cluster's brokers boot side by side."""
        config = self.config
        if self.extra_config:
            import yaml

            config = self.data_dir.parent / f"broker-{self.node_id}.yaml"
            config.write_text(yaml.safe_dump(self.extra_config))
        cmd = [BURROWPY, "broker", "--data-dir", str(self.data_dir), "--node-id", str(self.node_id)]
        if not (self.extra_config and "listeners" in self.extra_config):
            cmd += ["--listen", self.bootstrap]  # else the config's listeners, ``port`` being a PLAINTEXT one
        if config:
            cmd += ["--config", str(config)]
        cmd += list(self.args)
        log = open(self.log_path, "ab")  # noqa: SIM115 (closed when the process is reaped)
        # the code the caller's PYTHONPATH names first (a bench measuring another commit's tree), then this
        # checkout's, as in the test's own process: the editable install names one checkout, and a broker
        # started from another (a git worktree) would otherwise run that one's code
        path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)]))
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path, **self.env},
                                     start_new_session=self.new_session)
        log.close()

    def wait_ready(self, timeout: float = 30.0) -> BrokerProcess:
        wait_until(lambda: self._check_alive() and _answers_api_versions(self.port), timeout,
                   message=f"broker on port {self.port} to answer")
        return self

    def answers(self) -> bool:
        """Whether the broker answers an ApiVersions request within 2 s (not while it accepts no connection)."""
        try:
            return _answers_api_versions(self.port)
        except OSError:
            return False

    def wait_logged(self, text: str, timeout: float = 30.0) -> BrokerProcess:
        wait_until(lambda: self._check_alive() and text in self.log_path.read_text(errors="replace"), timeout,
                   message=f"broker on port {self.port} to log {text!r}")
        return self

    def _check_alive(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"broker exited with {self.proc.returncode}:\n{self.log_text()}")
        return True

    def log_text(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-5000:]
        return ""

    def terminate(self) -> None:
        """SIGTERM without waiting, so that ``stop`` of several brokers waits for their shutdowns side by side."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 20.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        self.proc = None
        return code

    def kill(self) -> None:
        """kill -9: no chance to flush or close anything."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class JsonLinesProcess:
    """A long-running peer process (a Go client, a Kafka Streams application) whose stdout is one JSON
    object per line, collected by a thread as it comes; ``stop`` sends SIGTERM (the peers close cleanly on
    it), then kills the process if it hangs, and returns the exit code.
    """

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[dict] = []
        self.exit_code: int | None = None  # set by callers that stop the process and keep its code
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(json.loads(line))

    def saw(self, key: str, value: object) -> bool:
        """True once a line has ``key`` equal to ``value``; raises if the process has died."""
        if self.process.poll() is not None:
            raise AssertionError(f"exited with {self.process.returncode}:\n{self.stderr()[-3000:]}")
        return any(line.get(key) == value for line in self.lines)

    def stderr(self) -> str:
        """What the process wrote to stderr, once it has ended ("" while it runs)."""
        assert self.process.stderr is not None
        return self.process.stderr.read() if self.process.poll() is not None else ""

    def stop(self, timeout: float = 60.0) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(10)  # stdout is the reader's alone: it has read everything once the pipe closes
        return self.process.returncode

    def __enter__(self) -> JsonLinesProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
