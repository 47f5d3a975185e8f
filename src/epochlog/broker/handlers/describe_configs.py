"""DescribeConfigs: a topic's effective log settings, or the broker's settings."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeConfigsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode

API = api(ApiKey.DESCRIBE_CONFIGS, 1, 4)

TOPIC = 2
BROKER = 4

# ConfigSource values of the protocol.
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# ConfigType values (v3+).
TYPE_STRING = 2
TYPE_LONG = 5


def _entry(name: str, value: str, source: int, version: int, synonyms: bool) -> Any:
    return DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult(
        name=name,
        value=value,
        read_only=False,
        config_source=source,
        is_default=source == DEFAULT_CONFIG,
        is_sensitive=False,
        synonyms=[
            DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult.DescribeConfigsSynonym(
                name=name, value=value, source=source
            )
        ]
        if synonyms
        else [],
        config_type=TYPE_LONG if value.lstrip("-").isdigit() else TYPE_STRING,
        documentation=None,
    )


def _topic_configs(broker: HandlerContext, name: str) -> dict[str, tuple[str, int]] | None:
    topic = broker.metadata_cache.topic(name)
    if topic is None:
        return None
    effective = broker.topic_log_config(topic.configs).to_properties()
    return {
        key: (value, DYNAMIC_TOPIC_CONFIG if key in topic.configs else DEFAULT_CONFIG)
        for key, value in effective.items()
    }


def _broker_configs(broker: HandlerContext, name: str) -> dict[str, tuple[str, int]] | None:
    if name not in ("", str(broker.broker_id)):
        return None
    return {key: (str(value), STATIC_BROKER_CONFIG) for key, value in broker.config.props.items()}


async def handle(broker: HandlerContext, request: Any, version: int, frame: RequestFrame) -> Any:
    results = []
    for resource in request.resources:
        if resource.resource_type == TOPIC:
            configs = _topic_configs(broker, resource.resource_name)
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif resource.resource_type == BROKER:
            configs = _broker_configs(broker, resource.resource_name)
            missing = ErrorCode.INVALID_REQUEST
        else:
            configs, missing = None, ErrorCode.INVALID_REQUEST
        keys = resource.configuration_keys
        entries = []
        if configs is not None:
            entries = [
                _entry(key, value, source, version, bool(request.include_synonyms))
                for key, (value, source) in sorted(configs.items())
                if keys is None or key in keys
            ]
        results.append(
            DescribeConfigsResponse.DescribeConfigsResult(
                error_code=ErrorCode.NONE if configs is not None else missing,
                error_message=None if configs is not None else f"no {resource.resource_name!r}",
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=entries,
            )
        )
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
