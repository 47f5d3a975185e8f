"""Produce: append record batches as the partition leader and acknowledge them."""

from __future__ import annotations

import logging
from typing import Any

from kafka.protocol.producer import ProduceResponse

from epochlog.broker.responses import error_code
from epochlog.protocol.apis import RequestFrame
from epochlog.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("epochlog.produce")


def _partition_response(index: int, code: ErrorCode, message: str | None = None) -> Any:
    return ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
        index=index,
        error_code=code,
        base_offset=-1,
        log_append_time_ms=-1,
        log_start_offset=-1,
        record_errors=[],
        error_message=message,
    )


def _produce_one(broker: Any, topic: str, index: int, records: bytes | None) -> Any:
    try:
        partition = broker.replica_manager.partition(topic, index)
        partition.check_leader(-1)
        if not records:
            raise KafkaError(ErrorCode.INVALID_RECORD, "empty record set")
        result = broker.replica_manager.append(partition, bytearray(records))
    except Exception as exc:
        code = error_code(exc)
        if code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD):
            log.warning("rejected produce to %s-%d: %s", topic, index, exc)
        return _partition_response(index, code, str(exc) if isinstance(exc, KafkaError) else None)
    return ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
        index=index,
        error_code=ErrorCode.NONE,
        base_offset=result.base_offset,
        log_append_time_ms=result.log_append_time,
        log_start_offset=result.log_start_offset,
        record_errors=[],
        error_message=None,
    )


async def handle(broker: Any, request: Any, version: int, frame: RequestFrame) -> Any:
    acks = request.acks
    responses = []
    for topic_data in request.topic_data:
        if acks not in (0, 1, -1):
            parts = [
                _partition_response(p.index, ErrorCode.INVALID_REQUIRED_ACKS)
                for p in topic_data.partition_data
            ]
        elif request.transactional_id is not None:
            parts = [
                _partition_response(
                    p.index,
                    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "transactions are not supported",
                )
                for p in topic_data.partition_data
            ]
        else:
            parts = [
                _produce_one(broker, topic_data.name, p.index, p.records)
                for p in topic_data.partition_data
            ]
        responses.append(
            ProduceResponse.TopicProduceResponse(name=topic_data.name, partition_responses=parts)
        )
    if acks == 0:
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)
