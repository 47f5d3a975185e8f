"""OffsetFetch (v1-v8): committed offsets and, from v5, their leader epoch (KIP-320);
from v8 several groups in one request. No offset is answered as -1 with no error. From
v7 ``require_stable``: a partition with an undecided transactional commit answers
UNSTABLE_OFFSET_COMMIT. A group-level error (NOT_COORDINATOR, a refused DESCRIBE) comes
with no partitions from v2, as Kafka's: librdkafka retries a group's error but takes one
on a partition as final and leaves an assigned partition unread."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import OffsetFetchResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.coordinator.offsets import FetchedOffset
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import allowed, refusal
from epochlog.security.session import Session

API = api(ApiKey.OFFSET_FETCH, 1, 8)

V7Topic = OffsetFetchResponse.OffsetFetchResponseTopic
V8Group = OffsetFetchResponse.OffsetFetchResponseGroup
V8Topic = V8Group.OffsetFetchResponseTopics


def _fetch_one(
    broker: HandlerContext,
    session: Session,
    group_id: str,
    topics: list[Any] | None,
    require_stable: bool,
) -> tuple[ErrorCode, dict]:
    """A group's committed offsets: DESCRIBE on the group, and on each topic (a topic
    named gets TOPIC_AUTHORIZATION_FAILED, one of "all" is left out), as Kafka answers."""
    wanted = None
    if topics is not None:
        wanted = [(t.name, p) for t in topics for p in t.partition_indexes or []]
    refused = refusal(broker.authorizer, session, ApiKey.OFFSET_FETCH, "group", group_id)
    if refused != ErrorCode.NONE:
        return refused, {key: FetchedOffset(-1, -1, "", refused) for key in wanted or []}
    may = {
        name: allowed(broker.authorizer, session, ApiKey.OFFSET_FETCH, "topic", name)
        for name in {t.name for t in topics or []}
    }
    visible = [key for key in wanted if may[key[0]]] if wanted is not None else None
    error, found = broker.coordinator.offsets.fetch(group_id, visible, require_stable)
    if wanted is None:
        return error, {
            key: fetched
            for key, fetched in found.items()
            if allowed(broker.authorizer, session, ApiKey.OFFSET_FETCH, "topic", key[0])
        }
    refused_topic = FetchedOffset(-1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return error, {key: found.get(key, refused_topic) for key in wanted}


def _by_topic(found: dict) -> dict[str, list[tuple[int, Any]]]:
    topics: dict[str, list[tuple[int, Any]]] = {}
    for (topic, partition), fetched in found.items():
        topics.setdefault(topic, []).append((partition, fetched))
    return topics


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    stable = version >= 7 and bool(request.require_stable)
    if version >= 8:
        groups = []
        for g in request.groups or []:
            error, found = _fetch_one(broker, session, g.group_id, g.topics, stable)
            if error != ErrorCode.NONE:
                found = {}
            topics = [
                V8Topic(
                    name=name,
                    partitions=[
                        V8Topic.OffsetFetchResponsePartitions(
                            partition_index=index,
                            committed_offset=f.offset,
                            committed_leader_epoch=f.leader_epoch,
                            metadata=f.metadata,
                            error_code=f.error,
                        )
                        for index, f in parts
                    ],
                )
                for name, parts in _by_topic(found).items()
            ]
            groups.append(V8Group(group_id=g.group_id, topics=topics, error_code=error))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    # v1 has no null "all topics" and no top-level error: errors go per partition.
    topics_in = request.topics if version >= 2 or request.topics else []
    error, found = _fetch_one(broker, session, request.group_id, topics_in, stable)
    if error != ErrorCode.NONE and version >= 2:
        found = {}
    topics = [
        V7Topic(
            name=name,
            partitions=[
                V7Topic.OffsetFetchResponsePartition(
                    partition_index=index,
                    committed_offset=f.offset,
                    committed_leader_epoch=f.leader_epoch,
                    metadata=f.metadata,
                    error_code=f.error,
                )
                for index, f in parts
            ],
        )
        for name, parts in _by_topic(found).items()
    ]
    return OffsetFetchResponse(throttle_time_ms=0, topics=topics, error_code=error)
