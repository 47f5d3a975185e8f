"""Metadata: brokers, topics, and per partition the leader and its epoch (KIP-320
from v7) and the topic ID (KIP-232's identity of a re-created topic, from v10). A
topic the principal may not DESCRIBE is left out of "every topic" and refused when
named; auto-creation needs CREATE on the cluster or the topic. From v8, when asked, each
topic's authorized operations (and the cluster's, in v8 to v10)."""

from __future__ import annotations

import uuid
from typing import Any

from kafka.protocol.metadata import MetadataResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import endpoints_on_listener
from epochlog.metadata.model import TopicMetadata
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.acls import CLUSTER_NAME, ResourceType
from epochlog.security.api_rules import allowed, authorized_operations
from epochlog.security.session import Session

API = api(ApiKey.METADATA, 0, 12)

ZERO_UUID = uuid.UUID(int=0)


def _topic_entry(topic: TopicMetadata, live: set[int], operations: set[int] | None) -> Any:
    # As Kafka: a leader that is not a live broker (its registration is gone, the new
    # state not decided yet) is no leader; clients would find no endpoint for it.
    partitions = [
        MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
            error_code=ErrorCode.NONE if state.leader in live else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=index,
            leader_id=state.leader if state.leader in live else -1,
            leader_epoch=state.leader_epoch,
            replica_nodes=list(state.replicas),
            isr_nodes=list(state.isr),
            offline_replicas=list(state.offline_replicas),
        )
        for index, state in sorted(topic.partitions.items())
    ]
    return MetadataResponse.MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=partitions,
        authorized_operations=operations,
    )


def _error_entry(name: str | None, topic_id: uuid.UUID, code: ErrorCode) -> Any:
    return MetadataResponse.MetadataResponseTopic(
        error_code=code,
        name=name,
        topic_id=topic_id,
        is_internal=False,
        partitions=[],
        authorized_operations=None,
    )


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    cache = broker.metadata_cache
    live = set(cache.brokers)
    # v0 asks for every topic with an empty list; later versions with null.
    wants_all = request.topics is None or (version == 0 and not request.topics)
    auto_create = version < 4 or bool(request.allow_auto_topic_creation)
    entries = []

    def may(check: str, name: str = CLUSTER_NAME) -> bool:
        return allowed(broker.authorizer, session, ApiKey.METADATA, check, name)

    def entry(topic: TopicMetadata) -> Any:
        with_operations = version >= 8 and request.include_topic_authorized_operations
        operations = (
            authorized_operations(broker.authorizer, session, ResourceType.TOPIC, topic.name)
            if with_operations
            else None
        )
        return _topic_entry(topic, live, operations)

    if wants_all:
        entries = [entry(t) for t in cache.topics() if may("topic", t.name)]
    else:
        for wanted in request.topics:
            name, by_id = wanted.name, False
            if version >= 10 and wanted.topic_id not in (None, ZERO_UUID):
                name = cache.topic_name(wanted.topic_id)
                if name is None:
                    entries.append(_error_entry(None, wanted.topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
                    continue
                by_id = True
            if not may("topic", name):
                # A topic asked for by ID is not named to whoever may not see it.
                shown = None if by_id else name
                entries.append(_error_entry(shown, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            topic = cache.topic(name)
            if topic is None:
                if (
                    auto_create
                    and broker.config["auto.create.topics.enable"]
                    and not (may("create_cluster") or may("create_topic", name))
                ):
                    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    entries.append(_error_entry(name, ZERO_UUID, code))
                    continue
                topic, code = await broker.auto_create_topic(name, auto_create)
                if topic is None:
                    entries.append(_error_entry(name, ZERO_UUID, code))
                    continue
            entries.append(entry(topic))
    on_listener = endpoints_on_listener(broker, session.listener)
    brokers = [
        MetadataResponse.MetadataResponseBroker(
            node_id=b.node_id, host=b.host, port=b.port, rack=b.rack
        )
        for b in on_listener
    ]
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=cache.cluster_id,
        controller_id=cache.controller_id,
        topics=entries,
        authorized_operations=authorized_operations(
            broker.authorizer, session, ResourceType.CLUSTER
        )
        if 8 <= version <= 10 and request.include_cluster_authorized_operations
        else None,
    )
