"""The digest of a Metadata answer leaves its controller id out, and only that: a KRaft broker names a live broker
chosen at random as the controller in every answer, so a cluster of several nodes at rest would otherwise never
answer the same bytes twice. Answers encoded by our codec at every version the monitor asks (1 to 12), with
brokers of host names and racks of any length (varints of several bytes at the flexible versions)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.api import ApiKey, encode_response
from burrowpy.coordinators.codec_request import answer_digest, metadata_digest

VERSIONS = st.integers(min_value=1, max_value=12)
NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=200)
BROKERS = st.lists(st.fixed_dictionaries({
    "node_id": st.integers(0, 2**31 - 1), "host": NAMES, "port": st.integers(1, 65535),
    "rack": st.none() | NAMES}), max_size=5)


def answer(version: int, brokers: list[dict[str, Any]], cluster_id: str | None, controller: int, leader: int) -> bytes:
    """A Metadata answer frame (correlation id first, as the monitor's readers hold it)."""
    body = {"throttle_time_ms": 0, "brokers": brokers, "cluster_id": cluster_id, "controller_id": controller,
            "cluster_authorized_operations": -2**31,
            "topics": [{"error_code": 0, "name": "orders", "topic_id": bytes(16), "is_internal": False,
                        "topic_authorized_operations": -2**31,
                        "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": leader, "leader_epoch": 0,
                                        "replica_nodes": [leader], "isr_nodes": [leader], "offline_replicas": []}]}]}
    return encode_response(ApiKey.METADATA, version, 7, body)[4:]


@settings(max_examples=300, deadline=None)
@given(VERSIONS, BROKERS, st.none() | NAMES, st.integers(-1, 2**31 - 1), st.integers(-1, 2**31 - 1),
       st.integers(0, 5))
def test_answers_that_differ_in_their_controller_alone_have_one_digest(version, brokers, cluster_id, controller,
                                                                       other_controller, leader):
    first = answer(version, brokers, cluster_id, controller, leader)
    named_another = answer(version, brokers, cluster_id, other_controller, leader)
    assert metadata_digest(version, first) == metadata_digest(version, named_another)
    # anything else that differs still tells the answers apart: a partition's leader, a broker's port
    assert metadata_digest(version, first) != metadata_digest(version, answer(version, brokers, cluster_id, controller,
                                                                              leader + 1))
    if brokers:
        moved = [{**brokers[0], "port": brokers[0]["port"] % 65535 + 1}, *brokers[1:]]
        assert metadata_digest(version, first) != metadata_digest(version, answer(version, moved, cluster_id,
                                                                                  controller, leader))
    # and the digest is not the whole frame's (which the controller id moves)
    if controller != other_controller:
        assert answer_digest(ApiKey.METADATA, version, first) != answer_digest(ApiKey.METADATA, version, named_another)


def test_a_frame_too_short_for_its_brokers_is_digested_whole():
    frame = answer(12, [{"node_id": 1, "host": "a", "port": 1, "rack": None}], "c", 1, 1)
    cut = frame[:12]
    assert metadata_digest(12, cut) == answer_digest(ApiKey.METADATA, 12, cut)
