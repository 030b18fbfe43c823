"""GossipNode on real UDP sockets (127.0.0.1): members find each other through a seed, a silent member is
declared dead within seconds, a member that leaves is gone at once, a node without the secret (or with the
secret itself as the key, not the gossip key derived from it) is never admitted, and a replayed packet is
not answered."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from broker.cluster.keys import derive_key
from broker.cluster.membership import ALIVE, DEAD, LEFT, GossipNode, PacketSeal, SwimConfig

pytestmark = [pytest.mark.timeout(60), pytest.mark.alone]  # asserts answer times

SECRET = b"gossip test secret, long enough to be a cluster's"
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


@pytest.fixture
def udp():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(5)
    yield sock
    sock.close()


def join_of(name: str, sock: socket.socket) -> dict:
    return {"t": "sync", "from": name, "reply": False,
            "members": [{"k": ALIVE, "n": name, "i": 1, "a": list(sock.getsockname()), "m": {}}]}


async def test_packets_are_keyed_with_the_gossip_key_derived_from_the_secret(nodes, udp):
    first = await nodes("1")
    raw = PacketSeal(SECRET, int(time.time() * 1_000_000))
    derived = PacketSeal(derive_key(SECRET, "gossip"), int(time.time() * 1_000_000))
    udp.sendto(raw.seal(join_of("raw", udp), time.time()), first.address)
    udp.sendto(derived.seal(join_of("derived", udp), time.time()), first.address)
    # one socket to one socket on 127.0.0.1 keeps the order: the first packet was read before the second
    await poll(lambda: state_of(first, "derived") == ALIVE, message="the member with the derived key")
    assert state_of(first, "raw") is None


async def test_a_replayed_ping_is_not_answered(nodes, udp):
    first = await nodes("1")
    seal = PacketSeal(derive_key(SECRET, "gossip"), int(time.time() * 1_000_000))

    def ping(seq: int) -> bytes:
        return seal.seal({"t": "ping", "seq": seq, "from": "prober", "to": "1", "g": []}, time.time())

    def answer() -> dict:
        data = udp.recv(65536)
        return seal.open(data, time.time())

    recorded = ping(1)
    udp.sendto(recorded, first.address)
    assert (await asyncio.to_thread(answer))["seq"] == 1
    udp.sendto(recorded, first.address)  # the same bytes again: dropped unread
    udp.sendto(ping(2), first.address)
    assert (await asyncio.to_thread(answer))["seq"] == 2
