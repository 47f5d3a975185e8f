"""AlterClientQuotas (v0-v1, KIP-546): set or remove quota keys of users, client ids and
(user, client id) pairs, defaults included, in the metastore, where every broker follows
them; this broker's own change is in force before it answers. Each entity is judged by
Kafka's rules (its entity types, known keys, values above 0 and whole byte rates) and
answered on its own; ``validate_only`` checks without writing."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin.client_quotas import AlterClientQuotasResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.quotas.entities import QuotaEntity, check_value, entity_from_parts
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1)

_Entry = AlterClientQuotasResponse.EntryData
Part = tuple[str, str | None]
Parts = tuple[Part, ...]


def _planned(entry: Any) -> tuple[QuotaEntity, dict[str, float | None]]:
    """The entity and its operations (None: remove), or KafkaError as Kafka answers."""
    ops: dict[str, float | None] = {}
    for op in entry.ops or []:
        if op.key in ops:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Duplicate quota key {op.key}")
        if op.remove:
            ops[op.key] = None
        else:
            check_value(op.key, op.value)
            ops[op.key] = op.value
    entity = entity_from_parts((e.entity_type, e.entity_name) for e in entry.entity or [])
    return entity, ops


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    refused = refusal(broker.authorizer, session, ApiKey.ALTER_CLIENT_QUOTAS, "cluster")
    # One answer per entity (a set of parts, in whatever order they came).
    results: dict[frozenset[Part], tuple[Parts, ErrorCode, str | None]] = {}
    plans: dict[frozenset[Part], tuple[QuotaEntity, dict[str, float | None]]] = {}
    for entry in request.entries or []:
        parts: Parts = tuple((e.entity_type, e.entity_name) for e in entry.entity or [])
        key = frozenset(parts)
        if refused != ErrorCode.NONE:  # Kafka: ALTER_CONFIGS on the cluster
            results[key] = (parts, refused, "ALTER_CONFIGS on the cluster is needed")
        elif key in results:
            plans.pop(key, None)
            message = f"Ignoring duplicate entity {dict(parts)}"
            results[key] = (parts, ErrorCode.INVALID_REQUEST, message)
        else:
            try:
                plans[key] = _planned(entry)
                results[key] = (parts, ErrorCode.NONE, None)
            except KafkaError as exc:
                results[key] = (parts, exc.code, exc.message)
    if not request.validate_only:
        assert broker.quota_store is not None
        for entity, ops in plans.values():
            await broker.quota_store.alter(entity, ops)
    return AlterClientQuotasResponse(
        throttle_time_ms=0,
        entries=[
            _Entry(
                error_code=code,
                error_message=message,
                entity=[_Entry.EntityData(entity_type=t, entity_name=n) for t, n in parts],
            )
            for parts, code, message in results.values()
        ],
    )
