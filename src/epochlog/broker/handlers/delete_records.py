"""DeleteRecords: each partition's leader moves its log start forward (records before
it are no longer served; whole segments go at the next retention pass), checkpointed
at once so that a restart keeps it; followers learn it from fetch answers."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DeleteRecordsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import error_code
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.DELETE_RECORDS, 0, 2)

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = TopicResult.DeleteRecordsPartitionResult


def _delete_one(broker: HandlerContext, topic: str, wanted: Any, refused: ErrorCode) -> Any:
    answer = PartitionResult(
        partition_index=wanted.partition_index, low_watermark=-1, error_code=refused
    )
    if refused != ErrorCode.NONE:
        return answer
    try:
        partition = broker.replica_manager.partition(topic, wanted.partition_index)
        answer.low_watermark = partition.delete_records_before(wanted.offset)
    except Exception as exc:
        answer.error_code = error_code(exc)
    return answer


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    topics = []
    for t in request.topics or []:
        refused = refusal(broker.authorizer, session, ApiKey.DELETE_RECORDS, "topic", t.name)
        parts = [_delete_one(broker, t.name, p, refused) for p in t.partitions]
        topics.append(TopicResult(name=t.name, partitions=parts))
    broker.replica_manager.log_manager.checkpoint_log_start_offsets()
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
