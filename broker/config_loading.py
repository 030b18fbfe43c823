"""Config files as both the broker and the monitor read them: a YAML (or TOML) document into sections read
through typed getters, errors that name the file and the key path, and the sample's placeholder secret.

The monitor's whole config (:mod:`burrowpy.config`) and the broker's (:mod:`broker.config`) are built on this;
it sits beside the codec, at the bottom of the broker's layers, so that neither side imports the other for it.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# What the sample configs hold where a secret or a password goes. It is refused wherever it is found, so that
# a sample started unchanged fails with directions instead of running with a password everyone can read.
PLACEHOLDER = "CHANGE-ME"


def is_placeholder(value: str) -> bool:
    return value.strip().upper().startswith(PLACEHOLDER)


_REQUIRED: Any = object()


class ConfigError(Exception):
    def __init__(self, file: str, path: str, message: str) -> None:
        self.file = file
        self.path = path
        self.message = message
        where = f"{file}: {path}" if path else file
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class EnvOverrides:
    """Burrow's environment overrides: ``PREFIX_KIND_NAME_KEY`` wins over the file for a key a module reads."""

    prefix: str
    environ: Mapping[str, str]

    def variable(self, path: str, key: str) -> str:
        return f"{self.prefix}.{path}.{key}".upper().replace(".", "_").replace("-", "_")

    def lookup(self, path: str, key: str) -> str | None:
        # An empty variable counts as unset, as in viper.
        return self.environ.get(self.variable(path, key)) or None


@dataclass
class Section:
    """One block of the config (``notifier.default``), read through getters that validate types."""

    file: str
    path: str
    data: dict[str, Any] = field(default_factory=dict)
    env: EnvOverrides | None = None

    def _override(self, key: str) -> str | None:
        return self.env.lookup(self.path, key) if self.env is not None else None

    def error(self, key: str | None, message: str) -> ConfigError:
        if key and self._override(key) is not None:
            message = f"{message} (from environment variable {self.env.variable(self.path, key)})"
        return ConfigError(self.file, f"{self.path}.{key}" if key else self.path, message)

    def has(self, key: str) -> bool:
        return key in self.data or self._override(key) is not None

    def _raw(self, key: str, default: Any) -> Any:
        override = self._override(key)
        if override is not None:
            return override
        if key in self.data and self.data[key] is not None:
            return self.data[key]
        if default is _REQUIRED:
            raise self.error(key, "is required")
        return default

    def get_str(self, key: str, default: Any = _REQUIRED) -> str:
        value = self._raw(key, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.error(key, f"expected a string, got {type(value).__name__}")
        return str(value)

    def get_int(self, key: str, default: Any = _REQUIRED, *, minimum: int | None = None) -> int:
        value = self._raw(key, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
                value = int(value)
            else:
                raise self.error(key, f"expected an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be at least {minimum}, got {value}")
        return value

    def get_float(self, key: str, default: Any = _REQUIRED) -> float:
        value = self._raw(key, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            try:
                return float(value)
            except (TypeError, ValueError):
                raise self.error(key, f"expected a number, got {value!r}") from None
        return float(value)

    def get_bool(self, key: str, default: Any = _REQUIRED) -> bool:
        value = self._raw(key, default)
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        raise self.error(key, f"expected true or false, got {value!r}")

    def get_list(self, key: str, default: Any = _REQUIRED) -> list[str]:
        """A list of strings; a single comma-separated string is accepted too (Burrow does that for `to`)."""
        value = self._raw(key, default)
        if value is default:
            return value
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
            raise self.error(key, f"expected a list of strings, got {value!r}")
        return [str(v) for v in value]

    def get_map(self, key: str, default: Any = _REQUIRED) -> dict[str, str]:
        value = self._raw(key, default)
        if value is default:
            return value
        if not isinstance(value, dict):
            raise self.error(key, f"expected a mapping, got {value!r}")
        return {str(k): str(v) for k, v in value.items()}

    def get_regex(self, key: str, default: Any = None) -> re.Pattern[str] | None:
        value = self._raw(key, default)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise self.error(key, f"expected a regular expression string, got {value!r}")
        try:
            return re.compile(value)
        except re.error as exc:
            raise self.error(key, f"bad regular expression {value!r}: {exc}") from None

    def get_hostports(self, key: str, default: Any = _REQUIRED) -> list[str]:
        servers = self.get_list(key, default)
        if servers is default:
            return servers
        for server in servers:
            host, sep, port = server.rpartition(":")
            if not sep or not port.isdigit() or not 0 < int(port) < 65536:
                raise self.error(key, f"{server!r} is not host:port")
        return servers

    def check_keys(self, known: Iterable[str]) -> None:
        """Reject keys a module does not know: a typo must not be silently ignored."""
        allowed = set(known)
        for key in self.data:
            if key not in allowed:
                raise self.error(key, f"unknown key (known keys: {', '.join(sorted(allowed))})")


def load_document(path: str | Path) -> dict[str, Any]:
    """Parse a YAML or TOML file into a plain mapping; errors name the file."""
    path = Path(path)
    name = str(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(name, "", f"cannot read: {exc.strerror or exc}") from None
    try:
        doc = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(name, "", f"cannot parse: {exc}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(name, "", "the top level must be a mapping of sections")
    return doc


_HOSTNAME_LABEL = r"[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
_HOSTNAME = re.compile(rf"^{_HOSTNAME_LABEL}(\.{_HOSTNAME_LABEL})*$|^{_HOSTNAME_LABEL}_{_HOSTNAME_LABEL}$")


def valid_listen_address(address: str) -> bool:
    """host:port with a blank host allowed (Burrow's ``:8000``); IPv6 hosts in brackets."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        return False
    if host == "":
        return True
    if host.startswith("[") and host.endswith("]"):
        return ":" in host
    if ":" in host:
        return False
    if all(part.isdigit() for part in host.split(".")):
        parts = host.split(".")
        return len(parts) == 4 and all(int(part) < 256 for part in parts)
    return bool(_HOSTNAME.match(host))
