"""A broker's registration in the metastore (``broker/cluster_link``): after its
session expired it registers again in the new one, even when the metastore is out of
reach at first (a SIGSTOPped process holding SQLite's write lock made every other
broker's writes fail for as long as it was stopped, sessions expired meanwhile)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from epochlog.broker.cluster_link import ClusterLink
from epochlog.broker.metadata_cache import MetadataCache
from epochlog.metadata import layout
from epochlog.metadata.model import BrokerEndpoint
from epochlog.metastore import ConnectionLossError, open_metastore
from epochlog.seams.real import RealClock


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 15) -> None:
    for _ in range(int(timeout / 0.05)):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


def test_a_broker_registers_again_after_its_session_expired_though_the_first_try_fails(
    tmp_path: Path,
) -> None:
    async def nothing(*_: Any) -> None:
        pass

    async def scenario() -> None:
        clock, uri, path = RealClock(), f"sqlite://{tmp_path}/metastore.db", layout.broker_path(0)
        store = await open_metastore(uri, clock, session_timeout_ms=1000)
        observer = await open_metastore(uri, clock, session_timeout_ms=1000)
        link = ClusterLink(store, 0, clock, MetadataCache("c"), nothing, nothing, uuid.uuid4)
        await link.join(BrokerEndpoint(0, "127.0.0.1", 9092), 1.0)
        create, lost = store.create, []

        async def lost_once(at: str, *args: Any, **kwargs: Any) -> Any:
            if at == path and not lost:
                lost.append(at)
                raise ConnectionLossError("sqlite: database is locked")
            return await create(at, *args, **kwargs)

        store.create = lost_once  # type: ignore[method-assign]
        store.pause_heartbeats()  # type: ignore[attr-defined]

        async def gone() -> bool:
            return await observer.exists(path) is None

        await eventually(gone, "the observer to reap the silent session")
        store.pause_heartbeats(False)  # type: ignore[attr-defined]

        async def back() -> bool:
            stat = await observer.exists(path)
            return stat is not None and stat.ephemeral_owner == store.session_id

        await eventually(back, "the broker to register again in its new session")
        assert lost == [path]
        await store.close()
        await observer.close()

    asyncio.run(scenario())
