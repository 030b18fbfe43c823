"""The leader-epoch cache of a partition: which leader epoch started at which offset.

OffsetForLeaderEpoch answers from it, and a follower uses it after a leader change to find where its log
diverges. It is checkpointed in the partition directory as ``leader-epoch-checkpoint`` in Kafka's text
format (a version line ``0``, a count line, then ``epoch start_offset`` lines), rewritten atomically
whenever it changes (rarely: once per leader change, truncation or retention).
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right

from broker.log.files import write_atomically

CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, CHECKPOINT_FILE)
        self._epochs: list[int] = []
        self._start_offsets: list[int] = []
        self._load()

    def _load(self) -> None:
        try:
            with open(self.path) as f:
                lines = f.read().split("\n")
        except FileNotFoundError:
            return
        try:
            count = int(lines[1]) if lines[0].strip() == "0" else 0
            entries = [tuple(int(part) for part in line.split()) for line in lines[2 : 2 + count]]
        except (IndexError, ValueError):
            entries = []  # a damaged checkpoint is rebuilt from the batches' leader epochs
        for epoch, start in entries:
            if not self._epochs or (epoch > self._epochs[-1] and start >= self._start_offsets[-1]):
                self._epochs.append(epoch)
                self._start_offsets.append(start)

    def _save(self) -> None:
        lines = ["0", str(len(self._epochs))]
        lines += [f"{epoch} {start}" for epoch, start in zip(self._epochs, self._start_offsets, strict=True)]
        write_atomically(self.path, ("\n".join(lines) + "\n").encode())

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._start_offsets, strict=True))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Note that ``epoch`` begins at ``start_offset``; only a newer epoch changes anything."""
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1]):
            return
        self._epochs.append(epoch)
        self._start_offsets.append(start_offset)
        self._save()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's OffsetForLeaderEpoch answers it.

        The latest epoch ends at the log end. An older epoch ends where the next known epoch starts and is
        reported as the largest known epoch at or below it. Unknown newer epochs get (-1, -1).
        """
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self._epochs[-1]:
            return epoch, log_end_offset
        higher = bisect_right(self._epochs, epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if higher == 0:
            return epoch, self._start_offsets[0]
        return self._epochs[higher - 1], self._start_offsets[higher]

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at ``end_offset`` or later (the log was truncated there)."""
        keep = bisect_left(self._start_offsets, end_offset)
        if keep < len(self._epochs):
            del self._epochs[keep:]
            del self._start_offsets[keep:]
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch holding it starts there."""
        covering = bisect_right(self._start_offsets, start_offset) - 1
        if covering < 0 or (covering == 0 and self._start_offsets[0] == start_offset):
            return
        del self._epochs[:covering]
        del self._start_offsets[:covering]
        self._start_offsets[0] = start_offset
        self._save()

    def clear(self) -> None:
        if self._epochs:
            self._epochs.clear()
            self._start_offsets.clear()
            self._save()
