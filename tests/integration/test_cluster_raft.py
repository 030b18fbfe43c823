"""RaftNode over pysyncobj on 127.0.0.1: election, proposals from any node, failover, restart from the
data directory, catching up from a snapshot, and refusal of a peer without the cluster secret."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import ssl
import stat
import struct
import time

import pytest
from harness import free_port, poll_until
from pysyncobj import SyncObj, SyncObjConf, replicated
from tls_certs import CertificateAuthority

from broker.cluster import raft_guard
from broker.cluster.keys import derive_key
from broker.cluster.metadata import ClusterMetadata
from broker.cluster.raft import ProposalFailed, RaftNode, RaftTiming

pytestmark = pytest.mark.timeout(120)

TIMING = RaftTiming(election_timeout_min=0.3, election_timeout_max=0.6, heartbeat_interval=0.05,
                    reconnect_interval=0.2)
SECRET = "raft test secret: 32 characters or more"


class Recorder:
    def __init__(self) -> None:
        self.applied: list[dict] = []
        self.restored = 0
        self.ready = 0
        self.leaders: list[int | None] = []

    def on_applied(self, command, result) -> None:
        self.applied.append(command)

    def on_restored(self) -> None:
        self.restored += 1

    def on_ready(self) -> None:
        self.ready += 1

    def on_leader_changed(self, leader_id) -> None:
        self.leaders.append(leader_id)


def make_node(node_id: int, addresses: dict[int, str], tmp_path, secret: str = SECRET,
              compaction_entries: int = 5000) -> RaftNode:
    return RaftNode(node_id, addresses[node_id], addresses, secret, tmp_path / f"raft-{node_id}",
                    ClusterMetadata, ClusterMetadata.from_snapshot, timing=TIMING, listener=Recorder(),
                    compaction_entries=compaction_entries)


def register(node: int) -> dict:
    return {"op": "register_broker", "node_id": node, "host": "127.0.0.1", "port": 9000 + node}


async def leader_of(nodes: list[RaftNode]) -> RaftNode:
    def agreed():
        leaders = {n.leader_id for n in nodes}
        return len(leaders) == 1 and None not in leaders and next(iter(leaders)) in {n.node_id for n in nodes}
    await poll_until(agreed, message="one leader that every node knows")
    return next(n for n in nodes if n.is_leader)


@pytest.fixture
async def three(tmp_path):
    addresses = {i: f"127.0.0.1:{free_port()}" for i in (1, 2, 3)}
    nodes = [make_node(i, addresses, tmp_path) for i in (1, 2, 3)]
    for node in nodes:
        await node.start()
    yield nodes, addresses
    for node in nodes:
        await node.stop()


async def test_proposals_from_any_node_reach_every_copy(three):
    nodes, _ = three
    leader = await leader_of(nodes)
    follower = next(n for n in nodes if n is not leader)
    assert (await follower.propose(register(1)))["error_code"] == 0
    assert (await leader.propose(register(2)))["error_code"] == 0
    result = await follower.propose({"op": "fence_broker", "node_id": 9})
    assert result["error_code"] != 0  # the state machine's refusal comes back to the proposer
    await poll_until(lambda: all(len(n.state.brokers) == 2 for n in nodes), message="every copy applied")
    assert all(n.state.to_snapshot() == leader.state.to_snapshot() for n in nodes)
    # the journal holds SCRAM credentials and ACLs: only the broker's user may enter its directory
    assert all(stat.S_IMODE(n.data_dir.stat().st_mode) == 0o700 for n in nodes)
    assert [c["op"] for c in follower.listener.applied] == ["register_broker", "register_broker", "fence_broker"]
    assert all(n.ready and n.listener.ready == 1 for n in nodes)


async def test_a_new_leader_takes_over_and_a_restarted_node_replays_its_journal(three, tmp_path):
    nodes, addresses = three
    leader = await leader_of(nodes)
    await leader.propose(register(1))
    await leader.stop()
    rest = [n for n in nodes if n is not leader]
    new_leader = await leader_of(rest)
    assert new_leader is not leader
    assert (await rest[0].propose(register(2)))["error_code"] == 0
    restarted = make_node(leader.node_id, addresses, tmp_path)
    nodes[nodes.index(leader)] = restarted
    await restarted.start()
    await poll_until(lambda: sorted(restarted.state.brokers) == [1, 2], message="the restarted node to catch up")
    assert restarted.listener.applied[0] == register(1)


async def test_a_wiped_node_catches_up_from_a_snapshot(tmp_path):
    addresses = {i: f"127.0.0.1:{free_port()}" for i in (1, 2, 3)}
    nodes = [make_node(i, addresses, tmp_path, compaction_entries=10) for i in (1, 2, 3)]
    try:
        for node in nodes:
            await node.start()
        leader = await leader_of(nodes)
        for i in range(40):
            await leader.propose(register(i))
        await poll_until(lambda: all((tmp_path / f"raft-{n.node_id}" / "raft.snapshot").exists() for n in nodes),
                         message="log compaction to write snapshots")
        victim = next(n for n in nodes if n is not leader)
        await victim.stop()
        shutil.rmtree(tmp_path / f"raft-{victim.node_id}")
        await leader.propose(register(100))
        fresh = make_node(victim.node_id, addresses, tmp_path, compaction_entries=10)
        nodes[nodes.index(victim)] = fresh
        await fresh.start()
        await poll_until(lambda: len(fresh.state.brokers) == 41, message="the wiped node to catch up")
        assert fresh.listener.restored >= 1  # it was given a snapshot, not the (compacted) log
        assert fresh.state.to_snapshot() == leader.state.to_snapshot()
    finally:
        for node in nodes:
            await node.stop()


async def test_a_peer_without_the_secret_is_refused(tmp_path):
    addresses = {i: f"127.0.0.1:{free_port()}" for i in (1, 2, 3)}
    nodes = [make_node(1, addresses, tmp_path), make_node(2, addresses, tmp_path),
             make_node(3, addresses, tmp_path, secret="a guess")]
    try:
        for node in nodes:
            await node.start()
        good = await leader_of(nodes[:2])
        await good.propose(register(7))
        await poll_until(lambda: all(7 in n.state.brokers for n in nodes[:2]), message="the good nodes to agree")
        intruder = nodes[2]
        with pytest.raises(ProposalFailed):
            await intruder.propose(register(666), timeout=2.0)
        assert intruder.state.brokers == {} and intruder.leader_id != good.node_id
        assert all(666 not in n.state.brokers for n in nodes[:2])
    finally:
        for node in nodes:
            await node.stop()


class BarePeer(SyncObj):
    """A pysyncobj node outside RaftNode, given its password directly: what a peer holding only that
    password can do. Its one replicated method matches RaftNode's, so that it can be a full member."""

    @replicated
    def apply_command(self, command: dict) -> None:
        return None


@pytest.mark.parametrize("password", ["the raft key", "the secret itself", "the gossip key"])
async def test_raft_is_keyed_with_the_secrets_raft_key_and_nothing_else(tmp_path, password):
    """pysyncobj's password is the key derived from the secret for Raft: a peer with that key is a member, one
    with the secret itself or with the gossip key (a key leaked from another use) is refused."""
    passwords = {"the raft key": derive_key(SECRET, "raft").hex(), "the secret itself": SECRET,
                 "the gossip key": derive_key(SECRET, "gossip").hex()}
    addresses = {i: f"127.0.0.1:{free_port()}" for i in (1, 2, 3)}
    nodes = [make_node(1, addresses, tmp_path), make_node(2, addresses, tmp_path)]
    peer = BarePeer(addresses[3], [addresses[1], addresses[2]], SyncObjConf(
        password=passwords[password], raftMinTimeout=TIMING.election_timeout_min,
        raftMaxTimeout=TIMING.election_timeout_max, appendEntriesPeriod=TIMING.heartbeat_interval,
        connectionRetryTime=TIMING.reconnect_interval, dynamicMembershipChange=False))
    try:
        for node in nodes:
            await node.start()
        if password == "the raft key":
            await poll_until(lambda: peer._getLeader() is not None and all(n.leader_id is not None for n in nodes),
                             message="the peer with the raft key to know the leader")
            return
        good = await leader_of(nodes)
        await good.propose(register(7))
        await poll_until(lambda: all(7 in n.state.brokers for n in nodes), message="the good nodes to agree")
        assert peer._getLeader() is None
    finally:
        await asyncio.to_thread(peer.destroy_synchronous)
        for node in nodes:
            await node.stop()


def test_timing_is_checked():
    with pytest.raises(ValueError):
        RaftTiming(election_timeout_min=0.2, election_timeout_max=0.5, heartbeat_interval=0.1)
    with pytest.raises(ValueError):
        RaftNode(1, "127.0.0.1:1", {}, "", ".", ClusterMetadata, ClusterMetadata.from_snapshot)



async def test_the_whole_cluster_restarts_from_its_data_dirs(three, tmp_path):
    nodes, addresses = three
    leader = await leader_of(nodes)
    for i in (1, 2, 3):
        await leader.propose(register(i))
    await poll_until(lambda: all(len(n.state.brokers) == 3 for n in nodes), message="every node to apply")
    for node in nodes:
        await node.stop()
    nodes[:] = [make_node(i, addresses, tmp_path) for i in (1, 2, 3)]
    for node in nodes:
        await node.start()
    leader = await leader_of(nodes)
    assert (await leader.propose(register(4)))["error_code"] == 0
    await poll_until(lambda: all(sorted(n.state.brokers) == [1, 2, 3, 4] for n in nodes), message="the old log and more")
    # Ready means caught up with what the quorum had committed: the replayed log was all there by then.
    assert all(n.ready and n.listener.applied[:3] == [register(1), register(2), register(3)] for n in nodes)


async def test_a_joining_node_becomes_a_voter_and_a_leading_voter_leaves(three, tmp_path):
    """A node that joins waits quietly (no elections of its own) until it is added; then it holds the log and
    counts in the quorum. A leader leaving hands its leadership over and the new leader removes it; the voter set
    survives a restart (it is in the journal)."""
    nodes, addresses = three
    leader = await leader_of(nodes)
    await leader.propose(register(1))
    addresses[4] = f"127.0.0.1:{free_port()}"
    joining = RaftNode(4, addresses[4], {i: addresses[i] for i in (1, 2, 3)}, SECRET, tmp_path / "raft-4",
                       ClusterMetadata, ClusterMetadata.from_snapshot, timing=TIMING, listener=Recorder(), join=True)
    await joining.start()
    try:
        await asyncio.sleep(3 * TIMING.election_timeout_max)  # long enough for elections it must not start
        assert joining.progress().term == 0 and not joining.ready
        assert sorted(leader.voters()) == [1, 2, 3]

        for node in nodes[1:]:  # (a broker learns a new voter's address from the metadata: set_raft_voter)
            node.learn_address(4, addresses[4])
        await nodes[0].add_voter(4, addresses[4])  # from any node: pysyncobj passes it to the leader
        await poll_until(lambda: joining.ready and sorted(joining.state.brokers) == [1],
                         message="the new voter to catch up")
        assert all(sorted(n.voters()) == [1, 2, 3, 4] for n in (*nodes, joining))
        leader = await leader_of([*nodes, joining])

        with pytest.raises(ProposalFailed):
            await leader.remove_voter(leader.node_id)
        new_leader_id = await leader.hand_over_leadership()
        rest = [n for n in (*nodes, joining) if n is not leader]
        await next(n for n in rest if n.node_id == new_leader_id).remove_voter(leader.node_id)
        await poll_until(lambda: all(sorted(n.voters()) == sorted(m.node_id for m in rest) for n in rest),
                         message="the voters to drop the old leader")
        await leader.stop()
        await leader_of(rest)  # three voters left: a quorum without the removed one
        assert (await rest[0].propose(register(2)))["error_code"] == 0

        # a voter restarted with its config's peers (the founding voters) takes the voters from its journal
        survivor = rest[-1]
        await survivor.stop()
        restarted = RaftNode(survivor.node_id, addresses[survivor.node_id], {i: addresses[i] for i in (1, 2, 3)},
                             SECRET, tmp_path / f"raft-{survivor.node_id}", ClusterMetadata,
                             ClusterMetadata.from_snapshot, timing=TIMING, listener=Recorder())
        restarted.learn_address(4, addresses[4])
        nodes.append(restarted)  # the fixture stops it
        await restarted.start()
        await poll_until(lambda: sorted(restarted.state.brokers) == [1, 2], message="the restarted voter to replay")
        assert sorted(restarted.voters()) == sorted(m.node_id for m in rest)
    finally:
        await joining.stop()


async def test_a_voter_added_without_waiting_for_its_commit_is_in_effect_before_the_quorum_commits_it(three):
    """AddRaftVoter v1's AckWhenCommitted false: the leader answers once it has the new voter set. With one of
    three voters stopped and the new one not running, two of four cannot commit it, nor anything after it."""
    nodes, addresses = three
    leader = await leader_of(nodes)
    stopped = next(n for n in nodes if n is not leader)
    await stopped.stop()
    addresses[4] = f"127.0.0.1:{free_port()}"  # nothing listens there
    await leader.add_voter(4, addresses[4], timeout=5, committed=False)
    assert sorted(leader.voters()) == [1, 2, 3, 4]
    with pytest.raises(ProposalFailed):
        await leader.propose(register(9), timeout=1)
    # the stopped voter back (from its journal, which lacks the new voter): three of four, a quorum again, which
    # elects and commits the new voter set and what follows (within a second here, unloaded; 20 s is the bound)
    back = make_node(stopped.node_id, {i: a for i, a in addresses.items() if i != 4}, stopped.data_dir.parent)
    back.learn_address(4, addresses[4])
    nodes[nodes.index(stopped)] = back  # the fixture stops it
    await back.start()

    async def committed() -> bool:
        leading = [n for n in nodes if n.is_leader]
        with contextlib.suppress(ProposalFailed):
            return bool(leading) and (await leading[0].propose(register(10), timeout=1))["error_code"] == 0
        return False

    deadline = time.monotonic() + 20
    while not await committed():
        assert time.monotonic() < deadline, [(n.node_id, n.leader_id, sorted(n.voters())) for n in nodes]
        await asyncio.sleep(0.2)
    for node in nodes:  # (a broker learns a new voter's address from the metadata: set_raft_voter)
        node.learn_address(4, addresses[4])
    await poll_until(lambda: all(sorted(n.voters()) == [1, 2, 3, 4] for n in nodes), message="every voter to have 4")


def stream_at(address: str, head: bytes, limit: int, seconds: float) -> tuple[int, bool]:
    """Send ``head`` and then junk to a Raft port, as fast as it is taken, until ``limit`` bytes, ``seconds``, or the
    node closes the connection: (bytes sent, closed by the node)."""
    host, port = address.rsplit(":", 1)
    junk = bytes(range(256)) * 256
    sent = 0
    deadline = time.monotonic() + seconds
    with socket.create_connection((host, int(port))) as sock:
        sock.settimeout(1.0)
        try:
            sock.sendall(head)
            while sent < limit and time.monotonic() < deadline:
                sent += sock.send(junk)
        except (ConnectionResetError, BrokenPipeError):
            return sent, True
        except TimeoutError:
            pass
        with contextlib.suppress(OSError):
            sock.settimeout(2.0)
            return sent, sock.recv(1) == b""  # refused: the node closed its end
        return sent, False


async def test_a_stream_announcing_a_huge_frame_is_cut_off_and_the_quorum_goes_on(three):
    """Anyone who reaches a Raft port, secret or not, announcing a 2 GiB frame and streaming bytes at it: each
    node closes the connection after the four bytes of the length (pysyncobj alone buffered every byte, copying
    all it held at each read, and the quorum stopped committing)."""
    nodes, addresses = three
    leader = await leader_of(nodes)
    huge = struct.pack("i", 0x7FFFFFFF)
    results = await asyncio.gather(*(asyncio.to_thread(stream_at, address, huge, 64 << 20, 5.0)
                                      for address in addresses.values()))
    assert all(closed for _, closed in results), results
    # what was sent before the close is what the sockets' buffers took, not what a node read and kept
    assert all(sent < 16 << 20 for sent, _ in results), results
    started = time.monotonic()
    assert (await leader.propose(register(5), timeout=2.0))["error_code"] == 0
    assert time.monotonic() - started < 2.0
    await poll_until(lambda: all(5 in n.state.brokers for n in nodes), message="every copy applied")


async def test_silent_connections_are_bounded_and_closed_once_their_time_to_prove_is_up(three, monkeypatch):
    """Connections that never send a byte: beyond UNPROVEN_PER_ADDRESS from one address each is closed as it
    is accepted, and the rest when their time to prove the secret is up (pysyncobj kept every one for good, one
    descriptor each, until the process had none left)."""
    monkeypatch.setattr(raft_guard, "PROOF_SECONDS", 1.0)
    nodes, addresses = three
    leader = await leader_of(nodes)
    host, port = addresses[leader.node_id].rsplit(":", 1)
    opened = [socket.create_connection((host, int(port))) for _ in range(raft_guard.UNPROVEN_PER_ADDRESS + 24)]
    try:
        for sock in opened:
            sock.setblocking(False)

        def closed_by_node() -> int:
            count = 0
            for sock in opened:
                try:
                    count += sock.recv(1) == b""
                except BlockingIOError:
                    pass
                except OSError:
                    count += 1
            return count

        # the ones past the bound go at once, well before the time to prove is up
        await poll_until(lambda: closed_by_node() >= 24, timeout=0.9, message="the connections past the bound")
        await poll_until(lambda: closed_by_node() == len(opened), timeout=5.0, message="every silent connection")
    finally:
        for sock in opened:
            sock.close()
    assert (await leader.propose(register(6), timeout=5.0))["error_code"] == 0


def tls_contexts(directory) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A broker's server and client contexts for Raft over TLS, the client certificate not asked for: anyone may
    complete the handshake, as on an inter-broker listener with ssl.client.auth=none."""
    ca = CertificateAuthority(directory)
    issued = ca.issue("broker", hosts=("127.0.0.1",))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(issued.certificate, issued.key)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_verify_locations(ca.path)
    return server, client


def make_tls_node(node_id: int, addresses: dict[int, str], tmp_path, tls) -> RaftNode:
    return RaftNode(node_id, addresses[node_id], addresses, SECRET, tmp_path / f"raft-{node_id}", ClusterMetadata,
                    ClusterMetadata.from_snapshot, timing=TIMING, listener=Recorder(), tls=tls)


def tls_handshakes_from(source: str, address: str, count: int, context: ssl.SSLContext) -> list[ssl.SSLSocket | None]:
    """``count`` connections from the loopback address ``source`` to a Raft address over TLS, each through its
    handshake and then silent: the socket, or None where the node closed it before the handshake completed."""
    host, port = address.rsplit(":", 1)
    held: list[ssl.SSLSocket | None] = []
    for _ in range(count):
        raw = socket.create_connection((host, int(port)), timeout=5.0, source_address=(source, 0))
        try:
            held.append(context.wrap_socket(raw, server_hostname=host))
        except (OSError, ssl.SSLError):
            raw.close()
            held.append(None)
    return held


async def test_over_tls_a_strangers_silent_connections_do_not_keep_a_peer_out(tmp_path, monkeypatch):
    """Raft inside TLS: every connection reaches pysyncobj from the tunnel, on loopback. A stranger (from
    127.0.0.2, no secret) holding each node's whole share of unproven connections must not keep a restarted
    peer from reconnecting (counted as one address with the peers', it did until its connections' time to prove
    was up); past its share, its connections are closed before their TLS handshake."""
    monkeypatch.setattr(raft_guard, "PROOF_SECONDS", 6.0)
    tls = tls_contexts(tmp_path / "tls")
    addresses = {i: f"127.0.0.1:{free_port()}" for i in (1, 2, 3)}
    nodes = [make_tls_node(i, addresses, tmp_path, tls) for i in (1, 2, 3)]
    held: list[ssl.SSLSocket | None] = []
    try:
        for node in nodes:
            await node.start()
        leader = await leader_of(nodes)
        assert (await leader.propose(register(1), timeout=5.0))["error_code"] == 0
        # pysyncobj connects from the larger address to the smaller: the last node reaches both others through
        # their tunnels, which the stranger fills
        leaving = max(nodes, key=lambda n: n.listen)
        await leaving.stop()
        rest = [n for n in nodes if n is not leaving]
        share = raft_guard.UNPROVEN_PER_ADDRESS
        for node in rest:
            opened = await asyncio.to_thread(tls_handshakes_from, "127.0.0.2", node.listen, share + 4, tls[1])
            assert all(sock is not None for sock in opened[:share]), opened
            assert all(sock is None for sock in opened[share:]), opened  # refused before their handshake
            held += opened
        started = time.monotonic()
        assert (await (await leader_of(rest)).propose(register(2), timeout=5.0))["error_code"] == 0
        restarted = make_tls_node(leaving.node_id, addresses, tmp_path, tls)
        nodes[nodes.index(leaving)] = restarted
        await restarted.start()
        await poll_until(lambda: sorted(restarted.state.brokers) == [1, 2], timeout=4.0,
                         message="the restarted peer caught up while the stranger's connections are held")
        assert time.monotonic() - started < raft_guard.PROOF_SECONDS
    finally:
        for sock in held:
            if sock is not None:
                sock.close()
        for node in nodes:
            await node.stop()
