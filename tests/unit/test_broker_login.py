"""The inter-broker login (broker.security.broker_login): a broker of the cluster proves itself at its current
broker epoch; another secret, a stale or fenced epoch, or a replayed proof gets nowhere."""

from __future__ import annotations

import pytest

from broker.cluster.keys import derive_key
from broker.security.broker_login import (
    BrokerCredential,
    BrokerIdentity,
    BrokerLoginClient,
    BrokerLoginError,
    BrokerLoginServer,
)

KEY = derive_key("the cluster secret", "inter-broker")
EPOCHS = {1: 7, 2: 9}  # registered, unfenced brokers and their epochs


def log_in(credential: BrokerCredential, server_key: bytes = KEY) -> BrokerIdentity:
    client, server = BrokerLoginClient(credential), BrokerLoginServer(server_key, EPOCHS.get)
    identity, server_final = server.final(client.final(server.first(client.first())))
    client.verify(server_final)
    return identity


def test_a_broker_at_its_current_epoch_logs_in_and_both_sides_are_proven():
    assert log_in(BrokerCredential(2, 9, KEY)) == BrokerIdentity(2, 9)


@pytest.mark.parametrize(("credential", "reason"), [
    (BrokerCredential(2, 9, derive_key("another secret", "inter-broker")), "proof does not match"),
    (BrokerCredential(2, 8, KEY), "epoch 8 but is at broker epoch 9"),
    (BrokerCredential(3, 0, KEY), "not a registered, unfenced broker"),
])
def test_another_secret_a_stale_epoch_or_an_unregistered_broker_is_refused(credential, reason):
    with pytest.raises(BrokerLoginError, match=reason):
        log_in(credential)


def test_a_server_without_the_secret_is_found_out_by_the_client():
    """It cannot make the server proof, whatever it sends."""
    client = BrokerLoginClient(BrokerCredential(1, 7, KEY))
    client.final(BrokerLoginServer(derive_key("another secret", "inter-broker"), EPOCHS.get).first(client.first()))
    with pytest.raises(BrokerLoginError, match="server's proof"):
        client.verify(bytes(32))


def test_a_proof_seen_on_the_wire_does_not_open_another_login():
    client = BrokerLoginClient(BrokerCredential(1, 7, KEY))
    seen_first = client.first()
    seen_proof = client.final(BrokerLoginServer(KEY, EPOCHS.get).first(seen_first))
    replayed = BrokerLoginServer(KEY, EPOCHS.get)  # a new connection: a new server nonce
    replayed.first(seen_first)
    with pytest.raises(BrokerLoginError, match="proof does not match"):
        replayed.final(seen_proof)


def test_malformed_messages_are_refused():
    with pytest.raises(BrokerLoginError):
        BrokerLoginServer(KEY, EPOCHS.get).first(b"short")
    with pytest.raises(BrokerLoginError):
        BrokerLoginClient(BrokerCredential(1, 7, KEY)).final(b"not a nonce")
