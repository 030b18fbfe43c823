"""SASL on SASL_PLAINTEXT and SASL_SSL listeners: PLAIN and SCRAM-SHA-256/512, configured as Kafka's brokers are.

```yaml
listeners: SASL_PLAINTEXT://127.0.0.1:9094
sasl.enabled.mechanisms: PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config: >-
  org.apache.kafka.common.security.plain.PlainLoginModule required
  username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";
```

The ``user_<name>="<password>"`` entries are the accounts clients may log in with (Kafka's PlainLoginModule);
``username``/``password`` are what the broker itself would use towards other brokers. Both
``sasl.enabled.mechanisms`` and the JAAS line may be given per listener (``listener.name.<l>.`` prefix).
Password checks are constant-time. SCRAM-SHA-256 and SCRAM-SHA-512 (``broker.security.scram``) take their
credentials from the broker's store, not from the JAAS line (``ScramLoginModule required;`` is accepted).
Other mechanisms (GSSAPI, OAUTHBEARER) are refused at start-up, by name.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass

from broker.config_loading import PLACEHOLDER, is_placeholder
from broker.security import SecurityConfigError as SaslConfigError

PLAIN = "PLAIN"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
SUPPORTED_MECHANISMS = (PLAIN, "SCRAM-SHA-256", "SCRAM-SHA-512")
_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class SaslSettings:
    mechanisms: tuple[str, ...]
    plain_users: dict[str, str]  # user -> password

    def check_plain(self, token: bytes) -> str | None:
        """The user a PLAIN token (authzid NUL user NUL password) logs in, or None."""
        parts = token.split(b"\x00")
        if len(parts) != 3:
            return None
        authzid, user_bytes, password_bytes = parts
        try:
            user, password = user_bytes.decode(), password_bytes.decode()
        except UnicodeDecodeError:
            return None
        if authzid and authzid != user_bytes:
            return None  # acting as another user is not allowed (Kafka's rule)
        known = self.plain_users.get(user)
        # Compared even for an unknown user, so the time taken does not tell which users exist.
        matches = hmac.compare_digest(password.encode(), (known if known is not None else "\x00" + password).encode())
        return user if known is not None and matches else None


def jaas_options(text: str, module: str, key: str) -> dict[str, str]:
    """The ``name="value"`` options of a ``<module> required <options>;`` JAAS line."""
    body = text.strip()
    if not body.startswith(module):
        raise SaslConfigError(key, f"expected {module} required ...;")
    body = body[len(module):].strip()
    if not body.startswith("required") or not body.rstrip().endswith(";"):
        raise SaslConfigError(key, f"expected {module} required <options>; (the flag must be "
                                   "required, the line ends with ;)")
    listed = body[len("required"):].rstrip().rstrip(";")
    found = _OPTION.findall(listed)
    leftover = _OPTION.sub("", listed).strip()
    if leftover:
        raise SaslConfigError(key, f"cannot read {leftover!r}: options are name=\"value\"")
    options = {name: value.replace('\\"', '"') for name, value in found}
    for name, value in options.items():
        if is_placeholder(value):
            raise SaslConfigError(key, f"{name} is the sample's placeholder {PLACEHOLDER}: choose a password, e.g. "
                                       "python3 -c 'import secrets; print(secrets.token_urlsafe(24))'")
    return options


def parse_plain_jaas(text: str, key: str) -> dict[str, str]:
    """The ``user_<name>`` accounts of a PlainLoginModule JAAS line."""
    options = jaas_options(text, PLAIN_LOGIN_MODULE, key)
    users = {name[len("user_"):]: value for name, value in options.items() if name.startswith("user_")}
    if not users:
        raise SaslConfigError(key, 'no user_<name>="<password>" entry: nobody could log in')
    return users


def inter_broker_login(listener: str, mechanism: str, lookup: Callable[[str], tuple[str, str | None]]
                       ) -> tuple[str, str]:
    """(username, password) a broker logs in to other brokers with on a SASL listener: the ``username`` and
    ``password`` options of the listener's JAAS line for the mechanism, as in Kafka."""
    key, jaas = lookup(f"{mechanism.lower()}.sasl.jaas.config")
    module = PLAIN_LOGIN_MODULE if mechanism == PLAIN else SCRAM_LOGIN_MODULE
    if not jaas:
        raise SaslConfigError(f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config",
                              f"brokers log in to each other with {mechanism} on {listener}: give the "
                              f'{module} line with username="..." password="..."')
    options = jaas_options(jaas, module, key)
    if not options.get("username") or "password" not in options:
        raise SaslConfigError(key, f'brokers log in to each other with {mechanism} on {listener}: the line needs '
                                   'username="..." and password="..."')
    return options["username"], options["password"]


def listener_sasl(listener: str, lookup: Callable[[str], tuple[str, str | None]]) -> SaslSettings:
    """The SASL settings of one SASL listener (``lookup`` as from :func:`broker.security.tls.listener_lookup`)."""
    key, enabled = lookup("sasl.enabled.mechanisms")
    mechanisms = tuple(m.strip().upper() for m in (enabled or "").split(",") if m.strip())
    if not mechanisms:
        raise SaslConfigError(key, f"listener {listener} uses SASL: set the mechanisms it offers (PLAIN); "
                                   "Kafka's default, GSSAPI, is not available here")
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported:
        raise SaslConfigError(key, f"{', '.join(unsupported)}: not available in this broker "
                                   f"({', '.join(SUPPORTED_MECHANISMS)} are)")
    plain_users: dict[str, str] = {}
    if PLAIN in mechanisms:
        jaas_key, jaas = lookup(f"{PLAIN.lower()}.sasl.jaas.config")
        if not jaas:
            raise SaslConfigError(f"listener.name.{listener.lower()}.plain.sasl.jaas.config",
                                  "is required for PLAIN: the PlainLoginModule line with the user_<name> accounts")
        plain_users = parse_plain_jaas(jaas, jaas_key)
    for mechanism in mechanisms:
        if mechanism == PLAIN:
            continue
        jaas_key, jaas = lookup(f"{mechanism.lower()}.sasl.jaas.config")
        # optional for SCRAM (credentials live in the broker's store); when given, Kafka's module
        if jaas and not jaas.strip().startswith(SCRAM_LOGIN_MODULE):
            raise SaslConfigError(jaas_key, f"expected {SCRAM_LOGIN_MODULE} required;")
    return SaslSettings(mechanisms, plain_users)
