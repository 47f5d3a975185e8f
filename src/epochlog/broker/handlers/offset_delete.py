"""OffsetDelete: remove a group's committed offsets for partitions it no longer reads."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import OffsetDeleteResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import allowed, refusal
from epochlog.security.session import Session

API = api(ApiKey.OFFSET_DELETE, 0, 0)

Resp = OffsetDeleteResponse.OffsetDeleteResponseTopic


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    cache = broker.metadata_cache
    order = [(t.name, p.partition_index) for t in request.topics or [] for p in t.partitions or []]
    error = refusal(broker.authorizer, session, ApiKey.OFFSET_DELETE, "group", request.group_id)
    if error != ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=error, throttle_time_ms=0, topics=[])
    readable = {
        name: allowed(broker.authorizer, session, ApiKey.OFFSET_DELETE, "topic", name)
        for name in {key[0] for key in order}
    }
    known = [
        k
        for k in order
        if readable[k[0]] and (t := cache.topic(k[0])) is not None and k[1] in t.partitions
    ]
    error, answers = await broker.coordinator.offsets.delete_offsets(request.group_id, known)
    answers = {
        **{k: ErrorCode.TOPIC_AUTHORIZATION_FAILED for k in order if not readable[k[0]]},
        **answers,
    }
    topics: dict[str, list[Any]] = {}
    if error == ErrorCode.NONE:
        for key in order:
            code = answers.get(key, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            topics.setdefault(key[0], []).append(
                Resp.OffsetDeleteResponsePartition(partition_index=key[1], error_code=code)
            )
    return OffsetDeleteResponse(
        error_code=error,
        throttle_time_ms=0,
        topics=[Resp(name=name, partitions=parts) for name, parts in topics.items()],
    )
