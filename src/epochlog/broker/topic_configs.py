"""What AlterConfigs and IncrementalAlterConfigs share: a topic's settings replaced by a
new full set, validated, written through the controller's metadata, and answered once
this broker follows the change (so the client reads its own write)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import error_code
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

TOPIC = 2
ALTER_VISIBLE_TIMEOUT_S = 10.0


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
