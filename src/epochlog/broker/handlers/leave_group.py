"""LeaveGroup: members leave at once instead of timing out (batched from v3)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import LeaveGroupResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.LEAVE_GROUP, 0, 4)


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    if version >= 3:
        leaving = [(m.member_id or "", m.group_instance_id) for m in request.members or []]
    else:
        leaving = [(request.member_id, None)]
    refused = refusal(broker.authorizer, session, ApiKey.LEAVE_GROUP, "group", request.group_id)
    if refused != ErrorCode.NONE:
        return LeaveGroupResponse(throttle_time_ms=0, error_code=refused, members=[])
    error, per_member = broker.coordinator.membership.leave(request.group_id, leaving)
    if version < 3:
        if error == ErrorCode.NONE and per_member:
            error = per_member[0]
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error)
    members = [
        LeaveGroupResponse.MemberResponse(
            member_id=member_id, group_instance_id=instance, error_code=code
        )
        for (member_id, instance), code in zip(leaving, per_member, strict=False)
    ]
    return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=members)
