"""The ``cluster:`` block of a broker's YAML config: what makes a broker one node of a cluster.

    cluster:
      secret: 5f0c...                    # shared by every broker, at least 32 characters: keys Raft and gossip
      raft:
        listen: 127.0.0.1:19201          # this broker's Raft address
        peers: {2: 127.0.0.1:19202, 3: 127.0.0.1:19203}   # every other voter, by node id
        join: false                      # true: a broker joining a running cluster, not a voter until
                                         # added (kafka-metadata-quorum add-controller); peers are then
                                         # the voters it joins, and the cluster id derives from them
        election_timeout_min_ms: 400     # optional timings
        election_timeout_max_ms: 1400
        heartbeat_interval_ms: 100
        reconnect_interval_ms: 1000
      gossip:
        listen: 127.0.0.1:19301          # UDP
        advertise: 127.0.0.1:19401       # optional: where the others send to, when not the listen address
                                         # (a relay or NAT in between)
        seeds: [127.0.0.1:19302, 127.0.0.1:19303]
        protocol_period_ms: 500          # optional timings
        ping_timeout_ms: 200
        indirect_probes: 3
        suspicion_multiplier: 4
        push_pull_interval_ms: 10000
      controller:
        preferred_leader_election_interval_ms: 30000   # optional: the leader imbalance check's interval in ms,
                                                       # instead of leader.imbalance.check.interval.seconds
        unknown_broker_grace_ms: 10000

Unknown keys are errors naming the file and the key path, like everywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.cluster.keys import secret_problem
from broker.cluster.membership import SwimConfig
from broker.cluster.raft import RaftTiming
from broker.config_loading import Section

CLUSTER_KEYS = ("secret", "raft", "gossip", "controller")
RAFT_KEYS = ("listen", "peers", "join", "election_timeout_min_ms", "election_timeout_max_ms", "heartbeat_interval_ms",
             "reconnect_interval_ms")
GOSSIP_KEYS = ("listen", "advertise", "seeds", "protocol_period_ms", "ping_timeout_ms", "indirect_probes",
               "suspicion_multiplier", "push_pull_interval_ms")
CONTROLLER_KEYS = ("preferred_leader_election_interval_ms", "unknown_broker_grace_ms")


@dataclass(frozen=True)
class ClusterConfig:
    secret: str
    raft_listen: str
    raft_peers: dict[int, str]
    raft_timing: RaftTiming
    raft_join: bool
    gossip_listen: tuple[str, int]
    gossip_advertise: tuple[str, int] | None
    gossip_seeds: list[tuple[str, int]]
    swim: SwimConfig
    preferred_leader_election_interval: float | None  # None: the broker's leader.imbalance.check.interval.seconds
    unknown_broker_grace: float

    @classmethod
    def from_section(cls, section: Section, node_id: int) -> ClusterConfig:
        section.check_keys(CLUSTER_KEYS)
        secret = section.get_str("secret")
        problem = secret_problem(secret)
        if problem is not None:
            raise section.error("secret", problem)
        raft = _subsection(section, "raft", RAFT_KEYS)
        gossip = _subsection(section, "gossip", GOSSIP_KEYS)
        controller = _subsection(section, "controller", CONTROLLER_KEYS, required=False)
        raft_listen = _hostport(raft, "listen", raft.get_str("listen"))
        peers = {}
        for key, address in raft.get_map("peers").items():
            if not key.isdigit():
                raise raft.error("peers", f"{key!r} is not a node id")
            if int(key) == node_id:
                raise raft.error("peers", f"lists this broker's own id {node_id}; peers are the other voters")
            peers[int(key)] = _hostport(raft, "peers", address)
        try:
            timing = RaftTiming(
                election_timeout_min=raft.get_int("election_timeout_min_ms", 400, minimum=1) / 1000,
                election_timeout_max=raft.get_int("election_timeout_max_ms", 1400, minimum=1) / 1000,
                heartbeat_interval=raft.get_int("heartbeat_interval_ms", 100, minimum=1) / 1000,
                reconnect_interval=raft.get_int("reconnect_interval_ms", 1000, minimum=1) / 1000)
        except ValueError as exc:
            raise raft.error(None, str(exc)) from None
        gossip_listen = _split(_hostport(gossip, "listen", gossip.get_str("listen")))
        advertise = gossip.get_str("advertise", None)
        gossip_advertise = None if advertise is None else _split(_hostport(gossip, "advertise", advertise))
        seeds = [_split(_hostport(gossip, "seeds", seed)) for seed in gossip.get_list("seeds", [])]
        try:
            swim = SwimConfig(
                protocol_period=gossip.get_int("protocol_period_ms", 500, minimum=1) / 1000,
                ping_timeout=gossip.get_int("ping_timeout_ms", 200, minimum=1) / 1000,
                indirect_probes=gossip.get_int("indirect_probes", 3, minimum=0),
                suspicion_multiplier=gossip.get_float("suspicion_multiplier", 4.0),
                push_pull_interval=gossip.get_int("push_pull_interval_ms", 10000, minimum=1) / 1000)
        except ValueError as exc:
            raise gossip.error(None, str(exc)) from None
        return cls(
            secret=secret, raft_listen=raft_listen, raft_peers=peers, raft_timing=timing,
            raft_join=raft.get_bool("join", False),
            gossip_listen=gossip_listen, gossip_advertise=gossip_advertise, gossip_seeds=seeds, swim=swim,
            preferred_leader_election_interval=_seconds(controller.get_int(
                "preferred_leader_election_interval_ms", None, minimum=1)),
            unknown_broker_grace=controller.get_int("unknown_broker_grace_ms", 10000, minimum=0) / 1000)


def _subsection(section: Section, key: str, known: tuple[str, ...], required: bool = True) -> Section:
    data = section.data.get(key)
    if data is None:
        if required:
            raise section.error(key, "is required")
        data = {}
    if not isinstance(data, dict):
        raise section.error(key, f"expected a mapping, got {data!r}")
    sub = Section(section.file, f"{section.path}.{key}", data)
    sub.check_keys(known)
    return sub


def _hostport(section: Section, key: str, text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise section.error(key, f"{text!r} is not host:port")
    return text


def _seconds(milliseconds: int | None) -> float | None:
    return None if milliseconds is None else milliseconds / 1000


def _split(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)
