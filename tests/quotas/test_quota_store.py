"""Quotas in the metastore: Kafka's ZooKeeper layout and node encoding, written through
one store and followed by another (through its own watches), sharing user nodes with
SCRAM credentials without either dropping the other's entries, and tidied away when
the last entry of a node goes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from epochlog.metastore import Metastore, open_metastore
from epochlog.quotas.entities import DEFAULT, QuotaEntity
from epochlog.quotas.store import QuotaStore, read_all
from epochlog.seams.real import real_seams
from epochlog.security.scram_credentials import (
    alter_user,
    credential_for_password,
    read_users,
)


async def _until(predicate: Callable[[], bool], what: str) -> None:
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"gave up waiting for {what}")


async def _followed(store: Metastore) -> tuple[QuotaStore, dict[QuotaEntity, dict[str, float]]]:
    seen: dict[QuotaEntity, dict[str, float]] = {}

    def changed(entity: QuotaEntity, quotas: dict[str, float]) -> None:
        if quotas:
            seen[entity] = quotas
        else:
            seen.pop(entity, None)

    quota_store = QuotaStore(store, changed)
    await quota_store.follow()
    return quota_store, seen


def test_quotas_written_through_one_store_are_followed_by_another() -> None:
    async def scenario() -> None:
        clock = real_seams().clock
        first = await open_metastore("memory://quota-store-test", clock)
        second = await open_metastore("memory://quota-store-test", clock)
        writer, written = await _followed(first)
        follower, seen = await _followed(second)
        alice_app = QuotaEntity("alice", "app")
        await writer.alter(alice_app, {"producer_byte_rate": 1048576.0})
        await writer.alter(QuotaEntity(client_id=DEFAULT), {"consumer_byte_rate": 2e6})
        await writer.alter(QuotaEntity(DEFAULT), {"request_percentage": 12.5})
        # The writer's change is in force at once; the other follows its watches.
        assert written[alice_app] == {"producer_byte_rate": 1048576.0}
        await _until(lambda: seen == written, "the follower to see every quota")

        # Kafka's layout and encoding.
        data, _ = await first.get("/config/users/alice/clients/app")
        assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "1048576"}}
        data, _ = await first.get("/config/clients/<default>")
        assert json.loads(data)["config"] == {"consumer_byte_rate": "2000000"}
        assert await read_all(second) == written

        await writer.alter(QuotaEntity(client_id=DEFAULT), {"consumer_byte_rate": 5.0})
        await _until(
            lambda: seen.get(QuotaEntity(client_id=DEFAULT)) == {"consumer_byte_rate": 5.0},
            "the follower to see a changed value",
        )
        await writer.alter(alice_app, {"producer_byte_rate": None})
        await _until(lambda: alice_app not in seen, "the follower to drop a removed quota")
        # The emptied pair's node and the user folder above it are gone.
        assert await first.exists("/config/users/alice") is None
        for store in (writer, follower):
            store.close()
        for metastore in (first, second):
            await metastore.close()

    asyncio.run(scenario())


def test_quotas_and_scram_credentials_share_a_user_node() -> None:
    async def scenario() -> None:
        store = await open_metastore("memory://quota-scram-test", real_seams().clock)
        quotas, seen = await _followed(store)
        bob = QuotaEntity("bob smith")
        credential = credential_for_password("SCRAM-SHA-256", "secret", 4096)
        await alter_user(store, "bob smith", "SCRAM-SHA-256", credential)
        await quotas.alter(bob, {"producer_byte_rate": 1000.0})
        data, _ = await store.get("/config/users/bob%20smith")
        assert set(json.loads(data)["config"]) == {"SCRAM-SHA-256", "producer_byte_rate"}
        # Removing the credential keeps the quota, and the other way round.
        assert await alter_user(store, "bob smith", "SCRAM-SHA-256", None)
        await _until(lambda: seen.get(bob) == {"producer_byte_rate": 1000.0}, "the quota")
        await alter_user(store, "bob smith", "SCRAM-SHA-256", credential)
        await quotas.alter(bob, {"producer_byte_rate": None})
        assert await read_users(store) == {"bob smith": {"SCRAM-SHA-256": credential}}
        assert bob not in seen
        quotas.close()
        await store.close()

    asyncio.run(scenario())
