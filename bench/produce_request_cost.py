"""The broker's own CPU for one Produce request, in process, without the network: where small batches go.

    PYTHONPATH=<tree> .venv/bin/python bench/produce_request_cost.py [--records 15] [--size 1024]
        [--requests 20000] [--rounds 5] [--no-idempotence] [--profile TOP]

A broker of this process (``burrowpy.broker``'s ``Broker``, one topic of one partition, the defaults otherwise) is
handed Produce v9 request frames as its connection loop hands them over (``KafkaServer._handle_frame``: decode,
the produce handler, the log append with every check, the answer's encoding), each carrying one batch of
``--records`` records of ``--size`` bytes, as Kafka's Java producer sends them by default (16 KiB batches, so 15
records of 1 KiB; idempotent: a producer id and sequences). Prints the thread CPU time per request and per
record, best and median of ``--rounds`` rounds of ``--requests`` requests (the socket's reads and writes, and the
kernel's copy into the page cache beyond the ``pwritev`` call, are not in it: bench/HISTORY.md, "The Java rows,
round after round", for the whole process against a real producer). ``--profile TOP``: one more round under
cProfile, the TOP functions by their own time (cProfile's overhead inflates callers of many small functions).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.protocol.api import ApiKey, decode_response, encode_request
from broker.protocol.records import Record, build_batch
from broker.server import _BrokerPeer

PRODUCE_VERSION = 9


def frames(records: int, size: int, count: int, producer_id: int, idempotent: bool) -> list[bytes]:
    """``count`` Produce request frames (without their size prefix), one batch each, sequences following on."""
    now = int(time.time() * 1000)
    value = b"v" * size
    made = []
    for number in range(count):
        batch = build_batch([Record(index, now + index // 8, None, value) for index in range(records)],
                            producer_id=producer_id if idempotent else -1, producer_epoch=0 if idempotent else -1,
                            base_sequence=(number * records) % (2**31) if idempotent else -1)
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
                "topic_data": [{"name": "cost", "partition_data": [{"index": 0, "records": batch}]}]}
        made.append(encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, number, "bench", body)[4:])
    return made


async def producer_id(broker: Broker) -> int:
    """A producer id from the broker, as an idempotent producer's InitProducerId gets one."""
    server = broker.servers[0]
    frame = encode_request(ApiKey.INIT_PRODUCER_ID, 4, 1, "bench", {
        "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1})[4:]
    chunks = await server._handle_frame(frame, "127.0.0.1", _peer())
    assert isinstance(chunks, list)
    _correlation, body = decode_response(ApiKey.INIT_PRODUCER_ID, 4, b"".join(cast("list[bytes]", chunks))[4:])
    assert body["error_code"] == 0, body
    return body["producer_id"]


def _peer() -> _BrokerPeer:
    return _BrokerPeer()


async def run_round(broker: Broker, requests: list[bytes]) -> float:
    """Thread CPU seconds to handle ``requests`` one after the other, each answered without error."""
    server = broker.servers[0]
    peer = _peer()
    started = time.thread_time()
    for frame in requests:
        answer = await server._handle_frame(frame, "127.0.0.1", peer)
        if not isinstance(answer, list):
            raise RuntimeError(f"the broker answered {answer!r}")
    return time.thread_time() - started


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="produce-request-cost-") as tmp:
        broker = Broker(BrokerConfig.load(None, listen="127.0.0.1:0", data_dir=str(Path(tmp) / "data"),
                                          overrides={}))
        await broker.start()
        try:
            await asyncio.to_thread(broker.create_topic, "cost", 1, {})
            pid = await producer_id(broker) if args.idempotence else -1
            total = args.requests * (args.rounds + 1 + (1 if args.profile else 0))
            made = frames(args.records, args.size, total, pid, args.idempotence)
            rounds = [made[i * args.requests:(i + 1) * args.requests] for i in range(total // args.requests)]
            await run_round(broker, rounds[0])  # warm-up: the topic made, the first segment's files opened
            figures = sorted([await run_round(broker, rounds[1 + i]) for i in range(args.rounds)])
            per_request = [seconds / args.requests * 1e6 for seconds in figures]
            print(f"{args.records} records of {args.size} B a request ({'idempotent' if args.idempotence else 'plain'}): "
                  f"{per_request[0]:.1f} us a request best, {statistics.median(per_request):.1f} median of "
                  f"{args.rounds} rounds of {args.requests:,}; {per_request[0] / args.records:.2f} us a record best",
                  flush=True)
            if args.profile:
                profiler = cProfile.Profile()
                profiler.enable()
                await run_round(broker, rounds[-1])
                profiler.disable()
                pstats.Stats(profiler).sort_stats("tottime").print_stats(args.profile)
        finally:
            await broker.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=15, help="records a batch (a request holds one batch)")
    parser.add_argument("--size", type=int, default=1024, help="bytes a record's value")
    parser.add_argument("--requests", type=int, default=20_000, help="requests a round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-idempotence", dest="idempotence", action="store_false",
                        help="batches without a producer id (Kafka's Java producer is idempotent by default)")
    parser.add_argument("--profile", type=int, default=0, metavar="TOP", help="one more round under cProfile")
    args = parser.parse_args()
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
