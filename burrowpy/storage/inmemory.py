"""The ``inmemory`` storage module: Burrow's storage behind per-group asyncio workers (burrow-spec 3).

Requests are the dataclasses of :mod:`burrowpy.protocol`. Every request about one group (commits,
owners, deletes, FetchConsumer, FetchConsumerIfChanged) goes to the worker ``xxhash64(cluster + group) %
workers``, so one group's requests are handled in the order they were submitted; requests about one topic go to the
worker of ``cluster + topic`` (Burrow picks a random worker, which lets a topic delete overtake an
earlier broker offset); cluster-wide fetches go round-robin. The data and its rules live in
:class:`~burrowpy.storage.state.StorageState`; this module only routes, runs and logs.

``submit`` never blocks and never drops: it appends to the worker's backlog. Producers that can outrun
storage (reading ``__consumer_offsets`` from the start) use ``await put(request)``, which first waits
while that worker has ``queue-depth`` requests waiting (Burrow's channel buffer size).
"""

from __future__ import annotations

import asyncio
import itertools
import re
from collections import deque
from collections.abc import Callable, Generator, Iterable
from time import perf_counter
from typing import Any

import xxhash

from burrowpy.config import Section
from burrowpy.protocol import (
    GROUP_SCOPED_REQUESTS,
    ClearConsumerOwners,
    FetchClusters,
    FetchConsumer,
    FetchConsumerIfChanged,
    FetchConsumers,
    FetchConsumersForTopic,
    FetchConsumersIfChanged,
    FetchRecordTimeWants,
    FetchTopic,
    FetchTopicRates,
    FetchTopics,
    SetBrokerOffset,
    SetBrokerOffsets,
    SetConsumerOffset,
    SetConsumerOffsets,
    SetConsumerOwner,
    SetDeleteGroup,
    SetDeletePartitionOffsets,
    SetDeleteTopic,
    SetRecordTimes,
)
from burrowpy.storage.state import StorageState

CONFIG_KEYS = ("class-name", "intervals", "expire-group", "workers", "queue-depth", "min-distance",
               "group-allowlist", "group-denylist", "group-whitelist", "group-blacklist")

# Requests all the workers together handle in one turn of the event loop, before it reads its sockets again
# (HTTP, the Kafka readers): a worker's pass is this many shared out, at least _LEAST_PASS. Every worker with a
# backlog runs a pass in each turn, so with a pass of 512 and 20 workers a broker-offset refresh of 10,000
# partitions was handled in one turn. A run of commits counts as many requests as it has commits, a topic's
# broker offsets as many as it has partitions.
_TURN = 1024
_LEAST_PASS = 32
# A request handled in steps (FetchRecordTimeWants: a walk of every group, 36 ms of it in one stretch at fleet scale
# under ingest) is taken on until the pass has worked this long (seconds, perf_counter's), what is left of it then
# being the worker's first request in its next pass (_Steps). Other requests are bounded by the budget alone: ending
# every pass after 2 ms of work as well made a probe's answers wait longer while a 40,000-partition refresh was
# taken in (tests/integration/test_monitor_loop_stretches.py: 82-129 ms in three runs, under its 40 ms in four without).
_PASS_SECONDS = 0.002

_TOPIC_SCOPED = (SetBrokerOffset, SetBrokerOffsets, SetDeleteTopic, FetchTopic, FetchTopicRates, FetchConsumersForTopic)
_CLUSTER_WIDE = (FetchClusters, FetchConsumers, FetchTopics, FetchRecordTimeWants, SetRecordTimes)

# Drop reasons worth a warning (Burrow warns about these); every other drop is routine and logged at debug.
_WARN_REASONS = frozenset({"unknown cluster", "negative partition",
                           "partition beyond the topic's partition count"})


class _Barrier:
    """Marker put in a worker's backlog by ``flush``: resolved once everything before it is handled."""

    __slots__ = ("reply",)

    def __init__(self, reply: asyncio.Future[Any]) -> None:
        self.reply = reply


class _Steps:
    """A request handled in steps (a FetchRecordTimeWants: its walk of every group) that a pass's time ran out
    during: put back at the front of its worker's backlog, resumed by the next pass before anything after it."""

    __slots__ = ("steps", "reply")

    def __init__(self, steps: Generator[None, None, Any], reply: asyncio.Future[Any]) -> None:
        self.steps = steps
        self.reply = reply  # where the answer, or a failure (_run_worker), is told


class _GroupsPart:
    """The groups of a FetchConsumersIfChanged that one worker answers (those whose requests it handles): each answer
    goes to its place in ``answers``, shared by the request's parts; the last part done replies with them."""

    __slots__ = ("request", "reply", "indexes", "answers", "left")

    def __init__(self, request: FetchConsumersIfChanged, indexes: list[int], answers: list[Any],
                 left: list[int]) -> None:
        self.request = request
        self.reply = request.reply  # where a failure is told (_run_worker)
        self.indexes = indexes
        self.answers = answers
        self.left = left  # [parts of the request not answered yet]


def _weight(request: Any) -> int:
    """What a request counts for in a worker's pass and in ``pending``: a run of commits its commits, a topic's
    broker offsets its partitions, a part of a FetchConsumersIfChanged its groups."""
    kind = type(request)
    if kind is SetConsumerOffsets or kind is SetBrokerOffsets:
        return len(request)
    return len(request.indexes) if kind is _GroupsPart else 1


class _Worker:
    __slots__ = ("backlog", "weight", "wakeup", "room", "task")

    def __init__(self) -> None:
        self.backlog: deque[Any] = deque()
        self.weight = 0  # of the requests in the backlog (see _weight)
        self.wakeup = asyncio.Event()  # set when the backlog gets work
        self.room = asyncio.Event()  # set whenever the worker has drained its backlog
        self.task: asyncio.Task[None] | None = None


def _resolve(reply: asyncio.Future[Any], value: Any) -> None:
    if not reply.done():  # the asker may have given up (timeout, cancellation)
        reply.set_result(value)


class InMemoryStorage:
    """Storage module ``inmemory``. Clusters are fixed at construction (the configured cluster names)."""

    class_name = "inmemory"

    def __init__(self, name: str, section: Section, clusters: list[str], clock: Any, logger: Any) -> None:
        section.check_keys(CONFIG_KEYS)
        self.name = name
        self._clock = clock
        self._log = logger.bind(storage=name)
        self.intervals = section.get_int("intervals", 10, minimum=1)
        self.expire_group = section.get_int("expire-group", 604800, minimum=1)
        self.worker_count = section.get_int("workers", 20, minimum=1)
        self.queue_depth = section.get_int("queue-depth", 1, minimum=1)
        self.min_distance = section.get_int("min-distance", 0, minimum=0)
        self.group_allowlist = self._group_regex(section, "group-allowlist", "group-whitelist")
        self.group_denylist = self._group_regex(section, "group-denylist", "group-blacklist")
        filters_groups = self.group_allowlist is not None or self.group_denylist is not None
        self.state = StorageState(clusters, self.intervals, self.expire_group, self.min_distance,
                                  self.accept_group if filters_groups else None)
        self._workers: list[_Worker] = []
        self._round_robin = itertools.count()
        self._running = False
        self._handlers: dict[type, Callable[[Any], object]] = {
            SetBrokerOffset: self._set_broker_offset,
            SetBrokerOffsets: self._set_broker_offsets,
            SetConsumerOwner: self._set_consumer_owner,
            SetDeleteTopic: self._set_delete_topic,
            SetDeleteGroup: self._set_delete_group,
            SetDeletePartitionOffsets: self._set_delete_partition_offsets,
            ClearConsumerOwners: self._clear_consumer_owners,
            FetchClusters: lambda r: _resolve(r.reply, self.state.cluster_names()),
            FetchConsumers: lambda r: _resolve(r.reply, self.state.consumer_names(r.cluster)),
            FetchTopics: lambda r: _resolve(r.reply, self.state.topic_names(r.cluster)),
            FetchTopic: lambda r: _resolve(r.reply, self.state.topic_offsets(r.cluster, r.topic)),
            FetchTopicRates: lambda r: _resolve(r.reply, self.state.topic_rates(r.cluster, r.topic)),
            # FetchRecordTimeWants: in steps (_run_worker)
            SetRecordTimes: lambda r: self._dropped(self.state.set_record_times(r), r),
            FetchConsumersForTopic: lambda r: _resolve(r.reply, self.state.consumers_of_topic(r.cluster, r.topic)),
            FetchConsumer: lambda r: _resolve(r.reply, self.state.consumer(r.cluster, r.group,
                                                                           int(self._clock.time()))),
            FetchConsumerIfChanged: lambda r: _resolve(r.reply, self.state.consumer_if_changed(
                r.cluster, r.group, int(self._clock.time()), r.known)),
            _GroupsPart: self._groups_part,
            _Barrier: lambda r: _resolve(r.reply, None),
        }

    def _group_regex(self, section: Section, key: str, old_key: str) -> re.Pattern[str] | None:
        """Read an allow/deny list, accepting Burrow's pre-1.3 key name with a warning (Burrow panics)."""
        if not section.has(old_key):
            return section.get_regex(key)
        if section.has(key):
            raise section.error(old_key, f"is the old name of {key}; set only {key}")
        self._log.warning("deprecated config key", key=f"{section.path}.{old_key}", use=key)
        return section.get_regex(old_key)

    def accept_group(self, group: str) -> bool:
        """Allowlist (unanchored search) must match if set; denylist must not match if set."""
        if self.group_allowlist is not None and not self.group_allowlist.search(group):
            return False
        return self.group_denylist is None or not self.group_denylist.search(group)

    def describe(self) -> dict[str, Any]:
        """The module block of ``/v3/config/storage/NAME``."""
        return {
            "class-name": self.class_name,
            "intervals": self.intervals,
            "min-distance": self.min_distance,
            "group-allowlist": self.group_allowlist.pattern if self.group_allowlist else "",
            "expire-group": self.expire_group,
        }

    # --- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        self._log.info("starting", workers=self.worker_count, intervals=self.intervals)
        self._workers = [_Worker() for _ in range(self.worker_count)]
        self._running = True
        for number, worker in enumerate(self._workers):
            worker.task = asyncio.create_task(self._run_worker(worker), name=f"storage-{self.name}-{number}")

    async def stop(self) -> None:
        """Stop taking requests, let every worker finish its backlog, then end the workers."""
        self._log.info("stopping")
        self._running = False
        for worker in self._workers:
            worker.wakeup.set()
        await asyncio.gather(*(worker.task for worker in self._workers if worker.task is not None))
        self._workers = []

    # --- requests ------------------------------------------------------------------------------------

    def submit(self, request: Any) -> None:
        """Queue a request without waiting. Fetch requests get their answer through ``request.reply``."""
        if type(request) is FetchConsumersIfChanged:
            self._submit_groups(request)
            return
        worker = self._worker_for(request)
        if worker is not None:
            self._queue(worker, request, _weight(request))

    @staticmethod
    def _queue(worker: _Worker, request: Any, weight: int) -> None:
        worker.backlog.append(request)
        worker.weight += weight
        if not worker.wakeup.is_set():
            worker.wakeup.set()

    def _submit_groups(self, request: FetchConsumersIfChanged) -> None:
        """Queue a FetchConsumersIfChanged as one part per worker, each holding the groups of that worker: a
        group is answered after the requests about it submitted before, as FetchConsumerIfChanged is."""
        if not self._running:
            raise RuntimeError(f"storage {self.name} is not running")
        cluster = request.cluster
        parts: dict[int, list[int]] = {}
        for index, group in enumerate(request.groups):
            parts.setdefault(self._worker_number(cluster + group), []).append(index)
        if not parts:
            _resolve(request.reply, [])
            return
        answers: list[Any] = [None] * len(request.groups)
        left = [len(parts)]
        for number, indexes in parts.items():
            self._queue(self._workers[number], _GroupsPart(request, indexes, answers, left), len(indexes))

    def submit_many(self, requests: Iterable[Any]) -> None:
        """``submit`` each request, in order. Cheaper for runs of requests about one group, which is how a
        reader of ``__consumer_offsets`` hands them over (one OffsetCommit's commits lie together there)."""
        if not self._running:
            raise RuntimeError(f"storage {self.name} is not running")
        last_cluster = last_group = None
        worker: _Worker | None = None
        for request in requests:
            if not isinstance(request, GROUP_SCOPED_REQUESTS):
                self.submit(request)
                continue
            if worker is None or request.group != last_group or request.cluster != last_cluster:  # else: the same worker
                worker = self._worker_for(request)
                assert worker is not None  # a group-scoped request always has one
                if not worker.wakeup.is_set():
                    worker.wakeup.set()
                last_cluster, last_group = request.cluster, request.group
            worker.backlog.append(request)
            worker.weight += _weight(request)

    async def put(self, request: Any) -> None:
        """Queue a request once its worker has fewer than ``queue-depth`` requests waiting."""
        worker = self._worker_for(request)
        if worker is None:
            return
        while len(worker.backlog) >= self.queue_depth and self._running:
            worker.room.clear()
            await worker.room.wait()
        self.submit(request)

    async def flush(self) -> None:
        """Return once every request submitted before this call has been handled."""
        if not self._running:
            raise RuntimeError(f"storage {self.name} is not running")
        loop = asyncio.get_running_loop()
        barriers = []
        for worker in self._workers:
            barrier = _Barrier(loop.create_future())
            worker.backlog.append(barrier)
            worker.weight += 1
            worker.wakeup.set()
            barriers.append(barrier.reply)
        await asyncio.gather(*barriers)

    def pending(self) -> int:
        """Requests submitted but not handled yet, over all workers, a run of commits counted by its commits."""
        return sum(worker.weight for worker in self._workers)

    def _worker_for(self, request: Any) -> _Worker | None:
        if not self._running:
            raise RuntimeError(f"storage {self.name} is not running")
        workers = self._workers
        if isinstance(request, GROUP_SCOPED_REQUESTS):
            key = request.cluster + request.group
        elif isinstance(request, _TOPIC_SCOPED):
            key = request.cluster + request.topic
        elif isinstance(request, _CLUSTER_WIDE):
            return workers[next(self._round_robin) % len(workers)]
        else:
            self._log.error("unknown storage request type", request=type(request).__name__)
            reply = getattr(request, "reply", None)
            if isinstance(reply, asyncio.Future):
                _resolve(reply, None)
            return None
        return workers[self._worker_number(key)]

    def _worker_number(self, key: str) -> int:
        """The worker of a group's or a topic's requests (``key``: the cluster's name and the group's or topic's)."""
        return xxhash.xxh64_intdigest(key.encode()) % len(self._workers)

    async def _run_worker(self, worker: _Worker) -> None:
        backlog = worker.backlog
        handlers = self._handlers
        add_consumer_offset = self.state.add_consumer_offset
        add_consumer_offsets = self.state.add_consumer_offsets
        record_time_wants = self.state.record_time_wants_in_steps
        pass_size = max(_LEAST_PASS, _TURN // len(self._workers))
        while True:
            if not backlog:
                worker.room.set()
                if not self._running:
                    return
                worker.wakeup.clear()
                await worker.wakeup.wait()
                continue
            # One clock reading per pass: the pass runs without yielding, so its requests are handled at
            # one instant anyway. Commits, nearly all requests while __consumer_offsets is read (in runs),
            # go straight to the state rather than through the handler table.
            now_s = int(self._clock.time())
            budget = pass_size
            ends = perf_counter() + _PASS_SECONDS
            while backlog and budget > 0:
                request = backlog.popleft()
                try:
                    kind = type(request)
                    if kind is SetConsumerOffset:
                        budget -= 1
                        reason = add_consumer_offset(request, now_s)
                        if reason is not None:
                            self._dropped(reason, request)
                    elif kind is SetConsumerOffsets:
                        budget -= len(request)
                        for index, reason in add_consumer_offsets(request, now_s):
                            self._dropped(reason, request.commit(index))
                    else:
                        budget -= _weight(request)
                        if kind is FetchRecordTimeWants:
                            request = _Steps(record_time_wants(request.cluster), request.reply)
                            kind = _Steps
                        if kind is not _Steps:
                            handlers[kind](request)
                        elif not self._step(request, ends):  # time ran out: the rest in the next pass, first
                            backlog.appendleft(request)
                            worker.weight += 1
                            break
                except Exception as exc:  # a bug must cost one request (or run), never the worker
                    self._log.exception("storage request failed", request=repr(request))
                    reply = getattr(request, "reply", None)
                    if isinstance(reply, asyncio.Future) and not reply.done():
                        reply.set_exception(exc)
            worker.weight -= pass_size - budget
            if len(backlog) < self.queue_depth:
                worker.room.set()
            await asyncio.sleep(0)

    @staticmethod
    def _step(request: _Steps, ends: float) -> bool:
        """Run a request's steps until it is done (True, its answer given) or the pass's time is up (False)."""
        steps = request.steps
        try:
            while True:
                next(steps)
                if perf_counter() >= ends:
                    return False
        except StopIteration as done:
            _resolve(request.reply, done.value)
            return True

    # --- handlers of Set requests: apply to the state, log drops ---------------------------------------

    def _dropped(self, reason: str | None, request: Any) -> None:
        if reason is None:
            return
        if reason in _WARN_REASONS:
            self._log.warning("dropped", reason=reason, request=request)
        else:
            self._log.debug("dropped", reason=reason, request=request)

    def _groups_part(self, part: _GroupsPart) -> None:
        request = part.request
        cluster, groups, known, answers = request.cluster, request.groups, request.known, part.answers
        now_s = int(self._clock.time())
        if_changed = self.state.consumer_if_changed
        for index in part.indexes:
            answers[index] = if_changed(cluster, groups[index], now_s, known[index])
        part.left[0] -= 1
        if not part.left[0]:
            _resolve(request.reply, answers)

    def _set_broker_offset(self, request: SetBrokerOffset) -> None:
        self._dropped(self.state.add_broker_offset(request), request)

    def _set_broker_offsets(self, request: SetBrokerOffsets) -> None:
        for index, reason in self.state.add_broker_offsets(request):
            self._dropped(reason, request.one(index))

    def _set_consumer_owner(self, request: SetConsumerOwner) -> None:
        self._dropped(self.state.add_consumer_owner(request, int(self._clock.time())), request)

    def _set_delete_topic(self, request: SetDeleteTopic) -> None:
        self._dropped(self.state.delete_topic(request), request)

    def _set_delete_group(self, request: SetDeleteGroup) -> None:
        self._dropped(self.state.delete_group(request), request)

    def _set_delete_partition_offsets(self, request: SetDeletePartitionOffsets) -> None:
        self._dropped(self.state.delete_partition_offsets(request), request)

    def _clear_consumer_owners(self, request: ClearConsumerOwners) -> None:
        self._dropped(self.state.clear_consumer_owners(request), request)
