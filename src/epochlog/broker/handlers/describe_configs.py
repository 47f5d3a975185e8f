"""DescribeConfigs: a topic's effective settings or a broker's, each with where its
value comes from, its type and documentation (v3+), from the settings registries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import DescribeConfigsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session
from epochlog.settings.broker import BROKER as BROKER_SETTINGS
from epochlog.settings.registry import ConfigType, Setting
from epochlog.settings.topic import SYNONYMS
from epochlog.settings.topic import TOPIC as TOPIC_SETTINGS

API = api(ApiKey.DESCRIBE_CONFIGS, 1, 4)

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

# ConfigSource values of the protocol.
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


@dataclass(frozen=True)
class Described:
    """One setting as DescribeConfigs reports it; ``synonyms`` (each in its own unit) run
    from the one in force down to the default, as Kafka lists them."""

    setting: Setting
    value: str | None
    synonyms: list[tuple[str, str | None, int]]
    read_only: bool

    def entry(self, with_synonyms: bool, with_documentation: bool) -> Any:
        source = self.synonyms[0][2]
        result = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
        # Keys and passwords are reported as set or not, never with their value (Kafka).
        sensitive = self.setting.kind.config_type == ConfigType.PASSWORD
        return result(
            name=self.setting.name,
            value=None if sensitive else self.value,
            read_only=self.read_only,
            config_source=source,
            is_default=source == DEFAULT_CONFIG,
            is_sensitive=sensitive,
            synonyms=[
                result.DescribeConfigsSynonym(name=n, value=None if sensitive else v, source=s)
                for n, v, s in self.synonyms
            ]
            if with_synonyms
            else [],
            config_type=int(self.setting.kind.config_type),
            documentation=self.setting.doc if with_documentation else None,
        )


def _text(setting: Setting, value: object) -> str | None:
    return None if value is None else setting.kind.render(value)


def _topic_configs(broker: HandlerContext, name: str) -> list[Described] | None:
    topic = broker.metadata_cache.topic(name)
    if topic is None:
        return None
    effective = broker.topic_log_config(topic.configs).to_properties()
    server = broker.config.settings
    described = []
    for setting in TOPIC_SETTINGS:
        chain: list[tuple[str, str | None, int]] = []
        if setting.name in topic.configs:
            chain.append((setting.name, effective[setting.name], DYNAMIC_TOPIC_CONFIG))
        synonyms = [BROKER_SETTINGS[n] for n, _ in SYNONYMS[setting.name]]
        chain += [
            (s.name, server.text(s.name), STATIC_BROKER_CONFIG)
            for s in synonyms
            if s.name in server.given
        ]
        defaults = [s for s in synonyms if BROKER_SETTINGS.default(s.name) is not None]
        if defaults:
            first = defaults[0]
            chain.append(
                (first.name, _text(first, BROKER_SETTINGS.default(first.name)), DEFAULT_CONFIG)
            )
        else:
            chain.append(
                (setting.name, _text(setting, TOPIC_SETTINGS.default(setting.name)), DEFAULT_CONFIG)
            )
        described.append(Described(setting, effective[setting.name], chain, read_only=False))
    return described


def _broker_configs(broker: HandlerContext, name: str) -> list[Described] | None:
    if name not in ("", str(broker.broker_id)):
        return None
    server = broker.config.settings
    described = []
    for setting in BROKER_SETTINGS:
        default = _text(setting, BROKER_SETTINGS.default(setting.name))
        chain = [(setting.name, default, DEFAULT_CONFIG)]
        if setting.name in server.given:
            chain.insert(0, (setting.name, server.text(setting.name), STATIC_BROKER_CONFIG))
        described.append(Described(setting, chain[0][1], chain, read_only=True))
    return described


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    results = []
    for resource in request.resources:
        if resource.resource_type == TOPIC_RESOURCE:
            name = resource.resource_name
            refused = refusal(broker.authorizer, session, ApiKey.DESCRIBE_CONFIGS, "topic", name)
        else:
            refused = refusal(broker.authorizer, session, ApiKey.DESCRIBE_CONFIGS, "cluster")
        if refused != ErrorCode.NONE:
            configs, missing = None, refused
        elif resource.resource_type == TOPIC_RESOURCE:
            configs = _topic_configs(broker, resource.resource_name)
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif resource.resource_type == BROKER_RESOURCE:
            configs = _broker_configs(broker, resource.resource_name)
            missing = ErrorCode.INVALID_REQUEST
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
