"""Mixed into AsyncAdmin: ACLs as Kafka's Admin client manages them (createAcls,
describeAcls, deleteAcls), sent to any broker: every broker follows the same ACLs."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

from epochlog.client.errors import KafkaClientError
from epochlog.protocol.errors import ErrorCode
from epochlog.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

VERSION = 2


def _filter_fields(f: AclBindingFilter) -> dict[str, Any]:
    return {
        "resource_type_filter": f.resource_type,
        "resource_name_filter": f.name,
        "pattern_type_filter": f.pattern_type,
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": f.operation,
        "permission_type": f.permission_type,
    }


def _binding(resource: Any, acl: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            ResourceType(resource.resource_type),
            resource.resource_name,
            PatternType(resource.pattern_type),
        ),
        AccessControlEntry(
            acl.principal,
            acl.host,
            AclOperation(acl.operation),
            AclPermissionType(acl.permission_type),
        ),
    )


class AclAdmin:
    _any: Any

    async def create_acls(self, bindings: list[AclBinding]) -> None:
        """Store every binding; the first refused raises with the broker's reason."""
        request = CreateAclsRequest(
            creations=[
                CreateAclsRequest.AclCreation(
                    resource_type=b.pattern.resource_type,
                    resource_name=b.pattern.name,
                    resource_pattern_type=b.pattern.pattern_type,
                    principal=b.entry.principal,
                    host=b.entry.host,
                    operation=b.entry.operation,
                    permission_type=b.entry.permission_type,
                )
                for b in bindings
            ]
        )
        response = await (await self._any()).send(request, VERSION)
        for binding, result in zip(bindings, response.results, strict=True):
            if result.error_code:
                raise KafkaClientError(
                    ErrorCode(result.error_code), result.error_message or str(binding)
                )

    async def describe_acls(self, wanted: AclBindingFilter) -> list[AclBinding]:
        request = DescribeAclsRequest(**_filter_fields(wanted))
        response = await (await self._any()).send(request, VERSION)
        if response.error_code:
            raise KafkaClientError(ErrorCode(response.error_code), response.error_message or "")
        return [_binding(r, acl) for r in response.resources for acl in r.acls]

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[AclBinding]:
        """Remove what each filter matches; the bindings removed."""
        request = DeleteAclsRequest(
            filters=[DeleteAclsRequest.DeleteAclsFilter(**_filter_fields(f)) for f in filters]
        )
        response = await (await self._any()).send(request, VERSION)
        removed = []
        for result in response.filter_results:
            if result.error_code:
                raise KafkaClientError(ErrorCode(result.error_code), result.error_message or "")
            removed += [_binding(m, m) for m in result.matching_acls]
        return removed
