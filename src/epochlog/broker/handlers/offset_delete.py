"""OffsetDelete: remove a group's committed offsets for partitions it no longer reads."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import OffsetDeleteResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.session import Session

API = api(ApiKey.OFFSET_DELETE, 0, 0)

Resp = OffsetDeleteResponse.OffsetDeleteResponseTopic


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    cache = broker.metadata_cache
    order = [(t.name, p.partition_index) for t in request.topics or [] for p in t.partitions or []]
    known = [k for k in order if (t := cache.topic(k[0])) is not None and k[1] in t.partitions]
    error, answers = await broker.coordinator.offsets.delete_offsets(request.group_id, known)
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
