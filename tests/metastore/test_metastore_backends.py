"""Backend-specific behaviour: URIs, processes dying, chroot, virtual-time expiry."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from metastore_harness import ManualClock, wait_until

from epochlog.metastore import MetastoreError, NoNodeError, open_metastore
from epochlog.metastore.memory import drop_memory_store
from epochlog.metastore.zk import parse_hosts
from epochlog.seams.real import RealClock
from epochlog.settings.broker import BROKER
from support.zookeeper import ZooKeeperServer

HOLDER = str(Path(__file__).with_name("metastore_holder.py"))


def cross_process_uri(kind: str, tmp_path: Path, zookeeper: ZooKeeperServer | None) -> str:
    if kind == "sqlite":
        return f"sqlite://{tmp_path / 'shared.db'}"
    assert zookeeper is not None
    return zookeeper.uri(f"/{tmp_path.name}")


async def watch_a_killed_holders_node_go(uri: str, session_timeout_ms: int, mode: str) -> None:
    """Another process holds an ephemeral node (``metastore_holder.py`` ``mode``) and is
    SIGKILLed: a client with ``session_timeout_ms`` of its own sees the node come, then
    go (its children watch fires twice), within ``wait_until``'s bound."""
    ms = await open_metastore(uri, RealClock(), session_timeout_ms=session_timeout_ms)
    await ms.create("/brokers/ids", make_parents=True)
    changes: list[object] = []
    await ms.watch_children("/brokers/ids", changes.append)
    holder = subprocess.Popen(
        [sys.executable, HOLDER, uri, mode, "/brokers/ids/3"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        line = await asyncio.get_running_loop().run_in_executor(None, holder.stdout.readline)
        assert line.strip() == "ready"
        stat = await ms.exists("/brokers/ids/3")
        assert stat is not None and stat.ephemeral_owner not in (0, ms.session_id)
        await wait_until(lambda: len(changes) == 1, "the children watch to see it come")
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        await wait_until(lambda: len(changes) == 2, "the children watch to see it go")
        assert await ms.exists("/brokers/ids/3") is None
    finally:
        holder.kill()
        holder.wait(10)
        await ms.close()


@pytest.fixture(params=["sqlite", "zk"])
def shared_uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    zk = request.getfixturevalue("zookeeper") if request.param == "zk" else None
    return cross_process_uri(request.param, tmp_path, zk)


def test_sigkilled_process_loses_its_ephemeral_after_the_session_timeout(
    shared_uri: str,
) -> None:
    asyncio.run(asyncio.wait_for(watch_a_killed_holders_node_go(shared_uri, 1000, "hold"), 60))


def test_sqlite_reaps_a_dead_process_at_the_next_change_poll_not_the_next_heartbeat(
    tmp_path: Path,
) -> None:
    """Every client's change poll (every 50 ms) ends the sessions of exited processes:
    here the only live client heartbeats every 200 s and the holder's session lasts
    10 minutes, yet its node goes at once: a SIGKILLed leader is replaced without
    waiting for any heartbeat."""
    uri = cross_process_uri("sqlite", tmp_path, None)
    asyncio.run(asyncio.wait_for(watch_a_killed_holders_node_go(uri, 600_000, "hold-long"), 60))


def test_cas_increments_from_several_processes_are_all_kept(shared_uri: str) -> None:
    async def scenario() -> None:
        ms = await open_metastore(shared_uri, RealClock(), session_timeout_ms=5000)
        await ms.create("/counter", b"0")
        procs = [
            subprocess.Popen([sys.executable, HOLDER, shared_uri, "bump", "/counter", "20"])
            for _ in range(3)
        ]
        codes = [await asyncio.get_running_loop().run_in_executor(None, p.wait, 60) for p in procs]
        assert codes == [0, 0, 0]
        data, stat = await ms.get("/counter")
        assert int(data) == 60 and stat.version == 60
        await ms.close()

    asyncio.run(asyncio.wait_for(scenario(), 90))


def test_zk_chroot_confines_paths_to_a_subtree(zookeeper: ZooKeeperServer) -> None:
    async def scenario() -> None:
        rooted = await open_metastore(zookeeper.uri("/cluster-a/x"), RealClock())
        whole = await open_metastore(zookeeper.uri(), RealClock())
        try:
            await rooted.create("/brokers/ids/1", b"b1", make_parents=True)
            assert await rooted.multi([]) == []
            [created] = await rooted.transaction().create("/seq-", sequential=True).commit()
            assert created == "/seq-0000000001"
            assert (await whole.get("/cluster-a/x/brokers/ids/1"))[0] == b"b1"
            assert sorted(await rooted.children("/")) == ["brokers", "seq-0000000001"]
            await rooted.delete("/brokers", recursive=True)
            assert await whole.children("/cluster-a/x") == ["seq-0000000001"]
        finally:
            await rooted.close()
            await whole.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_memory_session_expires_exactly_when_virtual_time_passes_the_timeout() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        drop_memory_store("virtual")
        a = await open_metastore("memory://virtual", clock, session_timeout_ms=3000)
        b = await open_metastore("memory://virtual", clock, session_timeout_ms=3000)
        await a.create("/eph", ephemeral=True)
        a.pause_heartbeats()  # type: ignore[attr-defined]
        await clock.advance(3000)
        assert await b.exists("/eph") is not None  # at the deadline: still alive
        await clock.advance(1000)  # b's next heartbeat reaps a
        assert await b.exists("/eph") is None
        expired: list[int] = []
        a.on_session_expired(lambda: expired.append(a.session_id))
        a.pause_heartbeats(False)  # type: ignore[attr-defined]
        await clock.advance(1000)
        assert expired == [a.session_id] and a.session_id not in (0, b.session_id)
        await a.close()
        await b.close()
        drop_memory_store("virtual")

    asyncio.run(scenario())


def test_memory_stores_are_shared_by_name_and_private_without_one() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        drop_memory_store("shared")
        a = await open_metastore("memory://shared", clock)
        b = await open_metastore("memory://shared", clock)
        alone = await open_metastore("memory://", clock)
        await a.create("/x")
        assert await b.exists("/x") is not None
        assert await alone.exists("/x") is None
        for ms in (a, b, alone):
            await ms.close()
        with pytest.raises(MetastoreError):
            await a.get("/x")
        drop_memory_store("shared")

    asyncio.run(scenario())


def test_session_timeout_comes_from_kafkas_setting_name() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        settings = BROKER.parse({"zookeeper.session.timeout.ms": "6000"})
        ms = await open_metastore(
            "memory://", clock, session_timeout_ms=settings["zookeeper.session.timeout.ms"]
        )
        assert ms.session_timeout_ms == 6000
        default = await open_metastore("memory://", clock)
        assert default.session_timeout_ms == 18000
        await ms.close()
        await default.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("uri", ["nope://x", "no-scheme", "sqlite://", "zk://"])
def test_bad_uris_are_refused(uri: str) -> None:
    async def scenario() -> None:
        with pytest.raises(ValueError):
            await open_metastore(uri, ManualClock())

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("rest", "hosts", "chroot"),
    [
        ("h1:1,h2:2,h3:3/epochlog", "h1:1,h2:2,h3:3", "/epochlog"),
        ("h1:1,h2:2/a/b/", "h1:1,h2:2", "/a/b"),
        ("h1:1,h2:2", "h1:1,h2:2", ""),
    ],
)
def test_a_zk_uri_names_an_ensemble_by_one_connect_string(
    rest: str, hosts: str, chroot: str
) -> None:
    """What a many-host deployment passes: every server, then the chroot."""
    assert parse_hosts(rest) == (hosts, chroot)


def test_invalid_paths_are_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        ms = await open_metastore("memory://", ManualClock())
        for bad in ["relative", "/trailing/", "/a//b", "/a/./b"]:
            with pytest.raises(MetastoreError):
                await ms.create(bad)
        with pytest.raises(NoNodeError):
            await ms.delete("/absent")
        await ms.close()

    asyncio.run(scenario())


def test_unreachable_zookeeper_is_a_connection_loss() -> None:
    from epochlog.metastore import ConnectionLossError
    from epochlog.metastore import zk as zk_backend

    async def scenario() -> None:
        old = zk_backend.CONNECT_TIMEOUT_S
        zk_backend.CONNECT_TIMEOUT_S = 1.0
        try:
            with pytest.raises(ConnectionLossError):
                await open_metastore("zk://127.0.0.1:1", RealClock(), session_timeout_ms=1000)
        finally:
            zk_backend.CONNECT_TIMEOUT_S = old

    asyncio.run(asyncio.wait_for(scenario(), 30))
