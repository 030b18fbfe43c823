"""The guard in this folder's conftest: a unit test that reaches for the network or starts a process fails at
once, with a message that says where such a test belongs; an event loop (its self-pipe is a socketpair) runs."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys

import pytest

REFUSED = "unit tests are pure .* move this test to tests/integration"


def test_a_socket_may_not_bind_connect_or_send():
    with socket.socket() as sock:
        with pytest.raises(RuntimeError, match=REFUSED):
            sock.bind(("127.0.0.1", 0))
        with pytest.raises(RuntimeError, match=REFUSED):
            sock.connect(("127.0.0.1", 9))
        with pytest.raises(RuntimeError, match=REFUSED):
            sock.connect_ex(("127.0.0.1", 9))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp, pytest.raises(RuntimeError, match=REFUSED):
        udp.sendto(b"x", ("127.0.0.1", 9))


def test_no_process_may_start():
    with pytest.raises(RuntimeError, match=REFUSED):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    with pytest.raises(RuntimeError, match=REFUSED):
        os.posix_spawn(sys.executable, [sys.executable, "-c", "pass"], os.environ)


def test_an_event_loop_and_a_socketpair_still_work():
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"ping")
        assert right.recv(4) == b"ping"
    assert asyncio.run(asyncio.sleep(0, result="ran")) == "ran"
