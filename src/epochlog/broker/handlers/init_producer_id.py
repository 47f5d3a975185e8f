"""InitProducerId: hand an idempotent producer a fresh producer id."""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import InitProducerIdResponse

from epochlog.protocol.apis import RequestFrame
from epochlog.protocol.errors import ErrorCode

NO_PRODUCER_ID = -1


async def handle(broker: Any, request: Any, version: int, frame: RequestFrame) -> Any:
    if request.transactional_id is not None:
        # Transactions are not offered; saying so lets clients fail with a clear reason.
        return InitProducerIdResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            producer_id=NO_PRODUCER_ID,
            producer_epoch=-1,
        )
    # As Kafka does without a transactional id, every request (a recovering producer's
    # epoch bump included) gets a new id at epoch 0, which resets its sequences.
    return InitProducerIdResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        producer_id=await broker.cluster.allocate_producer_id(),
        producer_epoch=0,
    )
