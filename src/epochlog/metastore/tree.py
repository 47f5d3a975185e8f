"""ZooKeeper's node semantics over a small storage interface, shared by memory and sqlite.

The rules (versions, sequential suffixes, ephemerals, recursive delete, multi) live here
once; a backend supplies a :class:`NodeStore` whose writes it can roll back, and turns the
events the rules emit into watch notifications.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from epochlog.metastore.api import (
    BadVersionError,
    Check,
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
    SetData,
    Stat,
    join,
    parent_of,
    validate_path,
)


@dataclass(frozen=True)
class Node:
    data: bytes
    version: int = 0
    cversion: int = 0
    num_children: int = 0
    ctime: int = 0
    mtime: int = 0
    ephemeral_owner: int = 0

    def stat(self) -> Stat:
        return Stat(
            version=self.version,
            cversion=self.cversion,
            ephemeral_owner=self.ephemeral_owner,
            ctime=self.ctime,
            mtime=self.mtime,
            num_children=self.num_children,
            data_length=len(self.data),
        )


ROOT = Node(b"")


class NodeStore(Protocol):
    """Storage for one transaction; the backend commits or rolls back around it."""

    def get(self, path: str) -> Node | None: ...

    def put(self, path: str, node: Node) -> None: ...

    def remove(self, path: str) -> None: ...

    def children(self, path: str) -> list[str]:
        """Child names, sorted."""

    def ephemerals(self, session_id: int) -> list[str]: ...

    def emit(self, kind: EventType, path: str) -> None: ...


def _need(store: NodeStore, path: str) -> Node:
    node = store.get(path)
    if node is None:
        raise NoNodeError(path=path)
    return node


def _check_version(node: Node, path: str, version: int) -> None:
    if version != -1 and version != node.version:
        raise BadVersionError(f"{path}: version {node.version}, expected {version}", path)


def create(
    store: NodeStore,
    path: str,
    data: bytes,
    *,
    ephemeral: bool,
    sequential: bool,
    make_parents: bool,
    session_id: int,
    now_ms: int,
) -> str:
    validate_path(path)
    if path == "/":
        raise NodeExistsError(path=path)
    parent = parent_of(path)
    pnode = store.get(parent)
    if pnode is None:
        if not make_parents:
            raise NoNodeError(f"parent of {path} does not exist", parent)
        create(
            store,
            parent,
            b"",
            ephemeral=False,
            sequential=False,
            make_parents=True,
            session_id=session_id,
            now_ms=now_ms,
        )
        pnode = _need(store, parent)
    if pnode.ephemeral_owner:
        raise NoChildrenForEphemeralsError(path=parent)
    if sequential:
        path = f"{path}{pnode.cversion:010d}"
    if store.get(path) is not None:
        raise NodeExistsError(path=path)
    owner = session_id if ephemeral else 0
    store.put(path, Node(bytes(data), ctime=now_ms, mtime=now_ms, ephemeral_owner=owner))
    store.put(
        parent, replace(pnode, cversion=pnode.cversion + 1, num_children=pnode.num_children + 1)
    )
    store.emit(EventType.CREATED, path)
    store.emit(EventType.CHILDREN, parent)
    return path


def set_data(store: NodeStore, path: str, data: bytes, version: int, now_ms: int) -> Stat:
    node = _need(store, validate_path(path))
    _check_version(node, path, version)
    new = replace(node, data=bytes(data), version=node.version + 1, mtime=now_ms)
    store.put(path, new)
    store.emit(EventType.CHANGED, path)
    return new.stat()


def delete(store: NodeStore, path: str, version: int, recursive: bool) -> None:
    node = _need(store, validate_path(path))
    if path == "/":
        raise MetastoreError("the root cannot be deleted", path)
    _check_version(node, path, version)
    if node.num_children:
        if not recursive:
            raise NotEmptyError(path=path)
        for name in store.children(path):
            delete(store, join(path, name), -1, True)
    store.remove(path)
    parent = parent_of(path)
    pnode = _need(store, parent)
    store.put(
        parent, replace(pnode, cversion=pnode.cversion + 1, num_children=pnode.num_children - 1)
    )
    store.emit(EventType.DELETED, path)
    store.emit(EventType.CHILDREN, parent)


def check(store: NodeStore, path: str, version: int) -> None:
    _check_version(_need(store, validate_path(path)), path, version)


def get(store: NodeStore, path: str) -> tuple[bytes, Stat]:
    node = _need(store, validate_path(path))
    return node.data, node.stat()


def exists(store: NodeStore, path: str) -> Stat | None:
    node = store.get(validate_path(path))
    return node.stat() if node else None


def children(store: NodeStore, path: str) -> list[str]:
    _need(store, validate_path(path))
    return store.children(path)


def apply(store: NodeStore, ops: Sequence[Op], session_id: int, now_ms: int) -> list[OpResult]:
    """Run ops in order; the caller rolls the store back if this raises."""
    results: list[OpResult] = []
    for op in ops:
        if isinstance(op, Check):
            check(store, op.path, op.version)
            results.append(None)
        elif isinstance(op, Create):
            results.append(
                create(
                    store,
                    op.path,
                    op.data,
                    ephemeral=op.ephemeral,
                    sequential=op.sequential,
                    make_parents=False,
                    session_id=session_id,
                    now_ms=now_ms,
                )
            )
        elif isinstance(op, SetData):
            results.append(set_data(store, op.path, op.data, op.version, now_ms))
        elif isinstance(op, Delete):
            delete(store, op.path, op.version, False)
            results.append(None)
        else:
            raise MetastoreError(f"unknown op {op!r}")
    return results


def end_session(store: NodeStore, session_id: int) -> None:
    """Delete a session's ephemeral nodes (on close or expiry)."""
    for path in sorted(store.ephemerals(session_id)):
        if store.get(path) is not None:
            delete(store, path, -1, False)


Action = Callable[[NodeStore, int, int], object]


class TreeMetastore(Metastore):
    """Metastore whose operations run :mod:`tree` rules inside a backend transaction."""

    @abstractmethod
    async def _write(self, action: Action) -> object:
        """Run ``action(store, session_id, now_ms)`` atomically, checking the session."""

    @abstractmethod
    async def _read(self, action: Action) -> object:
        """Run ``action`` on a consistent view, without writing."""

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        result = await self._write(
            lambda s, sid, now: create(
                s,
                path,
                data,
                ephemeral=ephemeral,
                sequential=sequential,
                make_parents=make_parents,
                session_id=sid,
                now_ms=now,
            )
        )
        assert isinstance(result, str)
        return result

    async def get(self, path: str) -> tuple[bytes, Stat]:
        return await self._read(lambda s, sid, now: get(s, path))  # type: ignore[return-value]

    async def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        return await self._write(  # type: ignore[return-value]
            lambda s, sid, now: set_data(s, path, data, version, now)
        )

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        await self._write(lambda s, sid, now: delete(s, path, version, recursive))

    async def exists(self, path: str) -> Stat | None:
        return await self._read(lambda s, sid, now: exists(s, path))  # type: ignore[return-value]

    async def children(self, path: str) -> list[str]:
        return await self._read(lambda s, sid, now: children(s, path))  # type: ignore[return-value]

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        ops = list(ops)
        return await self._write(lambda s, sid, now: apply(s, ops, sid, now))  # type: ignore[return-value]
