"""Kafka's ACL model: resource patterns, access control entries and the filters that
DescribeAcls and DeleteAcls match them with, by their wire codes and Kafka's names
(org.apache.kafka.common.acl / resource). Pure values, no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# The resource types this broker authorizes, and the operations an ACL on each may name
# (Kafka's AclEntry.supportedOperations; ALL is always allowed).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset(
        {
            AclOperation.CREATE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
}

# Kafka's implications: an ALLOW of any of these also allows the operation asked for.
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}

# Kafka's names in its ZooKeeper ACL nodes and kafka-acls.sh ("ClusterAction", "Topic").
_CAMEL = {
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    AclOperation.CLUSTER_ACTION: "ClusterAction",
    AclOperation.DESCRIBE_CONFIGS: "DescribeConfigs",
    AclOperation.ALTER_CONFIGS: "AlterConfigs",
    AclOperation.IDEMPOTENT_WRITE: "IdempotentWrite",
}


def display_name(value: IntEnum) -> str:
    """Kafka's display name of a resource type, operation or permission (``Topic``,
    ``ClusterAction``, ``Allow``)."""
    return _CAMEL.get(value, value.name.capitalize())  # type: ignore[call-overload]


def from_display(kind: type[IntEnum], text: str) -> IntEnum:
    """The member whose display or enum name is ``text`` (any case, ``-`` or ``_``)."""
    wanted = text.replace("-", "").replace("_", "").lower()
    for member in kind:
        if wanted in (member.name.replace("_", "").lower(), display_name(member).lower()):
            return member
    raise ValueError(f"{text!r} is not a {kind.__name__}")


@dataclass(frozen=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def matches(self, name: str) -> bool:
        """Whether this pattern covers the resource called ``name`` (of its type)."""
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name in (name, WILDCARD)


@dataclass(frozen=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


def binding_error(binding: AclBinding) -> str | None:
    """Why CreateAcls must refuse a binding (Kafka's checks), or None."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type not in SUPPORTED_OPERATIONS:
        return f"resource type {pattern.resource_type.name} is not supported"
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"pattern type {pattern.pattern_type.name} cannot be stored; use LITERAL or PREFIXED"
    if not pattern.name:
        return "the resource name must not be empty"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"the only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, sep, name = entry.principal.partition(":")
    if not sep or not kind or not name:
        return f"principal {entry.principal!r} is not of the form Type:name"
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"permission type {entry.permission_type.name} is not ALLOW or DENY"
    allowed = SUPPORTED_OPERATIONS[pattern.resource_type]
    if entry.operation != AclOperation.ALL and entry.operation not in allowed:
        return (
            f"operation {entry.operation.name} is not supported on "
            f"{pattern.resource_type.name} resources"
        )
    if not entry.host:
        return "the host must be * or an address"
    return None


@dataclass(frozen=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls match: None and the ANY values match anything;
    pattern type MATCH matches every pattern that covers the named resource."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def error(self) -> str | None:
        """Why the filter is refused (Kafka: UNKNOWN values), or None."""
        for value in (self.resource_type, self.pattern_type, self.operation, self.permission_type):
            if value == 0:
                return f"{type(value).__name__} UNKNOWN cannot be matched"
        return None

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type == PatternType.MATCH:
            return self.name is None or pattern.matches(self.name)
        if self.pattern_type not in (PatternType.ANY, pattern.pattern_type):
            return False
        return self.name is None or self.name == pattern.name

    def matches(self, binding: AclBinding) -> bool:
        entry = binding.entry
        return (
            self.matches_pattern(binding.pattern)
            and self.principal in (None, entry.principal)
            and self.host in (None, entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)
        )
