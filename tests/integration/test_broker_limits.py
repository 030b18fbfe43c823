"""Kafka's connection limits and memory bounds on a real broker process, from raw sockets: announced frame
sizes cost nothing until their bytes arrive, max.connections / max.connections.per.ip (and its overrides)
hold back or close the excess connection while the others are served, idle connections are closed after
connections.max.idle.ms, and a connection that never finishes its TLS handshake or SASL login is closed at
that deadline."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from harness import BrokerProcess, _api_versions_answered, recv_exactly, wait_until
from sasl_support import SaslBroker, start_sasl_broker

from broker.client import KafkaConnection
from broker.protocol.api import ApiKey, decode_response, encode_request

pytestmark = pytest.mark.alone  # asserts answer times

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_alice="alice-secret";')
IDLE_MS = 1500


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket()
    sock.settimeout(10)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def closed(sock: socket.socket, timeout: float = 10) -> bool:
    """Whether the broker closes ``sock`` within ``timeout`` s (False if it is still open then)."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def answered(sock: socket.socket, timeout: float = 10) -> bool:
    sock.settimeout(timeout)
    try:
        return _api_versions_answered(sock)
    except TimeoutError:
        return False


def served(port: int, count: int, source: str = "127.0.0.1") -> list[socket.socket]:
    """``count`` connections from ``source``, each answered: polled, because the broker counts a connection a
    client closed (the harness's check that it is up, the test before) until it has seen the close."""
    def attempt() -> list[socket.socket] | None:
        socks = [connect(port, source) for _ in range(count)]
        try:
            if all(answered(sock, timeout=2) for sock in socks):
                return socks
        except (OSError, struct.error):  # closed by the broker: one it has not seen closed still counts
            pass
        for sock in socks:
            sock.close()
        return None

    return wait_until(attempt, timeout=10, message=f"{count} connections from {source} served")


def call(sock: socket.socket, api_key: int, version: int, body: dict, correlation: int = 1) -> dict:
    sock.sendall(encode_request(api_key, version, correlation, "limits-test", body))
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    return decode_response(api_key, version, recv_exactly(sock, size))[1]


@pytest.fixture(scope="module")
def plain_broker(tmp_path_factory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("limits") / "data") as broker:
        yield broker


def test_announced_frame_sizes_cost_nothing_until_their_bytes_arrive(plain_broker):
    """Four connections announce 100 MB requests and send 256 KiB of each: the broker's memory grows by what
    arrived (a few MiB), not by what was announced (400 MB), and it serves others meanwhile."""
    pid = plain_broker.proc.pid
    before = rss_kib(pid)
    liars = [connect(plain_broker.port) for _ in range(4)]
    try:
        for sock in liars:
            sock.sendall(struct.pack(">i", 100_000_000) + bytes(256 * 1024))
        with connect(plain_broker.port) as other:  # answered after the loop has read what the four sent
            assert answered(other)
            assert answered(other)
        grown_mib = (rss_kib(pid) - before) / 1024
        assert grown_mib < 20, f"RSS grew {grown_mib:.0f} MiB for 1 MiB received"
        assert not any(closed(sock, timeout=0.01) for sock in liars)  # waiting for their bytes, not refused
    finally:
        for sock in liars:
            sock.close()


@pytest.fixture(scope="module")
def limited_broker(tmp_path_factory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("limits") / "data", extra_config={
            "max.connections": 3, "max.connections.per.ip": 2,
            "max.connections.per.ip.overrides": "127.0.0.2:3", "max.partitions": 1000}) as broker:
        yield broker


def test_max_connections_per_ip_closes_the_excess_connection(limited_broker):
    """Two connections from 127.0.0.1 are served; the third from that address is closed at once (Kafka's
    acceptor refuses it); the override lets 127.0.0.2 have three (but the broker-wide limit is 3 in all, so
    one of the first two makes room first)."""
    port = limited_broker.port
    first, second = served(port, 2)
    try:
        with connect(port) as third:
            assert closed(third)
        assert answered(first) and answered(second)
        second.close()
        overridden = [connect(port, "127.0.0.2") for _ in range(2)]
        try:
            assert all(answered(sock) for sock in overridden)
        finally:
            for sock in overridden:
                sock.close()
    finally:
        first.close()
        second.close()


def test_max_connections_holds_the_excess_connection_until_one_closes(limited_broker):
    """Three connections in all (two from 127.0.0.1, one from 127.0.0.2): a fourth, from 127.0.0.2 (its own
    limit is 3), waits in the listen backlog unanswered, as Kafka's acceptor leaves it, and is served as soon
    as one of the three closes."""
    port = limited_broker.port
    held = [*served(port, 2), *served(port, 1, "127.0.0.2")]
    try:
        with connect(port, "127.0.0.2") as fourth:
            fourth.sendall(struct.pack(">i", 14) + struct.pack(">hhih", 18, 0, 1, 4) + b"ping")
            fourth.settimeout(1.0)
            with pytest.raises(TimeoutError):
                fourth.recv(4)
            assert all(answered(sock) for sock in held)  # the others are served meanwhile
            held.pop().close()
            fourth.settimeout(10)
            (size,) = struct.unpack(">i", recv_exactly(fourth, 4))
            assert len(recv_exactly(fourth, size)) == size
    finally:
        for sock in held:
            sock.close()


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory) -> Iterator[SaslBroker]:
    broker = start_sasl_broker(tmp_path_factory.mktemp("limits-sasl"), "PLAIN", {
        "sasl.enabled.mechanisms": "PLAIN", "connections.max.idle.ms": IDLE_MS,
        "connection.failed.authentication.delay.ms": 700,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
    })
    yield broker
    broker.process.stop()


def test_an_idle_connection_is_closed_and_a_busy_one_is_not(sasl_broker):
    port = sasl_broker.process.port
    with connect(port) as idle, connect(port) as busy:
        assert answered(idle) and answered(busy)
        started = time.monotonic()
        while time.monotonic() - started < 2 * IDLE_MS / 1000:  # requests back to back, twice the idle time
            assert answered(busy)
        assert closed(idle, timeout=0.1) or closed(idle)
        assert time.monotonic() - started >= IDLE_MS / 1000 * 0.9
        assert answered(busy)


def test_a_sasl_login_has_a_deadline_even_for_a_client_that_keeps_talking(sasl_broker):
    """ApiVersions back to back on a SASL listener without ever logging in: closed once connections.max.idle.ms
    has passed since it connected; a logged-in connection doing the same stays; a frame over
    sasl.server.max.receive.size (512 KiB) before the login closes the connection."""
    port = sasl_broker.sasl_port
    with connect(port) as anonymous, connect(port) as alice:
        assert call(alice, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        assert call(alice, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00alice\x00alice-secret"})[
            "error_code"] == 0
        started = time.monotonic()

        def anonymous_closed() -> bool:
            assert answered(alice)
            try:
                return not answered(anonymous)
            except (ConnectionError, OSError):
                return True

        wait_until(anonymous_closed, timeout=10, interval=0, message="the connection without a login closed")
        assert time.monotonic() - started >= IDLE_MS / 1000 * 0.9
        assert answered(alice)
    with connect(port) as big:
        big.sendall(struct.pack(">i", 524288 + 1))
        assert closed(big)


def test_a_tls_handshake_that_never_comes_is_closed_at_the_deadline(sasl_broker):
    with connect(sasl_broker.sasl_ssl_port) as silent:
        started = time.monotonic()
        assert closed(silent, timeout=10)
        assert time.monotonic() - started < 10


def test_create_topics_past_the_partition_bounds_gets_policy_violation(limited_broker):
    """Kafka's per-request bound (10,000 partitions in one CreateTopics, every topic refused in its words),
    and max.partitions (1,000 here) for CreateTopics and CreatePartitions; nothing is created, and the broker
    still accepts connections."""
    async def create(topics: list[tuple[str, int]]) -> list[tuple[int, str | None]]:
        async with await KafkaConnection.connect(limited_broker.bootstrap) as connection:
            answer = await connection.request(ApiKey.CREATE_TOPICS, {"topics": [
                {"name": name, "num_partitions": count, "replication_factor": 1, "assignments": [], "configs": []}
                for name, count in topics], "timeout_ms": 30000, "validate_only": False}, version=5)
        return [(topic["error_code"], topic["error_message"]) for topic in answer["topics"]]

    assert asyncio.run(create([("flood", 100_000), ("small", 1)])) == [
        (44, "Excessively large number of partitions per request."),
        (44, "Excessively large number of partitions per request.")]  # POLICY_VIOLATION
    (code, message), = asyncio.run(create([("big", 5_000)]))
    assert code == 44 and "max.partitions (1000)" in message
    admin = AdminClient({"bootstrap.servers": limited_broker.bootstrap})
    admin.create_topics([NewTopic("some", 10, 1)])["some"].result(30)
    with pytest.raises(Exception, match="max.partitions"):
        admin.create_partitions([NewPartitions("some", 2_000)])["some"].result(30)
    topics = admin.list_topics(timeout=30).topics
    assert "flood" not in topics and "small" not in topics and "big" not in topics
    assert len(topics["some"].partitions) == 10
    with served(limited_broker.port, 1)[0] as sock:
        assert answered(sock)


def open_files(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def test_many_partitions_do_not_mean_many_open_files(tmp_path):
    """A topic of 1,000 partitions, two of them written and read: the broker opens files for those two, not
    three per partition (3,000 before); killed and restarted (every segment recovered), it opens none for
    them."""
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        settings = {"bootstrap.servers": broker.bootstrap}
        before = open_files(broker.proc.pid)
        admin = AdminClient(settings)
        admin.create_topics([NewTopic("wide", 1_000, 1)])["wide"].result(60)
        producer = Producer(settings)
        for partition in (0, 999):
            producer.produce("wide", b"x" * 100, partition=partition)
        assert producer.flush(30) == 0
        consumer = Consumer({**settings, "group.id": "wide-reader", "auto.offset.reset": "earliest"})
        try:
            consumer.assign([TopicPartition("wide", 0, 0), TopicPartition("wide", 999, 0)])
            got = []
            wait_until(lambda: got.extend(m for m in consumer.consume(10, 0.5) if not m.error()) or len(got) == 2,
                       timeout=30, message="both records read")
        finally:
            consumer.close()
        grown = open_files(broker.proc.pid) - before
        assert grown < 100, f"{grown} more files open for a topic of 1,000 partitions"
        broker.kill()  # a shutdown closes 1,000 logs one by one; recovery opens and gives back each segment
        broker.start(timeout=120)
        # recovery may still be under way when the broker answers: its descriptors are given back as it goes
        wait_until(lambda: open_files(broker.proc.pid) < before + 100, timeout=60,
                   message="the restarted broker to hold few files")
    finally:
        broker.kill()


def test_the_logs_hold_no_more_files_open_than_log_max_open_files(tmp_path):
    """log.max.open.files of 24 and a topic of 150 partitions, each written and then read by real clients:
    the broker never holds more than the budget open for its logs (each written partition kept its segment
    open before: 150 more files), and every record comes back from its partition."""
    budget, partitions = 24, 150
    with BrokerProcess(tmp_path / "data", extra_config={"log.max.open.files": budget}) as broker:
        settings = {"bootstrap.servers": broker.bootstrap}
        admin = AdminClient(settings)
        admin.create_topics([NewTopic("wide", partitions, 1)])["wide"].result(60)
        before = open_files(broker.proc.pid)
        most = 0
        producer = Producer({**settings, "linger.ms": 0})
        for partition in range(partitions):
            producer.produce("wide", b"value-%d" % partition, partition=partition)
            producer.poll(0)
            most = max(most, open_files(broker.proc.pid) - before)
        assert producer.flush(30) == 0
        most = max(most, open_files(broker.proc.pid) - before)  # every partition written
        consumer = Consumer({**settings, "group.id": "wide-reader", "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("wide", p, 0) for p in range(partitions)])
            got: dict[int, bytes] = {}

            def all_read() -> bool:
                nonlocal most
                for message in consumer.consume(50, 0.2):
                    if not message.error():
                        got[message.partition()] = message.value()
                most = max(most, open_files(broker.proc.pid) - before)
                return len(got) == partitions

            wait_until(all_read, timeout=60, interval=0, message="a record from every partition")
        finally:
            consumer.close()
        assert got == {p: b"value-%d" % p for p in range(partitions)}
        print(f"at most {most} more files open over {partitions} partitions written and read")  # shown with -s
        # the clients' own connections (a few sockets) come on top of the logs' files
        assert most <= budget + 8, f"{most} more files open with log.max.open.files {budget}"


def test_a_failed_login_is_answered_after_the_delay(sasl_broker):
    """connection.failed.authentication.delay.ms (700 here): a wrong password's answer, and the close, wait
    that long; a right one is answered at once."""
    with connect(sasl_broker.sasl_port) as sock:
        assert call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        started = time.monotonic()
        answer = call(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00alice\x00guess"})
        assert answer["error_code"] == 58 and time.monotonic() - started >= 0.7
        assert closed(sock)
    with connect(sasl_broker.sasl_port) as sock:
        assert call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        started = time.monotonic()
        answer = call(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00alice\x00alice-secret"})
        assert answer["error_code"] == 0 and time.monotonic() - started < 0.7


def test_max_connection_creation_rate_paces_accepting(tmp_path):
    """max.connection.creation.rate of 2 a second over a 2-second window: ten connections opened at once are
    all served, but the broker accepts them over seconds, as Kafka's acceptor throttles, not at once."""
    with BrokerProcess(tmp_path / "data", extra_config={
            "max.connection.creation.rate": 2, "quota.window.num": 2, "quota.window.size.seconds": 1}) as broker:
        started = time.monotonic()
        socks = [connect(broker.port) for _ in range(10)]
        try:
            assert all(answered(sock, timeout=20) for sock in socks)
            assert time.monotonic() - started >= 2.0
        finally:
            for sock in socks:
                sock.close()


def test_connection_limits_change_at_run_time(limited_broker):
    """max.connections.per.ip raised to 3 with IncrementalAlterConfigs (cluster default, as kafka-configs.sh
    --entity-default does): the third connection from 127.0.0.1 is served now; set back, refused again."""
    async def set_per_ip(value: str) -> int:
        async with await KafkaConnection.connect(limited_broker.bootstrap) as connection:
            answer = await connection.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, {"resources": [
                {"resource_type": 4, "resource_name": "", "configs": [
                    {"name": "max.connections.per.ip", "config_operation": 0, "value": value}]}],
                "validate_only": False}, version=1)
        return answer["responses"][0]["error_code"]

    # retried until the broker has seen the earlier connections closed (they count till then)
    wait_until(lambda: asyncio.run(set_per_ip("3")) == 0, timeout=10, message="max.connections.per.ip set to 3")
    socks = served(limited_broker.port, 3)
    for sock in socks:
        sock.close()
    wait_until(lambda: asyncio.run(set_per_ip("2")) == 0, timeout=10, message="max.connections.per.ip set to 2")
    first, second = served(limited_broker.port, 2)
    try:
        with connect(limited_broker.port) as third:
            assert closed(third)
    finally:
        first.close()
        second.close()
