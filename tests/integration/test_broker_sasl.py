"""SASL PLAIN on the broker's listeners, configured as Kafka's brokers are (a JAAS line with user_<name>
accounts): SASL_PLAINTEXT and SASL_SSL beside a PLAINTEXT listener. Real clients log in (confluent-kafka,
kcat, kafka-python, Kafka's console tools); a wrong password gets SASL_AUTHENTICATION_FAILED and a closed
connection; nothing but ApiVersions and the SASL exchange is served before a login, and nothing is written."""

from __future__ import annotations

import socket
import ssl
import struct
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from harness import alter_broker_configs, describe_broker_configs, free_port, recv_exactly, wait_until
from kafka_harness import java_peer
from sasl_support import SaslBroker, start_sasl_broker

from broker.protocol.api import ApiKey, decode_response, encode_request

pytestmark = pytest.mark.integration

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[SaslBroker]:
    broker = start_sasl_broker(tmp_path_factory.mktemp("sasl"), "PLAIN", {
        "sasl.enabled.mechanisms": "PLAIN",
        "password.encoder.secret": "the-encoder-secret-of-this-test",  # JAAS lines are set at run time
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
    })
    yield broker
    broker.process.stop()


def produce_and_count(settings: dict[str, str]) -> str:
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(settings)
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    producer = Producer(settings)
    for number in range(5):
        producer.produce(topic, b"logged in %d" % number)
    assert producer.flush(30) == 0
    return topic


@pytest.mark.parametrize("tls", [False, True], ids=["SASL_PLAINTEXT", "SASL_SSL"])
def test_librdkafka_logs_in_with_plain(broker, tls):
    settings = broker.librdkafka(tls=tls)
    topic = produce_and_count(settings)
    metadata = AdminClient(settings).list_topics(timeout=30)
    assert [b.port for b in metadata.brokers.values()] == [broker.sasl_ssl_port if tls else broker.sasl_port]
    kcat = ["kcat", "-b", settings["bootstrap.servers"], "-X", f"security.protocol={settings['security.protocol']}",
            "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"]
    if tls:
        kcat += ["-X", f"ssl.ca.location={broker.ca.path}"]
    read = subprocess.run([*kcat, "-C", "-t", topic, "-o", "beginning", "-e", "-q"], check=True,
                          capture_output=True, timeout=60).stdout.splitlines()
    assert read == [b"logged in %d" % n for n in range(5)]


def test_a_wrong_password_is_refused_and_nothing_is_written(broker):
    before = set(AdminClient({"bootstrap.servers": broker.process.bootstrap}).list_topics(timeout=30).topics)
    wrong = AdminClient({**broker.librdkafka(password="guess"), "socket.timeout.ms": 5000})
    with pytest.raises(KafkaException):
        for future in wrong.create_topics([NewTopic("never-created", 1, 1)], request_timeout=5).values():
            future.result(10)
    assert set(AdminClient({"bootstrap.servers": broker.process.bootstrap}).list_topics(timeout=30).topics) == before


def wire(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def call(sock: socket.socket, api_key: int, version: int, body: dict, correlation: int = 1) -> dict:
    sock.sendall(encode_request(api_key, version, correlation, "sasl-test", body))
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    return decode_response(api_key, version, recv_exactly(sock, size))[1]


def closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_the_sasl_exchange_on_the_wire(broker):
    """Kafka's answers and its order: only ApiVersions and the SASL APIs before a login, errors that close."""
    with wire(broker.sasl_port) as sock:
        versions = call(sock, ApiKey.API_VERSIONS, 0, {})
        served = {entry["api_key"] for entry in versions["api_keys"]}
        assert {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE} <= served
        sock.sendall(encode_request(ApiKey.METADATA, 1, 2, "sasl-test", {"topics": None}))
        assert closed(sock)  # a request before the login
    with wire(broker.sasl_port) as sock:
        assert call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"}) == {
            "error_code": 33, "mechanisms": ["PLAIN"]}  # UNSUPPORTED_SASL_MECHANISM
        assert closed(sock)
    with wire(broker.sasl_port) as sock:
        assert call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        answer = call(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00alice\x00wrong"})
        assert (answer["error_code"], answer["error_message"]) == (
            58, "Authentication failed: Invalid username or password")  # SASL_AUTHENTICATION_FAILED
        assert closed(sock)
    with wire(broker.sasl_port) as sock:
        assert call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        assert call(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00alice\x00alice-secret"})["error_code"] == 0
        assert call(sock, ApiKey.METADATA, 1, {"topics": None}, correlation=3)["brokers"]
        assert call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 34  # ILLEGAL_SASL_STATE
    with wire(broker.sasl_port) as sock:  # SaslHandshake v0: the token follows as a bare frame
        assert call(sock, ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == 0
        token = b"\x00admin\x00admin-secret"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert recv_exactly(sock, 4) == b"\x00\x00\x00\x00"
        assert call(sock, ApiKey.METADATA, 1, {"topics": None}, correlation=4)["brokers"]
    with wire(broker.sasl_port) as sock:  # an oversized frame before the login closes the connection
        sock.sendall(struct.pack(">i", 10 << 20))
        assert closed(sock)


def test_kafka_python_and_kafkas_console_tools_log_in(broker, tmp_path):
    from kafka import KafkaProducer

    topic = produce_and_count(broker.librdkafka())
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{broker.sasl_port}", security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-secret")
    producer.send(topic, b"from kafka-python").get(30)
    producer.close()
    client = tmp_path / "client.properties"
    client.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                      'username="alice" password="alice-secret";\n')
    consumed = java_peer("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
                         f"127.0.0.1:{broker.sasl_port}", "--topic", topic, "--from-beginning", "--max-messages", "6",
                         "--command-config", str(client), "--timeout-ms", "60000")
    assert consumed.stdout.splitlines()[-1] == "from kafka-python"


def log_in(sock: socket.socket, user: str, password: str) -> int:
    """SaslHandshake and SaslAuthenticate with PLAIN: the login's error code."""
    assert call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    return call(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": f"\x00{user}\x00{password}".encode()})["error_code"]


def test_plain_users_added_and_removed_at_run_time(broker):
    """The listener's JAAS line replaced per broker (KIP-226): a user added logs in at once, one removed cannot;
    a connection already logged in carries on, as on Kafka; the line is described hidden; a line nobody
    could log in with is refused and the running one kept. The listener's mechanisms change the same way."""
    key = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
    mechanisms = "listener.name.sasl_plaintext.sasl.enabled.mechanisms"
    renewed = JAAS.replace('user_alice="alice-secret"', 'user_carol="carol-secret"')
    try:
        with wire(broker.sasl_port) as logged_in_before:
            assert log_in(logged_in_before, "alice", "alice-secret") == 0
            assert alter_broker_configs(broker.process.bootstrap, {key: renewed}) == (0, None)
            with wire(broker.sasl_port) as sock:
                assert log_in(sock, "carol", "carol-secret") == 0
                assert call(sock, ApiKey.METADATA, 1, {"topics": None}, correlation=3)["brokers"]
            with wire(broker.sasl_port) as sock:
                assert log_in(sock, "alice", "alice-secret") == 58  # SASL_AUTHENTICATION_FAILED
            assert call(logged_in_before, ApiKey.METADATA, 1, {"topics": None}, correlation=3)["brokers"]
        trusting = ssl.create_default_context(cafile=str(broker.ca.path))
        with wire(broker.sasl_ssl_port) as raw, trusting.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert log_in(tls, "alice", "alice-secret") == 0  # the other listener keeps its own line
        entry = describe_broker_configs(broker.process.bootstrap)[key]
        assert (entry["value"], entry["is_sensitive"], entry["config_source"]) == (None, True, 2)
        code, message = alter_broker_configs(broker.process.bootstrap, {key: JAAS.split(" username")[0] + ";"})
        assert code == 42 and "no user_<name>" in message, message  # INVALID_REQUEST
        with wire(broker.sasl_port) as sock:
            assert log_in(sock, "carol", "carol-secret") == 0
        # the listener's mechanisms too: SCRAM offered beside PLAIN from the next connection on
        assert alter_broker_configs(broker.process.bootstrap, {mechanisms: "PLAIN,SCRAM-SHA-256"}) == (0, None)
        with wire(broker.sasl_port) as sock:
            assert call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"}) == {
                "error_code": 0, "mechanisms": ["PLAIN", "SCRAM-SHA-256"]}
        code, message = alter_broker_configs(broker.process.bootstrap, {mechanisms: "GSSAPI"})
        assert code == 42 and "GSSAPI: not available in this broker" in message, message
    finally:
        assert alter_broker_configs(broker.process.bootstrap, {key: None, mechanisms: None}) == (0, None)
    with wire(broker.sasl_port) as sock:
        assert log_in(sock, "alice", "alice-secret") == 0


@pytest.fixture(scope="module")
def reauth_broker(tmp_path_factory) -> Iterator[SaslBroker]:
    """Logins last 1.5 s (connections.max.reauth.ms): clients must re-authenticate (KIP-368)."""
    broker = start_sasl_broker(tmp_path_factory.mktemp("reauth"), "PLAIN", {
        "sasl.enabled.mechanisms": "PLAIN", "connections.max.reauth.ms": 1500,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
    })
    yield broker
    broker.process.stop()


def test_clients_re_authenticate_before_their_session_ends(reauth_broker):
    settings = reauth_broker.librdkafka()
    topic = produce_and_count(settings)
    producer = Producer(settings)
    failures: list = []
    sent = 0

    def re_authentications() -> int:
        # the broker is the module's: count from now on, in the whole log (log_text is its tail)
        return reauth_broker.process.log_path.read_text(errors="replace").count('"SASL re-authentication"')
    before = re_authentications()

    def re_authenticated_twice() -> bool:
        nonlocal sent
        producer.produce(topic, b"after %d" % sent, on_delivery=lambda err, _: err and failures.append(err))
        sent += 1
        producer.poll(0.05)
        return re_authentications() >= before + 2
    wait_until(re_authenticated_twice, 30, interval=0, message="the producer to re-authenticate twice")
    assert producer.flush(30) == 0 and failures == []


def test_an_expired_session_is_closed_and_re_authentication_keeps_the_user(reauth_broker):
    with wire(reauth_broker.sasl_port) as sock:
        assert call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        login = call(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00alice\x00alice-secret"})
        assert login["error_code"] == 0 and 0 < login["session_lifetime_ms"] <= 1500
        # re-authenticating as the same user extends the session; requests go on meanwhile
        assert call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, correlation=2)["error_code"] == 0
        again = call(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00alice\x00alice-secret"}, correlation=3)
        assert again["error_code"] == 0 and again["session_lifetime_ms"] > 0
        # without another re-authentication, the first request after the session's end closes the connection
        answered = 0

        def closed_after_expiry() -> bool:
            nonlocal answered
            try:
                sock.sendall(encode_request(ApiKey.METADATA, 1, 10 + answered, "sasl-test", {"topics": None}))
                (size,) = struct.unpack(">i", recv_exactly(sock, 4))
                recv_exactly(sock, size)
            except (ConnectionError, OSError, AssertionError):
                return True
            answered += 1
            return False
        wait_until(closed_after_expiry, 10, interval=0.2, message="the connection to close once its session ended")
        assert answered >= 1
    with wire(reauth_broker.sasl_port) as sock:  # re-authenticating as someone else closes the connection
        assert call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        assert call(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00alice\x00alice-secret"})["error_code"] == 0
        assert call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, correlation=2)["error_code"] == 0
        switched = call(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00admin\x00admin-secret"}, correlation=3)
        assert switched["error_code"] == 58 and closed(sock)


INVALID_REQUEST = 42
PROTOCOLS = "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"


def running_listeners(broker: SaslBroker) -> str:
    return (f"PLAINTEXT://{broker.process.bootstrap},SASL_PLAINTEXT://127.0.0.1:{broker.sasl_port},"
            f"SASL_SSL://127.0.0.1:{broker.sasl_ssl_port}")


def refuses_connections(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_a_listener_added_and_removed_at_run_time_with_kafkas_tool(broker, tmp_path):
    """KIP-226's dynamic listeners with kafka-configs: a SASL_PLAINTEXT listener added with its own JAAS line
    serves a producer and a consumer and is what Metadata tells its clients; removed, its open connections
    are closed and its port refuses new ones, while the broker's other listeners carry on."""
    port = free_port()
    added = tmp_path / "listener.properties"
    added.write_text(f"listeners={running_listeners(broker)},EXTRA://127.0.0.1:{port}\n"
                     f"listener.security.protocol.map={PROTOCOLS},EXTRA:SASL_PLAINTEXT\n"
                     "listener.name.extra.plain.sasl.jaas.config=org.apache.kafka.common.security.plain."
                     'PlainLoginModule required user_bob="bob-secret";\n')
    assert config_command(broker.process.bootstrap, "--add-config-file", str(added)) == [
        "Completed updating config for broker 1."]
    settings = {**broker.librdkafka(user="bob", password="bob-secret"), "bootstrap.servers": f"127.0.0.1:{port}"}
    topic = produce_and_count(settings)
    assert [b.port for b in AdminClient(settings).list_topics(timeout=30).brokers.values()] == [port]
    read = subprocess.run(["kcat", "-b", f"127.0.0.1:{port}", "-X", "security.protocol=SASL_PLAINTEXT", "-X",
                           "sasl.mechanisms=PLAIN", "-X", "sasl.username=bob", "-X", "sasl.password=bob-secret",
                           "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
                          check=True, capture_output=True, timeout=60).stdout.splitlines()
    assert read == [b"logged in %d" % n for n in range(5)]
    with wire(port) as open_connection:
        assert config_command(broker.process.bootstrap, "--delete-config", "listeners,listener.security.protocol.map,"
                              "listener.name.extra.plain.sasl.jaas.config") == [
            "Completed updating config for broker 1."]
        assert closed(open_connection)
    assert refuses_connections(port)
    produce_and_count(broker.librdkafka())


def config_command(bootstrap: str, *args: str) -> list[str]:
    """Kafka's kafka-configs altering broker 1: what it printed."""
    result = java_peer("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap, "--entity-type",
                       "brokers", "--entity-name", "1", "--alter", *args)
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]


def test_bad_listener_changes_are_refused_and_the_listeners_keep_running(broker):
    """A listener that cannot bind its port, one without a protocol, the inter-broker listener removed, an
    existing listener's protocol changed: refused with Kafka's INVALID_REQUEST and nothing changes;
    validate_only checks a good change without making it."""
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        for configs, message in (
                ({"listeners": f"{running_listeners(broker)},SSL://127.0.0.1:{busy}"},
                 f"Socket server failed to bind to 127.0.0.1:{busy}"),
                ({"listeners": f"{running_listeners(broker)},EXTRA://127.0.0.1:{port}"},
                 "No security protocol defined for listener EXTRA"),
                ({"listeners": f"SASL_PLAINTEXT://127.0.0.1:{broker.sasl_port}"},
                 "Advertised listener must be specified for inter-broker listener PLAINTEXT"),
                ({"listener.security.protocol.map": "PLAINTEXT:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"},
                 "Security protocol cannot be updated for existing listener ListenerName(PLAINTEXT)")):
            code, error = alter_broker_configs(broker.process.bootstrap, configs)
            assert code == INVALID_REQUEST and message in (error or ""), (configs, error)
    assert alter_broker_configs(broker.process.bootstrap, {"listeners": f"{running_listeners(broker)},SSL://127.0.0.1:"
                                                                        f"{port}"}, validate_only=True) == (0, None)
    assert refuses_connections(port)
    described = describe_broker_configs(broker.process.bootstrap)
    assert (described["listeners"]["value"], described["listeners"]["config_source"]) == (running_listeners(broker), 4)
    produce_and_count(broker.librdkafka())


def test_a_tls_listener_added_serves_with_the_brokers_keystore(broker):
    """An SSL listener added with IncrementalAlterConfigs builds its TLS context from the broker's ssl.*
    settings: a client that trusts the broker's CA completes the handshake and is served; removed, it is gone."""
    port = free_port()
    assert alter_broker_configs(broker.process.bootstrap, {
        "listeners": f"{running_listeners(broker)},SSL://127.0.0.1:{port}"}) == (0, None)
    trusting = ssl.create_default_context(cafile=str(broker.ca.path))
    with wire(port) as raw, trusting.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        assert call(tls, ApiKey.METADATA, 1, {"topics": None})["brokers"] == [
            {"node_id": 1, "host": "127.0.0.1", "port": port, "rack": None}]
    assert alter_broker_configs(broker.process.bootstrap, {"listeners": None}) == (0, None)
    assert refuses_connections(port)
