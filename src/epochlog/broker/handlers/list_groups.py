"""ListGroups: the groups this broker coordinates (filtered by state from v4)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import ListGroupsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.security.api_rules import allowed
from epochlog.security.session import Session

API = api(ApiKey.LIST_GROUPS, 0, 4)


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    states = set(request.states_filter or []) if version >= 4 else None
    error, groups = broker.coordinator.list_groups(states)
    # DESCRIBE on the cluster lists every group; otherwise those it may DESCRIBE.
    if not allowed(broker.authorizer, session, ApiKey.LIST_GROUPS, "cluster"):
        groups = [
            g
            for g in groups
            if allowed(broker.authorizer, session, ApiKey.LIST_GROUPS, "group", g[0])
        ]
    return ListGroupsResponse(
        throttle_time_ms=0,
        error_code=error,
        groups=[
            ListGroupsResponse.ListedGroup(group_id=g, protocol_type=p, group_state=s)
            for g, p, s in groups
        ],
    )
