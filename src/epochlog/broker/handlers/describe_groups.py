"""DescribeGroups: state, protocol and members (with assignments when Stable), and from
v3 when asked, what the principal may do to each group (its authorized operations)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeGroupsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.acls import ResourceType
from epochlog.security.api_rules import authorized_operations, refusal
from epochlog.security.session import Session

API = api(ApiKey.DESCRIBE_GROUPS, 0, 5)

Described = DescribeGroupsResponse.DescribedGroup


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    groups = []
    with_operations = version >= 3 and bool(request.include_authorized_operations)
    for group_id in request.groups or []:
        refused = refusal(broker.authorizer, session, ApiKey.DESCRIBE_GROUPS, "group", group_id)
        if refused != ErrorCode.NONE:
            groups.append(
                Described(
                    error_code=refused,
                    group_id=group_id,
                    group_state="",
                    protocol_type="",
                    protocol_data="",
                    members=[],
                )
            )
            continue
        d = broker.coordinator.describe(group_id)
        members = [
            Described.DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata,
                member_assignment=m.assignment,
            )
            for m in d.members
        ]
        groups.append(
            Described(
                error_code=d.error,
                group_id=group_id,
                group_state=d.state,
                protocol_type=d.protocol_type,
                protocol_data=d.protocol_data,
                members=members,
                # As Kafka: filled in only for a group described without error.
                authorized_operations=authorized_operations(
                    broker.authorizer, session, ResourceType.GROUP, group_id
                )
                if with_operations and d.error == ErrorCode.NONE
                else None,
            )
        )
    return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)
