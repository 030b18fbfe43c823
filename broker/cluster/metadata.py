"""The cluster's replicated metadata: a pure state machine, applied in Raft log order on every broker.

It holds the registered brokers (whether each is alive, and its address on each of its listeners), the
topics with their ids and config overrides, the dynamic broker configs (cluster default and per broker),
the ACLs, the SCRAM credentials and the client quotas, and per partition the replica assignment, the leader, the leader epoch,
the ISR and a partition epoch. Commands are plain JSON-able dicts ``{"op": ..., ...}``; :meth:`ClusterMetadata.apply`
returns ``{"error_code": int, "error_message": str | None, ...}`` and never raises, because a command that
made it into the Raft log is replayed on every broker and after every restart: a bad one must be a
recorded refusal, never a crash. Nothing here reads a clock, a random source or a socket, so every
broker that applies the same commands in the same order holds the same state.

The rules follow Kafka's KRaft controller:

* A new topic's replicas are assigned round robin over the live brokers (sorted by id), starting one
  broker further for every topic so that leaders spread; the first replica is the preferred leader.
* Every leadership change bumps the leader epoch; every leader or ISR change bumps the partition epoch.
* Fencing a broker (it died) removes it from every ISR it is in, unless it is the last member (then the
  partition has no leader until that broker returns: no unclean election), and moves each leadership
  it held to the first live ISR member in replica order.
* Unregistering a broker (``unregister_broker``, Kafka's UnregisterBroker) fences it if it is alive, then drops
  its registration: it is no longer a broker of the cluster (its id may stay in replica lists, as in Kafka).
* A broker that registers again becomes leader of the partitions that were offline waiting for it.
* Every registration gives the broker a new broker epoch, higher than any before (KRaft's broker epoch):
  what a broker proves it is when it logs in to another (:mod:`broker.security.broker_login`), so that a
  broker fenced or registered again since cannot go on speaking as a broker with what it proved before.
* Unclean election (``elect_unclean``, proposed by the controller for topics with
  unclean.leader.election.enable): an offline partition is led by its first live replica, ISR or not.
* The preferred replica takes leadership back only on request (``elect_preferred``, or ``elect_leaders`` for
  ElectLeaders), once it is in the ISR.
* An ISR change comes from the partition's leader at its current leader epoch; it may not drop the
  leader nor add a replica that is not alive.
* A reassignment (``alter_reassignment``, KIP-455 as Kafka's KRaft controller does it) sets a partition's
  replicas to the target followed by the current replicas outside it; the ones outside the current set are
  *adding*, the current ones outside the target *removing*. Adding replicas follow the leader like any other;
  once every target replica is in the ISR the reassignment completes: the replicas become the target, the ISR
  loses the removed ones, and a leader being removed hands over to the first target replica in the ISR (a new
  leader epoch). A new target replaces one in progress (computed from the current, merged replicas);
  ``replicas: None`` cancels, going back to the replicas before it (the adding ones leave, the ISR keeps only
  original replicas, and a leader that was only being added hands back). Where no original replica is in the
  ISR, the first of them becomes the ISR alone if the command says ``unclean`` (the topic allows unclean
  elections), as Kafka's controller reverts; otherwise the cancellation is refused in Kafka's words.
* ``set_raft_voter`` names the Raft address and directory id of a voter added at run time (the voter set
  itself is Raft's own, :mod:`broker.cluster.raft`), so that every broker knows it by its id.
* ``barrier`` changes nothing: a broker proposes it to learn that its own copy has applied everything the
  quorum had committed before it (see :meth:`broker.cluster.node.ClusterNode.catch_up`).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from broker.errors import ErrorCode
from broker.quotas import apply_changes
from broker.topics import partitions_past_limit

NO_LEADER = -1

Command = dict[str, Any]
Result = dict[str, Any]

# Kafka's controller's texts for the ElectLeaders outcomes a single node gives too (the same on both)
ELECTION_NOT_NEEDED_MESSAGE = "Leader election not needed for topic partition."


def no_such_partition_message(topic: str, partition: int, topic_exists: bool) -> str:
    return f"No such partition as {topic}-{partition}" if topic_exists else f"No such topic as {topic}"


class CommandRefused(Exception):
    """A command that cannot be applied; it becomes the error of the command's result."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class BrokerRegistration:
    node_id: int
    host: str  # the inter-broker listener's address
    port: int
    rack: str | None
    alive: bool = True
    # listener name -> [host, port] as its clients are told (empty: brokers of older versions, one listener)
    endpoints: dict[str, list[Any]] = field(default_factory=dict)
    epoch: int = -1  # the broker epoch of this registration (-1: registered before brokers had epochs)


@dataclass
class PartitionState:
    replicas: list[int]
    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int = 0
    # an ongoing reassignment: replicas being added (not yet all in the ISR) and being removed once they are
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0]

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.removing]


@dataclass
class TopicMetadata:
    name: str
    topic_id: bytes
    partitions: list[PartitionState]
    configs: dict[str, str] = field(default_factory=dict)


def ok(**extra: Any) -> Result:
    return {"error_code": ErrorCode.NONE.value, "error_message": None, **extra}


def refused(code: ErrorCode, message: str) -> Result:
    return {"error_code": code.value, "error_message": message}


def assign_replicas(brokers: list[int], partitions: int, replication_factor: int, start: int,
                    first_partition: int = 0) -> list[list[int]]:
    """Round-robin replica lists: partition ``p``'s leader is broker ``start + p`` (mod n), its followers
    the next ones. ``brokers`` must be sorted so that every broker computes the same answer."""
    count = len(brokers)
    return [[brokers[(start + p + j) % count] for j in range(replication_factor)]
            for p in range(first_partition, first_partition + partitions)]


def unknown_partition_message(topic: str, partition: int, topic_exists: bool) -> str:
    """Kafka's controller's words for a reassignment of a partition that does not exist."""
    return f"Unable to find partition {topic}:{partition}." if topic_exists else \
        f"Unable to find a topic named {topic}."


def reassignment_target_problem(target: list[int], registered: set[int]) -> str | None:
    """Why ``target`` cannot be a partition's new replica list (INVALID_REPLICA_ASSIGNMENT), or None."""
    if not target:
        return "the replica list is empty"
    if len(set(target)) != len(target):
        return f"duplicate replicas in {target}"
    unknown = [r for r in target if r not in registered]
    if unknown:
        return f"brokers {unknown} are not registered"
    return None


# Versions of the metadata, never used twice in a process (see ClusterMetadata.version).
_VERSIONS = itertools.count(1)


class ClusterMetadata:
    def __init__(self) -> None:
        # A number that changes with every applied command, and that no other ClusterMetadata (one restored
        # from a snapshot) ever had: what was derived from the metadata can be kept while it stays the same.
        self.version = next(_VERSIONS)
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, TopicMetadata] = {}
        # Where the next topic's round-robin assignment starts; bumped per topic so leaders spread.
        self.assignment_cursor = 0
        self.next_broker_epoch = 0
        # dynamic broker configs by scope: "" (the cluster default) or a node id
        self.broker_configs: dict[str, dict[str, str]] = {}
        # ACLs, each [resource type, name, pattern type, principal, host, operation, permission], in creation order
        self.acls: list[list[Any]] = []
        # SCRAM credentials: user -> mechanism -> [salt hex, stored key hex, server key hex, iterations]
        self.scram: dict[str, dict[str, list[Any]]] = {}
        # client quotas: entity (broker.quotas.entity_key) -> quota key -> value
        self.client_quotas: dict[str, dict[str, float]] = {}
        # node id -> (Raft address, directory id) of the voters added at run time (the configured ones are in
        # every config, and have no directory id)
        self.raft_voters: dict[int, tuple[str, bytes]] = {}

    # --- queries -----------------------------------------------------------------------------------------

    def live_broker_ids(self) -> list[int]:
        return sorted(node for node, broker in self.brokers.items() if broker.alive)

    def live_brokers(self) -> list[BrokerRegistration]:
        return [self.brokers[node] for node in self.live_broker_ids()]

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        found = self.topics.get(topic)
        if found is None or not 0 <= partition < len(found.partitions):
            return None
        return found.partitions[partition]

    def topic_by_id(self, topic_id: bytes) -> TopicMetadata | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None

    def partitions(self) -> Iterator[tuple[str, int, PartitionState]]:
        for name, topic in self.topics.items():
            for index, state in enumerate(topic.partitions):
                yield name, index, state

    def preferred_elections_due(self) -> list[tuple[str, int]]:
        """Partitions whose preferred replica is alive and in the ISR but does not lead."""
        due = []
        for name, index, state in self.partitions():
            preferred = state.preferred_leader
            if state.leader != preferred and preferred in state.isr and self._alive(preferred):
                due.append((name, index))
        return due

    def offline_partitions(self) -> list[tuple[str, int]]:
        """Partitions without a leader that a live replica outside the ISR could lead (unclean election)."""
        return [(name, index) for name, index, state in self.partitions()
                if state.leader == NO_LEADER and any(self._alive(r) for r in state.replicas)]

    def _alive(self, node_id: int) -> bool:
        broker = self.brokers.get(node_id)
        return broker is not None and broker.alive

    def broker_epoch(self, node_id: int) -> int | None:
        """The broker epoch of a registered, unfenced broker; None for any other."""
        broker = self.brokers.get(node_id)
        return broker.epoch if broker is not None and broker.alive else None

    # --- commands ----------------------------------------------------------------------------------------

    def apply(self, command: Command) -> Result:
        """Apply one command; the result says whether it took effect (see the module docstring)."""
        try:
            op = command["op"]
            handler = self._HANDLERS.get(op)
            if handler is None:
                return refused(ErrorCode.INVALID_REQUEST, f"unknown metadata command {op!r}")
            return handler(self, command)
        except CommandRefused as exc:
            return refused(exc.code, exc.message)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            return refused(ErrorCode.INVALID_REQUEST, f"malformed metadata command: {exc!r}")
        finally:
            # after the change (a reader takes the version before what it derives, so it never keeps a
            # result of the old state under the new version)
            self.version = next(_VERSIONS)

    def _register_broker(self, command: Command) -> Result:
        node_id = int(command["node_id"])
        endpoints = {str(name): [str(host), int(port)] for name, (host, port) in (command.get("endpoints") or {}).items()}
        self.brokers[node_id] = BrokerRegistration(node_id, str(command["host"]), int(command["port"]),
                                                   command.get("rack") or None, alive=True, endpoints=endpoints,
                                                   epoch=self.next_broker_epoch)
        self.next_broker_epoch += 1
        for _name, _index, state in self.partitions():
            if state.leader == NO_LEADER and node_id in state.isr:
                self._change_leader(state, node_id)
        return ok()

    def _fence_broker(self, command: Command) -> Result:
        node_id = int(command["node_id"])
        self._registered(node_id).alive = False
        self._leave_isrs(node_id)
        return ok()

    def _unregister_broker(self, command: Command) -> Result:
        node_id = int(command["node_id"])
        self._registered(node_id).alive = False
        self._leave_isrs(node_id)
        del self.brokers[node_id]
        return ok()

    def _registered(self, node_id: int) -> BrokerRegistration:
        broker = self.brokers.get(node_id)
        if broker is None:
            # Kafka's controller's words
            raise CommandRefused(ErrorCode.BROKER_ID_NOT_REGISTERED,
                                 f"Broker ID {node_id} is not currently registered")
        return broker

    def _leave_isrs(self, node_id: int) -> None:
        """A broker no longer alive leaves every ISR, and hands each leadership to the next live ISR member."""
        for _name, _index, state in self.partitions():
            if node_id not in state.isr or (state.isr == [node_id] and state.leader != node_id):
                continue  # not in the ISR, or already the offline partition's last ISR member
            if len(state.isr) > 1:
                state.isr = [replica for replica in state.isr if replica != node_id]
            if state.leader == node_id:
                state.leader = next((r for r in state.replicas if r in state.isr and self._alive(r)), NO_LEADER)
                state.leader_epoch += 1
            state.partition_epoch += 1

    def _create_topic(self, command: Command) -> Result:
        name = str(command["name"])
        topic_id = bytes.fromhex(command["topic_id"])
        existing = self.topics.get(name)
        if existing is not None:
            if existing.topic_id == topic_id:
                return ok(topic_id=topic_id.hex())  # the same request again (a retried proposal)
            raise CommandRefused(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if len(topic_id) != 16 or topic_id == bytes(16) or self.topic_by_id(topic_id) is not None:
            raise CommandRefused(ErrorCode.INVALID_REQUEST, "a new topic needs a fresh 16-byte topic id")
        assignments = command.get("assignments")
        if assignments:
            replica_lists = [[int(r) for r in replicas] for replicas in assignments]
            self._check_assignments(replica_lists)
        else:
            partitions = int(command["partitions"])
            replication_factor = int(command["replication_factor"])
            if partitions <= 0:
                raise CommandRefused(ErrorCode.INVALID_PARTITIONS, "number of partitions must be larger than 0")
            replica_lists = self._round_robin(partitions, replication_factor, 0)
        self._check_partition_room(command, len(replica_lists))
        if not assignments:
            self.assignment_cursor += 1
        configs = {str(k): str(v) for k, v in (command.get("configs") or {}).items()}
        self.topics[name] = TopicMetadata(name, topic_id, [
            PartitionState(replicas=replicas, leader=replicas[0], leader_epoch=0, isr=list(replicas))
            for replicas in replica_lists], configs)
        return ok(topic_id=topic_id.hex())

    def _check_partition_room(self, command: Command, adding: int) -> None:
        """The proposer's max.partitions, checked here, in commit order: two brokers each checking their own
        view before proposing could together pass it. Commands from before the bound carry none."""
        limit = command.get("max_partitions")
        if limit is None:
            return
        held = sum(len(topic.partitions) for topic in self.topics.values())
        refusal = partitions_past_limit(held, adding, int(limit))
        if refusal is not None:
            raise CommandRefused(ErrorCode.POLICY_VIOLATION, refusal)

    def _round_robin(self, partitions: int, replication_factor: int, first_partition: int) -> list[list[int]]:
        live = self.live_broker_ids()
        if replication_factor <= 0:
            raise CommandRefused(ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be larger than 0")
        if replication_factor > len(live):
            raise CommandRefused(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 f"replication factor {replication_factor} is larger than the {len(live)} "
                                 "available brokers")
        return assign_replicas(live, partitions, replication_factor, self.assignment_cursor, first_partition)

    def _check_assignments(self, replica_lists: list[list[int]]) -> None:
        width = len(replica_lists[0])
        for replicas in replica_lists:
            if not replicas or len(replicas) != width or len(set(replicas)) != len(replicas):
                raise CommandRefused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "every partition needs the same number of distinct replicas")
            unknown = [r for r in replicas if not self._alive(r)]
            if unknown:
                raise CommandRefused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"brokers {unknown} are not live members of the cluster")

    def _delete_topic(self, command: Command) -> Result:
        name = str(command["name"])
        if self.topics.pop(name, None) is None:
            raise CommandRefused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        return ok()

    def _create_partitions(self, command: Command) -> Result:
        topic = self._topic(command["name"])
        total = int(command["count"])
        current = len(topic.partitions)
        if total <= current:
            raise CommandRefused(ErrorCode.INVALID_PARTITIONS,
                                 f"topic has {current} partitions; {total} is not more")
        assignments = command.get("assignments")
        if assignments:
            replica_lists = [[int(r) for r in replicas] for replicas in assignments]
            if len(replica_lists) != total - current:
                raise CommandRefused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"{len(replica_lists)} assignments for {total - current} new partitions")
            self._check_assignments(replica_lists)
        else:
            replica_lists = self._round_robin(total - current, len(topic.partitions[0].target_replicas), current)
        self._check_partition_room(command, len(replica_lists))
        topic.partitions.extend(
            PartitionState(replicas=replicas, leader=replicas[0], leader_epoch=0, isr=list(replicas))
            for replicas in replica_lists)
        return ok()

    def _alter_configs(self, command: Command) -> Result:
        topic = self._topic(command["name"])
        configs = {} if command.get("replace") else dict(topic.configs)
        for key, value in command["configs"].items():
            if value is None:
                configs.pop(str(key), None)
            else:
                configs[str(key)] = str(value)
        topic.configs = configs
        return ok()

    def _alter_broker_configs(self, command: Command) -> Result:
        configs = {str(k): str(v) for k, v in command["configs"].items()}
        if configs:
            self.broker_configs[str(command["scope"])] = configs
        else:
            self.broker_configs.pop(str(command["scope"]), None)
        return ok()

    def _create_acls(self, command: Command) -> Result:
        for acl in command["acls"]:
            entry = [int(acl[0]), str(acl[1]), int(acl[2]), str(acl[3]), str(acl[4]), int(acl[5]), int(acl[6])]
            if entry not in self.acls:
                self.acls.append(entry)
        return ok()

    def _delete_acls(self, command: Command) -> Result:
        doomed = [[int(a[0]), str(a[1]), int(a[2]), str(a[3]), str(a[4]), int(a[5]), int(a[6])]
                  for a in command["acls"]]
        self.acls = [acl for acl in self.acls if acl not in doomed]
        return ok()

    def _alter_scram(self, command: Command) -> Result:
        for user, mechanism in command.get("deletions") or []:
            self.scram.get(str(user), {}).pop(str(mechanism), None)
            if not self.scram.get(str(user), True):
                del self.scram[str(user)]
        for user, mechanism, salt, stored_key, server_key, iterations in command.get("upserts") or []:
            self.scram.setdefault(str(user), {})[str(mechanism)] = [str(salt), str(stored_key), str(server_key),
                                                                    int(iterations)]
        return ok()

    def _alter_client_quotas(self, command: Command) -> Result:
        apply_changes(self.client_quotas, [(str(entity), str(key), None if value is None else float(value))
                                           for entity, key, value in command["changes"]])
        return ok()

    def _change_isr(self, command: Command) -> Result:
        name, index = str(command["topic"]), int(command["partition"])
        state = self.partition(name, index)
        if state is None:
            raise CommandRefused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{name}-{index} does not exist")
        leader, epoch = int(command["leader"]), int(command["leader_epoch"])
        if leader != state.leader:
            raise CommandRefused(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                 f"broker {leader} does not lead {name}-{index} (broker {state.leader} does)")
        if epoch != state.leader_epoch:
            raise CommandRefused(ErrorCode.FENCED_LEADER_EPOCH,
                                 f"leader epoch {epoch} of {name}-{index} is not the current {state.leader_epoch}")
        wanted = {int(r) for r in command["isr"]}
        if leader not in wanted:
            raise CommandRefused(ErrorCode.INVALID_REQUEST, "the leader cannot leave its own ISR")
        if not wanted <= set(state.replicas):
            raise CommandRefused(ErrorCode.INVALID_REQUEST, f"ISR {sorted(wanted)} is not a subset of the replicas")
        joining = [r for r in wanted - set(state.isr) if not self._alive(r)]
        if joining:
            raise CommandRefused(ErrorCode.INELIGIBLE_REPLICA, f"brokers {joining} are not alive")
        new_isr = [r for r in state.replicas if r in wanted]
        if new_isr != state.isr:
            state.isr = new_isr
            state.partition_epoch += 1
        self._complete_reassignment(state)
        return ok(isr=list(state.isr), partition_epoch=state.partition_epoch)

    def _alter_reassignment(self, command: Command) -> Result:
        name, index = str(command["topic"]), int(command["partition"])
        state = self.partition(name, index)
        if state is None:
            raise CommandRefused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, unknown_partition_message(
                name, index, name in self.topics))
        if command["replicas"] is None:
            return self._cancel_reassignment(name, index, state, unclean=bool(command.get("unclean")))
        target = [int(r) for r in command["replicas"]]
        # as Kafka's controller: a registered broker that is fenced now may be a target (it catches up on return)
        problem = reassignment_target_problem(target, set(self.brokers))
        if problem is not None:
            raise CommandRefused(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
        current = list(state.replicas)
        original = [r for r in current if r not in state.adding]
        merged = target + [r for r in current if r not in target]
        adding = [r for r in target if r not in original]
        removing = [r for r in current if r not in target]
        if merged != state.replicas or adding != state.adding or removing != state.removing:
            state.replicas, state.adding, state.removing = merged, adding, removing
            state.partition_epoch += 1
        self._complete_reassignment(state)
        return ok()

    def _cancel_reassignment(self, name: str, index: int, state: PartitionState, *, unclean: bool) -> Result:
        """Kafka's PartitionReassignmentRevert: the replicas without the adding ones, the ISR without them too.
        Where no original replica is in sync, the first original replica becomes the ISR alone: an unclean
        election, which only the topic's unclean.leader.election.enable (``unclean``) allows."""
        if not state.reassigning:
            raise CommandRefused(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                 f"no reassignment of {name}-{index} is in progress")
        original = [r for r in state.replicas if r not in state.adding]
        if not any(r in state.isr for r in original):
            if not unclean:
                raise CommandRefused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Unable to revert partition assignment for {name}:{index} because it would "
                                     "require an unclean leader election.")
            state.isr = original[:1]
        self._settle_replicas(state, original)
        return ok()

    def _complete_reassignment(self, state: PartitionState) -> None:
        """Finish a reassignment once every target replica is in the ISR (Kafka's rule: a target replica
        that is an out-of-sync current one is waited for as much as an added one)."""
        target = state.target_replicas
        if state.reassigning and all(r in state.isr for r in target):
            self._settle_replicas(state, target)

    def _settle_replicas(self, state: PartitionState, replicas: list[int]) -> None:
        """The partition's replicas become ``replicas`` (no reassignment left; some of them in the ISR): the
        ISR keeps only those, and a leader outside them hands over to the first of them in the ISR and alive
        (none: offline, as when its last ISR member is fenced)."""
        state.replicas, state.adding, state.removing = list(replicas), [], []
        isr = [r for r in replicas if r in state.isr]
        state.isr = isr
        state.partition_epoch += 1
        if state.leader not in replicas:
            leader = next((r for r in replicas if r in isr and self._alive(r)), NO_LEADER)
            self._change_leader(state, leader)

    def _elect_preferred(self, command: Command) -> Result:
        self._preferred_election(str(command["topic"]), int(command["partition"]))
        return ok()

    def _preferred_election(self, name: str, index: int) -> None:
        state = self._existing_partition(name, index)
        preferred = state.preferred_leader
        if state.leader == preferred:
            raise CommandRefused(ErrorCode.ELECTION_NOT_NEEDED, ELECTION_NOT_NEEDED_MESSAGE)
        if preferred not in state.isr or not self._alive(preferred):
            raise CommandRefused(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                                 f"preferred replica {preferred} of {name}-{index} is not a live ISR member")
        self._change_leader(state, preferred)

    def _elect_unclean(self, command: Command) -> Result:
        return ok(leader=self._unclean_election(str(command["topic"]), int(command["partition"])))

    def _unclean_election(self, name: str, index: int) -> int:
        """Kafka's unclean leader election (proposed by the controller for topics with
        unclean.leader.election.enable, or asked for with ElectLeaders): a partition without a leader is led by
        a live ISR member if there is one, else by the first live replica with whatever it has, alone in the
        ISR; what only the lost leader held is gone."""
        state = self._existing_partition(name, index)
        if state.leader != NO_LEADER:
            raise CommandRefused(ErrorCode.ELECTION_NOT_NEEDED, ELECTION_NOT_NEEDED_MESSAGE)
        clean = next((r for r in state.replicas if r in state.isr and self._alive(r)), NO_LEADER)
        leader = clean if clean != NO_LEADER else next((r for r in state.replicas if self._alive(r)), NO_LEADER)
        if leader == NO_LEADER:
            raise CommandRefused(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"no replica of {name}-{index} is alive")
        if clean == NO_LEADER:
            state.isr = [leader]
        self._change_leader(state, leader)
        return leader

    def _elect_leaders(self, command: Command) -> Result:
        """ElectLeaders (api 43) as one command, so that its partitions are judged against one state: for each
        ``[topic, partition]`` of ``partitions`` a preferred (``"preferred": true``) or unclean election, with
        Kafka's per-partition outcome ``[topic, partition, error code, message]``. With ``"all": true`` every
        partition of every topic instead, leaving out those that need no election (Kafka's answer to a request
        without partitions)."""
        elect = self._preferred_election if command["preferred"] else self._unclean_election
        wanted = ([(name, index) for name, index, _state in self.partitions()] if command.get("all")
                  else [(str(name), int(index)) for name, index in command["partitions"]])
        results = []
        for name, index in wanted:
            try:
                elect(name, index)
                results.append([name, index, ErrorCode.NONE.value, None])
            except CommandRefused as exc:
                if not (command.get("all") and exc.code == ErrorCode.ELECTION_NOT_NEEDED):
                    results.append([name, index, exc.code.value, exc.message])
        return ok(results=results)

    def _existing_partition(self, name: str, index: int) -> PartitionState:
        state = self.partition(name, index)
        if state is None:
            raise CommandRefused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 no_such_partition_message(name, index, name in self.topics))
        return state

    def _barrier(self, command: Command) -> Result:
        return ok()

    def _set_raft_voter(self, command: Command) -> Result:
        self.raft_voters[int(command["node_id"])] = (str(command["address"]), bytes.fromhex(command["directory_id"]))
        return ok()

    def _topic(self, name: Any) -> TopicMetadata:
        topic = self.topics.get(str(name))
        if topic is None:
            raise CommandRefused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        return topic

    @staticmethod
    def _change_leader(state: PartitionState, leader: int) -> None:
        state.leader = leader
        state.leader_epoch += 1
        state.partition_epoch += 1

    _HANDLERS = {
        "register_broker": _register_broker,
        "fence_broker": _fence_broker,
        "unregister_broker": _unregister_broker,
        "create_topic": _create_topic,
        "delete_topic": _delete_topic,
        "create_partitions": _create_partitions,
        "alter_configs": _alter_configs,
        "alter_broker_configs": _alter_broker_configs,
        "create_acls": _create_acls,
        "delete_acls": _delete_acls,
        "alter_scram": _alter_scram,
        "alter_client_quotas": _alter_client_quotas,
        "change_isr": _change_isr,
        "elect_preferred": _elect_preferred,
        "elect_unclean": _elect_unclean,
        "elect_leaders": _elect_leaders,
        "alter_reassignment": _alter_reassignment,
        "barrier": _barrier,
        "set_raft_voter": _set_raft_voter,
    }

    # --- snapshots ---------------------------------------------------------------------------------------

    def to_snapshot(self) -> dict[str, Any]:
        """A JSON-able copy of the whole state (Raft log compaction, a new replica catching up)."""
        return {
            "assignment_cursor": self.assignment_cursor,
            "next_broker_epoch": self.next_broker_epoch,
            "broker_configs": copy.deepcopy(self.broker_configs),
            "brokers": [[b.node_id, b.host, b.port, b.rack, b.alive, copy.deepcopy(b.endpoints), b.epoch]
                        for b in self.brokers.values()],
            "acls": copy.deepcopy(self.acls),
            "scram": copy.deepcopy(self.scram),
            "client_quotas": copy.deepcopy(self.client_quotas),
            "raft_voters": {str(node_id): [address, directory_id.hex()]
                            for node_id, (address, directory_id) in self.raft_voters.items()},
            "topics": [{"name": t.name, "topic_id": t.topic_id.hex(), "configs": dict(t.configs),
                        "partitions": [[p.replicas, p.leader, p.leader_epoch, p.isr, p.partition_epoch,
                                        p.adding, p.removing] for p in t.partitions]}
                       for t in self.topics.values()],
        }

    @classmethod
    def from_snapshot(cls, snapshot: dict[str, Any]) -> ClusterMetadata:
        snapshot = copy.deepcopy(snapshot)
        metadata = cls()
        metadata.assignment_cursor = snapshot["assignment_cursor"]
        metadata.broker_configs = snapshot.get("broker_configs", {})  # absent from snapshots of older versions
        metadata.next_broker_epoch = snapshot.get("next_broker_epoch", 0)  # absent from older snapshots
        for node_id, host, port, rack, alive, *later in snapshot["brokers"]:  # older snapshots: no endpoints, epoch
            endpoints = later[0] if later else {}
            epoch = later[1] if len(later) > 1 else -1
            metadata.brokers[node_id] = BrokerRegistration(node_id, host, port, rack, alive, endpoints, epoch)
        metadata.acls = snapshot.get("acls", [])  # absent from snapshots of older versions
        metadata.scram = snapshot.get("scram", {})
        metadata.client_quotas = snapshot.get("client_quotas", {})  # absent from snapshots of older versions
        metadata.raft_voters = {int(node_id): (address, bytes.fromhex(directory_id))  # absent from older snapshots
                                for node_id, (address, directory_id) in snapshot.get("raft_voters", {}).items()}
        for topic in snapshot["topics"]:
            metadata.topics[topic["name"]] = TopicMetadata(
                topic["name"], bytes.fromhex(topic["topic_id"]),
                # older snapshots: no reassignments
                [PartitionState(replicas, leader, epoch, isr, partition_epoch, *reassignment)
                 for replicas, leader, epoch, isr, partition_epoch, *reassignment in topic["partitions"]],
                topic["configs"])
        return metadata
