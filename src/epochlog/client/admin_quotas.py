"""Mixed into AsyncAdmin: client quotas as Kafka's Admin client manages them
(describeClientQuotas, alterClientQuotas), sent to any broker: every broker follows the
same quotas from the metastore."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)

from epochlog.client.errors import KafkaClientError
from epochlog.protocol.errors import ErrorCode
from epochlog.quotas.entities import CLIENT_ID, DEFAULT, USER, QuotaEntity

VERSION = 1

# A filter component: (entity type, match type, match), DescribeClientQuotas' own terms.
Component = tuple[str, int, str | None]


def _entity(parts: Iterable[Any]) -> QuotaEntity:
    named = {p.entity_type: DEFAULT if p.entity_name is None else p.entity_name for p in parts}
    return QuotaEntity(named.get(USER), named.get(CLIENT_ID))


class QuotaAdmin:
    _any: Any

    async def describe_client_quotas(
        self, components: Iterable[Component] = (), strict: bool = False
    ) -> dict[QuotaEntity, dict[str, float]]:
        """Every entity the filter matches (all, without components) with its quotas."""
        request = DescribeClientQuotasRequest(
            components=[
                DescribeClientQuotasRequest.ComponentData(
                    entity_type=kind, match_type=match_type, match=match
                )
                for kind, match_type, match in components
            ],
            strict=strict,
        )
        response = await (await self._any()).send(request, VERSION)
        if response.error_code:
            raise KafkaClientError(ErrorCode(response.error_code), response.error_message or "")
        return {
            _entity(entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries or []
        }

    async def alter_client_quotas(
        self,
        alterations: Mapping[QuotaEntity, Mapping[str, float | None]],
        validate_only: bool = False,
    ) -> None:
        """Set (a value) or remove (None) quota keys of each entity; the first entity
        refused raises with the broker's reason."""
        request = AlterClientQuotasRequest(
            entries=[
                AlterClientQuotasRequest.EntryData(
                    entity=[
                        AlterClientQuotasRequest.EntryData.EntityData(
                            entity_type=kind, entity_name=name
                        )
                        for kind, name in entity.parts()
                    ],
                    ops=[
                        AlterClientQuotasRequest.EntryData.OpData(
                            key=key,
                            value=0.0 if value is None else float(value),
                            remove=value is None,
                        )
                        for key, value in ops.items()
                    ],
                )
                for entity, ops in alterations.items()
            ],
            validate_only=validate_only,
        )
        response = await (await self._any()).send(request, VERSION)
        for entry in response.entries:
            if entry.error_code:
                raise KafkaClientError(
                    ErrorCode(entry.error_code),
                    f"{_entity(entry.entity)}: {entry.error_message or ''}",
                )
