"""DescribeLogDirs (kafka-log-dirs.sh --describe): every log dir of this broker, with the
partitions asked for (all when the request names none) that it holds: size, offset lag
(a current log: behind the high watermark; a future log: behind the current log) and
whether it is a future log of a move; v4 adds the volume's total and usable bytes. An
offline dir answers KAFKA_STORAGE_ERROR, as in Kafka."""

from __future__ import annotations

import os
from typing import Any

from kafka.protocol.admin.cluster import DescribeLogDirsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session
from epochlog.storage.log import Log

API = api(ApiKey.DESCRIBE_LOG_DIRS, 1, 4)

Result = DescribeLogDirsResponse.DescribeLogDirsResult
Topic = Result.DescribeLogDirsTopic
PartitionAnswer = Topic.DescribeLogDirsPartition
INVALID_OFFSET_LAG = -1


def _offset_lag(broker: HandlerContext, log: Log, is_future: bool) -> int:
    """Kafka's getLogEndOffsetLag."""
    manager = broker.replica_manager.log_manager
    if is_future:
        current = manager.get_log(log.topic, log.partition)
        return (
            INVALID_OFFSET_LAG if current is None else current.log_end_offset - log.log_end_offset
        )
    try:
        partition = broker.replica_manager.partition(log.topic, log.partition)
    except Exception:
        return INVALID_OFFSET_LAG
    return max(partition.high_watermark - log.log_end_offset, 0)


def _describe_dir(broker: HandlerContext, log_dir: str, wanted: set[tuple[str, int]] | None) -> Any:
    manager = broker.replica_manager.log_manager
    path = os.path.abspath(log_dir)
    if log_dir in manager.offline_dirs:
        return Result(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=path, topics=[])
    try:
        total, usable = broker.seams.disk.disk_usage(log_dir)
    except OSError:
        return Result(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=path, topics=[])
    by_topic: dict[str, list[Any]] = {}
    for log, is_future in manager.logs_in(log_dir):
        if wanted is not None and (log.topic, log.partition) not in wanted:
            continue
        by_topic.setdefault(log.topic, []).append(
            PartitionAnswer(
                partition_index=log.partition,
                partition_size=log.size_bytes,
                offset_lag=_offset_lag(broker, log, is_future),
                is_future_key=is_future,
            )
        )
    topics = [
        Topic(name=name, partitions=sorted(parts, key=lambda p: p.partition_index))
        for name, parts in sorted(by_topic.items())
    ]
    return Result(
        error_code=ErrorCode.NONE,
        log_dir=path,
        topics=topics,
        total_bytes=total,
        usable_bytes=usable,
    )


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    refused = refusal(broker.authorizer, session, ApiKey.DESCRIBE_LOG_DIRS, "cluster")
    if refused != ErrorCode.NONE:
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=refused, results=[])
    wanted = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    log_dirs = broker.replica_manager.log_manager.log_dirs
    return DescribeLogDirsResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        results=[_describe_dir(broker, d, wanted) for d in log_dirs],
    )
