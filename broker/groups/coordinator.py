"""The group coordinator service: the pure :class:`GroupMachine` wired to asyncio and the partition logs.

* Requests from the API handlers become machine calls; a call that waits (JoinGroup until the rebalance
  completes, a commit until its records are in the log) returns an awaitable answer.
* The machine's timers run from one task that sleeps until :meth:`GroupMachine.next_deadline` (or until
  something changed) and then calls ``tick()``.
* The machine's records are appended by one writer task, in the order the machine produced them, one
  batch per call, to `__consumer_offsets`; the machine hears back when each append is done.
* ``start()`` creates `__consumer_offsets` when missing (compacted, ``offsets.topic.num.partitions``)
  and loads every partition: on a single node this broker coordinates all groups. A cluster moves
  coordination with partition leadership through :meth:`load_partition` / :meth:`unload_partition`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

import structlog

from broker.errors import ErrorCode, KafkaError
from broker.groups.consumer import HeartbeatRequest, HeartbeatResult
from broker.groups.machine import GroupConfig, GroupMachine, OffsetsRecord
from broker.groups.offsets import TopicPartition
from broker.groups.requests import (
    CommitRequest,
    GroupDescription,
    GroupListing,
    JoinRequest,
    JoinResult,
    SyncRequest,
    SyncResult,
)
from broker.protocol.consumer_offsets import OffsetAndMetadata
from broker.protocol.records import (
    NO_SEQUENCE,
    Record,
    build_batch,
    decode_batch,
    iter_batches,
    marker_committed,
)
from broker.topics import INTERNAL_TOPICS, OFFSETS_TOPIC, offsets_topic_configs

if TYPE_CHECKING:
    from broker.cluster.view import ClusterView
    from broker.config import BrokerConfig
    from broker.log.manager import LogManager, Topic
    from broker.log.partition import AppendResult, PartitionLog

log = structlog.get_logger("broker.groups")

_READ_CHUNK_BYTES = 1 << 20

T = TypeVar("T")


class LogEntry(NamedTuple):
    """A record of a coordinator's log, or a transaction marker (``marker`` True for COMMIT, False for
    ABORT, None for a record); ``producer_id`` is set for records of transactional batches and markers."""

    key: bytes | None
    value: bytes | None
    producer_id: int = -1
    marker: bool | None = None


def read_partition_records(partition_log: Any, chunk_bytes: int = _READ_CHUNK_BYTES
                           ) -> list[tuple[bytes | None, bytes | None]]:
    """Every (key, value) of a partition log in offset order, control batches left out (blocking IO)."""
    return [(e.key, e.value) for e in _iter_partition_entries(partition_log, chunk_bytes) if e.marker is None]


def read_partition_entries(partition_log: Any, chunk_bytes: int = _READ_CHUNK_BYTES) -> list[LogEntry]:
    """Every record and transaction marker of a partition log in offset order (blocking IO)."""
    return list(_iter_partition_entries(partition_log, chunk_bytes))


def _iter_partition_entries(partition_log: Any, chunk_bytes: int) -> Iterator[LogEntry]:
    offset = partition_log.log_start_offset
    end = partition_log.log_end_offset
    while offset < end:
        data = partition_log.read(offset, chunk_bytes)
        progressed = False
        for position, header in iter_batches(data):
            if header.next_offset <= offset:
                continue
            batch = memoryview(data)[position:position + header.size]
            if header.is_control:
                committed = marker_committed(batch)
                if committed is not None:
                    yield LogEntry(None, None, header.producer_id, committed)
            else:
                producer_id = header.producer_id if header.is_transactional else -1
                _, records = decode_batch(batch)
                for record in records:
                    if record.offset >= offset:
                        yield LogEntry(record.key, record.value, producer_id)
            offset = header.next_offset
            progressed = True
        if not progressed:
            return


class OffsetsHost(Protocol):
    """What the group coordinator uses of its broker: its configs and clock, and `__consumer_offsets`' logs,
    made on a single node and appended to as their leader."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def logs(self) -> LogManager | None: ...

    def create_topic(self, name: str, partitions: int, configs: dict[str, Any], *,
                     replication_factor: int = 1) -> Topic: ...

    def partition_log(self, topic: str, partition: int) -> PartitionLog: ...

    @property
    def cluster_view(self) -> ClusterView: ...

    async def append(self, topic: str, partition: int, batch: bytes | memoryview, *, leader_epoch: int | None = None,
                     from_coordinator: bool = False) -> AppendResult: ...


class GroupCoordinator:
    def __init__(self, broker: OffsetsHost) -> None:
        self.broker = broker
        self.config = GroupConfig.from_broker_config(broker.config)
        self.machine = self._new_machine()
        self._appends: asyncio.Queue[tuple[int, list[OffsetsRecord], Callable[[ErrorCode], None],
                                           tuple[int, int] | None] | None] = asyncio.Queue()
        self._wake = asyncio.Event()
        self._writer: asyncio.Task | None = None
        self._timers: asyncio.Task | None = None
        self._running = False

    def _new_machine(self) -> GroupMachine:
        # a broker cut off from the metadata quorum answers NOT_COORDINATOR: the others fence it and move its
        # partitions of __consumer_offsets (its view is read at each call: a cluster replaces it at startup)
        return GroupMachine(self.config, self, self._now_ms, topics=self._topics,
                            serving=lambda: self.broker.cluster_view.in_quorum)

    def _now_ms(self) -> int:
        return int(self.broker.clock() * 1000)

    def _topics(self) -> dict[str, tuple[bytes, int]]:
        """The topics consumer-protocol groups can subscribe to: name -> (topic id, partition count)."""
        return {name: (topic.topic_id, topic.partition_count) for name, topic in self.broker.logs.topics.items()
                if name not in INTERNAL_TOPICS}

    # --- lifecycle -------------------------------------------------------------------------------------------

    async def start(self, *, load_all_partitions: bool = True) -> None:
        """On a single node: create `__consumer_offsets` if needed and coordinate every group. In a cluster
        (``load_all_partitions=False``) the controller creates the topic and the cluster layer loads the
        partitions this broker leads."""
        topic = self.broker.logs.topics.get(OFFSETS_TOPIC)
        if load_all_partitions and topic is None:
            # on a thread: its partitions' directories and files (50 by default) wait on the file system's journal,
            # and the event loop serves meanwhile (the metrics endpoint, started first; other brokers of the process)
            topic = await asyncio.to_thread(self.broker.create_topic, OFFSETS_TOPIC, self.config.offsets_partitions,
                                            offsets_topic_configs(self.broker.config))
        elif load_all_partitions and topic.partition_count != self.config.offsets_partitions:
            # Groups live where the existing topic put them; hashing by another count would lose them.
            log.warning("__consumer_offsets has a different partition count than configured; using it",
                        partitions=topic.partition_count, configured=self.config.offsets_partitions)
            self.config = dataclasses.replace(self.config, offsets_partitions=topic.partition_count)
            self.machine = self._new_machine()
        self._running = True
        self._writer = asyncio.create_task(self._write_appends(), name="group-coordinator-writer")
        self._timers = asyncio.create_task(self._run_timers(), name="group-coordinator-timers")
        if load_all_partitions:
            for partition in range(topic.partition_count):
                await self.load_partition(partition)

    async def stop(self) -> None:
        """Finish the appends already handed over, then stop; members still waiting get NOT_COORDINATOR."""
        if not self._running:
            return
        self._running = False
        for partition in sorted(self.machine.owned_partitions):
            self.machine.unload_partition(partition)
        self._appends.put_nowait(None)
        if self._writer is not None:
            await self._writer
        if self._timers is not None:
            self._timers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timers

    # --- partitions ---------------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return self.machine.partition_for(group_id)

    async def load_partition(self, partition: int) -> None:
        """Become the coordinator of a partition's groups, rebuilt from its records."""
        self.machine.begin_loading(partition)
        partition_log = self.broker.partition_log(OFFSETS_TOPIC, partition)
        entries = await asyncio.to_thread(read_partition_entries, partition_log)
        for entry in entries:
            if entry.marker is None:
                self.machine.replay(partition, entry.key, entry.value, entry.producer_id)
            else:
                self.machine.replay_marker(partition, entry.producer_id, entry.marker)
        self.machine.finish_loading(partition)
        self._wake.set()

    def unload_partition(self, partition: int) -> None:
        self.machine.unload_partition(partition)
        self._wake.set()

    # --- the machine's log (OffsetsLog) -------------------------------------------------------------------------

    def append(self, partition: int, records: list[OffsetsRecord],
               on_complete: Callable[[ErrorCode], None], producer: tuple[int, int] | None = None) -> None:
        if not self._running:
            on_complete(ErrorCode.NOT_COORDINATOR)
            return
        self._appends.put_nowait((partition, records, on_complete, producer))

    async def _write_appends(self) -> None:
        while (item := await self._appends.get()) is not None:
            partition, records, on_complete, producer = item
            error = await self._append_batch(partition, records, producer)
            try:
                on_complete(error)
            except Exception:
                log.exception("group coordinator failed handling an append result", partition=partition)
            self._wake.set()
        # Stopping: whatever was queued after the stop request is refused, never silently dropped.
        while not self._appends.empty():
            item = self._appends.get_nowait()
            if item is not None:
                item[2](ErrorCode.NOT_COORDINATOR)

    async def _append_batch(self, partition: int, records: list[OffsetsRecord],
                            producer: tuple[int, int] | None = None) -> ErrorCode:
        now = self._now_ms()
        producer_id, producer_epoch = producer if producer is not None else (-1, -1)
        # A transaction's offsets go in a transactional batch of its producer (no sequence: the coordinator
        # writes it), so that the transaction's marker commits or aborts them in the log as well.
        batch = build_batch((Record(offset=i, timestamp=now, key=key, value=value)
                             for i, (key, value) in enumerate(records)),
                            producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
                            is_transactional=producer is not None,
                            compression=self.broker.config["offsets.topic.compression.codec"])
        try:
            await self.broker.append(OFFSETS_TOPIC, partition, batch, from_coordinator=producer is not None)
        except KafkaError as exc:
            log.warning("append to __consumer_offsets failed", partition=partition, error=exc.code.name)
            return exc.code
        except Exception:
            log.exception("append to __consumer_offsets failed", partition=partition)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return ErrorCode.NONE

    # --- timers ---------------------------------------------------------------------------------------------

    async def _run_timers(self) -> None:
        while True:
            self._wake.clear()
            deadline = self.machine.next_deadline()
            timeout = None if deadline is None else max(deadline - self._now_ms(), 0) / 1000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            try:
                self.machine.tick()
            except Exception:
                log.exception("group coordinator timer failed")

    # --- the API, for the handlers ------------------------------------------------------------------------------

    async def _wait(self, call: Callable[[Callable[[T], None]], None]) -> T:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def resolve(answer: T) -> None:
            if not future.done():  # the request may have been cancelled (client gone)
                future.set_result(answer)

        call(resolve)
        self._wake.set()
        return await future

    def _timers_moved(self, answer: T) -> T:
        self._wake.set()
        return answer

    async def join_group(self, request: JoinRequest) -> JoinResult:
        return await self._wait(lambda reply: self.machine.join_group(request, reply))

    async def sync_group(self, request: SyncRequest) -> SyncResult:
        return await self._wait(lambda reply: self.machine.sync_group(request, reply))

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode:
        return self._timers_moved(self.machine.heartbeat(group_id, member_id, group_instance_id, generation_id))

    def leave_group(self, group_id: str, members: Iterable[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        return self._timers_moved(self.machine.leave_group(group_id, members))

    async def commit_offsets(self, request: CommitRequest) -> dict[TopicPartition, ErrorCode]:
        return await self._wait(lambda reply: self.machine.commit_offsets(request, reply))

    def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None
                      ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        return self.machine.fetch_offsets(group_id, partitions)

    async def commit_transactional_offsets(self, request: CommitRequest, producer_id: int, producer_epoch: int
                                           ) -> dict[TopicPartition, ErrorCode]:
        return await self._wait(lambda reply: self.machine.commit_transactional_offsets(
            request, producer_id, producer_epoch, reply))

    async def consumer_group_heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        return await self._wait(lambda reply: self.machine.consumer_group_heartbeat(request, reply))

    def describe_consumer_group(self, group_id: str, topic_names: dict[bytes, str]):
        return self.machine.describe_consumer_group(group_id, topic_names)

    def complete_transaction(self, partition: int, producer_id: int, committed: bool) -> None:
        self.machine.complete_transaction(partition, producer_id, committed)

    def unstable_offsets(self, group_id: str) -> set[TopicPartition]:
        return self.machine.unstable_offsets(group_id)

    def list_groups(self, states: Iterable[str] = ()) -> tuple[ErrorCode, list[GroupListing]]:
        return self.machine.list_groups(states)

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupDescription]:
        return self.machine.describe_group(group_id)

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        group_ids = list(group_ids)
        return await self._wait(lambda reply: self.machine.delete_groups(group_ids, reply))

    async def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]
                             ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        partitions = list(partitions)
        return await self._wait(
            lambda reply: self.machine.delete_offsets(group_id, partitions, lambda e, p: reply((e, p))))
