"""Kafka's listener settings and per-listener TLS settings, parsed as Kafka reads them."""

from __future__ import annotations

import pytest

from broker.security.listeners import Listener, ListenerError, parse_listeners
from broker.security.tls import listener_lookup


def test_listeners_take_their_protocol_from_the_map_and_their_advertised_address_by_name():
    listeners = parse_listeners("PLAINTEXT://:9092,INTERNAL://127.0.0.1:9093,ssl://0.0.0.0:9094",
                                "SSL://kafka.example.com:443", "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,SSL:SSL")
    assert listeners == [
        Listener("PLAINTEXT", "PLAINTEXT", "0.0.0.0", 9092, "127.0.0.1", 9092),
        Listener("INTERNAL", "SSL", "127.0.0.1", 9093, "127.0.0.1", 9093),
        Listener("SSL", "SSL", "0.0.0.0", 9094, "kafka.example.com", 443),
    ]
    assert [listener.uses_tls for listener in listeners] == [False, True, True]


def test_a_bare_address_is_a_plaintext_listener_as_before():
    assert parse_listeners("127.0.0.1:9092", "", "") == [Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092,
                                                                  "127.0.0.1", 9092)]


@pytest.mark.parametrize(("listeners", "advertised", "key", "message"), [
    ("PLAINTEXT://h:1,SSL://h:1", "", "listeners", "port 1 is used by two listeners"),
    ("PLAINTEXT://h", "", "listeners", "is not NAME://host:port"),
    ("PLAIN TEXT://h:1", "", "listeners", "letters, digits and underscores"),
    ("", "", "listeners", "no listener given"),
])
def test_bad_listeners_name_the_setting(listeners, advertised, key, message):
    with pytest.raises(ListenerError, match=message) as caught:
        parse_listeners(listeners, advertised, "")
    assert caught.value.key == key


def test_a_listeners_own_tls_setting_wins_over_the_brokers():
    settings = {"ssl.keystore.location": "/broker.pem", "listener.name.internal.ssl.keystore.location": "/int.pem",
                "ssl.client.auth": "required"}
    internal, other = listener_lookup("INTERNAL", settings), listener_lookup("SSL", settings)
    assert internal("ssl.keystore.location") == ("listener.name.internal.ssl.keystore.location", "/int.pem")
    assert other("ssl.keystore.location") == ("ssl.keystore.location", "/broker.pem")
    assert internal("ssl.client.auth") == ("ssl.client.auth", "required")
    assert internal("ssl.truststore.location") == ("ssl.truststore.location", None)
