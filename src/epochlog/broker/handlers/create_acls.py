"""CreateAcls (v1-v3): store ACL bindings in the metastore, where every broker's
authorizer follows them. Needs ALTER on the cluster; SECURITY_DISABLED without an
authorizer, as Kafka answers."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import CreateAclsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.handlers.describe_acls import enum_of
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    binding_error,
)
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.CREATE_ACLS, 1, 3)

_Result = CreateAclsResponse.AclCreationResult


def _binding(creation: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            enum_of(ResourceType, creation.resource_type),
            creation.resource_name,
            enum_of(PatternType, creation.resource_pattern_type),
        ),
        AccessControlEntry(
            creation.principal,
            creation.host,
            enum_of(AclOperation, creation.operation),
            enum_of(AclPermissionType, creation.permission_type),
        ),
    )


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    creations = request.creations or []
    code = refusal(broker.authorizer, session, ApiKey.CREATE_ACLS, "cluster")
    if broker.acl_store is None:
        code = ErrorCode.SECURITY_DISABLED
    if code != ErrorCode.NONE:
        message = (
            "no authorizer is configured"
            if broker.acl_store is None
            else "ALTER on the cluster is not allowed"
        )
        return CreateAclsResponse(
            throttle_time_ms=0,
            results=[_Result(error_code=code, error_message=message) for _ in creations],
        )
    results = []
    valid = []
    for creation in creations:
        binding = _binding(creation)
        error = binding_error(binding)
        if error is None:
            valid.append(binding)
            results.append(_Result(error_code=ErrorCode.NONE, error_message=None))
        else:
            results.append(_Result(error_code=ErrorCode.INVALID_REQUEST, error_message=error))
    await broker.acl_store.add(valid)
    return CreateAclsResponse(throttle_time_ms=0, results=results)
