"""Dynamic broker configs: which may change, how values are checked, the layers' order, persistence."""

from __future__ import annotations

import json

import pytest
from structlog.testing import capture_logs

from broker.config import BrokerConfig
from broker.config_loading import ConfigError
from broker.dynamic_config import (
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_BROKER,
    SOURCE_DYNAMIC_DEFAULT,
    SOURCE_STATIC,
    DynamicBrokerConfigs,
    check_value,
    is_dynamic,
    kafka_definition,
)
from broker.errors import ErrorCode, KafkaError
from tests.integration.tls_certs import CertificateAuthority


def config(tmp_path, text: str = "") -> BrokerConfig:
    path = tmp_path / "broker.yaml"
    path.write_text(text or "{}\n")
    return BrokerConfig.load(path, data_dir=str(tmp_path / "data"), node_id=7)


def test_what_kafka_lets_change_at_run_time():
    assert is_dynamic("log.retention.ms") and is_dynamic("num.io.threads") and is_dynamic("message.max.bytes")
    assert not is_dynamic("num.partitions") and not is_dynamic("log.retention.hours")
    assert is_dynamic("my.own.setting")  # custom names are kept, as Kafka keeps them


def test_layers_win_in_kafkas_order_and_reach_the_settings(tmp_path):
    dynamic = DynamicBrokerConfigs(config(tmp_path, "log.retention.bytes: 5000\n"), persist=False)
    changed = []
    dynamic.on_change.append(lambda: changed.append(dynamic.config["log.retention.ms"]))
    dynamic.update("", dynamic.prepare("", {"log.retention.ms": "3600000", "log.retention.bytes": "6000"},
                                       replace=False))
    dynamic.update("7", dynamic.prepare("7", {"log.retention.ms": "7200000"}, replace=False))
    assert changed == [3600000, 7200000]
    assert dynamic.config["log.retention.bytes"] == 6000
    assert dynamic.sources("log.retention.ms") == [
        ("log.retention.ms", "7200000", SOURCE_DYNAMIC_BROKER), ("log.retention.ms", "3600000", SOURCE_DYNAMIC_DEFAULT),
        ("log.retention.hours", "168", SOURCE_DEFAULT)]
    assert dynamic.sources("log.retention.bytes") == [
        ("log.retention.bytes", "6000", SOURCE_DYNAMIC_DEFAULT), ("log.retention.bytes", "5000", SOURCE_STATIC),
        ("log.retention.bytes", "-1", SOURCE_DEFAULT)]
    assert dynamic.sources("log.retention.ms", "") == [("log.retention.ms", "3600000", SOURCE_DYNAMIC_DEFAULT)]
    dynamic.update("7", dynamic.prepare("7", {"log.retention.ms": None}, replace=False))
    dynamic.update("", dynamic.prepare("", {}, replace=True))  # AlterConfigs: the whole layer
    assert dynamic.config["log.retention.ms"] == 7 * 24 * 3600 * 1000
    assert dynamic.config["log.retention.bytes"] == 5000


def test_a_single_node_keeps_its_layers_in_the_data_dir(tmp_path):
    first = DynamicBrokerConfigs(config(tmp_path), persist=True)
    first.update("", first.prepare("", {"message.max.bytes": "2000", "my.own.setting": "x"}, replace=False))
    first.saved.result(10)  # written off the caller's thread
    again = DynamicBrokerConfigs(config(tmp_path), persist=True)
    assert again.layers == {"": {"message.max.bytes": "2000", "my.own.setting": "x"}, "7": {}}
    assert again.config["message.max.bytes"] == 2000
    assert DynamicBrokerConfigs(config(tmp_path), persist=False).config["message.max.bytes"] == 1048588


@pytest.mark.parametrize(("name", "value", "message"), [
    ("message.max.bytes", "x", "Invalid value x for configuration message.max.bytes: Not a number of type INT"),
    ("log.retention.ms", "9" * 30, "Not a number of type LONG"),
    ("log.cleaner.min.cleanable.ratio", "half", "Not a number of type DOUBLE"),
    ("unclean.leader.election.enable", "yes", "Expected value to be either true or false"),
    ("log.cleanup.policy", "shred", "String must be one of: compact, delete"),
    ("num.network.threads", "0", "Value must be at least 1"),
    ("log.segment.bytes", "1000", "Value must be at least 1048576"),
    ("leader.replication.throttled.rate", "fast", "Not a number of type LONG"),
    ("follower.replication.throttled.rate", "-1", "Invalid value -1 for configuration "
                                                  "follower.replication.throttled.rate: Value must be at least 0"),
    # dynamic keys this broker accepts without using them (README's inert list) are checked as Kafka's too
    ("remote.fetch.max.wait.ms", "soon", "Not a number of type INT"),
    ("sasl.login.refresh.window.factor", "big", "Not a number of type DOUBLE"),
    ("follower.fetch.last.tiered.offset.enable", "maybe", "Expected value to be either true or false"),
])
def test_bad_values_are_refused_in_kafkas_words(name, value, message):
    with pytest.raises(KafkaError, match=message) as err:
        check_value(name, value)
    assert err.value.code == ErrorCode.INVALID_REQUEST


def test_refusals(tmp_path):
    dynamic = DynamicBrokerConfigs(config(tmp_path), persist=False)
    for scope, updates, message in (
            ("", {"num.partitions": "3", "node.id": "2"}, r"Cannot update these configs dynamically: \[node.id, "
                                                          r"num.partitions\]"),
            ("", {"ssl.keystore.location": "/x"}, "only per-listener"),
            ("", {"listeners": "PLAINTEXT://:9093"}, "broker id must be specified: \\[listeners\\]"),
            ("7", {"principal.builder.class": "x.Y"}, "cannot change at run time on this broker")):
        with pytest.raises(KafkaError, match=message):
            dynamic.prepare(scope, updates, replace=False)
    for name, described, message in (("8", False, "expected 7, but received 8"),
                                     ("8", True, "expected 7 or empty string, but received 8"),
                                     ("x", False, "Node id must be an integer, but it is: x")):
        with pytest.raises(KafkaError, match=message):
            dynamic.scope_of(name, describing=described)
    assert (dynamic.scope_of(""), dynamic.scope_of("7")) == ("", "7")
    throttled = {"leader.replication.throttled.rate": "200000", "follower.replication.throttled.rate": " 300000"}
    assert dynamic.prepare("7", throttled, replace=False) == {"leader.replication.throttled.rate": "200000",
                                                              "follower.replication.throttled.rate": "300000"}
    dynamic.update("7", {"leader.replication.throttled.rate": "200000"})
    assert dynamic.prepare("7", {"leader.replication.throttled.rate": None}, replace=False) == {}  # --verify clears it


def test_list_operations_start_from_what_the_scope_sees(tmp_path):
    dynamic = DynamicBrokerConfigs(config(tmp_path, "log.cleanup.policy: compact\n"), persist=False)
    assert dynamic.current("", "log.cleanup.policy") == "compact"
    dynamic.update("", {"log.cleanup.policy": "compact,delete"})
    assert dynamic.current("7", "log.cleanup.policy") == "compact,delete"
    dynamic.update("7", {"log.cleanup.policy": "delete"})
    assert dynamic.current("", "log.cleanup.policy") == "compact,delete"
    assert dynamic.current("7", "log.cleanup.policy") == "delete"


def test_the_default_synonym_is_the_default_this_broker_runs_with(tmp_path):
    """Where burrowpy's default differs from Kafka's, DescribeConfigs' DEFAULT_CONFIG synonym names ours: the
    value a client is shown and the default it is told about agree."""
    dynamic = DynamicBrokerConfigs(config(tmp_path), persist=False)
    for name, ours in (("socket.receive.buffer.bytes", "-1"), ("socket.send.buffer.bytes", "-1"),
                       ("offsets.topic.replication.factor", "1"),
                       ("transaction.state.log.replication.factor", "1")):
        assert str(dynamic.value(name)) == ours
        assert dynamic.sources(name) == [(name, ours, SOURCE_DEFAULT)]
    # Kafka's own default where ours is Kafka's, and for configs that have no effect here
    assert dynamic.sources("num.io.threads") == [("num.io.threads", "8", SOURCE_DEFAULT)]
    assert dynamic.sources("message.max.bytes") == [("message.max.bytes", "1048588", SOURCE_DEFAULT)]
    # with a value in the YAML, the default still follows it
    dynamic = DynamicBrokerConfigs(config(tmp_path, "socket.send.buffer.bytes: 65536\n"), persist=False)
    assert dynamic.sources("socket.send.buffer.bytes") == [
        ("socket.send.buffer.bytes", "65536", SOURCE_STATIC), ("socket.send.buffer.bytes", "-1", SOURCE_DEFAULT)]


def test_the_cleaners_dynamic_settings_are_checked_and_reach_the_broker(tmp_path):
    dynamic = DynamicBrokerConfigs(config(tmp_path), persist=False)
    assert not is_dynamic("log.cleaner.enable")  # read-only on Kafka too
    for name, value in (("log.cleaner.io.buffer.load.factor", "1.5"), ("log.cleaner.io.max.bytes.per.second", "0"),
                        ("log.cleaner.io.buffer.size", "-1")):
        with pytest.raises(KafkaError, match=f"Invalid value .* for configuration {name}"):
            dynamic.prepare("", {name: value}, replace=False)
    dynamic.update("", dynamic.prepare("", {"log.cleaner.dedupe.buffer.size": "2097152",
                                            "log.cleaner.io.max.bytes.per.second": "5000.5"}, replace=False))
    assert dynamic.config["log.cleaner.dedupe.buffer.size"] == 2097152
    assert dynamic.config["log.cleaner.io.max.bytes.per.second"] == 5000.5
    assert DynamicBrokerConfigs.default("log.cleaner.io.max.bytes.per.second") == "1.7976931348623157E308"  # Kafka's spelling


SASL_BROKER = """\
listeners: PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0
sasl.enabled.mechanisms: PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config: >-
  org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";
"""
JAAS_KEY = "listener.name.sasl_plaintext.plain.sasl.jaas.config"


def test_listener_settings_are_typed_as_the_configs_they_set():
    assert kafka_definition("listener.name.ssl.ssl.keystore.password") == kafka_definition("ssl.keystore.password")
    assert kafka_definition("listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config")[3]  # sensitive
    assert is_dynamic("listener.name.ssl.ssl.keystore.location")
    assert not is_dynamic("listener.name.ssl.ssl.allow.dn.changes")  # read-only, as the config it sets


def test_a_sasl_listener_takes_a_new_jaas_line_checked_first_and_keeps_it_over_a_restart(tmp_path):
    first = DynamicBrokerConfigs(config(tmp_path, SASL_BROKER), persist=True)
    with pytest.raises(KafkaError) as refused:  # Kafka takes listener settings for one broker only
        first.prepare("", {JAAS_KEY: "x"}, replace=False)
    assert refused.value.message.startswith("Cannot update these configs at default cluster level")
    with pytest.raises(KafkaError) as refused:
        first.prepare("7", {JAAS_KEY: "org.apache.kafka.common.security.plain.PlainLoginModule required;"},
                      replace=False)
    assert refused.value.code == ErrorCode.INVALID_REQUEST and "no user_<name>" in refused.value.message
    assert first.config.sasl_settings["SASL_PLAINTEXT"].plain_users == {"alice": "alice-secret"}
    line = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="bob-secret";'
    kerberos = "sasl.kerberos.min.time.before.relogin"
    with capture_logs() as logs:
        first.update("7", first.prepare("7", {JAAS_KEY: line, kerberos: "58000"}, replace=False))
    assert first.config.sasl_settings["SASL_PLAINTEXT"].plain_users == {"bob": "bob-secret"}
    # kept and described, and named as having no effect (no Kerberos here); the JAAS line is not
    assert [entry["keys"] for entry in logs if entry["event"].endswith("have no effect in burrowpy")] == [[kerberos]]
    first.saved.result(10)
    again = DynamicBrokerConfigs(config(tmp_path, SASL_BROKER), persist=True)
    assert again.config.sasl_settings["SASL_PLAINTEXT"].plain_users == {"bob": "bob-secret"}
    # the file's setting is described as the file's (the handler hides the line: sensitive)
    assert again.value("sasl.enabled.mechanisms") == "PLAIN"
    assert again.sources("sasl.enabled.mechanisms")[0] == ("sasl.enabled.mechanisms", "PLAIN", SOURCE_STATIC)


LISTENING = "listeners: PLAINTEXT://127.0.0.1:0\n"


def test_listeners_are_checked_as_kafka_checks_them(tmp_path):
    """A listener needs a protocol in the map, the inter-broker listener stays, a running listener keeps its
    protocol and address: each refused with nothing changed (one that cannot bind: tests/integration)."""
    dynamic = DynamicBrokerConfigs(config(tmp_path, LISTENING), persist=False)
    running = list(dynamic.config.listeners)
    for updates, message in (
            ({"listeners": "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0"}, "No security protocol defined for listener EXTRA"),
            ({"listeners": "EXTRA://127.0.0.1:0", "listener.security.protocol.map": "EXTRA:PLAINTEXT"},
             "Advertised listener must be specified for inter-broker listener PLAINTEXT"),
            ({"listener.security.protocol.map": "PLAINTEXT:SSL"},
             r"Security protocol cannot be updated for existing listener ListenerName\(PLAINTEXT\)"),
            ({"listeners": "PLAINTEXT://127.0.0.1:1"}, "address of existing listener PLAINTEXT cannot be updated")):
        with pytest.raises(KafkaError, match=message) as err:
            dynamic.prepare("7", updates, replace=False)
        assert err.value.code == ErrorCode.INVALID_REQUEST
    assert dynamic.config.listeners == running


def test_a_listener_added_is_stored_and_built_with_its_security(tmp_path):
    """The listener set of the layers reaches the config the broker serves from, with a SASL listener's
    settings from the same change, and comes back after a restart (checked by prepare() in
    tests/integration/test_broker_sasl.py, where a port can be bound)."""
    dynamic = DynamicBrokerConfigs(config(tmp_path, LISTENING), persist=True)
    layer = {"listeners": "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0",
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:SASL_PLAINTEXT",
             "advertised.listeners": "EXTRA://broker.example:9999", "sasl.enabled.mechanisms": "PLAIN",
             "listener.name.extra.plain.sasl.jaas.config":
                 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'}
    dynamic.update("7", layer)
    assert [(x.name, x.protocol, x.advertised_host, x.advertised_port) for x in dynamic.config.listeners] == [
        ("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 0), ("EXTRA", "SASL_PLAINTEXT", "broker.example", 9999)]
    assert set(dynamic.config.sasl_settings) == {"EXTRA"}
    dynamic.saved.result(10)
    again = DynamicBrokerConfigs(config(tmp_path, LISTENING), persist=True)
    assert [x.name for x in again.config.listeners] == ["PLAINTEXT", "EXTRA"]
    assert set(again.config.sasl_settings) == {"EXTRA"}
    dynamic.update("7", dynamic.prepare("7", {"listeners": None, "listener.security.protocol.map": None,
                                              "advertised.listeners": None}, replace=False))
    assert [x.name for x in dynamic.config.listeners] == ["PLAINTEXT"]
    assert dynamic.config.sasl_settings == {}


BOB = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="bob-secret";'
SECRET = "password.encoder.secret: an-encoder-secret-of-this-broker\n"


def test_a_dynamic_password_needs_password_encoder_secret(tmp_path):
    """As Kafka (KIP-226) refuses it: a password config is stored only encoded, and never at the cluster default
    (every broker reads that one with its own secret)."""
    dynamic = DynamicBrokerConfigs(config(tmp_path, SASL_BROKER), persist=True)
    layer = dynamic.prepare("7", {JAAS_KEY: BOB}, replace=False)
    with pytest.raises(KafkaError) as refused:
        dynamic.persistent("7", layer)
    assert (refused.value.code, refused.value.message) == (ErrorCode.INVALID_CONFIG, (
        "Invalid config value for resource ConfigResource(type=BROKER, name='7'): Password encoder secret not "
        "configured"))
    with pytest.raises(KafkaError, match="Password config can be defined only at broker level"):
        DynamicBrokerConfigs(config(tmp_path, SASL_BROKER + SECRET), persist=False).persistent(
            "", {"my.ssl.keystore.password": "x"})
    assert dynamic.persistent("7", {"message.max.bytes": "2000"}) == {"message.max.bytes": "2000"}
    assert not is_dynamic("password.encoder.secret") and not is_dynamic("password.encoder.iterations")


def test_dynamic_passwords_are_stored_encrypted_and_read_back_after_a_restart(tmp_path):
    first = DynamicBrokerConfigs(config(tmp_path, SASL_BROKER + SECRET), persist=True)
    first.update("7", first.persistent("7", first.prepare("7", {JAAS_KEY: BOB}, replace=False)))
    assert first.config.sasl_settings["SASL_PLAINTEXT"].plain_users == {"bob": "bob-secret"}
    assert first.layers["7"] == {JAAS_KEY: BOB}
    first.saved.result(10)
    stored = (tmp_path / "data" / "dynamic-broker-configs.json").read_bytes()
    assert b"bob" not in stored and b"PlainLoginModule" not in stored
    assert b"cipherAlgorithm:AES/GCM/NoPadding" in stored
    again = DynamicBrokerConfigs(config(tmp_path, SASL_BROKER + SECRET), persist=True)
    assert again.config.sasl_settings["SASL_PLAINTEXT"].plain_users == {"bob": "bob-secret"}
    # another secret cannot read it: named, left out, and the file's JAAS line serves
    with capture_logs() as logs:
        other = DynamicBrokerConfigs(config(tmp_path, SASL_BROKER + "password.encoder.secret: another\n"),
                                     persist=True)
    assert other.layers["7"] == {}
    assert other.config.sasl_settings["SASL_PLAINTEXT"].plain_users == {"alice": "alice-secret"}
    assert [entry["config"] for entry in logs if "does not decode" in entry["event"]] == [JAAS_KEY]
    # the secret changed as Kafka has it done: the old one given as password.encoder.old.secret
    renewed = DynamicBrokerConfigs(config(tmp_path, SASL_BROKER + "password.encoder.secret: the-new-one\n"
                                   "password.encoder.old.secret: an-encoder-secret-of-this-broker\n"), persist=True)
    assert renewed.config.sasl_settings["SASL_PLAINTEXT"].plain_users == {"bob": "bob-secret"}
    renewed.saved.result(10)
    after = DynamicBrokerConfigs(config(tmp_path, SASL_BROKER + "password.encoder.secret: the-new-one\n"),
                                 persist=True)
    assert after.config.sasl_settings["SASL_PLAINTEXT"].plain_users == {"bob": "bob-secret"}


def test_passwords_an_older_broker_kept_in_the_clear_are_encrypted_once_a_secret_is_set(tmp_path):
    (tmp_path / "data").mkdir()
    path = tmp_path / "data" / "dynamic-broker-configs.json"
    path.write_text(json.dumps({"": {}, "7": {JAAS_KEY: BOB}}))
    dynamic = DynamicBrokerConfigs(config(tmp_path, SASL_BROKER + SECRET), persist=True)
    assert dynamic.config.sasl_settings["SASL_PLAINTEXT"].plain_users == {"bob": "bob-secret"}
    dynamic.saved.result(10)
    assert b"bob" not in path.read_bytes()


def test_a_stored_password_moved_to_another_config_or_changed_does_not_decode(tmp_path):
    dynamic = DynamicBrokerConfigs(config(tmp_path, SASL_BROKER + SECRET), persist=False)
    stored = dynamic.persistent("7", {JAAS_KEY: BOB})[JAAS_KEY]
    other_key = "listener.name.sasl_ssl.plain.sasl.jaas.config"
    flipped = stored[:-6] + ("A" if stored[-6] != "A" else "B") + stored[-5:]
    assert dynamic._decoded({other_key: stored, JAAS_KEY: flipped}) == ({}, False)
    assert dynamic._decoded({JAAS_KEY: stored}) == ({JAAS_KEY: BOB}, False)


@pytest.mark.parametrize(("setting", "message"), [
    ("password.encoder.cipher.algorithm: AES/CBC/PKCS5Padding", "authenticated ciphers only"),
    ("password.encoder.key.length: 100", "takes keys of 128 or 192 or 256 bits"),
    ("password.encoder.iterations: 10", "must be at least 1024"),
    ("password.encoder.keyfactory.algorithm: MD5", "is not available"),
    ("password.encoder.old.secret: x", "needs password.encoder.secret set too"),
])
def test_password_encoder_settings_that_cannot_work_are_refused_at_start(tmp_path, setting, message):
    with pytest.raises(ConfigError, match=message) as refused:
        config(tmp_path, setting + "\n")
    assert setting.partition(":")[0] in str(refused.value)


def test_the_inter_broker_listener_takes_new_stores_only_when_old_and_new_trust_each_other(tmp_path):
    """Kafka's handshake check before the listener brokers reach each other on switches keystore or truststore:
    a certificate of a CA the running truststore does not hold is refused (brokers still on the old stores
    could not reach this one); trusting both CAs first, then switching, is the way through."""
    ca, other = CertificateAuthority(tmp_path / "ca"), CertificateAuthority(tmp_path / "other", "another CA")
    running = ca.issue("broker")
    dynamic = DynamicBrokerConfigs(config(tmp_path, (
        f"listeners: SSL://127.0.0.1:0\nssl.keystore.type: PEM\nssl.keystore.location: {running.store}\n"
        f"ssl.truststore.type: PEM\nssl.truststore.location: {ca.path}\n")), persist=False)
    keystore, truststore = "listener.name.ssl.ssl.keystore.location", "listener.name.ssl.ssl.truststore.location"
    foreign = other.issue("broker", stem="foreign")  # the same subject and names, from the other CA
    with pytest.raises(KafkaError) as refused:
        dynamic.prepare("7", {keystore: str(foreign.store)}, replace=False)
    assert refused.value.code == ErrorCode.INVALID_REQUEST
    assert ("Validation of dynamic config update of SSLFactory failed: javax.net.ssl.SSLHandshakeException: "
            "CERTIFICATE_VERIFY_FAILED") in refused.value.message
    dynamic.update("7", dynamic.prepare("7", {keystore: str(ca.issue("broker", stem="renewed").store)}, replace=False))
    both = tmp_path / "both.pem"
    both.write_bytes(ca.pem + other.pem)
    dynamic.update("7", dynamic.prepare("7", {truststore: str(both)}, replace=False))
    dynamic.update("7", dynamic.prepare("7", {keystore: str(foreign.store)}, replace=False))
    assert dynamic.layers["7"] == {keystore: str(foreign.store), truststore: str(both)}
