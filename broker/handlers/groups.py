"""Consumer groups on the wire: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, ListGroups, DescribeGroups, DeleteGroups and OffsetDelete.

These handlers translate between request/response bodies and the group coordinator
(:mod:`broker.groups.coordinator`), honouring what each version means:

* FindCoordinator v4+ batches ``coordinator_keys``; older versions ask for one ``key``. Key type 0 asks
  for a group's coordinator, 1 for a transactional id's: the leader of the key's partition of
  `__consumer_offsets` or `__transaction_state`. A cluster's first transactional lookup has the controller
  create `__transaction_state` (COORDINATOR_NOT_AVAILABLE until it exists), as Kafka's does.
* JoinGroup v0 has no rebalance timeout (the session timeout serves as both); from v4 a dynamic member
  without an id is first given one with MEMBER_ID_REQUIRED; v5 adds static membership; v7 returns the
  protocol type and a nullable protocol name.
* LeaveGroup v3+ removes a batch of members; v0-2 one member, whose error is the top-level error.
* OffsetCommit v1 may carry a commit timestamp, v2-4 a retention time, v6+ a leader epoch, v7+ an
  instance id; generation -1 with no member id is a standalone commit. All versions (v0 included, which
  Kafka once kept in ZooKeeper) store into `__consumer_offsets`.
* OffsetFetch v8 asks for several groups (``groups``); older versions for one. Null topics (v2+) mean
  every committed offset of the group; an offset never committed is -1 with no error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from broker.cluster.view import committed_leader
from broker.config import parse_rebalance_protocols
from broker.errors import ErrorCode
from broker.groups.consumer import HeartbeatRequest
from broker.groups.coordinator import OFFSETS_TOPIC, GroupCoordinator
from broker.groups.offsets import TopicPartition
from broker.groups.requests import CommitRequest, JoinRequest, PartitionCommit, SyncRequest
from broker.handlers.cluster_info import operations_field
from broker.handlers.registry import RequestContext, handler
from broker.protocol.api import ApiKey
from broker.protocol.consumer_offsets import NO_LEADER_EPOCH, OffsetAndMetadata
from broker.protocol.responses import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupDescribeResponseDescribedGroup,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatResponseAssignment,
    DeleteGroupsResponse,
    DescribeGroupsResponse,
    DescribeGroupsResponseDescribedGroup,
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListGroupsResponse,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
    SyncGroupResponse,
)
from broker.security.acl import CLUSTER_NAME, Operation, ResourceType
from broker.topics import TRANSACTIONS_TOPIC

COORDINATOR_KEY_GROUP = 0
COORDINATOR_KEY_TRANSACTION = 1
NO_OFFSET = -1

_Partition = TypeVar("_Partition")


def group_allowed(ctx: RequestContext, operation: Operation, group_id: str) -> bool:
    return ctx.allowed(operation, ResourceType.GROUP, group_id)


def topic_allowed(ctx: RequestContext, operation: Operation, topic: str) -> bool:
    return ctx.allowed(operation, ResourceType.TOPIC, topic)


def _coordinator(ctx: RequestContext) -> GroupCoordinator:
    groups = ctx.services.groups
    assert groups is not None, "made by the broker's start, before it serves"
    return groups


def _client_host(ctx: RequestContext) -> str:
    """As Kafka shows it (InetAddress.toString): a slash, then the address."""
    return "/" + ctx.client_host


def partition_exists(ctx: RequestContext, topic: str, partition: int) -> bool:
    return ctx.services.logs.get_log(topic, partition) is not None


def by_topic(entries: Iterable[tuple[str, _Partition]]) -> dict[str, list[_Partition]]:
    """Partition entries grouped under their topic, in first-seen order."""
    topics: dict[str, list[_Partition]] = {}
    for topic, entry in entries:
        topics.setdefault(topic, []).append(entry)
    return topics


def partition_errors(requested: Iterable[TopicPartition],
                     errors: Callable[[TopicPartition], ErrorCode]) -> list[OffsetCommitResponseTopic]:
    """The topics of an answer whose partitions carry only an error code: OffsetCommit's, and TxnOffsetCommit's
    and OffsetDelete's, whose generated types have the same fields (a TypedDict is matched by its fields)."""
    partitions = by_topic((tp[0], OffsetCommitResponsePartition(partition_index=tp[1], error_code=errors(tp)))
                          for tp in requested)
    return [{"name": name, "partitions": found} for name, found in partitions.items()]


# --- FindCoordinator ----------------------------------------------------------------------------------------

def _find_one(ctx: RequestContext, key: str, key_type: int) -> FindCoordinatorResponseCoordinator:
    def error(code: ErrorCode, message: str) -> FindCoordinatorResponseCoordinator:
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": code, "error_message": message}

    if key_type == COORDINATOR_KEY_TRANSACTION:
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            return error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactional Id authorization failed.")
        transactions = ctx.services.transactions
        if ctx.services.logs.topics.get(TRANSACTIONS_TOPIC) is None:
            if not transactions.clustered:  # a single node makes it with the first transactional record
                return _this_broker(ctx, key)
            transactions.request_topic()
            return error(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{TRANSACTIONS_TOPIC} is being created")
        return _leader_of(ctx, key, TRANSACTIONS_TOPIC, transactions.partition_for(key), error)
    if key_type != COORDINATOR_KEY_GROUP:
        return error(ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}")
    if not group_allowed(ctx, Operation.DESCRIBE, key):
        return error(ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
    return _leader_of(ctx, key, OFFSETS_TOPIC, _coordinator(ctx).partition_for(key), error)


def _leader_of(ctx: RequestContext, key: str, topic: str, partition: int,
               error: Callable[[ErrorCode, str], FindCoordinatorResponseCoordinator]) -> FindCoordinatorResponseCoordinator:
    """The coordinator of a key: the leader of its partition of a coordinator topic, at the client's listener."""
    if not ctx.services.cluster.in_quorum:
        # its metadata is stale: the leader it knows may have been fenced (itself among them)
        return error(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"broker {ctx.services.node_id} is cut off from the "
                     "metadata quorum")
    found = _node_answer(ctx, key, committed_leader(ctx.services.cluster, topic, partition))
    return found or error(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic}-{partition} has no live leader known here")


def _this_broker(ctx: RequestContext, key: str) -> FindCoordinatorResponseCoordinator:
    found = _node_answer(ctx, key, ctx.services.node_id)
    assert found is not None, "a single node is always live"
    return found


def _node_answer(ctx: RequestContext, key: str, node: int) -> FindCoordinatorResponseCoordinator | None:
    """A FindCoordinator answer naming ``node`` at the client's listener, or None if it is not live."""
    for node_id, host, port, _rack in ctx.services.cluster.live_brokers(ctx.listener):
        if node_id == node:
            return {"key": key, "node_id": node_id, "host": host, "port": port, "error_code": ErrorCode.NONE,
                    "error_message": ""}
    return None


@handler(ApiKey.FIND_COORDINATOR)
async def find_coordinator(ctx: RequestContext, request: dict[str, Any]) -> FindCoordinatorResponse:
    key_type = request["key_type"] if ctx.api_version >= 1 else COORDINATOR_KEY_GROUP
    if ctx.api_version >= 4:
        return {"throttle_time_ms": 0,
                "coordinators": [_find_one(ctx, key, key_type) for key in request["coordinator_keys"]]}
    found = _find_one(ctx, request["key"], key_type)
    # Kafka's v1-3 answers carry the error's name when all went well
    message = found["error_message"] or ErrorCode(found["error_code"]).name
    return {"throttle_time_ms": 0, "error_code": found["error_code"], "error_message": message,
            "node_id": found["node_id"], "host": found["host"], "port": found["port"]}


# --- membership -------------------------------------------------------------------------------------------

@handler(ApiKey.JOIN_GROUP)
async def join_group(ctx: RequestContext, request: dict[str, Any]) -> JoinGroupResponse:
    version = ctx.api_version
    if not group_allowed(ctx, Operation.READ, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "generation_id": -1,
                "protocol_type": None, "protocol_name": None if version >= 7 else "", "leader": "",
                "member_id": request["member_id"], "members": []}
    instance_id = request["group_instance_id"] if version >= 5 else None
    result = await _coordinator(ctx).join_group(JoinRequest(
        group_id=request["group_id"],
        member_id=request["member_id"],
        group_instance_id=instance_id,
        client_id=ctx.client_id or "",
        client_host=_client_host(ctx),
        session_timeout_ms=request["session_timeout_ms"],
        rebalance_timeout_ms=request["rebalance_timeout_ms"] if version >= 1 else request["session_timeout_ms"],
        protocol_type=request["protocol_type"],
        protocols=tuple((p["name"], bytes(p["metadata"])) for p in request["protocols"]),
        require_known_member_id=version >= 4 and instance_id is None,
    ))
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        # Before v7 the protocol name is not nullable: "" when there is none.
        "protocol_name": result.protocol_name if version >= 7 else result.protocol_name or "",
        "leader": result.leader_id,
        "member_id": result.member_id,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
                    for m in result.members],
    }


@handler(ApiKey.SYNC_GROUP)
async def sync_group(ctx: RequestContext, request: dict[str, Any]) -> SyncGroupResponse:
    version = ctx.api_version
    if not group_allowed(ctx, Operation.READ, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "protocol_type": None,
                "protocol_name": None, "assignment": b""}
    result = await _coordinator(ctx).sync_group(SyncRequest(
        group_id=request["group_id"],
        generation_id=request["generation_id"],
        member_id=request["member_id"],
        group_instance_id=request["group_instance_id"] if version >= 3 else None,
        assignments={a["member_id"]: bytes(a["assignment"]) for a in request["assignments"]},
        protocol_type=request["protocol_type"] if version >= 5 else None,
        protocol_name=request["protocol_name"] if version >= 5 else None,
    ))
    return {"throttle_time_ms": 0, "error_code": result.error, "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name, "assignment": result.assignment}


@handler(ApiKey.HEARTBEAT)
async def heartbeat(ctx: RequestContext, request: dict[str, Any]) -> HeartbeatResponse:
    if not group_allowed(ctx, Operation.READ, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    error = _coordinator(ctx).heartbeat(request["group_id"], request["member_id"],
                                        request["group_instance_id"] if ctx.api_version >= 3 else None,
                                        request["generation_id"])
    return {"throttle_time_ms": 0, "error_code": error}


@handler(ApiKey.LEAVE_GROUP)
async def leave_group(ctx: RequestContext, request: dict[str, Any]) -> LeaveGroupResponse:
    if not group_allowed(ctx, Operation.READ, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "members": []}
    if ctx.api_version >= 3:
        leaving = [(m["member_id"], m["group_instance_id"]) for m in request["members"]]
    else:
        leaving = [(request["member_id"], None)]
    error, member_errors = _coordinator(ctx).leave_group(request["group_id"], leaving)
    if ctx.api_version < 3:
        if error == ErrorCode.NONE and member_errors:
            error = member_errors[0]
        return {"throttle_time_ms": 0, "error_code": error}
    return {"throttle_time_ms": 0, "error_code": error,
            "members": [{"member_id": member_id, "group_instance_id": instance_id, "error_code": member_error}
                        for (member_id, instance_id), member_error in zip(leaving, member_errors, strict=False)]}


# --- offsets ---------------------------------------------------------------------------------------------

def requested_commits(ctx: RequestContext, topics: list[dict[str, Any]], *, leader_epoch: bool,
                      timestamp: bool = False
                      ) -> tuple[list[TopicPartition], dict[TopicPartition, ErrorCode],
                                 dict[TopicPartition, PartitionCommit]]:
    """An OffsetCommit's or TxnOffsetCommit's partitions: all in request order, the errors of those that
    cannot be committed (topics the principal may not read, unknown topics or partitions) and the commits
    of the others (``leader_epoch``/``timestamp``: the version carries them)."""
    requested: list[TopicPartition] = []
    refused: dict[TopicPartition, ErrorCode] = {}
    commits: dict[TopicPartition, PartitionCommit] = {}
    for topic in topics:
        readable = topic_allowed(ctx, Operation.READ, topic["name"])
        for p in topic["partitions"]:
            tp = (topic["name"], p["partition_index"])
            requested.append(tp)
            if not readable:
                refused[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if not partition_exists(ctx, *tp):
                refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            commits[tp] = PartitionCommit(
                offset=p["committed_offset"],
                leader_epoch=p["committed_leader_epoch"] if leader_epoch else NO_LEADER_EPOCH,
                metadata=p["committed_metadata"],
                commit_timestamp=p["commit_timestamp"] if timestamp else -1,
            )
    return requested, refused, commits


@handler(ApiKey.OFFSET_COMMIT)
async def offset_commit(ctx: RequestContext, request: dict[str, Any]) -> OffsetCommitResponse:
    version = ctx.api_version
    requested, refused, commits = requested_commits(ctx, request["topics"], leader_epoch=version >= 6,
                                                    timestamp=version == 1)
    errors: dict[TopicPartition, ErrorCode] = dict(refused)
    if not group_allowed(ctx, Operation.READ, request["group_id"]):
        errors = dict.fromkeys(requested, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    elif commits:
        errors |= await _coordinator(ctx).commit_offsets(CommitRequest(
            group_id=request["group_id"],
            generation_id=request["generation_id_or_member_epoch"] if version >= 1 else -1,
            member_id=request["member_id"] if version >= 1 else "",
            group_instance_id=request["group_instance_id"] if version >= 7 else None,
            offsets=commits,
            retention_time_ms=request["retention_time_ms"] if 2 <= version <= 4 else -1,
        ))
    return {"throttle_time_ms": 0, "topics": partition_errors(requested, errors.__getitem__)}


def _fetched(partition: int, offset: OffsetAndMetadata | None,
             error: ErrorCode = ErrorCode.NONE) -> OffsetFetchResponsePartition:
    if offset is None:
        return {"partition_index": partition, "committed_offset": NO_OFFSET, "committed_leader_epoch": NO_LEADER_EPOCH, "metadata": "",
                "error_code": error}
    return {"partition_index": partition, "committed_offset": offset.offset, "committed_leader_epoch": offset.leader_epoch,
            "metadata": offset.metadata, "error_code": error}


def _fetch_group(ctx: RequestContext, group_id: str, topics: list[dict[str, Any]] | None,
                 require_stable: bool = False) -> tuple[ErrorCode, list[OffsetFetchResponseTopic]]:
    # OffsetFetch v9 carries the fetching member's id and epoch (KIP-848); offsets are readable by anyone
    # here, as Kafka lets admin clients read them, so they are not checked.
    """``require_stable`` (v7+, read_committed consumers): a partition with an offset of a transaction still
    open answers UNSTABLE_OFFSET_COMMIT, and the client asks again."""
    wanted = None if topics is None else [(t["name"], index) for t in topics for index in t["partition_indexes"]]
    if not group_allowed(ctx, Operation.DESCRIBE, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, _fetched_topics(
            (tp[0], _fetched(tp[1], None, ErrorCode.GROUP_AUTHORIZATION_FAILED)) for tp in wanted or [])
    error, offsets = _coordinator(ctx).fetch_offsets(group_id, wanted)
    if error != ErrorCode.NONE:
        return error, _fetched_topics((tp[0], _fetched(tp[1], None, error)) for tp in wanted or [])
    unstable = _coordinator(ctx).unstable_offsets(group_id) if require_stable else set()
    described = {topic: topic_allowed(ctx, Operation.DESCRIBE, topic) for topic, _ in offsets}
    entries: list[tuple[str, OffsetFetchResponsePartition]] = []
    for (topic, partition), offset in offsets.items():
        if not described[topic]:
            if wanted is not None:  # asked for by name: refused; else the topic is left out, as Kafka does
                entries.append((topic, _fetched(partition, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)))
            continue
        entries.append((topic, _fetched(partition, None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
                        if (topic, partition) in unstable else _fetched(partition, offset)))
    return error, _fetched_topics(entries)


def _fetched_topics(entries: Iterable[tuple[str, OffsetFetchResponsePartition]]) -> list[OffsetFetchResponseTopic]:
    # v8's OffsetFetchResponseTopics has the same fields as OffsetFetchResponseTopic, so these serve both
    return [{"name": name, "partitions": partitions} for name, partitions in by_topic(entries).items()]


@handler(ApiKey.OFFSET_FETCH)
async def offset_fetch(ctx: RequestContext, request: dict[str, Any]) -> OffsetFetchResponse:
    if ctx.api_version >= 8:
        groups: list[OffsetFetchResponseGroup] = []
        for group in request["groups"]:
            error, entries = _fetch_group(ctx, group["group_id"], group["topics"], request["require_stable"])
            groups.append({"group_id": group["group_id"], "error_code": error,
                           "topics": [] if error != ErrorCode.NONE else entries})
        return {"throttle_time_ms": 0, "groups": groups}
    error, entries = _fetch_group(ctx, request["group_id"], request["topics"],
                                  ctx.api_version >= 7 and request["require_stable"])
    if ctx.api_version < 2:
        # No top-level error before v2: each partition carries the group's error.
        return {"throttle_time_ms": 0, "topics": entries}
    return {"throttle_time_ms": 0, "error_code": error,
            "topics": [] if error != ErrorCode.NONE else entries}


@handler(ApiKey.OFFSET_DELETE)
async def offset_delete(ctx: RequestContext, request: dict[str, Any]) -> OffsetDeleteResponse:
    if not group_allowed(ctx, Operation.DELETE, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "topics": []}
    requested = [(t["name"], p["partition_index"]) for t in request["topics"] for p in t["partitions"]]
    refused = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in requested
               if not topic_allowed(ctx, Operation.READ, tp[0])}
    refused |= {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in requested
                if tp not in refused and not partition_exists(ctx, *tp)}
    error, deleted = await _coordinator(ctx).delete_offsets(
        request["group_id"], [tp for tp in requested if tp not in refused])
    if error != ErrorCode.NONE:
        return {"throttle_time_ms": 0, "error_code": error, "topics": []}
    return {"throttle_time_ms": 0, "error_code": error, "topics": partition_errors(
        requested, lambda tp: refused.get(tp) or deleted[tp])}


# --- admin -----------------------------------------------------------------------------------------------

@handler(ApiKey.LIST_GROUPS)
async def list_groups(ctx: RequestContext, request: dict[str, Any]) -> ListGroupsResponse:
    """v5+ (KIP-848) tells classic groups from consumer-protocol ones ("classic", "consumer") and filters by it."""
    states = request["states_filter"] if ctx.api_version >= 4 else []
    types = {kind.lower() for kind in request["types_filter"]} if ctx.api_version >= 5 else set()
    error, listings = _coordinator(ctx).list_groups(states)
    # DESCRIBE on the cluster lists every group; else the groups the principal may describe
    everything = ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
    return {"throttle_time_ms": 0, "error_code": error,
            "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state,
                        "group_type": g.group_type} for g in listings if (not types or g.group_type in types)
                       and (everything or group_allowed(ctx, Operation.DESCRIBE, g.group_id))]}


@handler(ApiKey.DESCRIBE_GROUPS)
async def describe_groups(ctx: RequestContext, request: dict[str, Any]) -> DescribeGroupsResponse:
    include_operations = ctx.api_version >= 3 and request["include_authorized_operations"]
    described: list[DescribeGroupsResponseDescribedGroup] = []
    for group_id in request["groups"]:
        if not group_allowed(ctx, Operation.DESCRIBE, group_id):
            described.append({"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "group_id": group_id,
                              "group_state": "", "protocol_type": "", "protocol_data": "", "members": [],
                              "authorized_operations": operations_field(ctx, False, ResourceType.GROUP, group_id)})
            continue
        error, group = _coordinator(ctx).describe_group(group_id)
        described.append({
            "error_code": error,
            "group_id": group_id,
            "group_state": group.state,
            "protocol_type": group.protocol_type,
            "protocol_data": group.protocol_name,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host, "member_metadata": m.metadata,
                         "member_assignment": m.assignment} for m in group.members],
            "authorized_operations": operations_field(ctx, include_operations, ResourceType.GROUP, group_id),
        })
    return {"throttle_time_ms": 0, "groups": described}


@handler(ApiKey.DELETE_GROUPS)
async def delete_groups(ctx: RequestContext, request: dict[str, Any]) -> DeleteGroupsResponse:
    names = list(dict.fromkeys(request["groups_names"]))
    allowed = [name for name in names if group_allowed(ctx, Operation.DELETE, name)]
    results = await _coordinator(ctx).delete_groups(allowed) if allowed else {}
    return {"throttle_time_ms": 0, "results": [
        {"group_id": name, "error_code": results.get(name, ErrorCode.GROUP_AUTHORIZATION_FAILED)} for name in names]}


# --- the consumer group protocol (KIP-848) ------------------------------------------------------------------


def _consumer_protocol_enabled(ctx: RequestContext) -> bool:
    """Whether group.coordinator.rebalance.protocols lists ``consumer``: without it Kafka answers KIP-848's APIs
    UNSUPPORTED_VERSION (while ApiVersions still lists them, as Kafka's does)."""
    return "consumer" in parse_rebalance_protocols(ctx.services.config["group.coordinator.rebalance.protocols"])

@handler(ApiKey.CONSUMER_GROUP_HEARTBEAT)
async def consumer_group_heartbeat(ctx: RequestContext, request: dict[str, Any]) -> ConsumerGroupHeartbeatResponse:
    refused = None
    if not _consumer_protocol_enabled(ctx):
        # Kafka's answer, before any authorization: no member id, epoch 0
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNSUPPORTED_VERSION, "error_message": None,
                "member_id": None, "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}
    if not group_allowed(ctx, Operation.READ, request["group_id"]):
        refused = ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
    else:
        hidden = sorted(topic for topic in request["subscribed_topic_names"] or ()
                        if not topic_allowed(ctx, Operation.DESCRIBE, topic))
        if hidden:
            refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"Topic authorization failed for {', '.join(hidden)}."
    if refused is not None:
        return {"throttle_time_ms": 0, "error_code": refused[0], "error_message": refused[1],
                "member_id": request["member_id"], "member_epoch": request["member_epoch"],
                "heartbeat_interval_ms": 0, "assignment": None}
    result = await _coordinator(ctx).consumer_group_heartbeat(HeartbeatRequest(
        group_id=request["group_id"], member_id=request["member_id"], member_epoch=request["member_epoch"],
        instance_id=request["instance_id"], rack_id=request["rack_id"],
        rebalance_timeout_ms=request["rebalance_timeout_ms"],
        subscribed_topic_names=request["subscribed_topic_names"],
        # null: unchanged; "" clears it (librdkafka sends "" with its topic names)
        subscribed_topic_regex=request["subscribed_topic_regex"] if ctx.api_version >= 1 else None,
        server_assignor=request["server_assignor"], owned=request["topic_partitions"],
        client_id=ctx.client_id or "", client_host=_client_host(ctx), version=ctx.api_version,
        topic_visible=None if ctx.services.authorizer is None else lambda topic: topic_allowed(
            ctx, Operation.DESCRIBE, topic)))
    assignment: ConsumerGroupHeartbeatResponseAssignment | None = None
    if result.assignment is not None:
        assignment = {"topic_partitions": [{"topic_id": topic, "partitions": sorted(partitions)}
                                           for topic, partitions in sorted(result.assignment.items())]}
    return {"throttle_time_ms": 0, "error_code": result.error, "error_message": result.message,
            "member_id": result.member_id, "member_epoch": result.member_epoch,
            "heartbeat_interval_ms": _coordinator(ctx).config.consumer_heartbeat_interval_ms,
            "assignment": assignment}


@handler(ApiKey.CONSUMER_GROUP_DESCRIBE)
async def consumer_group_describe(ctx: RequestContext, request: dict[str, Any]) -> ConsumerGroupDescribeResponse:
    names = {topic.topic_id: name for name, topic in ctx.services.logs.topics.items()}
    described: list[ConsumerGroupDescribeResponseDescribedGroup] = []
    for group_id in request["group_ids"]:
        if not _consumer_protocol_enabled(ctx):
            error, message, group = ErrorCode.UNSUPPORTED_VERSION, None, None
        elif group_allowed(ctx, Operation.DESCRIBE, group_id):
            error, message, group = _coordinator(ctx).describe_consumer_group(group_id, names)
        else:
            error, message, group = ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.", None
        entry: ConsumerGroupDescribeResponseDescribedGroup = {
            "error_code": error, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": operations_field(ctx, request["include_authorized_operations"]
                                                      and group is not None, ResourceType.GROUP, group_id)}
        if group is not None:
            entry.update(group)
        described.append(entry)
    return {"throttle_time_ms": 0, "groups": described}
