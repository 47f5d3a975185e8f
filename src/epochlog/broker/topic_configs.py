"""What the config APIs share: a topic's settings as DescribeConfigs and CreateTopics
(v5+) report them, each with its source and the chain of synonyms down to its default
(the topic's own, then the broker settings it defaults from, level by level); and for
AlterConfigs and IncrementalAlterConfigs, a resource's settings replaced by a new full
set, validated, written (a topic's through the controller's metadata, a broker's to
the dynamic settings: ``broker_configs``), and answered once this broker follows the
change (so the client reads its own write)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from epochlog.broker.broker_configs import (
    Described,
    alter_broker_configs,
    broker_chain,
    setting_text,
)
from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import error_code
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session
from epochlog.settings.dynamic import DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG
from epochlog.settings.topic import SYNONYMS
from epochlog.settings.topic import TOPIC as TOPIC_SETTINGS

TOPIC = 2
BROKER = 4
ALTER_VISIBLE_TIMEOUT_S = 10.0


def describe_topic_configs(broker: HandlerContext, overrides: dict[str, str]) -> list[Described]:
    """Every topic setting of a topic with these overrides: its effective value and
    where it comes from (the topic, a broker's dynamic settings, its file, the default)."""
    effective = broker.topic_log_config(overrides).to_properties()
    described = []
    for setting in TOPIC_SETTINGS:
        chain: list[tuple[str, str | None, int]] = []
        if setting.name in overrides:
            chain.append((setting.name, effective[setting.name], DYNAMIC_TOPIC_CONFIG))
        synonyms = [n for n, _ in SYNONYMS[setting.name]]
        chain += broker_chain(broker.dynamic_configs, synonyms)
        if chain[-1:] == [] or chain[-1][2] != DEFAULT_CONFIG:
            default = setting_text(setting, TOPIC_SETTINGS.default(setting.name))
            chain.append((setting.name, default, DEFAULT_CONFIG))
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


async def _alter_topic_configs(
    broker: HandlerContext,
    name: str,
    new_configs: Callable[[dict[str, str]], dict[str, str]],
    validate_only: bool,
) -> None:
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


async def alter_configs(
    broker: HandlerContext,
    resource: Any,
    new_configs: Callable[[dict[str, str]], dict[str, str]],
    validate_only: bool,
    answer: Any,
) -> Any:
    """Fill ``answer`` (a response's resource entry) for ``resource`` (a topic or a
    broker), whose settings become ``new_configs(current)``."""
    answer.error_code, answer.error_message = ErrorCode.NONE, None
    name = resource.resource_name
    try:
        if resource.resource_type == TOPIC:
            await _alter_topic_configs(broker, name, new_configs, validate_only)
        elif resource.resource_type == BROKER:
            await alter_broker_configs(broker, name, new_configs, validate_only)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "only topic and broker settings change")
    except Exception as exc:
        answer.error_code = error_code(exc)
        answer.error_message = exc.message if isinstance(exc, KafkaError) else None
    return answer
