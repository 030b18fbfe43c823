"""What a follower does to its own log with its leader's answers: cut a divergent tail after OffsetForLeaderEpoch
(KIP-101, KIP-279) and append the batches a Fetch brought. Pure over a :class:`PartitionLog`, no I/O of its own
beyond the log's; :mod:`broker.cluster.replication`'s fetchers call these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

from broker.log.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_OFFSET
from broker.protocol.records import iter_batches

if TYPE_CHECKING:
    from broker.log.partition import PartitionLog

log = structlog.get_logger("broker.replication")


def truncation_for_epoch_answer(
    latest_epoch: int,
    latest_epoch_start: int,
    log_end_offset: int,
    answer_epoch: int,
    answer_end_offset: int,
    local_end_for_epoch: Callable[[int], tuple[int, int]],
) -> tuple[int, bool]:
    """Where a follower cuts its log after asking the leader about ``latest_epoch`` (its newest epoch,
    starting at ``latest_epoch_start``), and whether the logs then agree (False: ask again with the
    follower's new latest epoch).

    ``answer_epoch``/``answer_end_offset`` are the leader's reply: the largest epoch it knows at or below the
    asked one and where that epoch ends on the leader. ``local_end_for_epoch`` is the follower's own
    OffsetForLeaderEpoch lookup.
    """
    if answer_epoch == UNDEFINED_EPOCH or answer_end_offset == UNDEFINED_OFFSET:
        # The leader knows no epoch at or after ours, so it holds none of our latest epoch's records.
        return min(latest_epoch_start, log_end_offset), False
    if answer_epoch == latest_epoch:
        return min(answer_end_offset, log_end_offset), True
    local_epoch, local_end = local_end_for_epoch(answer_epoch)
    if local_epoch != answer_epoch:
        # We never had the leader's epoch: drop what came after our largest epoch below it, then ask again.
        return min(local_end, log_end_offset), False
    return min(answer_end_offset, local_end, log_end_offset), True


def cut_divergent_tail(plog: PartitionLog, asked_epoch: int, asked_epoch_start: int, answer_epoch: int,
                       answer_end_offset: int) -> bool:
    """Apply the leader's OffsetForLeaderEpoch answer about our latest epoch ``asked_epoch`` (starting at
    ``asked_epoch_start``) to our log; True once the log agrees with the leader's, False to ask again."""
    offset, agreed = truncation_for_epoch_answer(
        asked_epoch, asked_epoch_start, plog.log_end_offset, answer_epoch, answer_end_offset,
        plog.end_offset_for_epoch,
    )
    if offset < plog.log_end_offset:
        log.info("truncating divergent log tail", directory=plog.directory, from_offset=plog.log_end_offset,
                 to_offset=offset, epoch=asked_epoch)
        # its file work (a roll of a log emptied, or the cut) on the roller: the event loop goes on, the partition's
        # appends getting RollPending until it is done
        plog.truncate_to(offset, roll_off_thread=True)
    # A round that cut nothing older cannot make the next answer differ: stop rather than loop.
    return agreed or plog.latest_epoch >= asked_epoch


def append_leader_batches(plog: PartitionLog, records: bytes, fetch_offset: int) -> bool:
    """Append the whole batches of a fetch answer that end past ``fetch_offset``; True if any was appended.

    The leader answers from the start of the batch holding ``fetch_offset``, so earlier records of that
    batch may be here already. ``fetch_offset`` may lie past our log end (the leader's log starts there);
    the log then has a gap. A batch starting inside our last batch means that batch was cut differently
    on the leader: ours goes, its file work off the caller's thread, and the appending ends there
    (:class:`broker.log.partition.RollPending`), the batches coming again in the next fetch from the new log end. A
    batch that needs a roll starts it off the caller's thread and ends the appending in the same way.
    """
    view = memoryview(records)
    for pos, header in iter_batches(view):
        if header.next_offset <= fetch_offset:
            continue
        if header.base_offset < plog.log_end_offset:
            plog.truncate_to(header.base_offset, roll_off_thread=True)
        plog.append_replicated(view[pos:], roll_off_thread=True)
        return True
    return False
