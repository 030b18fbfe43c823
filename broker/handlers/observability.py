"""What operators' tools ask about the cluster: DescribeLogDirs (kafka-log-dirs), DescribeQuorum
(kafka-metadata-quorum), DescribeProducers (kafka-transactions describe-producers) and DescribeTopicPartitions
(kafka-topics --describe of Kafka 3.8+, KIP-966), answered as Kafka's broker answers them; and the quorum's voter
changes (kafka-metadata-quorum add-controller / remove-controller: AddRaftVoter, RemoveRaftVoter, KIP-853) and a
broker's registration dropped (kafka-cluster unregister: UnregisterBroker)."""

from __future__ import annotations

import os
import shutil
import time
from typing import Any, TypeVar, cast

import structlog

from broker.client import ClientError, KafkaConnection
from broker.cluster.raft import ProposalFailed, RaftNode
from broker.errors import ErrorCode, KafkaError
from broker.handlers.cluster_info import ZERO_UUID, operations_field
from broker.handlers.registry import RequestContext, handler
from broker.log.manager import validate_topic_name
from broker.protocol.api import ApiKey, ProtocolError
from broker.protocol.responses import (
    AddRaftVoterResponse,
    DescribeLogDirsResponse,
    DescribeLogDirsResponsePartition,
    DescribeLogDirsResponseTopic,
    DescribeProducersResponse,
    DescribeProducersResponsePartitionResponse,
    DescribeProducersResponseTopicResponse,
    DescribeQuorumResponse,
    DescribeQuorumResponseNode,
    DescribeQuorumResponsePartitionData,
    DescribeQuorumResponseReplicaState,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponseCursor,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
    RemoveRaftVoterResponse,
    UnregisterBrokerResponse,
)
from broker.protocol.types import uuid_text
from broker.security.acl import CLUSTER_NAME, Operation, ResourceType
from broker.topics import INTERNAL_TOPICS

log = structlog.get_logger("broker.observability")

# Kafka's name for the metadata log's partition, the one DescribeQuorum describes
METADATA_TOPIC = "__cluster_metadata"
# how our Raft's voters are reached, named as a listener in DescribeQuorum v2's node list
RAFT_LISTENER = "RAFT"
FORWARD_TIMEOUT = 10.0
VOTER_CHANGE_TIMEOUT = 15.0  # s: a voter change, a leadership hand-over before it included

_Answer = TypeVar("_Answer")


def _hosted(ctx: RequestContext, topic: str, partition: int) -> bool:
    """Whether this broker holds a replica of the partition (a cluster's brokers keep a log of every partition,
    but only the replicas' are written)."""
    return ctx.services.node_id in ctx.services.cluster.partition_leader(topic, partition)[2]


# --- DescribeLogDirs ---------------------------------------------------------------------------------------


@handler(ApiKey.DESCRIBE_LOG_DIRS)
async def describe_log_dirs(ctx: RequestContext, request: dict[str, Any]) -> DescribeLogDirsResponse:
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    logs = ctx.services.logs
    wanted: set[tuple[str, int]] | None = None
    if request["topics"] is not None:
        wanted = {(t["topic"], p) for t in request["topics"] for p in t["partitions"]}
    topics: list[DescribeLogDirsResponseTopic] = []
    for name, topic in sorted(logs.topics.items()):
        partitions: list[DescribeLogDirsResponsePartition] = []
        for index, plog in enumerate(topic.partitions):
            if (wanted is not None and (name, index) not in wanted) or not _hosted(ctx, name, index):
                continue
            # Kafka's lag of a current (not future) log: how far its end is behind its own high watermark
            lag = max(plog.high_watermark - plog.log_end_offset, 0)
            partitions.append({"partition_index": index, "partition_size": plog.size_bytes, "offset_lag": lag,
                               "is_future_key": False})
        if partitions:
            topics.append({"name": name, "partitions": partitions})
    log_dir = os.path.abspath(logs.data_dir)
    usage = shutil.disk_usage(log_dir)
    return {"throttle_time_ms": 0, "error_code": 0, "results": [
        {"error_code": 0, "log_dir": log_dir, "topics": topics, "total_bytes": usage.total,
         "usable_bytes": usage.free, "is_cordoned": False}]}


# --- DescribeProducers -------------------------------------------------------------------------------------


def _producers_of(ctx: RequestContext, name: str, index: int) -> DescribeProducersResponsePartitionResponse:
    answer: DescribeProducersResponsePartitionResponse = {"partition_index": index, "error_code": 0,
                                                          "error_message": None, "active_producers": []}
    topic = ctx.services.logs.topics.get(name)  # (deleted meanwhile by another thread's change: unknown)
    if topic is None or not 0 <= index < topic.partition_count:
        answer["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    elif not _hosted(ctx, name, index):
        answer["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
    else:
        answer["active_producers"] = [
            {"producer_id": entry.producer_id, "producer_epoch": entry.epoch, "last_sequence": entry.last_sequence,
             "last_timestamp": entry.last_timestamp, "coordinator_epoch": entry.coordinator_epoch,
             "current_txn_start_offset": start}
            for entry, start in topic.partitions[index].producer_state().active()]
    return answer


@handler(ApiKey.DESCRIBE_PRODUCERS)
async def describe_producers(ctx: RequestContext, request: dict[str, Any]) -> DescribeProducersResponse:
    topics: list[DescribeProducersResponseTopicResponse] = []
    for wanted in request["topics"]:
        name = wanted["name"]
        error, message = ErrorCode.NONE, None
        try:
            validate_topic_name(name)
        except KafkaError as exc:
            error, message = exc.code, exc.message
        else:
            # Kafka names these errors with its default messages
            if not ctx.allowed(Operation.READ, ResourceType.TOPIC, name):
                error, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
            elif name not in ctx.services.logs.topics:
                error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        partitions: list[DescribeProducersResponsePartitionResponse]
        if error != ErrorCode.NONE:
            partitions = [{"partition_index": index, "error_code": error, "error_message": message,
                           "active_producers": []} for index in wanted["partition_indexes"]]
        else:
            partitions = [_producers_of(ctx, name, index) for index in wanted["partition_indexes"]]
        topics.append({"name": name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


# --- DescribeTopicPartitions -------------------------------------------------------------------------------


def _partition_entries(ctx: RequestContext, name: str, count: int, start: int, most: int,
                       live: frozenset[int]) -> tuple[list[DescribeTopicPartitionsResponsePartition], int]:
    """The partitions of a topic of ``count`` partitions from ``start``, at most ``most`` of them, and the index
    of the first left out (-1 when none was)."""
    upper = min(count, start + most)
    entries: list[DescribeTopicPartitionsResponsePartition] = []
    for index in range(start, upper):
        leader, epoch, replicas, isr = ctx.services.cluster.partition_leader(name, index)
        entries.append({"error_code": 0, "partition_index": index, "leader_id": leader if leader in live else -1,
                        "leader_epoch": epoch, "replica_nodes": replicas, "isr_nodes": isr,
                        "eligible_leader_replicas": [], "last_known_elr": [],
                        "offline_replicas": [r for r in replicas if r not in live]})
    return entries, upper if upper < count else -1


def _unknown_topic(name: str) -> DescribeTopicPartitionsResponseTopic:
    try:
        validate_topic_name(name)
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except KafkaError:
        error = ErrorCode.INVALID_TOPIC_EXCEPTION
    return {"error_code": error, "name": name, "topic_id": ZERO_UUID, "is_internal": name in INTERNAL_TOPICS,
            "partitions": []}


@handler(ApiKey.DESCRIBE_TOPIC_PARTITIONS)
async def describe_topic_partitions(ctx: RequestContext, request: dict[str, Any]) -> DescribeTopicPartitionsResponse:
    services = ctx.services
    every = not request["topics"]
    cursor = request["cursor"]
    after = cursor["topic_name"] if cursor is not None else ""
    names = set(services.logs.topics) if every else {t["name"] for t in request["topics"]}
    names = {name for name in names if name >= after}
    if (cursor is not None and not every and cursor["topic_name"] not in names) or (
            cursor is not None and cursor["partition_index"] < 0):
        # Kafka refuses the request: the cursor must name a listed topic and a partition index
        return {"throttle_time_ms": 0, "next_cursor": None, "topics": [
            {"error_code": ErrorCode.INVALID_REQUEST, "name": t["name"], "topic_id": ZERO_UUID, "is_internal": False,
             "partitions": []}
            for t in request["topics"]]}
    live = frozenset(node_id for node_id, *_ in ctx.services.cluster.live_brokers())
    remaining = max(min(services.config["max.request.partition.size.limit"], request["response_partition_limit"]), 1)
    topics: list[DescribeTopicPartitionsResponseTopic] = []
    refused: list[DescribeTopicPartitionsResponseTopic] = []
    next_cursor: DescribeTopicPartitionsResponseCursor | None = None
    for name in sorted(names):
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name):
            # asked for by name: refused, without saying whether it exists; asked for all: left out
            if not every:
                refused.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name,
                                "topic_id": ZERO_UUID, "is_internal": False, "partitions": []})
            continue
        if remaining == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        topic = services.logs.topics.get(name)
        if topic is None:
            if not every:
                topics.append(_unknown_topic(name))
            continue
        start = cursor["partition_index"] if cursor is not None and name == after else 0
        partitions, left_out = _partition_entries(ctx, name, topic.partition_count, start, remaining, live)
        topics.append({"error_code": 0, "name": name, "topic_id": topic.topic_id or ZERO_UUID,
                       "is_internal": name in INTERNAL_TOPICS, "partitions": partitions,
                       "topic_authorized_operations": operations_field(ctx, True, ResourceType.TOPIC, name)})
        if left_out >= 0:
            next_cursor = {"topic_name": name, "partition_index": left_out}
            break
        remaining -= len(partitions)
    return {"throttle_time_ms": 0, "topics": topics + refused, "next_cursor": next_cursor}


# --- DescribeQuorum ----------------------------------------------------------------------------------------


def _quorum_error(request: dict[str, Any], error: ErrorCode) -> DescribeQuorumResponse:
    """Kafka's answer naming the error at each partition asked for (the rest at the zero values Kafka's own
    error answer leaves them at)."""
    return {"error_code": 0, "error_message": None, "nodes": [], "topics": [
        {"topic_name": t["topic_name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": error, "error_message": None, "leader_id": 0,
             "leader_epoch": 0, "high_watermark": 0, "current_voters": [], "observers": []}
            for p in t["partitions"]]} for t in request["topics"]]}


def _asks_for_metadata_log(request: dict[str, Any]) -> bool:
    topics = request["topics"]
    return (len(topics) == 1 and topics[0]["topic_name"] == METADATA_TOPIC and len(topics[0]["partitions"]) == 1
            and topics[0]["partitions"][0]["partition_index"] == 0)


@handler(ApiKey.DESCRIBE_QUORUM)
async def describe_quorum(ctx: RequestContext, request: dict[str, Any]) -> DescribeQuorumResponse:
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "nodes": [],
                "topics": []}
    if not _asks_for_metadata_log(request):
        return _quorum_error(request, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    # only a cluster's brokers advertise this API (broker.CLUSTER_VERSIONS), so a request gets here only there
    raft = ctx.services.cluster.quorum
    assert raft is not None
    state = raft.quorum_state()
    leader_id = None if state is None else state.leader_id
    if leader_id != raft.node_id:
        if ctx.peer_broker is not None:
            # forwarded once only, as Kafka's controller answers a forwarded request itself: brokers whose views
            # of the leader differ during an election must not pass it back and forth
            return _quorum_error(request, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        # as Kafka's brokers forward it to the active controller: only the leader knows its voters' progress
        return await _forward_to_leader(ctx, request, leader_id,
                                        _quorum_error(request, ErrorCode.NOT_LEADER_OR_FOLLOWER))
    assert state is not None
    now_ms = int(time.time() * 1000)
    voters: list[DescribeQuorumResponseReplicaState] = []
    for node_id, log_end in sorted(state.log_ends.items()):
        leader = node_id == raft.node_id
        voters.append({"replica_id": node_id, "replica_directory_id": ctx.services.cluster.voter_directory_id(node_id),
                       "log_end_offset": log_end,
                       # pysyncobj keeps no fetch times of its followers: unknown (-1), as Kafka says of a voter
                       "last_fetch_timestamp": now_ms if leader else -1,
                       "last_caught_up_timestamp": now_ms if leader else -1})
    addresses = raft.voters()
    nodes: list[DescribeQuorumResponseNode] = []
    for node_id, address in sorted(addresses.items()):
        host, _, port = address.rpartition(":")
        nodes.append({"node_id": node_id, "listeners": [{"name": RAFT_LISTENER, "host": host, "port": int(port)}]})
    # no error is an empty message in Kafka's answer (v2), not a null one
    partition: DescribeQuorumResponsePartitionData = {
        "partition_index": 0, "error_code": 0, "error_message": "", "leader_id": raft.node_id,  # this broker leads (checked above)
        "leader_epoch": state.term, "high_watermark": state.high_watermark, "current_voters": voters,
        "observers": []}
    return {"error_code": 0, "error_message": "", "nodes": nodes,
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}]}


async def _forward_to_leader(ctx: RequestContext, request: dict[str, Any], leader_id: int | None,
                             unreachable: _Answer, timeout: float = FORWARD_TIMEOUT) -> _Answer:
    """The Raft leader's answer to the request; ``unreachable`` when it cannot be asked.

    With no leader known here (a broker removed from the voters no longer follows the quorum, nor does one that
    lost it) the other live brokers are asked in turn: a follower refuses a forwarded request, the leader answers
    it. Refused here instead, an admin client that has this broker's connection open would pick it for every
    retry of its call until the call timed out, as Kafka's tools do (they prefer a node already connected)."""
    services = ctx.services
    addresses = {node_id: (host, port)
                 for node_id, host, port, _ in ctx.services.cluster.live_brokers(services.config.inter_broker_listener)}
    candidates = [leader_id] if leader_id is not None else sorted(set(addresses) - {services.node_id})
    for candidate in candidates:
        address = addresses.get(candidate)
        if address is None:
            continue
        try:
            async with await KafkaConnection.connect(
                    f"{address[0]}:{address[1]}", timeout=timeout, security=services.config.inter_broker_security,
                    broker_credential=services.replicas.replication.broker_credential()) as connection:
                answer = await connection.request(ctx.api_key, request, version=ctx.api_version)
        except (TimeoutError, OSError, ProtocolError, ClientError) as exc:
            log.warning("forwarding to the Raft leader failed", api=ApiKey(ctx.api_key).name, leader=candidate,
                        error=str(exc))
            continue
        if leader_id is not None or not _not_leader(answer):
            # decoded from the same API and version as the request: the fields of the answer this broker gives
            return cast(_Answer, answer)
    return unreachable


def _not_leader(answer: dict[str, Any]) -> bool:
    """Whether a forwarded request was refused for not reaching the Raft leader (at the top or, in
    DescribeQuorum's answer, at its partition)."""
    codes = [answer.get("error_code")] + [partition["error_code"] for topic in answer.get("topics", [])
                                          for partition in topic["partitions"]]
    return ErrorCode.NOT_LEADER_OR_FOLLOWER in codes


# --- AddRaftVoter, RemoveRaftVoter (KIP-853) ---------------------------------------------------------------


def _change_answer(error: ErrorCode, message: str | None = None) -> AddRaftVoterResponse:
    # RemoveRaftVoter's and UnregisterBroker's answers have the same fields, so this serves all three
    return {"throttle_time_ms": 0, "error_code": error, "error_message": message}


def _quorum(ctx: RequestContext) -> RaftNode:
    # only a cluster's brokers advertise the voter changes (broker.CLUSTER_VERSIONS), so a request gets here only
    # where there is a quorum
    raft = ctx.services.cluster.quorum
    assert raft is not None
    return raft


async def _at_raft_leader(ctx: RequestContext, request: dict[str, Any]) -> AddRaftVoterResponse | None:
    """The answer of a request this broker does not handle itself (refused, or the Raft leader's), or None when
    it is the leader and handles it: as Kafka's brokers forward these to the active controller."""
    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return _change_answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if request["cluster_id"] is not None and request["cluster_id"] != ctx.services.cluster_id:
        return _change_answer(ErrorCode.INCONSISTENT_CLUSTER_ID,
                              f"this cluster's id is {ctx.services.cluster_id}, not {request['cluster_id']}")
    raft = _quorum(ctx)
    if raft.leader_id != raft.node_id and ctx.peer_broker is not None:
        return _change_answer(ErrorCode.NOT_LEADER_OR_FOLLOWER, "this broker is not the Raft leader")
    if raft.leader_id != raft.node_id:
        return await _forward_to_leader(ctx, request, raft.leader_id,
                                        _change_answer(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                                        timeout=VOTER_CHANGE_TIMEOUT + FORWARD_TIMEOUT)
    return None


@handler(ApiKey.ADD_RAFT_VOTER)
async def add_raft_voter(ctx: RequestContext, request: dict[str, Any]) -> AddRaftVoterResponse:
    answer = await _at_raft_leader(ctx, request)
    if answer is not None:
        return answer
    raft = _quorum(ctx)
    voter_id = request["voter_id"]
    # as Kafka's quorum: a new voter has a directory id, and an endpoint on the voters' listener
    if request["voter_directory_id"] == ZERO_UUID:
        return _change_answer(ErrorCode.INVALID_REQUEST, "Add voter request didn't include a valid voter")
    listener = next((entry for entry in request["listeners"] if entry["name"] == RAFT_LISTENER), None)
    if listener is None:
        return _change_answer(ErrorCode.INVALID_REQUEST, "Add voter request didn't include the endpoint for the "
                              f"default listener {RAFT_LISTENER} (the new voter's Raft address)")
    if voter_id in raft.voters():
        return _change_answer(ErrorCode.DUPLICATE_VOTER, f"broker {voter_id} is already a voter")
    if not ctx.services.cluster.seen_alive(voter_id):
        # the new voter must be running with the voters as its peers, else the quorum would wait for a voter
        # that is not there (Kafka too refuses a voter that is not replicating yet)
        return _change_answer(ErrorCode.REQUEST_TIMED_OUT, f"broker {voter_id} is not seen alive: start it "
                              "first, with cluster.raft.join and the voters as its peers")
    address = f"{listener['host']}:{listener['port']}"
    try:
        await raft.propose({"op": "set_raft_voter", "node_id": voter_id, "address": address,
                            "directory_id": request["voter_directory_id"].hex()}, VOTER_CHANGE_TIMEOUT)
        # v1's AckWhenCommitted false: answered once the leader has the new voter set, before its commit
        await raft.add_voter(voter_id, address, VOTER_CHANGE_TIMEOUT, committed=request["ack_when_committed"])
    except ProposalFailed as exc:
        return _change_answer(ErrorCode.REQUEST_TIMED_OUT, f"the voter set did not change: {exc}")
    log.info("raft voter added", voter_id=voter_id, address=address)
    return _change_answer(ErrorCode.NONE)


@handler(ApiKey.REMOVE_RAFT_VOTER)
async def remove_raft_voter(ctx: RequestContext, request: dict[str, Any]) -> RemoveRaftVoterResponse:
    answer = await _at_raft_leader(ctx, request)
    if answer is not None:
        return answer
    raft = _quorum(ctx)
    voter_id = request["voter_id"]
    voters = raft.voters()
    if voter_id not in voters or request["voter_directory_id"] != ctx.services.cluster.voter_directory_id(voter_id):
        return _change_answer(ErrorCode.VOTER_NOT_FOUND, f"no voter {voter_id} with directory id "
                              f"{uuid_text(request['voter_directory_id'])}")
    if len(voters) == 1:
        return _change_answer(ErrorCode.INVALID_REQUEST, "the last voter cannot leave the quorum")
    try:
        if voter_id == raft.node_id:
            # the leader leaving: another voter leads first, and removes it
            new_leader = await raft.hand_over_leadership(VOTER_CHANGE_TIMEOUT)
            return await _forward_to_leader(ctx, request, new_leader,
                                            _change_answer(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                                            timeout=VOTER_CHANGE_TIMEOUT + FORWARD_TIMEOUT)
        await raft.remove_voter(voter_id, VOTER_CHANGE_TIMEOUT)
    except ProposalFailed as exc:
        return _change_answer(ErrorCode.REQUEST_TIMED_OUT, f"the voter set did not change: {exc}")
    log.info("raft voter removed", voter_id=voter_id)
    return _change_answer(ErrorCode.NONE)


# --- UnregisterBroker (kafka-cluster unregister) -----------------------------------------------------------


@handler(ApiKey.UNREGISTER_BROKER)
async def unregister_broker(ctx: RequestContext, request: dict[str, Any]) -> UnregisterBrokerResponse:
    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return _change_answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        await ctx.services.cluster.unregister_broker(request["broker_id"])
    except KafkaError as exc:
        return _change_answer(exc.code, exc.message)
    log.info("broker unregistered", broker_id=request["broker_id"])
    return _change_answer(ErrorCode.NONE)
