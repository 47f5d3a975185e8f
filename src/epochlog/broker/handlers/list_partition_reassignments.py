"""ListPartitionReassignments (KIP-455): the reassignments in progress, as the partitions'
states carry them (replicas, adding_replicas, removing_replicas); all of them, or those
of the partitions named (unknown ones are left out, as Kafka's controller does)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import ListPartitionReassignmentsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import allowed
from epochlog.security.session import Session

API = api(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0)

Topic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
Partition = Topic.OngoingPartitionReassignment


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    if not allowed(broker.authorizer, session, ApiKey.LIST_PARTITION_REASSIGNMENTS, "cluster"):
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message="DESCRIBE on the cluster is needed",
            topics=[],
        )
    cache = broker.metadata_cache
    if request.topics is None:
        wanted = {t.name: sorted(t.partitions) for t in cache.topics()}
    else:
        wanted = {t.name: list(t.partition_indexes) for t in request.topics}
    topics = []
    for name, indexes in sorted(wanted.items()):
        meta = cache.topic(name)
        states = [(i, meta.partitions.get(i)) for i in indexes] if meta else []
        ongoing = [
            Partition(
                partition_index=i,
                replicas=list(s.replicas),
                adding_replicas=list(s.adding_replicas),
                removing_replicas=list(s.removing_replicas),
            )
            for i, s in states
            if s is not None and s.reassigning
        ]
        if ongoing:
            topics.append(Topic(name=name, partitions=ongoing))
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, topics=topics
    )
