"""All partition logs of a broker: topics, their persisted configs, retention, compaction.

Layout of the data directory::

    topics/<topic id>.json     {"name", "topic_id" (hex), "partitions", "configs" (the topic's overrides)}
    <name>-<partition>/        one PartitionLog each
    <random hex>-delete/       a deleted partition: removed ``file.delete.delay.ms`` later (the topic's, as Kafka
                               does it), by the logs' background thread; on the next start if the broker stopped
                               before
    <name>-<partition>.<random hex>-stray/
                               a partition directory no topic file named when the broker started (a crash after
                               the directories were made, before the topic file was on disk): set aside with a
                               warning, never loaded nor deleted, as Kafka sets aside a stray log (KIP-858)
    high-watermarks.json       replicated logs only: "<topic id>-<partition>" -> the high watermark replication last
                               set (Kafka's replication-offset-checkpoint)

Files are named by topic id rather than name because a name may be 249 characters long.

The topic file is written (atomically, on the metadata writer) as its partition directories are made and
removed before they are deleted: on start every topic file is reopened and any missing partition directory
is created empty, and a partition directory of no topic is set aside as stray.

``defaults`` are the broker-wide topic config defaults, by topic config name (``segment.bytes``, ...).
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import json
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Any

import structlog

from broker.errors import ErrorCode, KafkaError
from broker.log.background import METADATA_WRITER, remove_later, run_later, write_later, written
from broker.log.cleaner import CleanerSettings, clean_partition
from broker.log.config import LogConfig, format_value, parse_configs
from broker.log.descriptors import DescriptorBudget
from broker.log.files import TEMP_SUFFIX, write_atomically
from broker.log.partition import PartitionLog

log = structlog.get_logger("broker.log")

TOPICS_DIR = "topics"
LOCK_FILE = ".lock"
DELETED_SUFFIX = "-delete"
STRAY_SUFFIX = "-stray"
HIGH_WATERMARKS_FILE = "high-watermarks.json"
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_PARTITION_DIR = re.compile(r"[a-zA-Z0-9._-]+-[0-9]+")

DiskUsage = Callable[[str], Any]  # shutil.disk_usage's shape: an object with .total and .used


def validate_topic_name(name: str) -> None:
    """Kafka's rules; INVALID_TOPIC_EXCEPTION otherwise."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name is {len(name)} characters long; the limit is {MAX_TOPIC_NAME_LENGTH}",
        )
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} contains characters other than ASCII letters, digits, '.', '_' and '-'",
        )


def _collision_key(name: str) -> str:
    # Kafka's metric names turn '.' into '_', so topics differing only there are refused.
    return name.replace(".", "_")


@dataclass
class Topic:
    name: str
    topic_id: bytes  # 16 raw bytes, as Metadata v10+ and DeleteTopics v6 carry it
    overrides: dict[str, str]
    config: LogConfig
    partitions: list[PartitionLog] = field(default_factory=list)
    saved: concurrent.futures.Future[None] = field(default_factory=written)  # its file's last write, off the loop

    @property
    def partition_count(self) -> int:
        return len(self.partitions)


class LogManager:
    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        defaults: Mapping[str, Any],
        *,
        clock: Callable[[], float] = time.time,
        disk_usage: DiskUsage = shutil.disk_usage,
        auto_high_watermark: bool = True,
        open_files: int = 0,
    ) -> None:
        """``auto_high_watermark``: whether every append commits at once (one node), or the high watermark of
        every log opened here moves only when replication sets it (a cluster), from the moment it opens: a
        reopened log starts at the high watermark last checkpointed (:meth:`checkpoint_high_watermarks`), never
        at its log end. ``open_files``: the budget of files the logs hold open (0: half the process's limit)."""
        self.data_dir = os.fspath(data_dir)
        self.descriptors = DescriptorBudget(open_files)
        self._auto_high_watermark = auto_high_watermark
        self._checkpointed: dict[str, int] = {}
        self._clock = clock
        self._disk_usage = disk_usage
        self._defaults = {name: format_value(value) for name, value in parse_configs(defaults).items()}
        self._topics: dict[str, Topic] = {}
        # topics out of the table whose logs and directories :meth:`delete_files` has not retired yet, by name
        self._leaving: dict[str, Topic] = {}
        self.topics: Mapping[str, Topic] = MappingProxyType(self._topics)
        # counts the topics created, deleted and grown, after each change: what was derived from the topics
        # and their partition counts (Metadata's answers) can be kept while it stays the same
        self.generation = 0
        self._lock = threading.RLock()
        # Serializes the changes of topics (create, grow, delete), which take their time on the file system:
        # ``_lock`` is held only around the topics' table, since the event loop takes it too (the periodic
        # flush, the high watermark checkpoint) and waited seconds behind a topic of 400 partitions being made.
        self._changes = threading.Lock()
        # Serializes the high watermark checkpoint's writers (the periodic one on a thread, close's last one): the
        # marks are taken under ``_lock`` and written and fsynced outside it, so that the event loop, which takes
        # ``_lock`` to look a topic up or remove one, never waits for the disk; ``_checkpointed`` and the file
        # change together under this lock, and once close has written its checkpoint no other is written.
        self._checkpoint_lock = threading.Lock()
        self._checkpoints_over = False
        self._closed = False
        os.makedirs(os.path.join(self.data_dir, TOPICS_DIR), exist_ok=True)
        self._lock_file = self._lock_data_dir()
        self._remove_deleted_directories()
        self._load_topics()

    # --- startup -----------------------------------------------------------------------------------------

    def _lock_data_dir(self) -> int:
        """Two brokers on one data directory would corrupt it; the OS drops the lock if we die."""
        fd = os.open(os.path.join(self.data_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RuntimeError(f"data directory {self.data_dir} is in use by another broker") from None
        return fd

    def _remove_deleted_directories(self) -> None:
        for name in os.listdir(self.data_dir):
            if name.endswith(DELETED_SUFFIX):
                shutil.rmtree(os.path.join(self.data_dir, name), ignore_errors=True)

    def _load_topics(self) -> None:
        if not self._auto_high_watermark:
            self._checkpointed = self._read_high_watermarks()
        topics_dir = os.path.join(self.data_dir, TOPICS_DIR)
        for file_name in sorted(os.listdir(topics_dir)):
            path = os.path.join(topics_dir, file_name)
            if file_name.endswith(TEMP_SUFFIX):
                os.unlink(path)
                continue
            if not file_name.endswith(".json"):
                continue
            with open(path, "rb") as f:
                meta = json.load(f)
            overrides = {name: str(value) for name, value in meta["configs"].items()}
            config = LogConfig.from_settings(self._defaults, overrides)
            topic = Topic(meta["name"], bytes.fromhex(meta["topic_id"]), overrides, config)
            topic.partitions = [self._open_log(topic.name, p, config) for p in range(meta["partitions"])]
            if not self._auto_high_watermark:
                for index, partition_log in enumerate(topic.partitions):
                    saved = self._checkpointed.get(_checkpoint_key(topic, index), 0)
                    partition_log.high_watermark = min(max(saved, partition_log.log_start_offset),
                                                       partition_log.log_end_offset)
            self._topics[topic.name] = topic
            log.info("topic loaded", topic=topic.name, partitions=topic.partition_count)
        self._set_aside_strays()

    def _set_aside_strays(self) -> None:
        """A partition directory no loaded topic owns holds records nobody can reach by name; loading it
        under a guessed topic could serve them under a topic created later with that name. Renamed, it
        keeps whatever it holds for the operator."""
        owned = {f"{topic.name}-{index}" for topic in self._topics.values() for index in range(topic.partition_count)}
        for name in sorted(os.listdir(self.data_dir)):
            path = os.path.join(self.data_dir, name)
            if name in owned or not _PARTITION_DIR.fullmatch(name) or not os.path.isdir(path):
                continue
            target = f"{name}.{uuid.uuid4().hex}{STRAY_SUFFIX}"
            os.replace(path, os.path.join(self.data_dir, target))
            log.warning("partition directory of no topic set aside", directory=name, renamed_to=target)

    def _partition_dir(self, topic: str, partition: int) -> str:
        return os.path.join(self.data_dir, f"{topic}-{partition}")

    def _open_log(self, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        return PartitionLog(self._partition_dir(topic, partition), config, self._clock,
                            auto_high_watermark=self._auto_high_watermark, descriptors=self.descriptors)

    def _save_topic(self, topic: Topic, partitions: int) -> None:
        meta = {
            "name": topic.name,
            "topic_id": topic.topic_id.hex(),
            "partitions": partitions,
            "configs": topic.overrides,
        }
        topic.saved = write_later(self._topic_file(topic), json.dumps(meta, indent=1).encode())

    def _topic_file(self, topic: Topic) -> str:
        return os.path.join(self.data_dir, TOPICS_DIR, f"{topic.topic_id.hex()}.json")

    # --- topics ------------------------------------------------------------------------------------------

    def validate_topic(self, name: str, partitions: int, configs: Mapping[str, Any]) -> LogConfig:
        """Everything CreateTopics checks, without creating; returns the topic's effective config."""
        validate_topic_name(name)
        with self._lock:
            if name in self._topics:
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
            key = _collision_key(name)
            for existing in self._topics:
                if _collision_key(existing) == key:
                    raise KafkaError(
                        ErrorCode.INVALID_TOPIC_EXCEPTION,
                        f"topic {name!r} collides with existing topic {existing!r} ('.' and '_' are alike)",
                    )
        if partitions <= 0:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS, f"number of partitions must be positive, not {partitions}"
            )
        return LogConfig.from_settings(self._defaults, configs)

    def create_topic(self, name: str, partitions: int, configs: Mapping[str, Any], *,
                     topic_id: bytes | None = None) -> Topic:
        """A new topic; its id is fresh unless given (a cluster's metadata assigns it)."""
        with self._changes:
            config = self.validate_topic(name, partitions, configs)
            leaving = self._leaving.get(name)
            if leaving is not None:  # deleted, its directories not renamed yet: renamed first, on this thread
                self._retire(leaving)
            overrides = {key: format_value(value) for key, value in parse_configs(configs).items()}
            topic = Topic(name, topic_id or uuid.uuid4().bytes, overrides, config)
            self._save_topic(topic, partitions)
            topic.partitions = [self._open_log(name, p, config) for p in range(partitions)]
            with self._lock:
                self._topics[name] = topic
                self.generation += 1
            return topic

    def delete_topic(self, name: str) -> None:
        """Both halves of a deletion on this thread: :meth:`remove_topic`, then :meth:`delete_files`."""
        self.delete_files(self.remove_topic(name))

    def remove_topic(self, name: str) -> Topic:
        """The first half of a deletion, memory only (the event loop's): the topic leaves the table at once, so that
        no request finds it any more, and its logs and directories wait for :meth:`delete_files`, which the caller
        runs on a thread (a log closed and a directory renamed per partition: a topic of 1,000 partitions held
        every connection of the broker for as long on the event loop). Until they are renamed, a topic of the same
        name is not made: :meth:`create_topic` makes the renames first if it comes before them."""
        with self._lock:
            topic = self._topics.pop(name, None)
            if topic is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
            self._leaving[name] = topic
            self.generation += 1
        return topic

    def delete_files(self, topic: Topic) -> None:
        """The second half of a deletion (:meth:`remove_topic`), blocking: every log of the topic closed and its
        directory renamed out of the way, the topic file removed; the renamed directories are removed
        ``file.delete.delay.ms`` later. Nothing to do if a creation of the same name (or close) made it first."""
        with self._changes:
            self._retire(topic)

    def _retire(self, topic: Topic) -> None:
        """The caller holds ``_changes``: no partition is added meanwhile, and a creation of the same name waits."""
        with self._lock:
            if self._leaving.get(topic.name) is not topic:
                return
        doomed = []
        for index, partition_log in enumerate(topic.partitions):
            partition_log.close_without_checkpoint()
            target = os.path.join(self.data_dir, f"{uuid.uuid4().hex}{DELETED_SUFFIX}")
            try:
                os.replace(self._partition_dir(topic.name, index), target)
            except FileNotFoundError:
                continue  # renamed by an earlier try that failed further on
            doomed.append(target)
        remove_later(self._topic_file(topic))
        with self._lock:
            del self._leaving[topic.name]  # only now: a failed rename is tried again before the name is reused
        # removed on the logs' background thread: removing a gigabyte takes the kernel a good part of a second
        for path in doomed:
            run_later(partial(shutil.rmtree, path, ignore_errors=True), topic.config.file_delete_delay_ms / 1000)

    def add_partitions(self, name: str, total: int) -> None:
        """CreatePartitions: grow the topic to ``total`` partitions."""
        with self._changes:
            topic = self._get_topic(name)
            if total <= topic.partition_count:
                raise KafkaError(
                    ErrorCode.INVALID_PARTITIONS,
                    f"topic {name!r} has {topic.partition_count} partitions; {total} is not more",
                )
            self._save_topic(topic, total)
            # opened first, then added at once: the event loop reads the partitions meanwhile
            added = [self._open_log(name, p, topic.config) for p in range(topic.partition_count, total)]
            with self._lock:
                topic.partitions.extend(added)  # a topic removed meanwhile: delete_files retires them with it
                self.generation += 1
                if self._topics.get(name) is not topic:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} was deleted meanwhile")

    def topic(self, name: str) -> Topic:
        """The topic ``name``; KafkaError UNKNOWN_TOPIC_OR_PARTITION when there is none. A request that found a
        topic and then waited (a creation, a write) looks it up again with this: another client may have deleted it
        meanwhile."""
        topic = self._topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        return topic

    _get_topic = topic

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        found = self._topics.get(topic)
        if found is None or not 0 <= partition < found.partition_count:
            return None
        return found.partitions[partition]

    # --- configs -----------------------------------------------------------------------------------------

    def alter_topic_configs(
        self,
        name: str,
        updates: Mapping[str, Any],
        *,
        replace: bool,
        validate_only: bool = False,
    ) -> LogConfig:
        """AlterConfigs (``replace``: the updates become the whole set of overrides) or
        IncrementalAlterConfigs (merge; a None value removes an override)."""
        with self._lock:
            topic = self._get_topic(name)
            overrides = {} if replace else dict(topic.overrides)
            for key, value in updates.items():
                if value is None:
                    overrides.pop(key, None)
                else:
                    overrides[key] = value
            parsed = parse_configs(overrides)
            config = LogConfig.from_settings(self._defaults, parsed)
            if validate_only:
                return config
            topic.overrides = {key: format_value(value) for key, value in parsed.items()}
            topic.config = config
            self._save_topic(topic, topic.partition_count)
            for partition_log in topic.partitions:
                partition_log.config = config
            return config

    def set_defaults(self, defaults: Mapping[str, Any]) -> None:
        """New broker-wide topic defaults (a dynamic broker config changed): every topic without its own
        override of a changed config follows at once."""
        parsed = {name: format_value(value) for name, value in parse_configs(defaults).items()}
        with self._lock:
            self._defaults = parsed
            for topic in self._topics.values():
                topic.config = LogConfig.from_settings(parsed, topic.overrides)
                for partition_log in topic.partitions:
                    partition_log.config = topic.config

    # --- background work ---------------------------------------------------------------------------------

    def _all_logs(self, predicate: Callable[[Topic], bool] = lambda topic: True) -> list[PartitionLog]:
        with self._lock:
            return [p for topic in self._topics.values() if predicate(topic) for p in topic.partitions]

    def run_retention(self, now_ms: int | None = None) -> int:
        """Time, size and disk-usage retention over every log; returns the number of segments deleted."""
        if now_ms is None:
            now_ms = int(self._clock() * 1000)
        deleted = 0
        for partition_log in self._all_logs():
            try:
                deleted += partition_log.apply_retention(now_ms)
            except KafkaError:
                continue  # closed by a concurrent topic deletion
        return deleted + self._apply_disk_retention()

    def expire_producers(self, now_ms: int, max_idle_ms: int) -> None:
        """Every log forgets its producers idle ``max_idle_ms`` (producer.id.expiration.ms)."""
        for partition_log in self._all_logs():
            try:
                partition_log.expire_producers(now_ms, max_idle_ms)
            except KafkaError:
                continue  # closed by a concurrent topic deletion

    def _apply_disk_retention(self) -> int:
        """While the data disk is fuller than a topic's ``retention.disk.percent``, delete the oldest
        non-active segment among such topics' partitions, oldest first across all of them."""
        watched = [
            (topic.config.retention_disk_percent, partition_log)
            for topic in list(self._topics.values())
            if topic.config.retention_disk_percent > 0
            for partition_log in topic.partitions
        ]
        deleted = 0
        while watched:
            usage = self._disk_usage(self.data_dir)
            percent = 100.0 * usage.used / usage.total if usage.total else 0.0
            candidates = []
            for threshold, partition_log in watched:
                if percent > threshold:
                    oldest = partition_log.oldest_deletable_timestamp()
                    if oldest is not None:
                        candidates.append((oldest, partition_log))
            if not candidates:
                return deleted
            _, victim = min(candidates, key=lambda candidate: candidate[0])
            if not victim.delete_oldest_segment():
                return deleted
            deleted += 1
            log.info(
                "segment deleted for disk usage", directory=victim.directory, disk_percent=round(percent, 1)
            )
        return deleted

    def run_compaction(self, now_ms: int | None = None, settings: CleanerSettings | None = None) -> int:
        """Compact every partition of topics whose cleanup.policy includes compact; returns how many
        partitions were rewritten. Blocking: run it in a thread (``asyncio.to_thread``)."""
        if now_ms is None:
            now_ms = int(self._clock() * 1000)
        cleaned = 0
        for partition_log in self._all_logs(lambda topic: topic.config.compact):
            try:
                if clean_partition(partition_log, now_ms, settings):
                    cleaned += 1
            except KafkaError:
                continue  # closed by a concurrent topic deletion or shutdown
            except Exception:
                log.exception("compaction failed", directory=partition_log.directory)
        return cleaned

    def run_flush(self, now_ms: int | None = None) -> int:
        """fsync logs whose oldest unflushed append is older than their ``flush.ms``; returns how many."""
        if now_ms is None:
            now_ms = int(self._clock() * 1000)
        return sum(1 for partition_log in self._all_logs() if partition_log.flush_if_due(now_ms))

    def _read_high_watermarks(self) -> dict[str, int]:
        try:
            with open(os.path.join(self.data_dir, HIGH_WATERMARKS_FILE), "rb") as f:
                saved = json.load(f)
            return {str(key): int(value) for key, value in saved.items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, AttributeError, TypeError) as exc:
            # only an availability cost: the logs start at their log start until the ISR moves them on
            log.warning("high watermark checkpoint unreadable", data_dir=self.data_dir, error=str(exc))
            return {}

    def checkpoint_high_watermarks(self) -> None:
        """Save every replicated log's high watermark (when one moved since the last save), so that a restarted
        broker serves what the ISR had committed without waiting for it again. The ISR held everything below a
        saved mark, so an old or lost checkpoint only means a lower high watermark after a restart. Blocking (an
        fsync), but ``_lock`` is held only while the marks are taken, not while they are written."""
        if self._auto_high_watermark:
            return
        with self._checkpoint_lock:
            self._write_checkpoint()

    def _write_checkpoint(self) -> None:
        """The caller holds ``_checkpoint_lock``."""
        if self._checkpoints_over:
            return
        with self._lock:
            if self._closed:
                return
            marks = {_checkpoint_key(topic, index): partition_log.high_watermark
                     for topic in self._topics.values() for index, partition_log in enumerate(topic.partitions)}
        if marks == self._checkpointed:
            return
        path = os.path.join(self.data_dir, HIGH_WATERMARKS_FILE)
        try:
            write_atomically(path, json.dumps(marks).encode())
        except OSError as exc:
            # tried again at the next checkpoint; meanwhile a restart would start from the older marks
            log.error("cannot checkpoint high watermarks", path=path, error=str(exc))
            return
        self._checkpointed = marks

    def close(self) -> None:
        if not self._auto_high_watermark:
            with self._checkpoint_lock:  # after any checkpoint under way, and the last one
                self._write_checkpoint()
                self._checkpoints_over = True
        with self._changes, self._lock:  # a topic being made is closed with the others
            if self._closed:
                return
            for leaving in list(self._leaving.values()):  # deleted: its deletion is finished first
                self._retire(leaving)
            self._closed = True
            for partition_log in self._all_logs():
                partition_log.close()
            METADATA_WRITER.wait_idle()  # the topic files asked for are on disk before another opens the directory
            os.close(self._lock_file)


def _checkpoint_key(topic: Topic, partition: int) -> str:
    """By topic id: a topic deleted and created again under the same name starts afresh."""
    return f"{topic.topic_id.hex()}-{partition}"
