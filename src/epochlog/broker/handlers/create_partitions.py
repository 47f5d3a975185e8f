"""CreatePartitions: grow a topic's partition count."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import CreatePartitionsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import check_partitions_per_request, error_code
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.security.api_rules import allowed
from epochlog.security.session import Session

API = api(ApiKey.CREATE_PARTITIONS, 0, 3)


async def _grow(broker: HandlerContext, session: Session, wanted: Any, validate_only: bool) -> Any:
    result = CreatePartitionsResponse.CreatePartitionsTopicResult(
        name=wanted.name, error_code=ErrorCode.NONE, error_message=None
    )
    try:
        if not allowed(broker.authorizer, session, ApiKey.CREATE_PARTITIONS, "topic", wanted.name):
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "ALTER is not allowed")
        topic = broker.metadata_cache.topic(wanted.name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {wanted.name!r}")
        current = len(topic.partitions)
        if wanted.count <= current:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic {wanted.name!r} has {current} partitions; the new count must be larger",
            )
        if wanted.assignments:
            assignment = {current + i: list(a.broker_ids) for i, a in enumerate(wanted.assignments)}
            broker.validate_assignments(assignment)
        else:
            replication_factor = len(next(iter(topic.partitions.values())).replicas)
            grown = broker.cluster.assign(wanted.count, replication_factor, start=0)
            assignment = {i: grown[i] for i in range(current, wanted.count)}
        if not validate_only:
            await broker.cluster.create_partitions(wanted.name, assignment)
    except Exception as exc:
        result.error_code = error_code(exc)
        result.error_message = exc.message if isinstance(exc, KafkaError) else None
    return result


def _partitions_added(broker: HandlerContext, wanted: Any) -> int:
    topic = broker.metadata_cache.topic(wanted.name)
    current = len(topic.partitions) if topic is not None else 0
    return max(0, wanted.count - current)


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    try:
        check_partitions_per_request(
            broker, sum(_partitions_added(broker, t) for t in request.topics)
        )
    except KafkaError as exc:
        return CreatePartitionsResponse(
            throttle_time_ms=0,
            results=[
                CreatePartitionsResponse.CreatePartitionsTopicResult(
                    name=t.name, error_code=exc.code, error_message=exc.message
                )
                for t in request.topics
            ],
        )
    return CreatePartitionsResponse(
        throttle_time_ms=0,
        results=[
            await _grow(broker, session, t, bool(request.validate_only)) for t in request.topics
        ],
    )
