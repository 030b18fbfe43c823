"""TypedDicts of the acls responses,
generated from ``broker.protocol.messages`` by ``python -m broker.protocol.typed_gen``: do not edit, regenerate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from broker.protocol.types import Encoded


class CreateAclsResponseAclCreationResult(TypedDict, total=False):
    error_code: int
    error_message: str | None


class CreateAclsResponse(TypedDict, total=False):
    throttle_time_ms: int
    results: Sequence[CreateAclsResponseAclCreationResult | Encoded]


class DeleteAclsResponseMatchingAcl(TypedDict, total=False):
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


class DeleteAclsResponseFilterResult(TypedDict, total=False):
    error_code: int
    error_message: str | None
    matching_acls: Sequence[DeleteAclsResponseMatchingAcl | Encoded]


class DeleteAclsResponse(TypedDict, total=False):
    throttle_time_ms: int
    filter_results: Sequence[DeleteAclsResponseFilterResult | Encoded]


class DescribeAclsResponseAclDescription(TypedDict, total=False):
    principal: str
    host: str
    operation: int
    permission_type: int


class DescribeAclsResponseResource(TypedDict, total=False):
    resource_type: int
    resource_name: str
    pattern_type: int
    acls: Sequence[DescribeAclsResponseAclDescription | Encoded]


class DescribeAclsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    resources: Sequence[DescribeAclsResponseResource | Encoded]
