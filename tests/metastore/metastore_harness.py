"""What differs per backend in the contract tests: URIs, clocks, how a session dies."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import re
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from epochlog.metastore import Metastore, open_metastore
from epochlog.seams.real import RealClock
from support.clock_timeout import sleep_timeout
from support.zookeeper import ZooKeeperServer

BACKENDS = ["memory", "sqlite", "zk"]
WAIT_S = 15.0


class ManualClock:
    """Virtual time: sleepers wake only when a test advances the clock past them."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms
        self._sleepers: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def time_ms(self) -> int:
        return self.now_ms

    def monotonic(self) -> float:
        return self.now_ms / 1000

    async def sleep(self, seconds: float) -> None:
        fut = asyncio.get_running_loop().create_future()
        deadline = self.now_ms + max(0, round(seconds * 1000))
        heapq.heappush(self._sleepers, (deadline, next(self._seq), fut))
        await fut

    def timeout(self, seconds: float) -> contextlib.AbstractAsyncContextManager[None]:
        return sleep_timeout(self, seconds)

    async def advance(self, ms: int) -> None:
        """Move time forward, waking each sleeper at its own deadline, in order."""
        target = self.now_ms + ms
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, fut = heapq.heappop(self._sleepers)
            self.now_ms = max(self.now_ms, deadline)
            if not fut.done():
                fut.set_result(None)
            await settle()
        self.now_ms = target
        await settle()


async def settle(rounds: int = 10) -> None:
    """Let woken tasks and call_soon callbacks run."""
    for _ in range(rounds):
        await asyncio.sleep(0)


async def wait_until(
    predicate: Callable[[], Awaitable[bool] | bool], what: str, timeout_s: float = WAIT_S
) -> None:
    """A bounded wait: poll ``predicate`` until true, fail after ``timeout_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        result = predicate()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


class Harness:
    """Opens clients of one backend and can make a client's session expire."""

    name = ""
    session_timeout_ms = 3000

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.clock: Any = RealClock()
        self.clients: list[Metastore] = []

    async def open(self, uri: str | None = None, **kwargs: Any) -> Metastore:
        kwargs.setdefault("session_timeout_ms", self.session_timeout_ms)
        ms = await open_metastore(uri or self.uri, self.clock, **kwargs)
        self.clients.append(ms)
        return ms

    async def expire(self, victim: Metastore, observer: Metastore) -> None:
        """Make ``victim``'s session die; return once ``observer`` sees its ephemerals go."""
        probe = await victim.create("/expiry-probe-", ephemeral=True, sequential=True)
        await self._silence(victim)

        async def gone() -> bool:
            await self._pass_time()
            return await observer.exists(probe) is None

        await wait_until(gone, "the silenced session's ephemeral node to vanish")
        self._resume(victim)

    async def _silence(self, victim: Metastore) -> None:
        victim.pause_heartbeats()  # type: ignore[attr-defined]

    def _resume(self, victim: Metastore) -> None:
        victim.pause_heartbeats(False)  # type: ignore[attr-defined]

    async def _pass_time(self) -> None:
        pass

    async def pass_time(self, ms: int) -> None:
        """Let ``ms`` of session time go by (virtual for memory, real otherwise)."""
        await asyncio.sleep(ms / 1000)

    async def close_all(self) -> None:
        for ms in self.clients:
            await ms.close()


class MemoryHarness(Harness):
    name = "memory"

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.clock = ManualClock()

    async def _pass_time(self) -> None:
        await self.clock.advance(self.session_timeout_ms // 10)

    async def pass_time(self, ms: int) -> None:
        await self.clock.advance(ms)


class SqliteHarness(Harness):
    name = "sqlite"
    session_timeout_ms = 1000


class ZkHarness(Harness):
    name = "zk"
    session_timeout_ms = 2000

    def __init__(self, uri: str, server: ZooKeeperServer) -> None:
        super().__init__(uri)
        self.server = server

    async def _silence(self, victim: Metastore) -> None:
        """Take the session over from another connection and close it there: the
        server ends the session as if its client had died."""
        session_id, password = victim._client.client_id  # type: ignore[attr-defined]

        def takeover() -> None:
            thief = KazooClient(
                hosts=self.server.hosts,
                client_id=(session_id, password),
                timeout=self.session_timeout_ms / 1000,
            )
            thief.start(15)
            thief.stop()
            thief.close()

        await asyncio.get_running_loop().run_in_executor(None, takeover)

    def _resume(self, victim: Metastore) -> None:
        pass


def make_harness(name: str, tmp_path: Path, zk: ZooKeeperServer | None, test: str) -> Harness:
    if name == "memory":
        return MemoryHarness(f"memory://{test}-{id(tmp_path)}")
    if name == "sqlite":
        return SqliteHarness(f"sqlite://{tmp_path / 'metastore.db'}")
    assert zk is not None
    chroot = "/" + re.sub(r"[^A-Za-z0-9_-]", "_", test)
    return ZkHarness(zk.uri(chroot), zk)


def run(
    harness: Harness,
    scenario: Callable[[Harness], Coroutine[Any, Any, None]],
    timeout_s: float = 60.0,
) -> None:
    """Run an async scenario on a fresh loop, closing every client it opened."""

    async def main() -> None:
        try:
            await asyncio.wait_for(scenario(harness), timeout_s)
        finally:
            await harness.close_all()

    asyncio.run(main())
