"""CreateTopics: validate each topic, then let the controller create it; from v5 the
answer carries the topic's settings with their sources (KIP-525), as DescribeConfigs
reports them."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import CreateTopicsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import check_partitions_per_request, error_code
from epochlog.broker.topic_configs import describe_topic_configs
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.security.api_rules import allowed
from epochlog.security.session import Session

API = api(ApiKey.CREATE_TOPICS, 2, 7)


def _configs(broker: HandlerContext, overrides: dict[str, str]) -> list[Any]:
    entry = CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs
    return [
        entry(
            name=d.setting.name,
            value=d.value,
            read_only=d.read_only,
            config_source=d.synonyms[0][2],
            is_sensitive=False,
        )
        for d in describe_topic_configs(broker, overrides)
    ]


async def _create_one(
    broker: HandlerContext, wanted: Any, validate_only: bool, timeout_s: float, version: int
) -> Any:
    result = CreateTopicsResponse.CreatableTopicResult(
        name=wanted.name,
        error_code=ErrorCode.NONE,
        error_message=None,
        num_partitions=-1,
        replication_factor=-1,
        configs=None,
    )
    try:
        configs = {c.name: c.value for c in wanted.configs if c.value is not None}
        assignment = None
        if wanted.assignments:
            assignment = {a.partition_index: list(a.broker_ids) for a in wanted.assignments}
            num_partitions = len(assignment)
            replication_factor = len(next(iter(assignment.values())))
        else:
            num_partitions = wanted.num_partitions
            if num_partitions == -1:
                num_partitions = broker.config["num.partitions"]
            replication_factor = wanted.replication_factor
            if replication_factor == -1:
                replication_factor = broker.config["default.replication.factor"]
        topic = await broker.create_topic(
            wanted.name,
            num_partitions,
            replication_factor,
            configs,
            assignment=assignment,
            validate_only=validate_only,
            timeout_s=timeout_s,
        )
        if topic is not None:
            result.topic_id = topic.topic_id
        result.num_partitions = num_partitions
        result.replication_factor = replication_factor
        if version >= 5:
            result.configs = _configs(broker, configs)
    except Exception as exc:
        result.error_code = error_code(exc)
        result.error_message = exc.message if isinstance(exc, KafkaError) else None
    return result


def _partitions_asked(broker: HandlerContext, wanted: Any) -> int:
    if wanted.assignments:
        return len(wanted.assignments)
    if wanted.num_partitions == -1:
        return broker.config["num.partitions"]
    return max(0, wanted.num_partitions)


def _refused(wanted: Any, exc: KafkaError) -> Any:
    return CreateTopicsResponse.CreatableTopicResult(
        name=wanted.name,
        error_code=exc.code,
        error_message=exc.message,
        num_partitions=-1,
        replication_factor=-1,
        configs=None,
    )


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    validate_only = bool(request.validate_only) if version >= 1 else False
    timeout_s = max(0, request.timeout_ms) / 1000
    try:
        check_partitions_per_request(
            broker, sum(_partitions_asked(broker, t) for t in request.topics)
        )
    except KafkaError as exc:
        return CreateTopicsResponse(
            throttle_time_ms=0, topics=[_refused(t, exc) for t in request.topics]
        )
    cluster_create = allowed(broker.authorizer, session, ApiKey.CREATE_TOPICS, "cluster")
    results = []
    for wanted in request.topics:
        if cluster_create or allowed(
            broker.authorizer, session, ApiKey.CREATE_TOPICS, "topic", wanted.name
        ):
            results.append(await _create_one(broker, wanted, validate_only, timeout_s, version))
        else:
            refused = KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "CREATE is not allowed")
            results.append(_refused(wanted, refused))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)
