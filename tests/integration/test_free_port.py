"""The test harness's free ports: outside the kernel's range for outgoing connections, never handed out twice."""

from __future__ import annotations

import socket

from harness import _EPHEMERAL_START, free_port


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range():
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(port < _EPHEMERAL_START for port in ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))
