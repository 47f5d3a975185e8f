"""IncrementalAlterConfigs: change a topic's settings (e.g. enable unclean leader
election), or a broker's dynamic ones (its own or the cluster-wide default), without
restating the others, SET and DELETE on any setting, APPEND and SUBTRACT on list ones
(``cleanup.policy``, ``log.cleanup.policy``); the controller and every broker follow."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import IncrementalAlterConfigsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.topic_configs import alter_configs, config_refusal, refused_answer
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.config_resources import ConfigResource
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.security.session import Session
from epochlog.settings.broker import BROKER
from epochlog.settings.registry import ConfigType, Registry
from epochlog.settings.topic import TOPIC

API = api(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _list_change(configs: dict[str, str], change: Any, registry: Registry) -> str:
    """APPEND or SUBTRACT on a list setting, from the resource's value or else the
    setting's own default (as Kafka's ConfigAdminManager does)."""
    name = change.name
    if name not in registry:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name}: unknown setting")
    setting = registry[name]
    if setting.kind.config_type != ConfigType.LIST:
        raise KafkaError(
            ErrorCode.INVALID_CONFIG, f"{name}: APPEND and SUBTRACT apply to list settings only"
        )
    current = configs.get(name, setting.kind.render(registry.default(name)))
    values = [v.strip() for v in current.split(",") if v.strip()]
    given = [v.strip() for v in (change.value or "").split(",") if v.strip()]
    if change.config_operation == APPEND:
        values += [v for v in given if v not in values]
    else:
        values = [v for v in values if v not in given]
    return ",".join(values)


def _apply(current: dict[str, str], changes: Any, registry: Registry) -> dict[str, str]:
    configs = dict(current)
    for change in changes:
        if change.config_operation == SET:
            configs[change.name] = change.value
        elif change.config_operation == DELETE:
            configs.pop(change.name, None)
        elif change.config_operation in (APPEND, SUBTRACT):
            configs[change.name] = _list_change(configs, change, registry)
        else:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, f"{change.name}: operation {change.config_operation}"
            )
    return configs


async def _alter(
    broker: HandlerContext, session: Session, resource: Any, validate_only: bool
) -> Any:
    answer = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
        resource_type=resource.resource_type, resource_name=resource.resource_name
    )
    refused = config_refusal(broker, session, ApiKey.INCREMENTAL_ALTER_CONFIGS, resource)
    if refused is not None:
        return refused_answer(answer, refused)
    registry = TOPIC if resource.resource_type == ConfigResource.TOPIC else BROKER
    return await alter_configs(
        broker, resource, lambda current: _apply(current, resource.configs or [], registry),
        validate_only, answer,
    )  # fmt: skip


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
