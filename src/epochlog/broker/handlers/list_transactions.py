"""ListTransactions (v0-v1): the transactions this broker coordinates, filtered by
state, producer id and (v1) how long they have been open. Unknown state names are
reported back, as Kafka does."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import ListTransactionsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.security.api_rules import allowed
from epochlog.security.session import Session
from epochlog.txn.metadata import TxnState

API = api(ApiKey.LIST_TRANSACTIONS, 0, 1)


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    states: set[TxnState] | None = None
    unknown: list[str] = []
    if request.state_filters:
        states = set()
        for name in request.state_filters:
            state = TxnState.from_display(name)
            if state is None:
                unknown.append(name)
            else:
                states.add(state)
    producer_ids = set(request.producer_id_filters) if request.producer_id_filters else None
    min_duration = request.duration_filter if version >= 1 else -1
    error, found = broker.txn_coordinator.list_transactions(states, producer_ids, min_duration)
    return ListTransactionsResponse(
        throttle_time_ms=0,
        error_code=error,
        unknown_state_filters=unknown,
        transaction_states=[
            ListTransactionsResponse.TransactionState(
                transactional_id=m.transactional_id,
                producer_id=m.producer_id,
                transaction_state=m.state.display,
            )
            for m in found
            if allowed(
                broker.authorizer,
                session,
                ApiKey.LIST_TRANSACTIONS,
                "transactional_id",
                m.transactional_id,
            )
        ],
    )
