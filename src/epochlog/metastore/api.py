"""The metastore interface: ZooKeeper-like versioned nodes, sessions and watches.

Every backend (memory, sqlite, zk) implements :class:`Metastore`; the controller and
brokers only ever see this module's types, so they run unchanged on one process
(simulation), one host (embedded SQLite) or many hosts (ZooKeeper).

Watches are *persistent*: a callback registered with :meth:`Metastore.watch_data` or
:meth:`Metastore.watch_children` keeps firing until :meth:`Watch.cancel`. Callbacks
always run on the asyncio loop that opened the metastore, never on a foreign thread.
An event says *that* something changed, not what: callbacks re-read the node. After a
session expiry or a lost change log a watch may fire once without a change (re-reading
is then harmless); it never stays silent after a change it could see.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import inspect
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from epochlog.seams import Clock
from epochlog.seams.tasks import BackgroundTasks

log = logging.getLogger(__name__)


class MetastoreError(Exception):
    """Base of every metastore failure; ``path`` names the node when there is one."""

    def __init__(self, message: str = "", path: str | None = None) -> None:
        super().__init__(message or (path or ""))
        self.path = path


class NoNodeError(MetastoreError):
    """The node (or, for create, its parent) does not exist."""


class NodeExistsError(MetastoreError):
    """Create of a path that is already there."""


class BadVersionError(MetastoreError):
    """A compare-and-set (set, delete or check) saw another version."""


class NotEmptyError(MetastoreError):
    """Delete of a node that has children, without ``recursive``."""


class NoChildrenForEphemeralsError(MetastoreError):
    """Ephemeral nodes cannot have children (as in ZooKeeper)."""


class SessionExpiredError(MetastoreError):
    """The session ended under this call; a new one is already being set up."""


class ConnectionLossError(MetastoreError):
    """The backend could not be reached; the outcome of a write is unknown."""


class EventType(enum.Enum):
    CREATED = "created"
    CHANGED = "changed"
    DELETED = "deleted"
    CHILDREN = "children"


@dataclass(frozen=True)
class WatchEvent:
    type: EventType
    path: str


@dataclass(frozen=True)
class Stat:
    """What a node's metadata says; ``version`` is the data version used for CAS."""

    version: int
    cversion: int
    ephemeral_owner: int
    ctime: int
    mtime: int
    num_children: int
    data_length: int


# Transaction operations (all-or-nothing through Metastore.multi).
@dataclass(frozen=True)
class Check:
    path: str
    version: int


@dataclass(frozen=True)
class Create:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True)
class SetData:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True)
class Delete:
    path: str
    version: int = -1


Op = Check | Create | SetData | Delete
# Result per op: the created path for Create, the new Stat for SetData, None otherwise.
OpResult = str | Stat | None

WatchCallback = Callable[[WatchEvent], Awaitable[None] | None]
SessionCallback = Callable[[], Awaitable[None] | None]


def validate_path(path: str) -> str:
    """ZooKeeper's path rules: absolute, no empty, '.' or '..' components, no trailing '/'."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise MetastoreError(f"path must be absolute: {path!r}", path)
    if path == "/":
        return path
    parts = path[1:].split("/")
    if any(p in ("", ".", "..") for p in parts) or "\x00" in path:
        raise MetastoreError(f"invalid path: {path!r}", path)
    return path


def parent_of(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


def join(parent: str, name: str) -> str:
    return ("" if parent == "/" else parent) + "/" + name


class Watch:
    """A registered persistent watch; :meth:`cancel` stops it."""

    def __init__(self, owner: Metastore, kind: str, path: str, callback: WatchCallback) -> None:
        self.owner = owner
        self.kind = kind  # "data" or "children"
        self.path = path
        self.callback = callback
        self.active = True

    def cancel(self) -> None:
        if self.active:
            self.active = False
            self.owner._forget_watch(self)


class Transaction:
    """Builder for :meth:`Metastore.multi`: ``t = ms.transaction(); t.check(...); ...``."""

    def __init__(self, owner: Metastore) -> None:
        self._owner = owner
        self.ops: list[Op] = []

    def check(self, path: str, version: int) -> Transaction:
        self.ops.append(Check(path, version))
        return self

    def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False
    ) -> Transaction:
        self.ops.append(Create(path, data, ephemeral, sequential))
        return self

    def set(self, path: str, data: bytes, version: int = -1) -> Transaction:
        self.ops.append(SetData(path, data, version))
        return self

    def delete(self, path: str, version: int = -1) -> Transaction:
        self.ops.append(Delete(path, version))
        return self

    async def commit(self) -> list[OpResult]:
        return await self._owner.multi(self.ops)


class Metastore(ABC):
    """One client with one session at a time; see the module docstring for semantics.

    When the session expires the client opens a new one by itself, then calls the
    ``on_session_expired`` callbacks so owners re-create their ephemeral nodes and
    re-read what they watch. Watches survive session changes.
    """

    def __init__(self, clock: Clock, session_timeout_ms: int) -> None:
        self.clock = clock
        self.session_timeout_ms = session_timeout_ms
        self._loop = asyncio.get_running_loop()
        # Callbacks run in the context of whoever made this client, not of whoever made
        # the change (a simulation knows which host a task belongs to by its context).
        self._context = contextvars.copy_context()
        self._watches: dict[tuple[str, str], list[Watch]] = {}
        self._expired_callbacks: list[SessionCallback] = []
        self._tasks = BackgroundTasks(log, "metastore task")
        self.closed = False

    # -- the operations each backend provides -------------------------------------------

    @property
    @abstractmethod
    def session_id(self) -> int:
        """The current session's id (what ``Stat.ephemeral_owner`` holds for our nodes)."""

    @abstractmethod
    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        """Create a node; returns its path (with the suffix when ``sequential``)."""

    @abstractmethod
    async def get(self, path: str) -> tuple[bytes, Stat]: ...

    @abstractmethod
    async def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        """Replace the data if ``version`` matches (-1: any); returns the new Stat."""

    @abstractmethod
    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        """Delete a node (``recursive``: with its subtree, atomically)."""

    @abstractmethod
    async def exists(self, path: str) -> Stat | None: ...

    @abstractmethod
    async def children(self, path: str) -> list[str]:
        """Names (not paths) of the node's children, sorted."""

    @abstractmethod
    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        """Apply all ops or none; the first failing op's error is raised."""

    @abstractmethod
    async def close(self) -> None:
        """End the session: its ephemeral nodes go at once; watches stop."""

    async def _arm(self, kind: str, path: str) -> None:  # noqa: B027 - optional hook
        """Called before a watch is registered: backends set server watches or flush
        pending change notifications here, so a new watch only sees later changes."""

    # -- shared plumbing ----------------------------------------------------------------

    def transaction(self) -> Transaction:
        return Transaction(self)

    async def watch_data(self, path: str, callback: WatchCallback) -> Watch:
        """Persistent watch on a node's existence and data (CREATED, CHANGED, DELETED).

        The node need not exist. Every change made after this returns is reported.
        """
        return await self._add_watch("data", validate_path(path), callback)

    async def watch_children(self, path: str, callback: WatchCallback) -> Watch:
        """Persistent watch on a node's set of children (CHILDREN events)."""
        return await self._add_watch("children", validate_path(path), callback)

    def on_session_expired(self, callback: SessionCallback) -> None:
        """Call ``callback`` (on the loop) each time a new session replaced an expired one."""
        self._expired_callbacks.append(callback)

    async def _add_watch(self, kind: str, path: str, callback: WatchCallback) -> Watch:
        if self.closed:
            raise MetastoreError("metastore is closed")
        await self._arm(kind, path)
        watch = Watch(self, kind, path, callback)
        self._watches.setdefault((kind, path), []).append(watch)
        return watch

    def _forget_watch(self, watch: Watch) -> None:
        key = (watch.kind, watch.path)
        watches = self._watches.get(key, [])
        if watch in watches:
            watches.remove(watch)
        if not watches:
            self._watches.pop(key, None)

    def _watched(self, kind: str, path: str) -> bool:
        return (kind, path) in self._watches

    def _dispatch(self, event: WatchEvent) -> None:
        """Run the callbacks interested in ``event``; must be called on the loop."""
        kind = "children" if event.type is EventType.CHILDREN else "data"
        for watch in list(self._watches.get((kind, event.path), ())):
            if watch.active and not self.closed:
                self._invoke(watch.callback, event)

    def _dispatch_soon(self, events: Sequence[WatchEvent]) -> None:
        """Hand events to the loop from any thread; callbacks never run inline.

        On the loop's own thread the interested watches are picked now, so a watch
        registered after the change (but before the callbacks run) does not see it.
        """
        if not events or self.closed or self._loop.is_closed():
            return
        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            on_loop = False
        if not on_loop:
            self._loop.call_soon_threadsafe(self._dispatch_all, list(events), context=self._context)
            return
        targets = []
        for event in events:
            kind = "children" if event.type is EventType.CHILDREN else "data"
            targets += [(w, event) for w in self._watches.get((kind, event.path), ())]
        if targets:
            self._loop.call_soon(self._fire, targets, context=self._context)

    def _fire(self, targets: list[tuple[Watch, WatchEvent]]) -> None:
        for watch, event in targets:
            if watch.active and not self.closed:
                self._invoke(watch.callback, event)

    def _dispatch_all(self, events: list[WatchEvent]) -> None:
        for event in events:
            self._dispatch(event)

    def _session_replaced(self) -> None:
        """Tell the owners a new session replaced an expired one (on the loop)."""
        for callback in list(self._expired_callbacks):
            self._invoke(callback)

    def _invoke(self, callback: Callable[..., Awaitable[None] | None], *args: object) -> None:
        try:
            result = callback(*args)
        except Exception:
            log.exception("metastore callback %r failed", callback)
            return
        if inspect.isawaitable(result):
            self._spawn(result)

    def _spawn(self, awaitable: Awaitable[object]) -> None:
        self._tasks.spawn(awaitable)

    def _cancel_tasks(self) -> None:
        self._tasks.cancel()

    async def __aenter__(self) -> Metastore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
