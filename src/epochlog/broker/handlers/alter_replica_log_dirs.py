"""AlterReplicaLogDirs (kafka-reassign-partitions.sh with log dirs): move this broker's
replica of each partition to another of its log dirs (``replication/log_dir_mover.py``).
Kafka's answers: a path that is not a log dir of this broker LOG_DIR_NOT_FOUND; an
offline dir, or a replica offline here, KAFKA_STORAGE_ERROR; a partition of a topic this
broker knows but does not host REPLICA_NOT_AVAILABLE (its dir is remembered for when it
comes), an unknown one UNKNOWN_TOPIC_OR_PARTITION."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin.cluster import AlterReplicaLogDirsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import error_code
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.ALTER_REPLICA_LOG_DIRS, 1, 2)

TopicResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
PartitionResult = TopicResult.AlterReplicaLogDirPartitionResult


def _alter_one(broker: HandlerContext, path: str, topic: str, index: int) -> ErrorCode:
    manager = broker.replica_manager.log_manager
    log_dir = manager.log_dir_named(path)
    if log_dir is None:
        return ErrorCode.LOG_DIR_NOT_FOUND
    if log_dir in manager.offline_dirs:
        return ErrorCode.KAFKA_STORAGE_ERROR
    if (topic, index) in broker.replica_manager.offline_partitions:
        return ErrorCode.KAFKA_STORAGE_ERROR
    if manager.get_log(topic, index) is None:
        known = broker.metadata_cache.topic(topic)
        if known is None or index not in known.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        manager.preferred_dirs[(topic, index)] = log_dir
        return ErrorCode.REPLICA_NOT_AVAILABLE
    try:
        broker.replica_manager.alter_log_dir(topic, index, log_dir)
    except Exception as exc:
        code = error_code(exc)
        # Kafka keeps REPLICA_NOT_AVAILABLE here for a replica it does not host.
        return (
            ErrorCode.REPLICA_NOT_AVAILABLE
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else code
        )
    return ErrorCode.NONE


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    refused = refusal(broker.authorizer, session, ApiKey.ALTER_REPLICA_LOG_DIRS, "cluster")
    results: dict[str, list[Any]] = {}
    for wanted in request.dirs:
        for topic in wanted.topics:
            for index in topic.partitions:
                code = refused
                if refused == ErrorCode.NONE:
                    code = _alter_one(broker, wanted.path, topic.name, index)
                results.setdefault(topic.name, []).append(
                    PartitionResult(partition_index=index, error_code=code)
                )
    return AlterReplicaLogDirsResponse(
        throttle_time_ms=0,
        results=[TopicResult(topic_name=name, partitions=parts) for name, parts in results.items()],
    )
