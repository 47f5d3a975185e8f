"""DescribeTransactions (v0): state, producer id and epoch, timeout, start time and
partitions of transactional ids this broker coordinates (kafka-transactions.sh)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeTransactionsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.security.api_rules import allowed, refusal
from epochlog.security.session import Session

API = api(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0)

_State = DescribeTransactionsResponse.TransactionState


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    states = []
    api = ApiKey.DESCRIBE_TRANSACTIONS
    for tid in request.transactional_ids or []:
        refused = refusal(broker.authorizer, session, api, "transactional_id", tid)
        error, meta = broker.txn_coordinator.describe(tid) if not refused else (refused, None)
        if meta is None:
            states.append(
                _State(
                    error_code=error,
                    transactional_id=tid,
                    transaction_state="",
                    transaction_timeout_ms=0,
                    transaction_start_time_ms=-1,
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=[],
                )
            )
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(meta.partitions):
            # Kafka leaves out the partitions of topics the principal may not DESCRIBE.
            if not allowed(broker.authorizer, session, api, "topic", topic):
                continue
            by_topic.setdefault(topic, []).append(index)
        states.append(
            _State(
                error_code=error,
                transactional_id=tid,
                transaction_state=meta.state.display,
                transaction_timeout_ms=meta.timeout_ms,
                transaction_start_time_ms=meta.start_ms,
                producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch,
                topics=[_State.TopicData(topic=t, partitions=p) for t, p in by_topic.items()],
            )
        )
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)
