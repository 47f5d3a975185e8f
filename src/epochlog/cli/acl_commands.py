"""``epochlog acls add|list|remove``: kafka-acls.sh's options in spirit, through the
admin client's CreateAcls, DescribeAcls and DeleteAcls, with the operator commands'
client settings (``--bootstrap-server``, ``--command-config`` for TLS)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping

from epochlog.client.admin import AsyncAdmin
from epochlog.seams.real import real_seams
from epochlog.security.acls import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    from_display,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["add", "list", "remove"])
    parser.add_argument("--allow-principal", action="append", default=[], metavar="User:NAME")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="User:NAME")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST")
    parser.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    parser.add_argument(
        "--operation",
        action="append",
        default=[],
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
        "AlterConfigs, IdempotentWrite, All (repeatable; add: All when none)",
    )
    parser.add_argument("--topic", action="append", default=[])
    parser.add_argument("--group", action="append", default=[])
    parser.add_argument("--transactional-id", action="append", default=[])
    parser.add_argument("--cluster", action="store_true")
    parser.add_argument(
        "--resource-pattern-type",
        default=None,
        help="literal (default for add), prefixed, and for list/remove also any, match",
    )
    parser.add_argument("--principal", help="list: only this principal's ACLs")


def _pattern_type(args: argparse.Namespace, default: PatternType) -> PatternType:
    if args.resource_pattern_type is None:
        return default
    return PatternType(from_display(PatternType, args.resource_pattern_type))


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    found = [(ResourceType.TOPIC, t) for t in args.topic]
    found += [(ResourceType.GROUP, g) for g in args.group]
    found += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        found.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return found


def _operations(args: argparse.Namespace) -> list[AclOperation]:
    return [AclOperation(from_display(AclOperation, op)) for op in args.operation]


def bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    """Every (resource, principal, host, operation) the options name, ALLOW and DENY."""
    resources = _resources(args)
    if not resources:
        raise ValueError("name a resource: --topic, --group, --transactional-id or --cluster")
    if not (args.allow_principal or args.deny_principal):
        raise ValueError("name a principal: --allow-principal or --deny-principal")
    pattern_type = _pattern_type(args, PatternType.LITERAL)
    operations = _operations(args) or [AclOperation.ALL]
    out = []
    for permission, principals, hosts in (
        (AclPermissionType.ALLOW, args.allow_principal, args.allow_host or ["*"]),
        (AclPermissionType.DENY, args.deny_principal, args.deny_host or ["*"]),
    ):
        for resource_type, name in resources:
            for principal in principals:
                for host in hosts:
                    for operation in operations:
                        out.append(
                            AclBinding(
                                ResourcePattern(resource_type, name, pattern_type),
                                AccessControlEntry(principal, host, operation, permission),
                            )
                        )
    return out


def filters(args: argparse.Namespace) -> list[AclBindingFilter]:
    """What list and remove match: per resource named (every resource when none), per
    principal and operation named (any when none)."""
    pattern_type = _pattern_type(args, PatternType.ANY)
    resources: list[tuple[ResourceType, str | None]] = list(_resources(args)) or [
        (ResourceType.ANY, None)
    ]
    principals: list[tuple[str | None, AclPermissionType]] = [
        (p, AclPermissionType.ALLOW) for p in args.allow_principal
    ] + [(p, AclPermissionType.DENY) for p in args.deny_principal]
    if args.principal:
        principals.append((args.principal, AclPermissionType.ANY))
    operations: list[AclOperation] = _operations(args) or [AclOperation.ANY]
    return [
        AclBindingFilter(resource_type, name, pattern_type, principal, None, operation, permission)
        for resource_type, name in resources
        for principal, permission in principals or [(None, AclPermissionType.ANY)]
        for operation in operations
    ]


def format_bindings(bindings: Iterable[AclBinding]) -> str:
    """kafka-acls.sh's listing: each resource pattern, then its entries."""
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        grouped.setdefault(b.pattern, []).append(b.entry)
    lines = []
    for pattern, entries in grouped.items():
        kind, name = pattern.resource_type.name, pattern.name
        lines.append(
            f"Current ACLs for resource `ResourcePattern(resourceType={kind}, name={name}, "
            f"patternType={pattern.pattern_type.name})`:"
        )
        lines += [
            f"\t(principal={e.principal}, host={e.host}, operation={e.operation.name}, "
            f"permissionType={e.permission_type.name})"
            for e in entries
        ]
    return "\n".join(lines)


async def run(client: Mapping[str, str], args: argparse.Namespace) -> str:
    """One ``epochlog acls`` action with these client settings; what it prints."""
    admin = AsyncAdmin(dict(client), real_seams())
    try:
        if args.action == "add":
            added = bindings_to_add(args)
            await admin.create_acls(added)
            return f"Adding ACLs:\n{format_bindings(added)}"
        if args.action == "remove":
            if not _resources(args):
                # As kafka-acls.sh: removing needs a resource, never every ACL at once.
                raise ValueError(
                    "name a resource: --topic, --group, --transactional-id or --cluster"
                )
            removed = await admin.delete_acls(filters(args))
            return f"Removed ACLs:\n{format_bindings(removed)}" if removed else "No ACL matched"
        found: dict[AclBinding, None] = {}
        for wanted in filters(args):
            found.update(dict.fromkeys(await admin.describe_acls(wanted)))
        return format_bindings(found)
    finally:
        await admin.close()
