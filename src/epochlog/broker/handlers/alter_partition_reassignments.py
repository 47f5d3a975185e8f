"""AlterPartitionReassignments (KIP-455): move partitions to new replica sets, or cancel
a move (null replicas). Each partition is checked against its state as the metastore
holds it (``controller/reassignment.refusal``: Kafka's errors), then filed for the
controller, which starts or cancels it; the answer comes once it has taken them up."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import AlterPartitionReassignmentsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.controller.reassignment import refusal
from epochlog.metadata.layout import ReassignRequest
from epochlog.metadata.model import TopicMetadata
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import allowed
from epochlog.security.session import Session

API = api(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1)

Outcome = tuple[ErrorCode, str | None]


async def _check(
    broker: HandlerContext, request: Any, version: int
) -> tuple[dict[tuple[str, int], Outcome], list[ReassignRequest]]:
    """Each partition's error (NONE if acceptable) and the requests to file."""
    assert broker.cluster is not None
    allow_rf_change = request.allow_replication_factor_change if version >= 1 else True
    live = set(broker.metadata_cache.brokers)
    topics: dict[str, TopicMetadata | None] = {}
    outcomes: dict[tuple[str, int], Outcome] = {}
    moves = []
    for topic in request.topics:
        if topic.name not in topics:
            topics[topic.name] = await broker.cluster.stored_topic(topic.name)
        meta = topics[topic.name]
        for part in topic.partitions:
            key = (topic.name, part.partition_index)
            state = meta.partitions.get(part.partition_index) if meta else None
            if state is None:
                outcomes[key] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {key}")
                continue
            target = None if part.replicas is None else list(part.replicas)
            why = refusal(state, target, live, allow_rf_change)
            if why is not None:
                outcomes[key] = why
                continue
            outcomes[key] = (ErrorCode.NONE, None)
            moves.append(ReassignRequest(topic.name, part.partition_index, target))
    return outcomes, moves


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    top: Outcome = (ErrorCode.NONE, None)
    if not allowed(broker.authorizer, session, ApiKey.ALTER_PARTITION_REASSIGNMENTS, "cluster"):
        # Kafka's answer: the request's error and every partition's.
        top = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster is not allowed")
        outcomes = {(t.name, p.partition_index): top for t in request.topics for p in t.partitions}
    else:
        assert broker.cluster is not None
        outcomes, moves = await _check(broker, request, version)
        timeout_s = max(0, request.timeout_ms) / 1000
        if not await broker.cluster.request_reassignments(moves, timeout_s):
            late = (ErrorCode.REQUEST_TIMED_OUT, "filed; the controller has not taken it up yet")
            outcomes.update({(m.topic, m.partition): late for m in moves})
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), (code, message) in outcomes.items():
        by_topic.setdefault(topic, []).append(
            AlterPartitionReassignmentsResponse.ReassignableTopicResponse.ReassignablePartitionResponse(
                partition_index=partition, error_code=code, error_message=message
            )
        )
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0,
        allow_replication_factor_change=(
            request.allow_replication_factor_change if version >= 1 else True
        ),
        error_code=top[0],
        error_message=top[1],
        responses=[
            AlterPartitionReassignmentsResponse.ReassignableTopicResponse(
                name=topic, partitions=parts
            )
            for topic, parts in by_topic.items()
        ],
    )
