"""DescribeAcls (v1-v3): the ACL bindings matching a filter, grouped by resource
pattern. Needs DESCRIBE on the cluster; SECURITY_DISABLED without an authorizer."""

from __future__ import annotations

from enum import IntEnum
from typing import Any, TypeVar

from kafka.protocol.admin import DescribeAclsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.DESCRIBE_ACLS, 1, 3)

E = TypeVar("E", bound=IntEnum)


def enum_of(kind: type[E], code: int) -> E:
    """A wire code as its enum member; a code this broker does not know is UNKNOWN (0)."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)


def acl_filter(fields: Any) -> AclBindingFilter:
    """The filter of a DescribeAcls request or of one DeleteAcls filter."""
    return AclBindingFilter(
        enum_of(ResourceType, fields.resource_type_filter),
        fields.resource_name_filter,
        enum_of(PatternType, fields.pattern_type_filter),
        fields.principal_filter,
        fields.host_filter,
        enum_of(AclOperation, fields.operation),
        enum_of(AclPermissionType, fields.permission_type),
    )


def _resources(bindings: list[AclBinding]) -> list[Any]:
    grouped: dict[ResourcePattern, list[Any]] = {}
    for b in bindings:
        grouped.setdefault(b.pattern, []).append(
            DescribeAclsResponse.DescribeAclsResource.AclDescription(
                principal=b.entry.principal,
                host=b.entry.host,
                operation=b.entry.operation,
                permission_type=b.entry.permission_type,
            )
        )
    return [
        DescribeAclsResponse.DescribeAclsResource(
            resource_type=pattern.resource_type,
            resource_name=pattern.name,
            pattern_type=pattern.pattern_type,
            acls=acls,
        )
        for pattern, acls in grouped.items()
    ]


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    code = refusal(broker.authorizer, session, ApiKey.DESCRIBE_ACLS, "cluster")
    message = None if code == ErrorCode.NONE else "DESCRIBE on the cluster is not allowed"
    wanted = acl_filter(request)
    if broker.authorizer is None:
        code, message = ErrorCode.SECURITY_DISABLED, "no authorizer is configured"
    elif code == ErrorCode.NONE and (problem := wanted.error()) is not None:
        code, message = ErrorCode.INVALID_REQUEST, problem
    if code != ErrorCode.NONE:
        return DescribeAclsResponse(
            throttle_time_ms=0, error_code=code, error_message=message, resources=[]
        )
    found = [b for b in broker.authorizer.bindings() if wanted.matches(b)]
    return DescribeAclsResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        resources=_resources(found),
    )
