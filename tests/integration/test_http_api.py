"""Burrow's HTTP API through aiohttp's test client, over the real storage, evaluator and module classes
(built, not started: nothing here talks to Kafka). The clock is fake."""

from __future__ import annotations

import io
import json
import socket

import pytest
from aiohttp.test_utils import TestClient, TestServer

from burrowpy.config import parse_config
from burrowpy.context import ApplicationContext
from burrowpy.coordinators.base import Coordinator
from burrowpy.daemon import module_classes
from burrowpy.evaluator.share import SharePartitionOffset
from burrowpy.httpserver import build_app
from burrowpy.logging import LogControl
from burrowpy.protocol import SetBrokerOffset, SetConsumerOffset

NOW = 1_700_000_000
HOST = socket.gethostname()

CONFIG = {
    "general": {"access-control-allow-origin": "dash.example.com"},
    "logging": {"level": "warn"},
    "zookeeper": {"servers": ["zk1:2181"], "timeout": 8, "root-path": "/monitor"},
    "client-profile": {"prod": {"client-id": "lagcheck", "kafka-version": "3.6.0"}},
    "httpserver": {"main": {"address": ":8000"}, "admin": {"address": "127.0.0.1:8001", "timeout": 30}},
    "storage": {"default": {"class-name": "inmemory", "intervals": 10}},
    "cluster": {
        "local": {
            "class-name": "kafka",
            "servers": ["k1:9092"],
            "client-profile": "prod",
            "offset-refresh": 30,
        },
        "remote": {"class-name": "kafka", "servers": ["k2:9092"]},
    },
    "consumer": {
        "local": {
            "class-name": "kafka",
            "cluster": "local",
            "servers": ["k1:9092"],
            "group-allowlist": "^(healthy|stuck)$",
        }
    },
}


class FakeClock:
    def __init__(self) -> None:
        self.now = float(NOW)

    def time(self) -> float:
        return self.now


@pytest.fixture
async def ctx():
    config = parse_config(CONFIG, "burrowpy.yaml", {})
    log_control = LogControl(config.logging, stream=io.StringIO(), name="burrowpy.test_http_api")
    ctx = ApplicationContext(
        config=config, logger=log_control.logger, clock=FakeClock(), log_control=log_control
    )
    classes = module_classes()
    coordinators = [Coordinator("storage", ctx, classes["storage"], default_class="inmemory")]
    ctx.storage = coordinators[0].modules["default"]
    coordinators.append(Coordinator("evaluator", ctx, classes["evaluator"], default_class="caching"))
    ctx.evaluator = coordinators[1].modules["default"]
    for kind in ("cluster", "consumer"):
        Coordinator(kind, ctx, classes[kind])  # built for /v3/config and /v3/kafka/:cluster, never started
    for coordinator in coordinators:
        await coordinator.start()
    storage = ctx.storage
    # A minute earlier orders:0 was empty: "stuck" sits at offset 500, appended about 30 s ago by interpolation.
    storage.submit(SetBrokerOffset("local", "orders", 0, 2, 0, (NOW - 60) * 1000))
    for partition, offset in ((0, 1000), (1, 2000)):
        storage.submit(SetBrokerOffset("local", "orders", partition, 2, offset, NOW * 1000))
    storage.submit(SetBrokerOffset("local", "audit", 0, 1, 42, NOW * 1000))
    await storage.flush()
    for i in range(10):
        timestamp = (NOW - 100 + i * 10) * 1000
        # "healthy" reaches the end of both partitions; "stuck" commits the same offset with lag 500.
        storage.submit(SetConsumerOffset("local", "healthy", "orders", 0, 100 + i * 100, 10 + i, timestamp))
        storage.submit(SetConsumerOffset("local", "healthy", "orders", 1, 1100 + i * 100, 10 + i, timestamp))
        storage.submit(SetConsumerOffset("local", "stuck", "orders", 0, 500, 30 + i, timestamp))
    await storage.flush()
    yield ctx
    for coordinator in reversed(coordinators):
        await coordinator.stop()
    log_control.close()


@pytest.fixture
async def client(ctx):
    async with TestClient(TestServer(build_app(ctx))) as test_client:
        yield test_client


async def get_json(client, path, method="GET", status=200, **kwargs):
    response = await client.request(method, path, **kwargs)
    assert response.status == status, await response.text()
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Access-Control-Allow-Origin"] == "dash.example.com"
    return json.loads(await response.text())


JSON = {"Content-Type": "application/json"}


def request_info(path):
    return {"url": path, "host": HOST}


async def test_admin_and_readiness(client, ctx):
    response = await client.get("/burrow/admin")
    assert (response.status, await response.text()) == (200, "GOOD")
    assert response.headers["Access-Control-Allow-Origin"] == "dash.example.com"
    response = await client.get("/burrow/admin/ready")
    assert (response.status, await response.text()) == (503, "STARTING")
    ctx.app_ready.set()
    response = await client.get("/burrow/admin/ready")
    assert (response.status, await response.text()) == (200, "READY")


async def test_cluster_list_and_detail(client):
    assert await get_json(client, "/v3/kafka") == {
        "error": False,
        "message": "cluster list returned",
        "clusters": ["local", "remote"],
        "request": request_info("/v3/kafka"),
    }
    detail = await get_json(client, "/v3/kafka/local")
    assert detail["message"] == "cluster module detail returned"
    assert detail["module"] == {
        "class-name": "kafka",
        "servers": ["k1:9092"],
        "topic-refresh": 60,
        "offset-refresh": 30,
        "client-profile": {
            "name": "prod",
            "client-id": "lagcheck",
            "kafka-version": "3.6.0",
            "tls": None,
            "sasl": None,
        },
    }
    assert await get_json(client, "/v3/config/cluster/local") == {
        **detail,
        "request": request_info("/v3/config/cluster/local"),
    }
    assert await get_json(client, "/v3/kafka/nowhere", status=404) == {
        "error": True,
        "message": "cluster module not found",
        "request": request_info("/v3/kafka/nowhere"),
    }


async def test_topics(client):
    assert (await get_json(client, "/v3/kafka/local/topic"))["topics"] == ["audit", "orders"]
    body = await get_json(client, "/v3/kafka/local/topic/orders")
    assert (body["message"], body["offsets"]) == ("topic offsets returned", [1000, 2000])
    assert list(body) == ["error", "message", "offsets", "health", "request"] and body["health"] is None
    body = await get_json(client, "/v3/kafka/local/topic/orders/consumers")
    assert (body["message"], body["consumers"]) == ("consumers of topic returned", ["healthy", "stuck"])
    assert (await get_json(client, "/v3/kafka/local/topic/audit/consumers"))["consumers"] == []
    for path, message in (
        ("/v3/kafka/nowhere/topic", "cluster not found"),
        ("/v3/kafka/local/topic/missing", "cluster or topic not found"),
        ("/v3/kafka/nowhere/topic/orders", "cluster or topic not found"),
        ("/v3/kafka/nowhere/topic/orders/consumers", "cluster not found"),
    ):
        body = await get_json(client, path, status=404)
        assert (body["error"], body["message"]) == (True, message)


async def test_topic_health_in_the_topic_detail_and_metrics(client, ctx):
    from burrowpy.coordinators.topic_health import ClusterHealth, PartitionHealth

    module = ctx.modules["cluster"]["local"]
    module.log_ends.update({("orders", 0): 1000, ("orders", 1): 2000})
    module.health = ClusterHealth(NOW * 1000, frozenset({1, 2}), {
        "orders": [PartitionHealth(1, (1, 2, 3), (1, 2), (3,), low_watermark=10, size_bytes=4096),
                   PartitionHealth(-1, (3,), (3,), (3,))],
        "audit": [PartitionHealth(2, (2, 1), (2, 1), low_watermark=0, size_bytes=100)],
    }, {"orders": 2, "audit": 1})
    body = await get_json(client, "/v3/kafka/local/topic/orders")
    assert body["offsets"] == [1000, 2000]  # Burrow's fields as they were
    health = body["health"]
    # orders/0 went from 0 to 1000 in the minute of its two samples; orders/1 has one sample: no rate
    assert health["partitions"] == [
        {"partition": 0, "leader": 1, "replicas": [1, 2, 3], "isr": [1, 2], "offline_replicas": [3],
         "high_watermark": 1000, "low_watermark": 10, "produce_rate": pytest.approx(1000 / 60), "size_bytes": 4096,
         "under_replicated": True, "under_min_isr": False, "offline": False},
        {"partition": 1, "leader": -1, "replicas": [3], "isr": [3], "offline_replicas": [3],
         "high_watermark": 2000, "low_watermark": None, "produce_rate": None, "size_bytes": None,
         "under_replicated": False, "under_min_isr": True, "offline": True}]
    assert {key: value for key, value in health.items() if key != "partitions"} == {
        "read_at": NOW * 1000, "min_insync_replicas": 2, "size_bytes": None, "produce_rate": None,
        "under_replicated": 1, "under_min_isr": 1, "offline": 1}
    assert (await get_json(client, "/v3/kafka/local/topic/audit"))["health"]["size_bytes"] == 100

    series = burrow_series(scrape_samples(await (await client.get("/metrics")).text()))
    assert series["burrow_kafka_cluster_under_replicated_partitions"] == {("local",): 1}
    assert series["burrow_kafka_cluster_under_min_isr_partitions"] == {("local",): 1}
    assert series["burrow_kafka_cluster_offline_partitions"] == {("local",): 1}
    assert series["burrow_kafka_cluster_brokers"] == {("local",): 2}
    assert series["burrow_kafka_topic_partition_leader"] == {
        ("local", "0", "audit"): 2, ("local", "0", "orders"): 1, ("local", "1", "orders"): -1}
    assert series["burrow_kafka_topic_partition_in_sync_replicas"][("local", "0", "orders")] == 2
    assert series["burrow_kafka_topic_partition_replicas"][("local", "0", "orders")] == 3
    assert series["burrow_kafka_topic_partition_under_replicated"][("local", "0", "orders")] == 1
    assert series["burrow_kafka_topic_partition_low_watermark"] == {("local", "0", "audit"): 0,
                                                                    ("local", "0", "orders"): 10}
    assert series["burrow_kafka_topic_partition_size_bytes"] == {("local", "0", "audit"): 100,
                                                                 ("local", "0", "orders"): 4096}
    assert series["burrow_kafka_topic_min_insync_replicas"] == {("local", "audit"): 1, ("local", "orders"): 2}
    # only topics whose every partition has a rate: audit's one sample gives none, orders/1 neither
    assert "burrow_kafka_topic_produce_records_per_second" not in series


async def test_consumer_list_and_detail(client):
    body = await get_json(client, "/v3/kafka/local/consumer")
    assert (body["message"], body["consumers"]) == ("consumer list returned", ["healthy", "stuck"])
    assert (await get_json(client, "/v3/kafka/remote/consumer"))["consumers"] == []
    assert (await get_json(client, "/v3/kafka/nowhere/consumer", status=404))[
        "message"
    ] == "cluster not found"

    body = await get_json(client, "/v3/kafka/local/consumer/stuck")
    assert body["message"] == "consumer detail returned"
    partitions = body["topics"]["orders"]
    assert [list(p) for p in partitions] == [["offsets", "owner", "client_id", "current-lag"]] * 2
    assert partitions[0]["current-lag"] == 500 and partitions[1] == {
        "offsets": [],
        "owner": "",
        "client_id": "",
        "current-lag": 0,
    }
    assert partitions[0]["offsets"][0] == {
        "offset": 500,
        "timestamp": (NOW - 100) * 1000,
        "observedAt": NOW * 1000,
        "lag": 500,
    }
    body = await get_json(client, "/v3/kafka/local/consumer/absent", status=404)
    assert body == {
        "error": True,
        "message": "cluster or consumer not found",
        "request": request_info("/v3/kafka/local/consumer/absent"),
    }


async def test_status_and_lag(client):
    response = await client.get("/v3/kafka/local/consumer/stuck/status")
    text = await response.text()
    assert response.status == 200
    body = json.loads(text)
    assert list(body) == ["error", "message", "status", "request"]
    status = body["status"]
    assert (status["status"], status["complete"], status["partition_count"], status["totallag"]) == (
        "ERR",
        0.5,
        2,
        500,
    )
    assert [(p["topic"], p["partition"], p["status"]) for p in status["partitions"]] == [
        ("orders", 0, "STALL")
    ]
    assert status["maxlag"]["current_lag"] == 500
    # Go prints float32 in shortest form: a whole number without ".0".
    assert '"current_lag":500,"complete":1,' in text and '"status":"ERR","complete":0.5,' in text
    # burrowpy's lag in seconds follows Burrow's fields: record 500 of the 1000 appended in the minute
    # between the two broker samples, so about 30 s old.
    stalled = status["partitions"][0]
    assert (stalled["lag_seconds"], stalled["lag_seconds_method"]) == (29.94, "interpolated")
    # Then its catch-up forecast: it committed nothing while the log grew by 1000 in the minute sampled.
    assert (stalled["catch_up_forecast"], stalled["catch_up_seconds"], stalled["falling_behind_per_second"]) == (
        "falling_behind", None, 16.667)
    assert status["max_lag_seconds"] == 29.94 and text.endswith(
        '"totallag":500,"max_lag_seconds":29.94,"catch_up_forecast":"falling_behind","catch_up_seconds":null,'
        '"falling_behind_per_second":16.667},"request":{"url":"/v3/kafka/local/consumer/stuck/status","host":"vm"}}')

    lag = (await get_json(client, "/v3/kafka/local/consumer/stuck/lag"))["status"]
    assert [(p["partition"], p["status"], p["complete"]) for p in lag["partitions"]] == [
        (0, "STALL", 1.0),
        (1, "OK", 0.0),
    ]
    healthy = (await get_json(client, "/v3/kafka/local/consumer/healthy/status"))["status"]
    assert (healthy["status"], healthy["complete"], healthy["partitions"], healthy["totallag"]) == (
        "OK",
        1.0,
        [],
        0,
    )


async def test_an_encoded_status_is_shared_until_the_evaluation_expires_then_a_new_commit_shows(client, ctx):
    path = "/v3/kafka/local/consumer/stuck/status"
    first = await (await client.get(path)).text()
    # "stuck" moves to the log's end: within expire-cache (10 s) the shared evaluation, and its encoding, stand.
    ctx.storage.submit(SetConsumerOffset("local", "stuck", "orders", 0, 1000, 40, (NOW + 5) * 1000))
    await ctx.storage.flush()
    ctx.clock.now = NOW + 5
    assert await (await client.get(path)).text() == first
    ctx.clock.now = NOW + 11  # a new evaluation: the cached body must not outlive the one it was made from
    status = (await get_json(client, path))["status"]
    assert (status["totallag"], status["partitions"]) == (0, [])
    assert (await get_json(client, "/v3/kafka/local/consumer/stuck/lag"))["status"]["totallag"] == 0


async def test_probe_is_404_where_probes_are_off_or_the_cluster_unknown(client):
    assert await get_json(client, "/v3/kafka/local/probe", status=404) == {
        "error": True,
        "message": "probes are not enabled for this cluster",
        "request": request_info("/v3/kafka/local/probe"),
    }
    body = await get_json(client, "/v3/kafka/nowhere/probe", status=404)
    assert (body["error"], body["message"]) == (True, "cluster module not found")


async def test_share_groups_list_lag_status_and_metrics(client, ctx):
    windows = ctx.modules["cluster"]["local"].share_groups
    for second, start in enumerate((40, 40, 40)):  # jobs/1 stays at 40 while 60 records wait
        now_ms = (NOW - 2 + second) * 1000
        windows.observe("workers", "Stable", [SharePartitionOffset("jobs", 0, 100 + second * 10, 0),
                                              SharePartitionOffset("jobs", 1, start, 60)],
                        {("jobs", 0): 100 + second * 10, ("jobs", 1): 100}, now_ms)
    body = await get_json(client, "/v3/kafka/local/share-group")
    assert (body["message"], body["share_groups"]) == ("share group list returned", ["workers"])

    lag = (await get_json(client, "/v3/kafka/local/share-group/workers/lag"))["status"]
    assert (lag["cluster"], lag["group"], lag["status"], lag["group_state"], lag["totallag"]) == \
        ("local", "workers", "ERR", "Stable", 60)
    assert [(p["partition"], p["status"], p["start_offset"], p["log_end_offset"], p["current_lag"])
            for p in lag["partitions"]] == [(0, "OK", 120, 120, 0), (1, "STALL", 40, 100, 60)]
    assert lag["maxlag"]["partition"] == 1 and lag["partitions"][1]["end"]["offset"] == 40
    status = (await get_json(client, "/v3/kafka/local/share-group/workers/status"))["status"]
    assert [p["partition"] for p in status["partitions"]] == [1]
    ctx.evaluator.minimum_complete = 0.5  # the evaluator's settings judge share groups too: 3 of 10 readings is too few
    lag = (await get_json(client, "/v3/kafka/local/share-group/workers/lag"))["status"]
    assert [(p["partition"], p["status"], p["complete"]) for p in lag["partitions"]] == [(0, "OK", 0.3), (1, "OK", 0.3)]
    ctx.evaluator.minimum_complete = 0.0

    missing = await get_json(client, "/v3/kafka/local/share-group/nobody/lag", status=404)
    assert (missing["error"], missing["message"]) == (True, "share group not found")
    missing = await get_json(client, "/v3/kafka/nowhere/share-group", status=404)
    assert (missing["error"], missing["message"]) == (True, "cluster not found")

    metrics = await (await client.get("/metrics")).text()
    labels = 'cluster="local",partition="1",share_group="workers",topic="jobs"'
    assert f"burrow_kafka_share_group_partition_lag{{{labels}}} 60.0" in metrics
    assert f"burrow_kafka_share_group_partition_start_offset{{{labels}}} 40.0" in metrics
    assert f"burrow_kafka_share_group_partition_status{{{labels}}} 5.0" in metrics
    assert 'burrow_kafka_share_group_status{cluster="local",share_group="workers"} 3.0' in metrics


async def test_unknown_group_status_is_404_with_error_false(client):
    body = await get_json(client, "/v3/kafka/local/consumer/ghost/status", status=404)
    assert body == {
        "error": False,
        "message": "consumer status returned",
        "status": {
            "cluster": "local",
            "group": "ghost",
            "status": "NOTFOUND",
            "complete": 1.0,
            "partitions": [],
            "partition_count": 0,
            "maxlag": None,
            "totallag": 0,
            "max_lag_seconds": None,
            "catch_up_forecast": None,
            "catch_up_seconds": None,
            "falling_behind_per_second": None,
        },
        "request": request_info("/v3/kafka/local/consumer/ghost/status"),
    }
    assert (await get_json(client, "/v3/kafka/local/consumer/ghost/lag", status=404))["status"][
        "status"
    ] == "NOTFOUND"


async def test_delete_group_and_group_topic(client, ctx):
    body = await get_json(client, "/v3/kafka/local/consumer/healthy/topic/orders", method="DELETE")
    assert body == {
        "error": False,
        "message": "consumer group removed",
        "request": request_info("/v3/kafka/local/consumer/healthy/topic/orders"),
    }
    await ctx.storage.flush()
    assert (await get_json(client, "/v3/kafka/local/consumer"))["consumers"] == ["stuck"]
    await get_json(client, "/v3/kafka/local/consumer/stuck", method="DELETE")
    await get_json(client, "/v3/kafka/local/consumer/never-there", method="DELETE")  # always 200
    await ctx.storage.flush()
    assert (await get_json(client, "/v3/kafka/local/consumer"))["consumers"] == []


async def test_main_config(client):
    body = await get_json(client, "/v3/config")
    # The key order of Burrow's Go structs: this body has the request info before the blocks.
    assert list(body) == ["error", "message", "request", "general", "logging", "zookeeper", "httpserver"]
    assert body == {
        "error": False,
        "message": "main config returned",
        "request": request_info("/v3/config"),
        "general": {
            "pidfile": "burrow.pid",
            "stdout-logfile": "",
            "access-control-allow-origin": "dash.example.com",
        },
        "logging": {
            "filename": "",
            "max-size": 100,
            "max-backups": 10,
            "max-age": 30,
            "use-local-time": False,
            "use-compression": False,
            "level": "warn",
        },
        "zookeeper": {"servers": ["zk1:2181"], "timeout": 8, "root-path": "/monitor"},
        "httpserver": {
            "admin": {"address": "127.0.0.1:8001", "tls": "", "timeout": 30},
            "main": {"address": ":8000", "tls": "", "timeout": 300},
        },
    }


@pytest.mark.parametrize(
    ("kind", "modules"),
    [
        ("storage", ["default"]),
        ("evaluator", ["default"]),
        ("cluster", ["local", "remote"]),
        ("consumer", ["local"]),
        ("notifier", []),
    ],
)
async def test_config_module_lists(client, kind, modules):
    body = await get_json(client, f"/v3/config/{kind}")
    assert list(body) == ["error", "message", "request", "coordinator", "modules"]
    assert body == {
        "error": False,
        "message": "module list returned",
        "request": request_info(f"/v3/config/{kind}"),
        "coordinator": kind,
        "modules": modules,
    }


async def test_config_module_details(client):
    body = await get_json(client, "/v3/config/storage/default")
    assert list(body) == ["error", "message", "module", "request"]
    assert (body["message"], body["module"]) == (
        "storage module detail returned",
        {
            "class-name": "inmemory",
            "intervals": 10,
            "min-distance": 0,
            "group-allowlist": "",
            "expire-group": 604800,
        },
    )
    body = await get_json(client, "/v3/config/evaluator/default")
    assert body["module"] == {"class-name": "caching", "expire-cache": 10}
    body = await get_json(client, "/v3/config/consumer/local")
    assert (body["message"], body["module"]["group-allowlist"], body["module"]["cluster"]) == (
        "consumer module detail returned",
        "^(healthy|stuck)$",
        "local",
    )
    for kind in ("storage", "evaluator", "consumer", "notifier"):
        body = await get_json(client, f"/v3/config/{kind}/nope", status=404)
        assert (body["error"], body["message"]) == (True, f"{kind} module not found")


async def test_log_level_get_and_set(client, ctx):
    assert await get_json(client, "/v3/admin/loglevel") == {
        "error": False,
        "message": "log level returned",
        "level": "warn",
        "request": request_info("/v3/admin/loglevel"),
    }
    body = await get_json(client, "/v3/admin/loglevel", method="POST", headers=JSON, data='{"level": "DEBUG"}')
    assert (body["error"], body["message"]) == (False, "set log level")
    assert ctx.log_control.level == "debug"
    assert (await get_json(client, "/v3/admin/loglevel"))["level"] == "debug"
    await get_json(client, "/v3/admin/loglevel", method="POST", headers=JSON, data='{"Level": "trace"} trailing')
    assert ctx.log_control.level == "debug"
    for body_text in ("", "not json", '{"level": 3}', '["info"]'):
        body = await get_json(client, "/v3/admin/loglevel", method="POST", headers=JSON, data=body_text, status=400)
        assert (body["error"], body["message"]) == (True, "could not decode message body")
    for body_text in ('{"level": "loud"}', "{}", "null"):
        body = await get_json(client, "/v3/admin/loglevel", method="POST", headers=JSON, data=body_text, status=404)
        assert body["message"] == "unknown log level"
    await get_json(client, "/v3/admin/loglevel", method="POST", headers=JSON, data='{"level": "warning"}')
    assert ctx.log_control.level == "warn"


async def test_a_post_without_a_json_body_is_refused_and_changes_nothing(client, ctx):
    """A page on another site can make a browser POST text/plain, a form or no type without asking first."""
    for content_type in ("text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                         "multipart/form-data; boundary=x", None):
        headers = {"Content-Type": content_type} if content_type else {}
        body = await get_json(client, "/v3/admin/loglevel", method="POST", status=415, headers=headers,
                              data=b'{"level": "debug"}')
        assert body["error"] is True and "application/json" in body["message"]
        assert body["request"] == request_info("/v3/admin/loglevel")
        assert ctx.log_control.level == "warn"
    # The preflight a browser sends before a cross-site JSON POST is granted nothing.
    response = await client.options("/v3/admin/loglevel", headers={
        "Origin": "https://elsewhere.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert not [name for name in response.headers if name.lower().startswith("access-control-allow")]


async def test_unknown_route_is_burrows_plain_404(client):
    for path in ("/v2/kafka", "/v3/kafka/local/nothing/here", "/"):
        response = await client.get(path)
        assert response.status == 404
        assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
        assert await response.text() == '{"error":true,"message":"invalid request type","result":{}}\n'


async def test_wrong_method_is_405_with_allow_and_options_lists_methods(client):
    response = await client.post("/v3/kafka/local/consumer/g")
    assert response.status == 405 and await response.text() == "Method Not Allowed\n"
    assert response.headers["Allow"] == "DELETE, GET, OPTIONS"
    response = await client.delete("/v3/kafka")
    assert (response.status, response.headers["Allow"]) == (405, "GET, OPTIONS")
    response = await client.head("/burrow/admin")
    assert response.status == 405
    response = await client.options("/v3/admin/loglevel")
    assert (response.status, response.headers["Allow"]) == (200, "GET, OPTIONS, POST")


async def test_misspelled_paths_are_redirected_like_burrows_router(client):
    for path, method, status, location in (
        ("/v3/kafka/", "GET", 301, "/v3/kafka"),
        ("/V3/Kafka/local/Consumer?x=1", "GET", 301, "/v3/kafka/local/consumer?x=1"),
        ("/v3//kafka/./local", "GET", 301, "/v3/kafka/local"),
        ("/v3/admin/loglevel/", "POST", 308, "/v3/admin/loglevel"),
    ):
        response = await client.request(method, path, allow_redirects=False)
        assert (response.status, response.headers["Location"]) == (status, location)
    # Parameters keep their case: only the fixed parts of the path are corrected.
    response = await client.get("/v3/KAFKA/Local", allow_redirects=False)
    assert response.headers["Location"] == "/v3/kafka/Local"


async def test_no_cors_header_unless_configured(ctx):
    ctx.config.general = type(ctx.config.general)()
    async with TestClient(TestServer(build_app(ctx))) as plain_client:
        response = await plain_client.get("/v3/kafka")
        assert response.status == 200 and "Access-Control-Allow-Origin" not in response.headers
        response = await plain_client.get("/burrow/admin")
        assert "Access-Control-Allow-Origin" not in response.headers


def scrape_samples(text: str) -> dict[tuple[str, tuple], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def burrow_series(samples: dict) -> dict[str, dict[tuple, float]]:
    series: dict[str, dict[tuple, float]] = {}
    for (name, labels), value in samples.items():
        if name.startswith("burrow_"):
            series.setdefault(name, {})[tuple(value for _, value in labels)] = value
    return series


async def test_metrics_are_burrows_gauges_computed_at_scrape_time(client, ctx):
    from prometheus_client import Counter

    from broker.process_metrics import register_process_metrics

    register_process_metrics(ctx.registry)
    Counter("burrowpy_test_events", "registered by another part of the daemon", registry=ctx.registry).inc(3)
    response = await client.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    samples = scrape_samples(await response.text())
    # Labels are listed in sorted label-name order: cluster, consumer_group, partition, topic.
    assert burrow_series(samples) == {
        "burrow_kafka_consumer_lag_total": {("local", "healthy"): 0, ("local", "stuck"): 500},
        "burrow_kafka_consumer_status": {("local", "healthy"): 1, ("local", "stuck"): 3},
        "burrow_kafka_consumer_partition_lag": {
            ("local", "healthy", "0", "orders"): 0,
            ("local", "healthy", "1", "orders"): 0,
            ("local", "stuck", "0", "orders"): 500,
            ("local", "stuck", "1", "orders"): 0,
        },
        # Only partitions with a full window: stuck's partition 1 has no commits.
        "burrow_kafka_consumer_current_offset": {
            ("local", "healthy", "0", "orders"): 1000,
            ("local", "healthy", "1", "orders"): 2000,
            ("local", "stuck", "0", "orders"): 500,
        },
        "burrow_kafka_topic_partition_status": {
            ("local", "healthy", "0", "orders"): 1,
            ("local", "healthy", "1", "orders"): 1,
            ("local", "stuck", "0", "orders"): 5,
        },
        "burrow_kafka_topic_partition_offset": {
            ("local", "0", "audit"): 42,
            ("local", "0", "orders"): 1000,
            ("local", "1", "orders"): 2000,
        },
        # burrowpy's: stuck's partition 1 has no commits, so no figure.
        "burrow_kafka_consumer_partition_lag_seconds": {
            ("local", "healthy", "0", "orders"): 0.0,
            ("local", "healthy", "1", "orders"): 0.0,
            ("local", "stuck", "0", "orders"): 29.94,
        },
        "burrow_kafka_consumer_max_lag_seconds": {("local", "healthy"): 0.0, ("local", "stuck"): 29.94},
        # burrowpy's catch-up forecast: healthy has caught up, stuck falls behind.
        "burrow_kafka_consumer_group_catch_up_seconds": {("local", "healthy"): 0.0},
        "burrow_kafka_consumer_group_falling_behind_records_per_second": {("local", "stuck"): 16.667},
    }
    assert samples[("burrowpy_test_events_total", ())] == 3
    assert any(name == "process_cpu_seconds_total" for name, _ in samples)


async def test_metrics_forget_deleted_groups_and_skip_notfound_ones(client, ctx):
    from burrowpy.protocol import SetConsumerOwner

    # A group known only from an owner message set longer than expire-group ago: storage still lists it,
    # the evaluator answers NOTFOUND (the fetch expires it), and Burrow leaves it out of /metrics.
    ctx.clock.now = NOW - 604800 - 1
    ctx.storage.submit(SetConsumerOwner("local", "owned-only", "orders", 0, "/10.0.0.1", "client-1"))
    await ctx.storage.flush()
    ctx.clock.now = NOW
    assert "owned-only" in (await get_json(client, "/v3/kafka/local/consumer"))["consumers"]
    await get_json(client, "/v3/kafka/local/consumer/stuck", method="DELETE")
    await ctx.storage.flush()
    text = await (await client.get("/metrics")).text()
    groups = {labels[1] for labels in burrow_series(scrape_samples(text))["burrow_kafka_consumer_status"]}
    assert groups == {"healthy"}
    assert "stuck" not in text and "owned-only" not in text
