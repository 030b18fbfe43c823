"""GossipNode on real UDP sockets (127.0.0.1): members find each other through a seed, a silent member is
declared dead within seconds, a member that leaves is gone at once, and a node without the secret is
never admitted."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from broker.cluster.membership import ALIVE, DEAD, LEFT, GossipNode, SwimConfig

pytestmark = pytest.mark.timeout(60)

SECRET = b"gossip test secret"
FAST = SwimConfig(protocol_period=0.1, ping_timeout=0.04, suspicion_multiplier=3.0, push_pull_interval=1.0)


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def poll(condition, timeout: float = 10.0, message: str = "condition") -> float:
    """Seconds it took until ``condition()`` held."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if condition():
            return time.monotonic() - start
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {message}")


def state_of(node: GossipNode, name: str) -> str | None:
    for member in node.members():
        if member.name == name:
            return member.state
    return None


@pytest.fixture
async def nodes():
    started: list[GossipNode] = []

    async def start(name: str, seeds=(), secret: bytes = SECRET) -> GossipNode:
        node = GossipNode(name, ("127.0.0.1", free_udp_port()), secret, seeds=list(seeds), config=FAST,
                          meta={"node_id": name})
        await node.start()
        started.append(node)
        return node

    yield start
    for node in started:
        await node.stop(leave=False)


async def test_members_join_and_a_silent_member_is_declared_dead(nodes):
    first = await nodes("1")
    second = await nodes("2", [first.address])
    third = await nodes("3", [first.address])
    await poll(lambda: all(len(n.alive_members()) == 2 for n in (first, second, third)), message="all to meet")
    assert {m.name: m.meta for m in third.alive_members()} == {"1": {"node_id": "1"}, "2": {"node_id": "2"}}
    await second.stop(leave=False)  # like kill -9: no goodbye
    took = await poll(lambda: state_of(first, "2") == DEAD and state_of(third, "2") == DEAD,
                      message="the silent member to be declared dead")
    # 3 x log10(3) periods of suspicion (scaled up to 3) after at most a period or two of probing.
    assert took < 2.0
    assert state_of(first, "3") == ALIVE


async def test_a_member_that_leaves_is_gone_at_once(nodes):
    first = await nodes("1")
    second = await nodes("2", [first.address])
    await poll(lambda: len(first.alive_members()) == 1, message="the two to meet")
    await second.stop(leave=True)
    took = await poll(lambda: state_of(first, "2") == LEFT, message="the leave to arrive")
    assert took < 0.5


async def test_a_node_without_the_secret_is_not_admitted(nodes):
    first = await nodes("1")
    second = await nodes("2", [first.address])
    intruder = await nodes("evil", [first.address], secret=b"guessed")
    await poll(lambda: len(first.alive_members()) == 1, message="the good nodes to meet")
    # The intruder re-sends its join to the seed every protocol period; let it try ten times.
    tried_since = intruder.protocol.now
    await poll(lambda: intruder.protocol.now >= tried_since + 10 * FAST.protocol_period, message="ten periods")
    assert state_of(first, "evil") is None and state_of(second, "evil") is None
    assert intruder.alive_members() == []
