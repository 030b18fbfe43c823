"""The durability of a partition's log: checkpoints written and segments fsynced by a job on the
background, flush.messages/flush.ms, flush() and close(); see "Off the caller's thread" in
:mod:`broker.log.partition`.
"""

from __future__ import annotations

import concurrent.futures
import os

from broker.log.files import fsync_directory, write_atomically
from broker.log.partition_state import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_FILE,
    PartitionState,
)
from broker.log.producer_state import write_snapshot
from broker.log.segment import LogSegment


class LogDurability(PartitionState):
    # --- durability, off the caller's thread -------------------------------------------------------------

    def _schedule_durability(self) -> concurrent.futures.Future[None]:
        """The future of the background job that will make what is asked so far durable; the caller holds
        the lock."""
        if self._durable_future is None:
            self._durable_future = concurrent.futures.Future()
            self._background(self._make_durable)
        return self._durable_future

    def _write_later(self, path: str, data: bytes) -> None:
        """Replace the checkpoint ``path`` with ``data``, fsynced, on the background; the caller holds the lock.
        Of several contents given, the newest stays, whichever thread writes it. The leader epochs' waits while a
        truncation's file work is pending: on disk before the data is cut, a crash would find the old tail's records
        without their epochs."""
        self._write_sequence += 1
        if self._file_work and path == self._epochs.path:
            self._held_writes[path] = (self._write_sequence, data)
            return
        self._pending_writes[path] = (self._write_sequence, data)
        self._schedule_durability()

    def _release_held_writes(self) -> None:
        """The checkpoints held while a truncation's file work was pending, to be written; the caller holds the
        lock."""
        if self._held_writes:
            self._pending_writes.update(self._held_writes)
            self._held_writes = {}
            self._schedule_durability()

    def _request_flush(self) -> concurrent.futures.Future[None]:
        """fsync the active segment (and rolled ones not yet synced) on the background; the caller holds the
        lock."""
        self._unflushed_messages = 0
        self._first_unflushed_ms = None
        self._flush_requested = self._schedule_durability()
        return self._flush_requested

    def pending_durability(self) -> concurrent.futures.Future[None] | None:
        """A future that completes once every checkpoint and fsync asked for so far is done; None if none is
        pending."""
        with self._lock:
            return self._durable_future

    def pending_flush(self) -> concurrent.futures.Future[None] | None:
        """The future of the fsync flush.messages/flush.ms asked for, until it is done."""
        with self._lock:
            return self._flush_requested

    def _take_writes(self) -> dict[str, tuple[int, bytes]]:
        writes, self._pending_writes = self._pending_writes, {}
        return writes

    def _write_now(self) -> None:
        """Write every checkpoint asked for, the background job's too if it took them and has not written
        them yet (what it writes later is then older, and skipped); the caller holds the lock."""
        self._write_files({**self._in_flight, **self._take_writes()})

    def _write_files(self, writes: dict[str, tuple[int, bytes]]) -> None:
        """Write checkpoints taken with :meth:`_take_writes`, skipping any a newer content has replaced."""
        with self._write_lock:
            if self._deleted:
                return
            for path, (sequence, data) in writes.items():
                if sequence > self._written.get(path, 0):
                    write_atomically(path, data)
                    self._written[path] = sequence

    def _make_durable(self) -> None:
        """The background job: checkpoints, then the data of rolled segments (and of the active one when a
        flush was asked), then the recovery point moves past the rolled segments. Only the segments' data is
        fsynced: indexes are checked on open and rebuilt when they do not fit the log."""
        with self._lock:
            done, self._durable_future = self._durable_future, None
            writes = self._in_flight = self._take_writes()
            rolled = [] if self._closed else self._pending_sync()  # close() fsynced them
            flush = done is not None and self._flush_requested is done
            active = self._segments[-1]
            # a planned segment (a restarted log's until its roll) has no file, nor anything written
            flushing = [active] if flush and not self._closed and not active.planned else []
            syncing = [*rolled, *flushing]
            loaned = self._descriptors.borrow(len(syncing))
            descriptors = [os.dup(segment.fd) for segment in syncing] if loaned else []
            truncated, self._truncated = self._truncated, False
        try:
            self._write_files(writes)
            for fd in descriptors:
                os.fsync(fd)
            if not loaned:  # no room in the budget of open files for duplicates: the segments' own, under the lock
                with self._lock:
                    for segment in syncing:
                        if segment in self._segments:  # else deleted meanwhile
                            os.fsync(segment.fd)
            if rolled or truncated:
                fsync_directory(self.directory)  # the new segments' names, the truncated ones' removal
        except FileNotFoundError:
            pass  # the log was deleted meanwhile
        except OSError as exc:
            if done is not None:
                done.set_exception(exc)
            raise
        finally:
            for fd in descriptors:
                os.close(fd)
            self._descriptors.give_back(len(descriptors))
            if flush:
                with self._lock:
                    self._flush_requested = None if self._flush_requested is done else self._flush_requested
        noted = None
        with self._lock:
            if self._in_flight is writes:
                self._in_flight = {}
            if rolled and not self._closed:
                self._unsynced = [segment for segment in self._pending_sync() if segment not in rolled]
                noted = self._note_recovery_point()
        if noted is not None:
            # without the lock: under it, the file's creation and rename held up the partition's appends (on the
            # event loop) after every roll, up to ~0.1 s on a busy disk
            self._write_recovery_point(*noted)
        if done is not None:
            done.set_result(None)

    def _pending_sync(self) -> list[LogSegment]:
        """The rolled segments still waiting for their fsync (retention and truncation may have deleted some
        since they rolled); the caller holds the lock."""
        self._unsynced = [segment for segment in self._unsynced if segment in self._segments]
        return list(self._unsynced)

    def _sync_rolled_now(self) -> None:
        """fsync the rolled segments still waiting for the background, on this thread (under the lock)."""
        for segment in self._pending_sync():
            os.fsync(segment.fd)
        if self._unsynced:
            fsync_directory(self.directory)
            self._unsynced = []

    def _checkpoint_recovery_point(self) -> None:
        """Recovery starts at the oldest segment that may hold data not yet fsynced. A hint: if the update is
        lost, recovery starts earlier than it needs to."""
        self._write_recovery_point(*self._note_recovery_point())

    def _note_recovery_point(self, point: int | None = None) -> tuple[int, int]:
        """The recovery point now (``point``, else the oldest unsynced segment's base) and its place among the
        writes, for :meth:`_write_recovery_point`; the caller holds the lock."""
        if point is None:
            point = self._unsynced[0].base_offset if self._unsynced else self._segments[-1].base_offset
        self._write_sequence += 1
        return self._write_sequence, point

    def _write_recovery_point(self, sequence: int, point: int) -> None:
        """Write a recovery point noted by :meth:`_note_recovery_point`, unless one noted later is written
        already (the background writes without the log's lock). Not fsynced: a hint."""
        path = self._path(RECOVERY_POINT_FILE)
        with self._write_lock:
            if self._deleted or sequence <= self._written.get(path, 0):
                return
            write_atomically(path, str(point).encode(), durable=False)
            self._written[path] = sequence

    def _after_write(self, records: int, now_ms: int) -> concurrent.futures.Future[None] | None:
        """Count the records written; when flush.messages or flush.ms says so, the future of their fsync."""
        self._unflushed_messages += records
        if self._first_unflushed_ms is None:
            self._first_unflushed_ms = now_ms
        if (
            self._unflushed_messages >= self.config.flush_messages
            or now_ms - self._first_unflushed_ms >= self.config.flush_ms
        ):
            return self._request_flush()
        return None

    # --- durability and lifetime -------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the active segment and any rolled one the background has not fsynced yet."""
        with self._lock:
            self._check_open()
            self._flush_locked()

    def _flush_locked(self) -> None:
        self._write_now()
        if self._unsynced:
            self._sync_rolled_now()
            self._checkpoint_recovery_point()
        self._segments[-1].flush()
        self._unflushed_messages = 0
        self._first_unflushed_ms = None

    def flush_if_due(self, now_ms: int) -> bool:
        """Have the background fsync if the oldest unflushed append is older than ``flush.ms``; True if due."""
        with self._lock:
            if self._closed or self._first_unflushed_ms is None:
                return False
            if now_ms - self._first_unflushed_ms < self.config.flush_ms:
                return False
            self._request_flush()
            return True

    def close(self) -> None:
        """fsync everything, checkpoint producer state, and mark the shutdown clean."""
        with self._lock:
            self._wait_for_roll()
            if self._closed:
                return
            self._closed = True
            active = self._segments[-1]
            active.close_for_appends()
            self._sync_rolled_now()
            active.flush()
            end = self.log_end_offset
            write_snapshot(self.directory, end, self._producers.to_json())
            self._write_recovery_point(*self._note_recovery_point(active.base_offset))
            for segment in self._segments:
                segment.close()
            self._write_now()
            # The marker says "trust every file": it must not reach the disk before they do.
            with open(self._path(CLEAN_SHUTDOWN_FILE), "wb"):
                pass
            fsync_directory(self.directory)

    def close_without_checkpoint(self) -> None:
        """Release files without marking the shutdown clean (the log is about to be deleted)."""
        with self._lock:
            self._closed = True
            self._pending_writes.clear()
            for segment in self._segments:
                segment.close()
            with self._write_lock:  # a checkpoint being written finishes; none is written after
                self._deleted = True

    @property
    def closed(self) -> bool:
        return self._closed
