"""One cluster's whole-cluster Metadata readings serve both the cluster module's refresh and topic health.

At fleet scale each reading is the decode of tens of thousands of partitions. The cluster module's topics and
leaders come from the newest reading, topic health's included; it makes one of its own only when none was
started in the last ``topic-refresh`` seconds. The whole monitor runs in this process (``burrowpy.daemon.Monitor``)
against our broker; the Metadata requests its cluster module's client sends are counted."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import structlog
from burrow_support import in_process_config
from confluent_kafka.admin import AdminClient, NewTopic
from harness import free_port, unique_name

from broker.protocol.api import ApiKey
from burrowpy.config import parse_config
from burrowpy.coordinators.codec_request import CodecRequest
from burrowpy.daemon import Monitor

pytestmark = pytest.mark.integration

# Topic health reads every second; the cluster module's topics are due three seconds after the reading they came
# from was started, so a loaded machine (a reading that takes most of a second, a late sleep) still leaves a
# health reading in every gap: with two, one CI run saw two readings of the cluster module's own in the window.
OFFSET_REFRESH, TOPIC_REFRESH, HEALTH_REFRESH = 1, 3, 1
WATCHED_S = 10.0


def config(bootstrap: str, port: int) -> dict[str, Any]:
    return in_process_config(bootstrap, port, **{"offset-refresh": OFFSET_REFRESH, "topic-refresh": TOPIC_REFRESH,
                                                 "topic-health-refresh": HEALTH_REFRESH})


async def test_topic_healths_readings_serve_the_cluster_modules_refresh_no_staler(broker):
    """Topic health reads every second, the cluster module's topics are due every three: before, each made its own
    readings (about 1.33 a second: three more in the window); now topic health's serve both (about one a second). A
    topic created while watched is still in the cluster module's topics within topic-refresh + offset-refresh (and a
    reading's time)."""
    topic = unique_name("readings")
    monitor = Monitor(parse_config(config(broker.bootstrap, free_port()), "burrowpy.yaml", {}), structlog.get_logger())
    await monitor.start()
    try:
        cluster = monitor.ctx.modules["cluster"]["local"]
        client = cluster._client
        sent: list[float] = []
        send = client.send

        async def counting_send(node_id: int, request: Any, **kwargs: Any) -> Any:
            if isinstance(request, CodecRequest) and request.api_key == ApiKey.METADATA:
                sent.append(time.monotonic())
            return await send(node_id, request, **kwargs)

        client.send = counting_send
        # the readings seen, held (an id of a reading let go may be reused by the next one, which an id set would
        # count once: the test then saw fewer readings than were made)
        health_readings: list[Any] = []
        created_at: float | None = None
        known_after: float | None = None
        began = time.monotonic()
        while (now := time.monotonic()) - began < WATCHED_S:
            if cluster.health is not None and not any(cluster.health is seen for seen in health_readings):
                health_readings.append(cluster.health)
            if created_at is None and now - began > 2:
                admin = AdminClient({"bootstrap.servers": broker.bootstrap})
                for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
                    await asyncio.to_thread(future.result, 30)
                created_at = time.monotonic()
            if created_at is not None and known_after is None and topic in cluster.topics:
                known_after = time.monotonic() - created_at
            await asyncio.sleep(0.05)
    finally:
        await monitor.stop()
    assert len(health_readings) >= WATCHED_S / HEALTH_REFRESH - 2, health_readings
    # one request per topic-health reading, and perhaps one of the cluster module's at an edge of the window
    # (before: three more, the cluster module's every three seconds)
    assert len(sent) <= len(health_readings) + 1, (len(sent), len(health_readings))
    assert known_after is not None and known_after <= TOPIC_REFRESH + OFFSET_REFRESH + 1, known_after
