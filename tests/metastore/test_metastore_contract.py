"""The contract every metastore backend keeps (memory, sqlite, zk): one suite for all."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from metastore_harness import Harness, run, settle, wait_until

from epochlog.metastore import (
    BadVersionError,
    Check,
    Create,
    Delete,
    EventType,
    Metastore,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SetData,
    WatchEvent,
)


class Recorder:
    """Collects watch events, and the thread each callback ran on."""

    def __init__(self) -> None:
        self.events: list[WatchEvent] = []
        self.threads: set[int] = set()

    def __call__(self, event: WatchEvent) -> None:
        self.events.append(event)
        self.threads.add(threading.get_ident())

    def types(self) -> list[EventType]:
        return [e.type for e in self.events]

    async def wait_for(self, n: int, what: str = "") -> None:
        await wait_until(lambda: len(self.events) >= n, what or f"{n} watch events")


async def quiet(h: Harness) -> None:
    """Give a backend the time in which a spurious event would show up."""
    await settle()
    await asyncio.sleep(0.3)
    await settle()


def test_create_then_get_returns_data_and_a_fresh_stat(harness: Harness) -> None:
    async def scenario(h: Harness) -> None:
        ms = await h.open()
        assert await ms.create("/a", b"hello") == "/a"
        data, stat = await ms.get("/a")
        assert data == b"hello"
        assert (stat.version, stat.ephemeral_owner, stat.num_children) == (0, 0, 0)
        assert stat.data_length == 5 and stat.ctime > 0 and stat.mtime == stat.ctime
        assert await ms.exists("/missing") is None
        with pytest.raises(NoNodeError):
            await ms.get("/missing")

    run(harness, scenario)


def test_create_refuses_existing_node_and_missing_parent_unless_asked(harness: Harness) -> None:
    async def scenario(h: Harness) -> None:
        ms = await h.open()
        await ms.create("/a")
        with pytest.raises(NodeExistsError):
            await ms.create("/a")
        with pytest.raises(NoNodeError):
            await ms.create("/x/y/z")
        await ms.create("/x/y/z", b"deep", make_parents=True)
        assert (await ms.get("/x/y/z"))[0] == b"deep"
        assert await ms.children("/x") == ["y"]

    run(harness, scenario)


def test_set_is_compare_and_set_on_the_data_version(harness: Harness) -> None:
    async def scenario(h: Harness) -> None:
        ms = await h.open()
        await ms.create("/controller_epoch", b"0")
        stat = await ms.set("/controller_epoch", b"1", version=0)
        assert stat.version == 1
        with pytest.raises(BadVersionError):
            await ms.set("/controller_epoch", b"stale", version=0)
        assert await ms.get("/controller_epoch") == (b"1", stat)
        assert (await ms.set("/controller_epoch", b"2")).version == 2  # -1: unconditional
        with pytest.raises(NoNodeError):
            await ms.set("/nope", b"x")

    run(harness, scenario)


def test_concurrent_cas_increments_from_two_clients_never_lose_an_update(
    harness: Harness,
) -> None:
    async def scenario(h: Harness) -> None:
        a, b = await h.open(), await h.open()
        await a.create("/producer_id_block", b"0")

        async def bump(ms: Metastore, times: int) -> None:
            for _ in range(times):
                while True:
                    data, stat = await ms.get("/producer_id_block")
                    try:
                        await ms.set("/producer_id_block", b"%d" % (int(data) + 1), stat.version)
                        break
                    except BadVersionError:
                        continue

        await asyncio.gather(bump(a, 15), bump(b, 15))
        data, stat = await a.get("/producer_id_block")
        assert int(data) == 30 and stat.version == 30

    run(harness, scenario)


def test_delete_checks_version_and_emptiness_and_recursive_removes_subtree(
    harness: Harness,
) -> None:
    async def scenario(h: Harness) -> None:
        ms = await h.open()
        await ms.create("/t/p/0/state", b"s", make_parents=True)
        await ms.create("/t/p/1", b"")
        with pytest.raises(NotEmptyError):
            await ms.delete("/t")
        with pytest.raises(BadVersionError):
            await ms.delete("/t/p/1", version=3)
        await ms.delete("/t/p/1", version=0)
        await ms.delete("/t", recursive=True)
        assert await ms.exists("/t") is None
        assert "t" not in await ms.children("/")
        with pytest.raises(NoNodeError):
            await ms.delete("/t")

    run(harness, scenario)


def test_children_are_sorted_names_and_counted_in_stat(harness: Harness) -> None:
    async def scenario(h: Harness) -> None:
        ms = await h.open()
        await ms.create("/brokers/ids", make_parents=True)
        for name in ["3", "1", "2"]:
            await ms.create(f"/brokers/ids/{name}")
        assert await ms.children("/brokers/ids") == ["1", "2", "3"]
        stat = await ms.exists("/brokers/ids")
        assert stat is not None and stat.num_children == 3 and stat.cversion == 3
        with pytest.raises(NoNodeError):
            await ms.children("/nothing")

    run(harness, scenario)


def test_sequential_nodes_get_increasing_ten_digit_suffixes(harness: Harness) -> None:
    async def scenario(h: Harness) -> None:
        ms = await h.open()
        await ms.create("/seq")
        first = await ms.create("/seq/item-", b"a", sequential=True)
        second = await ms.create("/seq/item-", b"b", sequential=True)
        assert first == "/seq/item-0000000000" and second == "/seq/item-0000000001"
        await ms.create("/seq/other")
        assert await ms.create("/seq/item-", sequential=True) == "/seq/item-0000000003"

    run(harness, scenario)


def test_ephemeral_node_belongs_to_the_session_and_goes_on_close(harness: Harness) -> None:
    async def scenario(h: Harness) -> None:
        broker, observer = await h.open(), await h.open()
        assert broker.session_id != observer.session_id
        await observer.create("/brokers/ids", make_parents=True)
        info = json.dumps({"host": "127.0.0.1", "port": 9092, "rack": None}).encode()
        await broker.create("/brokers/ids/1", info, ephemeral=True)
        data, stat = await observer.get("/brokers/ids/1")
        assert data == info and stat.ephemeral_owner == broker.session_id
        with pytest.raises(NoChildrenForEphemeralsError):
            await broker.create("/brokers/ids/1/child")
        await broker.close()
        assert await observer.exists("/brokers/ids/1") is None

    run(harness, scenario)


def test_multi_applies_all_ops_or_none(harness: Harness) -> None:
    async def scenario(h: Harness) -> None:
        ms = await h.open()
        await ms.create("/a", b"1")
        with pytest.raises(NoNodeError):
            await ms.multi([SetData("/a", b"2"), Create("/b", b""), Delete("/missing")])
        assert (await ms.get("/a"))[0] == b"1" and await ms.exists("/b") is None
        results = await ms.multi(
            [
                Check("/a", 0),
                SetData("/a", b"2", 0),
                Create("/b", b"x"),
                Create("/b/s-", sequential=True),
                Delete("/a"),
            ]
        )
        assert results[0] is None and results[2] == "/b"
        assert results[1].version == 1  # type: ignore[union-attr]
        assert results[3] == "/b/s-0000000000" and results[4] is None
        assert await ms.exists("/a") is None
        assert await ms.multi([]) == []

    run(harness, scenario)


def test_check_on_controller_epoch_fences_a_deposed_controller(harness: Harness) -> None:
    async def scenario(h: Harness) -> None:
        old, new = await h.open(), await h.open()
        await old.create("/controller_epoch", b"1")
        await old.create("/state", b"leader=1")
        _, epoch_stat = await old.get("/controller_epoch")
        # A new controller takes over and bumps the epoch with CAS.
        await new.set("/controller_epoch", b"2", epoch_stat.version)
        txn = old.transaction().check("/controller_epoch", epoch_stat.version)
        txn.set("/state", b"leader=2")
        with pytest.raises(BadVersionError):
            await txn.commit()
        assert (await new.get("/state"))[0] == b"leader=1"

    run(harness, scenario)


def test_data_watch_fires_created_changed_deleted_on_the_loop(harness: Harness) -> None:
    async def scenario(h: Harness) -> None:
        watcher, writer = await h.open(), await h.open()
        seen = Recorder()
        await watcher.watch_data("/controller", seen)
        await writer.create("/controller", b"1", ephemeral=True)
        await seen.wait_for(1)
        await writer.set("/controller", b"2")
        await seen.wait_for(2)
        await writer.delete("/controller")
        await seen.wait_for(3)
        await quiet(h)
        assert seen.types() == [EventType.CREATED, EventType.CHANGED, EventType.DELETED]
        assert {e.path for e in seen.events} == {"/controller"}
        assert seen.threads == {threading.get_ident()}

    run(harness, scenario)


def test_watches_stay_silent_for_unrelated_changes(harness: Harness) -> None:
    async def scenario(h: Harness) -> None:
        ms = await h.open()
        await ms.create("/topics/a", b"", make_parents=True)
        data_seen, children_seen = Recorder(), Recorder()
        await ms.watch_data("/topics/a", data_seen)
        await ms.watch_children("/topics", children_seen)
        await ms.create("/other", b"")
        await ms.set("/topics/a", b"config")  # data of a child: not a children change
        await data_seen.wait_for(1)
        await ms.create("/topics/a/partitions")  # a grandchild: not a children change
        await quiet(h)
        assert data_seen.types() == [EventType.CHANGED]
        assert children_seen.events == []

    run(harness, scenario)


def test_children_watch_fires_on_add_and_remove_and_cancel_stops_it(harness: Harness) -> None:
    async def scenario(h: Harness) -> None:
        ms, other = await h.open(), await h.open()
        await ms.create("/brokers/ids", make_parents=True)
        seen = Recorder()
        watch = await ms.watch_children("/brokers/ids", seen)
        await other.create("/brokers/ids/1", ephemeral=True)
        await seen.wait_for(1)
        await other.close()  # the ephemeral goes with the session
        await seen.wait_for(2)
        assert seen.events == [WatchEvent(EventType.CHILDREN, "/brokers/ids")] * 2
        watch.cancel()
        await ms.create("/brokers/ids/2")
        await quiet(h)
        assert len(seen.events) == 2

    run(harness, scenario)


def test_watch_on_a_missing_node_reports_its_creation_and_children(harness: Harness) -> None:
    async def scenario(h: Harness) -> None:
        ms = await h.open()
        data_seen, children_seen = Recorder(), Recorder()
        await ms.watch_data("/later", data_seen)
        await ms.watch_children("/later", children_seen)
        await ms.create("/later")
        await data_seen.wait_for(1)
        await ms.create("/later/kid")
        await children_seen.wait_for(1)
        await quiet(h)
        assert data_seen.types() == [EventType.CREATED]
        assert children_seen.types() == [EventType.CHILDREN]

    run(harness, scenario)


def test_async_watch_callbacks_are_awaited_as_tasks(harness: Harness) -> None:
    async def scenario(h: Harness) -> None:
        ms = await h.open()
        done = asyncio.Event()

        async def on_change(event: WatchEvent) -> None:
            await asyncio.sleep(0)
            done.set()

        await ms.watch_data("/x", on_change)
        await ms.create("/x")
        await wait_until(done.is_set, "the async callback to run")

    run(harness, scenario)


def test_session_expiry_removes_ephemerals_and_lets_the_owner_reregister(
    harness: Harness,
) -> None:
    async def scenario(h: Harness) -> None:
        broker, controller = await h.open(), await h.open()
        await controller.create("/brokers/ids", make_parents=True)
        await broker.create("/brokers/ids/7", b"b7", ephemeral=True)
        old_session = broker.session_id
        departures = Recorder()
        await controller.watch_children("/brokers/ids", departures)
        renewed = asyncio.Event()

        async def reregister() -> None:
            await broker.create("/brokers/ids/7", b"b7", ephemeral=True)
            renewed.set()

        broker.on_session_expired(reregister)
        await h.expire(broker, controller)
        await departures.wait_for(1, "the children watch to see the broker leave")

        async def back() -> bool:
            await h._pass_time()
            return renewed.is_set()

        await wait_until(back, "the broker to re-register in a new session")
        assert broker.session_id != old_session
        _, stat = await controller.get("/brokers/ids/7")
        assert stat.ephemeral_owner == broker.session_id
        await departures.wait_for(2, "the children watch to see the broker return")

    run(harness, scenario)


def test_live_sessions_outlast_many_timeouts(harness: Harness) -> None:
    async def scenario(h: Harness) -> None:
        ms = await h.open()
        await ms.create("/alive", ephemeral=True)
        for _ in range(3):
            await h.pass_time(h.session_timeout_ms // 2)
        stat = await ms.exists("/alive")
        assert stat is not None and stat.ephemeral_owner == ms.session_id

    run(harness, scenario)


def test_watches_survive_session_expiry(harness: Harness) -> None:
    async def scenario(h: Harness) -> None:
        ms, observer = await h.open(), await h.open()
        seen = Recorder()
        await ms.watch_data("/flag", seen)
        expired = asyncio.Event()
        ms.on_session_expired(expired.set)
        await h.expire(ms, observer)

        async def noticed() -> bool:
            await h._pass_time()
            return expired.is_set()

        await wait_until(noticed, "the expiry to be noticed")
        await observer.create("/flag")
        await wait_until(lambda: EventType.CREATED in seen.types(), "CREATED after expiry")

    run(harness, scenario)
