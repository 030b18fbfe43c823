"""broker/cluster/raft_guard.py: a Raft connection's reading, bounded, with pysyncobj's own poller and sender on
real sockets (a socket pair): what a peer without the secret can make a node hold, and that a peer with it is
still heard whole."""

from __future__ import annotations

import os
import socket
import struct
import time
import zlib

import pysyncobj
import pysyncobj.pickle as pysyncobj_pickle
import pytest
from pysyncobj import tcp_server, transport
from pysyncobj.encryptor import getEncryptor
from pysyncobj.monotonic import monotonic as pysyncobj_clock
from pysyncobj.poller import createPoller
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection

from broker.cluster import raft_guard
from broker.cluster.raft_guard import (
    FRAME_BYTES,
    PROOF_SECONDS,
    READ_PER_EVENT,
    UNPROVEN_FRAME_BYTES,
    GuardedConnection,
)

BUFFER = 1 << 16


@pytest.fixture(scope="module")
def encryptor():
    return getEncryptor("the raft key of a unit test")  # a PBKDF2 of 100,000 rounds: once for the module


class Pair:
    """A node's connection (``node``: a GuardedConnection on one end) and what a peer sends on the other end,
    either raw bytes (``raw``) or through pysyncobj's own connection (``peer``)."""

    def __init__(self, encryptor) -> None:
        self.poller = createPoller("auto")
        ours, theirs = socket.socketpair()
        for sock in (ours, theirs):
            sock.setblocking(False)
        self.raw = theirs
        self.node = GuardedConnection(poller=self.poller, socket=ours, timeout=60.0, sendBufferSize=BUFFER,
                                      recvBufferSize=BUFFER)
        self.node.encryptor = encryptor
        self.received: list = []
        self.node.setOnMessageReceivedCallback(self.received.append)
        self.encryptor = encryptor

    def token(self, message, key: bytes | None = None) -> bytes:
        """A frame as pysyncobj's sender makes it (with ``key``: once the keys are exchanged)."""
        data = zlib.compress(pysyncobj_pickle.dumps((key, message) if key else message), 3)
        data = self.encryptor.encrypt_at_time(data, int(pysyncobj_clock()))
        return struct.pack("i", len(data)) + data

    def send(self, data: bytes, until: float = 5.0) -> None:
        """All of ``data`` to the node, serving the node's side meanwhile (both ends are on this thread)."""
        view = memoryview(data)
        deadline = time.monotonic() + until
        while view and time.monotonic() < deadline and self.node.state != CONNECTION_STATE.DISCONNECTED:
            try:
                view = view[self.raw.send(view):]
            except BlockingIOError:
                self.poller.poll(0.01)
            except (BrokenPipeError, ConnectionResetError):
                return

    def serve(self, condition, seconds: float = 5.0) -> bool:
        deadline = time.monotonic() + seconds
        while not condition() and time.monotonic() < deadline:
            self.poller.poll(0.01)
        return condition()

    def closed_by_node(self) -> bool:
        return self.serve(lambda: self.node.state == CONNECTION_STATE.DISCONNECTED)

    def prove(self) -> bytes:
        """The two frames a peer with the secret sends first (its key, then a message carrying ours back)."""
        self.send(self.token(os.urandom(32)))
        assert self.serve(lambda: len(self.received) == 1)
        ours = os.urandom(32)
        self.node.recvRandKey = ours  # what pysyncobj's transport does on the first frame
        self.send(self.token("127.0.0.1:1234", key=ours))
        assert self.serve(lambda: len(self.received) == 2) and self.node.proven
        return ours

    def close(self) -> None:
        self.node.disconnect()
        self.raw.close()


@pytest.fixture
def pair(encryptor):
    made = Pair(encryptor)
    yield made
    made.close()


def test_a_length_past_the_unproven_bound_closes_the_connection_before_its_bytes(pair):
    pair.send(struct.pack("i", UNPROVEN_FRAME_BYTES + 1))
    assert pair.closed_by_node()
    assert pair.received == []


@pytest.mark.parametrize("length", [-1, -(2 ** 31)])
def test_a_negative_length_closes_the_connection(pair, length):
    pair.send(struct.pack("i", length))
    assert pair.closed_by_node()


def test_a_frame_without_the_secret_closes_the_connection(pair, encryptor):
    forged = Pair.token(pair, os.urandom(32))
    forged = forged[:-1] + bytes([forged[-1] ^ 1])  # one bit of the token's MAC changed
    pair.send(forged)
    assert pair.closed_by_node()
    assert pair.received == []


def test_a_first_frame_played_again_does_not_open_the_large_bound(pair):
    """A recorded first frame decrypts on a new connection (it is the sender's random key, and the timestamp
    check starts over), so one frame proves nothing: the bound stays the small one."""
    pair.send(pair.token(os.urandom(32)))
    assert pair.serve(lambda: len(pair.received) == 1)
    assert not pair.node.proven
    pair.send(struct.pack("i", UNPROVEN_FRAME_BYTES + 1))
    assert pair.closed_by_node()


def test_a_proven_peer_is_heard_whole_a_read_at_a_time(pair):
    """After the two frames, a 3 MiB message (larger than the unproven bound and than one event's reads) comes
    through intact, over several readiness events, each reading at most READ_PER_EVENT."""
    key = pair.prove()
    message = {"entries": os.urandom(3 << 20)}
    frame = pair.token(message, key=key)
    largest = 0

    def watched() -> bool:
        nonlocal largest
        largest = max(largest, len(pair.node._inbox))
        return len(pair.received) == 3

    view = memoryview(frame)
    deadline = time.monotonic() + 10
    while not watched() and time.monotonic() < deadline:
        if view:
            try:
                view = view[pair.raw.send(view[:4 << 20]):]
            except BlockingIOError:
                pass
        before = len(pair.node._inbox)
        pair.poller.poll(0.01)
        assert len(pair.node._inbox) - before <= READ_PER_EVENT + BUFFER
    assert pair.received[2] == message
    assert pair.node.state != CONNECTION_STATE.DISCONNECTED
    assert pair.node._inbox == bytearray()


def test_a_proven_peer_is_still_bounded(pair):
    pair.prove()
    pair.send(struct.pack("i", FRAME_BYTES + 1))
    assert pair.closed_by_node()


def test_a_connection_that_does_not_prove_itself_in_time_is_closed(pair):
    pair.send(b"\x10\x00")  # half a length, and then nothing that proves anything
    pair.serve(lambda: len(pair.node._inbox) == 2)
    assert pair.node.state != CONNECTION_STATE.DISCONNECTED
    pair.node._opened -= PROOF_SECONDS + 1  # the clock of the connection's opening, moved back
    pair.send(b"\x00")
    assert pair.closed_by_node()


def test_install_makes_pysyncobj_open_and_accept_guarded_connections():
    raft_guard.install()
    assert tcp_server.TcpConnection is GuardedConnection and transport.TcpConnection is GuardedConnection
    assert issubclass(GuardedConnection, TcpConnection)
    assert pysyncobj.__name__ == "pysyncobj"
