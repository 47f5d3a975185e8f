"""SyncGroup: the leader hands in the assignment; every member gets its part."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import SyncGroupResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.SYNC_GROUP, 0, 5)


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    coordinator = broker.coordinator
    refused = refusal(broker.authorizer, session, ApiKey.SYNC_GROUP, "group", request.group_id)
    if refused != ErrorCode.NONE:
        return SyncGroupResponse(
            throttle_time_ms=0,
            error_code=refused,
            protocol_type=None,
            protocol_name=None,
            assignment=b"",
        )
    error, assignment = await coordinator.membership.sync(
        request.group_id,
        request.generation_id,
        request.member_id,
        request.group_instance_id if version >= 3 else None,
        request.protocol_type if version >= 5 else None,
        request.protocol_name if version >= 5 else None,
        {a.member_id: bytes(a.assignment or b"") for a in request.assignments or []},
    )
    group = coordinator.registry.groups.get(request.group_id)
    return SyncGroupResponse(
        throttle_time_ms=0,
        error_code=error,
        protocol_type=group.protocol_type if group is not None else None,
        protocol_name=group.protocol_name if group is not None else None,
        assignment=assignment,
    )
