"""Configuration: YAML (or Burrow's own TOML) into sections that modules read with typed getters.

The YAML mirrors Burrow's TOML one to one: ``[cluster.local]`` in TOML is ``cluster: {local: {...}}`` in
YAML, with Burrow's key names. Every error names the file and the key path and is raised as
:class:`ConfigError`; the CLI prints it and exits with status 1.

:func:`load_config` reads a whole file. It validates the blocks that belong to no module (general,
logging, zookeeper, history, the client/TLS/SASL/IAM profiles and the HTTP listeners) and the references
between sections; each module validates its own section (``check_keys`` and the getters) when it is built.
Environment variables override keys as in Burrow: ``BURROW_STORAGE_DEFAULT_INTERVALS`` overrides
``storage.default.intervals`` (prefix from ``general.env-var-prefix``; dots and dashes become underscores).
"""

from __future__ import annotations

import math
import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.config_loading import (
    PLACEHOLDER,
    ConfigError,
    EnvOverrides,
    Section,
    is_placeholder,
    load_document,
    valid_listen_address,
)
from burrowpy.httpauth import LOGIN_BURST, LOGIN_REFILL_S, HttpAuthProfile

# Sections that hold named modules (``[kind.NAME]``) and those that are single blocks.
MODULE_KINDS = ("client-profile", "tls", "sasl", "iam", "http-auth", "httpserver", "storage", "evaluator",
                "cluster", "consumer", "notifier")
BLOCK_KINDS = ("general", "logging", "zookeeper", "history", "dashboard", "notifier-lock")

# Kinds whose sections are modules built by a coordinator from their ``class-name``.
COORDINATED_KINDS = ("storage", "evaluator", "cluster", "consumer", "notifier")
# Exactly one of each of these; with none configured, a module named "default" of this class is used.
SINGLETON_DEFAULTS = {"storage": "inmemory", "evaluator": "caching"}
# Burrow 1.2 spelled the group lists differently; Burrow 1.3+ refuses the old names, we translate them.
LEGACY_KEYS = {"group-whitelist": "group-allowlist", "group-blacklist": "group-denylist"}

GENERAL_KEYS = ("pidfile", "stdout-logfile", "access-control-allow-origin", "env-var-prefix")
LOGGING_KEYS = ("filename", "level", "maxsize", "maxbackups", "maxage", "use-localtime", "use-compression")
ZOOKEEPER_KEYS = ("servers", "timeout", "root-path", "tls")
HISTORY_KEYS = ("dir", "roll-interval")
DASHBOARD_KEYS = ("sample-interval", "retention")
CLIENT_PROFILE_KEYS = ("client-id", "kafka-version", "tls", "sasl", "iam", "dial-timeout", "read-timeout")
TLS_KEYS = ("certfile", "keyfile", "cafile", "noverify")
SASL_KEYS = ("username", "password", "handshake-first", "mechanism")
IAM_KEYS = ("region", "role-arn", "profile")
HTTPSERVER_KEYS = ("address", "timeout", "tls", "auth", "login-burst", "login-refill")
DEFAULT_HTTP_ADDRESS = "127.0.0.1:0"
HTTP_AUTH_KEYS = ("readers", "admins", "reader-tokens", "admin-tokens", "open-paths")

LOG_LEVELS = ("debug", "info", "warn", "error", "panic", "fatal")

# Kafka versions Burrow accepts in their short legacy spelling, mapped to the release they stand for.
_LEGACY_KAFKA_VERSIONS = {
    "0.8": (0, 8, 2, 0), "0.8.0": (0, 8, 2, 0), "0.8.1": (0, 8, 2, 1), "0.8.2": (0, 8, 2, 2),
    "0.9": (0, 9, 0, 0), "0.9.0": (0, 9, 0, 0),
    "0.10": (0, 10, 0, 0), "0.10.0": (0, 10, 0, 0), "0.10.1": (0, 10, 1, 0), "0.10.2": (0, 10, 2, 0),
    "0.11": (0, 11, 0, 0), "0.11.0": (0, 11, 0, 0),
}
_ZK_NODE = re.compile(r"^[a-zA-Z0-9_\-][a-zA-Z0-9_\-.]*$")


# --- typed blocks ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TLSProfile:
    name: str
    certfile: str = ""
    keyfile: str = ""
    cafile: str = ""
    noverify: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "noverify": self.noverify, "certfile": self.certfile,
                "keyfile": self.keyfile, "cafile": self.cafile}

    def client_context(self) -> ssl.SSLContext:
        """TLS for connecting to Kafka or ZooKeeper. As in Burrow (sarama), the client certificate is only
        presented when a CA file is set; without one the system roots verify the server."""
        context = ssl.create_default_context(cafile=self.cafile or None)
        if self.cafile and self.certfile and self.keyfile:
            context.load_cert_chain(self.certfile, self.keyfile)
        if self.noverify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def server_context(self) -> ssl.SSLContext:
        """TLS for an HTTP listener: the certificate and key are required (checked at load time)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.certfile, self.keyfile)
        return context


@dataclass(frozen=True)
class SASLProfile:
    name: str
    username: str = ""
    password: str = ""
    handshake_first: bool = False
    mechanism: str = "PLAIN"

    def to_json(self) -> dict[str, Any]:
        # The password is never shown.
        return {"name": self.name, "handshake-first": self.handshake_first, "username": self.username}


@dataclass(frozen=True)
class IAMProfile:
    name: str
    region: str
    role_arn: str = ""
    profile: str = ""


@dataclass(frozen=True)
class ClientProfile:
    """How a cluster or consumer module talks to Kafka (``[client-profile.NAME]``; name "" = the defaults)."""

    name: str = ""
    client_id: str = "burrow-lagchecker"
    kafka_version: str = "2.8.0"
    version: tuple[int, int, int, int] = (2, 8, 0, 0)
    tls: TLSProfile | None = None
    sasl: SASLProfile | None = None
    iam: IAMProfile | None = None
    dial_timeout: int | None = None  # seconds; None = the client library's default
    read_timeout: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "client-id": self.client_id, "kafka-version": self.kafka_version,
                "tls": self.tls.to_json() if self.tls else None,
                "sasl": self.sasl.to_json() if self.sasl else None}


@dataclass(frozen=True)
class GeneralConfig:
    pidfile: str = "burrow.pid"
    stdout_logfile: str = ""
    access_control_allow_origin: str = ""
    env_var_prefix: str = "burrow"

    def to_json(self) -> dict[str, Any]:
        return {"pidfile": self.pidfile, "stdout-logfile": self.stdout_logfile,
                "access-control-allow-origin": self.access_control_allow_origin}


@dataclass(frozen=True)
class LoggingConfig:
    filename: str = ""  # "" = standard output
    level: str = "info"
    maxsize: int = 100  # MB before the file is rotated
    maxbackups: int = 10
    maxage: int = 30  # days a rotated file is kept
    use_localtime: bool = False
    use_compression: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"filename": self.filename, "max-size": self.maxsize, "max-backups": self.maxbackups,
                "max-age": self.maxage, "use-local-time": self.use_localtime,
                "use-compression": self.use_compression, "level": self.level}


@dataclass(frozen=True)
class ZookeeperConfig:
    servers: tuple[str, ...] = ()
    timeout: int = 6  # session timeout, seconds
    root_path: str = "/burrow"
    tls: TLSProfile | None = None

    def to_json(self) -> dict[str, Any]:
        return {"servers": list(self.servers), "timeout": self.timeout, "root-path": self.root_path}


@dataclass(frozen=True)
class HttpListenerConfig:
    name: str
    address: str  # host:port; a blank host listens on every interface (as in Burrow), port 0 a free port
    timeout: int = 300
    tls: TLSProfile | None = None
    auth: HttpAuthProfile | None = None  # None: the API is open, as Burrow's is
    login_burst: int = LOGIN_BURST  # failed logins a user or an address may make at once
    login_refill: float = LOGIN_REFILL_S  # seconds for one more

    @property
    def host(self) -> str:
        return self.address.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.address.rpartition(":")[2])

    def to_json(self) -> dict[str, Any]:
        return {"address": self.address, "tls": self.tls.name if self.tls else "", "timeout": self.timeout}


@dataclass(frozen=True)
class HistoryConfig:
    """Offset-history capture for the Spark pipeline: every broker offset and commit, as Parquet files."""

    dir: str
    roll_interval: int = 3600


@dataclass(frozen=True)
class DashboardConfig:
    """The dashboard's chart history: every group's status sampled every ``sample_interval`` seconds, kept
    for ``retention`` seconds (an evaluation of every group per sample: large fleets may sample less often, or
    turn the history off with 0)."""

    sample_interval: float = 5.0
    retention: float = 3600.0


@dataclass
class Config:
    """A loaded config file: typed blocks, profiles, and the module sections each coordinator builds from."""

    file: str
    general: GeneralConfig = field(default_factory=GeneralConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    zookeeper: ZookeeperConfig = field(default_factory=ZookeeperConfig)
    history: HistoryConfig | None = None
    dashboard: DashboardConfig = field(default_factory=DashboardConfig)
    httpserver: dict[str, HttpListenerConfig] = field(default_factory=dict)
    tls: dict[str, TLSProfile] = field(default_factory=dict)
    sasl: dict[str, SASLProfile] = field(default_factory=dict)
    iam: dict[str, IAMProfile] = field(default_factory=dict)
    http_auth: dict[str, HttpAuthProfile] = field(default_factory=dict)
    client_profiles: dict[str, ClientProfile] = field(default_factory=dict)
    sections: dict[str, dict[str, Section]] = field(default_factory=dict)  # MODULE_KINDS -> name -> Section
    blocks: dict[str, Section] = field(default_factory=dict)  # BLOCK_KINDS present in the file
    warnings: list[str] = field(default_factory=list)  # accepted but deprecated or ignored settings

    def modules(self, kind: str) -> dict[str, Section]:
        """The sections of one module kind (``"cluster"`` -> {"local": Section}), in file order."""
        return self.sections.get(kind, {})

    def section(self, kind: str, name: str) -> Section | None:
        """The raw section ``[kind.name]`` (``"tls", "internal"``), or None when it is not configured."""
        return self.sections.get(kind, {}).get(name)

    def block(self, kind: str) -> Section | None:
        """The raw section of a single block (``"zookeeper"``), or None when the file has none."""
        return self.blocks.get(kind)

    def client_profile(self, name: str) -> ClientProfile:
        """A named client profile; "" is the default profile. Names were checked at load time."""
        if not name:
            return ClientProfile()
        return self.client_profiles[name]

    @property
    def cluster_names(self) -> list[str]:
        return list(self.modules("cluster"))

    @property
    def has_notifiers(self) -> bool:
        return bool(self.modules("notifier"))


# --- loading ---------------------------------------------------------------------------------------


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> Config:
    """Read, validate and type a config file (YAML, or Burrow's TOML when the name ends in .toml)."""
    return parse_config(load_document(path), str(path), os.environ if environ is None else environ)


def parse_config(doc: Mapping[str, Any], file: str, environ: Mapping[str, str] | None = None) -> Config:
    for kind in doc:
        if kind not in MODULE_KINDS and kind not in BLOCK_KINDS:
            known = ", ".join(sorted(MODULE_KINDS + BLOCK_KINDS))
            raise ConfigError(file, str(kind), f"unknown section (known sections: {known})")

    bare_general = _block(doc, "general", file, None)
    prefix = bare_general.get_str("env-var-prefix", "burrow") if bare_general else "burrow"
    env = EnvOverrides(prefix, environ or {})

    config = Config(file=file)
    for kind in BLOCK_KINDS:
        section = _block(doc, kind, file, env)
        if section is not None:
            config.blocks[kind] = section
    named = {kind: _named_sections(doc, kind, file, env) for kind in MODULE_KINDS}

    config.general = _general(config.blocks.get("general"), prefix)
    config.logging = _logging(config.blocks.get("logging"), config.warnings)
    config.tls = {name: _tls(section) for name, section in named["tls"].items()}
    config.sasl = {name: _sasl(section) for name, section in named["sasl"].items()}
    config.iam = {name: _iam(section) for name, section in named["iam"].items()}
    config.client_profiles = {name: _client_profile(section, config) for name, section in
                              named["client-profile"].items()}
    config.zookeeper = _zookeeper(config.blocks.get("zookeeper"), config)
    config.history = _history(config.blocks.get("history"))
    config.dashboard = _dashboard(config.blocks.get("dashboard"))
    config.http_auth = {name: _http_auth(section) for name, section in named["http-auth"].items()}
    config.httpserver = {name: _listener(section, config) for name, section in named["httpserver"].items()}
    if not config.httpserver:
        # As in Burrow, a free port (logged at start) when no listener is configured; unlike Burrow, on the
        # loopback interface only: an API that deletes groups and changes the log level is not offered to the
        # network unless an address says so.
        config.httpserver = {"default": HttpListenerConfig("default", DEFAULT_HTTP_ADDRESS)}

    for kind in MODULE_KINDS:
        sections = named[kind]
        if kind in COORDINATED_KINDS:
            for section in sections.values():
                _translate_legacy_keys(section, config.warnings)
        if kind in SINGLETON_DEFAULTS:
            if len(sections) > 1:
                raise ConfigError(file, kind, f"exactly one {kind} module may be configured, found "
                                              f"{len(sections)}: {', '.join(sections)}")
            if not sections:
                sections = {"default": Section(file, f"{kind}.default", {"class-name": SINGLETON_DEFAULTS[kind]}, env)}
        config.sections[kind] = sections
    _check_references(config)
    return config


def _block(doc: Mapping[str, Any], kind: str, file: str, env: EnvOverrides | None) -> Section | None:
    if kind not in doc:
        return None
    data = doc[kind]
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(file, kind, f"expected a mapping of settings, got {data!r}")
    return Section(file, kind, dict(data), env)


def _named_sections(doc: Mapping[str, Any], kind: str, file: str, env: EnvOverrides) -> dict[str, Section]:
    value = doc.get(kind)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(file, kind, f"expected a mapping of NAME: {{settings}}, got {value!r}")
    sections = {}
    for name, data in value.items():
        path = f"{kind}.{name}"
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(file, path, f"expected a mapping of settings, got {data!r} (modules are "
                                          f"configured as {kind}: {{NAME: {{key: value}}}})")
        sections[str(name)] = Section(file, path, dict(data), env)
    return sections


def _translate_legacy_keys(section: Section, warnings: list[str]) -> None:
    for old, new in LEGACY_KEYS.items():
        if old not in section.data:
            continue
        old_value = section.data.pop(old)
        if section.data.get(new) not in (None, "") and old_value not in (None, ""):
            raise section.error(old, f"conflicts with {new}: set only {new}")
        if section.data.get(new) in (None, ""):
            section.data[new] = old_value
        warnings.append(f"{section.file}: {section.path}.{old} is Burrow's old name for {new}; read as {new}")


def _general(section: Section | None, prefix: str) -> GeneralConfig:
    if section is None:
        return GeneralConfig()
    section.check_keys(GENERAL_KEYS)
    return GeneralConfig(
        pidfile=section.get_str("pidfile", "burrow.pid"),
        stdout_logfile=section.get_str("stdout-logfile", ""),
        access_control_allow_origin=section.get_str("access-control-allow-origin", ""),
        env_var_prefix=prefix,
    )


def _logging(section: Section | None, warnings: list[str]) -> LoggingConfig:
    if section is None:
        return LoggingConfig()
    section.check_keys(LOGGING_KEYS)
    level = section.get_str("level", "info").lower() or "info"
    if level not in LOG_LEVELS:
        # Burrow starts at info on an unknown level; keep its behaviour but say so.
        warnings.append(f"{section.file}: logging.level {level!r} is not one of {', '.join(LOG_LEVELS)}; "
                        f"using info")
        level = "info"
    return LoggingConfig(
        filename=section.get_str("filename", ""),
        level=level,
        maxsize=section.get_int("maxsize", 100, minimum=1),
        maxbackups=section.get_int("maxbackups", 10, minimum=0),
        maxage=section.get_int("maxage", 30, minimum=0),
        use_localtime=section.get_bool("use-localtime", False),
        use_compression=section.get_bool("use-compression", False),
    )


def _tls(section: Section) -> TLSProfile:
    section.check_keys(TLS_KEYS)
    profile = TLSProfile(
        name=section.path.split(".", 1)[1],
        certfile=section.get_str("certfile", ""),
        keyfile=section.get_str("keyfile", ""),
        cafile=section.get_str("cafile", ""),
        noverify=section.get_bool("noverify", False),
    )
    for key in ("certfile", "keyfile", "cafile"):
        path = getattr(profile, key)
        if path and not os.path.isfile(path):
            raise section.error(key, f"file {path!r} does not exist")
    if bool(profile.certfile) != bool(profile.keyfile):
        raise section.error("keyfile" if profile.certfile else "certfile", "certfile and keyfile go together")
    return profile


def _sasl(section: Section) -> SASLProfile:
    section.check_keys(SASL_KEYS)
    mechanism = section.get_str("mechanism", "").upper()
    password = section.get_str("password", "")
    if is_placeholder(password):
        raise section.error("password", f"is the sample's placeholder {PLACEHOLDER}: the password this monitor "
                                        "logs in with (here, or in the environment as the key's variable)")
    return SASLProfile(
        name=section.path.split(".", 1)[1],
        username=section.get_str("username", ""),
        password=password,
        handshake_first=section.get_bool("handshake-first", False),
        # As in Burrow, anything but the two SCRAM mechanisms means PLAIN.
        mechanism=mechanism if mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512") else "PLAIN",
    )


def _iam(section: Section) -> IAMProfile:
    section.check_keys(IAM_KEYS)
    region = section.get_str("region")
    if not region:
        raise section.error("region", "is required")
    return IAMProfile(name=section.path.split(".", 1)[1], region=region,
                      role_arn=section.get_str("role-arn", ""), profile=section.get_str("profile", ""))


def parse_kafka_version(text: str) -> tuple[int, int, int, int] | None:
    """Burrow's accepted Kafka versions: a.b.c for 1.0 and later, 0.a.b.c before, and a few short forms."""
    if text in _LEGACY_KAFKA_VERSIONS:
        return _LEGACY_KAFKA_VERSIONS[text]
    parts = text.split(".")
    if not all(part.isdigit() for part in parts):
        return None
    numbers = [int(part) for part in parts]
    if len(numbers) == 3 and numbers[0] >= 1:
        return (numbers[0], numbers[1], numbers[2], 0)
    if len(numbers) == 4 and numbers[0] == 0:
        return (numbers[0], numbers[1], numbers[2], numbers[3])
    return None


def _reference(section: Section, key: str, known: Mapping[str, Any], what: str) -> Any:
    name = section.get_str(key, "")
    if not name:
        return None
    if name not in known:
        names = ", ".join(sorted(known)) or "none"
        raise section.error(key, f"names {what} {name!r}, which is not configured (configured: {names})")
    return known[name]


def _client_profile(section: Section, config: Config) -> ClientProfile:
    section.check_keys(CLIENT_PROFILE_KEYS)
    kafka_version = section.get_str("kafka-version", "2.8.0")
    version = parse_kafka_version(kafka_version)
    if version is None:
        raise section.error("kafka-version", f"unknown Kafka version {kafka_version!r} (expected a.b.c, "
                                             f"0.a.b.c or a short form such as 0.10.2)")
    tls = _reference(section, "tls", config.tls, "TLS profile")
    iam = _reference(section, "iam", config.iam, "IAM profile")
    if iam is not None and tls is None:
        raise section.error("iam", "AWS IAM authentication needs TLS: set tls to a TLS profile too")
    dial_timeout = section.get_int("dial-timeout", None, minimum=1)
    read_timeout = section.get_int("read-timeout", None, minimum=1)
    return ClientProfile(
        name=section.path.split(".", 1)[1],
        client_id=section.get_str("client-id", "burrow-lagchecker"),
        kafka_version=kafka_version,
        version=version,
        tls=tls,
        sasl=_reference(section, "sasl", config.sasl, "SASL profile"),
        iam=iam,
        dial_timeout=dial_timeout,
        read_timeout=read_timeout,
    )


def valid_zookeeper_path(path: str) -> bool:
    """An absolute znode path below the root (``/burrow``, ``/kafka/cluster``), not in ``/zookeeper``,
    which ZooKeeper reserves for itself. The root alone is refused: paths are built as ``<path>/<name>``."""
    parts = path.split("/")
    return (len(parts) >= 2 and parts[0] == "" and parts[1] != "zookeeper"
            and all(_ZK_NODE.match(node) for node in parts[1:]))


def _zookeeper(section: Section | None, config: Config) -> ZookeeperConfig:
    if section is None:
        return ZookeeperConfig()
    section.check_keys(ZOOKEEPER_KEYS)
    root_path = section.get_str("root-path", "/burrow")
    if not valid_zookeeper_path(root_path):
        raise section.error("root-path", f"{root_path!r} is not a ZooKeeper path such as /burrow "
                                         "(absolute, below the root, not in /zookeeper)")
    tls = _reference(section, "tls", config.tls, "TLS profile")
    if tls is not None and not tls.cafile:
        raise section.error("tls", f"TLS profile {tls.name!r} needs a cafile for ZooKeeper")
    return ZookeeperConfig(
        servers=tuple(section.get_hostports("servers", [])),
        timeout=section.get_int("timeout", 6, minimum=1),
        root_path=root_path,
        tls=tls,
    )


def _history(section: Section | None) -> HistoryConfig | None:
    if section is None:
        return None
    section.check_keys(HISTORY_KEYS)
    return HistoryConfig(dir=section.get_str("dir"), roll_interval=section.get_int("roll-interval", 3600, minimum=1))


def _dashboard(section: Section | None) -> DashboardConfig:
    if section is None:
        return DashboardConfig()
    section.check_keys(DASHBOARD_KEYS)
    interval = section.get_float("sample-interval", DashboardConfig.sample_interval)
    retention = section.get_float("retention", DashboardConfig.retention)
    if interval == 0:  # no chart history: the pages show statuses and figures without their trends
        return DashboardConfig(0.0, retention)
    if interval < 1:
        raise section.error("sample-interval", f"must be at least 1 second (or 0: no chart history), got {interval}")
    if retention < interval:
        raise section.error("retention", f"must be at least the sample interval ({interval} s), got {retention}")
    return DashboardConfig(interval, retention)


def _listener(section: Section, config: Config) -> HttpListenerConfig:
    section.check_keys(HTTPSERVER_KEYS)
    address = section.get_str("address")
    if not valid_listen_address(address):
        raise section.error("address", f"{address!r} is not host:port (a blank host, as in :8000, listens "
                                       f"on every interface)")
    tls = _reference(section, "tls", config.tls, "TLS profile")
    if tls is not None and not (tls.certfile and tls.keyfile):
        raise section.error("tls", f"TLS profile {tls.name!r} needs certfile and keyfile to serve HTTPS")
    refill = section.get_float("login-refill", LOGIN_REFILL_S)
    if not 0 < refill < math.inf:
        raise section.error("login-refill", f"must be a number of seconds above 0, got {refill}")
    return HttpListenerConfig(name=section.path.split(".", 1)[1], address=address,
                              timeout=section.get_int("timeout", 300, minimum=1), tls=tls,
                              auth=_reference(section, "auth", config.http_auth, "http-auth profile"),
                              login_burst=section.get_int("login-burst", LOGIN_BURST, minimum=1), login_refill=refill)


def _http_auth(section: Section) -> HttpAuthProfile:
    section.check_keys(HTTP_AUTH_KEYS)
    try:
        return HttpAuthProfile.from_maps(
            section.path.split(".", 1)[1], section.get_map("readers", {}), section.get_map("admins", {}),
            section.get_list("reader-tokens", []), section.get_list("admin-tokens", []),
            section.get_list("open-paths", list(HttpAuthProfile.open_paths)))
    except ValueError as exc:
        key, _, message = str(exc).partition(": ")
        raise section.error(key, message) from None


def _check_references(config: Config) -> None:
    clusters = config.modules("cluster")
    for kind in ("cluster", "consumer"):
        for section in config.modules(kind).values():
            _reference(section, "client-profile", config.client_profiles, "client profile")
    for section in config.modules("consumer").values():
        _reference(section, "cluster", clusters, "cluster")
        if not section.get_str("cluster", ""):
            raise section.error("cluster", "is required: the name of the cluster section this consumer reads")


def http_urls(section: Section, key: str) -> list[str]:
    """A list of distinct http(s) URLs (``broker-metrics``: the brokers' Prometheus endpoints), [] when unset."""
    from urllib.parse import urlsplit

    urls = section.get_list(key, [])
    for url in urls:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 (raises on a port that is not a number in range)
        except ValueError as exc:
            raise section.error(key, f"{url!r} is not a URL: {exc}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise section.error(key, f"{url!r} is not an http:// or https:// URL with a host")
    duplicates = sorted({url for url in urls if urls.count(url) > 1})
    if duplicates:
        raise section.error(key, f"lists {', '.join(duplicates)} more than once")
    return urls
