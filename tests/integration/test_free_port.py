"""The test harness's free ports: outside the kernel's range for outgoing connections, never handed out twice."""

from __future__ import annotations

import socket

from harness import _EPHEMERAL_START, _port_slice, free_port


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range():
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(port < _EPHEMERAL_START for port in ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))


def test_each_parallel_worker_draws_from_a_slice_of_its_own(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    slices = []
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        low, high = _port_slice()
        slices.append((low, high))
        assert all(low <= free_port() < high for _ in range(50))
    (low0, high0), (low1, high1) = slices
    assert high0 <= low1 and high1 <= _EPHEMERAL_START
