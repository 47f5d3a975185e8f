"""DescribeConfigs: a topic's effective settings, a broker's in force or the
cluster-wide default's, each with where its value comes from (a topic's own, a
broker's dynamic ones, the cluster-wide default, the broker's file, the default), its
type and documentation (v3+), from the settings registries."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeConfigsResponse

from epochlog.broker.broker_configs import Described, describe_broker_configs
from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.topic_configs import describe_topic_configs
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.config_resources import ConfigResource
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.DESCRIBE_CONFIGS, 1, 4)


def _topic_configs(broker: HandlerContext, name: str) -> list[Described] | None:
    topic = broker.metadata_cache.topic(name)
    return None if topic is None else describe_topic_configs(broker, topic.configs)


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    results = []
    for resource in request.resources:
        if resource.resource_type == ConfigResource.TOPIC:
            name = resource.resource_name
            refused = refusal(broker.authorizer, session, ApiKey.DESCRIBE_CONFIGS, "topic", name)
        else:
            refused = refusal(broker.authorizer, session, ApiKey.DESCRIBE_CONFIGS, "cluster")
        if refused != ErrorCode.NONE:
            configs, missing = None, refused
        elif resource.resource_type == ConfigResource.TOPIC:
            configs = _topic_configs(broker, resource.resource_name)
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif resource.resource_type == ConfigResource.BROKER:
            missing = ErrorCode.INVALID_REQUEST
            try:
                configs = describe_broker_configs(broker, resource.resource_name)
            except KafkaError as exc:
                configs, missing = None, exc.code
        else:
            configs, missing = None, ErrorCode.INVALID_REQUEST
        keys = resource.configuration_keys
        documentation = version >= 3 and bool(request.include_documentation)
        entries = [
            d.entry(bool(request.include_synonyms), documentation)
            for d in configs or []
            if keys is None or d.setting.name in keys
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
