"""``zk://HOST:PORT[,HOST:PORT...][/chroot]``: the metastore on a real ZooKeeper ensemble.

An edge adapter over kazoo. Kazoo runs its own threads; every result and event is handed
to the asyncio loop with ``call_soon_threadsafe``, so callbacks never run on a kazoo
thread. Our persistent watches are built from ZooKeeper's one-shot watches: each fired
watch is re-armed by re-reading the node, and the event reported is worked out from the
node's zxids before and after, so several changes in quick succession may be reported
as one event (callbacks re-read anyway). Kazoo drops its watches when the connection is
lost; on reconnect every watched path is re-read and re-armed, and differences are
reported. On session expiry kazoo opens a new session by itself; we then re-arm the
watches and call the ``on_session_expired`` callbacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo import exceptions as kx
from kazoo.client import KazooClient, KazooState
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType as KzEventType
from kazoo.protocol.states import ZnodeStat
from kazoo.retry import KazooRetry

from epochlog.metastore.api import (
    BadVersionError,
    Check,
    ConnectionLossError,
    Create,
    Delete,
    EventType,
    Metastore,
    MetastoreError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    OpResult,
    SessionExpiredError,
    SetData,
    Stat,
    WatchEvent,
    join,
    validate_path,
)
from epochlog.seams import Clock

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 15.0
RECURSIVE_DELETE_ATTEMPTS = 10

_ERRORS: list[tuple[type[Exception], type[MetastoreError]]] = [
    (kx.NoNodeError, NoNodeError),
    (kx.NodeExistsError, NodeExistsError),
    (kx.BadVersionError, BadVersionError),
    (kx.NotEmptyError, NotEmptyError),
    (kx.NoChildrenForEphemeralsError, NoChildrenForEphemeralsError),
    (kx.SessionExpiredError, SessionExpiredError),
    (kx.ConnectionLoss, ConnectionLossError),
    (kx.ConnectionClosedError, ConnectionLossError),
    (kx.OperationTimeoutError, ConnectionLossError),
    (KazooTimeoutError, ConnectionLossError),
]


def _map_error(exc: BaseException, path: str | None) -> BaseException:
    for theirs, ours in _ERRORS:
        if isinstance(exc, theirs):
            return ours(str(exc) or path or "", path)
    if isinstance(exc, kx.KazooException):
        return MetastoreError(f"{type(exc).__name__}: {exc}", path)
    return exc


def _stat(s: ZnodeStat) -> Stat:
    return Stat(
        version=s.version,
        cversion=s.cversion,
        ephemeral_owner=s.ephemeralOwner,
        ctime=s.ctime,
        mtime=s.mtime,
        num_children=s.numChildren,
        data_length=s.dataLength,
    )


def parse_hosts(rest: str) -> tuple[str, str]:
    """'h1:p1,h2:p2/chroot' -> ('h1:p1,h2:p2', '/chroot' or '')."""
    hosts, slash, chroot = rest.partition("/")
    if not hosts:
        raise ValueError(f"zk metastore URI needs HOST:PORT: zk://{rest}")
    chroot = "/" + chroot.rstrip("/") if slash and chroot.strip("/") else ""
    return hosts, validate_path(chroot) if chroot else ""


@dataclass
class _PathWatch:
    """ZooKeeper-side state of one watched path: what we last saw, to diff against."""

    path: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    data_armed: bool = False
    data_seen: tuple[int, int] | None = None  # (czxid, mzxid) or None when absent
    children_armed: bool = False
    children_seen: tuple[int, int, int] | None = None  # (czxid, pzxid, num_children)
    data_fn: Callable[[Any], None] | None = None
    children_fn: Callable[[Any], None] | None = None


class ZkMetastore(Metastore):
    def __init__(self, clock: Clock, session_timeout_ms: int, hosts: str, chroot: str) -> None:
        super().__init__(clock, session_timeout_ms)
        self.hosts = hosts
        self.chroot = chroot
        self._client = KazooClient(
            hosts=hosts,
            timeout=session_timeout_ms / 1000,
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, max_delay=1.0),
        )
        self._session = 0
        self._lost = False
        self._suspended = False
        self._paths: dict[str, _PathWatch] = {}

    @classmethod
    async def open(cls, rest: str, clock: Clock, session_timeout_ms: int) -> ZkMetastore:
        hosts, chroot = parse_hosts(rest)
        self = cls(clock, session_timeout_ms, hosts, chroot)
        try:
            await self._loop.run_in_executor(None, self._client.start, CONNECT_TIMEOUT_S)
            if chroot:
                await self._loop.run_in_executor(None, self._client.ensure_path, chroot)
                self._client.chroot = chroot
        except Exception as exc:
            await self._loop.run_in_executor(None, self._shutdown_client)
            raise _map_error(exc, chroot or None) from exc
        self._session = self._client.client_id[0]
        self._client.add_listener(self._on_state_thread)
        return self

    @property
    def session_id(self) -> int:
        return self._session

    def _shutdown_client(self) -> None:
        try:
            self._client.stop()
        finally:
            self._client.close()

    # -- bridging kazoo's async results and events onto the loop ------------------------

    async def _call(
        self, method: Callable[..., Any], *args: object, path: str | None = None, **kwargs: object
    ) -> Any:
        """Start a kazoo ``*_async`` call and await its result on the loop."""
        if self.closed:
            raise MetastoreError("metastore is closed")
        fut: asyncio.Future[Any] = self._loop.create_future()
        try:
            result = method(*args, **kwargs)
        except Exception as exc:
            raise _map_error(exc, path) from exc

        def settle(ar: Any) -> None:
            if fut.done():
                return
            if ar.successful():
                fut.set_result(ar.value)
            else:
                fut.set_exception(ar.exception)

        result.rawlink(lambda ar: self._threadsafe(settle, ar))
        try:
            return await fut
        except Exception as exc:
            raise _map_error(exc, path) from exc

    def _threadsafe(self, fn: Callable[..., None], *args: object) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is left to tell
            self._loop.call_soon_threadsafe(fn, *args)

    def _on_state_thread(self, state: str) -> None:
        self._threadsafe(self._on_state, state)

    def _on_state(self, state: str) -> None:
        if self.closed:
            return
        if state == KazooState.LOST:
            self._lost = True
        elif state == KazooState.SUSPENDED:
            self._suspended = True
        elif state == KazooState.CONNECTED and (self._lost or self._suspended):
            new_session = self._lost
            self._lost = self._suspended = False
            client_id = self._client.client_id
            if client_id:
                self._session = client_id[0]
            self._spawn(self._after_reconnect(new_session))

    async def _after_reconnect(self, new_session: bool) -> None:
        for pw in list(self._paths.values()):
            pw.data_armed = pw.children_armed = False
            try:
                await self._refresh(pw, "data")
                await self._refresh(pw, "children")
            except (ConnectionLossError, SessionExpiredError):
                return  # cut off again: the next reconnect re-arms
        if new_session:
            self._session_replaced()

    # -- watches --------------------------------------------------------------------------

    def _path_watch(self, path: str) -> _PathWatch:
        pw = self._paths.get(path)
        if pw is None:
            pw = self._paths[path] = _PathWatch(path)
            pw.data_fn = lambda ev: self._raw_event(path, "data", ev)
            pw.children_fn = lambda ev: self._raw_event(path, "children", ev)
        return pw

    def _raw_event(self, path: str, kind: str, event: Any) -> None:
        """On a kazoo thread: a one-shot watch fired (NONE: the connection dropped)."""
        if event.type != KzEventType.NONE:
            self._threadsafe(self._on_raw_event, path, kind)

    def _on_raw_event(self, path: str, kind: str) -> None:
        if not self.closed and path in self._paths:
            self._spawn(self._refresh_after_event(self._paths[path], kind))

    async def _refresh_after_event(self, pw: _PathWatch, kind: str) -> None:
        """A fired watch's re-read. Cut off from the ensemble meanwhile (the connection
        dropped, the session expired), it is left to the reconnect, which re-reads and
        re-arms every watched path: nothing is missed, and nothing is wrong to log."""
        try:
            await self._refresh(pw, kind)
        except (ConnectionLossError, SessionExpiredError) as exc:
            log.info("watch on %s re-armed at reconnect: %s", pw.path, type(exc).__name__)

    async def _arm(self, kind: str, path: str) -> None:
        pw = self._path_watch(path)
        armed = pw.data_armed if kind == "data" else pw.children_armed
        if not armed:
            await self._refresh(pw, kind, dispatch=False)

    async def _refresh(self, pw: _PathWatch, kind: str, dispatch: bool = True) -> None:
        """Re-read the path, re-arm ZooKeeper's one-shot watch, report what changed."""
        async with pw.lock:
            if kind == "data":
                stat = await self._call(
                    self._client.exists_async, pw.path, watch=pw.data_fn, path=pw.path
                )
                seen = (stat.czxid, stat.mzxid) if stat else None
                old, pw.data_seen, pw.data_armed = pw.data_seen, seen, True
                if dispatch:
                    for etype in _data_events(old, seen):
                        self._dispatch(WatchEvent(etype, pw.path))
            else:
                cseen = await self._children_state(pw)
                cold, pw.children_seen, pw.children_armed = pw.children_seen, cseen, True
                if dispatch and _children_changed(cold, cseen):
                    self._dispatch(WatchEvent(EventType.CHILDREN, pw.path))

    async def _children_state(self, pw: _PathWatch) -> tuple[int, int, int] | None:
        while True:
            try:
                _, stat = await self._call(
                    self._client.get_children_async,
                    pw.path,
                    watch=pw.children_fn,
                    include_data=True,
                    path=pw.path,
                )
                return stat.czxid, stat.pzxid, stat.numChildren
            except NoNodeError:
                # Absent: watch for its creation instead.
                stat = await self._call(
                    self._client.exists_async, pw.path, watch=pw.children_fn, path=pw.path
                )
                if stat is None:
                    return None

    # -- operations -----------------------------------------------------------------------

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        validate_path(path)
        created = await self._call(
            self._client.create_async,
            path,
            bytes(data),
            ephemeral=ephemeral,
            sequence=sequential,
            makepath=make_parents,
            path=path,
        )
        return str(created)

    async def get(self, path: str) -> tuple[bytes, Stat]:
        data, stat = await self._call(self._client.get_async, validate_path(path), path=path)
        return bytes(data), _stat(stat)

    async def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        validate_path(path)
        stat = await self._call(self._client.set_async, path, bytes(data), version, path=path)
        return _stat(stat)

    async def exists(self, path: str) -> Stat | None:
        stat = await self._call(self._client.exists_async, validate_path(path), path=path)
        return _stat(stat) if stat else None

    async def children(self, path: str) -> list[str]:
        names = await self._call(self._client.get_children_async, validate_path(path), path=path)
        return sorted(names)

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        validate_path(path)
        if path == "/":
            raise MetastoreError("the root cannot be deleted", path)
        if not recursive:
            await self._call(self._client.delete_async, path, version, path=path)
            return
        # One transaction deleting the subtree deepest first; retried if it changed.
        for _ in range(RECURSIVE_DELETE_ATTEMPTS):
            ops: list[Op] = []
            await self._collect(path, ops)
            ops.append(Delete(path, version))
            try:
                await self.multi(ops)
                return
            except (NotEmptyError, NoNodeError) as exc:
                if exc.path == path and isinstance(exc, NoNodeError):
                    raise
        raise NotEmptyError(f"{path}: children kept changing during recursive delete", path)

    async def _collect(self, path: str, ops: list[Op]) -> None:
        try:
            names = await self.children(path)
        except NoNodeError:
            return
        for name in names:
            child = join(path, name)
            await self._collect(child, ops)
            ops.append(Delete(child, -1))

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        ops = list(ops)
        if not ops:
            return []
        txn = self._client.transaction()
        for op in ops:
            validate_path(op.path)
            if isinstance(op, Check):
                txn.check(op.path, op.version)
            elif isinstance(op, Create):
                txn.create(op.path, bytes(op.data), ephemeral=op.ephemeral, sequence=op.sequential)
            elif isinstance(op, SetData):
                txn.set_data(op.path, bytes(op.data), op.version)
            elif isinstance(op, Delete):
                txn.delete(op.path, op.version)
            else:
                raise MetastoreError(f"unknown op {op!r}")
        results = await self._call(txn.commit_async)
        out: list[OpResult] = []
        for op, res in zip(ops, results, strict=True):
            if isinstance(res, Exception) and not isinstance(res, kx.RolledBackError):
                raise _map_error(res, op.path) from res
        for op, res in zip(ops, results, strict=True):
            if isinstance(op, Create):
                out.append(self._unchroot(str(res)))
            elif isinstance(op, SetData):
                out.append(_stat(res))
            else:
                out.append(None)
        return out

    def _unchroot(self, path: str) -> str:
        if self.chroot and path.startswith(self.chroot + "/"):
            return path[len(self.chroot) :]
        return path

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._cancel_tasks()
        self._client.remove_listener(self._on_state_thread)
        await self._loop.run_in_executor(None, self._shutdown_client)


def _data_events(old: tuple[int, int] | None, new: tuple[int, int] | None) -> list[EventType]:
    if old == new:
        return []
    if old is None:
        return [EventType.CREATED]
    if new is None:
        return [EventType.DELETED]
    if old[0] != new[0]:  # deleted and created again between two looks
        return [EventType.DELETED, EventType.CREATED]
    return [EventType.CHANGED]


def _children_changed(old: tuple[int, int, int] | None, new: tuple[int, int, int] | None) -> bool:
    if old is None or new is None:
        present = old or new
        return bool(present and present[2])
    return old != new
