"""DeleteTopics: by name (all versions) or by topic ID (v6+)."""

from __future__ import annotations

import uuid
from typing import Any

from kafka.protocol.admin import DeleteTopicsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import error_code
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.security.api_rules import allowed
from epochlog.security.session import Session

API = api(ApiKey.DELETE_TOPICS, 1, 6)

ZERO_UUID = uuid.UUID(int=0)


async def _delete_one(
    broker: HandlerContext,
    session: Session,
    name: str | None,
    topic_id: uuid.UUID,
    timeout_s: float,
) -> Any:
    result = DeleteTopicsResponse.DeletableTopicResult(
        name=name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None
    )
    try:
        if not broker.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
        if name is None:
            name = broker.metadata_cache.topic_name(topic_id)
            # A topic ID is not resolved for whoever may not see the topic (Kafka).
            if name is None or not allowed(
                broker.authorizer, session, ApiKey.DELETE_TOPICS, "describe", name
            ):
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, str(topic_id))
            result.name = name
        if not allowed(broker.authorizer, session, ApiKey.DELETE_TOPICS, "topic", name):
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "DELETE is not allowed")
        topic = await broker.cluster.delete_topic(name, timeout_s)
        result.topic_id = topic.topic_id
    except Exception as exc:
        result.error_code = error_code(exc)
        result.error_message = exc.message if isinstance(exc, KafkaError) else None
    return result


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    if version >= 6:
        wanted = [(t.name, t.topic_id or ZERO_UUID) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    return DeleteTopicsResponse(
        throttle_time_ms=0,
        responses=[
            await _delete_one(broker, session, name, topic_id, request.timeout_ms / 1000)
            for name, topic_id in wanted
        ],
    )
