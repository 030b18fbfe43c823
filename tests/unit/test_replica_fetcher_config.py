"""The replica fetcher's Kafka broker configs: read from the broker's YAML, checked as Kafka checks them."""

from __future__ import annotations

import re

import pytest

from broker.broker import Broker
from broker.cluster.replication import ReplicaManager, fetcher_id
from broker.config import BrokerConfig
from burrowpy.config import ConfigError

SET = {
    "replica.fetch.wait.max.ms": 2500,
    "replica.fetch.min.bytes": 4096,
    "replica.fetch.max.bytes": 65536,
    "replica.fetch.response.max.bytes": 131072,
    "replica.fetch.backoff.ms": 250,
    "replica.socket.timeout.ms": 5000,
    "replica.socket.receive.buffer.bytes": 262144,
}


def load(tmp_path, text: str) -> BrokerConfig:
    path = tmp_path / "broker.yaml"
    path.write_text(text)
    return BrokerConfig.load(path, data_dir=str(tmp_path / "data"))


def test_the_fetcher_takes_the_settings_of_the_config_file(tmp_path):
    config = load(tmp_path, "".join(f"{key}: {value}\n" for key, value in SET.items()) + "num.replica.fetchers: 3\n")
    assert config.inert == {}  # none is named among the configs without effect
    assert ReplicaManager(Broker(config)).fetcher_settings == SET
    assert config["num.replica.fetchers"] == 3


def test_kafkas_defaults_without_a_setting(tmp_path):
    assert ReplicaManager(Broker(load(tmp_path, "{}\n"))).fetcher_settings == {
        "replica.fetch.wait.max.ms": 500, "replica.fetch.min.bytes": 1, "replica.fetch.max.bytes": 1048576,
        "replica.fetch.response.max.bytes": 10485760, "replica.fetch.backoff.ms": 1000,
        "replica.socket.timeout.ms": 30000, "replica.socket.receive.buffer.bytes": -1,
    }


@pytest.mark.parametrize(("text", "key", "reason"), [
    ("replica.fetch.max.bytes: -1\n", "replica.fetch.max.bytes", "must be at least 0"),
    ("replica.fetch.response.max.bytes: -1\n", "replica.fetch.response.max.bytes", "must be at least 0"),
    ("replica.fetch.backoff.ms: -5\n", "replica.fetch.backoff.ms", "must be at least 0"),
    ("num.replica.fetchers: 0\n", "num.replica.fetchers", "must be at least 1"),
    ("replica.fetch.min.bytes: lots\n", "replica.fetch.min.bytes", "expected an integer"),
    ("replica.socket.receive.buffer.bytes: 0\n", "replica.socket.receive.buffer.bytes", "-1 for the operating"),
    # Kafka's two requirements on the time a follower's fetch may wait at the leader
    ("replica.fetch.wait.max.ms: 40000\nreplica.lag.time.max.ms: 60000\n", "replica.socket.timeout.ms",
     "must be at least replica.fetch.wait.max.ms"),
    ("replica.fetch.wait.max.ms: 4000\nreplica.lag.time.max.ms: 3000\n", "replica.fetch.wait.max.ms",
     "must be at most replica.lag.time.max.ms"),
])
def test_a_bad_fetcher_setting_is_a_config_error_naming_file_and_key(tmp_path, text, key, reason):
    with pytest.raises(ConfigError, match=rf"broker\.yaml.*{re.escape(key)}.*{re.escape(reason)}"):
        load(tmp_path, text)


@pytest.mark.parametrize(("topic", "partition", "fetchers", "expected"), [
    ("t", 0, 3, 2),  # 31 * 116 % 3
    # Kafka's own answers (Java's String.hashCode, overflowing, and a character outside ASCII)
    ("__consumer_offsets", 7, 5, 0),
    ("orders-é", 2, 3, 1),
    ("anything", 4, 1, 0),
])
def test_partitions_are_spread_over_the_fetchers_as_kafka_spreads_them(topic, partition, fetchers, expected):
    assert fetcher_id(topic, partition, fetchers) == expected
