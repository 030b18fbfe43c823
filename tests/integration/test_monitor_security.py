"""The monitor as a client of a secured cluster: `burrowpy serve` with Burrow's client-profile, tls and sasl
sections, reading our broker over SASL_SSL (PLAIN, SCRAM-SHA-512) and over TLS with a client certificate the
broker requires, and Apache Kafka 4.4 over SASL_SSL with SCRAM-SHA-256 and over mTLS.
Groups, lags and statuses arrive as over PLAINTEXT."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from burrow_support import MonitorSettings, SecuredMonitor
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from harness import BrokerProcess, free_port, secret_file, wait_until
from tls_certs import CertificateAuthority

pytestmark = pytest.mark.integration

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="burrow" '
        'password="burrow-secret" user_burrow="burrow-secret";')


class SecuredCluster:
    def __init__(self, process: BrokerProcess, ssl_port: int, sasl_ssl_port: int, ca: CertificateAuthority,
                 client_key: Path, client_cert: Path) -> None:
        self.process, self.ssl_port, self.sasl_ssl_port = process, ssl_port, sasl_ssl_port
        self.ca, self.client_key, self.client_cert = ca, client_key, client_cert


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[SecuredCluster]:
    directory = tmp_path_factory.mktemp("secured")
    ca = CertificateAuthority(directory / "certs")
    server, client = ca.issue("broker"), ca.issue("monitor", client=True)
    plain, tls, sasl_ssl = free_port(), free_port(), free_port()
    process = BrokerProcess(directory / "data", port=plain, extra_config={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls},SASL_SSL://127.0.0.1:{sasl_ssl}",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.store),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.path),
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512", "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "group.initial.rebalance.delay.ms": 0,
    }, args=("--add-scram", "SCRAM-SHA-512=[name=burrow,password-file="
                            f"{secret_file(directory, 'burrow.password', 'burrow-scram-secret')}]"))
    process.start()
    yield SecuredCluster(process, tls, sasl_ssl, ca, client.key, client.certificate)
    process.stop()


def group_with_lag(cluster: SecuredCluster) -> tuple[str, str]:
    """A topic with 10 records and a group that committed 4 of them, made over PLAINTEXT."""
    bootstrap = cluster.process.bootstrap
    topic = group = f"secured-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for number in range(10):
        producer.produce(topic, b"%d" % number, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        wait_until(lambda: consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False) or True, 60,
                   interval=0.5, message="a commit")
    finally:
        consumer.close()
    return topic, group


@pytest.mark.parametrize("way", ["SASL_SSL+PLAIN", "SASL_SSL+SCRAM-SHA-512", "mTLS"])
def test_the_monitor_reads_a_secured_cluster(cluster, tmp_path, way):
    topic, group = group_with_lag(cluster)
    if way == "SASL_SSL+PLAIN":
        bootstrap = f"127.0.0.1:{cluster.sasl_ssl_port}"
        tls, sasl = {"cafile": str(cluster.ca.path)}, {"username": "burrow", "password": "burrow-secret",
                                                        "mechanism": "PLAIN"}
    elif way == "SASL_SSL+SCRAM-SHA-512":
        bootstrap = f"127.0.0.1:{cluster.sasl_ssl_port}"
        tls, sasl = {"cafile": str(cluster.ca.path)}, {"username": "burrow", "password": "burrow-scram-secret",
                                                        "mechanism": "SCRAM-SHA-512"}
    else:
        bootstrap = f"127.0.0.1:{cluster.ssl_port}"
        tls, sasl = {"cafile": str(cluster.ca.path), "certfile": str(cluster.client_cert),
                     "keyfile": str(cluster.client_key)}, None
    settings = MonitorSettings(bootstrap, intervals=4, offset_refresh=1, topic_refresh=1, expire_cache=0)
    with SecuredMonitor(tmp_path / "monitor", settings, tls, sasl) as monitor:
        # the record timestamps for lag in seconds are read over the same secured connections
        monitor.assert_lag_seen(group, topic, 4, 6, f"{group} read over {way}")


@pytest.fixture(scope="module")
def secured_kafka(tmp_path_factory):
    """Apache Kafka 4.4 with a SASL_SSL listener (SCRAM-SHA-256, its user made when the storage is formatted)
    and an SSL listener requiring client certificates, beside the PLAINTEXT one the fixture checks."""
    from kafka_harness import KafkaServer

    directory = tmp_path_factory.mktemp("secured-kafka")
    ca = CertificateAuthority(directory / "certs")
    server, client = ca.issue("kafka"), ca.issue("monitor", client=True)
    sasl_ssl, tls = free_port(), free_port()
    kafka = KafkaServer(directory / "node", config={
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.store),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.path),
        "listener.name.ssl.ssl.client.auth": "required",
    }, format_args=["--add-scram", "SCRAM-SHA-256=[name=burrow,password=burrow-secret]"])
    # the fixture's own listeners and ports, and the two secured ones
    kafka.extra_config["listeners"] = (f"PLAINTEXT://127.0.0.1:{kafka.port},CONTROLLER://127.0.0.1:"
                                       f"{kafka.controller_port},SASL_SSL://127.0.0.1:{sasl_ssl},SSL://127.0.0.1:{tls}")
    kafka.extra_config["advertised.listeners"] = (f"PLAINTEXT://127.0.0.1:{kafka.port},SASL_SSL://127.0.0.1:"
                                                  f"{sasl_ssl},SSL://127.0.0.1:{tls}")
    kafka.start()
    yield SecuredCluster(kafka, tls, sasl_ssl, ca, client.key, client.certificate)
    kafka.stop()


@pytest.mark.parametrize("way", ["SASL_SSL-SCRAM", "mTLS"])
def test_the_monitor_reads_a_secured_apache_kafka(secured_kafka, tmp_path, way):
    topic, group = group_with_lag(secured_kafka)
    if way == "mTLS":
        bootstrap = f"127.0.0.1:{secured_kafka.ssl_port}"
        tls, sasl = {"cafile": str(secured_kafka.ca.path), "certfile": str(secured_kafka.client_cert),
                     "keyfile": str(secured_kafka.client_key)}, None
    else:
        bootstrap = f"127.0.0.1:{secured_kafka.sasl_ssl_port}"
        tls, sasl = {"cafile": str(secured_kafka.ca.path)}, {"username": "burrow", "password": "burrow-secret",
                                                              "mechanism": "SCRAM-SHA-256"}
    settings = MonitorSettings(bootstrap, intervals=4, offset_refresh=1, topic_refresh=1, expire_cache=0)
    with SecuredMonitor(tmp_path / "monitor", settings, tls, sasl) as monitor:
        monitor.assert_lag_seen(group, topic, 4, 6, f"{group} read from Kafka over {way}", timeout=90,
                                lag_seconds=False)
