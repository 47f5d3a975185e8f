"""DeleteAcls (v1-v3): remove every ACL binding matching each filter, answering which
ones matched. Needs ALTER on the cluster; SECURITY_DISABLED without an authorizer."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DeleteAclsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.handlers.describe_acls import acl_filter
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.acls import AclBinding
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.DELETE_ACLS, 1, 3)

_Result = DeleteAclsResponse.DeleteAclsFilterResult
_Matching = _Result.DeleteAclsMatchingAcl


def _matching(b: AclBinding) -> Any:
    return _Matching(
        error_code=ErrorCode.NONE,
        error_message=None,
        resource_type=b.pattern.resource_type,
        resource_name=b.pattern.name,
        pattern_type=b.pattern.pattern_type,
        principal=b.entry.principal,
        host=b.entry.host,
        operation=b.entry.operation,
        permission_type=b.entry.permission_type,
    )


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    filters = [acl_filter(f) for f in request.filters or []]
    code = refusal(broker.authorizer, session, ApiKey.DELETE_ACLS, "cluster")
    message = None if code == ErrorCode.NONE else "ALTER on the cluster is not allowed"
    if broker.acl_store is None or broker.authorizer is None:
        code, message = ErrorCode.SECURITY_DISABLED, "no authorizer is configured"
    if code != ErrorCode.NONE:
        return DeleteAclsResponse(
            throttle_time_ms=0,
            filter_results=[
                _Result(error_code=code, error_message=message, matching_acls=[]) for _ in filters
            ],
        )
    results = []
    current = broker.authorizer.bindings()
    for wanted in filters:
        problem = wanted.error()
        if problem is not None:
            results.append(
                _Result(
                    error_code=ErrorCode.INVALID_REQUEST, error_message=problem, matching_acls=[]
                )
            )
            continue
        matched = [b for b in current if wanted.matches(b)]
        await broker.acl_store.remove(matched)
        results.append(
            _Result(
                error_code=ErrorCode.NONE,
                error_message=None,
                matching_acls=[_matching(b) for b in matched],
            )
        )
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)
