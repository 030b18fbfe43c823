"""Our side of a Metadata answer for many topics, in process: the handler building the answer and the codec
encoding it, without a network or a client, with and without an authorizer.

    .venv/bin/python bench/metadata_answer.py [--topics 1000] [--requests 50]

A broker on a temporary data dir gets ``--topics`` topics of one partition; Metadata v12 for every topic is
then answered ``--requests`` times, and the time of the first answer and the mean time of the later ones
printed, each split into the handler and the encoding. The first answer builds and encodes every topic entry
and makes every ACL check; the later ones are answered from what was kept (broker/handlers/cluster_info.py:
each topic's encoded entry, the every-topic answer, the authorizer's decisions) while nothing changes. With
the authorizer, one
PREFIXED ACL lets the asking principal (User:ANONYMOUS) describe every topic, so each answer makes one
check per topic.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.broker import Broker  # noqa: E402
from broker.config import BrokerConfig  # noqa: E402
from broker.handlers import HANDLERS, RequestContext  # noqa: E402
from broker.protocol.api import ApiKey, encode_response_chunks  # noqa: E402
from broker.security.acl import Acl, Operation, PatternType, Permission, ResourceType  # noqa: E402

REQUEST = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False,
           "include_cluster_authorized_operations": False}


async def measure(topics: int, requests: int, authorizer: bool) -> tuple[float, float, float, float]:
    with tempfile.TemporaryDirectory(prefix="metadata-answer-") as data:
        config = BrokerConfig.load(None, listen="127.0.0.1:0", data_dir=data)
        config.authorizer = authorizer
        broker = Broker(config)
        await broker.start()
        try:
            if authorizer:
                broker.authorizer.store.add([Acl(ResourceType.TOPIC, "t-", PatternType.PREFIXED, "User:ANONYMOUS",
                                                 "*", Operation.DESCRIBE, Permission.ALLOW)])
            for number in range(topics):
                broker.create_topic(f"t-{number:05d}", 1, {}, replication_factor=1)
            ctx = RequestContext(broker.services, ApiKey.METADATA, 12, 1, "bench", "127.0.0.1", "PLAINTEXT",
                                 None)
            handle = HANDLERS[ApiKey.METADATA]
            times = []
            for _ in range(requests):
                began = time.perf_counter()
                answer = await handle(ctx, REQUEST)
                built = time.perf_counter()
                encode_response_chunks(ApiKey.METADATA, 12, 1, answer)
                times.append((built - began, time.perf_counter() - built))
                assert len(answer["topics"]) >= topics
            later = times[1:]
            return (times[0][0] * 1000, times[0][1] * 1000, sum(h for h, _ in later) / len(later) * 1000,
                    sum(e for _, e in later) / len(later) * 1000)
        finally:
            await broker.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(f"Metadata v12 of {args.topics} topics, {args.requests} answers, in process")
    print("| authorizer | first answer: handler + encoding ms | later answers, mean: handler + encoding ms |")
    print("|---|---|---|")
    for authorizer in (False, True):
        first_handling, first_encoding, handling, encoding = asyncio.run(
            measure(args.topics, max(args.requests, 2), authorizer))
        print(f"| {'one ACL' if authorizer else 'none'} | {first_handling:.2f} + {first_encoding:.2f} = "
              f"{first_handling + first_encoding:.2f} | {handling:.2f} + {encoding:.2f} = {handling + encoding:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
