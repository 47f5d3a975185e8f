"""InitProducerId (v0-v4): a fresh producer id for an idempotent producer; for a
transactional id, the transaction coordinator's answer (the same id at a bumped epoch,
fencing every earlier holder; KIP-360 recovery from v3)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import InitProducerIdResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import fenced_error
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import allowed, allowed_on_any, refusal
from epochlog.security.session import Session

API = api(ApiKey.INIT_PRODUCER_ID, 0, 4)

NO_PRODUCER_ID = -1
# Below this version a fenced producer is told INVALID_PRODUCER_EPOCH (KIP-588).
PRODUCER_FENCED_SINCE = 4


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    api = ApiKey.INIT_PRODUCER_ID
    if request.transactional_id is None:
        if not (
            allowed(broker.authorizer, session, api, "idempotent")
            or allowed_on_any(broker.authorizer, session, api, "any_topic")
        ):
            return InitProducerIdResponse(
                throttle_time_ms=0,
                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                producer_id=NO_PRODUCER_ID,
                producer_epoch=-1,
            )
        # As Kafka does without a transactional id, every request (a recovering
        # producer's epoch bump included) gets a new id at epoch 0, which resets its
        # sequences.
        return InitProducerIdResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            producer_id=await broker.cluster.allocate_producer_id(),
            producer_epoch=0,
        )
    refused = refusal(broker.authorizer, session, api, "transactional_id", request.transactional_id)
    if refused != ErrorCode.NONE:
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=refused, producer_id=NO_PRODUCER_ID, producer_epoch=-1
        )
    expected_id = request.producer_id if version >= 3 else NO_PRODUCER_ID
    expected_epoch = request.producer_epoch if version >= 3 else -1
    answer = await broker.txn_coordinator.init_producer_id(
        request.transactional_id, request.transaction_timeout_ms, expected_id, expected_epoch
    )
    return InitProducerIdResponse(
        throttle_time_ms=0,
        error_code=fenced_error(answer.error, version, PRODUCER_FENCED_SINCE),
        producer_id=answer.producer_id,
        producer_epoch=answer.producer_epoch,
    )
