"""The two monitors as real processes, configured alike: Debian's Burrow 1.2.1 and ``burrowpy serve``.

    with BurrowProcess(tmp_path / "burrow", MonitorSettings(broker.bootstrap, intervals=4),
                       zookeeper=zk.hosts) as burrow:
        status, body = burrow.get("/v3/kafka/local/consumer")

Each process gets its own directory, a generated config file (TOML for Burrow, YAML for burrowpy) with
cluster ``local`` and consumer module ``local`` reading ``__consumer_offsets``, a free HTTP port, and a
log that failures print. ``start`` waits, with a deadline, until the HTTP API answers; ``stop`` always
ends the process (SIGTERM, then SIGKILL).

Burrow 1.2.1 specifics: it cannot run without ZooKeeper (its zookeeper coordinator always starts), so
it needs ``zookeeper=``; its client profile is set to ``kafka-version`` 0.10.0 so that Sarama speaks
Metadata v1, ListOffsets v0 and Fetch v2 to our broker; it has no ``/burrow/admin/ready`` and no
``/metrics``. A machine without the ``burrow`` package fails with the reason (``make install``
installs it) rather than skipping.
"""

from __future__ import annotations

import abc
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from harness import free_port, wait_until

BURROW_BINARY = Path("/usr/bin/Burrow")
# The current Burrow, built by `make install` (see the Makefile: the Go module proxy, else a source snapshot)
CURRENT_BURROW_BINARY = Path(__file__).resolve().parents[1] / "peers" / "burrow" / "bin" / "Burrow"
BURROWPY = str(Path(sys.executable).with_name("burrowpy"))
CLUSTER = "local"
CONSUMER = "local"
START_TIMEOUT = 60.0


def http_get(url: str, timeout: float = 10.0) -> tuple[int, Any]:
    """GET a URL: (status, decoded JSON, or text for other content types). HTTP errors are answers too."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            status, raw, kind = response.status, response.read(), response.headers.get_content_type()
    except urllib.error.HTTPError as error:
        status, raw, kind = error.code, error.read(), error.headers.get_content_type()
    text = raw.decode(errors="replace")
    return status, (json.loads(text) if kind == "application/json" else text)


def proc_status_bytes(pid: int, field: str) -> int:
    """A memory figure of /proc/PID/status (VmRSS, VmHWM, ...) in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} for process {pid}")


@dataclass(frozen=True)
class MonitorSettings:
    """What both monitors are told, under each one's own key names."""

    bootstrap: str  # host:port, or several joined by commas (a cluster)
    intervals: int = 10
    offset_refresh: int = 10
    topic_refresh: int = 60
    expire_cache: int = 10
    min_distance: int = 0
    minimum_complete: float = 0.0
    # ZooKeeper-committed offsets: (hosts, zookeeper-path) for a kafka_zk consumer module named local_zk
    zookeeper_offsets: tuple[str, str] | None = None
    log_level: str = "info"
    topic_health_refresh: int | None = None  # burrowpy's own (None: its default)
    broker_metrics: tuple[str, ...] = ()  # burrowpy's own: the brokers' JMX exporter endpoints (in-flight counts)


class MonitorProcess(abc.ABC):
    """What both monitors share: a directory, a port, a process, and HTTP GETs against it."""

    name = "monitor"

    def __init__(self, directory: Path, settings: MonitorSettings) -> None:
        self.directory = Path(directory)
        self.settings = settings
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def output_path(self) -> Path:
        return self.directory / f"{self.name}.out"

    @property
    def log_path(self) -> Path:
        return self.directory / f"{self.name}.log"

    @property
    def pid(self) -> int:
        assert self.process is not None, f"{self.name} is not running"
        return self.process.pid

    @abc.abstractmethod
    def command(self) -> list[str]:
        """Write the config file and return the command line that runs the monitor on it."""

    @abc.abstractmethod
    def answers(self) -> bool:
        """True once the HTTP API is up (raises OSError while nothing listens)."""

    def start(self, timeout: float = START_TIMEOUT) -> MonitorProcess:
        self.directory.mkdir(parents=True, exist_ok=True)
        command = self.command()
        with open(self.output_path, "ab") as output:
            self.process = subprocess.Popen(command, cwd=self.directory, stdout=output, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True,
                                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                code, self.process = self.process.returncode, None
                raise RuntimeError(f"{self.name} exited with {code} before answering:\n{self.log_tail()}")
            with contextlib.suppress(OSError):
                if self.answers():
                    return self
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} did not answer on {self.base} within {timeout:.0f} s:\n"
                                   f"{self.log_tail()}")
            time.sleep(0.1)

    def get(self, path: str) -> tuple[int, Any]:
        return http_get(self.base + path)

    def rss_bytes(self) -> int:
        return proc_status_bytes(self.pid, "VmRSS")

    def peak_rss_bytes(self) -> int:
        return proc_status_bytes(self.pid, "VmHWM")

    def log_tail(self, lines: int = 40) -> str:
        parts = []
        for path in (self.output_path, self.log_path):
            with contextlib.suppress(OSError):
                parts.append(f"--- {path}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(parts) or "(no output)"

    def stop(self, timeout: float = 15.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> MonitorProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def in_process_config(bootstrap: str, port: int, **cluster: Any) -> dict[str, Any]:
    """A config of ``burrowpy serve`` for a Monitor run in the test's own process: one kafka cluster module
    ("local", its ``cluster`` settings added), no record-time reads, no dashboard sampling, errors logged only."""
    return {
        "logging": {"level": "error"},
        "httpserver": {"default": {"address": f"127.0.0.1:{port}"}},
        "storage": {"default": {"class-name": "inmemory"}},
        "evaluator": {"default": {"class-name": "caching"}},
        "cluster": {"local": {"class-name": "kafka", "servers": [bootstrap], "time-lag-reads": 0, **cluster}},
        "dashboard": {"sample-interval": 0},
    }


def toml_list(values: list[str]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def current_burrow_version() -> str | None:
    """The version of the current Burrow that `make install` built, or None when it could not build one."""
    version_file = CURRENT_BURROW_BINARY.with_name("VERSION")
    if not CURRENT_BURROW_BINARY.is_file():
        return None
    return version_file.read_text().strip() if version_file.is_file() else "latest"


class BurrowProcess(MonitorProcess):
    """A Burrow binary with a generated ``etc/burrow.toml``: Debian's ``/usr/bin/Burrow`` (1.2.1) by default,
    or the current Burrow (``binary=CURRENT_BURROW_BINARY``, which reads the same config)."""

    name = "burrow"

    def __init__(self, directory: Path, settings: MonitorSettings, *, zookeeper: str,
                 kafka_version: str = "0.10.0", binary: Path = BURROW_BINARY) -> None:
        super().__init__(directory, settings)
        self.zookeeper = zookeeper
        self.kafka_version = kafka_version
        self.binary = binary

    def config_text(self) -> str:
        s = self.settings
        servers = toml_list(s.bootstrap.split(","))
        text = f"""
[general]
pidfile="{self.directory}/burrow.pid"

[logging]
filename="{self.log_path}"
level="{s.log_level}"

[zookeeper]
servers={toml_list([self.zookeeper])}
timeout=6
root-path="/burrow-{self.port}"

[client-profile.test]
client-id="{'burrow-1.2.1' if self.binary == BURROW_BINARY else 'burrow-current'}"
kafka-version="{self.kafka_version}"

[cluster.{CLUSTER}]
class-name="kafka"
servers={servers}
client-profile="test"
offset-refresh={s.offset_refresh}
topic-refresh={s.topic_refresh}

[consumer.{CONSUMER}]
class-name="kafka"
cluster="{CLUSTER}"
servers={servers}
client-profile="test"

[httpserver.default]
address="127.0.0.1:{self.port}"

[storage.default]
class-name="inmemory"
workers=20
intervals={s.intervals}
expire-group=604800
min-distance={s.min_distance}

[evaluator.default]
class-name="caching"
expire-cache={s.expire_cache}
minimum-complete={s.minimum_complete}
"""
        if s.zookeeper_offsets is not None:
            hosts, path = s.zookeeper_offsets
            text += f"""
[consumer.{CONSUMER}_zk]
class-name="kafka_zk"
cluster="{CLUSTER}"
servers={toml_list([hosts])}
zookeeper-path="{path}"
zookeeper-timeout=6
"""
        return text

    def command(self) -> list[str]:
        if not self.binary.is_file():
            raise RuntimeError(f"{self.binary} is missing (make install installs it)")
        config_dir = self.directory / "etc"
        config_dir.mkdir(parents=True, exist_ok=True)
        (config_dir / "burrow.toml").write_text(self.config_text())
        return [str(self.binary), "--config-dir", str(config_dir)]

    def answers(self) -> bool:
        return self.get("/burrow/admin") == (200, "GOOD")


class BurrowpyProcess(MonitorProcess):
    """``burrowpy serve --config burrowpy.yaml``: our monitor, configured like its Burrow neighbour."""

    name = "burrowpy"

    def config(self) -> dict[str, Any]:
        s = self.settings
        config: dict[str, Any] = {
            "general": {"pidfile": ""},
            "logging": {"filename": str(self.log_path), "level": s.log_level},
            "httpserver": {"default": {"address": f"127.0.0.1:{self.port}"}},
            "storage": {"default": {"class-name": "inmemory", "intervals": s.intervals, "min-distance": s.min_distance}},
            "evaluator": {"default": {"class-name": "caching", "expire-cache": s.expire_cache,
                                      "minimum-complete": s.minimum_complete}},
            # share groups are judged over as many readings as consumer groups over commits
            "cluster": {CLUSTER: {"class-name": "kafka", "servers": s.bootstrap.split(","), "offset-refresh": s.offset_refresh,
                                  "topic-refresh": s.topic_refresh, "share-group-intervals": s.intervals}},
            "consumer": {CONSUMER: {"class-name": "kafka", "cluster": CLUSTER, "servers": s.bootstrap.split(",")}},
        }
        if s.topic_health_refresh is not None:
            config["cluster"][CLUSTER]["topic-health-refresh"] = s.topic_health_refresh
        if s.broker_metrics:
            config["cluster"][CLUSTER]["broker-metrics"] = list(s.broker_metrics)
        if s.zookeeper_offsets is not None:
            hosts, path = s.zookeeper_offsets
            config["consumer"][f"{CONSUMER}_zk"] = {"class-name": "kafka_zk", "cluster": CLUSTER, "servers": [hosts],
                                                     "zookeeper-path": path, "zookeeper-timeout": 6}
        return config

    def command(self) -> list[str]:
        path = self.directory / "burrowpy.yaml"
        path.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        return [BURROWPY, "serve", "--config", str(path)]

    def answers(self) -> bool:
        return self.get("/burrow/admin/ready") == (200, "READY")


class SecuredMonitor(BurrowpyProcess):
    """burrowpy serve whose cluster and consumer modules connect through a client profile."""

    def __init__(self, directory: Path, settings: MonitorSettings, tls: dict, sasl: dict | None) -> None:
        super().__init__(directory, settings)
        self.tls, self.sasl = tls, sasl

    def config(self) -> dict:
        config = super().config()
        config["tls"] = {"monitor": self.tls}
        profile = {"client-id": "burrowpy-secured", "tls": "monitor"}
        if self.sasl is not None:
            config["sasl"] = {"monitor": self.sasl}
            profile["sasl"] = "monitor"
        config["client-profile"] = {"secured": profile}
        for kind in ("cluster", "consumer"):
            for module in config[kind].values():
                module["client-profile"] = "secured"
        return config

    def assert_lag_seen(self, group: str, topic: str, end: int, lag: int, what: str, *, timeout: float = 60,
                        lag_seconds: bool = True) -> None:
        """Wait until the monitor reports the group's one partition with a committed end offset, check it,
        then (``lag_seconds``) wait for its lag in seconds read from the records (method "fetch")."""
        def partition() -> dict | None:
            status, body = self.get(f"/v3/kafka/{CLUSTER}/consumer/{group}/lag")
            partitions = body["status"]["partitions"] if status == 200 else []
            return partitions[0] if partitions and partitions[0]["end"] else None

        found = wait_until(partition, timeout, interval=0.2, message=what)
        assert (found["topic"], found["end"]["offset"], found["current_lag"]) == (topic, end, lag)
        if lag_seconds:
            wait_until(lambda: (p := partition()) and p["lag_seconds_method"] == "fetch", timeout, interval=0.2,
                       message=f"lag in seconds read from the records ({what})")
