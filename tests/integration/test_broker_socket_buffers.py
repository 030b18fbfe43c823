"""The listener's socket settings. socket.receive.buffer.bytes and socket.send.buffer.bytes, as Kafka has them:
SO_RCVBUF of the listener (its connections inherit it) and SO_SNDBUF of each connection; -1, this broker's
default, leaves the sizes to the kernel (Kafka's default is 100 KiB, no faster here). socket.congestion.control,
burrowpy's own: the TCP congestion control of every connection, the system's when empty. Read from outside
the broker with ``ss``, on the broker's end of a real connection (the TLS listener's:
tests/integration/test_broker_tls.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from harness import BrokerProcess, broker_side_buffers, broker_side_socket

KAFKA_DEFAULT = 102400


@pytest.fixture
def start(tmp_path):
    started: list[BrokerProcess] = []

    def run(**settings) -> BrokerProcess:
        home = tmp_path / f"broker-{len(started)}"
        home.mkdir()
        proc = BrokerProcess(home / "data", extra_config=settings or None)
        started.append(proc)
        return proc.start()

    yield run
    for proc in started:
        proc.stop()


def test_sizes_set_in_the_config(start):
    kafkas = start(**{"socket.receive.buffer.bytes": KAFKA_DEFAULT, "socket.send.buffer.bytes": KAFKA_DEFAULT})
    assert broker_side_buffers(kafkas.port) == (2 * KAFKA_DEFAULT, 2 * KAFKA_DEFAULT)
    sized = start(**{"socket.receive.buffer.bytes": 32768, "socket.send.buffer.bytes": 262144})
    assert broker_side_buffers(sized.port) == (2 * 32768, 2 * 262144)


@pytest.mark.parametrize("settings", [{}, {"socket.receive.buffer.bytes": -1, "socket.send.buffer.bytes": -1}],
                         ids=["default", "minus-one"])
def test_by_default_and_with_minus_one_the_kernel_sizes_them(start, settings):
    with open("/proc/sys/net/ipv4/tcp_rmem") as rmem, open("/proc/sys/net/ipv4/tcp_wmem") as wmem:
        kernel_receive, kernel_send = int(rmem.read().split()[1]), int(wmem.read().split()[1])
    receive, send = broker_side_buffers(start(**settings).port)
    # the kernel's starting sizes (tcp_rmem/tcp_wmem), perhaps grown by its autotuning, never Kafka's 100 KiB
    assert receive >= kernel_receive and send >= kernel_send
    assert 2 * KAFKA_DEFAULT not in (receive, send)


def test_a_size_the_kernel_caps_is_named_in_a_warning(start):
    with open("/proc/sys/net/core/rmem_max") as rmem_max:
        most = int(rmem_max.read())
    capped = start(**{"socket.receive.buffer.bytes": most + (1 << 20)})
    assert broker_side_buffers(capped.port)[0] == 2 * most
    log = capped.log_text()
    assert "socket buffer smaller than configured" in log and "net.core.rmem_max" in log
    assert f"granted={most}" in log or f'"granted": {most}' in log


def congestion_control_shown(port: int) -> str:
    """The congestion control ss names for the broker's end of a connection (the first word of TCP's figures,
    after the socket's memory)."""
    shown = broker_side_socket(port)
    found = re.search(r"skmem:\([^)]*\)\s+([\w-]+)", shown)
    assert found, f"ss named no congestion control: {shown!r}"
    return found.group(1)


def test_connections_take_the_configured_congestion_control(start):
    system = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    other = next(name for name in ("reno", "cubic", *available) if name in available and name != system)
    assert congestion_control_shown(start().port) == system
    assert congestion_control_shown(start(**{"socket.congestion.control": other}).port) == other
