"""Cluster membership by SWIM gossip over UDP: who is in the cluster, and who has failed.

:class:`SwimMembership` is the protocol, sans-IO: it is given the time and the packets that arrive, and
returns the packets to send; randomness comes from an injected ``random.Random``. :class:`GossipNode` runs
it on an asyncio UDP socket. The protocol is SWIM (Das, Gupta, Motivala 2002) with its suspicion and
dissemination extensions:

* Every protocol period a member pings the next member of a shuffled round-robin order. Without an ack
  within ``ping_timeout`` it asks ``indirect_probes`` other members to ping the target for it (ping-req);
  without any ack by the end of the period the target becomes *suspect*.
* A suspect that is not heard from again for the suspicion timeout (``suspicion_multiplier`` x
  log10(members) protocol periods, at least ``suspicion_multiplier``) is declared *dead*.
* Every state change is an update ``(kind, member, incarnation)`` piggybacked on the protocol's own
  packets, each update about ``retransmit_multiplier`` x log10(members) times, the least sent first.
* A member that hears it is suspected (or declared dead) refutes it with a higher incarnation number;
  an update about a member wins over another when its incarnation is higher, and at the same
  incarnation dead beats suspect beats alive. A restarted member starts with a higher incarnation (the
  shell takes the wall clock) so its return overrides its old death.
* A new member joins through seed addresses: the seed answers with every member it knows. Every
  ``push_pull_interval`` a member also exchanges its whole member list with a random other (anti-entropy).
* A member that stops cleanly gossips that it *left*, so it is gone without waiting for the timeouts.

Packets are JSON, authenticated with an HMAC-SHA256 under the cluster secret's "gossip" key
(:mod:`broker.cluster.keys`); a packet without the right MAC is dropped unread. Each packet also carries its
sender's wall-clock time and a counter (:class:`PacketSeal`): a packet older than ``MAX_PACKET_AGE`` (or
that far in the future), or one already received, is dropped too, so a recorded packet cannot be replayed to
bring a dead member back or to repeat a ping. The counter starts from the wall clock in microseconds, so a
restarted sender counts on above its past life and is heard at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import math
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import structlog

from broker.cluster.keys import derive_key

log = structlog.get_logger("broker.gossip")

ALIVE = "alive"
SUSPECT = "suspect"
DEAD = "dead"
LEFT = "left"
# At the same incarnation a later state in this order overrides an earlier one.
_PRECEDENCE = {ALIVE: 0, SUSPECT: 1, DEAD: 2, LEFT: 2}

Address = tuple[str, int]
Message = dict[str, Any]
Packet = tuple[Address, Message]

_MAGIC = b"SWIM1"
_MAC_SIZE = hashlib.sha256().digest_size
# How far a packet's time may be from the receiver's: its lifetime for a replay, and the clock difference
# between brokers that gossip tolerates.
MAX_PACKET_AGE = 30.0
# What a packet holds besides its updates: the message's own keys, the seal's time and counter, magic and MAC.
_ENVELOPE_BYTES = 140


def encode_packet(secret: bytes, message: Message) -> bytes:
    payload = json.dumps(message, separators=(",", ":")).encode()
    return _MAGIC + hmac.digest(secret, payload, "sha256") + payload


def decode_packet(secret: bytes, data: bytes) -> Message | None:
    """The message, or None when the packet is not ours, is forged, or does not parse."""
    if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + _MAC_SIZE:
        return None
    mac = data[len(_MAGIC):len(_MAGIC) + _MAC_SIZE]
    payload = data[len(_MAGIC) + _MAC_SIZE:]
    if not hmac.compare_digest(mac, hmac.digest(secret, payload, "sha256")):
        return None
    try:
        message = json.loads(payload)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


class PacketRefused(Exception):
    """A packet dropped unread: forged, malformed, too old (or too far ahead), or received before.
    ``clock``: refused for its time alone, which the sender's clock being off explains as well as a replay."""

    def __init__(self, reason: str, *, clock: bool = False) -> None:
        super().__init__(reason)
        self.clock = clock


class PacketSeal:
    """Seals outgoing messages (time, counter, MAC) and opens incoming ones, refusing replays; sans-IO: the
    caller gives the wall-clock time. ``counter`` is where this sender's count starts: the wall clock in
    microseconds, so that a restart continues above every packet of the previous life."""

    def __init__(self, key: bytes, counter: int, max_age: float = MAX_PACKET_AGE) -> None:
        self.key = key
        self.counter = counter
        self.max_age = max_age
        # sender -> counter -> time, in arrival order: what a replay would repeat, for as long as it is fresh
        self._seen: dict[str, dict[int, float]] = {}

    def seal(self, message: Message, now: float) -> bytes:
        self.counter += 1
        return encode_packet(self.key, {**message, "ts": round(now, 3), "c": self.counter})

    def open(self, data: bytes, now: float) -> Message:
        message = decode_packet(self.key, data)
        if message is None:
            raise PacketRefused("not authenticated")
        sender, sent, counter = message.get("from"), message.get("ts"), message.get("c")
        if (not isinstance(sender, str) or isinstance(sent, bool) or not isinstance(sent, int | float)
                or isinstance(counter, bool) or not isinstance(counter, int)):
            raise PacketRefused("no sender, time or counter")
        if abs(now - sent) > self.max_age:
            raise PacketRefused(f"its time is {sent - now:+.1f} s from ours: clocks more than "
                                f"{self.max_age:.0f} s apart, or a replay", clock=True)
        seen = self._seen.setdefault(sender, {})
        if counter in seen:
            raise PacketRefused("a replay")
        seen[counter] = sent
        while seen:  # the oldest first; a replay of what goes here is refused as too old
            oldest = next(iter(seen))
            if seen[oldest] >= now - self.max_age:
                break
            del seen[oldest]
        return message


@dataclass(frozen=True)
class SwimConfig:
    protocol_period: float = 0.5
    ping_timeout: float = 0.2
    indirect_probes: int = 3
    suspicion_multiplier: float = 4.0
    retransmit_multiplier: int = 4
    max_packet_bytes: int = 1400
    push_pull_interval: float = 10.0
    dead_member_retention: float = 60.0

    def __post_init__(self) -> None:
        if not 0 < self.ping_timeout < self.protocol_period:
            raise ValueError("ping_timeout must be positive and shorter than protocol_period")
        if self.indirect_probes < 0 or self.suspicion_multiplier <= 0 or self.retransmit_multiplier < 1:
            raise ValueError("indirect_probes, suspicion_multiplier and retransmit_multiplier must be positive")
        if self.push_pull_interval <= 0 or self.max_packet_bytes < 512:
            raise ValueError("push_pull_interval must be positive and max_packet_bytes at least 512")


@dataclass
class Member:
    name: str
    address: Address
    meta: dict[str, Any]
    incarnation: int
    state: str
    state_since: float


@dataclass(frozen=True)
class MemberEvent:
    """A change in a member's state as this node sees it: ``kind`` is alive, suspect, dead or left."""

    kind: str
    name: str
    address: Address
    meta: dict[str, Any]
    incarnation: int


@dataclass
class _Probe:
    target: str
    seq: int
    indirect_at: float
    acked: bool = False
    indirect_sent: bool = False


@dataclass
class _Relay:
    """A ping we send for another member's ping-req: its ack goes back to ``requester`` as ``seq``."""

    requester: Address
    seq: int
    expires: float


@dataclass
class _Broadcast:
    update: dict[str, Any]
    size: int
    sent: int = 0


@dataclass
class SwimMembership:
    name: str
    address: Address
    meta: dict[str, Any]
    config: SwimConfig
    rng: random.Random
    now: float
    incarnation: int = 0
    seeds: list[Address] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.members: dict[str, Member] = {}
        self._events: list[MemberEvent] = []
        self._broadcasts: dict[str, _Broadcast] = {}
        self._probe_order: list[str] = []
        self._probe: _Probe | None = None
        self._relays: dict[int, _Relay] = {}
        self._seq = 0
        self._next_period = self.now
        self._next_push_pull = self.now + self.config.push_pull_interval
        self._left = False
        self._queue_update(self._self_alive())

    # --- views -------------------------------------------------------------------------------------------

    def alive_members(self) -> list[Member]:
        """Other members currently thought alive (suspects included: they are not failed yet)."""
        return [m for m in self.members.values() if m.state in (ALIVE, SUSPECT)]

    def take_events(self) -> list[MemberEvent]:
        events, self._events = self._events, []
        return events

    def next_deadline(self) -> float:
        deadlines = [self._next_period, self._next_push_pull]
        if self._probe is not None and not self._probe.acked and not self._probe.indirect_sent:
            deadlines.append(self._probe.indirect_at)
        timeout = self._suspicion_timeout()
        for member in self.members.values():
            if member.state == SUSPECT:
                deadlines.append(member.state_since + timeout)
            elif member.state in (DEAD, LEFT):
                deadlines.append(member.state_since + self.config.dead_member_retention)
        return min(deadlines)

    # --- time --------------------------------------------------------------------------------------------

    def tick(self, now: float) -> list[Packet]:
        """Do whatever is due at ``now``: indirect probes, suspicion expiry, the next protocol period."""
        self.now = now
        if self._left:
            return []
        out: list[Packet] = []
        probe = self._probe
        if probe is not None and not probe.acked and not probe.indirect_sent and now >= probe.indirect_at:
            probe.indirect_sent = True
            out += self._send_indirect_probes(probe)
        self._expire_suspicions()
        self._forget_dead_members()
        self._relays = {seq: relay for seq, relay in self._relays.items() if relay.expires > now}
        if now >= self._next_period:
            self._finish_probe()
            self._next_period = max(self._next_period + self.config.protocol_period, now)
            out += self._start_probe()
            if not self.alive_members():
                out += self.join(now)
        if now >= self._next_push_pull:
            self._next_push_pull = now + self.config.push_pull_interval
            partners = [m for m in self.alive_members() if m.state == ALIVE]
            if partners:
                out += self._state_packets(self.rng.choice(partners).address, reply=True)
        return out

    def _finish_probe(self) -> None:
        probe, self._probe = self._probe, None
        if probe is None or probe.acked:
            return
        member = self.members.get(probe.target)
        if member is not None and member.state == ALIVE:
            self._apply({"k": SUSPECT, "n": member.name, "i": member.incarnation})

    def _start_probe(self) -> list[Packet]:
        target = self._next_target()
        if target is None:
            return []
        self._seq += 1
        self._probe = _Probe(target.name, self._seq, self.now + self.config.ping_timeout)
        return [(target.address, self._message("ping", seq=self._seq, to=target.name))]

    def _next_target(self) -> Member | None:
        for _attempt in range(2):
            while self._probe_order:
                member = self.members.get(self._probe_order.pop())
                if member is not None and member.state in (ALIVE, SUSPECT):
                    return member
            self._probe_order = [m.name for m in self.alive_members()]
            self.rng.shuffle(self._probe_order)
        return None

    def _send_indirect_probes(self, probe: _Probe) -> list[Packet]:
        target = self.members.get(probe.target)
        if target is None:
            return []
        helpers = [m for m in self.alive_members() if m.name != target.name and m.state == ALIVE]
        chosen = self.rng.sample(helpers, min(self.config.indirect_probes, len(helpers)))
        return [(helper.address, self._message("ping_req", seq=probe.seq, target=target.name,
                                               addr=list(target.address))) for helper in chosen]

    def _suspicion_timeout(self) -> float:
        scale = max(1.0, math.log10(len(self.members) + 1))
        return self.config.suspicion_multiplier * scale * self.config.protocol_period

    def _expire_suspicions(self) -> None:
        timeout = self._suspicion_timeout()
        for member in list(self.members.values()):
            if member.state == SUSPECT and self.now >= member.state_since + timeout:
                self._apply({"k": DEAD, "n": member.name, "i": member.incarnation})

    def _forget_dead_members(self) -> None:
        retention = self.config.dead_member_retention
        for member in list(self.members.values()):
            if member.state in (DEAD, LEFT) and self.now >= member.state_since + retention:
                del self.members[member.name]
                self._broadcasts.pop(member.name, None)

    # --- joining and leaving -----------------------------------------------------------------------------

    def join(self, now: float) -> list[Packet]:
        """Ask the seeds for the member list (repeated every period while no member is known)."""
        self.now = now
        hello = {"t": "sync", "from": self.name, "reply": True, "members": [self._self_alive()]}
        return [(seed, hello) for seed in self.seeds if seed != self.address]

    def set_meta(self, meta: dict[str, Any]) -> None:
        """What the others know this member by changed: announced alive again under a higher incarnation, which
        every member takes over what it knew."""
        self.meta = dict(meta)
        self.incarnation += 1
        self._queue_update(self._self_alive())

    def leave(self, now: float) -> list[Packet]:
        """Tell the others that we leave (several of them, so the news spreads without us)."""
        self.now = now
        self._left = True
        update = {"k": LEFT, "n": self.name, "i": self.incarnation}
        targets = self.alive_members()
        chosen = self.rng.sample(targets, min(len(targets), max(self.config.indirect_probes, 3)))
        return [(m.address, {"t": "gossip", "from": self.name, "g": [update]}) for m in chosen]

    # --- packets in --------------------------------------------------------------------------------------

    def receive(self, message: Message, sender: Address, now: float) -> list[Packet]:
        """Handle one authenticated message from ``sender``; return the packets to answer with."""
        self.now = now
        if self._left:
            return []
        try:
            kind = message["t"]
            for update in message.get("g") or ():
                self._apply(update)
            if kind == "ping":
                if message.get("to") not in (None, self.name):
                    return []  # meant for an earlier member at this address
                return [(sender, self._message("ack", seq=message["seq"]))]
            if kind == "ack":
                return self._on_ack(int(message["seq"]))
            if kind == "ping_req":
                self._seq += 1
                self._relays[self._seq] = _Relay(sender, int(message["seq"]), now + self.config.protocol_period)
                target = (str(message["addr"][0]), int(message["addr"][1]))
                return [(target, self._message("ping", seq=self._seq, to=message["target"]))]
            if kind == "sync":
                for update in message["members"]:
                    self._apply(update)
                if message.get("reply"):
                    return self._state_packets(sender, reply=False)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            log.debug("malformed gossip message dropped", sender=sender, error=repr(exc))
        return []

    def _on_ack(self, seq: int) -> list[Packet]:
        probe = self._probe
        if probe is not None and probe.seq == seq:
            probe.acked = True
            return []
        relay = self._relays.pop(seq, None)
        if relay is not None:
            return [(relay.requester, self._message("ack", seq=relay.seq))]
        return []

    def _state_packets(self, address: Address, *, reply: bool) -> list[Packet]:
        """Push-pull anti-entropy: every member we know, in as many packets as it takes. Dissemination
        alone never tells a late joiner about members whose news was spread before it arrived."""
        updates = [self._self_alive()] + [self._update_of(m) for m in self.members.values()]
        budget = self.config.max_packet_bytes - _ENVELOPE_BYTES
        packets: list[Packet] = []
        chunk: list[dict[str, Any]] = []
        used = 0
        for update in updates:
            size = len(json.dumps(update, separators=(",", ":"))) + 1
            if chunk and used + size > budget:
                packets.append((address, {"t": "sync", "from": self.name, "reply": reply, "members": chunk}))
                chunk, used, reply = [], 0, False
            chunk.append(update)
            used += size
        packets.append((address, {"t": "sync", "from": self.name, "reply": reply, "members": chunk}))
        return packets

    # --- updates -----------------------------------------------------------------------------------------

    def _self_alive(self) -> dict[str, Any]:
        return {"k": ALIVE, "n": self.name, "i": self.incarnation, "a": list(self.address), "m": self.meta}

    @staticmethod
    def _update_of(member: Member) -> dict[str, Any]:
        if member.state == ALIVE:
            return {"k": ALIVE, "n": member.name, "i": member.incarnation, "a": list(member.address),
                    "m": member.meta}
        return {"k": member.state, "n": member.name, "i": member.incarnation}

    def _apply(self, update: dict[str, Any]) -> None:
        kind, name, incarnation = update["k"], str(update["n"]), int(update["i"])
        if kind not in _PRECEDENCE:
            return
        if name == self.name:
            self._refute(kind, incarnation)
            return
        member = self.members.get(name)
        if member is None:
            if kind != ALIVE:
                return  # nothing to record without an address; its alive update will come first
            member = Member(name, (str(update["a"][0]), int(update["a"][1])), dict(update.get("m") or {}),
                            incarnation, ALIVE, self.now)
            self.members[name] = member
            self._probe_order.insert(self.rng.randrange(len(self._probe_order) + 1), name)
            self._changed(member, update)
            return
        if not self._overrides(kind, incarnation, member):
            return
        member.incarnation = incarnation
        member.state = kind
        member.state_since = self.now
        if kind == ALIVE:
            member.address = (str(update["a"][0]), int(update["a"][1]))
            member.meta = dict(update.get("m") or {})
        self._changed(member, update)

    @staticmethod
    def _overrides(kind: str, incarnation: int, member: Member) -> bool:
        if member.state in (DEAD, LEFT):
            # Only the member itself, back with a higher incarnation, overrides its death.
            return kind == ALIVE and incarnation > member.incarnation
        if incarnation != member.incarnation:
            return incarnation > member.incarnation
        return _PRECEDENCE[kind] > _PRECEDENCE[member.state]

    def _refute(self, kind: str, incarnation: int) -> None:
        if kind == ALIVE and incarnation <= self.incarnation:
            return
        if incarnation >= self.incarnation:
            self.incarnation = incarnation + 1
            self._queue_update(self._self_alive())

    def _changed(self, member: Member, update: dict[str, Any]) -> None:
        self._queue_update(self._update_of(member) if member.state == ALIVE else
                           {"k": update["k"], "n": member.name, "i": member.incarnation})
        self._events.append(MemberEvent(member.state, member.name, member.address, dict(member.meta),
                                        member.incarnation))

    def _queue_update(self, update: dict[str, Any]) -> None:
        self._broadcasts[update["n"]] = _Broadcast(update, len(json.dumps(update, separators=(",", ":"))))

    def _message(self, kind: str, **fields: Any) -> Message:
        message: Message = {"t": kind, "from": self.name, **fields}
        budget = self.config.max_packet_bytes - _ENVELOPE_BYTES - sum(len(json.dumps(v)) for v in fields.values())
        limit = self.config.retransmit_multiplier * max(1, math.ceil(math.log10(len(self.members) + 2)))
        chosen = []
        for key, broadcast in sorted(self._broadcasts.items(), key=lambda item: item[1].sent):
            if broadcast.size > budget:
                continue
            budget -= broadcast.size + 1
            chosen.append(broadcast.update)
            broadcast.sent += 1
            if broadcast.sent >= limit:
                del self._broadcasts[key]
        message["g"] = chosen
        return message


class GossipNode:
    """:class:`SwimMembership` on a UDP socket: ``start()``, ``stop()`` (leaving), and member events."""

    def __init__(self, name: str, bind: Address, secret: str | bytes, *, advertise: Address | None = None,
                 seeds: Iterable[Address] = (), meta: dict[str, Any] | None = None,
                 config: SwimConfig | None = None,
                 on_event: Callable[[MemberEvent], None] | None = None) -> None:
        self.bind = bind
        self._seal = PacketSeal(derive_key(secret, "gossip"), int(time.time() * 1_000_000))
        self._clock_warning_due = 0.0
        self.on_event = on_event
        self._advertise = advertise
        self._seeds = list(seeds)
        self._meta = dict(meta or {})
        self._name = name
        self._config = config or SwimConfig()
        self.protocol: SwimMembership | None = None
        self._transport: asyncio.DatagramTransport | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._running = False

    @property
    def address(self) -> Address:
        assert self.protocol is not None
        return self.protocol.address

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._transport, _ = await loop.create_datagram_endpoint(
            lambda: _GossipDatagrams(self), local_addr=self.bind)
        host, port = self._transport.get_extra_info("sockname")[:2]
        address = self._advertise or (host if host not in ("0.0.0.0", "::") else "127.0.0.1", port)
        # The wall clock as first incarnation: a restarted member outranks what was said of its past life.
        self.protocol = SwimMembership(self._name, address, self._meta, self._config, random.Random(),
                                       time.monotonic(), incarnation=int(time.time()), seeds=self._seeds)
        self._send(self.protocol.join(time.monotonic()))
        self._running = True
        self._task = asyncio.create_task(self._run(), name=f"gossip-{self._name}")
        log.info("gossip started", name=self._name, address=f"{address[0]}:{address[1]}",
                 seeds=[f"{h}:{p}" for h, p in self._seeds])

    async def stop(self, *, leave: bool = True) -> None:
        """Stop; with ``leave`` the others are told at once instead of having to detect the failure."""
        self._running = False  # ends the loop even if a completing wait_for swallows the cancellation
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if leave and self.protocol is not None and self._transport is not None:
            self._send(self.protocol.leave(time.monotonic()))
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    def set_meta(self, meta: dict[str, Any]) -> None:
        """New metadata for this member (its Kafka listeners changed), gossiped to the others."""
        self._meta = dict(meta)
        if self.protocol is not None:
            self.protocol.set_meta(meta)
            self._wake.set()

    def alive_members(self) -> list[Member]:
        return [] if self.protocol is None else self.protocol.alive_members()

    def members(self) -> list[Member]:
        return [] if self.protocol is None else list(self.protocol.members.values())

    async def _run(self) -> None:
        assert self.protocol is not None
        while self._running:
            self._wake.clear()
            delay = self.protocol.next_deadline() - time.monotonic()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wake.wait()
            self._send(self.protocol.tick(time.monotonic()))
            self._deliver_events()

    def datagram_received(self, data: bytes, sender: Address) -> None:
        if self.protocol is None:
            return
        try:
            message = self._seal.open(data, time.time())
        except PacketRefused as refused:
            if refused.clock and time.monotonic() >= self._clock_warning_due:
                # said once a minute: a broker whose clock is off is never heard, and should be told why
                self._clock_warning_due = time.monotonic() + 60.0
                log.warning("gossip packet dropped", sender=sender, reason=str(refused))
            else:
                log.debug("gossip packet dropped", sender=sender, reason=str(refused))
            return
        self._send(self.protocol.receive(message, (sender[0], sender[1]), time.monotonic()))
        self._deliver_events()
        self._wake.set()

    def _send(self, packets: list[Packet]) -> None:
        if self._transport is None:
            return
        for address, message in packets:
            self._transport.sendto(self._seal.seal(message, time.time()), address)

    def _deliver_events(self) -> None:
        assert self.protocol is not None
        for event in self.protocol.take_events():
            log.info("gossip member " + event.kind, member=event.name, incarnation=event.incarnation)
            if self.on_event is not None:
                try:
                    self.on_event(event)
                except Exception:
                    log.exception("gossip event listener failed", member=event.name)


class _GossipDatagrams(asyncio.DatagramProtocol):
    def __init__(self, node: GossipNode) -> None:
        self.node = node

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.node.datagram_received(data, addr)

    def error_received(self, exc: Exception) -> None:
        # ICMP port unreachable for a dead peer: failure detection handles it.
        pass

