"""Write broker/kafka_config_docs.json: Apache Kafka 4.4's documentation of every broker and topic config,
as its DescribeConfigs gives it (include_documentation), for our broker to answer the same.

    .venv/bin/python scripts/kafka_config_docs.py

Run by `make install` once the test peers' jars are there: it starts a node from them
(tests/integration/kafka_harness.py) and asks for its broker resource and a new topic. The text is Kafka's
(Apache License 2.0) and is generated rather than kept in the repository.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT))

from kafka_harness import KafkaServer  # noqa: E402

from broker.client import ClientError, KafkaConnection  # noqa: E402
from broker.protocol.api import ApiKey  # noqa: E402

OUTPUT = ROOT / "broker" / "kafka_config_docs.json"
TOPIC = "documented"
ATTEMPTS = 3


async def documented(bootstrap: str) -> dict[str, dict[str, str]]:
    async with await KafkaConnection.connect(bootstrap) as connection:
        created = await connection.request(ApiKey.CREATE_TOPICS, {"topics": [{
            "name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 30000})
        assert created["topics"][0]["error_code"] == 0, created
        answer = await connection.request(ApiKey.DESCRIBE_CONFIGS, {"resources": [
            {"resource_type": 4, "resource_name": "1", "configuration_keys": None},
            {"resource_type": 2, "resource_name": TOPIC, "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": True}, version=4)
    broker, topic = answer["results"]
    return {kind: {c["name"]: c["documentation"] for c in result["configs"] if c["documentation"] is not None}
            for kind, result in (("broker", broker), ("topic", topic))}


def main() -> int:
    for attempt in range(1, ATTEMPTS + 1):  # a JVM on a loaded machine may miss its start deadline
        try:
            with tempfile.TemporaryDirectory() as tmp, KafkaServer(Path(tmp)) as kafka:
                docs = asyncio.run(documented(kafka.bootstrap))
            break
        except (AssertionError, ClientError, OSError) as exc:
            if attempt == ATTEMPTS:
                raise
            print(f"Kafka node failed ({exc!r}); trying again", file=sys.stderr)
    OUTPUT.write_text(json.dumps(docs, indent=0, sort_keys=True) + "\n")
    print(f"documentation of {len(docs['broker'])} broker and {len(docs['topic'])} topic configs written to "
          f"{OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
