"""DescribeClientQuotas (v0-v1, KIP-546): the quotas of every entity a filter matches,
read from the metastore (so a change made through another broker is seen at once).
A filter Kafka refuses is answered with its error for the whole request."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin.client_quotas import DescribeClientQuotasResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.quotas.entities import describe_filter
from epochlog.quotas.store import read_all
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1)

_Entry = DescribeClientQuotasResponse.EntryData


def _error(code: ErrorCode, message: str | None) -> Any:
    return DescribeClientQuotasResponse(
        throttle_time_ms=0, error_code=code, error_message=message, entries=None
    )


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    assert broker.cluster is not None
    refused = refusal(broker.authorizer, session, ApiKey.DESCRIBE_CLIENT_QUOTAS, "cluster")
    if refused != ErrorCode.NONE:  # Kafka: DESCRIBE_CONFIGS on the cluster
        return _error(refused, "DESCRIBE_CONFIGS on the cluster is needed")
    try:
        matches = describe_filter(
            ((c.entity_type, c.match_type, c.match) for c in request.components or []),
            request.strict,
        )
    except KafkaError as exc:
        return _error(exc.code, exc.message)
    entries = []
    found = await read_all(broker.cluster.store)
    for entity, quotas in sorted(found.items(), key=lambda item: str(item[0])):
        if matches(entity):
            entries.append(
                _Entry(
                    entity=[
                        _Entry.EntityData(entity_type=kind, entity_name=name)
                        for kind, name in entity.parts()
                    ],
                    values=[
                        _Entry.ValueData(key=key, value=value)
                        for key, value in sorted(quotas.items())
                    ],
                )
            )
    return DescribeClientQuotasResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=entries
    )
