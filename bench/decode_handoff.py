"""What handing decoded commits from a decoding process to the reading one would cost, per commit.

    .venv/bin/python bench/decode_handoff.py [--commits 100000] [--value-version 3]

In process, on ``--commits`` commits of 100 groups (batches of 100 records, as an OffsetCommit of 100
partitions writes them; offset-commit values v3 as Kafka 2.1-3.x write them, or v4 as Kafka 4.x does): the
decoding itself, into runs of one group's commits (SetConsumerOffsets, what storage takes), then what a
worker process would add to send those runs to the process that stores them, pickled, and what the reader
would add to take them back. No process is started: each figure is one side's CPU per commit, which is what
a split would add to that side.

The last figure is a first read (a decoder of its own each time, its key cache empty) of as many commits, each
to a partition of its own: groups of 25 partitions on a topic each, as ``bench/monitor_fleet_daemon.py``'s fleet
(what the key cache costs while it fills, bench/README.md, "The whole monitor's memory at fleet scale").
"""

from __future__ import annotations

import argparse
import pickle
import time

from broker.protocol.api import encode_struct
from broker.protocol.records import Record, build_batch
from burrowpy.coordinators.offsets_fastpath import OffsetsRecordDecoder
from burrowpy.coordinators.offsets_topic import GroupFilter


def _commits_data(commits: int, per_batch: int, names, value_version: int) -> bytes:
    """``commits`` offset commits in batches of ``per_batch``, one to each partition 0..per_batch-1 of the group and
    topic ``names(batch number)`` gives."""
    value = encode_struct("OffsetCommitValue", value_version, {"offset": 3, "leader_epoch": 0, "metadata": "",
                                                               "commit_timestamp": 1_795_535_032_198})
    batches = []
    for number in range(commits // per_batch):
        group, topic = names(number)
        records = [Record(number * per_batch + index, 0,
                          encode_struct("OffsetCommitKey", 1, {"group": group, "topic": topic, "partition": index}),
                          value, [])
                   for index in range(per_batch)]
        batches.append(build_batch(records, base_offset=number * per_batch))
    return b"".join(batches)


def offsets_topic_data(commits: int, value_version: int = 3) -> bytes:
    return _commits_data(commits, 100, lambda number: (f"group-{number % 100}", "ingest"), value_version)


def fleet_data(commits: int, value_version: int = 3) -> bytes:
    """``commits`` commits, every one to a partition of its own: 25 partitions of a topic for each group."""
    return _commits_data(commits, 25, lambda number: (f"fleet-group-{number:05d}", f"fleet-topic-{number:05d}"),
                         value_version)


def best_of(runs: int, action) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=100_000)
    parser.add_argument("--value-version", type=int, choices=(3, 4), default=3)
    args = parser.parse_args()
    data = offsets_topic_data(args.commits, args.value_version)
    decoder = OffsetsRecordDecoder("local", GroupFilter())
    runs = decoder.decode(data, 0).requests
    count = sum(len(run) for run in runs)
    pickled = pickle.dumps(runs, protocol=5)
    assert pickle.loads(pickled) == runs
    figures = {
        "decode into runs (either process)": best_of(5, lambda: decoder.decode(data, 0)),
        "runs pickled: worker dumps": best_of(5, lambda: pickle.dumps(runs, protocol=5)),
        "runs pickled: reader loads": best_of(5, lambda: pickle.loads(pickled)),
    }
    fleet, fleet_commits = fleet_data(count, args.value_version), count // 25 * 25
    first_read = best_of(5, lambda: OffsetsRecordDecoder("local", GroupFilter()).decode(fleet, 0))
    figures["first read, a partition per commit"] = first_read * count / fleet_commits  # printed per commit
    print(f"{count:,} commits (values v{args.value_version}) in {len(runs):,} runs; "
          f"{len(pickled) / count:.0f} bytes per commit pickled")
    for name, seconds in figures.items():
        print(f"{name:38} {seconds / count * 1e6:5.2f} us per commit")


if __name__ == "__main__":
    main()
