"""Fixtures shared by the unit tests."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import NamedTuple

import pytest


class SelfSigned(NamedTuple):
    store: Path  # key + certificate in one PEM file (a Kafka PEM keystore)
    certificate: Path  # the certificate alone (also its own CA)
    key: Path


@pytest.fixture
def self_signed(tmp_path: Path) -> SelfSigned:
    """A self-signed certificate for 127.0.0.1, made here (no private key is checked in)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "broker")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                  critical=False)
                   .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    cert_pem = certificate.public_bytes(serialization.Encoding.PEM)
    made = SelfSigned(tmp_path / "self-signed.pem", tmp_path / "self-signed.crt", tmp_path / "self-signed.key")
    made.store.write_bytes(key_pem + cert_pem)
    made.certificate.write_bytes(cert_pem)
    made.key.write_bytes(key_pem)
    return made
