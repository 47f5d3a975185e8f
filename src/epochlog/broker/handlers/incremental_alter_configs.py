"""IncrementalAlterConfigs: change a topic's settings (e.g. enable unclean leader
election) without restating the others; the controller and every broker follow."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import IncrementalAlterConfigsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import error_code
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)

TOPIC = 2
ALTER_VISIBLE_TIMEOUT_S = 10.0
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _apply(current: dict[str, str], changes: Any) -> dict[str, str]:
    configs = dict(current)
    for change in changes:
        if change.config_operation == SET:
            configs[change.name] = change.value
        elif change.config_operation == DELETE:
            configs.pop(change.name, None)
        else:
            # APPEND and SUBTRACT apply to list settings, which no topic setting here is.
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, f"{change.name}: only SET and DELETE are supported"
            )
    return configs


async def _alter(
    broker: HandlerContext, session: Session, resource: Any, validate_only: bool
) -> Any:
    answer = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
        error_code=ErrorCode.NONE,
        error_message=None,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )
    try:
        if resource.resource_type == TOPIC:
            name = resource.resource_name
            refused = refusal(
                broker.authorizer, session, ApiKey.INCREMENTAL_ALTER_CONFIGS, "topic", name
            )
        else:
            refused = refusal(
                broker.authorizer, session, ApiKey.INCREMENTAL_ALTER_CONFIGS, "cluster"
            )
        if refused != ErrorCode.NONE:
            raise KafkaError(refused, "ALTER_CONFIGS is not allowed")
        if resource.resource_type != TOPIC:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "only topic settings can be altered")
        topic = broker.metadata_cache.topic(resource.resource_name)
        if topic is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {resource.resource_name!r}"
            )
        configs = _apply(topic.configs, resource.configs or [])
        broker.validate_topic_configs(configs)
        if not validate_only:
            await broker.cluster.alter_topic_configs(resource.resource_name, configs)
            # Answer once this broker follows the change, so the client reads its write.
            await broker.cluster.wait_for_state(
                lambda: (
                    getattr(broker.metadata_cache.topic(resource.resource_name), "configs", None)
                    == configs
                ),
                ALTER_VISIBLE_TIMEOUT_S,
            )
    except Exception as exc:
        answer.error_code = error_code(exc)
        answer.error_message = exc.message if isinstance(exc, KafkaError) else None
    return answer


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    return IncrementalAlterConfigsResponse(
        throttle_time_ms=0,
        responses=[
            await _alter(broker, session, r, bool(request.validate_only))
            for r in request.resources or []
        ],
    )
