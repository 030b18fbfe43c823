"""SWIM membership, sans-IO: packets, update rules, and a simulated lossy network of many members.

The simulated network delivers authenticated packets (the real codec) after a random latency, drops a
fraction of them, and runs every member on one virtual clock, so whole-cluster behaviour over dozens
of protocol periods takes well under a second.
"""

from __future__ import annotations

import heapq
import itertools
import random

import pytest

from broker.cluster.membership import (
    ALIVE,
    DEAD,
    LEFT,
    MAX_PACKET_AGE,
    SUSPECT,
    PacketRefused,
    PacketSeal,
    SwimConfig,
    SwimMembership,
    decode_packet,
    encode_packet,
)

SECRET = b"cluster secret for the membership tests, 48 bytes"
CONFIG = SwimConfig(protocol_period=1.0, ping_timeout=0.3)


class SimulatedNetwork:
    def __init__(self, seed: int, loss: float = 0.0, config: SwimConfig = CONFIG) -> None:
        self.rng = random.Random(seed)
        self.loss = loss
        self.config = config
        self.now = 0.0
        self.nodes: dict[tuple[str, int], SwimMembership] = {}
        self.down: set[tuple[str, int]] = set()
        self.blocked: set[tuple[str, int]] = set()  # up, but every packet to or from it is lost
        self._queue: list = []
        self._order = itertools.count()
        self.events: list[tuple[float, str, str, str]] = []  # (time, observer, kind, member)

    def add(self, name: str, seeds: list[tuple[str, int]], incarnation: int = 0) -> SwimMembership:
        address = ("10.0.0.1", 7000 + len(self.nodes))
        node = SwimMembership(name, address, {"id": name}, self.config, random.Random(self.rng.random()),
                              self.now, incarnation=incarnation, seeds=seeds)
        self.nodes[address] = node
        self.down.discard(address)
        self.send(address, node.join(self.now))
        return node

    def crash(self, node: SwimMembership) -> None:
        self.down.add(node.address)

    def send(self, source: tuple[str, int], packets) -> None:
        for destination, message in packets:
            data = encode_packet(SECRET, message)
            if source in self.blocked or destination in self.blocked or self.rng.random() < self.loss:
                continue
            delay = self.rng.uniform(0.001, 0.02)
            heapq.heappush(self._queue, (self.now + delay, next(self._order), destination, data, source))

    def run(self, duration: float) -> None:
        end = self.now + duration
        # A node's next deadline only changes when it handles something, so it is cached per node.
        deadlines = {a: n.next_deadline() for a, n in self.nodes.items() if a not in self.down}
        while True:
            for address in self.down:
                deadlines.pop(address, None)
            next_address = min(deadlines, key=deadlines.__getitem__, default=None)
            next_tick = deadlines[next_address] if next_address is not None else end
            next_packet = self._queue[0][0] if self._queue else end
            self.now = min(next_tick, next_packet, end)
            if self.now >= end:
                return
            if next_packet <= next_tick:
                _, _, destination, data, source = heapq.heappop(self._queue)
                node = self.nodes.get(destination)
                if node is None or destination in self.down:
                    continue
                self.send(destination, node.receive(decode_packet(SECRET, data), source, self.now))
            else:
                node = self.nodes[next_address]
                self.send(next_address, node.tick(self.now))
            self._record(node)
            deadlines[node.address] = node.next_deadline()

    def _record(self, node: SwimMembership) -> None:
        for event in node.take_events():
            self.events.append((self.now, node.name, event.kind, event.name))

    def views(self, name: str) -> dict[str, str]:
        """How every live node sees member ``name``."""
        return {n.name: n.members[name].state if name in n.members else "unknown"
                for a, n in self.nodes.items() if a not in self.down and n.name != name}


def cluster(size: int, seed: int, loss: float = 0.0) -> tuple[SimulatedNetwork, list[SwimMembership]]:
    net = SimulatedNetwork(seed, loss)
    first = net.add("m0", [])
    nodes = [first]
    for i in range(1, size):
        nodes.append(net.add(f"m{i}", [first.address]))
        net.run(0.05)
    net.run(15 * CONFIG.protocol_period)
    return net, nodes


# --- packets -------------------------------------------------------------------------------------------------

def test_packets_are_authenticated():
    message = {"t": "ping", "seq": 1, "from": "a", "g": []}
    data = encode_packet(SECRET, message)
    assert decode_packet(SECRET, data) == message
    assert decode_packet(b"another secret", data) is None
    forged = data[:-2] + b"2}"
    assert decode_packet(SECRET, forged) is None
    assert decode_packet(SECRET, b"") is None
    assert decode_packet(SECRET, b"SWIM1" + b"x" * 40) is None


def test_config_is_checked():
    with pytest.raises(ValueError):
        SwimConfig(protocol_period=1.0, ping_timeout=1.5)
    with pytest.raises(ValueError):
        SwimConfig(indirect_probes=-1)


def test_piggybacked_gossip_fits_the_packet_budget():
    config = SwimConfig(max_packet_bytes=600)
    node = SwimMembership("me", ("h", 1), {}, config, random.Random(1), 0.0)
    for i in range(40):
        node.receive({"t": "gossip", "g": [{"k": ALIVE, "n": f"member-{i}", "i": 1, "a": ["h", 100 + i],
                                            "m": {"pad": "x" * 20}}]}, ("h", 2), 0.0)
    seal = PacketSeal(SECRET, counter=1_795_787_758_054_123)
    for _ in range(20):
        for _address, message in node.tick(node.next_deadline()):
            assert len(seal.seal(message, 1_795_787_758.054)) <= 600


# --- sealed packets: time, counter, replays ----------------------------------------------------------------

WALL = 1_795_787_758.0  # the wall clock of the tests' senders and receivers


def sender(name: str, started: float = WALL) -> tuple[PacketSeal, dict]:
    """A member's seal, its counter started from the wall clock as GossipNode starts it, and a message."""
    return PacketSeal(SECRET, int(started * 1_000_000)), {"t": "ping", "seq": 1, "from": name, "g": []}


def refused(seal: PacketSeal, data: bytes, now: float) -> PacketRefused:
    with pytest.raises(PacketRefused) as caught:
        seal.open(data, now)
    return caught.value


def test_a_sealed_packet_is_opened_once():
    alice, ping = sender("alice")
    receiver = PacketSeal(SECRET, 0)
    data = alice.seal(ping, WALL)
    assert {k: v for k, v in receiver.open(data, WALL + 0.2).items() if k not in ("ts", "c")} == ping
    assert "replay" in str(refused(receiver, data, WALL + 0.3))
    assert "replay" in str(refused(receiver, data, WALL + MAX_PACKET_AGE - 1))
    # the next packet of the same sender is new, whatever the order they arrive in
    later, latest = alice.seal(ping, WALL + 1), alice.seal(ping, WALL + 2)
    receiver.open(latest, WALL + 2)
    receiver.open(later, WALL + 2)
    # another sender's count is its own, even when the numbers meet
    bob, bob_ping = sender("bob")
    receiver.open(bob.seal(bob_ping, WALL), WALL + 2)


def test_packets_too_old_or_from_too_far_ahead_are_refused():
    alice, ping = sender("alice")
    receiver = PacketSeal(SECRET, 0)
    old = alice.seal(ping, WALL)
    assert refused(receiver, old, WALL + MAX_PACKET_AGE + 0.1).clock
    assert refused(receiver, alice.seal(ping, WALL + MAX_PACKET_AGE + 1), WALL).clock
    receiver.open(alice.seal(ping, WALL + 10), WALL + 10 + MAX_PACKET_AGE - 1)


def test_a_replay_stays_refused_once_its_record_is_forgotten():
    alice, ping = sender("alice")
    receiver = PacketSeal(SECRET, 0)
    first = alice.seal(ping, WALL)
    receiver.open(first, WALL)
    for second in range(1, 200):
        receiver.open(alice.seal(ping, WALL + second), WALL + second)
    assert len(receiver._seen["alice"]) <= MAX_PACKET_AGE + 1  # what is kept is bounded by the age limit
    assert refused(receiver, first, WALL + 200).clock


def test_a_restarted_sender_is_heard_again_and_its_past_life_cannot_be_replayed():
    before, ping = sender("alice", started=WALL)
    receiver = PacketSeal(SECRET, 0)
    past = [before.seal(ping, WALL + i / 10) for i in range(5)]
    for data in past:
        receiver.open(data, WALL + 1)
    # restarted two seconds later: a new seal, its counter from the wall clock again
    after, ping = sender("alice", started=WALL + 2)
    for i in range(5):
        receiver.open(after.seal(ping, WALL + 2 + i / 10), WALL + 3)
    for data in past:
        assert "replay" in str(refused(receiver, data, WALL + 3))


def test_forged_and_unsealed_packets_are_refused():
    alice, ping = sender("alice")
    receiver = PacketSeal(SECRET, 0)
    assert "not authenticated" in str(refused(PacketSeal(b"another key", 0), alice.seal(ping, WALL), WALL))
    assert "not authenticated" in str(refused(receiver, alice.seal(ping, WALL)[:-3] + b"99}", WALL))
    assert "no sender" in str(refused(receiver, encode_packet(SECRET, ping), WALL))
    for fields in ({"ts": "now", "c": 1}, {"ts": WALL, "c": 1.5}, {"ts": WALL, "c": True}):
        assert "no sender" in str(refused(receiver, encode_packet(SECRET, {**ping, **fields}), WALL))
    assert "no sender" in str(refused(receiver, encode_packet(SECRET, {"t": "ping", "ts": WALL, "c": 1}), WALL))


# --- update rules --------------------------------------------------------------------------------------------

def gossip(*updates) -> dict:
    return {"t": "gossip", "from": "x", "g": list(updates)}


def alive(name: str, incarnation: int) -> dict:
    return {"k": ALIVE, "n": name, "i": incarnation, "a": ["h", 9], "m": {}}


def test_update_precedence():
    node = SwimMembership("me", ("h", 1), {}, CONFIG, random.Random(1), 0.0)
    node.receive(gossip(alive("b", 3)), ("h", 2), 0.0)
    node.receive(gossip({"k": SUSPECT, "n": "b", "i": 2}), ("h", 2), 0.1)
    assert node.members["b"].state == ALIVE  # older incarnation: ignored
    node.receive(gossip({"k": SUSPECT, "n": "b", "i": 3}), ("h", 2), 0.2)
    assert node.members["b"].state == SUSPECT
    node.receive(gossip(alive("b", 3)), ("h", 2), 0.3)
    assert node.members["b"].state == SUSPECT  # same incarnation: suspect wins
    node.receive(gossip(alive("b", 4)), ("h", 2), 0.4)
    assert node.members["b"].state == ALIVE  # refuted
    node.receive(gossip({"k": DEAD, "n": "b", "i": 4}), ("h", 2), 0.5)
    assert node.members["b"].state == DEAD
    node.receive(gossip(alive("b", 4)), ("h", 2), 0.6)
    assert node.members["b"].state == DEAD  # only a newer life comes back
    node.receive(gossip(alive("b", 5)), ("h", 2), 0.7)
    assert node.members["b"].state == ALIVE
    node.receive(gossip({"k": SUSPECT, "n": "unknown", "i": 9}), ("h", 2), 0.8)
    assert "unknown" not in node.members
    assert [e.kind for e in node.take_events()] == [ALIVE, SUSPECT, ALIVE, DEAD, ALIVE]


def test_a_suspected_member_refutes_with_a_higher_incarnation():
    node = SwimMembership("me", ("h", 1), {}, CONFIG, random.Random(1), 0.0, incarnation=5)
    node.receive(gossip(alive("b", 1)), ("h", 2), 0.0)
    node.receive(gossip({"k": SUSPECT, "n": "me", "i": 5}), ("h", 2), 0.1)
    assert node.incarnation == 6
    sent = [u for _a, m in node.tick(node.next_deadline()) for u in m.get("g", [])]
    assert {"k": ALIVE, "n": "me", "i": 6, "a": ["h", 1], "m": {}} in sent
    node.receive(gossip({"k": DEAD, "n": "me", "i": 3}), ("h", 2), 0.2)
    assert node.incarnation == 6  # old news


def test_malformed_messages_are_dropped():
    node = SwimMembership("me", ("h", 1), {}, CONFIG, random.Random(1), 0.0)
    for message in ({}, {"t": "ping"}, {"t": "ack", "seq": "x"}, {"t": "gossip", "g": [{"k": ALIVE}]},
                    {"t": "ping_req", "seq": 1, "target": "b", "addr": []}, {"t": "join_ack", "members": [1]}):
        assert node.receive(message, ("h", 2), 0.0) == []
    assert node.members == {}


# --- whole clusters ------------------------------------------------------------------------------------------

def test_sixty_members_join_through_one_seed():
    net, nodes = cluster(60, seed=1)
    for node in nodes:
        assert sorted(m.name for m in node.alive_members()) == sorted(n.name for n in nodes if n is not node)


def failure_times(net: SimulatedNetwork, victim: str, since: float) -> dict[str, float]:
    return {observer: t - since for t, observer, kind, member in net.events
            if member == victim and kind == DEAD and t >= since}


@pytest.mark.parametrize("loss", [0.0, 0.05])
def test_every_member_learns_of_a_failure_within_bounded_periods(loss):
    net, nodes = cluster(55, seed=2, loss=loss)
    victim = nodes[17]
    crashed_at = net.now
    net.crash(victim)
    net.run(25 * CONFIG.protocol_period)
    detected = failure_times(net, victim.name, crashed_at)
    assert set(net.views(victim.name).values()) == {DEAD}
    assert len(detected) == 54
    # Suspicion lasts 4 x log10(members) periods (about 7 here); first detection and spreading add a few.
    assert max(detected.values()) <= 16 * CONFIG.protocol_period, max(detected.values())


def test_no_false_positives_with_moderate_loss():
    net, nodes = cluster(50, seed=3, loss=0.1)
    start = net.now
    net.run(60 * CONFIG.protocol_period)
    false_deaths = [(t, observer, member) for t, observer, kind, member in net.events
                    if kind in (DEAD, LEFT) and t >= start]
    assert false_deaths == []
    for node in nodes:
        assert len(node.alive_members()) == 49
    assert any(kind == SUSPECT for t, _o, kind, _m in net.events if t >= start)  # loss was felt, and refuted


def test_a_briefly_unreachable_member_is_suspected_then_refutes():
    net, nodes = cluster(5, seed=4)
    target = nodes[2]
    net.blocked.add(target.address)
    start = net.now
    net.run(2.5 * CONFIG.protocol_period)
    net.blocked.clear()
    net.run(10 * CONFIG.protocol_period)
    kinds = [kind for t, _o, kind, member in net.events if member == target.name and t >= start]
    assert SUSPECT in kinds and DEAD not in kinds
    assert target.incarnation > 0
    assert set(net.views(target.name).values()) == {ALIVE}


def test_a_restarted_member_comes_back_with_a_newer_incarnation():
    net, nodes = cluster(6, seed=5)
    victim = nodes[3]
    net.crash(victim)
    net.run(15 * CONFIG.protocol_period)
    assert set(net.views(victim.name).values()) == {DEAD}
    del net.nodes[victim.address]
    reborn = net.add(victim.name, [nodes[0].address], incarnation=victim.incarnation + 1)
    net.run(5 * CONFIG.protocol_period)
    assert set(net.views(reborn.name).values()) == {ALIVE}
    assert len(reborn.alive_members()) == 5


def test_a_member_that_restarts_at_the_same_incarnation_refutes_its_death():
    net, nodes = cluster(4, seed=6)
    victim = nodes[1]
    net.crash(victim)
    net.run(15 * CONFIG.protocol_period)
    del net.nodes[victim.address]
    reborn = net.add(victim.name, [nodes[0].address], incarnation=victim.incarnation)
    net.run(5 * CONFIG.protocol_period)
    assert reborn.incarnation > victim.incarnation
    assert set(net.views(reborn.name).values()) == {ALIVE}


def test_a_member_that_leaves_is_gone_at_once():
    net, nodes = cluster(8, seed=7)
    leaver = nodes[5]
    net.send(leaver.address, leaver.leave(net.now))
    net.crash(leaver)
    start = net.now
    net.run(2 * CONFIG.protocol_period)
    assert set(net.views(leaver.name).values()) == {LEFT}
    assert all(t - start < 2 * CONFIG.protocol_period for t, _o, kind, m in net.events if m == leaver.name)


def test_dead_members_are_forgotten_after_the_retention():
    config = SwimConfig(protocol_period=1.0, ping_timeout=0.3, dead_member_retention=20.0)
    net = SimulatedNetwork(8, config=config)
    first = net.add("a", [])
    second = net.add("b", [first.address])
    net.run(5)
    net.crash(second)
    net.run(15)
    assert first.members["b"].state == DEAD
    net.run(25)
    assert "b" not in first.members


def test_a_members_new_metadata_reaches_every_member():
    """A broker whose listeners changed announces its new metadata; every member takes it over what it knew
    (the higher incarnation wins), and sees the member alive throughout."""
    net, nodes = cluster(5, seed=11)
    nodes[2].set_meta({"id": nodes[2].name, "endpoints": {"EXTRA": ["10.0.0.9", 9094]}})
    net.run(10 * CONFIG.protocol_period)
    for node in nodes:
        if node is not nodes[2]:
            member = node.members[nodes[2].name]
            assert (member.state, member.meta["endpoints"]) == (ALIVE, {"EXTRA": ["10.0.0.9", 9094]})
