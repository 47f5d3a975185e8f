"""``sqlite:///PATH``: an embedded metastore shared by broker processes on one host.

One SQLite file in WAL mode holds the tree, the sessions and a change log. Writes run
in ``BEGIN IMMEDIATE`` transactions (one writer at a time, busy timeout for the rest),
so compare-and-set and multi are atomic across processes. A session is a row whose
deadline each client pushes forward from a background heartbeat every timeout/3 (and
on every write); any client's heartbeat reaps sessions past their deadline and deletes
their ephemeral nodes, so a SIGKILLed process's ephemerals vanish after the timeout.
Each write appends (seq, path, kind) rows to the change log; every client polls it
every ~50 ms and fires its watches for the rows it has not seen. Deadlines are wall
time (``clock.time_ms()``), the only time processes on one host share.

All SQLite calls run on one worker thread per client; callbacks run on the loop.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from epochlog.metastore.api import (
    ConnectionLossError,
    EventType,
    MetastoreError,
    SessionExpiredError,
    WatchEvent,
    parent_of,
)
from epochlog.metastore.tree import Action, Node, TreeMetastore, end_session
from epochlog.seams import Clock
from epochlog.seams.real import process_identity, this_boot_id

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.05
BUSY_TIMEOUT_S = 30.0
CHANGE_LOG_KEEP = 10000

_KINDS = {EventType.CREATED: 0, EventType.CHANGED: 1, EventType.DELETED: 2, EventType.CHILDREN: 3}
_TYPES = {v: k for k, v in _KINDS.items()}

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS nodes (
        path TEXT PRIMARY KEY, parent TEXT NOT NULL, data BLOB NOT NULL,
        version INTEGER NOT NULL, cversion INTEGER NOT NULL, num_children INTEGER NOT NULL,
        ctime INTEGER NOT NULL, mtime INTEGER NOT NULL, ephemeral_owner INTEGER NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS nodes_parent ON nodes(parent)",
    "CREATE INDEX IF NOT EXISTS nodes_owner ON nodes(ephemeral_owner)",
    """CREATE TABLE IF NOT EXISTS sessions (
        id INTEGER PRIMARY KEY AUTOINCREMENT, timeout_ms INTEGER NOT NULL,
        expires_at INTEGER NOT NULL, owner TEXT)""",
    """CREATE TABLE IF NOT EXISTS changes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT NOT NULL, kind INTEGER NOT NULL)""",
    "INSERT OR IGNORE INTO nodes VALUES ('/', '', x'', 0, 0, 0, 0, 0, 0)",
]

T = TypeVar("T")


@dataclass
class _SqlStore:
    """A NodeStore over the open transaction of a connection."""

    conn: sqlite3.Connection
    events: list[WatchEvent] = field(default_factory=list)

    def get(self, path: str) -> Node | None:
        row = self.conn.execute(
            "SELECT data, version, cversion, num_children, ctime, mtime, ephemeral_owner"
            " FROM nodes WHERE path = ?",
            (path,),
        ).fetchone()
        return Node(bytes(row[0]), *row[1:]) if row else None

    def put(self, path: str, node: Node) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO nodes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                path,
                parent_of(path),
                node.data,
                node.version,
                node.cversion,
                node.num_children,
                node.ctime,
                node.mtime,
                node.ephemeral_owner,
            ),
        )

    def remove(self, path: str) -> None:
        self.conn.execute("DELETE FROM nodes WHERE path = ?", (path,))

    def children(self, path: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT path FROM nodes WHERE parent = ? AND path != '/' ORDER BY path", (path,)
        )
        return [r[0].rsplit("/", 1)[1] for r in rows]

    def ephemerals(self, session_id: int) -> list[str]:
        rows = self.conn.execute("SELECT path FROM nodes WHERE ephemeral_owner = ?", (session_id,))
        return [r[0] for r in rows]

    def emit(self, kind: EventType, path: str) -> None:
        self.events.append(WatchEvent(kind, path))


def _owner_is_gone(owner: str | None) -> bool:
    """A session whose process on this host has exited needs no timeout to be known dead:
    all clients of one SQLite file share the host, so a restarted broker need not wait
    for its killed predecessor's session to expire."""
    if not owner:
        return False
    boot_id, pid, _ = owner.split(":")
    if boot_id != this_boot_id():
        return False
    return process_identity(int(pid)) != owner


class _Db:
    """The connection; only ever used from the client's single worker thread."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self._in_write(lambda store: [self.conn.execute(sql) for sql in _SCHEMA])
        # Expired session id -> the one session that replaced it (see _replacement).
        self._replaced: dict[int, int] = {}

    def _in_write(self, body: Callable[[_SqlStore], T]) -> T:
        """Run ``body`` in a BEGIN IMMEDIATE transaction, logging the events it emits."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            store = _SqlStore(conn)
            result = body(store)
            conn.executemany(
                "INSERT INTO changes (path, kind) VALUES (?, ?)",
                [(e.path, _KINDS[e.type]) for e in store.events],
            )
            conn.execute("COMMIT")
            return result
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _touch(self, store: _SqlStore, sid: int, timeout_ms: int, now: int) -> bool:
        """Push our deadline forward and reap expired sessions; False if ours is gone."""
        row = self.conn.execute("SELECT expires_at FROM sessions WHERE id = ?", (sid,)).fetchone()
        alive = row is not None and now <= row[0]
        if alive:
            self.conn.execute(
                "UPDATE sessions SET expires_at = ? WHERE id = ?", (now + timeout_ms, sid)
            )
        self._reap(store, now)
        return alive

    def _reap(self, store: _SqlStore, now: int | None) -> bool:
        """End the sessions past their deadline (unless ``now`` is None) or whose process
        is gone; whether any were."""
        dead = [
            row[0]
            for row in self.conn.execute("SELECT id, expires_at, owner FROM sessions").fetchall()
            if (now is not None and row[1] < now) or _owner_is_gone(row[2])
        ]
        for dead_sid in dead:
            self.conn.execute("DELETE FROM sessions WHERE id = ?", (dead_sid,))
            end_session(store, dead_sid)
        return bool(dead)

    def reap_gone_processes(self) -> bool:
        """End the sessions of processes that have exited, checked with every change poll
        rather than every heartbeat: a SIGKILLed broker's registration goes within a
        poll interval, while a broker merely busy (or stopped) keeps its session until
        the timeout. Reads first and writes only when one is gone."""
        owners = self.conn.execute("SELECT owner FROM sessions").fetchall()
        if not any(_owner_is_gone(owner) for (owner,) in owners):
            return False
        return self._in_write(lambda store: self._reap(store, None))

    def _new_session(self, timeout_ms: int, now: int) -> int:
        cur = self.conn.execute(
            "INSERT INTO sessions (timeout_ms, expires_at, owner) VALUES (?, ?, ?)",
            (timeout_ms, now + timeout_ms, process_identity()),
        )
        assert cur.lastrowid is not None
        return cur.lastrowid

    def _replacement(self, sid: int, timeout_ms: int, now: int) -> int:
        """The one new session replacing an expired ``sid``. Calls queued with the old id
        (a heartbeat and a write, after the process slept) must not each open one: the
        client keeps only the last, so the other, never heartbeated, would expire a
        timeout later and take with it the ephemerals created under it meanwhile."""
        new = self._replaced.get(sid)
        if new is not None:
            row = self.conn.execute(
                "SELECT expires_at FROM sessions WHERE id = ?", (new,)
            ).fetchone()
            if row is not None and now <= row[0]:
                return new
        new = self._new_session(timeout_ms, now)
        self._replaced[sid] = new
        return new

    def open_session(self, timeout_ms: int, now: int) -> tuple[int, int]:
        def body(store: _SqlStore) -> tuple[int, int]:
            seq = self.conn.execute("SELECT COALESCE(MAX(seq), 0) FROM changes").fetchone()[0]
            return self._new_session(timeout_ms, now), seq

        return self._in_write(body)

    def heartbeat(self, sid: int, timeout_ms: int, now: int) -> int | None:
        """Keep ``sid`` alive; returns a new session id if it had expired."""

        def body(store: _SqlStore) -> int | None:
            alive = self._touch(store, sid, timeout_ms, now)
            self.conn.execute(
                "DELETE FROM changes WHERE seq <= (SELECT MAX(seq) FROM changes) - ?",
                (CHANGE_LOG_KEEP,),
            )
            return None if alive else self._replacement(sid, timeout_ms, now)

        return self._in_write(body)

    def write(self, action: Action, sid: int, timeout_ms: int, now: int) -> tuple[str, object]:
        """('ok', result), ('error', exc: rolled back) or ('expired', new session id)."""

        def body(store: _SqlStore) -> tuple[str, object]:
            if not self._touch(store, sid, timeout_ms, now):
                return "expired", self._replacement(sid, timeout_ms, now)
            mark = len(store.events)
            self.conn.execute("SAVEPOINT op")
            try:
                result = action(store, sid, now)
            except MetastoreError as exc:
                self.conn.execute("ROLLBACK TO op")
                self.conn.execute("RELEASE op")
                del store.events[mark:]
                return "error", exc
            self.conn.execute("RELEASE op")
            return "ok", result

        return self._in_write(body)

    def read(self, action: Action, sid: int, now: int) -> object:
        self.conn.execute("BEGIN")
        try:
            return action(_SqlStore(self.conn), sid, now)
        finally:
            self.conn.execute("COMMIT")

    def poll(self, after: int) -> tuple[list[tuple[int, str, int]], bool]:
        """Change rows after ``after`` (a dead process's session ended first), and
        whether rows we never saw were pruned."""
        self.reap_gone_processes()
        rows = self.conn.execute(
            "SELECT seq, path, kind FROM changes WHERE seq > ? ORDER BY seq LIMIT 5000", (after,)
        ).fetchall()
        lost = False
        if rows and rows[0][0] != after + 1:
            lowest = self.conn.execute("SELECT MIN(seq) FROM changes").fetchone()[0]
            lost = lowest is not None and lowest > after + 1
        return rows, lost

    def close_session(self, sid: int) -> None:
        def body(store: _SqlStore) -> None:
            if self.conn.execute("DELETE FROM sessions WHERE id = ?", (sid,)).rowcount:
                end_session(store, sid)

        self._in_write(body)

    def close(self) -> None:
        self.conn.close()


class SqliteMetastore(TreeMetastore):
    def __init__(self, clock: Clock, session_timeout_ms: int) -> None:
        super().__init__(clock, session_timeout_ms)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="metastore-sqlite")
        self._db: _Db | None = None
        self._session = 0
        self._seen = 0
        self._poll_lock = asyncio.Lock()
        self._heartbeats_paused = False

    @classmethod
    async def open(cls, path: str, clock: Clock, session_timeout_ms: int) -> SqliteMetastore:
        self = cls(clock, session_timeout_ms)
        try:
            self._db = await self._run(_Db, path)
            self._session, self._seen = await self._run(
                self._db.open_session, session_timeout_ms, clock.time_ms()
            )
        except BaseException:
            self._executor.shutdown(wait=False)
            raise
        self._spawn(self._heartbeat_loop())
        self._spawn(self._poll_loop())
        return self

    @property
    def session_id(self) -> int:
        return self._session

    def pause_heartbeats(self, paused: bool = True) -> None:
        """Stop (or resume) heartbeats: how a test makes this client look dead."""
        self._heartbeats_paused = paused

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        try:
            return await self._loop.run_in_executor(self._executor, fn, *args)
        except sqlite3.Error as exc:
            raise ConnectionLossError(f"sqlite: {exc}") from exc

    @property
    def _open_db(self) -> _Db:
        if self.closed or self._db is None:
            raise MetastoreError("metastore is closed")
        return self._db

    async def _write(self, action: Action) -> object:
        outcome, value = await self._run(
            self._open_db.write,
            action,
            self._session,
            self.session_timeout_ms,
            self.clock.time_ms(),
        )
        if outcome == "expired":
            assert isinstance(value, int)
            self._replace_session(value)
            raise SessionExpiredError("session expired; a new one replaced it")
        self._spawn(self._poll_once())
        if outcome == "error":
            assert isinstance(value, BaseException)
            raise value
        return value

    async def _read(self, action: Action) -> object:
        return await self._run(self._open_db.read, action, self._session, self.clock.time_ms())

    def _replace_session(self, new_session: int) -> None:
        if new_session != self._session:
            self._session = new_session
            self._session_replaced()

    async def _arm(self, kind: str, path: str) -> None:
        await self._poll_once()  # deliver older changes before the new watch exists

    async def _heartbeat_loop(self) -> None:
        while not self.closed:
            await self.clock.sleep(self.session_timeout_ms / 3000)
            if self._heartbeats_paused or self.closed:
                continue
            try:
                new = await self._run(
                    self._open_db.heartbeat,
                    self._session,
                    self.session_timeout_ms,
                    self.clock.time_ms(),
                )
            except MetastoreError:
                log.warning("metastore heartbeat failed", exc_info=True)
                continue
            if new is not None:
                self._replace_session(new)
            self._spawn(self._poll_once())

    async def _poll_loop(self) -> None:
        while not self.closed:
            await self.clock.sleep(POLL_INTERVAL_S)
            try:
                await self._poll_once()
            except MetastoreError:
                log.warning("metastore change poll failed", exc_info=True)

    async def _poll_once(self) -> None:
        async with self._poll_lock:
            if self.closed:
                return
            rows, lost = await self._run(self._open_db.poll, self._seen)
            if lost:
                log.warning("metastore change log pruned past us: firing every watch")
                for kind, path in list(self._watches):
                    etype = EventType.CHILDREN if kind == "children" else EventType.CHANGED
                    self._dispatch(WatchEvent(etype, path))
            for seq, path, kind in rows:
                self._seen = seq
                self._dispatch(WatchEvent(_TYPES[kind], path))

    async def close(self) -> None:
        if self.closed:
            return
        db = self._open_db
        self.closed = True
        self._cancel_tasks()
        try:
            await self._loop.run_in_executor(self._executor, db.close_session, self._session)
        except sqlite3.Error:
            log.warning("could not end metastore session %s", self._session, exc_info=True)
        finally:
            await self._loop.run_in_executor(self._executor, db.close)
            self._executor.shutdown(wait=False)
