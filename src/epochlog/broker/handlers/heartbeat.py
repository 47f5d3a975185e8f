"""Heartbeat: keeps a member's session alive and tells it when to rejoin."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import HeartbeatResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.HEARTBEAT, 0, 4)


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    refused = refusal(broker.authorizer, session, ApiKey.HEARTBEAT, "group", request.group_id)
    if refused != ErrorCode.NONE:
        return HeartbeatResponse(throttle_time_ms=0, error_code=refused)
    error = broker.coordinator.membership.heartbeat(
        request.group_id,
        request.generation_id,
        request.member_id,
        request.group_instance_id if version >= 3 else None,
    )
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)
