"""A thread for the logs' slow housekeeping: work that must not hold up appends and reads.

A segment that rolls is fsynced here, as Kafka's scheduler flushes it after the roll: an fsync of a full
segment (1 GiB by default) takes from tens of milliseconds to seconds, and on the event loop it stopped every
connection of the broker for that long (measured in bench/README.md). Jobs run one after another in the order
they were given, on one daemon thread started with the first job; a job that raises is logged and the next
one runs.
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
