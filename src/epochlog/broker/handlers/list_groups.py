"""ListGroups: the groups this broker coordinates, each with its state (v4, KIP-518)
and its type (v5, KIP-848), filtered by states and by types as Kafka filters them
(case-insensitively; an empty filter lists all). Every group here is a ``classic`` one:
KIP-848's ``consumer`` groups are not served, so a types filter without ``classic``
lists none."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import ListGroupsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.security.api_rules import allowed
from epochlog.security.session import Session

API = api(ApiKey.LIST_GROUPS, 0, 5)

CLASSIC = "classic"


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    states = set(request.states_filter or []) if version >= 4 else None
    error, groups = broker.coordinator.list_groups(states)
    types = {t.lower() for t in request.types_filter or []} if version >= 5 else set()
    if types and CLASSIC not in types:
        groups = []
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
            ListGroupsResponse.ListedGroup(
                group_id=g, protocol_type=p, group_state=s, group_type=CLASSIC
            )
            for g, p, s in groups
        ],
    )
