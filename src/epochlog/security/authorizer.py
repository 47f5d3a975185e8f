"""The authorizer: Kafka's AclAuthorizer / StandardAuthorizer rules over the ACLs the
broker follows. Super users may do everything; a matching DENY wins over any ALLOW; an
ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and of ALTER_CONFIGS
DESCRIBE_CONFIGS; with no ACL at all on a resource, ``allow.everyone.if.no.acl.found``
decides. Pure: the ACLs are handed in, nothing is read here.

ACLs are indexed by resource type, then by literal name and by prefix, so a decision
looks at the ACLs of that one name, the ``*`` wildcard and the name's own prefixes, never
at the others: its cost does not grow with the number of ACLs. Decisions are remembered
until the ACLs change (a client asks the same question with every request)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from epochlog.security.acls import (
    IMPLIED_BY,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from epochlog.settings.registry import SettingError

# Decisions remembered at most (then forgotten all at once): bounds the memory a client
# naming ever new resources can take.
DECISIONS_KEPT = 100_000

# What authorizer.class.name may name: Kafka's ZooKeeper-mode and KRaft authorizers and
# epochlog's own all mean this authorizer; empty means no authorization.
AUTHORIZER_CLASS_NAMES = (
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "epochlog.security.authorizer.Authorizer",
)


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:a;User:b``)."""
    users = [u.strip() for u in text.split(";") if u.strip()]
    for user in users:
        kind, sep, name = user.partition(":")
        if not sep or not kind or not name:
            raise SettingError("super.users", f"{user!r} is not of the form User:name")
    return frozenset(users)


def check_class_name(name: str) -> bool:
    """True when ``authorizer.class.name`` turns this authorizer on."""
    if not name:
        return False
    if name not in AUTHORIZER_CLASS_NAMES:
        raise SettingError(
            "authorizer.class.name",
            f"{name!r} is not an authorizer this broker has; use one of "
            + ", ".join(AUTHORIZER_CLASS_NAMES),
        )
    return True


@dataclass
class _ByName:
    """One resource type's ACL entries by literal name and by prefix."""

    literal: dict[str, set[AccessControlEntry]] = field(default_factory=dict)
    prefixed: dict[str, set[AccessControlEntry]] = field(default_factory=dict)

    def table(self, pattern_type: PatternType) -> dict[str, set[AccessControlEntry]]:
        return self.prefixed if pattern_type == PatternType.PREFIXED else self.literal


class Authorizer:
    """Answers "may this principal, from this host, do this to this resource?"."""

    def __init__(self, super_users: frozenset[str], allow_if_no_acl: bool) -> None:
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._acls: dict[ResourceType, _ByName] = {}
        self._decisions: dict[tuple[str, str, AclOperation, ResourceType, str], bool] = {}

    # -- the ACLs it follows ------------------------------------------------------------

    def set_acls(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Replace every ACL of one resource pattern (as stored in one metastore node)."""
        table = self._acls.setdefault(pattern.resource_type, _ByName()).table(pattern.pattern_type)
        entries = set(entries)
        self._decisions.clear()
        if entries:
            table[pattern.name] = entries
        else:
            table.pop(pattern.name, None)

    def patterns(self) -> list[ResourcePattern]:
        return [
            ResourcePattern(resource_type, name, pattern_type)
            for resource_type, by_name in self._acls.items()
            for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED)
            for name in by_name.table(pattern_type)
        ]

    def bindings(self) -> list[AclBinding]:
        """Every ACL, in a stable order (DescribeAcls answers and the CLI's listing)."""
        found = [
            AclBinding(pattern, entry)
            for pattern in self.patterns()
            for entry in self.entries(pattern)
        ]
        return sorted(found, key=_binding_order)

    def entries(self, pattern: ResourcePattern) -> set[AccessControlEntry]:
        by_name = self._acls.get(pattern.resource_type)
        if by_name is None:
            return set()
        return set(by_name.table(pattern.pattern_type).get(pattern.name, ()))

    # -- decisions ------------------------------------------------------------------------

    def _matching(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        by_name = self._acls.get(resource_type)
        if by_name is None:
            return []
        found: list[AccessControlEntry] = []
        for key in (name, WILDCARD) if name != WILDCARD else (name,):
            found += by_name.literal.get(key, ())
        if by_name.prefixed:
            for end in range(1, len(name) + 1):
                found += by_name.prefixed.get(name[:end], ())
        return found

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Kafka's decision for one operation on one resource."""
        key = (principal, host, operation, resource_type, name)
        decided = self._decisions.get(key)
        if decided is None:
            if len(self._decisions) >= DECISIONS_KEPT:
                self._decisions.clear()
            decided = self._decisions[key] = self._decide(*key)
        return decided

    def _decide(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        matching = self._matching(resource_type, name)
        if not matching:
            return self.allow_if_no_acl
        allowing = IMPLIED_BY.get(operation, frozenset({operation}))
        allowed = False
        for entry in matching:
            if entry.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if entry.host not in (host, WILDCARD):
                continue
            if entry.permission_type == AclPermissionType.DENY:
                if entry.operation in (operation, AclOperation.ALL):
                    return False
            elif entry.operation == AclOperation.ALL or entry.operation in allowing:
                allowed = True
        return allowed

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Kafka's authorizeByResourceType: may the principal do ``operation`` to at
        least one resource of this type? (An idempotent producer needs WRITE on some
        topic, KIP-679.) An ALLOW counts unless a DENY of the same principal covers the
        allowed name or prefix; a DENY on ``*`` refuses all."""
        if principal in self.super_users:
            return True
        by_name = self._acls.get(resource_type)
        if by_name is None:
            return self.allow_if_no_acl

        def applies(entry: AccessControlEntry, permission: AclPermissionType) -> bool:
            return (
                entry.permission_type == permission
                and entry.principal in (principal, WILDCARD_PRINCIPAL)
                and entry.host in (host, WILDCARD)
                and entry.operation in (operation, AclOperation.ALL)
            )

        def denied(name: str, prefix: bool) -> bool:
            for denied_prefix, entries in by_name.prefixed.items():
                if name.startswith(denied_prefix) and any(
                    applies(e, AclPermissionType.DENY) for e in entries
                ):
                    return True
            entries = by_name.literal.get(name, ())
            return not prefix and any(applies(e, AclPermissionType.DENY) for e in entries)

        if any(applies(e, AclPermissionType.DENY) for e in by_name.literal.get(WILDCARD, ())):
            return False
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            for name, entries in by_name.table(pattern_type).items():
                if any(applies(e, AclPermissionType.ALLOW) for e in entries) and not denied(
                    name, pattern_type == PatternType.PREFIXED
                ):
                    return True
        return False


def _binding_order(binding: AclBinding) -> tuple[object, ...]:
    p, e = binding.pattern, binding.entry
    return (
        p.resource_type,
        p.pattern_type,
        p.name,
        e.principal,
        e.host,
        e.operation,
        e.permission_type,
    )
