"""TLS for SSL listeners from Kafka's ``ssl.*`` settings, as a ``server.properties`` has them.

Each setting may be given for one listener as ``listener.name.<listener, lower case>.ssl.<...>``, which
wins over the broker-wide ``ssl.<...>`` (Kafka's rule). What is read:

- the broker's key and certificate chain: ``ssl.keystore.type`` PEM with ``ssl.keystore.location`` (one
  file holding the private key and the chain) or the inline ``ssl.keystore.key`` and
  ``ssl.keystore.certificate.chain``; or PKCS12 with ``ssl.keystore.location`` and
  ``ssl.keystore.password``; ``ssl.key.password`` decrypts an encrypted key. JKS (Java's own format) is
  refused with the command that converts it;
- the certificates client certificates are checked against: ``ssl.truststore.type`` PEM with
  ``ssl.truststore.location`` or inline ``ssl.truststore.certificates``, or PKCS12;
- ``ssl.client.auth``: ``required`` (a client without a trusted certificate cannot connect),
  ``requested`` (checked when sent) or ``none``;
- ``ssl.enabled.protocols`` (TLSv1.2, TLSv1.3) and ``ssl.cipher.suites`` (OpenSSL names).

Problems are :class:`TlsConfigError` naming the setting, raised when the broker starts, never at the first
client.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from broker.security import SecurityConfigError as TlsConfigError

_PROTOCOL_VERSIONS = {"TLSV1.2": ssl.TLSVersion.TLSv1_2, "TLSV1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def listener_lookup(listener: str, settings: Mapping[str, object]) -> Callable[[str], tuple[str, str | None]]:
    """``key -> (the name it was found under, value)``: the listener's own setting first, then the broker's."""
    prefix = f"listener.name.{listener.lower()}."

    def lookup(key: str) -> tuple[str, str | None]:
        for name in (prefix + key, key):
            value = settings.get(name)
            if value not in (None, ""):
                return name, str(value)
        return key, None

    return lookup


@contextlib.contextmanager
def _pem_file(text: str) -> Iterator[str]:
    """Inline PEM as a private temporary file, for OpenSSL's file-based loaders; removed after loading."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        yield path
    finally:
        os.unlink(path)


def _pkcs12(location: str, password: str | None, key: str) -> tuple[bytes, bytes, list[bytes]]:
    """(key PEM, certificate PEM, CA certificate PEMs) of a PKCS12 file."""
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        pkcs12,
    )

    try:
        with open(location, "rb") as handle:
            private_key, certificate, extra = pkcs12.load_key_and_certificates(
                handle.read(), password.encode() if password else None)
    except (OSError, ValueError) as exc:
        raise TlsConfigError(key, f"cannot read the PKCS12 store {location}: {exc}") from None
    key_pem = private_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()) if private_key else b""
    cert_pem = certificate.public_bytes(Encoding.PEM) if certificate else b""
    return key_pem, cert_pem, [c.public_bytes(Encoding.PEM) for c in extra or []]


def server_context(lookup: Callable[[str], tuple[str, str | None]]) -> ssl.SSLContext:
    """The SSLContext of one listener; TlsConfigError names the setting that is wrong or missing."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_keystore(context, lookup)
    _load_truststore(context, lookup)
    name, client_auth = lookup("ssl.client.auth")
    mode = _CLIENT_AUTH.get((client_auth or "none").lower())
    if mode is None:
        raise TlsConfigError(name, f"is {client_auth!r}; one of required, requested, none")
    if mode != ssl.CERT_NONE and not _has_truststore(lookup):
        raise TlsConfigError("ssl.truststore.location",
                             f"ssl.client.auth={client_auth} needs a truststore to check client certificates against")
    context.verify_mode = mode
    name, protocols = lookup("ssl.enabled.protocols")
    versions = []
    for protocol in (protocols or "TLSv1.2,TLSv1.3").split(","):
        version = _PROTOCOL_VERSIONS.get(protocol.strip().upper())
        if version is None:
            raise TlsConfigError(name, f"{protocol.strip()!r} is not a protocol this broker serves (TLSv1.2, TLSv1.3)")
        versions.append(version)
    context.minimum_version, context.maximum_version = min(versions), max(versions)
    name, ciphers = lookup("ssl.cipher.suites")
    if ciphers:
        try:
            context.set_ciphers(":".join(c.strip() for c in ciphers.split(",")))
        except ssl.SSLError:
            raise TlsConfigError(name, f"{ciphers!r}: no cipher OpenSSL knows by these names (give OpenSSL "
                                       f"names, e.g. ECDHE-RSA-AES128-GCM-SHA256)") from None
    return context


def _load_keystore(context: ssl.SSLContext, lookup: Callable[[str], tuple[str, str | None]]) -> None:
    type_key, store_type = lookup("ssl.keystore.type")
    location_key, location = lookup("ssl.keystore.location")
    chain_key, chain = lookup("ssl.keystore.certificate.chain")
    key_key, inline_key = lookup("ssl.keystore.key")
    _, key_password = lookup("ssl.key.password")
    if not location and not (chain and inline_key):
        raise TlsConfigError(location_key, "an SSL listener needs the broker's key and certificate: "
                                           "ssl.keystore.location, or ssl.keystore.key and "
                                           f"ssl.keystore.certificate.chain ({chain_key}, {key_key})")
    store_type = (store_type or ("PEM" if chain or inline_key else "JKS")).upper()
    try:
        if store_type == "PEM":
            if location:
                context.load_cert_chain(location, password=key_password)
            else:
                assert chain and inline_key  # without a location both are given (checked above)
                with _pem_file(chain) as chain_path, _pem_file(inline_key) as key_path:
                    context.load_cert_chain(chain_path, key_path, password=key_password)
        elif store_type == "PKCS12":
            if not location:
                raise TlsConfigError(location_key, "a PKCS12 keystore needs its location")
            _, store_password = lookup("ssl.keystore.password")
            key_pem, cert_pem, extra = _pkcs12(location, store_password, location_key)
            with _pem_file((cert_pem + b"".join(extra)).decode()) as chain_path, \
                    _pem_file(key_pem.decode()) as key_path:
                context.load_cert_chain(chain_path, key_path)
        elif store_type == "JKS":
            raise TlsConfigError(type_key, "JKS keystores are Java's own format; use PEM or PKCS12 (keytool "
                                           "-importkeystore -deststoretype PKCS12 converts one)")
        else:
            raise TlsConfigError(type_key, f"{store_type!r} is not a keystore type (PEM, PKCS12)")
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(location_key if location else chain_key,
                             f"cannot load the broker's key and certificate: {exc}") from None


def _has_truststore(lookup: Callable[[str], tuple[str, str | None]]) -> bool:
    return bool(lookup("ssl.truststore.location")[1] or lookup("ssl.truststore.certificates")[1])


def _load_truststore(context: ssl.SSLContext, lookup: Callable[[str], tuple[str, str | None]]) -> None:
    type_key, store_type = lookup("ssl.truststore.type")
    location_key, location = lookup("ssl.truststore.location")
    inline_key, inline = lookup("ssl.truststore.certificates")
    if not location and not inline:
        return
    store_type = (store_type or ("PEM" if inline else "JKS")).upper()
    try:
        if store_type == "PEM":
            if location:
                context.load_verify_locations(cafile=location)
            else:
                context.load_verify_locations(cadata=inline)
        elif store_type == "PKCS12":
            _, password = lookup("ssl.truststore.password")
            _, cert_pem, extra = _pkcs12(location or "", password, location_key)
            context.load_verify_locations(cadata=(cert_pem + b"".join(extra)).decode())
        elif store_type == "JKS":
            raise TlsConfigError(type_key, "JKS truststores are Java's own format; use PEM or PKCS12")
        else:
            raise TlsConfigError(type_key, f"{store_type!r} is not a truststore type (PEM, PKCS12)")
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(location_key if location else inline_key,
                             f"cannot load the trusted certificates: {exc}") from None


def client_context(lookup: Callable[[str], tuple[str, str | None]], *, check_hostname: bool = True
                   ) -> ssl.SSLContext:
    """The SSLContext a broker connects to other brokers' TLS listener with (replication, transaction
    markers): the listener's truststore checks their certificates, and its keystore is this broker's client
    certificate, as in Kafka. ``check_hostname`` off: ``ssl.endpoint.identification.algorithm`` set empty."""
    if not _has_truststore(lookup):
        raise TlsConfigError("ssl.truststore.location", "brokers connect to each other over TLS on this listener: "
                                                        "they need a truststore to check each other's certificates")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _load_truststore(context, lookup)
    _load_keystore(context, lookup)
    context.check_hostname = check_hostname
    return context


class HandshakeError(TlsConfigError):
    """Stores that would not let a broker on the running ones and one on the new ones complete a handshake."""


def check_handshake(before: Callable[[str], tuple[str, str | None]],
                    after: Callable[[str], tuple[str, str | None]]) -> None:
    """Kafka's check before the listener brokers reach each other on takes new stores (SslFactory's engine
    validation): a handshake in memory between a server on the running stores and a client on the new ones,
    then the other way round, so that during a rolling rotation brokers still on the old certificate and
    those on the new one keep trusting each other. Without a truststore on either side there is nothing to
    check a certificate against (Kafka's would use the JVM's default trust). HandshakeError says why one
    failed."""
    if not (_has_truststore(before) and _has_truststore(after)):
        return
    for server, client in ((before, after), (after, before)):
        _handshake(server_context(server), client_context(client, check_hostname=False))


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> None:
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    ends = [client.wrap_bio(to_client, to_server, server_side=False), server.wrap_bio(to_server, to_client,
                                                                                      server_side=True)]
    # a TLS 1.3 handshake with a client certificate takes three flights; a few more rounds cannot hurt
    for _ in range(8):
        for end in list(ends):
            try:
                end.do_handshake()
            except ssl.SSLWantReadError:
                continue
            except ssl.SSLError as exc:
                raise HandshakeError("ssl.keystore.location", exc.reason or str(exc)) from None
            ends.remove(end)
        if not ends:
            return
    raise HandshakeError("ssl.keystore.location", "the handshake did not complete")


# Java's numbering of the names in a subjectAltName (X509Certificate.getSubjectAlternativeNames)
_SAN_TYPES = {"RFC822Name": 1, "DNSName": 2, "UniformResourceIdentifier": 6, "IPAddress": 7, "RegisteredID": 8}
# the alias Kafka gives the one entry of a PEM keystore
_PEM_ALIAS = "kafka"


def keystore_certificate(lookup: Callable[[str], tuple[str, str | None]]) -> Any:
    """The broker's own certificate (the chain's first) as ``cryptography`` reads it; None without a keystore."""
    from cryptography import x509

    _, store_type = lookup("ssl.keystore.type")
    location_key, location = lookup("ssl.keystore.location")
    _, chain = lookup("ssl.keystore.certificate.chain")
    try:
        if (store_type or "").upper() == "PKCS12" and location:
            _, store_password = lookup("ssl.keystore.password")
            data = _pkcs12(location, store_password, location_key)[1]
        elif location:
            with open(location, "rb") as handle:
                data = handle.read()
        elif chain:
            data = chain.encode()
        else:
            return None
        return x509.load_pem_x509_certificates(data)[0]
    except (OSError, ValueError) as exc:
        raise TlsConfigError(location_key, f"cannot read the broker's certificate: {exc}") from None


def _alt_names(certificate: Any) -> set[tuple[int, str]]:
    from cryptography import x509

    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {(_SAN_TYPES.get(type(name).__name__, 0), str(name.value)) for name in names}


def _java_list(names: set[tuple[int, str]]) -> str:
    return "[" + ", ".join(f"[{kind}, {value}]" for kind, value in sorted(names)) + "]"


def check_certificate_change(before: Any, wanted: Callable[[str], tuple[str, str | None]]) -> None:
    """Kafka's rule on a keystore replaced at run time (SslFactory): unless ``ssl.allow.dn.changes`` is true,
    the new certificate has the running one's subject; unless ``ssl.allow.san.changes``, it keeps every
    subject alternative name. Clients that check the broker's name, and ACLs on other brokers' principal,
    would otherwise stop working with the rotation. ``before``: the running certificate (keystore_certificate)."""
    after = keystore_certificate(wanted)
    if before is None or after is None:
        return
    key = wanted("ssl.keystore.location")[0]
    if (wanted("ssl.allow.dn.changes")[1] or "false").lower() != "true":
        old_dn, new_dn = before.subject.rfc4514_string(), after.subject.rfc4514_string()
        if before.subject != after.subject and old_dn.lower() != new_dn.lower():
            raise TlsConfigError(key, f"Keystore DistinguishedName does not match:  existing={{alias={_PEM_ALIAS}, "
                                      f"DN={old_dn}}}, new={{alias={_PEM_ALIAS}, DN={new_dn}}}")
    if (wanted("ssl.allow.san.changes")[1] or "false").lower() != "true":
        old_names, new_names = _alt_names(before), _alt_names(after)
        if not old_names <= new_names:
            raise TlsConfigError(key, f"Keystore SubjectAltNames do not match:  existing={{alias={_PEM_ALIAS}, "
                                      f"SAN={_java_list(old_names)}}}, new={{alias={_PEM_ALIAS}, "
                                      f"SAN={_java_list(new_names)}}}")
