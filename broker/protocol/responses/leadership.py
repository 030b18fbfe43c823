"""TypedDicts of the leadership responses,
generated from ``broker.protocol.messages`` by ``python -m broker.protocol.typed_gen``: do not edit, regenerate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from broker.protocol.types import Encoded


class ElectLeadersResponsePartitionResult(TypedDict, total=False):
    partition_id: int
    error_code: int
    error_message: str | None


class ElectLeadersResponseReplicaElectionResult(TypedDict, total=False):
    topic: str
    partition_result: Sequence[ElectLeadersResponsePartitionResult | Encoded]


class ElectLeadersResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    replica_election_results: Sequence[ElectLeadersResponseReplicaElectionResult | Encoded]
