"""A thread for the logs' slow housekeeping: work that must not hold up appends and reads.

A segment that rolls is fsynced here, as Kafka's scheduler flushes it after the roll: an fsync of a full
segment (1 GiB by default) takes from tens of milliseconds to seconds, and on the event loop it stopped every
connection of the broker for that long (measured in bench/README.md). Files deleted (segments left behind by
retention, DeleteRecords or truncation, a deleted topic's partitions) are removed here too, after the topic's
``file.delete.delay.ms``: unlinking a gigabyte takes the kernel a good part of a second. Jobs run one after
another in the order they were given, on one daemon thread started with the first job; a job that raises is
logged and the next one runs.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

import structlog

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


def run_later(job: Callable[[], None], delay_s: float,
              submit: Callable[[Callable[[], None]], None] = FLUSHER.submit) -> None:
    """Hand ``job`` to ``submit`` (the background thread) after ``delay_s`` seconds, at once if 0 or less.
    The timer does not keep the process alive: what a stopping broker leaves is removed on its next start."""
    if delay_s <= 0:
        submit(job)
        return
    timer = threading.Timer(delay_s, submit, args=(job,))
    timer.daemon = True
    timer.start()
