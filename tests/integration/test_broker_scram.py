"""SASL SCRAM-SHA-256 and SCRAM-SHA-512 on the broker: credentials from ``--add-scram`` (kafka-storage's
syntax), from the AdminClient and from Kafka's kafka-configs tool (AlterUserScramCredentials), kept across
restarts; librdkafka, kcat, kafka-python and the Java console consumer log in over SASL_PLAINTEXT and
SASL_SSL; a wrong password or a deleted credential gets SASL_AUTHENTICATION_FAILED."""

from __future__ import annotations

import random
import socket
import struct
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from harness import BURROWPY, ROOT, secret_file
from kafka_harness import java_peer
from sasl_support import SaslBroker, start_sasl_broker

from broker.protocol.api import ApiKey, encode_request

pytestmark = pytest.mark.integration

SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[SaslBroker]:
    directory = tmp_path_factory.mktemp("scram")
    password = secret_file(directory, "alice.password", "alice-secret")
    broker = start_sasl_broker(directory, "SCRAM-SHA-256", {
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
    }, args=("--add-scram", "SCRAM-SHA-256=[name=alice,password-env=ALICE_PASSWORD]",
             "--add-scram", f"SCRAM-SHA-512=[name=alice,password-file={password},iterations=8192]"),
       env={"ALICE_PASSWORD": "alice-secret"})
    yield broker
    broker.process.stop()


def round_trip(settings: dict[str, str]) -> list[bytes]:
    """Create a topic, write three records and read them back, all logged in with ``settings``."""
    topic = f"scram-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(settings)
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    producer = Producer(settings)
    for number in range(3):
        producer.produce(topic, b"scram %d" % number)
    assert producer.flush(30) == 0
    consumer = Consumer({**settings, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    read: list[bytes] = []
    try:
        for _ in range(60):
            read += [m.value() for m in consumer.consume(10, timeout=0.5) if m.error() is None]
            if len(read) >= 3:
                break
    finally:
        consumer.close()
    return read


@pytest.mark.parametrize("tls", [False, True], ids=["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_librdkafka_produces_and_consumes_with_scram(broker, mechanism, tls):
    settings = broker.librdkafka(mechanism, tls=tls)
    assert round_trip(settings) == [b"scram 0", b"scram 1", b"scram 2"]


def test_kcat_kafka_python_and_the_java_console_consumer(broker, tmp_path):
    from kafka import KafkaProducer

    settings = broker.librdkafka("SCRAM-SHA-512")
    topic = f"scram-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(settings)
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    producer = KafkaProducer(bootstrap_servers=settings["bootstrap.servers"], security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
                             sasl_plain_password="alice-secret")
    producer.send(topic, b"from kafka-python").get(30)
    producer.close()
    kcat = subprocess.run(["kcat", "-b", settings["bootstrap.servers"], "-X", "security.protocol=SASL_PLAINTEXT",
                           "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=alice",
                           "-X", "sasl.password=alice-secret", "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
                          check=True, capture_output=True, timeout=60)
    assert kcat.stdout.splitlines() == [b"from kafka-python"]
    client = tmp_path / "client.properties"
    client.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nssl.truststore.type=PEM\n"
                      f"ssl.truststore.location={broker.ca.path}\n"
                      'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
                      'username="alice" password="alice-secret";\n')
    consumed = java_peer("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
                         f"127.0.0.1:{broker.sasl_ssl_port}", "--topic", topic, "--from-beginning",
                         "--max-messages", "1", "--command-config", str(client), "--timeout-ms", "60000")
    assert consumed.stdout.splitlines()[-1] == "from kafka-python"


def test_a_wrong_password_and_an_unknown_user_are_refused(broker):
    for settings in (broker.librdkafka(password="guess"), broker.librdkafka(user="mallory", password="x"),
                     broker.librdkafka("SCRAM-SHA-512", password="alice-secret ")):
        admin = AdminClient({**settings, "socket.timeout.ms": 5000})
        with pytest.raises(KafkaException) as refused:
            admin.list_topics(timeout=5)
        assert "Authentication failed" in str(refused.value) or "_TRANSPORT" in str(refused.value) \
            or "timed out" in str(refused.value).lower()


def test_credentials_through_the_admin_client_and_kafka_configs_survive_a_restart(broker, tmp_path):
    admin = AdminClient({"bootstrap.servers": broker.process.bootstrap})
    bob = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-secret")
    admin.alter_user_scram_credentials([bob])["bob"].result(30)
    assert round_trip(broker.librdkafka(user="bob", password="bob-secret")) == [b"scram 0", b"scram 1", b"scram 2"]

    configs = ["--bootstrap-server", broker.process.bootstrap]
    java_peer("org.apache.kafka.tools.ConfigCommand", *configs, "--alter", "--add-config",
              "SCRAM-SHA-512=[password=carol-secret]", "--entity-type", "users", "--entity-name", "carol")
    described = java_peer("org.apache.kafka.tools.ConfigCommand", *configs, "--describe", "--entity-type", "users",
                          "--entity-name", "carol").stdout
    assert "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=4096" in described
    assert round_trip(broker.librdkafka("SCRAM-SHA-512", user="carol", password="carol-secret"))

    listed = admin.describe_user_scram_credentials().result(30)  # every user: one future of a dict
    everyone = {user: {(info.mechanism, info.iterations) for info in description.scram_credential_infos}
                for user, description in listed.items()}
    assert everyone["alice"] == {(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192)}
    assert everyone["bob"] == {(ScramMechanism.SCRAM_SHA_256, 4096)}
    assert everyone["carol"] == {(ScramMechanism.SCRAM_SHA_512, 4096)}

    broker.process.stop()
    broker.process.start()
    assert round_trip(broker.librdkafka(user="bob", password="bob-secret"))
    assert round_trip(broker.librdkafka("SCRAM-SHA-512", user="carol", password="carol-secret"))
    admin = AdminClient({"bootstrap.servers": broker.process.bootstrap})
    admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)])["bob"] \
        .result(30)
    with pytest.raises(KafkaException):
        AdminClient({**broker.librdkafka(user="bob", password="bob-secret"), "socket.timeout.ms": 5000}) \
            .list_topics(timeout=5)
    # Kafka's refusals: a credential that does not exist, too few iterations
    missing = admin.alter_user_scram_credentials([UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_256)])
    with pytest.raises(KafkaException, match="does not exist"):
        missing["nobody"].result(30)
    weak = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"x")
    with pytest.raises(KafkaException, match="Too few iterations"):
        admin.alter_user_scram_credentials([weak])["dave"].result(30)


def test_a_password_on_the_command_line_is_refused(tmp_path):
    """It would be readable by every user of the machine in ps; the broker does not start."""
    result = subprocess.run([BURROWPY, "broker", "--data-dir", str(tmp_path / "data"), "--listen", "127.0.0.1:0",
                             "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]"],
                            capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "--add-scram" in result.stderr and "password-file=" in result.stderr
    assert "alice-secret" not in result.stderr
    assert not (tmp_path / "data").exists()


def test_garbage_in_the_sasl_and_tls_handshakes_closes_only_that_connection(broker):
    """A fuzz of the login paths: random frames, random mechanisms, random SCRAM messages before and after a
    valid first round, random bytes to the TLS port. Each connection gets an error or is closed (never a
    hang), and the broker goes on serving real clients."""
    rng = random.Random(20261124)

    def junk(low: int = 0, high: int = 300) -> bytes:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(low, high)))

    def settles(sock: socket.socket) -> bool:
        """The connection is closed, or answers, within the timeout (it never hangs)."""
        try:
            return sock.recv(65536) is not None
        except (ConnectionError, OSError):
            return True

    def frame(api_key: int, version: int, body: dict) -> bytes:
        return encode_request(api_key, version, rng.randrange(1 << 30), "fuzz", body)

    client_first = b"n,,n=alice,r=" + b"x" * 24
    for case in range(120):
        kind = case % 5
        port = broker.sasl_ssl_port if kind == 4 else broker.sasl_port
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            if kind == 0:  # a random frame
                payload = junk()
                sock.sendall(struct.pack(">i", len(payload)) + payload)
            elif kind == 1:  # a mechanism that is not one
                sock.sendall(frame(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": junk(1, 40).decode("latin-1")}))
            elif kind == 2:  # a random client-first message
                sock.sendall(frame(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"}))
                assert settles(sock)
                sock.sendall(frame(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": junk(0, 200)}))
            elif kind == 3:  # a valid first round, then a random client-final message
                sock.sendall(frame(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"}))
                assert settles(sock)
                sock.sendall(frame(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client_first}))
                assert settles(sock)
                sock.sendall(frame(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"c=biws,r=" + junk(0, 120)}))
            else:  # random bytes where a TLS handshake should be
                sock.sendall(junk(1, 600))
            assert settles(sock)
    assert round_trip(broker.librdkafka("SCRAM-SHA-512", tls=True)) == [b"scram 0", b"scram 1", b"scram 2"]
    assert "Traceback" not in broker.process.log_text()
