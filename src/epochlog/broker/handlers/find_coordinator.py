"""FindCoordinator (v0-v4, batched keys from v4): the broker leading the group's
``__consumer_offsets`` partition (key type 0) or the transactional id's
``__transaction_state`` partition (key type 1). Both topics are created on first use,
as Kafka does."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kafka.protocol.metadata import FindCoordinatorResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.coordinator.hashing import OFFSETS_TOPIC, partition_for
from epochlog.metadata.model import TopicMetadata
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session
from epochlog.txn.partitioning import TRANSACTION_STATE_TOPIC

API = api(ApiKey.FIND_COORDINATOR, 0, 4)

log = logging.getLogger("epochlog.coordinator")

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
CREATE_TIMEOUT_S = 10.0


async def ensure_internal_topic(
    broker: HandlerContext,
    name: str,
    num_partitions: int,
    replication_factor: int,
    configs: dict[str, str],
    lock: asyncio.Lock,
) -> TopicMetadata | None:
    """An internal topic, created on first use (as Kafka does), replicated up to the
    live brokers."""
    cache = broker.metadata_cache
    topic = cache.topic(name)
    if topic is not None:
        return topic
    async with lock:
        topic = cache.topic(name)
        if topic is not None:
            return topic
        replication = max(1, min(replication_factor, len(cache.brokers)))
        try:
            await broker.create_topic(
                name, num_partitions, replication, configs, timeout_s=CREATE_TIMEOUT_S
            )
            log.info(
                "created %s with %d partitions, replication factor %d",
                name,
                num_partitions,
                replication,
            )
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.warning("could not create %s: %s", name, exc)
    return cache.topic(name)


async def ensure_offsets_topic(broker: HandlerContext) -> TopicMetadata | None:
    """``__consumer_offsets``: compacted (time and size retention apply only under
    ``delete``, so no key's latest value is lost to them)."""
    s = broker.coordinator.settings
    configs = {"cleanup.policy": "compact", "segment.bytes": str(s.segment_bytes)}
    return await ensure_internal_topic(
        broker,
        OFFSETS_TOPIC,
        s.num_partitions,
        s.replication_factor,
        configs,
        broker.coordinator.topic_creation,
    )


async def ensure_transaction_state_topic(broker: HandlerContext) -> TopicMetadata | None:
    """``__transaction_state``: compacted, with ``transaction.state.log.min.isr``."""
    s = broker.txn_coordinator.settings
    replication = max(1, min(s.replication_factor, len(broker.metadata_cache.brokers)))
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": str(s.segment_bytes),
        "min.insync.replicas": str(min(s.min_isr, replication)),
    }
    return await ensure_internal_topic(
        broker,
        TRANSACTION_STATE_TOPIC,
        s.num_partitions,
        replication,
        configs,
        broker.txn_coordinator.topic_creation,
    )


async def find(broker: HandlerContext, key: str | None, key_type: int, session: Session) -> Any:
    """One coordinator answer (the v4 Coordinator shape; older versions unpack it), its
    endpoint on the listener the request came through; DESCRIBE on the group or the
    transactional id is needed."""
    answer = FindCoordinatorResponse.Coordinator(
        key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.NONE, error_message=None
    )
    if key is None:
        answer.error_code = ErrorCode.INVALID_REQUEST
        answer.error_message = "a coordinator key is required"
        return answer
    check = {GROUP_KEY_TYPE: "group", TRANSACTION_KEY_TYPE: "transactional_id"}.get(key_type)
    refused = (
        refusal(broker.authorizer, session, ApiKey.FIND_COORDINATOR, check, key)
        if check is not None
        else ErrorCode.NONE
    )
    if refused != ErrorCode.NONE:
        answer.error_code = refused
        answer.error_message = f"DESCRIBE on {key!r} is not allowed"
        return answer
    if key_type == GROUP_KEY_TYPE:
        topic = await ensure_offsets_topic(broker)
    elif key_type == TRANSACTION_KEY_TYPE:
        topic = await ensure_transaction_state_topic(broker)
    else:
        answer.error_code = ErrorCode.INVALID_REQUEST
        answer.error_message = f"unknown coordinator key type {key_type}"
        return answer
    state = None
    if topic is not None and topic.partitions:
        state = topic.partitions.get(partition_for(key, len(topic.partitions)))
    endpoint = broker.metadata_cache.brokers.get(state.leader) if state is not None else None
    endpoint = endpoint.on(session.listener) if endpoint is not None else None
    if state is None or state.leader < 0 or endpoint is None:
        answer.error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        answer.error_message = "the coordinator is not available"
        return answer
    answer.node_id, answer.host, answer.port = endpoint.node_id, endpoint.host, endpoint.port
    return answer


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    key_type = request.key_type if version >= 1 else GROUP_KEY_TYPE
    if version >= 4:
        answers = [
            await find(broker, key, key_type, session) for key in request.coordinator_keys or []
        ]
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=answers)
    one = await find(broker, request.key, key_type, session)
    return FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=one.error_code,
        error_message=one.error_message,
        node_id=one.node_id,
        host=one.host,
        port=one.port,
    )
