"""Dynamic password configs kept encrypted where they are stored (KIP-226's password encoder): a broker's
``password.encoder.secret`` derives the key, so the dynamic-configs file and the cluster's metadata journal
hold no password in the clear.

Kafka's settings keep their names (``password.encoder.secret``, ``.old.secret``, ``.keyfactory.algorithm``,
``.cipher.algorithm``, ``.key.length``, ``.iterations``), but the cipher is an authenticated one: AES-GCM
by default (``AES/GCM/NoPadding``), or ChaCha20-Poly1305. Kafka's default, AES/CBC/PKCS5Padding, is refused:
without authentication a stored value changed on disk, or decoded with the wrong secret, would come back as
garbage instead of being refused. Each value names the parameters it was encoded with (as Kafka's do), so a
change of settings still decodes what was stored before; the config's name is bound to its value as
associated data, so a stored value cannot be moved to another config.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Mapping
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

from broker.security import SecurityConfigError

SECRET = "password.encoder.secret"
OLD_SECRET = "password.encoder.old.secret"
KEY_FACTORY = "password.encoder.keyfactory.algorithm"
CIPHER = "password.encoder.cipher.algorithm"
KEY_LENGTH = "password.encoder.key.length"
ITERATIONS = "password.encoder.iterations"

# name -> (kind, default), as broker.config's BROKER_KEYS has them
ENCODER_KEYS: dict[str, tuple[str, Any]] = {
    SECRET: ("str", ""),
    OLD_SECRET: ("str", ""),
    KEY_FACTORY: ("str", "PBKDF2WithHmacSHA512"),
    CIPHER: ("str", "AES/GCM/NoPadding"),
    KEY_LENGTH: ("int", 128),
    ITERATIONS: ("int", 4096),
}
SECRET_KEYS = (SECRET, OLD_SECRET)

_KEY_FACTORIES: dict[str, Callable[[], hashes.HashAlgorithm]] = {
    "PBKDF2WithHmacSHA512": hashes.SHA512, "PBKDF2WithHmacSHA256": hashes.SHA256, "PBKDF2WithHmacSHA1": hashes.SHA1}
# cipher -> (AEAD, key lengths in bits it takes)
_CIPHERS: dict[str, tuple[Any, tuple[int, ...]]] = {
    "AES/GCM/NoPadding": (AESGCM, (128, 192, 256)),
    "ChaCha20-Poly1305": (ChaCha20Poly1305, (256,)),
}
_NONCE_BYTES = 12
_SALT_BYTES = 16
_MIN_ITERATIONS = 1024  # Kafka's least

# Kafka 4.4's dynamic configs of type PASSWORD; a listener's own (listener.name.<l>.ssl.keystore.password,
# listener.name.<l>.plain.sasl.jaas.config) are passwords too, as Kafka matches them by their ending.
PASSWORD_CONFIGS = ("sasl.jaas.config", "ssl.key.password", "ssl.keystore.certificate.chain", "ssl.keystore.key",
                    "ssl.keystore.password", "ssl.truststore.certificates", "ssl.truststore.password")

_MARK = "encryptedPassword:"


def is_password_config(name: str) -> bool:
    return name.endswith(PASSWORD_CONFIGS)


def is_encoded(stored: str) -> bool:
    """Whether ``stored`` is a value this encoder wrote (else a password kept in the clear by an older broker)."""
    return _MARK in stored


class PasswordDecodeError(ValueError):
    """A stored password that does not decode with this secret (another secret, a changed value)."""


class PasswordEncoder:
    """Encrypts and decrypts dynamic password configs with a key derived from a secret. One key (one salt)
    serves every value it encodes, each value with its own random nonce, so encoding costs no derivation;
    keys of values stored under other salts are derived once and kept."""

    def __init__(self, secret: str, *, key_factory: str, cipher: str, key_length: int, iterations: int) -> None:
        self._secret = secret.encode()
        self._params = {"keyFactoryAlgorithm": key_factory, "cipherAlgorithm": cipher,
                        "keyLength": str(key_length), "iterations": str(iterations)}
        self._salt = os.urandom(_SALT_BYTES)
        self._keys: dict[tuple[str, ...], bytes] = {}
        self._aead({**self._params, "salt": _b64(self._salt)})  # derived at start, not in a request's time

    def encode(self, name: str, password: str) -> str:
        fields = {**self._params, "salt": _b64(self._salt), "nonce": _b64(os.urandom(_NONCE_BYTES))}
        sealed = self._aead(fields).encrypt(_unb64(fields["nonce"]), password.encode(), _bound(name, fields))
        return ",".join(f"{key}:{value}" for key, value in {**fields, "encryptedPassword": _b64(sealed)}.items())

    def decode(self, name: str, stored: str) -> str:
        try:
            fields = dict(item.split(":", 1) for item in stored.split(","))
            sealed, nonce = _unb64(fields.pop("encryptedPassword")), _unb64(fields["nonce"])
            return self._aead(fields).decrypt(nonce, sealed, _bound(name, fields)).decode()
        except (InvalidTag, KeyError, ValueError, SecurityConfigError) as exc:
            raise PasswordDecodeError(f"{name} does not decode with this secret") from exc

    def _aead(self, fields: Mapping[str, str]) -> Any:
        cipher, key_factory = fields["cipherAlgorithm"], fields["keyFactoryAlgorithm"]
        key_length, iterations = int(fields["keyLength"]), int(fields["iterations"])
        check_parameters(key_factory, cipher, key_length, iterations)
        which = (key_factory, str(key_length), str(iterations), fields["salt"])
        key = self._keys.get(which)
        if key is None:
            key = PBKDF2HMAC(_KEY_FACTORIES[key_factory](), key_length // 8, _unb64(fields["salt"]),
                             iterations).derive(self._secret)
            self._keys[which] = key
        return _CIPHERS[cipher][0](key)


def check_parameters(key_factory: str, cipher: str, key_length: int, iterations: int) -> None:
    """SecurityConfigError naming the encoder setting that cannot be used."""
    if key_factory not in _KEY_FACTORIES:
        raise SecurityConfigError(KEY_FACTORY, f"{key_factory!r} is not available: one of "
                                               f"{', '.join(_KEY_FACTORIES)}")
    if cipher not in _CIPHERS:
        raise SecurityConfigError(CIPHER, f"{cipher!r} is not available: one of {', '.join(_CIPHERS)} (authenticated "
                                          "ciphers only, so that a stored password changed or read with the wrong "
                                          "secret is refused rather than decoded to garbage)")
    if key_length not in _CIPHERS[cipher][1]:
        raise SecurityConfigError(KEY_LENGTH, f"{cipher} takes keys of "
                                              f"{' or '.join(map(str, _CIPHERS[cipher][1]))} bits, not {key_length}")
    if iterations < _MIN_ITERATIONS:
        raise SecurityConfigError(ITERATIONS, f"must be at least {_MIN_ITERATIONS}")


def password_encoders(settings: Mapping[str, Any]) -> tuple[PasswordEncoder | None, PasswordEncoder | None]:
    """The encoder of ``password.encoder.secret`` and the decoder of ``password.encoder.old.secret`` (each None
    when its secret is not set), from a broker's settings; SecurityConfigError names a setting at fault."""
    key_factory, cipher = str(settings[KEY_FACTORY]), str(settings[CIPHER])
    key_length, iterations = int(settings[KEY_LENGTH]), int(settings[ITERATIONS])
    check_parameters(key_factory, cipher, key_length, iterations)
    if settings[OLD_SECRET] and not settings[SECRET]:
        raise SecurityConfigError(OLD_SECRET, f"is what passwords were encoded with before {SECRET}: it needs "
                                              f"{SECRET} set too")

    def encoder(secret: str) -> PasswordEncoder | None:
        return PasswordEncoder(secret, key_factory=key_factory, cipher=cipher, key_length=key_length,
                               iterations=iterations) if secret else None

    return encoder(str(settings[SECRET] or "")), encoder(str(settings[OLD_SECRET] or ""))


def _bound(name: str, fields: Mapping[str, str]) -> bytes:
    """What a value is bound to besides its key: its config's name and its encoding parameters."""
    return "\n".join([name, *(f"{key}:{fields[key]}" for key in sorted(fields) if key != "nonce")]).encode()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)
