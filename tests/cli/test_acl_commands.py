"""`epochlog acls`: kafka-acls.sh's options become bindings and filters."""

from __future__ import annotations

import asyncio

import pytest

from epochlog.cli import acl_commands
from epochlog.cli.main import build_parser
from epochlog.security.acls import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)


def parse(*argv: str):  # noqa: ANN201 - argparse.Namespace
    return build_parser().parse_args(["acls", *argv])


def test_add_makes_every_resource_principal_host_and_operation_named() -> None:
    args = parse(
        "add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
        "--operation", "Read", "--operation", "describe-configs", "--topic", "orders-",
        "--resource-pattern-type", "prefixed", "--deny-principal", "User:eve",
        "--deny-host", "10.0.0.9", "--cluster",
    )  # fmt: skip
    bindings = acl_commands.bindings_to_add(args)
    # 2 allowed principals and 1 denied, x 2 resources x 2 operations.
    assert len(bindings) == 12
    denied = [b for b in bindings if b.entry.permission_type == AclPermissionType.DENY]
    assert {(b.entry.principal, b.entry.host) for b in denied} == {("User:eve", "10.0.0.9")}
    assert {b.entry.operation for b in bindings} == {
        AclOperation.READ,
        AclOperation.DESCRIBE_CONFIGS,
    }
    assert {(b.pattern.resource_type, b.pattern.name) for b in bindings} == {
        (ResourceType.TOPIC, "orders-"),
        (ResourceType.CLUSTER, "kafka-cluster"),
    }
    assert {b.pattern.pattern_type for b in bindings} == {PatternType.PREFIXED}
    # No operation named: ALL, as kafka-acls.sh.
    plain = acl_commands.bindings_to_add(
        parse("add", "--allow-principal", "User:a", "--group", "g")
    )
    assert [b.entry.operation for b in plain] == [AclOperation.ALL]


def test_list_filters_match_any_pattern_unless_one_is_named() -> None:
    (everything,) = acl_commands.filters(parse("list"))
    assert (everything.resource_type, everything.pattern_type) == (
        ResourceType.ANY,
        PatternType.ANY,
    )
    (mine,) = acl_commands.filters(parse("list", "--principal", "User:alice", "--topic", "t"))
    assert (mine.principal, mine.name, mine.resource_type) == (
        "User:alice",
        "t",
        ResourceType.TOPIC,
    )


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (("add", "--topic", "t"), "name a principal"),
        (("add", "--allow-principal", "User:a"), "name a resource"),
        (("remove",), "name a resource"),
    ],
)
def test_what_kafka_acls_refuses_is_refused_before_any_request(
    argv: tuple[str, ...], problem: str
) -> None:
    # Port 1: nothing listens; a refusal comes before any connection is tried.
    with pytest.raises(ValueError, match=problem):
        asyncio.run(acl_commands.run({"bootstrap.servers": "127.0.0.1:1"}, parse(*argv)))
