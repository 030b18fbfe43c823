"""The broker's listeners and TLS, configured as in a Kafka server.properties: a PLAINTEXT and an SSL listener
at once, PEM stores, client certificates requested or required. Real clients over TLS: confluent-kafka
(librdkafka), kcat, kafka-python and Kafka's own console tools (the Java client). Each listener tells its
clients the brokers' addresses on that same listener; garbage on the TLS port costs that connection only."""

from __future__ import annotations

import socket
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography import x509
from harness import (
    BrokerProcess,
    alter_broker_configs,
    broker_side_buffers,
    describe_broker_configs,
    free_port,
    wait_until,
)
from kafka_harness import java_peer
from tls_certs import CertificateAuthority, serial_of, served_serial

pytestmark = pytest.mark.integration


class TlsBroker:
    def __init__(self, process: BrokerProcess, ssl_port: int, ca: CertificateAuthority, client_store: Path,
                 client_key: Path, client_cert: Path) -> None:
        self.process = process
        self.ssl_port = ssl_port
        self.ca = ca
        self.client_store, self.client_key, self.client_cert = client_store, client_key, client_cert

    @property
    def plaintext(self) -> str:
        return self.process.bootstrap

    @property
    def tls(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    def librdkafka(self, certificate: bool = False) -> dict[str, str]:
        settings = {"bootstrap.servers": self.tls, "security.protocol": "ssl", "ssl.ca.location": str(self.ca.path)}
        if certificate:
            settings |= {"ssl.certificate.location": str(self.client_cert), "ssl.key.location": str(self.client_key)}
        return settings


def start_broker(directory: Path, client_auth: str) -> TlsBroker:
    ca = CertificateAuthority(directory / "certs")
    server = ca.issue("broker")
    client = ca.issue("client", client=True)
    plain_port, ssl_port = free_port(), free_port()
    process = BrokerProcess(directory / "data", port=plain_port, extra_config={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{ssl_port}",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.store),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.path),
        "ssl.client.auth": client_auth, "group.initial.rebalance.delay.ms": 0,
        "password.encoder.secret": "the-encoder-secret-of-this-test",  # for the keystore password set at run time
        # set on both listeners, TLS's included (test_socket_buffers_on_the_tls_listener)
        "socket.receive.buffer.bytes": 65536, "socket.send.buffer.bytes": 262144,
    })
    process.start()
    return TlsBroker(process, ssl_port, ca, client.store, client.key, client.certificate)


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[TlsBroker]:
    running = start_broker(tmp_path_factory.mktemp("tls"), "requested")
    yield running
    running.process.stop()


def new_topic(settings: dict[str, str], partitions: int = 1) -> str:
    name = f"tls-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(settings)  # kept alive until its answer came
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)
    return name


def consume(settings: dict[str, str], topic: str, count: int, group: str) -> list[bytes]:
    consumer = Consumer({**settings, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []

        def all_read() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
            return len(values) >= count
        wait_until(all_read, 60, interval=0, message=f"{count} records of {topic}")
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, 0)], 30)
        assert committed[0].offset == count
        return values
    finally:
        consumer.close()


def test_librdkafka_produces_consumes_and_commits_over_tls(broker):
    settings = broker.librdkafka()
    topic = new_topic(settings)
    producer = Producer(settings)
    for number in range(20):
        producer.produce(topic, b"secret %d" % number)
    assert producer.flush(30) == 0
    assert consume(settings, topic, 20, f"{topic}-group") == [b"secret %d" % n for n in range(20)]


def test_each_listener_advertises_its_own_addresses(broker):
    over_tls = AdminClient(broker.librdkafka()).list_topics(timeout=30)
    over_plaintext = AdminClient({"bootstrap.servers": broker.plaintext}).list_topics(timeout=30)
    assert [(b.host, b.port) for b in over_tls.brokers.values()] == [("127.0.0.1", broker.ssl_port)]
    assert [(b.host, b.port) for b in over_plaintext.brokers.values()] == [("127.0.0.1", broker.process.port)]


def test_the_tls_listener_speaks_only_tls(broker):
    # A plaintext Kafka request to the TLS port is not a handshake: that connection is closed...
    with socket.create_connection(("127.0.0.1", broker.ssl_port), timeout=10) as raw:
        raw.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")  # ApiVersions v0
        answer = b""
        try:
            while chunk := raw.recv(4096):
                answer += chunk
        except ConnectionResetError:
            pass
        assert answer == b"" or answer[0] == 0x15, answer  # closed, perhaps after a TLS alert record
    # ... and a client that does not trust the broker's certificate cannot connect.
    untrusting = ssl.create_default_context()
    with pytest.raises(ssl.SSLCertVerificationError), socket.create_connection(("127.0.0.1", broker.ssl_port),
                                                                              timeout=10) as raw:
        untrusting.wrap_socket(raw, server_hostname="127.0.0.1")
    # The broker serves everyone else as before.
    AdminClient(broker.librdkafka()).list_topics(timeout=30)


def test_socket_buffers_on_the_tls_listener(broker):
    trusting = ssl.create_default_context(cafile=str(broker.ca.path))
    assert broker_side_buffers(broker.ssl_port, trusting) == (2 * 65536, 2 * 262144)
    assert broker_side_buffers(broker.process.port) == (2 * 65536, 2 * 262144)


def test_kcat_and_kafka_python_over_tls(broker):
    from kafka import KafkaConsumer, KafkaProducer

    settings = broker.librdkafka()
    topic = new_topic(settings)
    tls = ["-b", broker.tls, "-X", "security.protocol=ssl", "-X", f"ssl.ca.location={broker.ca.path}"]
    subprocess.run(["kcat", *tls, "-P", "-t", topic, "-p", "0"], input=b"one\ntwo\n", check=True, timeout=60)
    producer = KafkaProducer(bootstrap_servers=broker.tls, security_protocol="SSL", ssl_cafile=str(broker.ca.path))
    producer.send(topic, b"three").get(30)
    producer.close()
    read = subprocess.run(["kcat", *tls, "-C", "-t", topic, "-o", "beginning", "-e", "-q"], check=True,
                          capture_output=True, timeout=60).stdout.split()
    assert read == [b"one", b"two", b"three"]
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.tls, security_protocol="SSL",
                             ssl_cafile=str(broker.ca.path), auto_offset_reset="earliest", consumer_timeout_ms=20000)
    assert [message.value for message in consumer][:3] == [b"one", b"two", b"three"]
    consumer.close()


def test_kafkas_console_tools_over_tls(broker, tmp_path):
    """The Java client, through Kafka's console producer and consumer, with a PEM truststore."""
    topic = new_topic(broker.librdkafka())
    client = tmp_path / "client.properties"
    client.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={broker.ca.path}\n")
    java_peer("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", broker.tls, "--topic", topic,
              "--command-config", str(client), input="alpha\nbeta\n")
    consumed = java_peer("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", broker.tls,
                         "--topic", topic, "--from-beginning", "--max-messages", "2", "--command-config", str(client),
                         "--timeout-ms", "60000")
    assert consumed.stdout.split() == ["alpha", "beta"]


def test_required_client_certificates(tmp_path):
    running = start_broker(tmp_path, "required")
    try:
        with_certificate = running.librdkafka(certificate=True)
        topic = new_topic(with_certificate)
        producer = Producer(with_certificate)
        producer.produce(topic, b"signed")
        assert producer.flush(30) == 0
        without = AdminClient({**running.librdkafka(), "socket.timeout.ms": 3000})
        with pytest.raises(KafkaException):
            without.list_topics(timeout=5)
        # PLAINTEXT stays a separate listener with no client certificate involved.
        assert topic in AdminClient({"bootstrap.servers": running.plaintext}).list_topics(timeout=30).topics
    finally:
        running.process.stop()


# --- certificates rotated at run time (KIP-226's listener.name.<listener>.ssl.* on the BROKER resource) ------

INVALID_REQUEST = 42
DYNAMIC_BROKER_CONFIG = 2


def api_versions(tls: ssl.SSLSocket) -> int:
    """ApiVersions v0 on an open connection: its error code."""
    tls.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x07\x00\x00")
    size = int.from_bytes(tls.recv(4), "big")
    answer = b""
    while len(answer) < size:
        answer += tls.recv(size - len(answer))
    assert answer[:4] == b"\x00\x00\x00\x07"
    return int.from_bytes(answer[4:6], "big")


def test_a_certificate_rotated_with_kafka_configs_while_clients_run(broker):
    """Kafka's own tool replaces the TLS listener's keystore: connections made afterwards are handed the
    renewed certificate, a producer and a consumer connected before carry on without losing a record, a
    connection opened before keeps the old one; no restart."""
    settings = broker.librdkafka()
    topic = new_topic(settings)
    producer = Producer(settings)
    consumer = Consumer({**settings, "group.id": f"{topic}-group", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    read: list[bytes] = []

    def read_up_to(count: int) -> None:
        def enough() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read.append(message.value())
            return len(read) >= count
        wait_until(enough, 60, interval=0, message=f"{count} records of {topic}")

    try:
        consumer.subscribe([topic])
        for number in range(10):
            producer.produce(topic, b"before %d" % number)
        assert producer.flush(30) == 0
        read_up_to(10)
        old = served_serial(broker.ssl_port, broker.ca.path)
        trusting = ssl.create_default_context(cafile=str(broker.ca.path))
        with socket.create_connection(("127.0.0.1", broker.ssl_port), timeout=10) as raw, \
                trusting.wrap_socket(raw, server_hostname="127.0.0.1") as opened_before:
            renewed = broker.ca.issue("broker", stem="broker-renewed")
            done = java_peer("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", broker.plaintext,
                             "--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config",
                             f"listener.name.ssl.ssl.keystore.location={renewed.store}")
            assert "Completed updating config for broker 1." in done.stdout
            assert served_serial(broker.ssl_port, broker.ca.path) == serial_of(renewed) != old
            assert api_versions(opened_before) == 0
            assert x509.load_der_x509_certificate(opened_before.getpeercert(binary_form=True)).serial_number == old
        for number in range(10):
            producer.produce(topic, b"after %d" % number)
        assert producer.flush(30) == 0
        read_up_to(20)
        assert read == [b"before %d" % n for n in range(10)] + [b"after %d" % n for n in range(10)]
    finally:
        consumer.close()
    entry = describe_broker_configs(broker.plaintext)["listener.name.ssl.ssl.keystore.location"]
    assert (entry["value"], entry["config_source"], entry["is_sensitive"]) == (
        str(renewed.store), DYNAMIC_BROKER_CONFIG, False)


def test_a_keystore_that_cannot_serve_is_refused_and_the_running_one_kept(broker, tmp_path):
    running = served_serial(broker.ssl_port, broker.ca.path)
    key = "listener.name.ssl.ssl.keystore.location"
    stranger = broker.ca.issue("broker", stem="broker-stranger")
    other = broker.ca.issue("broker", stem="broker-other")
    mismatched = tmp_path / "mismatched.pem"  # one certificate's chain with another's key
    mismatched.write_bytes(other.key.read_bytes() + stranger.certificate.read_bytes())
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a keystore\n")
    renamed = broker.ca.issue("somebody-else")  # Kafka's ssl.allow.dn.changes=false: the subject must stay
    # and ssl.allow.san.changes=false: every alternative name must stay
    narrower = broker.ca.issue("broker", stem="broker-narrower", hosts=("127.0.0.1",))
    for path, words in ((mismatched, "cannot load the broker's key and certificate"),
                        (garbage, "cannot load the broker's key and certificate"),
                        (tmp_path / "missing.pem", "cannot load the broker's key and certificate"),
                        (renamed.store, "Keystore DistinguishedName does not match:  existing={alias=kafka, "
                                        "DN=CN=broker}, new={alias=kafka, DN=CN=somebody-else}"),
                        (narrower.store, "Keystore SubjectAltNames do not match:  existing={alias=kafka, "
                                         "SAN=[[2, localhost], [7, 127.0.0.1]]}, new={alias=kafka, "
                                         "SAN=[[7, 127.0.0.1]]}")):
        code, message = alter_broker_configs(broker.plaintext, {key: str(path)})
        assert code == INVALID_REQUEST, message
        assert message.startswith("Invalid value org.apache.kafka.common.config.ConfigException: Validation of "
                                  "dynamic config update of SSLFactory failed: ")
        assert words in message
        assert served_serial(broker.ssl_port, broker.ca.path) == running
    # validate_only: checked, not applied
    assert alter_broker_configs(broker.plaintext, {key: str(stranger.store)}, validate_only=True) == (0, None)
    assert served_serial(broker.ssl_port, broker.ca.path) == running
    assert describe_broker_configs(broker.plaintext).get(key, {}).get("value") != str(stranger.store)


def test_a_keystore_renewed_in_place_is_read_again_by_an_alter_that_names_it(broker, tmp_path):
    """Kafka's rule for a store file renewed under the same name: an alter that names it (with the same value)
    loads it, checked as any other; one that does not leaves the listener as it runs."""
    key = "listener.name.ssl.ssl.keystore.location"
    store = tmp_path / "broker.pem"
    first = broker.ca.issue("broker", stem="broker-in-place-1")
    store.write_bytes(first.store.read_bytes())
    store.chmod(0o600)
    assert alter_broker_configs(broker.plaintext, {key: str(store)}) == (0, None)
    assert served_serial(broker.ssl_port, broker.ca.path) == serial_of(first)
    renamed = broker.ca.issue("somebody-else", stem="broker-in-place-renamed")
    store.write_bytes(renamed.store.read_bytes())
    code, message = alter_broker_configs(broker.plaintext, {key: str(store)})
    assert code == INVALID_REQUEST and "Keystore DistinguishedName does not match" in message, message
    second = broker.ca.issue("broker", stem="broker-in-place-2")
    store.write_bytes(second.store.read_bytes())
    assert alter_broker_configs(broker.plaintext, {"log.cleaner.backoff.ms": "15000"}) == (0, None)
    assert served_serial(broker.ssl_port, broker.ca.path) == serial_of(first)
    assert alter_broker_configs(broker.plaintext, {key: str(store), "log.cleaner.backoff.ms": None}) == (0, None)
    assert served_serial(broker.ssl_port, broker.ca.path) == serial_of(second)


def test_a_pkcs12_keystore_with_its_password_hidden_and_kept_over_a_restart(broker, tmp_path):
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        load_pem_private_key,
        pkcs12,
    )

    issued = broker.ca.issue("broker", stem="broker-p12")
    store = tmp_path / "broker.p12"
    store.write_bytes(pkcs12.serialize_key_and_certificates(
        b"kafka", load_pem_private_key(issued.key.read_bytes(), None),
        x509.load_pem_x509_certificate(issued.certificate.read_bytes()), None, BestAvailableEncryption(b"store-pw")))
    prefix = "listener.name.ssl.ssl."
    assert alter_broker_configs(broker.plaintext, {prefix + "keystore.type": "PKCS12", prefix + "keystore.location": str(store),
                                 prefix + "keystore.password": "wrong"})[0] == INVALID_REQUEST
    assert alter_broker_configs(broker.plaintext, {prefix + "keystore.type": "PKCS12", prefix + "keystore.location": str(store),
                                 prefix + "keystore.password": "store-pw"}) == (0, None)
    assert served_serial(broker.ssl_port, broker.ca.path) == serial_of(issued)
    password = describe_broker_configs(broker.plaintext)[prefix + "keystore.password"]
    assert (password["value"], password["is_sensitive"], password["config_source"]) == (
        None, True, DYNAMIC_BROKER_CONFIG)
    assert password["synonyms"] == [{"name": prefix + "keystore.password", "value": None,
                                     "source": DYNAMIC_BROKER_CONFIG}]
    stored = broker.process.data_dir / "dynamic-broker-configs.json"
    assert stored.stat().st_mode & 0o077 == 0  # the password is in it: readable by the broker's user only
    assert b"store-pw" not in stored.read_bytes()  # and encrypted (password.encoder.secret)
    broker.process.stop()
    broker.process.start()
    assert served_serial(broker.ssl_port, broker.ca.path) == serial_of(issued)
