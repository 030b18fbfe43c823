"""Our broker and Apache Kafka 4.4, asked the same things: for every API and every version both advertise,
the same request (built and decoded with our codec) gets the same answer field by field, apart from what
differs between any two clusters (ids, ports, throttle times) and the deliberate differences listed in
DIFFERENCES, each asserted to still be there so that the list cannot go stale.

Both clusters first get the same state: topic ``diff`` (2 partitions) with one batch of three records in
partition 0, and a group ``diff-simple`` that committed offset 2 of it. Requests that change state (create,
delete, commit, produce) are sent once per version to both, in the same order, so both change alike.

The APIs only a cluster of ours serves (its Raft quorum: DescribeQuorum, AddRaftVoter, RemoveRaftVoter) are asked
of a one-broker cluster of ours; Kafka runs a dynamic quorum (KIP-853), whose voters may change, as ours may.

Then, after the comparison, the transaction coordinator's answers step by step (a transactional id taken
through its error paths, and a second librdkafka producer instance aborting the first's open transaction),
the same from both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from cluster_harness import BrokerCluster
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from harness import wait_until
from kafka_harness import KafkaServer

from broker.broker import ADVERTISED_VERSIONS, CLUSTER_VERSIONS
from broker.client import KafkaConnection
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey
from broker.protocol.records import Record, build_batch

pytestmark = pytest.mark.integration

TOPIC = "diff"
GROUP = "diff-simple"
BATCH = build_batch([Record(n, 1_700_000_000_000 + n, b"key-%d" % n, b"value-%d" % n) for n in range(3)])
ZERO_UUID = bytes(16)

# Fields that differ between any two clusters: ids of the cluster, its members and producers, ports, throttle,
# where their logs are and the room left on that disk.
# Member lists (JoinGroup, LeaveGroup, DescribeGroups) and Fetch's session_id are compared, ids aside.
VOLATILE = {"throttle_time_ms", "cluster_id", "port", "topic_id", "member_id", "leader", "producer_id", "log_dir",
            "total_bytes", "usable_bytes"}


def fetch_partitions(*partitions: int) -> list[dict]:
    return [{"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p in partitions]


# --- requests: API -> (version -> body); a version's body may depend on the version ------------------------

ACL_FILTER = {"resource_type_filter": 2, "resource_name_filter": TOPIC, "pattern_type_filter": 3,
              "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}

def metadata(v: int) -> dict:
    return {"topics": [{"name": TOPIC, "topic_id": ZERO_UUID}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": True, "include_topic_authorized_operations": True}


def fetch(v: int) -> dict:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": TOPIC, "partitions": fetch_partitions(0, 1)}]}


def list_offsets(v: int) -> dict:
    """The latest offset of partition 0, the earliest (v7+: the max timestamp) of partition 1, partition 5 twice
    (Kafka answers a partition asked for twice with a single INVALID_REQUEST) and a topic that is not there."""
    return {"replica_id": -1, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
        {"partition_index": p, "current_leader_epoch": -1, "timestamp": t, "max_num_offsets": 1}
        for p, t in ((0, -1), (1, -3 if v >= 7 else -2), (5, -1), (5, -2))]}, {"name": "diff-other", "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1, "max_num_offsets": 1}]}]}


def produce(v: int) -> dict:
    return {"transactional_id": None, "acks": 1, "timeout_ms": 30_000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 1, "records": BATCH}]}]}


def commit(group: str) -> Callable[[int], dict]:
    return lambda v: {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                      "group_instance_id": None, "retention_time_ms": -1, "topics": [
                          {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 2,
                                                          "committed_leader_epoch": -1, "commit_timestamp": -1,
                                                          "committed_metadata": "m"}]}]}


def offset_fetch(v: int) -> dict:
    topics = [{"name": TOPIC, "partition_indexes": [0, 1]}]
    return {"group_id": GROUP, "topics": topics, "require_stable": False,
            "groups": [{"group_id": GROUP, "topics": topics}]}


def unknown_member_heartbeat(v: int) -> dict:
    return {"group_id": f"diff-nobody-{v}", "generation_id": 1, "member_id": "nobody", "group_instance_id": None}


def unknown_member_sync(v: int) -> dict:
    return {**unknown_member_heartbeat(v), "protocol_type": "consumer", "protocol_name": "range", "assignments": []}


def unknown_member_leave(v: int) -> dict:
    return {"group_id": f"diff-nobody-{v}", "member_id": "nobody",
            "members": [{"member_id": "nobody", "group_instance_id": None, "reason": None}]}


def join(v: int) -> dict:
    # a session long enough for DescribeGroups to find the member of diff-join-0 on a busy machine
    return {"group_id": f"diff-join-{v}", "session_timeout_ms": 60_000, "rebalance_timeout_ms": 10_000,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"}]}


def create_topic(name: str, **extra: Any) -> dict:
    return {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": [{"name": "retention.ms", "value": "3600000"}]}],
            "timeout_ms": 30_000, "validate_only": False, **extra}


def configs_resource(v: int) -> dict:
    """A topic's configs, a broker's and (v1+: Kafka drops a v0 connection asking for it) the cluster
    default's."""
    resources = [{"resource_type": 2, "resource_name": TOPIC,
                  "configuration_keys": ["retention.ms", "cleanup.policy", "max.message.bytes"]},
                 {"resource_type": 4, "resource_name": "1",
                  "configuration_keys": ["message.max.bytes", "num.io.threads", "log.cleaner.threads"]}]
    if v >= 1:
        resources.append({"resource_type": 4, "resource_name": "", "configuration_keys": ["message.max.bytes"]})
    return {"resources": resources, "include_synonyms": True, "include_documentation": True}


def alter(*resources: tuple[int, str, str, str], operation: dict[str, int] | None = None) -> dict:
    """Checked only (validate_only); ``operation``: IncrementalAlterConfigs' config_operation (SET)."""
    return {"resources": [{"resource_type": kind, "resource_name": name, "configs": [
        {"name": config, "value": value, **(operation or {})}]} for kind, name, config, value in resources],
        "validate_only": True}


def alter_configs(v: int) -> dict:
    """A topic's config and a broker's (not the cluster default's: AlterConfigs replaces the whole layer, and
    Kafka 4 refuses to drop the min.insync.replicas its storage tool put there)."""
    return alter((2, TOPIC, "retention.ms", "100000"), (4, "1", "message.max.bytes", "2000"))


def incremental_alter_configs(v: int) -> dict:
    """Also the cluster default's, a read-only config, and a resource named twice (both copies refused)."""
    return alter((2, TOPIC, "retention.ms", "100000"), (4, "", "log.retention.ms", "100000"),
                 (4, "1", "num.partitions", "3"), (2, "diff-twice", "retention.ms", "1"),
                 (2, "diff-twice", "retention.ms", "2"), operation={"config_operation": 0})


UNKNOWN_TXN = {"transactional_id": "diff-txn-unknown", "producer_id": 4242, "producer_epoch": 0}


def add_partitions_to_txn(v: int) -> dict:
    topics = [{"name": TOPIC, "partitions": [0, 1]}]
    return {"v3_and_below_transactional_id": UNKNOWN_TXN["transactional_id"],
            "v3_and_below_producer_id": UNKNOWN_TXN["producer_id"], "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": topics,
            "transactions": [{**UNKNOWN_TXN, "verify_only": True, "topics": topics}]}


def quota_entry(entity: list[tuple[str, str | None]], *ops: tuple[str, float | None]) -> dict:
    return {"entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity],
            "ops": [{"key": key, "value": value or 0.0, "remove": value is None} for key, value in ops]}


QUOTAS = [quota_entry([("user", "diff-d")], ("producer_byte_rate", 100)),
          quota_entry([("user", "diff-d"), ("client-id", None)], ("consumer_byte_rate", 200)),
          quota_entry([("client-id", "diff-d")], ("controller_mutation_rate", 1.5))]


def alter_client_quotas(v: int) -> dict:
    """Quotas set, changed and removed, and each of Kafka's refusals, entity by entity."""
    return {"validate_only": False, "entries": [
        quota_entry([("user", f"diff-u-{v}"), ("client-id", "diff-c")], ("producer_byte_rate", 1024),
                    ("request_percentage", 12.5)),
        quota_entry([("client-id", None)], ("consumer_byte_rate", 2048 + v)),
        quota_entry([("user", "diff-none")], ("producer_byte_rate", None)),
        quota_entry([("user", "diff-fraction")], ("producer_byte_rate", 12.5)),
        quota_entry([("client-id", "diff-negative")], ("request_percentage", -1)),
        quota_entry([("user", "diff-key")], ("bogus_rate", 1)),
        quota_entry([("topic", "diff")], ("producer_byte_rate", 1)),
        quota_entry([("user", "")], ("producer_byte_rate", 1)),
        quota_entry([], ("producer_byte_rate", 1))]}


REQUESTS: dict[int, Callable[[int], dict]] = {
    ApiKey.API_VERSIONS: lambda v: {"client_software_name": "diff", "client_software_version": "1"},
    ApiKey.METADATA: metadata,
    ApiKey.FETCH: fetch,
    ApiKey.LIST_OFFSETS: list_offsets,
    ApiKey.PRODUCE: produce,
    ApiKey.OFFSET_COMMIT: commit(GROUP),
    ApiKey.OFFSET_FETCH: offset_fetch,
    ApiKey.FIND_COORDINATOR: lambda v: {"key": GROUP, "key_type": 0, "coordinator_keys": [GROUP]},
    ApiKey.JOIN_GROUP: join,
    ApiKey.HEARTBEAT: unknown_member_heartbeat,
    ApiKey.LEAVE_GROUP: unknown_member_leave,
    ApiKey.SYNC_GROUP: unknown_member_sync,
    ApiKey.DESCRIBE_GROUPS: lambda v: {"groups": [GROUP, "diff-join-0"],  # committed only; one joined member
                                       "include_authorized_operations": True},
    ApiKey.LIST_GROUPS: lambda v: {"states_filter": ["Empty"], "types_filter": []},
    ApiKey.CREATE_TOPICS: lambda v: create_topic(f"diff-created-{v}"),
    ApiKey.DELETE_TOPICS: lambda v: {"topic_names": [f"diff-created-{v}"], "timeout_ms": 30_000,
                                     "topics": [{"name": f"diff-created-{v}", "topic_id": ZERO_UUID}]},
    ApiKey.DELETE_RECORDS: lambda v: {"topics": [{"name": TOPIC, "partitions": [{"partition_index": 1,
                                                                                  "offset": v + 1}]}],
                                      "timeout_ms": 30_000},
    ApiKey.INIT_PRODUCER_ID: lambda v: {"transactional_id": None, "transaction_timeout_ms": 60_000,
                                        "producer_id": -1, "producer_epoch": -1},
    ApiKey.OFFSET_FOR_LEADER_EPOCH: lambda v: {"replica_id": -1, "topics": [
        {"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
    ApiKey.DESCRIBE_CONFIGS: configs_resource,
    ApiKey.ALTER_CONFIGS: alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
    ApiKey.CREATE_PARTITIONS: lambda v: {"topics": [{"name": f"diff-grow-{v}", "count": 3, "assignments": None}],
                                         "timeout_ms": 30_000, "validate_only": False},
    ApiKey.DELETE_GROUPS: lambda v: {"groups_names": [f"diff-gone-{v}"]},
    # a single node's partitions are led by their only replica; one that does not exist, of a known topic and not
    ApiKey.ELECT_LEADERS: lambda v: {"election_type": v % 2, "timeout_ms": 30_000, "topic_partitions": [
        {"topic": TOPIC, "partitions": [0, 5]}, {"topic": "diff-none", "partitions": [0]}]},
    ApiKey.OFFSET_DELETE: lambda v: {"group_id": f"diff-gone-{v}", "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0}]}]},
    ApiKey.DESCRIBE_CLUSTER: lambda v: {"include_cluster_authorized_operations": True, "endpoint_type": 1,
                                        **({"include_fenced_brokers": True} if v >= 2 else {})},
    # a broker id neither cluster has registered
    ApiKey.UNREGISTER_BROKER: lambda v: {"broker_id": 42},
    # transactions: a transactional id neither cluster knows, and (DescribeTransactions) one just initialised
    ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: lambda v: {**UNKNOWN_TXN, "group_id": GROUP},
    ApiKey.END_TXN: lambda v: {**UNKNOWN_TXN, "committed": True},
    # what a coordinator sends other brokers: partitions this one does not have
    ApiKey.WRITE_TXN_MARKERS: lambda v: {"markers": [{"producer_id": 4242, "producer_epoch": 0,
                                                      "transaction_result": False, "coordinator_epoch": 0,
                                                      "topics": [{"name": "diff-none", "partition_indexes": [0]}]}]},
    ApiKey.TXN_OFFSET_COMMIT: lambda v: {**UNKNOWN_TXN, "group_id": f"diff-txn-group-{v}", "generation_id": -1,
                                         "member_id": "", "group_instance_id": None, "topics": [
                                             {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                             "committed_leader_epoch": -1,
                                                                             "committed_metadata": ""}]}]},
    ApiKey.DESCRIBE_TRANSACTIONS: lambda v: {"transactional_ids": [f"diff-txn-{v}", "diff-txn-unknown"]},
    ApiKey.LIST_TRANSACTIONS: lambda v: {"state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [],
                                         "duration_filter": -1},
    # SCRAM credentials: none exist on either cluster
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: lambda v: {"users": [{"name": "diff-nobody"}]},
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: lambda v: {"deletions": [{"name": "diff-nobody", "mechanism": 1}],
                                                    "upsertions": [{"name": "diff-weak", "mechanism": 1,
                                                                    "iterations": 100, "salt": b"salt",
                                                                    "salted_password": b"x" * 32}]},
    # client quotas: those set by prepare(), filtered by kind, name and default
    ApiKey.DESCRIBE_CLIENT_QUOTAS: lambda v: {"components": [
        [{"entity_type": "user", "match_type": 2, "match": None}],
        [{"entity_type": "user", "match_type": 0, "match": "diff-d"},
         {"entity_type": "client-id", "match_type": 1, "match": None}]][v], "strict": False},
    ApiKey.ALTER_CLIENT_QUOTAS: alter_client_quotas,
    # the consumer group protocol (KIP-848): a member joining a new group, then groups of each kind described
    ApiKey.CONSUMER_GROUP_HEARTBEAT: lambda v: {
        "group_id": f"diff-cg-{v}", "member_id": f"diff-member-{v}" if v >= 1 else "", "member_epoch": 0,
        "rebalance_timeout_ms": 30_000, "subscribed_topic_names": [TOPIC], "topic_partitions": []},
    ApiKey.CONSUMER_GROUP_DESCRIBE: lambda v: {"group_ids": ["diff-cg-1", GROUP, "diff-nobody"],
                                               "include_authorized_operations": True},
    # ACLs: neither cluster has an authorizer
    ApiKey.DESCRIBE_ACLS: lambda v: ACL_FILTER,
    ApiKey.CREATE_ACLS: lambda v: {"creations": [{"resource_type": 2, "resource_name": TOPIC, "resource_pattern_type": 3,
                                                  "principal": "User:diff", "host": "*", "operation": 3,
                                                  "permission_type": 3}]},
    ApiKey.DELETE_ACLS: lambda v: {"filters": [ACL_FILTER]},
    # what operators' tools ask: the log dir's partitions and their sizes, partitions' producers (the prepared
    # batches have none), and a page of partitions from a cursor (it ends at the next topic's first partition)
    ApiKey.DESCRIBE_LOG_DIRS: lambda v: {"topics": [{"topic": TOPIC, "partitions": [0, 1, 5]}]},
    ApiKey.DESCRIBE_PRODUCERS: lambda v: {"topics": [{"name": TOPIC, "partition_indexes": [0, 1, 5]},
                                                     {"name": "diff-none", "partition_indexes": [0]}]},
    # reassignment on one broker: its own id (a no-op), a cancellation of nothing, partitions and brokers that do
    # not exist; and none in progress
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: lambda v: {"timeout_ms": 30_000, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": [1]},
                                       {"partition_index": 1, "replicas": None},
                                       {"partition_index": 5, "replicas": [1]}]},
        {"name": "diff-none", "partitions": [{"partition_index": 0, "replicas": [1]}]}]},
    ApiKey.LIST_PARTITION_REASSIGNMENTS: lambda v: {"timeout_ms": 30_000, "topics": None},
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: lambda v: {"topics": [{"name": TOPIC}, {"name": "diff-none"}],
                                                 "response_partition_limit": 1,
                                                 "cursor": {"topic_name": TOPIC, "partition_index": 1}},
}

# The quorum's APIs, asked of a cluster of ours: the metadata log's partition described, a voter added without a
# directory id (v0) and one added that is one already (v1; an endpoint on each one's voters' listener), one removed
# that is none.
QUORUM_REQUESTS: dict[int, Callable[[int], dict]] = {
    ApiKey.DESCRIBE_QUORUM: lambda v: {"topics": [{"topic_name": "__cluster_metadata",
                                                   "partitions": [{"partition_index": 0}]}]},
    ApiKey.ADD_RAFT_VOTER: lambda v: {"cluster_id": None, "timeout_ms": 10_000, "voter_id": 1,
                                      "voter_directory_id": b"\x01" * 16 if v else ZERO_UUID,
                                      "listeners": [{"name": name, "host": "127.0.0.1", "port": 1}
                                                    for name in ("CONTROLLER", "RAFT")],
                                      **({"ack_when_committed": True} if v >= 1 else {})},
    ApiKey.REMOVE_RAFT_VOTER: lambda v: {"cluster_id": None, "voter_id": 9, "voter_directory_id": b"\x01" * 16},
}
# where two quorums' logs stand, which no two clusters share
QUORUM_VOLATILE = {"leader_epoch", "high_watermark", "log_end_offset", "last_fetch_timestamp",
                   "last_caught_up_timestamp"}

# Requests sent to both clusters before the API's own request at each version: (api, body builder).
BEFORE: dict[int, list[tuple[int, Callable[[int], dict]]]] = {
    ApiKey.DESCRIBE_TRANSACTIONS: [(ApiKey.INIT_PRODUCER_ID, lambda v: {
        "transactional_id": f"diff-txn-{v}", "transaction_timeout_ms": 60_000, "producer_id": -1,
        "producer_epoch": -1})],
    ApiKey.DELETE_TOPICS: [(ApiKey.CREATE_TOPICS, lambda v: create_topic(f"diff-created-{v}"))],
    ApiKey.CREATE_PARTITIONS: [(ApiKey.CREATE_TOPICS, lambda v: create_topic(f"diff-grow-{v}"))],
    ApiKey.DELETE_GROUPS: [(ApiKey.OFFSET_COMMIT, lambda v: commit(f"diff-gone-{v}")(v))],
    ApiKey.OFFSET_DELETE: [(ApiKey.OFFSET_COMMIT, lambda v: commit(f"diff-gone-{v}")(v))],
}

# Deliberate differences: (api, versions, field path) -> why. Each is asserted to still differ.
DIFFERENCES: dict[tuple[int, range, str], str] = {
    (ApiKey.API_VERSIONS, range(0, 4), "api_keys"):
        "we advertise the APIs and versions we serve, a subset of Kafka's (README: protocol coverage)",
    (ApiKey.API_VERSIONS, range(3, 4), "supported_features"):
        "Kafka advertises KRaft feature levels (metadata.version, kraft.version, ...); we have none",
    (ApiKey.API_VERSIONS, range(3, 4), "finalized_features"): "as above",
    (ApiKey.API_VERSIONS, range(3, 4), "finalized_features_epoch"): "as above",
    (ApiKey.CONSUMER_GROUP_HEARTBEAT, range(0, 2), "member_epoch"):
        "a new group's first member gets epoch 1 here and 2 on Kafka 4.4, which bumps a new group's epoch twice; "
        "clients compare epochs only for equality with what they were told",
    (ApiKey.CONSUMER_GROUP_DESCRIBE, range(0, 1), "groups.group_epoch"): "as above, for the described group",
    (ApiKey.CONSUMER_GROUP_DESCRIBE, range(0, 1), "groups.assignment_epoch"): "as above",
    (ApiKey.CONSUMER_GROUP_DESCRIBE, range(0, 1), "groups.members.member_epoch"): "as above",
    (ApiKey.WRITE_TXN_MARKERS, range(1, 2), "markers.topics.partitions.error_code"):
        "only a broker of our cluster may write markers (CLUSTER_AUTHORIZATION_FAILED here, as Kafka answers without "
        "CLUSTER_ACTION); Kafka without an authorizer takes them from any client (test_cluster_broker_only.py)",
    (ApiKey.ADD_PARTITIONS_TO_TXN, range(4, 6), "error_code"):
        "v4+ is what brokers verify transactions with: only a broker of our cluster may send it "
        "(CLUSTER_AUTHORIZATION_FAILED here, as Kafka answers without CLUSTER_ACTION); Kafka without an authorizer "
        "takes it from any client (test_cluster_broker_only.py)",
    (ApiKey.ADD_PARTITIONS_TO_TXN, range(4, 6), "results_by_transaction"): "as above: refused, nothing verified",
    (ApiKey.ADD_RAFT_VOTER, range(1, 2), "error_message"): "each names the voter that is one already in its words",
    (ApiKey.REMOVE_RAFT_VOTER, range(0, 1), "error_message"): "each names the voter it did not find in its words",
    (ApiKey.DESCRIBE_QUORUM, range(2, 3), "topics.partitions.current_voters.replica_directory_id"):
        "a configured voter of ours has none (the zero id, as a static Kafka quorum's); Kafka's voter, formatted "
        "--standalone, has its log dir's",
    (ApiKey.DESCRIBE_QUORUM, range(2, 3), "nodes.listeners.name"):
        "our voters are reached on their Raft address, named RAFT; Kafka's on its CONTROLLER listener",
    (ApiKey.CREATE_TOPICS, range(5, 8), "topics.configs"):
        "a new topic's configs: every one of Kafka 4.4's 37, plus our retention.disk.percent; min.insync.replicas "
        "comes from a dynamic cluster default on Kafka 4 (see test_broker_configs.py)",
}


def normalized(value: Any, volatile: set[str] = VOLATILE) -> Any:
    """The answer without ``volatile`` fields; lists of dicts sorted so that order does not matter."""
    if isinstance(value, dict):
        return {k: normalized(v, volatile) for k, v in value.items() if k not in volatile}
    if isinstance(value, list):
        items = [normalized(v, volatile) for v in value]
        return sorted(items, key=repr) if items and isinstance(items[0], dict) else items
    return value


def differing_paths(ours: Any, theirs: Any, path: str = "") -> set[str]:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        found: set[str] = set()
        for key in ours.keys() | theirs.keys():
            found |= differing_paths(ours.get(key), theirs.get(key), f"{path}.{key}" if path else key)
        return found
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        found = set()
        for a, b in zip(ours, theirs, strict=True):
            found |= differing_paths(a, b, path)
        return found
    return set() if ours == theirs else {path}


def common_versions(theirs: dict[int, tuple[int, int]],
                    ours: dict[int, tuple[int, int]] = ADVERTISED_VERSIONS) -> Iterator[tuple[int, int]]:
    for api, (low, high) in sorted(ours.items()):
        if api in theirs:
            yield from ((api, v) for v in range(max(low, theirs[api][0]), min(high, theirs[api][1]) + 1))


async def until(what: str, attempt: Callable[[], Awaitable[bool]], timeout: float = 90.0) -> None:
    """Repeats ``attempt`` until it says done, failing with ``what`` after ``timeout`` seconds: a new Kafka
    takes a while to take writes and hand out ids, the longer the busier the machine, and a comparison made
    before the state is prepared would report differences that are not the brokers'."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await attempt():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what}: not done within {timeout:.0f} s")
        await asyncio.sleep(0.1)


async def prepare(bootstrap: str) -> dict[int, tuple[int, int]]:
    async with await KafkaConnection.connect(bootstrap, client_id="diff") as connection:
        await connection.request(ApiKey.CREATE_TOPICS, {"topics": [{"name": TOPIC, "num_partitions": 2,
                                 "replication_factor": 1, "assignments": [], "configs": []}], "timeout_ms": 30_000})

        async def batch_stored() -> bool:  # a new Kafka partition takes a moment to take writes
            answer = await connection.request(ApiKey.PRODUCE, {"transactional_id": None, "acks": -1,
                                              "timeout_ms": 30_000, "topic_data": [{"name": TOPIC, "partition_data": [
                                                  {"index": 0, "records": BATCH}]}]}, version=9)
            return bool(answer["responses"][0]["partition_responses"][0]["error_code"] == 0)

        async def producer_id_given() -> bool:  # once its controller gave it a block of ids
            answer = await connection.request(ApiKey.INIT_PRODUCER_ID, {"transactional_id": None,
                                              "transaction_timeout_ms": 60_000}, version=4)
            return bool(answer["error_code"] == 0)

        async def transactional_id_given() -> bool:
            # its transaction state topic, which Kafka makes on the first FindCoordinator for a transactional id
            # (we make ours with its first record)
            await connection.request(ApiKey.FIND_COORDINATOR, {"key": "diff-txn-prepare", "key_type": 1,
                                                               "coordinator_keys": ["diff-txn-prepare"]}, version=4)
            answer = await connection.request(ApiKey.INIT_PRODUCER_ID, {"transactional_id": "diff-txn-prepare",
                                              "transaction_timeout_ms": 60_000}, version=4)
            return bool(answer["error_code"] == 0)

        async def quotas_known() -> bool:  # Kafka's brokers learn them from the metadata after the controller
            answer = await connection.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": [], "strict": False})
            return len(answer["entries"]) == len(QUOTAS)

        async def offset_committed() -> bool:  # and a new Kafka its offsets topic
            await connection.request(ApiKey.FIND_COORDINATOR, {"key": GROUP, "key_type": 0,
                                                               "coordinator_keys": [GROUP]}, version=4)
            answer = await connection.request(ApiKey.OFFSET_COMMIT, commit(GROUP)(8), version=8)
            return bool(answer["topics"][0]["partitions"][0]["error_code"] == 0)

        await until(f"the batch produced to {TOPIC}-0 of {bootstrap}", batch_stored)
        await until(f"an idempotent producer id from {bootstrap}", producer_id_given)
        await until(f"a transactional producer id from {bootstrap}", transactional_id_given)
        await connection.request(ApiKey.ALTER_CLIENT_QUOTAS, {"validate_only": False, "entries": QUOTAS})
        await until(f"the client quotas described by {bootstrap}", quotas_known)
        await until(f"{GROUP}'s offset committed on {bootstrap}", offset_committed)
        return connection.versions


async def ask(bootstrap: str, pairs: list[tuple[int, int]], requests: dict[int, Callable[[int], dict]] = REQUESTS,
              volatile: set[str] = VOLATILE) -> dict[tuple[int, int], dict]:
    answers = {}
    async with await KafkaConnection.connect(bootstrap, client_id="diff") as connection:
        for api, version in pairs:
            for before_api, body in BEFORE.get(api, []):
                await connection.request(before_api, body(version))
            answers[(api, version)] = normalized(await connection.request(api, requests[api](version),
                                                                          version=version), volatile)
    return answers


KAFKAS_VERSIONS: dict[int, tuple[int, int]] = {}


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    """Apache Kafka 4.4 with a dynamic quorum, so that it takes voter changes. The prepared batch's timestamps
    (2023) are past the default retention: Kafka's first retention check, 30 s after its start, would delete it
    during a slow run, so it checks hourly."""
    server = KafkaServer(tmp_path_factory.mktemp("kafka"), dynamic_quorum=True,
                         config={"log.retention.check.interval.ms": 3_600_000})
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def one_broker_cluster(tmp_path_factory):
    cluster = BrokerCluster(tmp_path_factory.mktemp("quorum"), size=1, settings={
        "default.replication.factor": 1, "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1})
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def answers(broker, kafka) -> tuple[list[tuple[int, int]], dict, dict]:
    asyncio.run(prepare(broker.bootstrap))
    KAFKAS_VERSIONS.update(asyncio.run(prepare(kafka.bootstrap)))
    pairs = list(common_versions(KAFKAS_VERSIONS))
    return pairs, asyncio.run(ask(broker.bootstrap, pairs)), asyncio.run(ask(kafka.bootstrap, pairs))


def test_what_we_advertise_is_a_subset_of_kafkas(answers):
    """Every API we serve is one Kafka 4.4 serves, and never at a version Kafka does not know; where we
    stop short of Kafka's newest version is listed in README ("Kafka clients and the wire protocol")."""
    assert set(ADVERTISED_VERSIONS) <= set(KAFKAS_VERSIONS)
    assert all(high <= KAFKAS_VERSIONS[api][1] for api, (_, high) in ADVERTISED_VERSIONS.items())
    # the versions below Kafka's minimum we keep for old clients (Burrow 1.2.1's Sarama, librdkafka's gates)
    older = {ApiKey(api).name for api, (low, _) in ADVERTISED_VERSIONS.items() if low < KAFKAS_VERSIONS[api][0]}
    assert older == {"FETCH", "LIST_OFFSETS", "OFFSET_COMMIT", "OFFSET_FETCH", "CREATE_TOPICS", "DELETE_TOPICS",
                     "DESCRIBE_CONFIGS"}


def expected_differences(api: int, version: int) -> set[str]:
    return {path for (key, versions, path) in DIFFERENCES if key == api and version in versions}


def test_every_common_api_version_is_compared(answers):
    pairs, _, _ = answers
    assert {api for api, _ in pairs} == set(REQUESTS)  # a request for every API both serve
    assert len(pairs) >= 173


def assert_same_apart_from_the_listed_differences(pairs: list[tuple[int, int]], ours: dict, kafkas: dict) -> None:
    unexpected = {}
    for pair in pairs:
        found = differing_paths(ours[pair], kafkas[pair])
        if found != expected_differences(*pair):
            unexpected[(ApiKey(pair[0]).name, pair[1])] = {
                path: (_at(ours[pair], path), _at(kafkas[pair], path))
                for path in found ^ expected_differences(*pair)}
    assert unexpected == {}, "\n".join(f"{key}: {value}" for key, value in unexpected.items())


def test_same_answers_apart_from_the_listed_differences(answers):
    assert_same_apart_from_the_listed_differences(*answers)


def _at(value: Any, path: str) -> Any:
    for key in path.split("."):
        if isinstance(value, list):
            value = [item.get(key) if isinstance(item, dict) else item for item in value]
        elif isinstance(value, dict):
            value = value.get(key)
    return value


def test_the_quorum_apis_answer_as_kafkas(answers, one_broker_cluster, kafka):
    pairs = list(common_versions(KAFKAS_VERSIONS, CLUSTER_VERSIONS))
    assert {api for api, _ in pairs} == set(QUORUM_REQUESTS) == set(CLUSTER_VERSIONS)
    ours = asyncio.run(ask(one_broker_cluster.bootstrap, pairs, QUORUM_REQUESTS, VOLATILE | QUORUM_VOLATILE))
    kafkas = asyncio.run(ask(kafka.bootstrap, pairs, QUORUM_REQUESTS, VOLATILE | QUORUM_VOLATILE))
    assert_same_apart_from_the_listed_differences(pairs, ours, kafkas)


# --- the transaction coordinator's answers, request by request -------------------------------------------------

async def transaction_answers(bootstrap: str) -> list[tuple[str, Any]]:
    """A transactional id taken through Kafka's error paths of InitProducerId, AddPartitionsToTxn, EndTxn and
    DescribeTransactions; each step's answer (error code, and the epoch where one is given)."""
    tid = "diff-txn-paths"
    steps: list[tuple[str, Any]] = []
    async with await KafkaConnection.connect(bootstrap, client_id="diff") as connection:
        async def init(version: int, producer_id: int = -1, epoch: int = -1) -> tuple[int, int]:
            answer = await connection.request(ApiKey.INIT_PRODUCER_ID, {
                "transactional_id": tid, "transaction_timeout_ms": 60_000, "producer_id": producer_id,
                "producer_epoch": epoch}, version=version)
            return answer["error_code"], answer["producer_epoch"]

        async def add(version: int, producer_id: int, epoch: int, transactional_id: str = tid) -> int:
            answer = await connection.request(ApiKey.ADD_PARTITIONS_TO_TXN, {
                "v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": producer_id,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": TOPIC, "partitions": [1]}]}, version=version)
            return answer["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"]

        async def end(version: int, producer_id: int, epoch: int, committed: bool, transactional_id: str = tid) -> int:
            answer = await connection.request(ApiKey.END_TXN, {
                "transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": epoch,
                "committed": committed}, version=version)
            return answer["error_code"]

        first: tuple[int, int] = (-1, -1)

        async def initialised() -> bool:
            nonlocal first
            first = await init(4)
            return first[0] == 0
        await until(f"{tid} initialised on {bootstrap}", initialised)
        producer_id = (await connection.request(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [tid]}))[
            "transaction_states"][0]["producer_id"]
        steps.append(("init", first))
        steps.append(("init naming a producer id without its epoch", await init(4, producer_id, -1)))
        steps.append(("commit with no transaction", await end(3, producer_id, 0, True)))
        steps.append(("add", await add(3, producer_id, 0)))
        steps.append(("add, another producer id", await add(3, producer_id + 1, 0)))
        steps.append(("add, a stale epoch, v1", await add(1, producer_id, 5)))
        steps.append(("add, a stale epoch, v3", await add(3, producer_id, 5)))
        steps.append(("init on the open transaction", await init(4)))
        retried: tuple[int, int] = (-1, -1)

        async def retried_until_done() -> bool:  # Kafka writes the abort's markers after its answer
            nonlocal retried
            retried = await init(4)
            return retried[0] != ErrorCode.CONCURRENT_TRANSACTIONS
        await until(f"{tid}'s retried init on {bootstrap}", retried_until_done, timeout=30)
        steps.append(("the retry", retried))
        steps.append(("abort by the fenced producer, v1", await end(1, producer_id, 0, False)))
        steps.append(("abort by the fenced producer, v3", await end(3, producer_id, 0, False)))
        steps.append(("the fenced producer recovering, v3", await init(3, producer_id, 0)))
        steps.append(("the fenced producer recovering, v4", await init(4, producer_id, 0)))
        steps.append(("the current producer recovering", await init(4, producer_id, 2)))
        steps.append(("its retry", await init(4, producer_id, 2)))
        steps.append(("abort with no transaction", await end(3, producer_id, 3, False)))
        steps.append(("end of an unknown transactional id", await end(3, producer_id, 3, False, "diff-txn-nobody")))
        steps.append(("add with an empty transactional id", await add(3, producer_id, 3, "")))
        described = await connection.request(ApiKey.DESCRIBE_TRANSACTIONS, {
            "transactional_ids": [tid, "", "diff-txn-nobody"]})
        steps.append(("describe", [(state["error_code"], state["transaction_state"], state["producer_epoch"])
                                   for state in described["transaction_states"]]))
    return steps


def test_the_transaction_coordinators_error_paths_are_kafkas(answers, broker, kafka):
    theirs = asyncio.run(transaction_answers(kafka.bootstrap))
    ours = asyncio.run(transaction_answers(broker.bootstrap))
    assert ours == theirs
    fenced, old_fenced = ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH
    assert dict(ours) == {
        "init": (0, 0),
        "init naming a producer id without its epoch": (ErrorCode.INVALID_REQUEST, -1),
        "commit with no transaction": ErrorCode.INVALID_TXN_STATE,
        "add": 0,
        "add, another producer id": ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        "add, a stale epoch, v1": old_fenced,
        "add, a stale epoch, v3": fenced,
        # the open transaction is aborted with a bumped epoch and the client told to retry
        "init on the open transaction": (ErrorCode.CONCURRENT_TRANSACTIONS, -1),
        "the retry": (0, 2),
        "abort by the fenced producer, v1": old_fenced,
        "abort by the fenced producer, v3": fenced,
        "the fenced producer recovering, v3": (old_fenced, -1),
        "the fenced producer recovering, v4": (fenced, -1),
        "the current producer recovering": (0, 3),
        "its retry": (0, 3),
        "abort with no transaction": ErrorCode.INVALID_TXN_STATE,
        "end of an unknown transactional id": ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        "add with an empty transactional id": ErrorCode.INVALID_REQUEST,
        "describe": [(0, "Empty", 3), (ErrorCode.INVALID_REQUEST, "", 0),
                     (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, "", 0)],
    }


def values_to_the_end(bootstrap: str, partition: int, isolation: str) -> list[bytes]:
    """The values a consumer with ``isolation`` reads of TOPIC's ``partition`` (read_committed: to its last
    stable offset)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"diff-reader-{isolation}",
                         "isolation.level": isolation, "enable.partition.eof": True, "enable.auto.commit": False})
    # from the log's start, wherever the comparison's requests left it
    consumer.assign([TopicPartition(TOPIC, partition, OFFSET_BEGINNING)])
    values: list[bytes] = []
    try:
        def at_end() -> bool:
            for message in consumer.consume(100, timeout=0.2):
                if message.error() is None:
                    values.append(message.value())
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    return True
            return False
        wait_until(at_end, 30, message=f"{isolation} read of {TOPIC}-{partition}")
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize("server", ["broker", "kafka"])
def test_a_second_producer_instance_aborts_the_first_ones_open_transaction(answers, request, server):
    """librdkafka's transactional producer: a second instance's init_transactions, while the first has records
    in an open transaction, is answered CONCURRENT_TRANSACTIONS (the open transaction is aborted, fencing the
    first) and succeeds when retried; the first's records are never read committed."""
    bootstrap = request.getfixturevalue(server).bootstrap
    tid = "diff-txn-second-instance"
    committed_before = values_to_the_end(bootstrap, 0, "read_committed")
    first = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    first.init_transactions(60)
    first.begin_transaction()
    for n in range(3):
        first.produce(TOPIC, value=b"zombie-%d" % n, partition=0)
    first.flush(30)

    async def second_instances_first_attempt() -> dict:
        async with await KafkaConnection.connect(bootstrap, client_id="diff") as connection:
            return await connection.request(ApiKey.INIT_PRODUCER_ID, {
                "transactional_id": tid, "transaction_timeout_ms": 60_000, "producer_id": -1,
                "producer_epoch": -1}, version=4)
    attempt = asyncio.run(second_instances_first_attempt())
    assert (attempt["error_code"], attempt["producer_epoch"]) == (ErrorCode.CONCURRENT_TRANSACTIONS, -1)

    second = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    second.init_transactions(60)  # retried while the abort's markers are written
    try:
        first.commit_transaction(30)
    except KafkaException as exc:
        fenced = exc.args[0]  # not the exception: its traceback would keep the producer past the test
    else:
        pytest.fail("the first instance committed after the second's init_transactions")
    assert fenced.fatal()
    second.begin_transaction()
    second.produce(TOPIC, value=b"live", partition=0)
    second.commit_transaction(30)

    assert values_to_the_end(bootstrap, 0, "read_committed") == committed_before + [b"live"]
    assert values_to_the_end(bootstrap, 0, "read_uncommitted")[-4:] == [b"zombie-0", b"zombie-1", b"zombie-2",
                                                                         b"live"]
