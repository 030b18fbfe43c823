"""DescribeAcls, CreateAcls and DeleteAcls (``kafka-acls.sh``, the AdminClient's ACL calls).

Without an authorizer (``authorizer.class.name`` unset) all three answer SECURITY_DISABLED, as Kafka does.
Describing needs DESCRIBE on the cluster, creating and deleting ALTER on it.
"""

from __future__ import annotations

from typing import Any

import structlog

from broker.errors import ErrorCode, KafkaError
from broker.handlers.registry import RequestContext, handler
from broker.protocol.api import ApiKey
from broker.protocol.responses import (
    CreateAclsResponse,
    CreateAclsResponseAclCreationResult,
    DeleteAclsResponse,
    DeleteAclsResponseFilterResult,
    DescribeAclsResponse,
    DescribeAclsResponseAclDescription,
)
from broker.security.acl import (
    CLUSTER_NAME,
    Acl,
    AclError,
    AclFilter,
    Operation,
    ResourceType,
    validate_new,
)

NO_AUTHORIZER = "No Authorizer is configured."
CLUSTER_DENIED = "Cluster authorization failed."

log = structlog.get_logger("broker.acls")


def _filter(entry: dict[str, Any]) -> AclFilter:
    return AclFilter(entry["resource_type_filter"], entry["resource_name_filter"], entry["pattern_type_filter"],
                     entry["principal_filter"], entry["host_filter"], entry["operation"], entry["permission_type"])


def _refusal(ctx: RequestContext, operation: Operation,
             no_authorizer: str = NO_AUTHORIZER) -> tuple[ErrorCode, str] | None:
    """Why the request may not touch ACLs at all, if it may not."""
    if ctx.services.authorizer is None:
        return ErrorCode.SECURITY_DISABLED, no_authorizer
    if not ctx.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED
    return None


@handler(ApiKey.DESCRIBE_ACLS)
async def describe_acls(ctx: RequestContext, request: dict[str, Any]) -> DescribeAclsResponse:
    answer: DescribeAclsResponse = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                                  "resources": []}
    refused = _refusal(ctx, Operation.DESCRIBE, "No Authorizer is configured on the broker")  # Kafka's words
    if refused is None:
        wanted = _filter(request)
        try:
            wanted.validate()
        except AclError as exc:
            refused = ErrorCode.INVALID_REQUEST, str(exc)
    if refused is not None:
        answer["error_code"], answer["error_message"] = refused
        return answer
    resources: dict[tuple[int, str, int], list[DescribeAclsResponseAclDescription]] = {}
    for acl in ctx.services.authorizer.store:
        if wanted.matches(acl):
            resources.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
                {"principal": acl.principal, "host": acl.host, "operation": acl.operation,
                 "permission_type": acl.permission})
    answer["resources"] = [{"resource_type": kind, "resource_name": name, "pattern_type": pattern, "acls": acls}
                           for (kind, name, pattern), acls in resources.items()]
    return answer


@handler(ApiKey.CREATE_ACLS)
async def create_acls(ctx: RequestContext, request: dict[str, Any]) -> CreateAclsResponse:
    refused = _refusal(ctx, Operation.ALTER)
    if refused is not None:
        code, message = refused
        return {"throttle_time_ms": 0, "results": [{"error_code": code, "error_message": message}
                                                   for _ in request["creations"]]}
    results: list[CreateAclsResponseAclCreationResult] = []
    accepted: list[Acl] = []
    for entry in request["creations"]:
        acl = Acl(entry["resource_type"], entry["resource_name"], entry["resource_pattern_type"],
                  entry["principal"], entry["host"], entry["operation"], entry["permission_type"])
        try:
            if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
                raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
            if not acl.resource_name:
                raise AclError("Invalid empty resource name")
            validate_new(acl)
        except AclError as exc:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(exc)})
            continue
        accepted.append(acl)
        results.append({"error_code": ErrorCode.NONE, "error_message": None})
    if accepted:
        try:
            await ctx.services.topic_admin.change_acls(accepted, [])  # in a cluster: through the metadata quorum
        except KafkaError as exc:
            for result in results:
                if result["error_code"] == ErrorCode.NONE:
                    result["error_code"], result["error_message"] = exc.code, exc.message
            return {"throttle_time_ms": 0, "results": results}
        log.info("ACLs created", principal=ctx.principal, acls=[acl.describe() for acl in accepted])
    return {"throttle_time_ms": 0, "results": results}


@handler(ApiKey.DELETE_ACLS)
async def delete_acls(ctx: RequestContext, request: dict[str, Any]) -> DeleteAclsResponse:
    refused = _refusal(ctx, Operation.ALTER)
    if refused is not None:
        code, message = refused
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": code, "error_message": message, "matching_acls": []} for _ in request["filters"]]}
    store = ctx.services.authorizer.store
    results: list[DeleteAclsResponseFilterResult] = []
    doomed: dict[Acl, None] = {}
    for entry in request["filters"]:
        wanted = _filter(entry)
        try:
            wanted.validate()
        except AclError as exc:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(exc), "matching_acls": []})
            continue
        matching = [acl for acl in store if wanted.matches(acl)]
        doomed.update(dict.fromkeys(matching))
        results.append({"error_code": ErrorCode.NONE, "error_message": None, "matching_acls": [
            {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": acl.resource_type,
             "resource_name": acl.resource_name, "pattern_type": acl.pattern_type, "principal": acl.principal,
             "host": acl.host, "operation": acl.operation, "permission_type": acl.permission} for acl in matching]})
    if doomed:
        try:
            await ctx.services.topic_admin.change_acls([], list(doomed))
        except KafkaError as exc:
            for result in results:
                if result["error_code"] == ErrorCode.NONE:
                    result["error_code"], result["error_message"], result["matching_acls"] = exc.code, exc.message, []
            return {"throttle_time_ms": 0, "filter_results": results}
        log.info("ACLs deleted", principal=ctx.principal, acls=[acl.describe() for acl in doomed])
    return {"throttle_time_ms": 0, "filter_results": results}
