"""ListOffsets: earliest, latest, by timestamp and max timestamp, with the leader epoch
of the answer (v4+), fenced by CurrentLeaderEpoch and held back per KIP-207. Under
read_committed (v2+ isolation level 1) consumers see up to the last stable offset."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import ListOffsetsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import error_code
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.replication.monotonic_list_offsets import offsets_available
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.LIST_OFFSETS, 1, 7)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
NO_TIMESTAMP = -1
CONSUMER_REPLICA_ID = -1
# Tools (Kafka's GetOffsetShell, `epochlog status`) ask any replica for its own log.
DEBUGGING_REPLICA_ID = -2
READ_COMMITTED = 1


def _lookup(
    partition: Any, timestamp: int, replica_id: int, read_committed: bool
) -> tuple[int, int, int]:
    """(timestamp, offset, leader_epoch) visible to the requester: consumers see below
    the high watermark (the last stable offset under read_committed); replicas and tools
    see the whole log, as in Kafka."""
    log = partition.log
    if replica_id != CONSUMER_REPLICA_ID:
        limit = log.log_end_offset
    elif read_committed:
        limit = partition.last_stable_offset()
    else:
        limit = partition.high_watermark
    if timestamp == LATEST:
        return NO_TIMESTAMP, limit, partition.leader_epoch
    if timestamp == EARLIEST:
        start = log.log_start_offset
        return NO_TIMESTAMP, start, log.epoch_cache.epoch_for_offset(start)
    found = (
        log.max_timestamp() if timestamp == MAX_TIMESTAMP else log.offset_for_timestamp(timestamp)
    )
    if found is None or found.offset >= limit:
        return NO_TIMESTAMP, -1, -1
    return found.timestamp, found.offset, found.leader_epoch


def _list_one(
    broker: HandlerContext, request: Any, topic: str, wanted: Any, version: int, refused: ErrorCode
) -> Any:
    answer = ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
        partition_index=wanted.partition_index,
        error_code=ErrorCode.NONE,
        timestamp=NO_TIMESTAMP,
        offset=-1,
        leader_epoch=-1,
    )
    if refused != ErrorCode.NONE:
        answer.error_code = refused
        return answer
    try:
        partition = broker.replica_manager.partition(topic, wanted.partition_index)
        partition.check_leader(
            wanted.current_leader_epoch if version >= 4 else -1,
            require_leader=request.replica_id != DEBUGGING_REPLICA_ID,
        )
        if not offsets_available(partition, request.replica_id):
            raise KafkaError(ErrorCode.OFFSET_NOT_AVAILABLE, f"{topic}-{wanted.partition_index}")
        if wanted.timestamp < MAX_TIMESTAMP or (wanted.timestamp == MAX_TIMESTAMP and version < 7):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"timestamp {wanted.timestamp}")
        read_committed = version >= 2 and request.isolation_level == READ_COMMITTED
        answer.timestamp, answer.offset, answer.leader_epoch = _lookup(
            partition, wanted.timestamp, request.replica_id, read_committed
        )
    except Exception as exc:
        answer.error_code = error_code(exc)
    return answer


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    topics = [
        ListOffsetsResponse.ListOffsetsTopicResponse(
            name=topic.name,
            partitions=[
                _list_one(
                    broker,
                    request,
                    topic.name,
                    p,
                    version,
                    refusal(broker.authorizer, session, ApiKey.LIST_OFFSETS, "topic", topic.name),
                )
                for p in topic.partitions or []
            ],
        )
        for topic in request.topics or []
    ]
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
