"""`burrowpy serve` as a real process: answers Burrow's API, runs Debian's Burrow TOML against our broker,
stops cleanly on SIGTERM, and refuses bad configs with exit status 1 and a message naming file and key."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from harness import BURROWPY, ROOT, free_port, wait_until

DEBIAN_BURROW_TOML = Path("/etc/burrow/burrow.toml")


def http(url: str, method: str = "GET", body: bytes | None = None,
         content_type: str | None = "application/json") -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, method=method)
    if body is not None and content_type is not None:
        request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


class Serve:
    """A `burrowpy serve` subprocess; output goes to a file that failures print."""

    def __init__(self, workdir: Path, *args: str) -> None:
        self.output = workdir / "serve.out"
        with open(self.output, "wb") as output:
            self.proc = subprocess.Popen([BURROWPY, "serve", *args], stdout=output, stderr=subprocess.STDOUT,
                                         cwd=workdir, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def wait_ready(self, base: str, timeout: float = 60.0) -> None:
        def ready_or_exited() -> bool:
            return self.proc.poll() is not None or http(base + "/burrow/admin/ready") == (200, "READY")
        wait_until(ready_or_exited, timeout, interval=0.2, message=f"{base}/burrow/admin/ready to answer READY")
        assert self.proc.poll() is None, f"serve exited with {self.proc.returncode}:\n{self.text()}"

    def terminate(self, timeout: float = 30.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"serve did not stop within {timeout}s of SIGTERM:\n{self.text()}") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def serving():
    processes: list[Serve] = []

    def start(workdir: Path, *args: str) -> Serve:
        process = Serve(workdir, *args)
        processes.append(process)
        return process

    yield start
    for process in processes:
        process.kill()


def test_serves_the_api_and_stops_cleanly_on_sigterm(tmp_path, serving):
    port = free_port()
    (tmp_path / "burrowpy.yaml").write_text(f"""
general: {{pidfile: burrowpy.pid, access-control-allow-origin: "*"}}
logging: {{filename: logs/burrowpy.log, level: info}}
httpserver: {{default: {{address: "127.0.0.1:{port}"}}}}
storage: {{default: {{intervals: 12}}}}
""")
    serve = serving(tmp_path, "--config", "burrowpy.yaml")
    base = f"http://127.0.0.1:{port}"
    serve.wait_ready(base)
    assert (tmp_path / "burrowpy.pid").read_text() == str(serve.proc.pid)
    assert http(base + "/burrow/admin") == (200, "GOOD")
    status, body = http(base + "/v3/kafka")
    assert status == 200 and json.loads(body)["clusters"] == []
    module = json.loads(http(base + "/v3/config/storage/default")[1])["module"]
    assert module["intervals"] == 12
    status, body = http(base + "/v3/admin/loglevel", "POST", b'{"level": "debug"}')
    assert status == 200 and json.loads(http(base + "/v3/admin/loglevel")[1])["level"] == "debug"
    status, body = http(base + "/metrics")
    assert status == 200 and "process_resident_memory_bytes" in body
    assert http(base + "/v3/nothing")[0] == 404

    assert serve.terminate() == 0, serve.text()
    assert not (tmp_path / "burrowpy.pid").exists()
    events = [json.loads(line)["event"] for line in (tmp_path / "logs" / "burrowpy.log").read_text().splitlines()]
    assert "shutdown triggered" in events and events[-1] == "stopped burrowpy"


def test_without_an_address_listens_on_loopback_only_and_refuses_cross_site_posts(tmp_path, serving):
    (tmp_path / "burrowpy.yaml").write_text("""
general: {pidfile: ''}
logging: {filename: logs/burrowpy.log, level: info}
""")
    serve = serving(tmp_path, "--config", "burrowpy.yaml")
    log = tmp_path / "logs" / "burrowpy.log"

    def listening() -> list[str]:
        assert serve.proc.poll() is None, serve.text()
        lines = log.read_text().splitlines() if log.exists() else []
        return [event["listener"] for event in map(json.loads, lines) if event["event"] == "started listener"]

    wait_until(listening, 60, interval=0.1, message="the listener's start-up log line")
    listeners = listening()
    assert len(listeners) == 1 and listeners[0].startswith("127.0.0.1:"), listeners
    port = listeners[0].rsplit(":", 1)[1]
    base = f"http://127.0.0.1:{port}"
    serve.wait_ready(base)
    # Every 127/8 address reaches this host; one bound to all interfaces would answer on 127.0.0.2 as well.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.2", int(port)), timeout=5).close()

    for content_type in ("text/plain;charset=UTF-8", "application/x-www-form-urlencoded"):
        status, body = http(base + "/v3/admin/loglevel", "POST", b'{"level": "debug"}', content_type)
        assert status == 415 and json.loads(body)["error"] is True, (content_type, body)
    assert json.loads(http(base + "/v3/admin/loglevel")[1])["level"] == "info"
    status, body = http(base + "/v3/admin/loglevel", "POST", b'{"level": "debug"}')
    assert status == 200 and json.loads(http(base + "/v3/admin/loglevel")[1])["level"] == "debug"
    assert serve.terminate() == 0, serve.text()


@pytest.mark.parametrize(("config", "where", "message"), [
    ("storage: {default: {intervalls: 3}}", "storage.default.intervalls", "unknown key"),
    ("cluster: {local: {class-name: pulsar, servers: ['127.0.0.1:9092']}}", "cluster.local.class-name",
     "unknown class 'pulsar'"),
    ("storage: {default: {group-allowlist: '(oops'}}", "storage.default.group-allowlist", "bad regular expression"),
    ("evaluator: {default: {expire-cache: soon}}", "evaluator.default.expire-cache", "expected an integer"),
    ("consumer: {c: {class-name: kafka, cluster: nowhere, servers: ['127.0.0.1:9092']}}", "consumer.c.cluster",
     "'nowhere', which is not configured"),
    ("cluster: {local: {class-name: kafka}}", "cluster.local.servers", "is required"),
    ("logging: [info]", "logging", "expected a mapping"),
])
def test_bad_config_exits_1_naming_file_and_key(tmp_path, config, where, message):
    path = tmp_path / "broken.yaml"
    path.write_text(f"general: {{pidfile: ''}}\n{config}\n")
    result = subprocess.run([BURROWPY, "serve", "--config", str(path)], capture_output=True, text=True, timeout=60,
                            cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{path}: {where}: " in result.stderr and message in result.stderr


def test_refuses_to_start_while_the_pidfile_names_a_running_process(tmp_path):
    (tmp_path / "burrow.pid").write_text(str(os.getpid()))
    (tmp_path / "burrowpy.yaml").write_text("httpserver: {default: {address: '127.0.0.1:0'}}\n")
    result = subprocess.run([BURROWPY, "serve", "--config", "burrowpy.yaml"], capture_output=True, text=True,
                            timeout=60, cwd=tmp_path)
    assert result.returncode == 1 and f"names running process {os.getpid()}" in result.stderr
    assert (tmp_path / "burrow.pid").read_text() == str(os.getpid())


def adapted_debian_config(workdir: Path, bootstrap: str, http_port: int) -> str:
    """Debian's /etc/burrow/burrow.toml with local paths and addresses, nothing else changed."""
    text = DEBIAN_BURROW_TOML.read_text()
    replacements = {
        '"/run/burrow/burrow.pid"': f'"{workdir}/burrow.pid"',
        '"/var/log/burrow/burrow.log"': f'"{workdir}/log/burrow.log"',
        '"kafka01.example.com:10251", "kafka02.example.com:10251"': f'"{bootstrap}"',
        '":8000"': f'"127.0.0.1:{http_port}"',
    }
    for old, new in replacements.items():
        assert old in text, f"{DEBIAN_BURROW_TOML} no longer contains {old}"
        text = text.replace(old, new)
    return text


@pytest.mark.skipif(not DEBIAN_BURROW_TOML.exists(), reason="Debian's burrow package is not installed")
def test_runs_debians_burrow_toml_unchanged_against_our_broker(tmp_path, broker, serving):
    from confluent_kafka import Producer

    subprocess.run([BURROWPY, "topics", "create", "--bootstrap", broker.bootstrap, "--partitions", "2",
                    "serve-orders"], check=True, capture_output=True, cwd=ROOT, timeout=60)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        producer.produce("serve-orders", value=b"order %d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    del producer  # librdkafka would keep reconnecting after the broker is gone

    port = free_port()
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "burrow.toml").write_text(adapted_debian_config(tmp_path, broker.bootstrap, port))
    serve = serving(tmp_path, "--config-dir", str(tmp_path / "etc"))
    base = f"http://127.0.0.1:{port}"
    serve.wait_ready(base)

    assert json.loads(http(base + "/v3/kafka")[1])["clusters"] == ["local"]
    detail = json.loads(http(base + "/v3/kafka/local")[1])["module"]
    assert (detail["topic-refresh"], detail["offset-refresh"], detail["client-profile"]["client-id"]) == \
           (120, 30, "burrow-test")
    consumer = json.loads(http(base + "/v3/config/consumer/local")[1])["module"]
    assert consumer["cluster"] == "local" and consumer["servers"] == [broker.bootstrap]

    def topic_offsets():
        status, body = http(base + "/v3/kafka/local/topic/serve-orders")
        return status == 200 and json.loads(body)["offsets"]
    assert wait_until(topic_offsets, 60, interval=0.5, message="the cluster module to fetch offsets") == [15, 15]
    metrics = http(base + "/metrics")[1]
    assert 'burrow_kafka_topic_partition_offset{cluster="local",partition="1",topic="serve-orders"} 15.0' in metrics

    assert serve.terminate() == 0, serve.text()
    log = (tmp_path / "log" / "burrow.log").read_text()
    assert "group-blacklist is Burrow's old name for group-denylist" in log
