"""The cluster and consumer modules' aiokafka clients connect by the brokers their own metadata holds, refreshed
only when asked: ``follow_brokers`` asks when a Metadata reading lists other brokers. aiokafka asks a broker of its
choosing, which in a cluster may not list yet a broker another one already does; so the refresh is asked again
until the client knows every broker read, a few times at most (a CI run under load saw the monitor's first
ListOffsets to a broker that had come back fail, the client's refresh having found it missing)."""

from __future__ import annotations

from typing import Any

import pytest
from harness import free_port

from burrowpy.coordinators.codec_request import follow_brokers
from burrowpy.coordinators.kafka_client import brokers_only_client

pytestmark = pytest.mark.integration


async def test_follow_brokers_asks_again_while_the_client_lacks_a_broker_read_then_gives_up(broker):
    client = brokers_only_client([broker.bootstrap], {})
    await client.bootstrap()
    try:
        refreshes: list[int] = []
        refresh = client.force_metadata_update

        def counted() -> Any:
            refreshes.append(len(refreshes))
            return refresh()

        client.force_metadata_update = counted
        [(node_id, host, port)] = [(b.nodeId, b.host, b.port) for b in client.cluster.brokers()]
        read = [{"node_id": node_id, "host": host, "port": port}]
        assert not await follow_brokers(client, read)  # the brokers it knows: nothing asked
        assert refreshes == []
        # a broker the one answering the client does not list (yet), as another broker of a cluster may
        read.append({"node_id": node_id + 1, "host": "127.0.0.1", "port": free_port()})
        assert await follow_brokers(client, read)
        assert len(refreshes) > 1, "asked once: a broker the client does not know yet stays unknown until later"
        refreshes.clear()
        assert await follow_brokers(client, read, attempts=3, pause_s=0.01)
        assert len(refreshes) == 3  # and no more
        assert [b.nodeId for b in client.cluster.brokers()] == [node_id]
    finally:
        await client.close()
