"""Config loading: Burrow's TOML and our YAML, defaults, references, env overrides, and errors that name
the file and the key path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import structlog

from burrowpy.config import (
    ClientProfile,
    ConfigError,
    HttpListenerConfig,
    LoggingConfig,
    load_config,
    parse_config,
    parse_kafka_version,
    valid_listen_address,
)
from burrowpy.context import ApplicationContext
from burrowpy.coordinators.base import Coordinator

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "config" / "burrowpy.yaml"

# Debian's /etc/burrow/burrow.toml (Burrow 1.2.1) with local file paths: note the old group-blacklist keys.
BURROW_TOML = """\
[general]
pidfile="{tmp}/burrow.pid"

[logging]
filename="{tmp}/burrow.log"
level="info"
maxsize=100
maxbackups=30
maxage=10
use-localtime=false
use-compression=true

[zookeeper]
servers=[ "zkhost01.example.com:2181", "zkhost02.example.com:2181" ]
timeout=6
root-path="/burrow"

[client-profile.test]
client-id="burrow-test"
kafka-version="0.10.0"

[cluster.local]
class-name="kafka"
servers=[ "kafka01.example.com:10251", "kafka02.example.com:10251" ]
client-profile="test"
topic-refresh=120
offset-refresh=30

[consumer.local]
class-name="kafka"
cluster="local"
servers=[ "kafka01.example.com:10251", "kafka02.example.com:10251" ]
client-profile="test"
group-blacklist="^(console-consumer-|python-kafka-consumer-|quick-).*$"
group-whitelist=""

[httpserver.default]
address=":8000"

[storage.default]
class-name="inmemory"
workers=20
intervals=15
expire-group=604800
min-distance=1
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_debian_burrow_toml_loads_with_burrow_semantics(tmp_path):
    config = load_config(write(tmp_path, "burrow.toml", BURROW_TOML.format(tmp=tmp_path)), environ={})
    assert config.general.pidfile == f"{tmp_path}/burrow.pid"
    assert config.logging == LoggingConfig(
        filename=f"{tmp_path}/burrow.log",
        level="info",
        maxsize=100,
        maxbackups=30,
        maxage=10,
        use_localtime=False,
        use_compression=True,
    )
    assert config.zookeeper.servers == ("zkhost01.example.com:2181", "zkhost02.example.com:2181")
    assert config.httpserver == {"default": HttpListenerConfig("default", ":8000", 300, None)}
    assert config.client_profile("test").version == (0, 10, 0, 0)
    assert config.client_profile("test").client_id == "burrow-test"
    assert config.cluster_names == ["local"]
    assert config.modules("storage")["default"].get_int("intervals") == 15
    # No evaluator section: the default one, as Burrow creates it.
    assert config.modules("evaluator")["default"].get_str("class-name") == "caching"
    # Burrow 1.2's list names are read as the new ones, with a warning instead of Burrow 1.3's panic.
    consumer = config.modules("consumer")["local"]
    assert (
        consumer.get_regex("group-denylist").pattern
        == "^(console-consumer-|python-kafka-consumer-|quick-).*$"
    )
    assert consumer.get_regex("group-allowlist") is None
    assert "group-blacklist" not in consumer.data
    assert any("consumer.local.group-blacklist" in warning for warning in config.warnings)


def test_yaml_mirrors_toml_one_to_one(tmp_path):
    toml = load_config(write(tmp_path, "burrow.toml", BURROW_TOML.format(tmp=tmp_path)), environ={})
    yaml_text = f"""
general: {{pidfile: "{tmp_path}/burrow.pid"}}
logging: {{filename: "{tmp_path}/burrow.log", level: info, maxsize: 100, maxbackups: 30, maxage: 10,
          use-localtime: false, use-compression: true}}
zookeeper: {{servers: ["zkhost01.example.com:2181", "zkhost02.example.com:2181"], timeout: 6, root-path: /burrow}}
client-profile: {{test: {{client-id: burrow-test, kafka-version: "0.10.0"}}}}
cluster:
  local: {{class-name: kafka, servers: ["kafka01.example.com:10251", "kafka02.example.com:10251"],
          client-profile: test, topic-refresh: 120, offset-refresh: 30}}
consumer:
  local: {{class-name: kafka, cluster: local, servers: ["kafka01.example.com:10251", "kafka02.example.com:10251"],
          client-profile: test, group-blacklist: "^(console-consumer-|python-kafka-consumer-|quick-).*$",
          group-whitelist: ""}}
httpserver: {{default: {{address: ":8000"}}}}
storage: {{default: {{class-name: inmemory, workers: 20, intervals: 15, expire-group: 604800, min-distance: 1}}}}
"""
    yaml = load_config(write(tmp_path, "burrowpy.yaml", yaml_text), environ={})
    for field in ("general", "logging", "zookeeper", "httpserver", "client_profiles"):
        assert getattr(yaml, field) == getattr(toml, field)
    assert [
        warning.replace(".yaml", ".toml").replace("burrowpy.", "burrow.") for warning in yaml.warnings
    ] == toml.warnings
    assert {
        kind: {name: section.data for name, section in sections.items()}
        for kind, sections in yaml.sections.items()
    } == {
        kind: {name: section.data for name, section in sections.items()}
        for kind, sections in toml.sections.items()
    }


def test_defaults_without_any_section():
    config = parse_config({}, "empty.yaml", {})
    assert config.general.pidfile == "burrow.pid" and config.general.env_var_prefix == "burrow"
    assert config.logging == LoggingConfig()
    assert config.zookeeper.to_json() == {"servers": [], "timeout": 6, "root-path": "/burrow"}
    assert config.httpserver == {"default": HttpListenerConfig("default", "127.0.0.1:0")}
    assert {kind: list(config.modules(kind)) for kind in ("storage", "evaluator", "cluster", "consumer")} == {
        "storage": ["default"],
        "evaluator": ["default"],
        "cluster": [],
        "consumer": [],
    }
    assert config.modules("storage")["default"].data == {"class-name": "inmemory"}
    assert config.client_profile("") == ClientProfile()
    assert config.client_profile("").to_json() == {
        "name": "",
        "client-id": "burrow-lagchecker",
        "kafka-version": "2.8.0",
        "tls": None,
        "sasl": None,
    }
    assert config.history is None and not config.has_notifiers


def test_profiles_and_references(tmp_path):
    cert = write(tmp_path, "cert.pem", "x")
    key = write(tmp_path, "key.pem", "x")
    config = parse_config(
        {
            "tls": {
                "internal": {
                    "certfile": str(cert),
                    "keyfile": str(key),
                    "cafile": str(cert),
                    "noverify": True,
                }
            },
            "sasl": {
                "scram": {
                    "username": "u",
                    "password": "secret",
                    "mechanism": "scram-sha-512",
                    "handshake-first": True,
                }
            },
            "iam": {"msk": {"region": "us-west-1"}},
            "client-profile": {
                "secure": {
                    "tls": "internal",
                    "sasl": "scram",
                    "iam": "msk",
                    "kafka-version": "3.6.1",
                    "dial-timeout": 5,
                }
            },
            "history": {"dir": str(tmp_path / "history")},
            "httpserver": {"api": {"address": "127.0.0.1:0", "tls": "internal", "timeout": 30}},
        },
        "x.yaml",
        {},
    )
    profile = config.client_profile("secure")
    assert profile.version == (3, 6, 1, 0) and profile.dial_timeout == 5 and profile.read_timeout is None
    assert profile.sasl.mechanism == "SCRAM-SHA-512" and profile.iam.region == "us-west-1"
    assert profile.to_json() == {
        "name": "secure",
        "client-id": "burrow-lagchecker",
        "kafka-version": "3.6.1",
        "tls": {
            "name": "internal",
            "noverify": True,
            "certfile": str(cert),
            "keyfile": str(key),
            "cafile": str(cert),
        },
        "sasl": {"name": "scram", "handshake-first": True, "username": "u"},  # never the password
    }
    assert config.history.dir == str(tmp_path / "history") and config.history.roll_interval == 3600
    assert config.httpserver["api"].to_json() == {"address": "127.0.0.1:0", "tls": "internal", "timeout": 30}
    assert config.section("tls", "internal").get_bool("noverify") is True
    assert config.section("tls", "other") is None


def error_of(doc: dict, file: str = "burrowpy.yaml", environ: dict | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_config(doc, file, environ or {})
    return caught.value


@pytest.mark.parametrize(
    ("doc", "path", "message"),
    [
        ({"clusters": {}}, "clusters", "unknown section"),
        ({"logging": {"levle": "debug"}}, "logging.levle", "unknown key"),
        ({"logging": {"maxsize": "big"}}, "logging.maxsize", "expected an integer"),
        ({"logging": "loud"}, "logging", "expected a mapping"),
        ({"general": {"pidfile": ["a"]}}, "general.pidfile", "expected a string"),
        ({"cluster": {"class-name": "kafka"}}, "cluster.class-name", "expected a mapping of settings"),
        ({"cluster": ["local"]}, "cluster", "expected a mapping of NAME"),
        ({"iam": {"msk": {}}}, "iam.msk.region", "is required"),
        ({"history": {}}, "history.dir", "is required"),
        ({"history": {"dir": "h", "roll-interval": 0}}, "history.roll-interval", "at least 1"),
        ({"dashboard": {"sample-interval": 0.5}}, "dashboard.sample-interval", "at least 1 second"),
        ({"dashboard": {"sample-interval": -1}}, "dashboard.sample-interval", "at least 1 second"),
        ({"dashboard": {"sample-interval": 60, "retention": 30}}, "dashboard.retention", "at least the sample"),
        ({"dashboard": {"samples": 3}}, "dashboard.samples", "unknown key"),
        ({"httpserver": {"api": {}}}, "httpserver.api.address", "is required"),
        ({"httpserver": {"api": {"address": "localhost"}}}, "httpserver.api.address", "not host:port"),
        (
            {"httpserver": {"api": {"address": ":80", "tls": "nope"}}},
            "httpserver.api.tls",
            "'nope', which is not",
        ),
        ({"httpserver": {"api": {"address": ":80", "login-burst": 0}}}, "httpserver.api.login-burst",
         "must be at least 1, got 0"),
        ({"httpserver": {"api": {"address": ":80", "login-burst": "many"}}}, "httpserver.api.login-burst",
         "expected an integer"),
        ({"httpserver": {"api": {"address": ":80", "login-refill": 0}}}, "httpserver.api.login-refill",
         "must be a number of seconds above 0, got 0.0"),
        ({"httpserver": {"api": {"address": ":80", "login-refill": "inf"}}}, "httpserver.api.login-refill",
         "must be a number of seconds above 0"),
        ({"httpserver": {"api": {"address": ":80", "login-refill": "soon"}}}, "httpserver.api.login-refill",
         "expected a number"),
        ({"zookeeper": {"servers": ["zk"]}}, "zookeeper.servers", "not host:port"),
        ({"zookeeper": {"root-path": "burrow"}}, "zookeeper.root-path", "not a ZooKeeper path"),
        ({"zookeeper": {"root-path": "/"}}, "zookeeper.root-path", "not a ZooKeeper path"),
        ({"zookeeper": {"root-path": "/zookeeper/locks"}}, "zookeeper.root-path", "not in /zookeeper"),
        ({"zookeeper": {"root-path": "/burrow/"}}, "zookeeper.root-path", "not a ZooKeeper path"),
        (
            {"client-profile": {"p": {"kafka-version": "1.0"}}},
            "client-profile.p.kafka-version",
            "unknown Kafka version",
        ),
        ({"client-profile": {"p": {"sasl": "missing"}}}, "client-profile.p.sasl", "SASL profile 'missing'"),
        (
            {"client-profile": {"p": {"iam": "msk"}}, "iam": {"msk": {"region": "r"}}},
            "client-profile.p.iam",
            "needs TLS",
        ),
        ({"tls": {"t": {"certfile": "/nonexistent/cert.pem"}}}, "tls.t.certfile", "does not exist"),
        (
            {"cluster": {"local": {"class-name": "kafka", "client-profile": "prod"}}},
            "cluster.local.client-profile",
            "client profile 'prod'",
        ),
        (
            {"consumer": {"c": {"class-name": "kafka", "cluster": "remote"}}, "cluster": {"local": {}}},
            "consumer.c.cluster",
            "cluster 'remote', which is not configured (configured: local)",
        ),
        ({"consumer": {"c": {"class-name": "kafka"}}}, "consumer.c.cluster", "is required"),
        ({"storage": {"a": {}, "b": {}}}, "storage", "exactly one storage module"),
        ({"evaluator": {"a": {}, "b": {}}}, "evaluator", "exactly one evaluator module"),
        (
            {"storage": {"s": {"group-whitelist": "a", "group-allowlist": "b"}}},
            "storage.s.group-whitelist",
            "conflicts with group-allowlist",
        ),
    ],
)
def test_errors_name_the_file_and_key_path(doc, path, message):
    error = error_of(doc)
    assert error.file == "burrowpy.yaml" and error.path == path
    assert message in error.message
    assert str(error).startswith(f"burrowpy.yaml: {path}: ")


def test_unparseable_and_unreadable_files_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match=r"bad\.yaml: cannot parse"):
        load_config(write(tmp_path, "bad.yaml", "cluster: [unclosed"))
    with pytest.raises(ConfigError, match=r"bad\.toml: cannot parse"):
        load_config(write(tmp_path, "bad.toml", "[cluster.local\n"))
    with pytest.raises(ConfigError, match=r"missing\.yaml: cannot read"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match=r"list\.yaml: the top level must be a mapping"):
        load_config(write(tmp_path, "list.yaml", "- a\n- b\n"))


def test_environment_overrides_keys_that_modules_read():
    doc = {"storage": {"default": {"intervals": 10}}, "logging": {"level": "info"}}
    config = parse_config(
        doc,
        "x.yaml",
        {
            "BURROW_STORAGE_DEFAULT_INTERVALS": "15",
            "BURROW_LOGGING_LEVEL": "debug",
            "BURROW_STORAGE_DEFAULT_MIN_DISTANCE": "2",
            "BURROW_STORAGE_DEFAULT_WORKERS": "",
        },
    )
    storage = config.modules("storage")["default"]
    assert storage.get_int("intervals") == 15
    assert storage.get_int("min-distance", 0) == 2  # not in the file: the environment alone sets it
    assert storage.get_int("workers", 20) == 20  # an empty variable counts as unset
    assert config.logging.level == "debug"


def test_environment_prefix_comes_from_general_and_bad_values_name_the_variable():
    doc = {"general": {"env-var-prefix": "bp"}, "storage": {"default": {}}}
    config = parse_config(
        doc, "x.yaml", {"BP_STORAGE_DEFAULT_INTERVALS": "many", "BURROW_STORAGE_DEFAULT_WORKERS": "3"}
    )
    storage = config.modules("storage")["default"]
    assert storage.get_int("workers", 20) == 20
    with pytest.raises(ConfigError) as caught:
        storage.get_int("intervals", 10)
    assert caught.value.path == "storage.default.intervals"
    assert "environment variable BP_STORAGE_DEFAULT_INTERVALS" in caught.value.message


def test_unknown_log_level_starts_at_info_with_a_warning():
    config = parse_config({"logging": {"level": "verbose"}}, "x.yaml", {})
    assert config.logging.level == "info"
    assert any("logging.level 'verbose'" in warning for warning in config.warnings)


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("2.8.0", (2, 8, 0, 0)),
        ("0.10.2.1", (0, 10, 2, 1)),
        ("0.10.2", (0, 10, 2, 0)),
        ("0.8", (0, 8, 2, 0)),
        ("0.11", (0, 11, 0, 0)),
        ("4.1.0", (4, 1, 0, 0)),
        ("1.0", None),
        ("0.10.3", None),
        ("2.x.0", None),
        ("", None),
    ],
)
def test_kafka_versions_burrow_accepts(text, version):
    assert parse_kafka_version(text) == version


@pytest.mark.parametrize(
    ("address", "valid"),
    [
        (":8000", True),
        ("127.0.0.1:0", True),
        ("localhost:80", True),
        ("[::1]:8000", True),
        ("my_host:1", True),
        ("host", False),
        ("1.2.3.256:80", False),
        ("::1:80", False),
        ("a:b", False),
        ("a:70000", False),
    ],
)
def test_listen_addresses(address, valid):
    assert valid_listen_address(address) is valid


class Module:
    def __init__(self, name, section, ctx):
        section.check_keys(("class-name", "size"))
        self.size = section.get_int("size", 1)
        self.events = ctx.modules.setdefault("events", {})


def context_for(doc: dict) -> ApplicationContext:
    return ApplicationContext(config=parse_config(doc, "burrowpy.yaml", {}), logger=structlog.get_logger())


def test_coordinator_rejects_an_unknown_class_naming_the_key():
    ctx = context_for({"cluster": {"local": {"class-name": "pulsar"}}})
    with pytest.raises(ConfigError) as caught:
        Coordinator("cluster", ctx, {"kafka": Module})
    assert caught.value.path == "cluster.local.class-name"
    assert "unknown class 'pulsar'" in caught.value.message and "known: kafka" in caught.value.message


def test_coordinator_requires_a_class_name_unless_it_has_a_default():
    ctx = context_for({"cluster": {"local": {}}, "storage": {"main": {"size": 3}}})
    with pytest.raises(ConfigError, match=r"cluster\.local\.class-name: is required"):
        Coordinator("cluster", ctx, {"kafka": Module})
    storage = Coordinator("storage", ctx, {"inmemory": Module}, default_class="inmemory")
    assert storage.modules["main"].size == 3 and ctx.modules["storage"] is storage.modules


def test_module_errors_surface_with_the_key_path():
    ctx = context_for({"cluster": {"local": {"class-name": "kafka", "sise": 3}}})
    with pytest.raises(ConfigError, match=r"burrowpy\.yaml: cluster\.local\.sise: unknown key"):
        Coordinator("cluster", ctx, {"kafka": Module})


def test_real_modules_report_bad_regex_and_type_with_the_key_path():
    from burrowpy.daemon import module_classes

    classes = module_classes()
    ctx = context_for({"storage": {"default": {"group-allowlist": "(unclosed"}}})
    with pytest.raises(ConfigError) as caught:
        Coordinator("storage", ctx, classes["storage"], default_class="inmemory")
    assert (
        caught.value.path == "storage.default.group-allowlist"
        and "bad regular expression" in caught.value.message
    )
    ctx = context_for(
        {"cluster": {"local": {"class-name": "kafka", "servers": ["k:9092"], "offset-refresh": "x"}}}
    )
    with pytest.raises(ConfigError, match=r"cluster\.local\.offset-refresh: expected an integer"):
        Coordinator("cluster", ctx, classes["cluster"])


def test_sample_config_loads_and_builds_every_module():
    import asyncio

    from burrowpy.daemon import Monitor

    config = load_config(SAMPLE, environ={})
    assert config.warnings == []

    async def build():
        monitor = Monitor(config, structlog.get_logger())
        monitor.configure()
        return {kind: sorted(modules) for kind, modules in monitor.ctx.modules.items()}

    assert asyncio.run(build()) == {
        "storage": ["default"],
        "evaluator": ["default"],
        "cluster": ["local"],
        "consumer": ["local"],
    }


def _sample_keys_under(kind: str) -> set[str]:
    """Keys written in the sample (commented out or not) in the part of the file for ``kind``."""
    text = SAMPLE.read_text()
    start = re.search(rf"^#? ?{re.escape(kind)}:", text, re.MULTILINE)
    assert start, kind
    following = re.search(r"^#? ?[a-z-]+:\s*(#.*)?$", text[start.end() :], re.MULTILINE)
    block = text[start.end() : start.end() + following.start()] if following else text[start.end() :]
    return set(re.findall(r"^\s*#?\s+([a-z][a-z-]*):", block, re.MULTILINE))


def test_sample_config_documents_every_key_of_every_module_class():
    from burrowpy import config as config_module
    from burrowpy.coordinators import cluster_kafka, consumer_kafka, consumer_kafka_zk
    from burrowpy.evaluator import caching
    from burrowpy.notifier.base import COMMON_KEYS
    from burrowpy.notifier.email import EmailNotifier
    from burrowpy.notifier.http import HttpNotifier
    from burrowpy.storage import inmemory

    legacy = set(config_module.LEGACY_KEYS)
    expected = {
        "general": set(config_module.GENERAL_KEYS),
        "logging": set(config_module.LOGGING_KEYS),
        "zookeeper": set(config_module.ZOOKEEPER_KEYS),
        "history": set(config_module.HISTORY_KEYS),
        "dashboard": set(config_module.DASHBOARD_KEYS),
        "client-profile": set(config_module.CLIENT_PROFILE_KEYS),
        "tls": set(config_module.TLS_KEYS),
        "sasl": set(config_module.SASL_KEYS),
        "iam": set(config_module.IAM_KEYS),
        "httpserver": set(config_module.HTTPSERVER_KEYS),
        "http-auth": set(config_module.HTTP_AUTH_KEYS),
        "storage": set(inmemory.CONFIG_KEYS) - legacy,
        "evaluator": set(caching.CONFIG_KEYS),
        "cluster": set(cluster_kafka.KEYS),
        "consumer": (set(consumer_kafka.KEYS) | set(consumer_kafka_zk.KEYS)) - legacy,
        "notifier": (set(COMMON_KEYS) | set(HttpNotifier.class_keys) | set(EmailNotifier.class_keys))
        - legacy,
    }
    for kind, keys in expected.items():
        missing = keys - _sample_keys_under(kind)
        assert not missing, f"config/burrowpy.yaml does not document {kind} keys {sorted(missing)}"


def test_the_secured_monitor_example_loads_and_builds(self_signed):
    """config/burrowpy-sasl-ssl.yaml, its files pointing at a certificate made here."""
    import asyncio

    from burrowpy.daemon import Monitor

    text = (REPO / "config" / "burrowpy-sasl-ssl.yaml").read_text()
    for name, made in (("ca.pem", self_signed.certificate), ("monitor.pem", self_signed.certificate),
                       ("monitor.key", self_signed.key)):
        text = text.replace(f"/etc/burrowpy/{name}", str(made))
    path = self_signed.store.parent / "burrowpy-sasl-ssl.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="placeholder") as refused:  # its password, as it ships
        load_config(path, environ={})
    assert refused.value.path == "sasl.monitor.password"
    config = load_config(path, environ={"BURROW_SASL_MONITOR_PASSWORD": "a chosen password"})
    assert config.sasl["monitor"].password == "a chosen password"
    assert config.warnings == []
    assert config.client_profiles["secured"].sasl.mechanism == "SCRAM-SHA-512"

    async def build():
        monitor = Monitor(config, structlog.get_logger())
        monitor.configure()
        return {kind: sorted(modules) for kind, modules in monitor.ctx.modules.items()}

    assert asyncio.run(build()) == {"storage": ["default"], "evaluator": ["default"], "cluster": ["production"],
                                    "consumer": ["production"]}
