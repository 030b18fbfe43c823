"""LogManager: topics on disk, name and config validation, DescribeConfigs, retention across logs."""

from __future__ import annotations

import json
import os
import threading
import time
from types import SimpleNamespace

import pytest
import structlog.testing
from log_harness import BASE_TS, Clock, all_records, batch

from broker.errors import ErrorCode, KafkaError
from broker.log.files import TEMP_SUFFIX
from broker.log.manager import STRAY_SUFFIX, LogManager

BROKER_DEFAULTS = {"retention.ms": 3_600_000, "segment.bytes": 1 << 20, "min.insync.replicas": 1}


@pytest.fixture
def manager(tmp_path):
    logs = LogManager(tmp_path / "data", BROKER_DEFAULTS, clock=Clock())
    yield logs
    logs.close()


def test_create_write_reopen(tmp_path):
    data_dir = tmp_path / "data"
    logs = LogManager(data_dir, BROKER_DEFAULTS, clock=Clock())
    topic = logs.create_topic("orders", 3, {"cleanup.policy": "compact,delete", "segment.bytes": "2048"})
    assert topic.partition_count == 3 and len(topic.topic_id) == 16
    assert topic.config.compact and topic.config.delete and topic.config.segment_bytes == 2048
    assert sorted(logs.topics) == ["orders"]
    assert logs.get_log("orders", 3) is None and logs.get_log("nope", 0) is None
    logs.get_log("orders", 1).append(batch(4, key=b"k"))
    logs.close()

    reopened = LogManager(data_dir, BROKER_DEFAULTS, clock=Clock())
    again = reopened.topics["orders"]
    assert again.topic_id == topic.topic_id
    assert again.overrides == {"cleanup.policy": "compact,delete", "segment.bytes": "2048"}
    assert again.config == topic.config
    assert [r.offset for r in all_records(reopened.get_log("orders", 1))] == [0, 1, 2, 3]
    assert sorted(os.listdir(data_dir)) == [".lock", "orders-0", "orders-1", "orders-2", "topics"]
    reopened.close()


def test_replicated_logs_commit_nothing_of_their_own(tmp_path):
    """In a cluster (no automatic high watermark) appends, and a log reopened after a crash, leave the high
    watermark where it was: only the ISR moves it. One node's logs commit every append."""
    clustered = LogManager(tmp_path / "cluster", BROKER_DEFAULTS, clock=Clock(), auto_high_watermark=False)
    single = LogManager(tmp_path / "single", BROKER_DEFAULTS, clock=Clock())
    for logs in (clustered, single):
        logs.create_topic("orders", 1, {})
        logs.get_log("orders", 0).append(batch(3))
    assert clustered.get_log("orders", 0).high_watermark == 0
    assert single.get_log("orders", 0).high_watermark == 3
    clustered.get_log("orders", 0).high_watermark = 2  # what replication would set
    clustered.close()
    single.close()

    # reopened at the high watermark replication last set (checkpointed on close), not at the log end
    reopened = LogManager(tmp_path / "cluster", BROKER_DEFAULTS, clock=Clock(), auto_high_watermark=False)
    plog = reopened.get_log("orders", 0)
    assert (plog.log_end_offset, plog.high_watermark, plog.auto_high_watermark) == (3, 2, False)
    reopened.create_topic("later", 1, {})
    assert not reopened.get_log("later", 0).auto_high_watermark
    reopened.close()


def test_high_watermark_checkpoints(tmp_path):
    """Kafka's replication-offset-checkpoint: saved when asked (periodically) and on close. After a crash the
    logs reopen at the last saved marks, capped at their log ends; a topic created again under the same name
    (a new id) does not take the old topic's mark; an unreadable checkpoint means starting at the log start."""
    data_dir = tmp_path / "data"
    logs = LogManager(data_dir, BROKER_DEFAULTS, clock=Clock(), auto_high_watermark=False)
    for name in ("orders", "shrunk", "renewed"):
        logs.create_topic(name, 1, {})
        logs.get_log(name, 0).append(batch(3))
        logs.get_log(name, 0).append(batch(2))
        logs.get_log(name, 0).high_watermark = 4
    logs.checkpoint_high_watermarks()
    logs.get_log("orders", 0).high_watermark = 5  # not saved: the crash comes first
    logs.get_log("shrunk", 0).truncate_to(3)  # its tail went after the save
    logs.delete_topic("renewed")
    logs.create_topic("renewed", 1, {}).partitions[0].append(batch(5))
    for topic in logs.topics.values():
        topic.saved.result(10)  # as CreateTopics waits for it before answering
    os.close(logs._lock_file)  # a crash: nothing closed, no final checkpoint

    again = LogManager(data_dir, BROKER_DEFAULTS, clock=Clock(), auto_high_watermark=False)
    assert [again.get_log(name, 0).high_watermark for name in ("orders", "shrunk", "renewed")] == [4, 3, 0]
    again.close()
    (data_dir / "high-watermarks.json").write_text("not json")
    unreadable = LogManager(data_dir, BROKER_DEFAULTS, clock=Clock(), auto_high_watermark=False)
    assert [unreadable.get_log(name, 0).high_watermark for name in ("orders", "shrunk", "renewed")] == [0, 0, 0]
    unreadable.close()


def test_a_checkpoint_that_cannot_be_written_is_tried_again(tmp_path):
    """A failed save (here: its temporary file's name taken by a directory) neither raises nor stops the logs
    from closing; the next checkpoint writes the marks."""
    data_dir = tmp_path / "data"
    logs = LogManager(data_dir, BROKER_DEFAULTS, clock=Clock(), auto_high_watermark=False)
    logs.create_topic("orders", 1, {}).partitions[0].append(batch(3))
    logs.get_log("orders", 0).high_watermark = 2
    blocker = data_dir / ("high-watermarks.json" + TEMP_SUFFIX)
    blocker.mkdir()
    logs.checkpoint_high_watermarks()
    assert not (data_dir / "high-watermarks.json").exists()
    blocker.rmdir()
    logs.close()
    reopened = LogManager(data_dir, BROKER_DEFAULTS, clock=Clock(), auto_high_watermark=False)
    assert reopened.get_log("orders", 0).high_watermark == 2
    reopened.close()


def test_data_directory_is_locked(tmp_path, manager):
    with pytest.raises(RuntimeError, match="in use"):
        LogManager(tmp_path / "data", {})


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a" * 250, "with space", "slash/name", "ümlaut", "colon:name"],
)
def test_invalid_topic_names(manager, name):
    with pytest.raises(KafkaError) as err:
        manager.create_topic(name, 1, {})
    assert err.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert not manager.topics


@pytest.mark.parametrize("name", ["a" * 249, "__consumer_offsets", "My.Topic_2-x", "-"])
def test_valid_topic_names(manager, name):
    manager.create_topic(name, 1, {})
    assert name in manager.topics


def test_colliding_and_duplicate_names(manager):
    manager.create_topic("metrics.cpu", 1, {})
    with pytest.raises(KafkaError) as err:
        manager.create_topic("metrics_cpu", 1, {})
    assert err.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    with pytest.raises(KafkaError) as err:
        manager.create_topic("metrics.cpu", 1, {})
    assert err.value.code == ErrorCode.TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize("partitions", [0, -1])
def test_invalid_partition_count(manager, partitions):
    with pytest.raises(KafkaError) as err:
        manager.create_topic("t", partitions, {})
    assert err.value.code == ErrorCode.INVALID_PARTITIONS


@pytest.mark.parametrize(
    "configs, mentioned",
    [
        ({"no.such.config": "1"}, "no.such.config"),
        ({"segment.bytes": "10"}, "segment.bytes"),
        ({"segment.bytes": str(2**31)}, "segment.bytes"),
        ({"retention.ms": "-2"}, "retention.ms"),
        ({"retention.ms": "soon"}, "retention.ms"),
        ({"cleanup.policy": "compact,shred"}, "cleanup.policy"),
        ({"message.timestamp.type": "WallClock"}, "message.timestamp.type"),
        ({"flush.messages": "0"}, "flush.messages"),
        ({"retention.disk.percent": "150"}, "retention.disk.percent"),
        ({"min.insync.replicas": None}, "min.insync.replicas"),
    ],
)
def test_invalid_configs(manager, configs, mentioned):
    with pytest.raises(KafkaError) as err:
        manager.create_topic("t", 1, configs)
    assert err.value.code == ErrorCode.INVALID_CONFIG
    assert mentioned in err.value.message
    assert "t" not in manager.topics
    assert not os.path.exists(os.path.join(manager.data_dir, "t-0"))


def test_invalid_broker_defaults(tmp_path):
    with pytest.raises(KafkaError) as err:
        LogManager(tmp_path / "data", {"segment.bytes": 1})
    assert err.value.code == ErrorCode.INVALID_CONFIG


def test_validate_topic_creates_nothing(manager):
    config = manager.validate_topic("t", 2, {"retention.ms": "-1"})
    assert config.retention_ms == -1
    assert not manager.topics


def test_new_defaults_reach_topics_without_their_own_override(manager):
    manager.create_topic("plain", 2, {})
    manager.create_topic("own", 1, {"retention.ms": "5000"})
    manager.set_defaults({"retention.ms": 7200000, "max.message.bytes": 2000})
    assert [p.config.retention_ms for p in manager.topics["plain"].partitions] == [7200000, 7200000]
    assert manager.topics["plain"].config.max_message_bytes == 2000
    assert manager.topics["own"].partitions[0].config.retention_ms == 5000
    assert manager.topics["own"].config.max_message_bytes == 2000
    manager.create_topic("later", 1, {})
    assert manager.topics["later"].config.retention_ms == 7200000
    with pytest.raises(KafkaError) as err:
        manager.set_defaults({"retention.ms": -5})
    assert err.value.code == ErrorCode.INVALID_CONFIG
    assert manager.topics["plain"].config.retention_ms == 7200000


def test_new_cleaner_defaults_reach_the_cleaner(manager):
    manager.create_topic("table", 1, {"cleanup.policy": "compact", "segment.bytes": "200"})
    table = manager.get_log("table", 0)
    for _ in range(10):
        table.append(batch(1, ts=BASE_TS, key=b"same"))
    manager.set_defaults({"min.compaction.lag.ms": 3_600_000})  # records younger than an hour stay
    assert manager.run_compaction(BASE_TS + 60_000) == 0
    manager.set_defaults({"min.compaction.lag.ms": 0})
    assert manager.run_compaction(BASE_TS + 60_000) == 1
    assert len(all_records(table)) < 10


def test_alter_configs(tmp_path, manager):
    manager.create_topic("t", 2, {"retention.bytes": "1000", "segment.ms": "60000"})
    manager.alter_topic_configs("t", {"retention.bytes": "5000", "flush.messages": "1"}, replace=False)
    assert manager.topics["t"].overrides == {
        "retention.bytes": "5000",
        "segment.ms": "60000",
        "flush.messages": "1",
    }
    assert manager.get_log("t", 1).config.retention_bytes == 5000
    manager.alter_topic_configs("t", {"segment.ms": None}, replace=False)
    assert "segment.ms" not in manager.topics["t"].overrides
    manager.alter_topic_configs("t", {"cleanup.policy": "compact"}, replace=True)
    assert manager.topics["t"].overrides == {"cleanup.policy": "compact"}
    manager.alter_topic_configs("t", {"cleanup.policy": "delete"}, replace=True, validate_only=True)
    assert manager.topics["t"].config.compact
    with pytest.raises(KafkaError) as err:
        manager.alter_topic_configs("t", {"segment.bytes": "x"}, replace=False)
    assert err.value.code == ErrorCode.INVALID_CONFIG
    assert manager.topics["t"].overrides == {"cleanup.policy": "compact"}
    manager.close()
    reopened = LogManager(tmp_path / "data", BROKER_DEFAULTS)
    assert reopened.topics["t"].config.compact and reopened.get_log("t", 0).config.compact
    reopened.close()


def deleted_directories(data_dir) -> list[str]:
    return [name for name in os.listdir(data_dir) if name.endswith("-delete")]


def test_delete_and_recreate_topic(manager):
    manager.create_topic("gone", 2, {})
    manager.get_log("gone", 0).append(batch(3))
    old_log = manager.get_log("gone", 0)
    manager.delete_topic("gone")
    assert "gone" not in manager.topics
    assert old_log.closed
    # the partitions' files stay file.delete.delay.ms (a minute by default), renamed out of the way
    assert len(deleted_directories(manager.data_dir)) == 2
    assert sorted(set(os.listdir(manager.data_dir)) - set(deleted_directories(manager.data_dir))) == [
        ".lock", "topics"]
    with pytest.raises(KafkaError) as err:
        manager.delete_topic("gone")
    assert err.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    manager.create_topic("gone", 1, {})
    assert manager.get_log("gone", 0).log_end_offset == 0


def test_a_topic_removed_from_the_table_is_renamed_away_before_its_name_is_made_again(manager):
    """A deletion's halves: the topic leaves the table at once (the event loop's), its files go on a thread; a
    creation of the same name that comes between renames them first, and the deletion's own half finds nothing
    left to do."""
    manager.create_topic("between", 2, {})
    manager.get_log("between", 1).append(batch(3))
    removed = manager.remove_topic("between")
    assert "between" not in manager.topics and not removed.partitions[0].closed
    assert os.path.isdir(os.path.join(manager.data_dir, "between-1"))  # not yet renamed
    again = manager.create_topic("between", 2, {})
    assert removed.partitions[1].closed and len(deleted_directories(manager.data_dir)) == 2
    assert again.partitions[1].log_end_offset == 0
    manager.delete_files(removed)
    assert len(deleted_directories(manager.data_dir)) == 2 and manager.topics["between"] is again
    assert not again.partitions[1].closed


def test_a_deleted_topics_files_go_after_its_file_delete_delay_ms(manager):
    manager.create_topic("brief", 2, {"file.delete.delay.ms": "300"})
    manager.create_topic("at-once", 1, {"file.delete.delay.ms": "0"})
    manager.get_log("brief", 0).append(batch(3))
    manager.delete_topic("at-once")
    deleted_at = time.monotonic()
    manager.delete_topic("brief")
    assert len(deleted_directories(manager.data_dir)) >= 2  # brief's two wait out their 300 ms
    deadline = time.monotonic() + 30
    while deleted_directories(manager.data_dir) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert deleted_directories(manager.data_dir) == []
    assert time.monotonic() - deleted_at >= 0.3


def test_leftover_deleted_directories_are_removed_on_start(tmp_path):
    data_dir = tmp_path / "data"
    os.makedirs(data_dir / "0123abcd-delete")
    (data_dir / "0123abcd-delete" / "00000000000000000000.log").write_bytes(b"x")
    LogManager(data_dir, {}).close()
    assert not os.path.exists(data_dir / "0123abcd-delete")


def test_a_partition_directory_without_its_topic_file_is_set_aside_on_start(tmp_path):
    """A crash after a topic's partition directories were made but before its topic file reached the disk
    (the file is written on the metadata writer) leaves directories no topic names: they are renamed aside,
    with what they hold, and a topic created later under that name starts empty."""
    data_dir = tmp_path / "data"
    logs = LogManager(data_dir, BROKER_DEFAULTS, clock=Clock())
    topic = logs.create_topic("orders", 2, {})
    logs.get_log("orders", 1).append(batch(3, key=b"k"))
    logs.add_partitions("orders", 3)
    logs.close()
    # the topic file as it was before CreatePartitions: orders-2 has no topic naming it, and no topic file
    # names the directories of "lost" at all
    (data_dir / "topics" / f"{topic.topic_id.hex()}.json").write_text(json.dumps(
        {"name": "orders", "topic_id": topic.topic_id.hex(), "partitions": 2, "configs": {}}))
    os.replace(data_dir / "orders-1", data_dir / "lost-0")

    with structlog.testing.capture_logs() as logged:
        reopened = LogManager(data_dir, BROKER_DEFAULTS, clock=Clock())
    try:
        assert reopened.topics["orders"].partition_count == 2 and "lost" not in reopened.topics
        names = sorted(os.listdir(data_dir))
        strays = {name.split(".")[0]: name for name in names if name.endswith(STRAY_SUFFIX)}
        assert sorted(strays) == ["lost-0", "orders-2"], names
        assert "lost-0" not in names and "orders-2" not in names
        assert (data_dir / strays["lost-0"] / "00000000000000000000.log").stat().st_size > 0
        warned = [entry for entry in logged if entry["event"] == "partition directory of no topic set aside"]
        assert sorted(entry["directory"] for entry in warned) == ["lost-0", "orders-2"]
        assert sorted(entry["renamed_to"] for entry in warned) == sorted(strays.values())
        reopened.create_topic("lost", 1, {})
        assert reopened.get_log("lost", 0).log_end_offset == 0
    finally:
        reopened.close()
    LogManager(data_dir, BROKER_DEFAULTS, clock=Clock()).close()  # a second start leaves the strays alone
    assert sorted(name for name in os.listdir(data_dir) if name.endswith(STRAY_SUFFIX)) == sorted(strays.values())


def test_add_partitions(tmp_path, manager):
    manager.create_topic("t", 1, {})
    manager.add_partitions("t", 3)
    assert manager.topics["t"].partition_count == 3
    assert manager.get_log("t", 2).log_end_offset == 0
    with pytest.raises(KafkaError) as err:
        manager.add_partitions("t", 3)
    assert err.value.code == ErrorCode.INVALID_PARTITIONS
    with pytest.raises(KafkaError) as err:
        manager.add_partitions("missing", 3)
    assert err.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    manager.close()
    reopened = LogManager(tmp_path / "data", {})
    assert reopened.topics["t"].partition_count == 3
    reopened.close()


def test_run_retention_over_all_logs(manager):
    manager.create_topic("short", 2, {"retention.ms": "1000", "segment.bytes": "200"})
    manager.create_topic("forever", 1, {"retention.ms": "-1", "segment.bytes": "200"})
    for partition in range(2):
        for i in range(6):
            manager.get_log("short", partition).append(batch(1, ts=BASE_TS + i))
    for i in range(6):
        manager.get_log("forever", 0).append(batch(1, ts=BASE_TS + i))
    deleted = manager.run_retention(BASE_TS + 10_000)
    assert (
        deleted == sum(1 for _ in range(2)) * 3
    )  # every segment of "short": 2 full ones and the rolled active
    assert all(manager.get_log("short", p).log_start_offset == 6 for p in range(2))
    assert manager.get_log("forever", 0).log_start_offset == 0


class FakeDisk:
    """Disk usage of the data directory's files on a pretend disk of ``total`` bytes."""

    def __init__(self, total: int, other_used: int) -> None:
        self.total = total
        self.other_used = other_used

    def __call__(self, path: str) -> SimpleNamespace:
        used = self.other_used
        for root, _dirs, files in os.walk(path):
            used += sum(os.path.getsize(os.path.join(root, name)) for name in files if name.endswith(".log"))
        return SimpleNamespace(total=self.total, used=used, free=self.total - used)


def test_disk_percent_retention_deletes_oldest_segments_first_across_partitions(tmp_path):
    size = len(batch(1))
    disk = FakeDisk(total=100 * size, other_used=40 * size)
    clock = Clock()
    logs = LogManager(tmp_path / "data", {"segment.bytes": 2 * size}, clock=clock, disk_usage=disk)
    logs.create_topic("a", 2, {"retention.disk.percent": "60"})
    logs.create_topic("b", 1, {"retention.disk.percent": "60"})
    logs.create_topic("untouched", 1, {})
    # Interleave timestamps so that the oldest segment alternates between partitions.
    partitions = [logs.get_log("a", 0), logs.get_log("a", 1), logs.get_log("b", 0)]
    for i in range(24):
        partitions[i % 3].append(batch(1, ts=BASE_TS + i))
    for i in range(8):
        logs.get_log("untouched", 0).append(batch(1, ts=BASE_TS + i))
    # 40 (other) + 24 + 8 = 72% full; down to 60% means 12 batches = 6 segments must go.
    assert logs.run_retention(BASE_TS) == 6
    used = disk(logs.data_dir).used
    assert used <= 60 * size
    assert [p.log_start_offset for p in partitions] == [4, 4, 4]
    assert logs.get_log("untouched", 0).log_start_offset == 0
    # With the disk still too full, only active segments remain deletable... and they are never deleted.
    disk.other_used = 90 * size
    assert logs.run_retention(BASE_TS) == 3
    assert all(p.segment_count == 1 and p.size_bytes > 0 for p in partitions)
    logs.close()


@pytest.mark.alone  # its assertion compares waits: another test's load made one flush wait a third of the time
def test_the_flush_and_the_checkpoint_do_not_wait_for_a_topic_being_made(tmp_path):
    """A topic of 400 partitions made on a thread (as a cluster's broker makes the topics its metadata names):
    the periodic flush and the high watermark checkpoint, which run on the event loop, go on meanwhile instead
    of waiting for the whole topic behind the manager's lock (they waited nearly the whole time before)."""
    logs = LogManager(tmp_path / "data", BROKER_DEFAULTS, clock=Clock(), auto_high_watermark=False)
    try:
        made = threading.Event()
        started = time.monotonic()
        maker = threading.Thread(target=lambda: (logs.create_topic("wide", 400, {}), made.set()))
        maker.start()
        waits = []
        while not made.is_set():
            began = time.monotonic()
            logs.run_flush()
            logs.checkpoint_high_watermarks()
            waits.append(time.monotonic() - began)
        maker.join()
        took = time.monotonic() - started
        assert logs.topics["wide"].partition_count == 400
        # before, one wait took nearly the whole time; now each is a flush and a checkpoint (an fsync, which a
        # loaded disk stretches to a third of a second): half the time tells the two apart on a loaded machine
        assert len(waits) > 1 and max(waits) < took / 2, (max(waits), took, len(waits))
    finally:
        logs.close()


class HeldWrites:
    """Fault injection at the checkpoint's write (``write_atomically`` as the manager calls it): each write waits,
    once it has begun, until the test lets it go, then writes for real."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import broker.log.manager as manager_module

        self._write = manager_module.write_atomically
        self.begun = threading.Semaphore(0)
        self.release = threading.Event()
        self.written: list[dict[str, int]] = []
        monkeypatch.setattr(manager_module, "write_atomically", self)

    def __call__(self, path: str, data: bytes, **kwargs: bool) -> None:
        self.begun.release()
        assert self.release.wait(30), "the test never let the write go"
        self._write(path, data, **kwargs)
        self.written.append(json.loads(data))


def test_a_lookup_or_removal_of_a_topic_does_not_wait_for_the_checkpoints_write(tmp_path, monkeypatch):
    """The checkpoint runs on a thread and fsyncs its file; the event loop takes the topics' lock to remove a topic
    or add one to the table. With the write held (as a slow disk would hold it), both go on at once: the lock is
    held only while the marks are taken. The marks written are those taken, and saved as the checkpointed ones."""
    logs = LogManager(tmp_path / "data", BROKER_DEFAULTS, clock=Clock(), auto_high_watermark=False)
    writes = HeldWrites(monkeypatch)
    try:
        for name in ("orders", "doomed"):
            logs.create_topic(name, 1, {}).partitions[0].append(batch(3))
        logs.get_log("orders", 0).high_watermark = 2
        checkpoint = threading.Thread(target=logs.checkpoint_high_watermarks)
        checkpoint.start()
        assert writes.begun.acquire(timeout=30)
        removed = threading.Event()
        remover = threading.Thread(target=lambda: (logs.remove_topic("doomed"), removed.set()))
        remover.start()
        assert removed.wait(10), "remove_topic waited for the checkpoint's write"
        assert "doomed" not in logs.topics and logs.get_log("orders", 0) is not None
        assert checkpoint.is_alive()  # the write is still held: the removal did not wait for it
        writes.release.set()
        checkpoint.join(30)
        remover.join(30)
        orders = _checkpoint_key_of(logs, "orders")
        assert writes.written[0][orders] == 2 and len(writes.written[0]) == 2  # taken before the removal
        assert logs._checkpointed == writes.written[0]
        logs.delete_files(logs._leaving["doomed"])
    finally:
        writes.release.set()
        logs.close()


def test_closes_checkpoint_is_written_after_one_under_way(tmp_path, monkeypatch):
    """A periodic checkpoint holds older marks while its write is held; close, meanwhile, waits for it and then
    writes the newer marks, which are the file's last contents (an older write landing after close's would
    bring the restarted broker back to older high watermarks); no checkpoint is written after close's."""
    data_dir = tmp_path / "data"
    logs = LogManager(data_dir, BROKER_DEFAULTS, clock=Clock(), auto_high_watermark=False)
    writes = HeldWrites(monkeypatch)
    try:
        logs.create_topic("orders", 1, {}).partitions[0].append(batch(3))
        logs.get_log("orders", 0).high_watermark = 1
        checkpoint = threading.Thread(target=logs.checkpoint_high_watermarks)
        checkpoint.start()
        assert writes.begun.acquire(timeout=30)
        logs.get_log("orders", 0).high_watermark = 3
        closer = threading.Thread(target=logs.close)
        closer.start()
        # close's own write does not begin while the older one is held
        assert not writes.begun.acquire(timeout=0.5)
        writes.release.set()
        checkpoint.join(30)
        closer.join(30)
        assert not closer.is_alive()
        assert [marks[_checkpoint_key_of(logs, "orders")] for marks in writes.written] == [1, 3]
        logs.checkpoint_high_watermarks()  # after close: nothing more
        assert len(writes.written) == 2
    finally:
        writes.release.set()
        logs.close()
    reopened = LogManager(data_dir, BROKER_DEFAULTS, clock=Clock(), auto_high_watermark=False)
    assert reopened.get_log("orders", 0).high_watermark == 3
    reopened.close()


def _checkpoint_key_of(logs: LogManager, name: str) -> str:
    return f"{logs.topics[name].topic_id.hex()}-0"
