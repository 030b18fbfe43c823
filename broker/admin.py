"""`burrowpy topics create|list|describe|delete --bootstrap HOST:PORT`: topic administration for operators."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from broker.client import ClientError, KafkaConnection
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey

RESOURCE_TOPIC = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="create a topic")
    create.add_argument("topic")
    create.add_argument("--partitions", type=int, default=-1, help="default: the broker's num.partitions")
    create.add_argument("--replication-factor", type=int, default=-1)
    create.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                        help="topic config, repeatable (e.g. cleanup.policy=compact)")
    actions.add_parser("list", help="list topics")
    describe = actions.add_parser("describe", help="partitions, leaders and configs of topics")
    describe.add_argument("topics", nargs="*", help="default: every topic")
    delete = actions.add_parser("delete", help="delete topics")
    delete.add_argument("topics", nargs="+")
    for sub in (create, describe, delete, actions.choices["list"]):
        sub.add_argument("--bootstrap", required=True, metavar="HOST:PORT")


def _error(code: int, message: str | None) -> str:
    name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
    return f"{name}: {message}" if message else name


async def _create(conn: KafkaConnection, args: argparse.Namespace) -> int:
    configs = []
    for item in args.config:
        name, sep, value = item.partition("=")
        if not sep:
            print(f"--config {item!r}: expected NAME=VALUE", file=sys.stderr)
            return 2
        configs.append({"name": name, "value": value})
    answer = await conn.request(ApiKey.CREATE_TOPICS, {"topics": [{
        "name": args.topic, "num_partitions": args.partitions, "replication_factor": args.replication_factor,
        "assignments": [], "configs": configs}], "timeout_ms": 30000})
    result = answer["topics"][0]
    if result["error_code"]:
        print(f"cannot create {args.topic}: {_error(result['error_code'], result['error_message'])}",
              file=sys.stderr)
        return 1
    print(f"created topic {args.topic}")
    return 0


async def _metadata(conn: KafkaConnection, topics: list[str] | None) -> dict[str, Any]:
    wanted = None if not topics else [{"name": t, "topic_id": bytes(16)} for t in topics]
    return await conn.request(ApiKey.METADATA, {"topics": wanted, "allow_auto_topic_creation": False})


async def _list(conn: KafkaConnection, args: argparse.Namespace) -> int:
    for topic in sorted(t["name"] for t in (await _metadata(conn, None))["topics"]):
        print(topic)
    return 0


async def _describe(conn: KafkaConnection, args: argparse.Namespace) -> int:
    answer = await _metadata(conn, args.topics)
    status = 0
    for topic in sorted(answer["topics"], key=lambda t: t["name"]):
        if topic["error_code"]:
            print(f"{topic['name']}: {_error(topic['error_code'], None)}", file=sys.stderr)
            status = 1
            continue
        configs = await conn.request(ApiKey.DESCRIBE_CONFIGS, {"resources": [{
            "resource_type": RESOURCE_TOPIC, "resource_name": topic["name"], "configuration_keys": None}]})
        overrides = [f"{c['name']}={c['value']}" for c in configs["results"][0]["configs"]
                     if c["config_source"] == 1]
        print(f"Topic: {topic['name']}\tPartitionCount: {len(topic['partitions'])}\t"
              f"Internal: {str(topic['is_internal']).lower()}\tConfigs: {','.join(overrides)}")
        for part in sorted(topic["partitions"], key=lambda p: p["partition_index"]):
            print(f"\tPartition: {part['partition_index']}\tLeader: {part['leader_id']}\t"
                  f"Replicas: {','.join(map(str, part['replica_nodes']))}\t"
                  f"Isr: {','.join(map(str, part['isr_nodes']))}")
    return status


async def _delete(conn: KafkaConnection, args: argparse.Namespace) -> int:
    answer = await conn.request(ApiKey.DELETE_TOPICS, {"topic_names": args.topics,
                                                       "topics": [{"name": t} for t in args.topics],
                                                       "timeout_ms": 30000})
    status = 0
    for result in answer["responses"]:
        if result["error_code"]:
            print(f"cannot delete {result['name']}: {_error(result['error_code'], result['error_message'])}",
                  file=sys.stderr)
            status = 1
        else:
            print(f"deleted topic {result['name']}")
    return status


ACTIONS = {"create": _create, "list": _list, "describe": _describe, "delete": _delete}


async def _main(args: argparse.Namespace) -> int:
    conn = await KafkaConnection.connect(args.bootstrap, client_id="burrowpy-topics")
    async with conn:
        return await ACTIONS[args.action](conn, args)


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_main(args))
    except ClientError as exc:
        print(f"burrowpy topics: {exc}", file=sys.stderr)
        return 1
