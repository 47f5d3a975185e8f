"""``memory://[name]``: an in-process metastore for one process and for simulation.

All time comes from the Clock seam: each client heartbeats every timeout/3 with
``clock.sleep``, and a session whose last heartbeat (or write) is older than its timeout
is reaped by whichever client of the store looks next. A simulation that advances its
virtual clock, or stops a client's heartbeats, therefore sees sessions expire exactly as
with ZooKeeper. Clients opened with the same name share one tree.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from epochlog.metastore.api import (
    ConnectionLossError,
    EventType,
    MetastoreError,
    SessionExpiredError,
    WatchEvent,
    join,
    parent_of,
)
from epochlog.metastore.tree import ROOT, Action, Node, TreeMetastore, end_session
from epochlog.seams import Clock


@dataclass
class _Session:
    timeout_ms: int
    expires_at: int


class MemoryStore:
    """One tree plus its sessions; shared by every client opened on it."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {"/": ROOT}
        self.kids: dict[str, set[str]] = {"/": set()}
        self.sessions: dict[int, _Session] = {}
        self.next_session_id = 1
        self.lock = threading.RLock()
        # In the order they connected (a WeakSet's order would follow their addresses,
        # and a simulation's replay must not).
        self.clients: weakref.WeakValueDictionary[int, MemoryMetastore] = (
            weakref.WeakValueDictionary()
        )
        self.next_client_id = 1
        # The server's clock, as ZooKeeper's: session deadlines are judged on it, not on
        # a client's own (a simulation steps and drifts hosts' clocks). None: each
        # client's clock, all one in a process.
        self.clock: Clock | None = None
        # Called with each committed write's events, before any client hears of them:
        # the simulator judges invariants there, as a periodic snapshot would miss a
        # state written and replaced within one virtual instant.
        self.write_observers: list[Callable[[list[WatchEvent]], None]] = []

    def new_session(self, timeout_ms: int, now_ms: int) -> int:
        sid = self.next_session_id
        self.next_session_id += 1
        self.sessions[sid] = _Session(timeout_ms, now_ms + timeout_ms)
        return sid

    def publish(self, events: list[WatchEvent]) -> None:
        for observe in self.write_observers:
            observe(events)
        for client in list(self.clients.values()):
            if not client.disconnected:
                client._dispatch_soon(events)


@dataclass
class _Txn:
    """A NodeStore over a MemoryStore with an undo log, so a failed multi leaves no trace."""

    store: MemoryStore
    undo: list[tuple[str, Node | None]] = field(default_factory=list)
    events: list[WatchEvent] = field(default_factory=list)

    def get(self, path: str) -> Node | None:
        return self.store.nodes.get(path)

    def put(self, path: str, node: Node) -> None:
        self.undo.append((path, self.store.nodes.get(path)))
        self._put(path, node)

    def remove(self, path: str) -> None:
        self.undo.append((path, self.store.nodes[path]))
        self._remove(path)

    def children(self, path: str) -> list[str]:
        return sorted(self.store.kids.get(path, ()))

    def ephemerals(self, session_id: int) -> list[str]:
        return [p for p, n in self.store.nodes.items() if n.ephemeral_owner == session_id]

    def emit(self, kind: EventType, path: str) -> None:
        self.events.append(WatchEvent(kind, path))

    def _put(self, path: str, node: Node) -> None:
        if path not in self.store.nodes:
            self.store.kids[parent_of(path)].add(path.rsplit("/", 1)[1])
            self.store.kids[path] = set()
        self.store.nodes[path] = node

    def _remove(self, path: str) -> None:
        del self.store.nodes[path]
        del self.store.kids[path]
        self.store.kids[parent_of(path)].discard(path.rsplit("/", 1)[1])

    def mark(self) -> tuple[int, int]:
        return len(self.undo), len(self.events)

    def rollback(self, mark: tuple[int, int]) -> None:
        while len(self.undo) > mark[0]:
            path, old = self.undo.pop()
            if old is None:
                self._remove(path)
            else:
                self._put(path, old)
        del self.events[mark[1] :]

    def reap(self, now_ms: int) -> None:
        """End every session whose deadline passed (by whoever notices first)."""
        for sid, session in list(self.store.sessions.items()):
            if now_ms > session.expires_at:
                del self.store.sessions[sid]
                end_session(self, sid)


_STORES: dict[str, MemoryStore] = {}


def memory_store(name: str) -> MemoryStore:
    """The process-wide store called ``name`` ('' gives a fresh private store)."""
    if not name:
        return MemoryStore()
    return _STORES.setdefault(name, MemoryStore())


def drop_memory_store(name: str) -> None:
    """Forget a named store (tests and simulations that reuse names)."""
    _STORES.pop(name, None)


class MemoryMetastore(TreeMetastore):
    def __init__(self, store: MemoryStore, clock: Clock, session_timeout_ms: int) -> None:
        super().__init__(clock, session_timeout_ms)
        self.store = store
        self._deadlines = store.clock or clock
        self._heartbeats_paused = False
        self.disconnected = False
        with store.lock:
            self._session = store.new_session(session_timeout_ms, self._deadlines.time_ms())
            self._client_id = store.next_client_id
            store.next_client_id += 1
            store.clients[self._client_id] = self
        self._spawn(self._heartbeat_loop())

    @property
    def session_id(self) -> int:
        return self._session

    def pause_heartbeats(self, paused: bool = True) -> None:
        """Stop (or resume) heartbeats: how a test makes this client look dead."""
        self._heartbeats_paused = paused

    def disconnect(self, cut: bool = True) -> None:
        """Cut (or restore) this client's link to the store, as a partition from
        ZooKeeper does: calls fail with ConnectionLossError, heartbeats stop (so the
        session expires after its timeout) and changes are missed. On restore, an expired
        session is replaced (its owners re-register), else every watch fires once so
        that its owner re-reads what changed meanwhile."""
        self.disconnected = cut
        if cut or self.closed or not self._heartbeat():
            return
        for kind, path in list(self._watches):
            event = EventType.CHILDREN if kind == "children" else EventType.CHANGED
            self._dispatch_soon([WatchEvent(event, path)])

    async def _heartbeat_loop(self) -> None:
        while not self.closed:
            await self.clock.sleep(self.session_timeout_ms / 3000)
            if not (self._heartbeats_paused or self.disconnected or self.closed):
                self._heartbeat()

    def _heartbeat(self) -> bool:
        """Touch our session (renewing it if it expired); False when it had expired."""
        with self.store.lock:
            now = self._deadlines.time_ms()
            txn = _Txn(self.store)
            alive = self._touch(txn, now)
        self.store.publish(txn.events)
        if not alive:
            self._session_replaced()
        return alive

    def _touch(self, txn: _Txn, now: int) -> bool:
        session = self.store.sessions.get(self._session)
        if session is not None and now <= session.expires_at:
            session.expires_at = now + self.session_timeout_ms
            txn.reap(now)
            return True
        txn.reap(now)
        self._session = self.store.new_session(self.session_timeout_ms, now)
        return False

    async def _write(self, action: Action) -> object:
        if self.closed:
            raise MetastoreError("metastore is closed")
        if self.disconnected:
            raise ConnectionLossError("disconnected from the metastore")
        with self.store.lock:
            now = self._deadlines.time_ms()
            txn = _Txn(self.store)
            alive = self._touch(txn, now)
            if alive:
                mark = txn.mark()
                try:
                    result = action(txn, self._session, now)
                except BaseException:
                    txn.rollback(mark)
                    self.store.publish(txn.events)
                    raise
        self.store.publish(txn.events)
        if not alive:
            self._session_replaced()
            raise SessionExpiredError("session expired; a new one replaced it")
        return result

    async def _read(self, action: Action) -> object:
        if self.closed:
            raise MetastoreError("metastore is closed")
        if self.disconnected:
            raise ConnectionLossError("disconnected from the metastore")
        with self.store.lock:
            return action(_Txn(self.store), self._session, self._deadlines.time_ms())

    async def close(self) -> None:
        if self.closed:
            return
        with self.store.lock:
            txn = _Txn(self.store)
            if self.store.sessions.pop(self._session, None) is not None:
                end_session(txn, self._session)
            self.store.clients.pop(self._client_id, None)
        self.store.publish(txn.events)
        self.closed = True
        self._cancel_tasks()


__all__ = ["MemoryMetastore", "MemoryStore", "drop_memory_store", "join", "memory_store"]
