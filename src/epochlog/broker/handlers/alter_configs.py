"""AlterConfigs, the legacy form kafka-configs.sh and older admin clients send: a
topic's settings become exactly the ones given (any left out return to their
defaults), unlike IncrementalAlterConfigs' per-setting operations."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import AlterConfigsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.topic_configs import alter_configs, config_refusal, refused_answer
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.security.session import Session

API = api(ApiKey.ALTER_CONFIGS, 0, 2)


async def _alter(
    broker: HandlerContext, session: Session, resource: Any, validate_only: bool
) -> Any:
    given = {c.name: c.value for c in resource.configs or [] if c.value is not None}
    answer = AlterConfigsResponse.AlterConfigsResourceResponse(
        resource_type=resource.resource_type, resource_name=resource.resource_name
    )
    refused = config_refusal(broker, session, ApiKey.ALTER_CONFIGS, resource)
    if refused is not None:
        return refused_answer(answer, refused)
    return await alter_configs(broker, resource, lambda _: given, validate_only, answer)


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    return AlterConfigsResponse(
        throttle_time_ms=0,
        responses=[
            await _alter(broker, session, r, bool(request.validate_only))
            for r in request.resources or []
        ],
    )
