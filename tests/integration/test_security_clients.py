"""aiokafka and kafkajs on every secured listener: SSL with and without a client certificate,
SASL_PLAINTEXT and SASL_SSL with PLAIN and with SCRAM-SHA-512. Each client produces, reads the records back
in a consumer group and commits; the commit is read back. (librdkafka, kcat, kafka-python and the Java
client are run over the same protocols in test_broker_tls.py, test_broker_sasl.py and test_broker_scram.py.)"""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import ROOT, BrokerProcess, free_port, secret_file
from tls_certs import CertificateAuthority

pytestmark = pytest.mark.integration

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
# (listener, TLS client certificate, SASL mechanism)
CASES = {
    "SSL": ("SSL", False, None),
    "SSL+client-certificate": ("SSL", True, None),
    "SASL_PLAINTEXT+PLAIN": ("SASL_PLAINTEXT", False, "PLAIN"),
    "SASL_PLAINTEXT+SCRAM-SHA-512": ("SASL_PLAINTEXT", False, "SCRAM-SHA-512"),
    "SASL_SSL+PLAIN": ("SASL_SSL", False, "PLAIN"),
    "SASL_SSL+SCRAM-SHA-512": ("SASL_SSL", False, "SCRAM-SHA-512"),
}


class SecuredListeners:
    def __init__(self, directory: Path) -> None:
        self.ca = CertificateAuthority(directory / "certs")
        server = self.ca.issue("broker")
        self.client_certificate = self.ca.issue("aiokafka-and-kafkajs", client=True)
        plain = free_port()
        self.ports = {"SSL": free_port(), "SASL_PLAINTEXT": free_port(), "SASL_SSL": free_port()}
        self.process = BrokerProcess(directory / "data", port=plain, extra_config={
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},"
                         + ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.ports.items()),
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.store),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca.path),
            "listener.name.ssl.ssl.client.auth": "requested",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
            "group.initial.rebalance.delay.ms": 0, "num.partitions": 1,
        }, args=("--add-scram", "SCRAM-SHA-512=[name=alice,password-file="
                                f"{secret_file(directory, 'alice.password', 'alice-secret')}]"))


@pytest.fixture(scope="module")
def listeners(tmp_path_factory) -> Iterator[SecuredListeners]:
    secured = SecuredListeners(tmp_path_factory.mktemp("secured-listeners"))
    secured.process.start()
    yield secured
    secured.process.stop()


def names(case: str) -> tuple[str, str]:
    tag = case.lower().replace("+", "-").replace("_", "-")
    return f"{tag}-{uuid.uuid4().hex[:6]}", f"group-{tag}-{uuid.uuid4().hex[:6]}"


@pytest.mark.parametrize("case", CASES)
def test_aiokafka(listeners, case):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context

    listener, certificate, mechanism = CASES[case]
    topic, group = names(case)
    settings = {"bootstrap_servers": f"127.0.0.1:{listeners.ports[listener]}", "security_protocol": listener}
    if listener != "SASL_PLAINTEXT":
        cert = listeners.client_certificate
        settings["ssl_context"] = create_ssl_context(
            cafile=str(listeners.ca.path), certfile=str(cert.certificate) if certificate else None,
            keyfile=str(cert.key) if certificate else None)
    if mechanism:
        settings.update(sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password="alice-secret")

    async def run() -> tuple[list[bytes], int | None]:
        producer = AIOKafkaProducer(**settings)
        await producer.start()
        try:
            for number in range(3):
                await producer.send_and_wait(topic, b"secure %d" % number)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                                    **settings)
        await consumer.start()
        values: list[bytes] = []
        try:
            async with asyncio.timeout(60):
                while len(values) < 3:
                    batch = await consumer.getmany(timeout_ms=500)
                    values += [record.value for records in batch.values() for record in records]
            await consumer.commit()
            committed = await consumer.committed(TopicPartition(topic, 0))
        finally:
            await consumer.stop()
        return values, committed

    assert asyncio.run(run()) == ([b"secure 0", b"secure 1", b"secure 2"], 3)


@pytest.mark.parametrize("case", CASES)
def test_kafkajs(listeners, case):
    listener, certificate, mechanism = CASES[case]
    topic, group = names(case)
    cert = listeners.client_certificate
    security = {
        "ssl": None if listener == "SASL_PLAINTEXT" else {
            "ca": str(listeners.ca.path), "cert": str(cert.certificate) if certificate else None,
            "key": str(cert.key) if certificate else None},
        "sasl": {"mechanism": mechanism.lower(), "username": "alice", "password": "alice-secret"} if mechanism else None,
    }
    proc = subprocess.run(["node", str(ROOT / "tests/js/secure_roundtrip.js"), f"127.0.0.1:{listeners.ports[listener]}",
                           topic, group, json.dumps(security)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"values": ["secure 0", "secure 1", "secure 2"], "committed": 3}
