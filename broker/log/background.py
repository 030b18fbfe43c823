"""A thread for the logs' slow housekeeping: work that must not hold up appends and reads.

A segment that rolls is fsynced here, as Kafka's scheduler flushes it after the roll: an fsync of a full
segment (1 GiB by default) takes from tens of milliseconds to seconds, and on the event loop it stopped every
connection of the broker for that long (measured in bench/HISTORY.md). Files deleted (segments left behind by
retention, DeleteRecords or truncation, a deleted topic's partitions) are removed here too, after the topic's
``file.delete.delay.ms``: unlinking a gigabyte takes the kernel a good part of a second. Jobs run one after
another in the order they were given, on one daemon thread started with the first job; a job that raises is
logged and the next one runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import heapq
import itertools
import queue
import threading
import time
from collections.abc import Callable
from functools import partial

import structlog

from broker.errors import ErrorCode, KafkaError
from broker.log.files import unlink_quietly, write_atomically

log = structlog.get_logger("broker.log")


class BackgroundThread:
    """Runs the jobs handed to :meth:`submit`, in order, on a thread of its own."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        if self._thread is None:
            with self._starting:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                    self._thread.start()
        self._jobs.put(job)

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Wait until every job submitted before this call has run; False on timeout."""
        done = threading.Event()
        self.submit(done.set)
        return done.wait(timeout)

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                job()
            except Exception:
                log.exception("background log job failed", thread=self.name)


# the one every log uses unless given another
FLUSHER = BackgroundThread("log-flusher")
# the file work of segment rolls (the new segment's files, the finished one's last index entries): a thread of
# its own, so that a roll, which an append waits for, does not queue behind the fsync of a gigabyte segment
ROLLER = BackgroundThread("log-roller")
# the broker's small metadata files (topic files, dynamic configs, ACLs, SCRAM credentials): a thread of their
# own, so that an AlterConfigs does not queue behind the fsync of a gigabyte segment
METADATA_WRITER = BackgroundThread("metadata-writer")


def write_later(path: str, data: bytes, *, private: bool = False) -> concurrent.futures.Future[None]:
    """Replace ``path`` with ``data``, fsynced, on the metadata writer; the future is done once it is.

    An fsync costs the caller nothing (on the event loop one took 20 ms while every connection waited).
    Writes run in the order asked, so the file ends with the last ``data`` given for it."""
    return _on_metadata_writer(path, partial(write_atomically, path, data, private=private))


def remove_later(path: str) -> concurrent.futures.Future[None]:
    """Remove ``path`` on the metadata writer, after the writes asked for before (which would bring it back)."""
    return _on_metadata_writer(path, partial(unlink_quietly, path))


def _on_metadata_writer(path: str, change: Callable[[], None]) -> concurrent.futures.Future[None]:
    done: concurrent.futures.Future[None] = concurrent.futures.Future()

    def job() -> None:
        try:
            change()
        except OSError as exc:
            log.error("cannot change a metadata file", path=path, error=str(exc))
            done.set_exception(exc)
        else:
            done.set_result(None)

    METADATA_WRITER.submit(job)
    return done


def written() -> concurrent.futures.Future[None]:
    """A future already done: what a store without a file hands out as its last write."""
    done: concurrent.futures.Future[None] = concurrent.futures.Future()
    done.set_result(None)
    return done


Submit = Callable[[Callable[[], None]], None]


class _Timers:
    """One daemon thread that hands each job to its ``submit`` when its time comes. A thread per job (a
    ``threading.Timer``) cost a thread start per deleted segment: a retention pass deleting hundreds of
    segments kept the interpreter lock from the event loop for a third of a second."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Callable[[], None], Submit]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, delay_s: float, job: Callable[[], None], submit: Submit) -> None:
        with self._changed:
            heapq.heappush(self._due, (time.monotonic() + delay_s, next(self._order), job, submit))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="log-timers", daemon=True)
                self._thread.start()
            self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._changed.wait(self._due[0][0] - time.monotonic() if self._due else None)
                _, _, job, submit = heapq.heappop(self._due)
            try:
                submit(job)
            except Exception:
                log.exception("handing a delayed log job over failed", thread=threading.current_thread().name)


_TIMERS = _Timers()


def run_later(job: Callable[[], None], delay_s: float, submit: Submit = FLUSHER.submit) -> None:
    """Hand ``job`` to ``submit`` (the background thread) after ``delay_s`` seconds, at once if 0 or less.
    The timer does not keep the process alive: what a stopping broker leaves is removed on its next start."""
    if delay_s <= 0:
        submit(job)
        return
    _TIMERS.add(delay_s, job, submit)


async def settled(future: concurrent.futures.Future[None]) -> None:
    """Wait for a background job's future, which other requests may be waiting on too (a roll, a log's fsyncs, a
    topic file). A waiter that is cancelled (its client gone) leaves the future alone: ``asyncio.wrap_future``
    alone cancels the future it wraps with its waiter, which failed every other waiter at once, and the job's
    thread then failed to set the result it had worked for (skipping what came after, a roll's snapshot)."""
    waiting = asyncio.wrap_future(future)
    waiting.add_done_callback(_observed)
    await asyncio.shield(waiting)


def _observed(waiting: asyncio.Future[None]) -> None:
    if not waiting.cancelled():
        waiting.exception()  # taken: an outcome whose waiters all left is not reported as never retrieved


async def wait_durable(future: concurrent.futures.Future[None] | None, what: str) -> None:
    """Wait for a log's background fsyncs (:meth:`PartitionLog.pending_durability`); a disk error is Kafka's
    KAFKA_STORAGE_ERROR."""
    if future is None:
        return
    try:
        await settled(future)
    except OSError as exc:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{what}: cannot write to disk: {exc}") from None
