"""AddOffsetsToTxn (v0-v3): the producer will commit a group's offsets in its
transaction; the group's ``__consumer_offsets`` partition joins the transaction, so
the marker that ends it also decides those offsets."""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import AddOffsetsToTxnResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import fenced_error
from epochlog.coordinator.hashing import OFFSETS_TOPIC
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.ADD_OFFSETS_TO_TXN, 0, 3)

PRODUCER_FENCED_SINCE = 2


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    api = ApiKey.ADD_OFFSETS_TO_TXN
    code = refusal(broker.authorizer, session, api, "transactional_id", request.transactional_id)
    if code == ErrorCode.NONE and not request.group_id:
        code = ErrorCode.INVALID_GROUP_ID
    if code == ErrorCode.NONE:
        code = refusal(broker.authorizer, session, api, "group", request.group_id)
    if code == ErrorCode.NONE:
        offsets_partition = broker.coordinator.registry.partition_of(request.group_id)
        code = await broker.txn_coordinator.add_partitions(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            frozenset({(OFFSETS_TOPIC, offsets_partition)}),
        )
    return AddOffsetsToTxnResponse(
        throttle_time_ms=0, error_code=fenced_error(code, version, PRODUCER_FENCED_SINCE)
    )
