"""The authorizer's decisions, as Kafka's AclAuthorizer makes them: deny wins, literal,
wildcard and prefixed patterns, principals and hosts (with their wildcards), the
operations an ALLOW implies, super users and allow.everyone.if.no.acl.found."""

from __future__ import annotations

import pytest

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
    binding_error,
)
from epochlog.security.authorizer import (
    Authorizer,
    check_class_name,
    parse_super_users,
)
from epochlog.settings.registry import SettingError

ALICE, BOB = "User:alice", "User:bob"
HOST, OTHER_HOST = "10.0.0.1", "10.0.0.2"
Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


def acl(
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
    principal: str = ALICE,
    host: str = "*",
    pattern: PatternType = LITERAL,
    resource: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource, name, pattern),
        AccessControlEntry(principal, host, operation, permission),
    )


def authorizer(*bindings: AclBinding, supers: str = "", allow_if_none: bool = False) -> Authorizer:
    result = Authorizer(parse_super_users(supers), allow_if_none)
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        grouped.setdefault(b.pattern, []).append(b.entry)
    for pattern, entries in grouped.items():
        result.set_acls(pattern, entries)
    return result


def may(a: Authorizer, op: AclOperation, name: str, principal: str = ALICE, host: str = HOST,
        resource: ResourceType = TOPIC) -> bool:  # fmt: skip
    return a.authorize(principal, host, op, resource, name)


def test_an_allow_allows_only_its_principal_operation_and_resource() -> None:
    a = authorizer(acl("orders", Op.READ))
    assert may(a, Op.READ, "orders")
    assert not may(a, Op.WRITE, "orders")
    assert not may(a, Op.READ, "orders", principal=BOB)
    assert not may(a, Op.READ, "payments")
    assert not may(a, Op.READ, "orders", resource=GROUP)


def test_deny_wins_over_allow_and_all() -> None:
    a = authorizer(acl("orders", Op.ALL), acl("orders", Op.WRITE, DENY))
    assert may(a, Op.READ, "orders")
    assert not may(a, Op.WRITE, "orders")
    # A DENY of everyone on the wildcard beats a literal ALLOW of one principal.
    b = authorizer(acl("orders", Op.READ), acl("*", Op.READ, DENY, principal="User:*"))
    assert not may(b, Op.READ, "orders")
    # A prefixed DENY beats a literal ALLOW.
    c = authorizer(acl("orders", Op.READ), acl("ord", Op.ALL, DENY, pattern=PREFIXED))
    assert not may(c, Op.READ, "orders")


def test_a_deny_of_an_operation_does_not_deny_what_it_implies() -> None:
    # Kafka: DENY READ leaves DESCRIBE to the ALLOWs (only ALL or DESCRIBE deny it).
    a = authorizer(acl("orders", Op.WRITE), acl("orders", Op.READ, DENY))
    assert may(a, Op.DESCRIBE, "orders")
    assert not authorizer(acl("orders", Op.WRITE), acl("orders", Op.DESCRIBE, DENY)).authorize(
        ALICE, HOST, Op.DESCRIBE, TOPIC, "orders"
    )


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE])
def test_read_write_delete_and_alter_imply_describe(granted: AclOperation) -> None:
    a = authorizer(acl("orders", granted))
    assert may(a, Op.DESCRIBE, "orders")


def test_create_and_describe_configs_do_not_imply_describe() -> None:
    assert not may(authorizer(acl("orders", Op.CREATE)), Op.DESCRIBE, "orders")
    assert not may(authorizer(acl("orders", Op.DESCRIBE)), Op.READ, "orders")


def test_alter_configs_implies_describe_configs_and_not_the_reverse() -> None:
    assert may(authorizer(acl("orders", Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS, "orders")
    assert not may(authorizer(acl("orders", Op.DESCRIBE_CONFIGS)), Op.ALTER_CONFIGS, "orders")


def test_the_literal_wildcard_matches_every_name_of_its_type() -> None:
    a = authorizer(acl("*", Op.READ))
    assert may(a, Op.READ, "orders") and may(a, Op.READ, "anything")
    assert not may(a, Op.READ, "orders", resource=GROUP)


def test_the_wildcard_principal_matches_everyone() -> None:
    a = authorizer(acl("orders", Op.READ, principal="User:*"))
    assert may(a, Op.READ, "orders", principal=BOB)


def test_a_prefixed_pattern_matches_the_names_it_starts() -> None:
    a = authorizer(acl("team-a.", Op.WRITE, pattern=PREFIXED))
    assert may(a, Op.WRITE, "team-a.orders")
    assert may(a, Op.WRITE, "team-a.")
    assert not may(a, Op.WRITE, "team-b.orders")
    assert not may(a, Op.WRITE, "team-a")
    # A literal ACL named like the prefix is no prefix.
    assert not may(authorizer(acl("team-a.", Op.WRITE)), Op.WRITE, "team-a.orders")


def test_hosts_match_exactly_or_by_wildcard() -> None:
    a = authorizer(acl("orders", Op.READ, host=HOST))
    assert may(a, Op.READ, "orders", host=HOST)
    assert not may(a, Op.READ, "orders", host=OTHER_HOST)
    b = authorizer(acl("orders", Op.ALL), acl("orders", Op.READ, DENY, host=OTHER_HOST))
    assert may(b, Op.READ, "orders", host=HOST)
    assert not may(b, Op.READ, "orders", host=OTHER_HOST)


def test_super_users_may_do_everything_whatever_the_acls_say() -> None:
    a = authorizer(acl("orders", Op.ALL, DENY, principal="User:*"), supers="User:admin;User:broker")
    assert a.authorize("User:admin", HOST, Op.WRITE, TOPIC, "orders")
    assert a.authorize("User:broker", HOST, Op.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    assert not may(a, Op.WRITE, "orders")


def test_allow_everyone_if_no_acl_found_opens_only_resources_without_acls() -> None:
    closed = authorizer(acl("orders", Op.READ, principal=BOB))
    opened = authorizer(acl("orders", Op.READ, principal=BOB), allow_if_none=True)
    assert not may(closed, Op.WRITE, "payments")
    assert may(opened, Op.WRITE, "payments")
    # An ACL on the resource, even for someone else, closes it.
    assert not may(opened, Op.READ, "orders")


def test_acls_of_a_pattern_are_replaced_and_removed() -> None:
    a = authorizer(acl("orders", Op.READ))
    # Decided (and remembered) before the change, decided again after it.
    assert may(a, Op.READ, "orders") and not may(a, Op.WRITE, "orders")
    pattern = ResourcePattern(TOPIC, "orders", LITERAL)
    a.set_acls(pattern, [AccessControlEntry(ALICE, "*", Op.WRITE, ALLOW)])
    assert may(a, Op.WRITE, "orders") and not may(a, Op.READ, "orders")
    a.set_acls(pattern, [])
    assert a.bindings() == []
    assert not may(a, Op.WRITE, "orders")


def test_authorize_any_finds_an_allow_not_covered_by_a_deny() -> None:
    # KIP-679: an idempotent producer needs WRITE on at least one topic.
    assert authorizer(acl("orders", Op.WRITE)).authorize_any(ALICE, HOST, Op.WRITE, TOPIC)
    assert authorizer(acl("t-", Op.ALL, pattern=PREFIXED)).authorize_any(
        ALICE, HOST, Op.WRITE, TOPIC
    )
    assert not authorizer(acl("orders", Op.READ)).authorize_any(ALICE, HOST, Op.WRITE, TOPIC)
    denied = authorizer(acl("orders", Op.WRITE), acl("ord", Op.WRITE, DENY, pattern=PREFIXED))
    assert not denied.authorize_any(ALICE, HOST, Op.WRITE, TOPIC)
    everywhere = authorizer(acl("orders", Op.WRITE), acl("*", Op.WRITE, DENY))
    assert not everywhere.authorize_any(ALICE, HOST, Op.WRITE, TOPIC)


def test_filters_match_as_describe_and_delete_acls_do() -> None:
    bindings = [
        acl("orders", Op.READ),
        acl("*", Op.WRITE, principal=BOB),
        acl("ord", Op.READ, pattern=PREFIXED),
        acl("readers", Op.READ, resource=GROUP),
    ]
    a = authorizer(*bindings)

    def found(f: AclBindingFilter) -> list[AclBinding]:
        return [b for b in a.bindings() if f.matches(b)]

    assert len(found(AclBindingFilter())) == 4
    assert found(AclBindingFilter(ResourceType.GROUP)) == [bindings[3]]
    assert found(AclBindingFilter(TOPIC, "orders", LITERAL)) == [bindings[0]]
    assert found(AclBindingFilter(TOPIC, "orders")) == [bindings[0]]
    # MATCH: every pattern that covers the named resource.
    assert set(found(AclBindingFilter(TOPIC, "orders", PatternType.MATCH))) == set(bindings[:3])
    assert found(AclBindingFilter(principal=BOB)) == [bindings[1]]
    assert found(AclBindingFilter(operation=Op.WRITE)) == [bindings[1]]
    assert AclBindingFilter(operation=Op.UNKNOWN).error() is not None


@pytest.mark.parametrize(
    ("binding", "problem"),
    [
        (acl("orders", Op.CLUSTER_ACTION), "operation CLUSTER_ACTION is not supported on TOPIC"),
        (acl("x", Op.ALTER, resource=ResourceType.CLUSTER), "the only valid name for the CLUSTER"),
        (acl("orders", Op.READ, principal="alice"), "principal 'alice' is not of the form"),
        (acl("orders", Op.READ, pattern=PatternType.MATCH), "pattern type MATCH cannot be stored"),
        (acl("u", Op.READ, resource=ResourceType.USER), "resource type USER is not supported"),
    ],
)
def test_create_acls_refuses_what_kafka_refuses(binding: AclBinding, problem: str) -> None:
    assert (binding_error(binding) or "").startswith(problem)


def test_only_known_authorizer_class_names_and_user_principals_are_accepted() -> None:
    assert check_class_name("kafka.security.authorizer.AclAuthorizer")
    assert check_class_name("org.apache.kafka.metadata.authorizer.StandardAuthorizer")
    assert not check_class_name("")
    with pytest.raises(SettingError, match="authorizer.class.name"):
        check_class_name("com.example.Authorizer")
    assert parse_super_users(" User:a ; User:b ") == {"User:a", "User:b"}
    with pytest.raises(SettingError, match="super.users"):
        parse_super_users("User:a;b")
