import secrets
from pathlib import Path

import pytest

from broker.cluster.config import ClusterConfig
from broker.cluster.keys import HOW_TO_MAKE_ONE, derive_key, secret_problem
from broker.config import BrokerConfig
from burrowpy.config import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_each_purpose_gets_its_own_key_and_the_same_secret_gives_the_same_keys():
    secret = "a long enough shared secret for the tests"
    gossip, raft = derive_key(secret, "gossip"), derive_key(secret, "raft")
    assert gossip != raft
    assert len(gossip) == 32
    assert derive_key(secret.encode(), "gossip") == gossip
    assert derive_key(secret + "!", "gossip") != gossip
    assert secret.encode() not in gossip


def test_a_cluster_secret_needs_32_characters_and_not_the_samples_placeholder():
    assert secret_problem(secrets.token_hex(16)) is None  # 128 bits as hex: the shortest accepted
    assert secret_problem(secrets.token_urlsafe(32)) is None
    short = secret_problem("x" * 31)
    assert short is not None and "at least 32" in short and HOW_TO_MAKE_ONE in short
    for placeholder in (f"CHANGE-ME: make one with {HOW_TO_MAKE_ONE}", "change-me" * 5):
        problem = secret_problem(placeholder)
        assert problem is not None and "placeholder" in problem and HOW_TO_MAKE_ONE in problem


def test_the_sample_cluster_configs_hold_the_placeholder_and_are_refused():
    for path in sorted((ROOT / "config" / "cluster-3").glob("*.yaml")):
        config = BrokerConfig.load(path)
        with pytest.raises(ConfigError) as caught:
            ClusterConfig.from_section(config.cluster, config.node_id)
        assert (caught.value.file, caught.value.path) == (str(path), "cluster.secret")
        assert "placeholder" in str(caught.value)

