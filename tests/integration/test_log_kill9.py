"""kill -9 a process while it appends to a partition log (and compacts one): after reopening, every
append it had acknowledged is served, at its offset, with its bytes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from broker.log.config import LogConfig
from broker.log.partition import PartitionLog
from broker.protocol.records import Record, build_batch, decode_records_any

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

WRITER = textwrap.dedent(
    """
    import sys, threading
    from broker.log.cleaner import clean_partition
    from broker.log.config import LogConfig
    from broker.log.partition import PartitionLog, RollPending
    from broker.protocol.records import Record, build_batch

    directory, policy, roll_off_thread = sys.argv[1], sys.argv[2], sys.argv[3] == "roller"
    log = PartitionLog(directory, LogConfig(segment_bytes=4096, index_interval_bytes=256, cleanup_policy=(policy,)))
    out = threading.Lock()

    def report(line):
        with out:
            sys.stdout.write(line + "\\n")
            sys.stdout.flush()

    if policy == "compact":
        def clean_forever():
            while True:
                if clean_partition(log, 0):
                    report(f"cleaned {log.cleaned_through_offset}")
        threading.Thread(target=clean_forever, daemon=True).start()
    i = 0
    while True:
        key = b"key-%d" % (i % 7)
        value = b"value-%d-" % i + b"x" * (i % 300)
        records = [Record(0, 1_700_000_000_000 + i, key, value, [])]
        while True:
            try:
                result = log.append(build_batch(records, compression=i % 3), roll_off_thread=roll_off_thread)
                break
            except RollPending as pending:  # the roll is the roller thread's (as the broker's appends roll)
                pending.rolled.result()
        report(f"{result.base_offset} {key.decode()} {value.decode()}")
        i += 1
    """
)


def run_and_kill(
    directory: Path, policy: str, acks_before_kill: int, cleans_before_kill: int = 0, rolls: str = "inline"
) -> tuple[list[tuple[int, bytes, bytes]], int]:
    """Start the writer, read its acknowledgements (and compaction passes), SIGKILL it once enough
    have been seen; return what it acknowledged and the offset the last pass reported cleaned up to."""
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(directory), policy, rolls],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    acked: list[tuple[int, bytes, bytes]] = []
    cleans = 0
    cleaned_through = 0

    def take(line: str) -> None:
        nonlocal cleans, cleaned_through
        if line.startswith("cleaned "):
            cleans += 1
            cleaned_through = int(line.split()[1])
        elif line.endswith("\n"):
            offset, key, value = line.split()
            acked.append((int(offset), key.encode(), value.encode()))

    deadline = time.monotonic() + 60
    try:
        while len(acked) < acks_before_kill or cleans < cleans_before_kill:
            assert time.monotonic() < deadline, f"only {len(acked)} appends and {cleans} cleanings in time"
            line = child.stdout.readline()
            assert line, f"the writer exited with {child.wait()}"
            take(line)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    # Lines written before the kill may still sit in the pipe: they were acknowledged too.
    for line in child.stdout:
        take(line)
    child.stdout.close()
    return acked, cleaned_through


@pytest.mark.parametrize(("acks_before_kill", "rolls"), [(150, "inline"), (1200, "inline"), (4000, "inline"),
                                                       (1200, "roller"), (4000, "roller")])
def test_every_acknowledged_append_survives_kill_9(tmp_path, acks_before_kill, rolls):
    directory = tmp_path / "p"
    acked, _ = run_and_kill(directory, "delete", acks_before_kill, rolls=rolls)
    log = PartitionLog(directory, LogConfig(segment_bytes=4096, index_interval_bytes=256))
    stored = {r.offset: (r.key, r.value) for r in decode_records_any(log.read(0, 1 << 30))}
    assert log.log_end_offset >= acked[-1][0] + 1
    assert sorted(stored) == list(range(log.log_end_offset))
    for offset, key, value in acked:
        assert stored[offset] == (key, value), offset
    # The reopened log takes new appends after what survived.
    end = log.log_end_offset
    assert log.append(build_batch([Record(0, 1, b"k", b"after", [])])).base_offset == end


@pytest.mark.parametrize("acks_before_kill", [500, 3000])
def test_compaction_killed_midway_loses_no_acknowledged_latest_value(tmp_path, acks_before_kill):
    directory = tmp_path / "p"
    acked, cleaned_through = run_and_kill(directory, "compact", acks_before_kill, cleans_before_kill=2)
    log = PartitionLog(
        directory, LogConfig(segment_bytes=4096, index_interval_bytes=256, cleanup_policy=("compact",))
    )
    records = decode_records_any(log.read(0, 1 << 30))
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets))
    # what the passes cleaned holds at most one record per key (7 keys); the appends go on during a pass (its
    # fsyncs hold no lock), so how much of the log that is depends on the machine
    assert cleaned_through > 0, "the cleaner never ran"
    assert len([r for r in records if r.offset < cleaned_through]) <= 7
    assert not [name for name in os.listdir(directory) if name.endswith((".cleaned", ".cleaning"))]
    stored = {r.offset: (r.key, r.value) for r in records}
    latest: dict[bytes, tuple[int, bytes]] = {}
    for offset, key, value in acked:
        latest[key] = (offset, value)
    for key, (offset, value) in latest.items():
        # The last acknowledged write of each key is still there, unless a newer write of the key
        # (written but not yet acknowledged when the process died) superseded it.
        newer = [o for o, (k, _) in stored.items() if k == key and o >= offset]
        assert newer, key
        if newer[0] == offset:
            assert stored[offset] == (key, value)
