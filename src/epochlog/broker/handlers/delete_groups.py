"""DeleteGroups: remove empty groups and their committed offsets (tombstones)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DeleteGroupsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.DELETE_GROUPS, 0, 2)


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    results = []
    for group_id in request.groups_names or []:
        code = refusal(broker.authorizer, session, ApiKey.DELETE_GROUPS, "group", group_id)
        if code == ErrorCode.NONE:
            code = await broker.coordinator.offsets.delete_group(group_id)
        results.append(
            DeleteGroupsResponse.DeletableGroupResult(group_id=group_id, error_code=code)
        )
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)
