"""DescribeProducers (v0): the active producers of partitions this broker leads, with
the open transaction's first offset (kafka-transactions.sh describe-producers)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeProducersResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import error_code
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.DESCRIBE_PRODUCERS, 0, 0)

_Topic = DescribeProducersResponse.TopicResponse
_Partition = _Topic.PartitionResponse
_Producer = _Partition.ProducerState


def _describe(broker: HandlerContext, topic: str, index: int, refused: ErrorCode) -> Any:
    answer = _Partition(
        partition_index=index, error_code=refused, error_message=None, active_producers=[]
    )
    if refused != ErrorCode.NONE:
        return answer
    try:
        partition = broker.replica_manager.partition(topic, index)
        partition.check_leader(-1)
    except Exception as exc:
        answer.error_code = error_code(exc)
        return answer
    answer.active_producers = [
        _Producer(
            producer_id=entry.producer_id,
            producer_epoch=entry.epoch,
            last_sequence=entry.last_seq,
            last_timestamp=entry.last_timestamp,
            coordinator_epoch=entry.coordinator_epoch,
            current_txn_start_offset=entry.current_txn_first_offset,
        )
        for entry in sorted(
            partition.log.producer_state.producers.values(), key=lambda e: e.producer_id
        )
    ]
    return answer


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    return DescribeProducersResponse(
        throttle_time_ms=0,
        topics=[
            _Topic(
                name=t.name,
                partitions=[
                    _describe(
                        broker,
                        t.name,
                        i,
                        refusal(
                            broker.authorizer, session, ApiKey.DESCRIBE_PRODUCERS, "topic", t.name
                        ),
                    )
                    for i in t.partition_indexes or []
                ],
            )
            for t in request.topics or []
        ],
    )
