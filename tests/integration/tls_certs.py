"""Test certificates, made when a test runs (no private key is checked in): a CA, and server and client
certificates it signs, written as PEM files the way Kafka's PEM stores take them."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Issued:
    key: Path  # the private key alone (PEM, unencrypted)
    certificate: Path  # the certificate followed by the CA's (the chain)
    store: Path  # key and chain in one file: a Kafka PEM keystore (ssl.keystore.location)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _host_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class CertificateAuthority:
    def __init__(self, directory: Path, name: str = "burrowpy test CA") -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self._certificate = (
            x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
            .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256()))
        self.path = self.directory / "ca.pem"  # what a truststore holds
        self.path.write_bytes(self.pem)

    @property
    def pem(self) -> bytes:
        return self._certificate.public_bytes(serialization.Encoding.PEM)

    def issue(self, common_name: str, *, client: bool = False, stem: str | None = None,
              hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> Issued:
        """A certificate for ``hosts`` (a server) or for a client, signed by this CA, in files named after
        ``stem`` (a renewed certificate beside the one it replaces), else after the name."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(self._certificate.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client
                                                  else ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
        if not client:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [_host_name(host) for host in hosts]), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        chain = certificate.public_bytes(serialization.Encoding.PEM) + self.pem
        stem = stem or common_name
        paths = Issued(self.directory / f"{stem}.key", self.directory / f"{stem}.crt", self.directory / f"{stem}.pem")
        paths.key.write_bytes(_key_pem(key))
        paths.certificate.write_bytes(chain)
        paths.store.write_bytes(_key_pem(key) + chain)
        for path in (paths.key, paths.store):
            path.chmod(0o600)
        return paths


def served_serial(port: int, ca: Path) -> int:
    """The serial number of the certificate a new TLS connection to 127.0.0.1:``port`` is handed, checked
    against the CA certificates in ``ca``."""
    trusting = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            trusting.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def serial_of(issued: Issued) -> int:
    return x509.load_pem_x509_certificate(issued.certificate.read_bytes()).serial_number
