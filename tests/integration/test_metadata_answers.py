"""Metadata answers kept and used again (handlers.cluster_info): every change of what they say shows at once.

The handler keeps each topic's encoded entry and the whole every-topic answer while the topics, the cluster
metadata, the live brokers, the ACLs and the asker are the same; these tests change each of them between two
answers and look for the change, over the real handler and codec (a broker in process, no network)."""

from __future__ import annotations

import asyncio

import pytest

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.handlers import HANDLERS, RequestContext
from broker.protocol.api import ApiKey, decode_response, encode_response_chunks
from broker.security.acl import Acl, Operation, PatternType, Permission, ResourceType

EVERY_TOPIC = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False,
               "include_cluster_authorized_operations": False}


@pytest.fixture
def broker_factory(tmp_path):
    loop = asyncio.new_event_loop()
    started = []

    def make(authorizer: bool = False) -> Broker:
        config = BrokerConfig.load(None, listen="127.0.0.1:0", data_dir=str(tmp_path / f"data{len(started)}"))
        config.authorizer = authorizer
        broker = Broker(config)
        loop.run_until_complete(broker.start())
        started.append(broker)
        return broker

    make.loop = loop
    yield make
    for broker in started:
        loop.run_until_complete(broker.stop())
    loop.close()


def every_topic(loop, broker: Broker, principal: str = "User:ANONYMOUS", version: int = 12) -> dict[str, int]:
    """Topic name -> partition count (internal topics left out), from the encoded and decoded answer, as a
    client reads it."""
    ctx = RequestContext(broker.services, ApiKey.METADATA, version, 7, "test", "127.0.0.1", "PLAINTEXT",
                         None, principal)
    answer = loop.run_until_complete(HANDLERS[ApiKey.METADATA](ctx, dict(EVERY_TOPIC)))
    wire = b"".join(bytes(chunk) for chunk in encode_response_chunks(ApiKey.METADATA, version, 7, answer))
    decoded = decode_response(ApiKey.METADATA, version, wire[4:])[1]
    return {topic["name"]: len(topic["partitions"]) for topic in decoded["topics"] if not topic["is_internal"]}


def test_created_grown_and_deleted_topics_show_in_the_next_answer(broker_factory):
    loop, broker = broker_factory.loop, broker_factory()
    broker.create_topic("orders", 1, {})
    assert every_topic(loop, broker) == every_topic(loop, broker) == {"orders": 1}
    broker.create_topic("payments", 2, {})
    assert every_topic(loop, broker) == {"orders": 1, "payments": 2}
    broker.add_partitions("orders", 3)
    assert every_topic(loop, broker) == {"orders": 3, "payments": 2}
    assert every_topic(loop, broker, version=1) == {"orders": 3, "payments": 2}  # each version its own
    loop.run_until_complete(broker.delete_topic("payments"))
    assert every_topic(loop, broker) == {"orders": 3}


def test_each_asker_gets_what_the_acls_of_the_moment_let_them_see(broker_factory):
    loop, broker = broker_factory.loop, broker_factory(authorizer=True)
    broker.create_topic("orders", 1, {})
    broker.create_topic("payments", 1, {})
    assert every_topic(loop, broker, "User:alice") == {}
    alice_orders = Acl(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*", Operation.DESCRIBE,
                       Permission.ALLOW)
    broker.authorizer.store.add([alice_orders])
    assert every_topic(loop, broker, "User:alice") == {"orders": 1}
    assert every_topic(loop, broker, "User:bob") == {}
    broker.authorizer.store.add([alice_orders._replace(principal="User:bob", resource_name="pay",
                                                       pattern_type=PatternType.PREFIXED)])
    assert every_topic(loop, broker, "User:bob") == {"payments": 1}
    broker.authorizer.store.remove([alice_orders])
    assert every_topic(loop, broker, "User:alice") == {}
