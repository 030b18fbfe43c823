"""Throughput of the schema-driven protocol codec, with kafka-python 3's codec on the same frames.

    .venv/bin/python bench/protocol_codec.py [--seconds 1.0]

Cases: decode of a Produce v9 request carrying one 1 MiB records blob; encode of a Fetch v11 response
with 100 partitions of 1 KiB records (each partition with the fields the Fetch handler sets); encode + decode of a Metadata v12 response (3 brokers, 10 topics of
10 partitions). kafka-python (pure Python, also generated from Kafka's JSON specs) is the comparison.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from kafka.protocol.consumer import FetchResponse
from kafka.protocol.metadata import MetadataResponse
from kafka.protocol.producer import ProduceRequest

from broker.protocol.api import ApiKey, decode_request, decode_response, encode_request, encode_response

MIB = 1 << 20


def rate(operation: Callable[[], object], seconds: float) -> float:
    """Operations per second, timed over batches until ``seconds`` have passed."""
    operation()
    count = 0
    batch = 1
    start = time.perf_counter()
    while True:
        for _ in range(batch):
            operation()
        count += batch
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return count / elapsed
        batch = min(batch * 2, 1024)


def produce_case() -> tuple[bytes, Callable[[], object], Callable[[], object]]:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30_000,
        "topic_data": [{"name": "events", "partition_data": [{"index": 0, "records": os.urandom(MIB)}]}],
    }
    frame = encode_request(ApiKey.PRODUCE, 9, 1, "bench", body)[4:]
    return (
        frame,
        lambda: decode_request(frame),
        lambda: ProduceRequest.decode(frame, version=9, header=True),
    )


def fetch_case() -> tuple[Callable[[], object], Callable[[], object]]:
    records = os.urandom(1024)
    partitions = [
        {
            "partition_index": index,
            "error_code": 0,
            "high_watermark": 1_000_000 + index,
            "last_stable_offset": 1_000_000 + index,
            "log_start_offset": 0,
            "aborted_transactions": None,
            "preferred_read_replica": -1,
            "records": records,
        }
        for index in range(100)
    ]
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [{"topic": "events", "partitions": partitions}]}
    frame = encode_response(ApiKey.FETCH, 11, 1, body)
    theirs = FetchResponse.decode(frame[4:], version=11, header=True)
    return (lambda: encode_response(ApiKey.FETCH, 11, 1, body), lambda: theirs.encode(header=True))


def metadata_case() -> tuple[Callable[[], object], Callable[[], object]]:
    body = {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": n, "host": f"broker-{n}.example", "port": 9092, "rack": None} for n in range(3)],
        "cluster_id": "bench-cluster",
        "controller_id": 0,
        "topics": [
            {
                "error_code": 0,
                "name": f"topic-{t}",
                "topic_id": os.urandom(16),
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": p,
                        "leader_id": p % 3,
                        "leader_epoch": 0,
                        "replica_nodes": [0, 1, 2],
                        "isr_nodes": [0, 1, 2],
                        "offline_replicas": [],
                    }
                    for p in range(10)
                ],
                "topic_authorized_operations": -2147483648,
            }
            for t in range(10)
        ],
    }

    def ours() -> object:
        frame = encode_response(ApiKey.METADATA, 12, 1, body)
        return decode_response(ApiKey.METADATA, 12, frame[4:])

    frame = encode_response(ApiKey.METADATA, 12, 1, body)[4:]

    def kafka_python() -> object:
        decoded = MetadataResponse.decode(frame, version=12, header=True)
        return MetadataResponse.decode(decoded.encode(header=True), version=12, header=True)

    return ours, kafka_python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    seconds = parser.parse_args().seconds

    frame, produce_ours, produce_theirs = produce_case()
    fetch_ours, fetch_theirs = fetch_case()
    metadata_ours, metadata_theirs = metadata_case()
    cases = [
        ("decode Produce v9 request, one 1 MiB records blob", produce_ours, produce_theirs, len(frame)),
        ("encode Fetch v11 response, 100 partitions x 1 KiB", fetch_ours, fetch_theirs, None),
        ("Metadata v12 response encode+decode, 10x10 partitions", metadata_ours, metadata_theirs, None),
    ]
    print(f"{'case':56} {'burrowpy ops/s':>15} {'kafka-python ops/s':>19} {'ratio':>6}")
    for name, ours, theirs, size in cases:
        ours_rate = rate(ours, seconds)
        theirs_rate = rate(theirs, seconds)
        line = f"{name:56} {ours_rate:15,.0f} {theirs_rate:19,.0f} {ours_rate / theirs_rate:5.1f}x"
        if size:
            line += f"   ({ours_rate * size / MIB:,.0f} MiB/s)"
        print(line)


if __name__ == "__main__":
    main()
