"""What handing decoded commits from a decoding process to the reading one would cost, per commit.

    .venv/bin/python bench/decode_handoff.py [--commits 100000]

In process, on ``--commits`` v3 commits of 100 groups (batches of 100 records, as an OffsetCommit of 100
partitions writes them): the decoding itself, then the two ways a worker process could send its result
to the process that stores it: the request objects pickled as they are, or as columns (group and topic
names once, the numbers in one int64 array) from which the reader makes the requests again. No process is
started: each figure is one side's CPU per commit, which is what a split would add to that side.
"""

from __future__ import annotations

import argparse
import pickle
import time
from array import array

from broker.protocol.api import encode_struct
from broker.protocol.records import Record, build_batch
from burrowpy.coordinators.offsets_fastpath import OffsetsRecordDecoder
from burrowpy.coordinators.offsets_topic import GroupFilter
from burrowpy.protocol import SetConsumerOffset


def offsets_topic_data(commits: int) -> bytes:
    value = encode_struct("OffsetCommitValue", 3, {"offset": 3, "leader_epoch": 0, "metadata": "",
                                                   "commit_timestamp": 1_795_535_032_198})
    batches = []
    for number in range(commits // 100):
        records = [Record(number * 100 + index, 0,
                          encode_struct("OffsetCommitKey", 1, {"group": f"group-{number % 100}", "topic": "ingest",
                                                                "partition": index}), value, [])
                   for index in range(100)]
        batches.append(build_batch(records, base_offset=number * 100))
    return b"".join(batches)


def best_of(runs: int, action) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def as_columns(requests: list[SetConsumerOffset]) -> bytes:
    groups: dict[str, int] = {}
    topics: dict[str, int] = {}
    names = array("i")
    numbers = array("q")
    for request in requests:
        names.append(groups.setdefault(request.group, len(groups)))
        names.append(topics.setdefault(request.topic, len(topics)))
        numbers.extend((request.partition, request.offset, request.order, request.timestamp))
    return pickle.dumps((requests[0].cluster, list(groups), list(topics), names, numbers), protocol=5)


def from_columns(blob: bytes) -> list[SetConsumerOffset]:
    cluster, groups, topics, names, numbers = pickle.loads(blob)
    names = names.tolist()
    numbers = numbers.tolist()
    return [SetConsumerOffset(cluster, groups[names[2 * i]], topics[names[2 * i + 1]], *numbers[4 * i:4 * i + 4])
            for i in range(len(names) // 2)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=100_000)
    args = parser.parse_args()
    data = offsets_topic_data(args.commits)
    decoder = OffsetsRecordDecoder("local", GroupFilter())
    requests = decoder.decode(data, 0).requests
    count = len(requests)
    pickled = pickle.dumps(requests, protocol=5)
    columns = as_columns(requests)
    assert from_columns(columns) == requests
    figures = {
        "decode (either process)": best_of(5, lambda: decoder.decode(data, 0)),
        "pickled requests: worker dumps": best_of(5, lambda: pickle.dumps(requests, protocol=5)),
        "pickled requests: reader loads": best_of(5, lambda: pickle.loads(pickled)),
        "columns: worker packs": best_of(5, lambda: as_columns(requests)),
        "columns: reader makes the requests": best_of(5, lambda: from_columns(columns)),
    }
    print(f"{count:,} commits; bytes per commit: pickled {len(pickled) / count:.0f}, columns {len(columns) / count:.0f}")
    for name, seconds in figures.items():
        print(f"{name:38} {seconds / count * 1e6:5.2f} us per commit")


if __name__ == "__main__":
    main()
