"""What the config APIs share: a topic's settings as DescribeConfigs and CreateTopics
(v5+) report them, each with its source and the chain of synonyms down to its default;
and for AlterConfigs and IncrementalAlterConfigs, a topic's settings replaced by a new
full set, validated, written through the controller's metadata, and answered once this
broker follows the change (so the client reads its own write)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import DescribeConfigsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import error_code
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session
from epochlog.settings.broker import BROKER as BROKER_SETTINGS
from epochlog.settings.registry import ConfigType, Setting
from epochlog.settings.topic import SYNONYMS
from epochlog.settings.topic import TOPIC as TOPIC_SETTINGS

TOPIC = 2
ALTER_VISIBLE_TIMEOUT_S = 10.0

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


def setting_text(setting: Setting, value: object) -> str | None:
    """A value as Kafka writes it, None for none."""
    return None if value is None else setting.kind.render(value)


def describe_topic_configs(broker: HandlerContext, overrides: dict[str, str]) -> list[Described]:
    """Every topic setting of a topic with these overrides: its effective value and
    where it comes from (the topic, the broker's file, the default)."""
    effective = broker.topic_log_config(overrides).to_properties()
    server = broker.config.settings
    described = []
    for setting in TOPIC_SETTINGS:
        chain: list[tuple[str, str | None, int]] = []
        if setting.name in overrides:
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
                (
                    first.name,
                    setting_text(first, BROKER_SETTINGS.default(first.name)),
                    DEFAULT_CONFIG,
                )
            )
        else:
            chain.append(
                (
                    setting.name,
                    setting_text(setting, TOPIC_SETTINGS.default(setting.name)),
                    DEFAULT_CONFIG,
                )
            )
        described.append(Described(setting, effective[setting.name], chain, read_only=False))
    return described


def config_refusal(
    broker: HandlerContext, session: Session, api: int, resource: Any
) -> ErrorCode | None:
    """The authorization error for altering ``resource``'s settings (ALTER_CONFIGS on
    the topic, or on the cluster for a broker resource), None when allowed."""
    if resource.resource_type == TOPIC:
        code = refusal(broker.authorizer, session, api, "topic", resource.resource_name)
    else:
        code = refusal(broker.authorizer, session, api, "cluster")
    return None if code == ErrorCode.NONE else code


def refused_answer(answer: Any, code: ErrorCode) -> Any:
    answer.error_code, answer.error_message = code, "ALTER_CONFIGS is not allowed"
    return answer


async def alter_topic_configs(
    broker: HandlerContext,
    resource: Any,
    new_configs: Callable[[dict[str, str]], dict[str, str]],
    validate_only: bool,
    answer: Any,
) -> Any:
    """Fill ``answer`` (a response's resource entry) for ``resource``, whose settings
    become ``new_configs(current)``."""
    answer.error_code, answer.error_message = ErrorCode.NONE, None
    try:
        if resource.resource_type != TOPIC:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "only topic settings can be altered")
        name = resource.resource_name
        topic = broker.metadata_cache.topic(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        configs = new_configs(topic.configs)
        broker.validate_topic_configs(configs)
        if not validate_only:
            await broker.cluster.alter_topic_configs(name, configs)
            await broker.cluster.wait_for_state(
                lambda: getattr(broker.metadata_cache.topic(name), "configs", None) == configs,
                ALTER_VISIBLE_TIMEOUT_S,
            )
    except Exception as exc:
        answer.error_code = error_code(exc)
        answer.error_message = exc.message if isinstance(exc, KafkaError) else None
    return answer
