"""JoinGroup: enter a group's rebalance; answered when the join phase ends."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import JoinGroupResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.coordinator.membership import JoinRequest
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.JOIN_GROUP, 0, 7)


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    refused = refusal(broker.authorizer, session, ApiKey.JOIN_GROUP, "group", request.group_id)
    if refused != ErrorCode.NONE:
        return JoinGroupResponse(
            throttle_time_ms=0,
            error_code=refused,
            generation_id=-1,
            protocol_type=None,
            protocol_name=None if version >= 7 else "",
            leader="",
            member_id=request.member_id or "",
            members=[],
        )
    instance_id = request.group_instance_id if version >= 5 else None
    join = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id or "",
        group_instance_id=instance_id,
        client_id=frame.client_id or "",
        client_host="",
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else -1,
        protocol_type=request.protocol_type or "",
        protocols=[(p.name, bytes(p.metadata or b"")) for p in request.protocols or []],
        require_known_member_id=version >= 4 and instance_id is None,
    )
    answer = await broker.coordinator.membership.join(join)
    members = [
        JoinGroupResponse.JoinGroupResponseMember(
            member_id=member_id, group_instance_id=instance, metadata=metadata
        )
        for member_id, instance, metadata in answer.members
    ]
    protocol_name = answer.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=answer.error,
        generation_id=answer.generation_id,
        protocol_type=answer.protocol_type,
        protocol_name=protocol_name,
        leader=answer.leader_id,
        member_id=answer.member_id,
        members=members,
    )
