"""A replicated state machine on Raft: our small interface over pysyncobj.

:class:`RaftNode` replicates commands (plain dicts) to a set of voters and applies them, in log
order, to a state machine given as a factory (``apply(command) -> result``, ``to_snapshot()``, and a
``restore(snapshot)`` constructor). pysyncobj runs Raft on its own thread; so that the asyncio side never
reads a structure that the Raft thread is changing, there are two copies of the state machine:

* the Raft thread's copy applies each committed command, produces the result a proposer receives, and
  is what log compaction writes to disk and sends to a replica that is too far behind;
* the event loop's copy (:attr:`RaftNode.state`) applies the same commands in the same order, handed
  over with ``call_soon_threadsafe``. Applying is deterministic, so both copies are always equal at
  the same log position, and a proposal's answer arrives after the loop's copy has applied it.

The voters are the configured peers and this node, changed at run time one at a time (pysyncobj's dynamic
membership, a Raft single-server change: :meth:`RaftNode.add_voter`, :meth:`RaftNode.remove_voter`); each
change is an entry of the log, so a restarted node and a snapshot carry the voter set as it was changed.
A node that joins a running cluster (``join``) is not a voter until one is added for it: until it has heard from a
leader it never campaigns, so that its elections cannot disturb the quorum it is waiting to join.

The Raft journal and snapshots live in ``data_dir``, so a restarted node replays its state before it
even reaches its peers. All Raft traffic is encrypted and authenticated with the cluster secret's "raft"
key (:mod:`keys`; pysyncobj's ``password``, Fernet): a node without the secret cannot join, read, or inject
anything. pysyncobj pickles its messages, so whoever has the secret can run code on every node. When
the brokers reach each other over TLS, Raft's connections go inside TLS as well (:mod:`raft_tls`). What a
connection may make a node read and hold before and after it has shown the secret is bounded
(:mod:`raft_guard`).
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import pickle
import ssl
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import structlog
from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated
from pysyncobj.monotonic import monotonic as pysyncobj_clock

from broker.cluster import raft_guard
from broker.cluster.keys import derive_key
from broker.cluster.raft_tls import RaftTlsTunnels, tunnelled_transport
from broker.log.files import reserve_space

log = structlog.get_logger("broker.raft")

Command = dict[str, Any]


class StateMachine(Protocol):
    def apply(self, command: Command) -> Any: ...

    def to_snapshot(self) -> Any: ...


class ProposalFailed(Exception):
    """The command was not committed (no leader, leadership changed, timed out); it may be retried.

    After a timeout or a leadership change the command may still be committed later: commands should
    be safe to apply twice (ours are, by their ids and epochs)."""


JOURNAL_RESERVE_MIN = 1 << 20  # bytes: what the journal of a young cluster has reserved ahead, at least
_JOINING_TIMEOUT = 10.0 ** 9  # seconds: no election timeout ever runs out while a joining node waits
_FAILURES = {value: name for name, value in vars(FAIL_REASON).items() if name.isupper()}


@dataclass(frozen=True)
class RaftTiming:
    """Raft's clocks, in seconds. Elections start after a random quiet time in [min, max] timeout."""

    election_timeout_min: float = 0.4
    election_timeout_max: float = 1.4
    heartbeat_interval: float = 0.1
    reconnect_interval: float = 1.0

    def __post_init__(self) -> None:
        if not 3 * self.heartbeat_interval < self.election_timeout_min < self.election_timeout_max:
            raise ValueError("need 3 x heartbeat_interval < election_timeout_min < election_timeout_max")
        if self.reconnect_interval <= 0:
            raise ValueError("reconnect_interval must be positive")


class RaftListener(Protocol):
    """Called on the event loop."""

    def on_applied(self, command: Command, result: Any) -> None: ...

    def on_restored(self) -> None: ...

    def on_ready(self) -> None: ...

    def on_leader_changed(self, leader_id: int | None) -> None: ...


# Errors of a disk that cannot keep the journal (Kafka's metadata log dir failing), rather than of a file system
# that cannot reserve space ahead (then the journal just grows as pysyncobj grows it).
_STORAGE_FAILURES = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS}


def _log_late_failure(change: asyncio.Future[Any]) -> None:
    """A voter change answered before its commit: whether it was committed after all shows in the voters."""
    if not change.cancelled() and change.exception() is not None:
        log.warning("a voter change answered before its commit was not committed", error=str(change.exception()))


def reserve_beyond_end(path: Path, length: int) -> bool:
    """Allocate the first ``length`` bytes of the file's blocks without changing its size (Linux fallocate,
    KEEP_SIZE); False where the file system or platform cannot. OSError when the disk refuses (full, failing).

    pysyncobj keeps its journal in a memory-mapped file that it grows by truncating it longer: on a full disk
    the first write to a page never allocated kills the process with SIGBUS, saying nothing. Pages reserved
    ahead take those writes; a reservation the disk refuses is the failure, reported while there is time."""
    fd = os.open(path, os.O_RDWR)
    try:
        return reserve_space(fd, 0, length)
    except OSError as exc:
        if exc.errno in _STORAGE_FAILURES:
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        return False
    finally:
        os.close(fd)


class _SyncObjRunner(SyncObj):
    """pysyncobj's object: its one replicated method applies a command on the Raft thread."""

    def __init__(self, node: RaftNode, self_address: str, peer_addresses: list[str], conf: SyncObjConf,
                 transport_class: type) -> None:
        self._node = node
        super().__init__(self_address, peer_addresses, conf, transportClass=transport_class)

    @replicated
    def apply_command(self, command: Command) -> Any:
        return self._node._apply_on_raft_thread(command)

    def _onTick(self, timeToWait: float = 0.0) -> None:  # noqa: N802, N803 (pysyncobj's names)
        # pysyncobj logs an exception of its tick (a journal or snapshot write the disk refused) and ticks
        # again, the half-done tick's Raft state left as it was: a broker must not go on from that.
        try:
            super()._onTick(timeToWait)
        except OSError as exc:
            if exc.errno in _STORAGE_FAILURES:
                self._node._storage_failed(exc)
            raise


@dataclass(frozen=True, slots=True)
class RaftProgress:
    term: int
    commit_index: int  # the last entry the quorum committed, as far as this node knows
    commit_lag: int  # entries the leader committed that this node has not applied yet


@dataclass(frozen=True, slots=True)
class QuorumState:
    """What this node's Raft knows of the quorum, in Kafka's terms: Raft's indexes count entries from 1, so the
    last index is the log end offset and the commit index the high watermark of a log whose offsets count
    from 0. ``log_ends``: each voter's log end as this node knows it: its own always, the others' only while
    it leads (its match index of theirs), -1 otherwise."""

    leader_id: int | None
    term: int
    high_watermark: int
    log_ends: dict[int, int]


class RaftNode:
    def __init__(self, node_id: int, listen: str, peers: dict[int, str], secret: str, data_dir: Path,
                 state_factory: Callable[[], StateMachine], restore: Callable[[Any], StateMachine], *,
                 timing: RaftTiming | None = None, listener: RaftListener | None = None,
                 compaction_entries: int = 5000, tls: tuple[ssl.SSLContext, ssl.SSLContext] | None = None,
                 join: bool = False) -> None:
        """``tls``: (server, client) contexts to carry the Raft traffic inside TLS (:mod:`raft_tls`); ``join``: this
        node waits to be added to a running cluster (see the module's docstring)."""
        if not secret:
            raise ValueError("the cluster secret must not be empty")
        self.node_id = node_id
        self.listen = listen
        self.peers = {n: a for n, a in peers.items() if n != node_id}
        self.secret = secret
        self.data_dir = Path(data_dir)
        self.timing = timing or RaftTiming()
        self.listener = listener
        self._restore = restore
        self._compaction_entries = compaction_entries
        self._tls = tls
        self._join = join
        self._conf: SyncObjConf | None = None
        self._tunnels: RaftTlsTunnels | None = None
        self._raft_state: StateMachine = state_factory()
        self.state: StateMachine = state_factory()  # the event loop's copy; read it, never change it
        self._ids_by_address = {address: n for n, address in self.peers.items()}
        self._ids_by_address[listen] = node_id
        self._sync: _SyncObjRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._leader_seen: object = object()  # the leader last reported, compared on the Raft thread
        self.leader_id: int | None = None
        # monotonic time this node last had a Raft leader it is connected to (itself leading counts), written
        # by the Raft thread's tick
        self._quorum_seen_at = 0.0
        # True once this node has applied everything the leader had committed when it (re)joined: before
        # that, :attr:`state` may be an old one (replaying the journal, or behind the cluster).
        self.ready = False
        self._next_reservation = 0.0  # monotonic time of the journal's next reservation check
        # What the Raft thread hands the loop, in order, taken by one loop callback for all that queued meanwhile
        # (see :meth:`_to_loop`); guarded by the lock, as the two threads share it.
        self._handed_over: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        self._handover_lock = threading.Lock()
        # True while the loop applies a command that more commands already waiting follow: a listener may leave
        # its work on the metadata (reconciling a broker with it) to the last of them.
        self.applying_more = False

    # --- lifecycle ---------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        # The journal and snapshots hold the cluster's metadata, SCRAM credentials and ACLs among it, and are
        # written by pysyncobj with the default mode: the directory keeps them from other users.
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)
        timing = self.timing
        conf = SyncObjConf(
            password=derive_key(self.secret, "raft").hex(),
            journalFile=str(self.data_dir / "raft.journal"),
            fullDumpFile=str(self.data_dir / "raft.snapshot"),
            serializer=self._write_snapshot,
            deserializer=self._read_snapshot,
            raftMinTimeout=timing.election_timeout_min,
            raftMaxTimeout=timing.election_timeout_max,
            appendEntriesPeriod=timing.heartbeat_interval,
            connectionTimeout=max(3.5, timing.election_timeout_max),
            connectionRetryTime=timing.reconnect_interval,
            # A leader cut off from the majority steps down quickly: it must not act as controller.
            leaderFallbackTimeout=timing.election_timeout_max,
            logCompactionMinEntries=self._compaction_entries,
            useFork=False,
            dynamicMembershipChange=True,
            onReady=lambda: self._to_loop(self._became_ready),
        )
        self._conf = conf
        transport: type = raft_guard.GuardedTransport
        if self._tls is not None:
            self._tunnels = RaftTlsTunnels(self.listen, list(self.peers.values()), *self._tls)
            await self._tunnels.start()
            conf.bindAddress = self._tunnels.internal
            transport = tunnelled_transport(self._tunnels)
        raft_guard.install()
        # Constructed on the loop's thread: pysyncobj's tick thread stops when its creator thread ends.
        self._sync = _SyncObjRunner(self, self.listen, list(self.peers.values()), conf, transport)
        if self._join:
            # quiet until a leader speaks (:meth:`_watch_leader` puts the configured timeouts back); set after
            # the construction, whose checks want timeouts below the connection timeout, and before the first
            # election timeout can run out (at least election_timeout_min from now)
            conf.raftMinTimeout, conf.raftMaxTimeout = _JOINING_TIMEOUT, 2 * _JOINING_TIMEOUT
            self._sync._SyncObj__raftElectionDeadline = pysyncobj_clock() + _JOINING_TIMEOUT
        self._sync.addOnTickCallback(self._watch_leader)
        self._sync.addOnTickCallback(self._reserve_journal)
        log.info("raft started", node_id=self.node_id, listen=self.listen, peers=self.peers)

    async def stop(self) -> None:
        sync, self._sync = self._sync, None
        if sync is not None:
            await asyncio.to_thread(sync.destroy_synchronous)
            log.info("raft stopped", node_id=self.node_id)
        tunnels, self._tunnels = self._tunnels, None
        if tunnels is not None:
            await tunnels.stop()

    def progress(self) -> RaftProgress | None:
        """Where this node's Raft stands (for the broker's metrics); None while it is not running."""
        sync = self._sync
        if sync is None:
            return None
        status = sync.getStatus()  # plain attribute reads: safe from the event loop's thread
        # the leader's commit index as last heard from it (None before any word from a leader)
        leader_commit = status["leader_commit_idx"]
        if leader_commit is None:
            leader_commit = status["commit_idx"]
        return RaftProgress(term=status["raft_term"], commit_index=status["commit_idx"],
                            commit_lag=max(leader_commit - status["last_applied"], 0))

    # --- proposing ---------------------------------------------------------------------------------------

    @property
    def in_quorum(self) -> bool:
        """Whether this node has been in contact with the quorum's leader within the longest election timeout.
        A leader cut off from the majority steps down after that long; a follower cut off from everyone keeps
        naming its old leader (pysyncobj starts no election while connected to no one), so the connection to
        the leader is what counts."""
        return time.monotonic() - self._quorum_seen_at <= self.timing.election_timeout_max

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    async def propose(self, command: Command, timeout: float = 10.0) -> Any:
        """Replicate ``command`` (through the leader, from any node) and return its result once applied here."""
        return await self._settled(lambda done: self._sync.apply_command(command, callback=done), timeout)

    async def _settled(self, start: Callable[[Callable[[Any, int], None]], None], timeout: float) -> Any:
        """Start a pysyncobj call that reports (result, error) to a callback on the Raft thread, and await it."""
        if self._sync is None or self._loop is None:
            raise ProposalFailed("raft is not running")
        loop = self._loop
        answer: asyncio.Future[Any] = loop.create_future()

        def settle(result: Any, error: int) -> None:
            if not answer.done():
                if error == FAIL_REASON.SUCCESS:
                    answer.set_result(result)
                else:
                    answer.set_exception(ProposalFailed(_FAILURES.get(error, str(error))))

        def on_raft_thread(result: Any, error: int) -> None:
            loop.call_soon_threadsafe(settle, result, error)

        start(on_raft_thread)
        try:
            async with asyncio.timeout(timeout):
                return await answer
        except TimeoutError:
            raise ProposalFailed(f"not committed within {timeout} s") from None

    def quorum_state(self) -> QuorumState | None:
        """A consistent-enough reading of pysyncobj's own state (None before start): each value is read at once
        under the GIL while the Raft thread may move on, so a follower's offset can lag the leader's by what
        was appended between two reads, as any snapshot of a live quorum does."""
        sync = self._sync
        if sync is None:
            return None
        term = sync.raftCurrentTerm
        high_watermark = sync.raftCommitIndex
        own = sync._SyncObj__getCurrentLogIndex()
        leading = self.is_leader
        matched = dict(sync._SyncObj__raftMatchIndex) if leading else {}
        by_id = {self._ids_by_address.get(node.id): index for node, index in matched.items()}
        log_ends = {node_id: by_id.get(node_id, -1) for node_id in self.voters()}
        log_ends[self.node_id] = own
        return QuorumState(self.leader_id, term, high_watermark, log_ends)

    # --- the voters --------------------------------------------------------------------------------------

    def learn_address(self, node_id: int, address: str) -> None:
        """Name the node at a Raft address: a voter added at run time is known to pysyncobj by address only."""
        self._ids_by_address[address] = node_id

    def address_of(self, node_id: int) -> str | None:
        return next((address for address, known in self._ids_by_address.items() if known == node_id), None)

    def voters(self) -> dict[int, str]:
        """The voter set as this node knows it (this node included), by node id: the configured one until
        started, then pysyncobj's, which follows each membership change as its entry reaches this node."""
        sync = self._sync
        if sync is None:
            return {self.node_id: self.listen, **self.peers}
        addresses = {node.id for node in sync.otherNodes}  # set.copy under the GIL: a consistent reading
        voters = {self._ids_by_address[a]: a for a in addresses if a in self._ids_by_address}
        voters[self.node_id] = self.listen
        return voters

    async def add_voter(self, node_id: int, address: str, timeout: float = 10.0, *, committed: bool = True) -> None:
        """Make the node at ``address`` a voter (it should be running, with the voters as its peers, so that it
        catches up at once). ProposalFailed when the quorum did not commit it, as for :meth:`propose`. Without
        ``committed`` the wait ends once the change is in this node's log and in effect here (pysyncobj's leader
        takes a new voter set as it appends it), before the quorum commits it: AddRaftVoter's AckWhenCommitted
        false, which Kafka's leader answers once it wrote the change locally."""
        self.learn_address(node_id, address)
        await self._change_membership("addNodeToCluster", address, lambda: node_id in self.voters(),
                                      time.monotonic() + timeout, committed=committed)

    async def remove_voter(self, node_id: int, timeout: float = 10.0) -> None:
        """Take another node out of the voter set. A node does not remove itself: pysyncobj's leader refuses to,
        and a follower would never learn that its removal was committed (the leader stops replicating to it at
        once); a leader asked to leave hands its leadership over (:meth:`hand_over_leadership`) and asks the new
        leader."""
        if node_id == self.node_id:
            raise ProposalFailed("a node does not remove itself from the voters: another voter removes it")
        address = self.voters().get(node_id)
        if address is None:
            raise ProposalFailed(f"node {node_id} is not a voter")
        await self._change_membership("removeNodeFromCluster", address, lambda: node_id not in self.voters(),
                                      time.monotonic() + timeout)

    async def _until(self, ready: Callable[[], bool], timeout: float, *, give_up: Callable[[], bool] = lambda: False,
                     every: float | None = None) -> bool:
        """Poll ``ready`` (every half heartbeat, or ``every`` seconds) until it holds: True; False as soon as
        ``give_up()`` says so or Raft is stopped, or once ``timeout`` seconds have passed."""
        deadline = time.monotonic() + timeout
        while True:
            if give_up():
                return False
            if ready():
                return True
            if self._sync is None or time.monotonic() >= deadline:
                return False
            await asyncio.sleep(every or self.timing.heartbeat_interval / 2)

    async def leader_elected(self, timeout: float) -> bool:
        """Wait (within ``timeout`` seconds) until this node knows a Raft leader; whether it does."""
        return await self._until(lambda: self.leader_id is not None, timeout)

    async def followers_have_log(self, timeout: float) -> bool:
        """As the leader: wait until every follower it is connected to has acknowledged its whole log as it is now
        (an entry appended after a commit takes that commit to each follower that acknowledges it); whether they
        all did within ``timeout`` seconds. False at once if this node does not lead."""
        sync = self._sync
        if sync is None or not self.is_leader:
            return False
        end = sync._SyncObj__getCurrentLogIndex()

        def acknowledged() -> bool:
            sync = self._sync
            assert sync is not None  # give_up was asked first
            matched = dict(sync._SyncObj__raftMatchIndex)  # a dict copy under the GIL: a consistent reading
            return all(index >= end for node, index in matched.items() if sync.isNodeConnected(node))

        return await self._until(acknowledged, timeout, give_up=lambda: self._sync is None or not self.is_leader)

    async def hand_over_leadership(self, timeout: float = 10.0) -> int:
        """Make a caught-up voter the leader instead of this node; its id, once this node knows it."""
        def handed_over() -> bool:
            if not self.is_leader and self.leader_id is not None:
                return True
            sync = self._sync
            if self.is_leader and sync is not None:
                # pysyncobj picks the most caught-up connected voter, and refuses while none has the whole log
                sync.transferLeadership()
            return False

        if not await self._until(handed_over, timeout, every=self.timing.heartbeat_interval):
            raise ProposalFailed("leadership not handed over in time")
        assert self.leader_id is not None
        return self.leader_id

    async def _change_membership(self, method: str, address: str, done: Callable[[], bool], deadline: float, *,
                                 committed: bool = True) -> None:
        """Propose a membership change until it is in effect here (and committed, with ``committed``). pysyncobj
        refuses one while another is not committed yet or no leader is known, and a leader change fails what was
        on its way: each may be retried, and one that was committed after all is seen in the voters."""
        while True:
            sync = self._sync
            if sync is None:
                raise ProposalFailed("raft is not running")
            # pysyncobj's change takes (node, callback): the callback is what _settled passes
            change = asyncio.ensure_future(self._settled(functools.partial(getattr(sync, method), address),
                                                         max(deadline - time.monotonic(), 0.1)))
            try:
                if committed:
                    await change
                else:
                    await self._in_effect(change, done, deadline)
                break
            except ProposalFailed:
                if done():
                    break
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(self.timing.heartbeat_interval)
        log.info("raft voters changed", change=method, address=address, voters=self.voters())

    async def _in_effect(self, change: asyncio.Future[Any], done: Callable[[], bool], deadline: float) -> None:
        """Wait until ``done()`` says a membership change is in effect here, or ``change`` (its commit) settles
        first; its outcome, once it comes, is only logged."""
        change.add_done_callback(_log_late_failure)
        if not await self._until(lambda: done() or change.done(), deadline - time.monotonic()):
            raise ProposalFailed("the voter change was not in effect in time")
        if not done():
            change.result()  # refused before it was in effect: its ProposalFailed

    # --- the Raft thread ---------------------------------------------------------------------------------

    def _apply_on_raft_thread(self, command: Command) -> Any:
        result = self._raft_state.apply(command)
        self._to_loop(self._apply_on_loop, command)
        return result

    def _apply_on_loop(self, command: Command) -> None:
        result = self.state.apply(command)
        if self.listener is not None:
            self.listener.on_applied(command, result)

    def _write_snapshot(self, path: str, raft_data: Any) -> None:
        with open(path, "wb") as f:
            pickle.dump({"state": self._raft_state.to_snapshot(), "raft": raft_data}, f)

    def _read_snapshot(self, path: str) -> Any:
        with open(path, "rb") as f:
            saved = pickle.load(f)  # noqa: S301 (our own file, or a leader's, received over authenticated Raft)
        self._raft_state = self._restore(saved["state"])
        self._to_loop(self._restore_on_loop, saved["state"])
        return saved["raft"]

    def _restore_on_loop(self, snapshot: Any) -> None:
        self.state = self._restore(snapshot)
        if self.listener is not None:
            self.listener.on_restored()

    def _watch_leader(self) -> None:
        sync = self._sync
        if sync is None:
            return
        leader = sync._getLeader()
        if leader is not None and (sync._isLeader() or leader in sync._SyncObj__connectedNodes):
            self._quorum_seen_at = time.monotonic()
        if leader == self._leader_seen:
            return
        conf = self._conf
        if leader is not None and conf is not None and conf.raftMinTimeout == _JOINING_TIMEOUT:
            conf.raftMinTimeout = self.timing.election_timeout_min
            conf.raftMaxTimeout = self.timing.election_timeout_max
        self._leader_seen = leader
        leader_id = None if leader is None else self._ids_by_address.get(leader.id)
        self._to_loop(self._leader_changed, leader_id)

    def _reserve_journal(self) -> None:
        """Keep twice the journal's size allocated on disk (checked once a second), so that pysyncobj's next
        growth lands on reserved pages; halt once the disk refuses."""
        now = time.monotonic()
        if now < self._next_reservation:
            return
        self._next_reservation = now + 1.0
        journal = self.data_dir / "raft.journal"
        try:
            if not reserve_beyond_end(journal, 2 * max(journal.stat().st_size, JOURNAL_RESERVE_MIN)):
                self._next_reservation = float("inf")
        except OSError as exc:
            self._storage_failed(exc)

    def _storage_failed(self, error: OSError) -> None:
        """The Raft directory refused a write: halt, as Kafka halts a broker whose metadata log dir failed.
        Going on, this node could vote or acknowledge entries it has not kept, and die later at a worse moment
        (SIGBUS); stopped, it leaves the quorum to the others and restarts from its journal once there is room."""
        log.critical("raft log dir failed, halting the broker", raft_dir=str(self.data_dir), error=str(error))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)

    def _became_ready(self) -> None:
        self.ready = True
        log.info("raft caught up", node_id=self.node_id)
        if self.listener is not None:
            self.listener.on_ready()

    def _leader_changed(self, leader_id: int | None) -> None:
        self.leader_id = leader_id
        log.info("raft leader changed", node_id=self.node_id, leader_id=leader_id)
        if self.listener is not None:
            self.listener.on_leader_changed(leader_id)

    def _to_loop(self, callback: Callable[..., None], *args: Any) -> None:
        """Run ``callback(*args)`` on the loop, after whatever was handed over before it. Commands committed
        together (a topic's hundreds of leader and ISR changes) are handed over together: the listener's
        reconciling, which reads the whole metadata, then runs once for all of them rather than once each,
        which held the loop for seconds."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with self._handover_lock:
            self._handed_over.append((callback, args))
            first = len(self._handed_over) == 1
        if first:
            loop.call_soon_threadsafe(self._run_handed_over)

    def _run_handed_over(self) -> None:
        with self._handover_lock:
            batch, self._handed_over = self._handed_over, []
        last_apply = max((i for i, (callback, _) in enumerate(batch) if callback == self._apply_on_loop), default=-1)
        for i, (callback, args) in enumerate(batch):
            self.applying_more = i < last_apply
            try:
                callback(*args)
            except Exception:
                log.exception("raft listener failed", callback=getattr(callback, "__name__", repr(callback)))
        self.applying_more = False
