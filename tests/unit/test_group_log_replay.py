"""Groups and offsets survive the trip through a real `__consumer_offsets` partition log: the machine's records
are appended as batches, read back in small chunks (control batches skipped), compacted, and replayed."""

from __future__ import annotations

from dataclasses import replace

from group_harness import CONFIG, FakeClock, subscription

from broker.errors import ErrorCode, KafkaError
from broker.groups.coordinator import OFFSETS_TOPIC, read_partition_records
from broker.groups.machine import GroupMachine
from broker.groups.offsets import OffsetAndMetadata
from broker.groups.requests import CommitRequest, JoinRequest, PartitionCommit, SyncRequest
from broker.log.manager import LogManager
from broker.protocol import consumer_offsets
from broker.protocol.records import Record, build_batch

PARTITIONS = 5
GROUPS_CONFIG = replace(CONFIG, offsets_partitions=PARTITIONS)


class PartitionLogs:
    """The machine's OffsetsLog over real partition logs, appending synchronously."""

    def __init__(self, logs: LogManager) -> None:
        self.logs = logs

    def append(self, partition, records, on_complete, producer=None) -> None:
        pid, epoch = producer if producer is not None else (-1, -1)
        batch = build_batch((Record(offset=i, timestamp=0, key=k, value=v) for i, (k, v) in enumerate(records)),
                            producer_id=pid, producer_epoch=epoch, is_transactional=producer is not None)
        try:
            self.logs.get_log(OFFSETS_TOPIC, partition).append(batch, from_coordinator=producer is not None)
        except KafkaError as exc:
            on_complete(exc.code)
            return
        on_complete(ErrorCode.NONE)


def machine_over(logs: LogManager, clock: FakeClock, load: bool = True, chunk_bytes: int = 200) -> GroupMachine:
    machine = GroupMachine(GROUPS_CONFIG, PartitionLogs(logs), clock)
    for partition in range(PARTITIONS):
        machine.begin_loading(partition)
        if load:
            for key, value in read_partition_records(logs.get_log(OFFSETS_TOPIC, partition), chunk_bytes):
                machine.replay(partition, key, value)
        machine.finish_loading(partition)
    return machine


def committed(machine: GroupMachine, group: str) -> dict:
    error, offsets = machine.fetch_offsets(group, None)
    assert error == ErrorCode.NONE
    return {tp: o.offset for tp, o in offsets.items()}


def write_history(machine: GroupMachine, clock: FakeClock) -> None:
    """A consumer group that commits many times, then empties; standalone commits, some deleted."""
    joined = []
    machine.join_group(JoinRequest("cg", "", None, "c", "/h", 10000, 10000, "consumer",
                                   (("range", subscription("t")),)), joined.append)
    clock.now += CONFIG.initial_rebalance_delay_ms
    machine.tick()
    member = joined[0].member_id
    machine.sync_group(SyncRequest("cg", 1, member, None, {member: b"a"}), lambda r: None)
    for i in range(30):
        machine.commit_offsets(CommitRequest("cg", 1, member, None, {("t", i % 3): PartitionCommit(i)}),
                               lambda r: None)
    machine.leave_group("cg", [(member, None)])
    for group in ("s1", "s2"):
        machine.commit_offsets(CommitRequest(group, -1, "", None, {("t", 0): PartitionCommit(5),
                                                                     ("t", 1): PartitionCommit(6)}), lambda r: None)
    machine.delete_offsets("s1", [("t", 1)], lambda *a: None)
    machine.delete_groups(["s2"], lambda r: None)


def test_replay_from_the_log_in_small_chunks_with_a_control_batch(tmp_path):
    clock = FakeClock()
    logs = LogManager(tmp_path, {}, clock=lambda: clock.now / 1000)
    logs.create_topic(OFFSETS_TOPIC, PARTITIONS, {"cleanup.policy": "compact"})
    first = machine_over(logs, clock, load=False)
    write_history(first, clock)
    # A control batch (a transaction marker) in the middle of the partition, whose record would read as a
    # commit if it were taken for one, then one more commit.
    partition_log = logs.get_log(OFFSETS_TOPIC, first.partition_for("cg"))
    end = partition_log.log_end_offset
    partition_log.append_replicated(build_batch(
        [Record(offset=end, timestamp=0, key=consumer_offsets.offset_commit_key("cg", "t", 0),
                value=consumer_offsets.offset_commit_value(OffsetAndMetadata(12345, -1, "", 0)))],
        base_offset=end, producer_id=7, producer_epoch=0, is_transactional=True, is_control=True))
    first.commit_offsets(CommitRequest("cg", -1, "", None, {("t", 1): PartitionCommit(99)}), lambda r: None)

    second = machine_over(logs, clock)
    assert committed(second, "cg") == {("t", 0): 27, ("t", 1): 99, ("t", 2): 29}
    assert second.group("cg").state.value == "Empty" and second.group("cg").generation_id == 2
    assert committed(second, "s1") == {("t", 0): 5}
    assert second.group("s2") is None
    logs.close()


def test_replay_after_compaction_gives_the_same_groups(tmp_path):
    clock = FakeClock()
    logs = LogManager(tmp_path, {}, clock=lambda: clock.now / 1000)
    logs.create_topic(OFFSETS_TOPIC, PARTITIONS, {"cleanup.policy": "compact", "segment.bytes": 1024})
    write_history(machine_over(logs, clock, load=False), clock)
    cg_log = logs.get_log(OFFSETS_TOPIC, GroupMachine(GROUPS_CONFIG, PartitionLogs(logs), clock).partition_for("cg"))
    before = len(read_partition_records(cg_log))
    logs.run_compaction(clock.now)
    assert len(read_partition_records(cg_log)) < before
    replayed = machine_over(logs, clock)
    assert committed(replayed, "cg") == {("t", 0): 27, ("t", 1): 28, ("t", 2): 29}
    assert committed(replayed, "s1") == {("t", 0): 5} and replayed.group("s2") is None
    logs.close()
