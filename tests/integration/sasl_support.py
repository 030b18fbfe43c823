"""A broker with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners for the SASL tests, and client settings
for it."""

from __future__ import annotations

from pathlib import Path

from harness import BrokerProcess, free_port
from tls_certs import CertificateAuthority


class SaslBroker:
    def __init__(self, process: BrokerProcess, sasl_port: int, sasl_ssl_port: int, ca: CertificateAuthority,
                 mechanism: str) -> None:
        self.process, self.sasl_port, self.sasl_ssl_port, self.ca = process, sasl_port, sasl_ssl_port, ca
        self.mechanism = mechanism

    def librdkafka(self, mechanism: str | None = None, user: str = "alice", password: str = "alice-secret",
                   tls: bool = False) -> dict[str, str]:
        settings = {"bootstrap.servers": f"127.0.0.1:{self.sasl_ssl_port if tls else self.sasl_port}",
                    "security.protocol": "sasl_ssl" if tls else "sasl_plaintext",
                    "sasl.mechanism": mechanism or self.mechanism, "sasl.username": user, "sasl.password": password}
        if tls:
            settings["ssl.ca.location"] = str(self.ca.path)
        return settings


def start_sasl_broker(directory: Path, mechanism: str, config: dict, args: tuple[str, ...] = (),
                      env: dict[str, str] | None = None) -> SaslBroker:
    """A started broker whose SASL listeners take ``config`` (mechanisms, JAAS lines); stop its ``process``."""
    ca = CertificateAuthority(directory / "certs")
    server = ca.issue("broker")
    plain, sasl, sasl_ssl = free_port(), free_port(), free_port()
    process = BrokerProcess(directory / "data", port=plain, extra_config={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},"
                     f"SASL_SSL://127.0.0.1:{sasl_ssl}",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.store), **config,
    }, args=args, env=env)
    process.start()
    return SaslBroker(process, sasl, sasl_ssl, ca, mechanism)
