"""What ACLs cost: Metadata for every topic, asked by a principal that is not a super user, on our broker and
on Apache Kafka 4.4, without an authorizer and with Kafka's StandardAuthorizer holding 1 or 10,000 ACLs.

    .venv/bin/python bench/broker_acls.py [--topics 1000] [--acls 1,10000] [--requests 200]

Each broker (ours, then a single Apache Kafka 4.4 node in KRaft mode from the test peers) is started twice:
without an authorizer, then with ``authorizer.class.name`` StandardAuthorizer. It gets a PLAINTEXT listener
(User:ANONYMOUS, a super user, which sets things up: Kafka's own controller traffic is ANONYMOUS too) and a
SASL_PLAINTEXT one where the measuring client logs in with PLAIN as ``reader``. ``--topics`` topics (one
partition each) are created; ``reader`` may DESCRIBE every topic through one PREFIXED ACL, and the other
ACLs give other users READ on the topics, so that every check has ACLs to look through. The client (our
codec, broker/client.py) then sends ``--requests`` Metadata requests for all topics, one at a time, and the
latency percentiles are printed per ACL count.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT))

from harness import BrokerProcess, free_port  # noqa: E402
from kafka_harness import KafkaServer, unavailable  # noqa: E402

from broker.client import ClientSecurity, KafkaConnection  # noqa: E402
from broker.protocol.api import ApiKey  # noqa: E402

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="reader" '
        'password="reader-secret" user_reader="reader-secret";')
READER = ClientSecurity(sasl_mechanism="PLAIN", username="reader", password="reader-secret")
TOPIC, LITERAL, PREFIXED, ALLOW, READ, DESCRIBE = 2, 3, 4, 3, 3, 8


def security_settings(authorizer: bool) -> dict:
    settings = {"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}
    if authorizer:
        settings.update({"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})
    return settings


async def create_topics(bootstrap: str, count: int) -> None:
    async with await KafkaConnection.connect(bootstrap, timeout=120) as connection:
        for start in range(0, count, 100):
            answer = await connection.request(ApiKey.CREATE_TOPICS, {"topics": [
                {"name": f"t-{n:05d}", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                 "configs": []} for n in range(start, min(start + 100, count))],
                "timeout_ms": 60000, "validate_only": False}, version=5)
            failed = [t for t in answer["topics"] if t["error_code"] not in (0, 36)]
            assert not failed, failed[:3]


async def add_acls(bootstrap: str, first: int, count: int, topics: int) -> None:
    """ACLs number ``first`` to ``first + count - 1``; number 0 lets the reader describe every topic."""
    creations = []
    for number in range(first, first + count):
        if number == 0:
            creations.append({"resource_type": TOPIC, "resource_name": "t-", "resource_pattern_type": PREFIXED,
                              "principal": "User:reader", "host": "*", "operation": DESCRIBE,
                              "permission_type": ALLOW})
        else:
            creations.append({"resource_type": TOPIC, "resource_name": f"t-{number % topics:05d}",
                              "resource_pattern_type": LITERAL, "principal": f"User:other-{number}", "host": "*",
                              "operation": READ, "permission_type": ALLOW})
    async with await KafkaConnection.connect(bootstrap, timeout=120) as connection:
        for start in range(0, len(creations), 1000):
            answer = await connection.request(ApiKey.CREATE_ACLS, {"creations": creations[start:start + 1000]},
                                              version=3)
            failed = [r for r in answer["results"] if r["error_code"]]
            assert not failed, failed[:3]


async def metadata_latencies(host: str, port: int, requests: int, topics: int) -> list[float]:
    connection = KafkaConnection(host, port, timeout=60, security=READER)
    await connection.open()
    latencies = []
    try:
        # Kafka's broker learns of new topics and ACLs from its metadata log a moment after they are made
        deadline = time.monotonic() + 60
        while True:
            answer = await connection.request(ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False},
                                              version=12)
            if sum(1 for t in answer["topics"] if t["name"].startswith("t-")) == topics:
                break
            assert time.monotonic() < deadline, "the reader never saw every topic"
            await asyncio.sleep(0.2)
        for _ in range(requests):
            began = time.perf_counter()
            answer = await connection.request(ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False},
                                              version=12)
            latencies.append(time.perf_counter() - began)
            seen = sum(1 for t in answer["topics"] if t["name"].startswith("t-"))
            assert seen == topics, f"the reader saw {seen} of {topics} topics"
    finally:
        await connection.close()
    return latencies


def summary(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000  # noqa: E731
    return f"{pick(0.5):.1f} / {pick(0.99):.1f}"


def measure(start_broker, name: str, topics: int, acl_steps: list[int], requests: int) -> dict[str, str]:
    """start_broker(authorizer) -> (context manager, plaintext bootstrap, sasl port)."""
    results = {}
    for authorizer in (False, True):
        broker, bootstrap, sasl_port = start_broker(authorizer)
        with broker:
            asyncio.run(create_topics(bootstrap, topics))
            if not authorizer:
                results["no authorizer"] = summary(asyncio.run(metadata_latencies("127.0.0.1", sasl_port, requests,
                                                                                  topics)))
                continue
            made = 0
            for step in acl_steps:
                asyncio.run(add_acls(bootstrap, made, step - made, topics))
                made = step
                results[f"{step} ACLs"] = summary(asyncio.run(metadata_latencies("127.0.0.1", sasl_port, requests,
                                                                                 topics)))
        print(f"{name}: {results}", flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--acls", default="1,10000", help="ACL counts to measure at, ascending")
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    acl_steps = [int(x) for x in args.acls.split(",")]
    reason = unavailable()
    if reason:
        print(f"Apache Kafka is not installed ({reason}): run make install", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="broker-acls-") as tmp:
        directory = Path(tmp)

        def ours(authorizer: bool):
            plain, sasl = free_port(), free_port()
            (directory / f"ours-{authorizer}").mkdir()
            broker = BrokerProcess(directory / f"ours-{authorizer}" / "data", port=plain, extra_config={
                "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                **security_settings(authorizer)})
            return broker, broker.bootstrap, sasl

        def kafka(authorizer: bool):
            sasl = free_port()
            server = KafkaServer(directory / f"kafka-{authorizer}", config={
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
                **security_settings(authorizer)})
            server.extra_config["listeners"] = (f"PLAINTEXT://127.0.0.1:{server.port},CONTROLLER://127.0.0.1:"
                                                f"{server.controller_port},SASL_PLAINTEXT://127.0.0.1:{sasl}")
            server.extra_config["advertised.listeners"] = (f"PLAINTEXT://127.0.0.1:{server.port},"
                                                           f"SASL_PLAINTEXT://127.0.0.1:{sasl}")
            return server, server.bootstrap, sasl

        ours_results = measure(ours, "ours", args.topics, acl_steps, args.requests)
        kafka_results = measure(kafka, "Kafka", args.topics, acl_steps, args.requests)
    print(f"\nMetadata of {args.topics} topics as a non-super user, {args.requests} requests one at a time")
    print("| authorizer | ours p50 / p99 ms | Kafka 4.4 p50 / p99 ms |")
    print("|---|---|---|")
    for key in ours_results:
        print(f"| {key} | {ours_results[key]} | {kafka_results[key]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
