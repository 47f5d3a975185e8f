"""ACLs in the metastore: Kafka's node layout and encoding, written by one broker and
followed by another (through its own watches), removed, and names a path could not
hold as they are."""

from __future__ import annotations

import asyncio
import json

from epochlog.metastore import Metastore, open_metastore
from epochlog.seams.real import real_seams
from epochlog.security.acl_store import AclStore, node_path
from epochlog.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from epochlog.security.authorizer import Authorizer

ORDERS = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
TEAM = ResourcePattern(ResourceType.GROUP, "team/a-", PatternType.PREFIXED)


def entry(principal: str, operation: AclOperation) -> AccessControlEntry:
    return AccessControlEntry(principal, "*", operation, AclPermissionType.ALLOW)


async def _followed(store: Metastore) -> tuple[AclStore, Authorizer]:
    authorizer = Authorizer(frozenset(), False)
    acl_store = AclStore(store, authorizer)
    await acl_store.follow()
    return acl_store, authorizer


async def _until(predicate: object, what: str) -> None:
    for _ in range(500):
        if predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"gave up waiting for {what}")


def test_acls_written_by_one_broker_are_followed_by_another() -> None:
    async def scenario() -> None:
        clock = real_seams().clock
        first = await open_metastore("memory://acl-store-test", clock)
        second = await open_metastore("memory://acl-store-test", clock)
        writer, _ = await _followed(first)
        _, follower = await _followed(second)
        alice_reads = AclBinding(ORDERS, entry("User:alice", AclOperation.READ))
        bob_writes = AclBinding(ORDERS, entry("User:bob", AclOperation.WRITE))
        team = AclBinding(TEAM, entry("User:alice", AclOperation.READ))
        await writer.add([alice_reads, bob_writes, team])

        # Kafka's layout and encoding, one node per pattern.
        data, _ = await first.get("/kafka-acl/Topic/orders")
        assert json.loads(data) == {
            "version": 1,
            "acls": [
                {"principal": "User:alice", "permissionType": "Allow", "operation": "Read",
                 "host": "*"},
                {"principal": "User:bob", "permissionType": "Allow", "operation": "Write",
                 "host": "*"},
            ],
        }  # fmt: skip
        assert node_path(TEAM) == "/kafka-acl-extended/prefixed/Group/team%2Fa-"

        await _until(lambda: len(follower.bindings()) == 3, "the follower to see three ACLs")
        assert follower.authorize("User:alice", "10.0.0.1", AclOperation.READ,
                                  ResourceType.GROUP, "team/a-1")  # fmt: skip

        await writer.remove([alice_reads, team])
        await _until(lambda: follower.bindings() == [bob_writes], "the follower to drop two")
        assert await first.exists(node_path(TEAM)) is None, "an emptied node is deleted"
        for store in (first, second):
            await store.close()

    asyncio.run(asyncio.wait_for(scenario(), 30))
