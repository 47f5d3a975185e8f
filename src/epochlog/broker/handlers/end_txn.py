"""EndTxn (v0-v3): commit or abort the producer's transaction. Answered once the
decision is in ``__transaction_state``; the markers follow from the coordinator."""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import EndTxnResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import fenced_error
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.END_TXN, 0, 3)

PRODUCER_FENCED_SINCE = 2


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    code = refusal(
        broker.authorizer, session, ApiKey.END_TXN, "transactional_id", request.transactional_id
    )
    if code == ErrorCode.NONE:
        code = await broker.txn_coordinator.end_txn(
            request.transactional_id, request.producer_id, request.producer_epoch, request.committed
        )
    return EndTxnResponse(
        throttle_time_ms=0, error_code=fenced_error(code, version, PRODUCER_FENCED_SINCE)
    )
