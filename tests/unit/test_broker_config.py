"""The broker's YAML config: Kafka's broker names for topic defaults, checked as the topic configs are."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from broker.config import TOPIC_DEFAULTS, BrokerConfig
from broker.log.config import CONFIG_DEFS, LogConfig
from burrowpy.config import ConfigError


def load(tmp_path, text: str) -> BrokerConfig:
    path = tmp_path / "broker.yaml"
    path.write_text(text)
    return BrokerConfig.load(path, data_dir=str(tmp_path / "data"))


def test_every_topic_default_has_kafkas_broker_name(tmp_path):
    config = load(tmp_path, "compression.type: zstd\nlog.roll.jitter.ms: 1000\nlog.preallocate: true\n"
                            "log.message.timestamp.after.max.ms: 60000\nunclean.leader.election.enable: false\n")
    defaults = LogConfig.from_settings(config.topic_defaults())
    assert (defaults.compression_type, defaults.segment_jitter_ms, defaults.preallocate,
            defaults.message_timestamp_after_max_ms) == ("zstd", 1000, True, 60000)
    # every broker key names a topic config this broker knows
    assert set(TOPIC_DEFAULTS.values()) <= set(CONFIG_DEFS)


@pytest.mark.parametrize(("text", "key"), [
    ("log.retention.ms: -5\n", "log.retention.ms"),
    ("compression.type: brotli\n", "compression.type"),
    ("log.cleaner.min.cleanable.ratio: 1.5\n", "log.cleaner.min.cleanable.ratio"),
    ("unclean.leader.election.enable: maybe\n", "unclean.leader.election.enable"),
])
def test_a_bad_topic_default_is_a_config_error_naming_file_and_key(tmp_path, text, key):
    with pytest.raises(ConfigError, match=rf"broker\.yaml.*{key}"):
        load(tmp_path, text)


def test_kafkas_other_broker_configs_are_accepted_and_named_as_without_effect(tmp_path):
    config = load(tmp_path, "num.io.threads: 16\nqueued.max.requests: 1000\nlog.retention.ms: 1000\n"
                            "socket.send.buffer.bytes: 1048576\n")
    assert config.inert == {"num.io.threads": 16, "queued.max.requests": 1000}
    assert config.explicit == {"num.io.threads", "queued.max.requests", "log.retention.ms", "socket.send.buffer.bytes"}
    assert config["socket.send.buffer.bytes"] == 1048576


@pytest.mark.parametrize("text", ["socket.send.buffer.bytes: 0\n", "socket.receive.buffer.bytes: -2\n",
                                  "socket.send.buffer.bytes: big\n"])
def test_a_socket_buffer_is_a_size_or_minus_one(tmp_path, text):
    with pytest.raises(ConfigError, match=rf"broker\.yaml.*{re.escape(text.split(':')[0])}"):
        load(tmp_path, text)


def test_a_congestion_control_the_kernel_has_is_taken_and_one_it_lacks_is_a_config_error(tmp_path):
    assert load(tmp_path, "socket.congestion.control: reno\n")["socket.congestion.control"] == "reno"
    assert load(tmp_path, "")["socket.congestion.control"] == ""  # the system's
    with pytest.raises(ConfigError, match=r"broker\.yaml.*socket\.congestion\.control.*'vegas-typo' cannot be set "
                                          r"here.*tcp_available_congestion_control: .*reno"):
        load(tmp_path, "socket.congestion.control: vegas-typo\n")


@pytest.mark.parametrize(("text", "reason"), [
    ("num.io.thread: 16\n", "neither a broker config of Apache Kafka 4.4 nor one of burrowpy's own"),
    ("sasl.oauthbearer.jwks.endpoint.url: https://x\n", "this SASL or authorization setting is not available"),
    ("authorizer.class.name: kafka.security.authorizer.AclAuthorizer\n",
     "authorizer.class.name: 'kafka.security.authorizer.AclAuthorizer' is not an authorizer this broker has"),
    ("authorizer.class.name: org.apache.kafka.metadata.authorizer.StandardAuthorizer\nsuper.users: admin\n",
     "super.users: Could not parse principal from `admin`"),
    ("authorizer.class.name: org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
     "allow.everyone.if.no.acl.found: maybe\n", "allow.everyone.if.no.acl.found"),
    # a cluster's brokers reach each other on the inter-broker listener, with what it takes
    ("listeners: SSL://127.0.0.1:0\nssl.keystore.type: PEM\nssl.keystore.location: /nope.pem\ncluster: {}\n",
     "ssl.keystore.location: cannot load"),
    ("listeners: INTERNAL://127.0.0.1:0\nlistener.security.protocol.map: INTERNAL:PLAINTEXT\ncluster: {}\n",
     "inter.broker.listener.name: PLAINTEXT is not one of the listeners (INTERNAL)"),
    # Kafka's older way of naming it: by its protocol, never together with the listener's name
    ("listeners: PLAINTEXT://127.0.0.1:0\nsecurity.inter.broker.protocol: SSL\n",
     "security.inter.broker.protocol: SSL is not one of the listeners (PLAINTEXT)"),
    ("security.inter.broker.protocol: TLS\n", "security.inter.broker.protocol: 'TLS' is not a security protocol"),
    ("security.inter.broker.protocol: PLAINTEXT\ninter.broker.listener.name: PLAINTEXT\n",
     "only one of inter.broker.listener.name and security.inter.broker.protocol may be set"),
    ("listeners: PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0\n"
     "inter.broker.listener.name: SASL_PLAINTEXT\nsasl.enabled.mechanisms: PLAIN\n"
     "listener.name.sasl_plaintext.plain.sasl.jaas.config: 'org.apache.kafka.common.security.plain.PlainLoginModule"
     " required user_a=\"b\";'\ncluster: {}\n",
     "sasl.mechanism.inter.broker.protocol: brokers log in to each other on SASL_PLAINTEXT: set one of"),
    ("listeners: PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0\n"
     "inter.broker.listener.name: SASL_PLAINTEXT\nsasl.enabled.mechanisms: PLAIN\n"
     "sasl.mechanism.inter.broker.protocol: PLAIN\n"
     "listener.name.sasl_plaintext.plain.sasl.jaas.config: 'org.apache.kafka.common.security.plain.PlainLoginModule"
     " required user_a=\"b\";'\ncluster: {}\n", 'the line needs username="..." and password="..."'),
    ("listeners: SASL_PLAINTEXT://127.0.0.1:0\n",
     "sasl.enabled.mechanisms: listener SASL_PLAINTEXT uses SASL: set the mechanisms it offers (PLAIN)"),
    ("listeners: SASL_PLAINTEXT://127.0.0.1:0\nsasl.enabled.mechanisms: GSSAPI\n",
     "sasl.enabled.mechanisms: GSSAPI: not available in this broker (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 are)"),
    ("listeners: SASL_PLAINTEXT://127.0.0.1:0\nsasl.enabled.mechanisms: SCRAM-SHA-512\n"
     "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config: 'x.y.Module required;'\n",
     "expected org.apache.kafka.common.security.scram.ScramLoginModule required"),
    ("listeners: SASL_PLAINTEXT://127.0.0.1:0\nsasl.enabled.mechanisms: PLAIN\n",
     "listener.name.sasl_plaintext.plain.sasl.jaas.config: is required for PLAIN"),
    ("listeners: SASL_PLAINTEXT://127.0.0.1:0\nsasl.enabled.mechanisms: PLAIN\n"
     "listener.name.sasl_plaintext.plain.sasl.jaas.config: 'x.y.Module required;'\n",
     "expected org.apache.kafka.common.security.plain.PlainLoginModule required"),
    ("listeners: SASL_PLAINTEXT://127.0.0.1:0\nsasl.enabled.mechanisms: PLAIN\n"
     "listener.name.sasl_plaintext.plain.sasl.jaas.config: 'org.apache.kafka.common.security.plain.PlainLoginModule"
     " required username=\"a\" password=\"b\";'\n", "no user_<name>"),
    ("listeners: SSL://127.0.0.1:0\n", "ssl.keystore.location: an SSL listener needs the broker's key"),
    ("listeners: SSL://127.0.0.1:0\nssl.keystore.type: PEM\nssl.keystore.location: /nope.pem\n",
     "ssl.keystore.location: cannot load the broker's key and certificate"),
    ("listeners: SSL://127.0.0.1:0\nssl.keystore.type: JKS\nssl.keystore.location: /k.jks\n",
     "ssl.keystore.type: JKS keystores are Java's own format"),
    ("listeners: INTERNAL://127.0.0.1:0\n", "listener INTERNAL has no security protocol"),
    ("listeners: PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2\n", "listener PLAINTEXT is named twice"),
    ("listeners: PLAINTEXT://127.0.0.1:0\nadvertised.listeners: SSL://h:1\n",
     "listener SSL is advertised but not in listeners"),
    ("listener.security.protocol.map: A:FOO\n", "is not NAME:PROTOCOL"),
    ("ssl.engine.factory.class: com.example.Engine\n", "names a Java class this broker cannot load"),
    # settings that would enforce something this broker cannot: refused, not run without it
    ("create.topic.policy.class.name: com.example.Policy\n", "names a Java class this broker cannot load"),
    ("alter.config.policy.class.name: com.example.Policy\n", "names a Java class this broker cannot load"),
    ("client.quota.callback.class: com.example.Quotas\n", "names a Java class this broker cannot load"),
    ("config.providers: file\n", "config providers are Java classes"),
    ("ssl.principal.mapping.rules: 'RULE:^CN=(.*?),.*$/$1/'\n", "only DEFAULT"),
])
def test_unknown_and_security_keys_are_refused(tmp_path, text, reason):
    with pytest.raises(ConfigError, match=re.escape(reason)):
        load(tmp_path, text)


def test_the_authorizer_settings_in_kafkas_names(tmp_path):
    config = load(tmp_path, "authorizer.class.name: org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
                            "super.users: User:admin; User:CN=broker,O=Example\n"
                            "allow.everyone.if.no.acl.found: true\n")
    assert config.authorizer and config.allow_everyone_if_no_acl_found
    assert config.super_users == ["User:admin", "User:CN=broker,O=Example"]
    assert config.inert == {}
    # without an authorizer the other two do nothing, and are named among the settings without effect
    plain = load(tmp_path, "super.users: User:admin\n")
    assert not plain.authorizer and plain.inert == {"super.users": "User:admin"}


def test_a_cluster_node_logs_in_to_the_others_on_its_inter_broker_listener(tmp_path):
    config = load(tmp_path, "listeners: PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0\n"
                            "inter.broker.listener.name: SASL_PLAINTEXT\n"
                            "sasl.enabled.mechanisms: PLAIN,SCRAM-SHA-512\n"
                            "sasl.mechanism.inter.broker.protocol: SCRAM-SHA-512\n"
                            "listener.name.sasl_plaintext.plain.sasl.jaas.config: 'org.apache.kafka.common.security."
                            "plain.PlainLoginModule required user_a=\"b\";'\n"
                            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config: 'org.apache.kafka.common."
                            "security.scram.ScramLoginModule required username=\"broker\" password=\"s3cret\";'\n"
                            "cluster: {}\n")
    assert config.inter_broker_listener == "SASL_PLAINTEXT"
    security = config.inter_broker_security
    assert (security.ssl_context, security.sasl_mechanism, security.username, security.password) == (
        None, "SCRAM-SHA-512", "broker", "s3cret")
    assert "sasl.mechanism.inter.broker.protocol" not in config.inert


def test_tls_settings_without_an_ssl_listener_are_named_among_those_without_effect(tmp_path):
    config = load(tmp_path, "ssl.keystore.location: /etc/kafka/keystore.pem\n")
    assert config.inert == {"ssl.keystore.location": "/etc/kafka/keystore.pem"}


def test_the_sasl_ssl_example_config_loads(tmp_path, self_signed):
    """config/broker-sasl-ssl.yaml, with its keystore path pointing at a certificate made here."""

    store = self_signed.store
    example = Path(__file__).resolve().parents[2] / "config" / "broker-sasl-ssl.yaml"
    text = example.read_text().replace("/etc/burrowpy/broker.pem", str(store))
    # as it ships, its passwords are placeholders, refused
    with pytest.raises(ConfigError, match="placeholder") as refused:
        load(tmp_path, text)
    assert refused.value.path == "broker.listener.name.sasl_ssl.plain.sasl.jaas.config"
    config = load(tmp_path, text.replace('"CHANGE-ME"', '"a chosen password"'))
    assert [(listener.name, listener.protocol) for listener in config.listeners] == [
        ("PLAINTEXT", "PLAINTEXT"), ("SASL_SSL", "SASL_SSL")]
    assert set(config.sasl_settings["SASL_SSL"].plain_users) == {"admin", "alice"}
    assert config.sasl_settings["SASL_SSL"].mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert (config.authorizer, config.super_users) == (True, ["User:admin"])
    assert "SASL_SSL" in config.ssl_contexts and config.inert == {}


@pytest.mark.parametrize(("algorithm", "checked"), [(None, True), ("https", True), ("", False)])
def test_brokers_check_each_others_host_names_unless_told_not_to(tmp_path, self_signed, algorithm, checked):
    """An SSL inter-broker listener gives the brokers a client context from its stores; Kafka's
    ssl.endpoint.identification.algorithm set empty turns the host name check off."""
    text = (f"listeners: PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0\ninter.broker.listener.name: SSL\n"
            f"ssl.keystore.type: PEM\nssl.keystore.location: {self_signed.store}\n"
            f"ssl.truststore.type: PEM\nssl.truststore.location: {self_signed.certificate}\ncluster: {{}}\n")
    if algorithm is not None:
        text += f"ssl.endpoint.identification.algorithm: '{algorithm}'\n"
    security = load(tmp_path, text).inter_broker_security
    assert security.sasl_mechanism is None and security.ssl_context.check_hostname is checked


def test_the_inter_broker_listener_named_by_its_protocol(tmp_path, self_signed):
    """security.inter.broker.protocol, as in many a server.properties: the listener called as the protocol."""
    text = (f"listeners: PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0\nsecurity.inter.broker.protocol: SSL\n"
            f"ssl.keystore.type: PEM\nssl.keystore.location: {self_signed.store}\n"
            f"ssl.truststore.type: PEM\nssl.truststore.location: {self_signed.certificate}\ncluster: {{}}\n")
    config = load(tmp_path, text)
    assert config.inter_broker_listener == "SSL" and config.inter_broker_security.ssl_context is not None
    assert load(tmp_path, "security.inter.broker.protocol: PLAINTEXT\n").inter_broker_security is None


def test_kafkas_other_names_for_a_setting_are_honoured(tmp_path):
    """log.retention.hours, broker.id, log.dirs... in a server.properties are not left without effect: they set
    what this broker reads, the broker's own name winning when both are given (as on Kafka)."""
    config = BrokerConfig.load(_write(tmp_path, "log.retention.hours: 24\nlog.roll.hours: 2\nbroker.id: 3\n"
                                                "broker.rack: r1\nlog.dirs: /var/lib/kafka\n"))
    assert (config["log.retention.ms"], config["log.roll.ms"], config.node_id, config["rack"], str(config.data_dir)) == (
        24 * 3_600_000, 2 * 3_600_000, 3, "r1", "/var/lib/kafka")
    assert config.topic_defaults()["retention.ms"] == 24 * 3_600_000
    assert not config.inert
    config = load(tmp_path, "log.retention.minutes: 5\nlog.retention.hours: 24\n")
    assert config["log.retention.ms"] == 300_000
    assert load(tmp_path, "log.retention.ms: 1000\nlog.retention.hours: 24\n")["log.retention.ms"] == 1000
    assert load(tmp_path, "log.retention.hours: -1\n")["log.retention.ms"] == -1
    with pytest.raises(ConfigError, match="log.dirs: one data directory only"):
        BrokerConfig.load(_write(tmp_path, "log.dirs: /a,/b\n"))
    with pytest.raises(ConfigError, match="broker.id: must be node.id"):
        load(tmp_path, "broker.id: 2\nnode.id: 3\n")


def test_the_group_coordinator_takes_offset_metadata_max_bytes(tmp_path):
    from broker.groups.machine import GroupConfig

    config = load(tmp_path, "offset.metadata.max.bytes: 100\n")
    assert not config.inert and GroupConfig.from_broker_config(config).offset_metadata_max_bytes == 100


def test_the_replica_fetcher_takes_its_settings(tmp_path):
    from broker.cluster.replication import FETCHER_DEFAULTS

    config = load(tmp_path, "replica.fetch.max.bytes: 5000\nreplica.fetch.response.max.bytes: 20000\n")
    assert not config.inert
    fetcher = {key: config.get(key, default) for key, default in FETCHER_DEFAULTS.items()}
    assert (fetcher["replica.fetch.max.bytes"], fetcher["replica.fetch.response.max.bytes"]) == (5000, 20000)


def test_connection_and_memory_limits_are_checked(tmp_path):
    config = load(tmp_path, "max.connections: 10\nmax.connections.per.ip.overrides: '127.0.0.1:3, ::1:4'\n"
                            "queued.max.request.bytes: 209715200\nconnections.max.idle.ms: 5000\n")
    assert (config["max.connections"], config["queued.max.request.bytes"], config["connections.max.idle.ms"]) == (
        10, 209715200, 5000)
    assert not config.inert
    with pytest.raises(ConfigError, match="max.connections.per.ip.overrides: '127.0.0.1' is not host:count"):
        load(tmp_path, "max.connections.per.ip.overrides: 127.0.0.1\n")
    with pytest.raises(ConfigError, match="queued.max.request.bytes: must be at least socket.request.max.bytes"):
        load(tmp_path, "queued.max.request.bytes: 1000\n")
    with pytest.raises(ConfigError, match="max.connections: must be at least 0"):
        load(tmp_path, "max.connections: -1\n")


def test_the_transaction_log_min_isr_is_read_and_checked(tmp_path):
    config = load(tmp_path, "transaction.state.log.min.isr: 3\n")
    assert config["transaction.state.log.min.isr"] == 3
    assert not config.inert
    assert load(tmp_path, "")["transaction.state.log.min.isr"] == 2  # Kafka's default
    with pytest.raises(ConfigError, match="transaction.state.log.min.isr: must be at least 1"):
        load(tmp_path, "transaction.state.log.min.isr: 0\n")


def _write(tmp_path, text: str):
    path = tmp_path / "server.yaml"
    path.write_text(text)
    return path


def test_overrides_that_do_not_parse_at_run_time_leave_the_last_good_ones():
    from broker.connection_limits import ConnectionQuotas

    settings = {"max.connections.per.ip": 5, "max.connections.per.ip.overrides": "10.0.0.1:2"}
    quotas = ConnectionQuotas(settings.__getitem__)
    assert quotas.admit("10.0.0.1") and quotas.admit("10.0.0.1") and not quotas.admit("10.0.0.1")
    settings["max.connections.per.ip.overrides"] = "10.0.0.1"  # no count: not applied
    assert not quotas.admit("10.0.0.1") and quotas.admit("10.0.0.2")
    quotas.release("10.0.0.1")
    assert quotas.per_host == {"10.0.0.1": 1, "10.0.0.2": 1} and quotas.total == 2


@pytest.mark.parametrize(("text", "key"), [
    ("log.cleaner.dedupe.buffer.size: 1000000\n", "log.cleaner.dedupe.buffer.size"),
    ("log.cleaner.threads: 2\nlog.cleaner.dedupe.buffer.size: 1500000\n", "log.cleaner.dedupe.buffer.size"),
    ("log.cleaner.io.buffer.size: -1\n", "log.cleaner.io.buffer.size"),
    ("log.cleaner.io.buffer.load.factor: 1.5\n", "log.cleaner.io.buffer.load.factor"),
    ("log.cleaner.io.buffer.load.factor: 0\n", "log.cleaner.io.buffer.load.factor"),
    ("log.cleaner.io.max.bytes.per.second: 0\n", "log.cleaner.io.max.bytes.per.second"),
    ("log.cleaner.enable: maybe\n", "log.cleaner.enable"),
])
def test_a_bad_cleaner_setting_is_a_config_error_naming_file_and_key(tmp_path, text, key):
    with pytest.raises(ConfigError, match=rf"broker\.yaml.*{key}"):
        load(tmp_path, text)


def test_the_cleaners_resource_settings_are_live(tmp_path):
    config = load(tmp_path, "log.cleaner.enable: false\nlog.cleaner.dedupe.buffer.size: 2097152\n"
                            "log.cleaner.io.buffer.size: 4096\nlog.cleaner.io.buffer.load.factor: 0.5\n"
                            "log.cleaner.io.max.bytes.per.second: 1000000\n")
    assert config.inert == {}
    assert (config["log.cleaner.enable"], config["log.cleaner.dedupe.buffer.size"], config["log.cleaner.io.buffer.size"],
            config["log.cleaner.io.buffer.load.factor"], config["log.cleaner.io.max.bytes.per.second"]) == (
        False, 2097152, 4096, 0.5, 1e6)


def test_metrics_listen_is_off_unless_set_and_names_its_host(tmp_path):
    assert load(tmp_path, "{}\n").metrics_address is None
    assert load(tmp_path, "metrics.listen: 127.0.0.1:9308\n").metrics_address == ("127.0.0.1", 9308)
    assert load(tmp_path, "metrics.listen: '[::1]:9308'\n").metrics_address == ("::1", 9308)


@pytest.mark.parametrize("address", [":9308", "127.0.0.1", "localhost:http", "127.0.0.1:70000"])
def test_a_bad_metrics_listen_is_a_config_error(tmp_path, address):
    with pytest.raises(ConfigError, match=r"broker\.yaml.*metrics\.listen.*is not host:port"):
        load(tmp_path, f"metrics.listen: '{address}'\n")
