"""Cluster metadata store with ZooKeeper semantics; one URI picks the backend.

- ``memory://[name]``: in-process, all time through the Clock seam (simulation, tests);
- ``sqlite:///PATH``: embedded, safe across processes on one host (``epochlog up``);
  everything after ``sqlite://`` is the file path, whose directory must exist;
- ``zk://HOST:PORT[,HOST:PORT...][/chroot]``: a real ZooKeeper ensemble through kazoo.
"""

from __future__ import annotations

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
    Transaction,
    Watch,
    WatchEvent,
)
from epochlog.seams import Clock
from epochlog.settings.broker import BROKER


def configured_uri(metastore: str, zookeeper_connect: str, first_log_dir: str) -> str:
    """The metastore a broker's settings name: ``metastore`` (a URI), else Kafka's
    ``zookeeper.connect``, else an embedded SQLite file in the first log directory."""
    if metastore:
        return metastore
    if zookeeper_connect:
        return f"zk://{zookeeper_connect}"
    return "sqlite://" + first_log_dir.rstrip("/") + "/metastore.db"


async def open_metastore(
    uri: str,
    clock: Clock,
    *,
    session_timeout_ms: int | None = None,
) -> Metastore:
    """Open a client (and its session) on the backend ``uri`` names.

    The session timeout defaults to the broker's ``zookeeper.session.timeout.ms``.
    Must be called from the asyncio loop the client will run on.
    """
    if session_timeout_ms is None:
        session_timeout_ms = BROKER.default("zookeeper.session.timeout.ms")
    if session_timeout_ms <= 0:
        raise ValueError(f"session timeout must be positive, got {session_timeout_ms}")
    scheme, sep, rest = uri.partition("://")
    if not sep:
        raise ValueError(f"metastore URI needs a scheme (memory, sqlite, zk): {uri!r}")
    if scheme == "memory":
        from epochlog.metastore.memory import MemoryMetastore, memory_store

        return MemoryMetastore(memory_store(rest.strip("/")), clock, session_timeout_ms)
    if scheme == "sqlite":
        from epochlog.metastore.sqlite import SqliteMetastore

        if not rest:
            raise ValueError(f"sqlite metastore URI needs a path: {uri!r}")
        return await SqliteMetastore.open(rest, clock, session_timeout_ms)
    if scheme == "zk":
        from epochlog.metastore.zk import ZkMetastore

        return await ZkMetastore.open(rest, clock, session_timeout_ms)
    raise ValueError(f"unknown metastore scheme {scheme!r} in {uri!r}")


__all__ = [
    "BadVersionError",
    "Check",
    "ConnectionLossError",
    "Create",
    "Delete",
    "EventType",
    "Metastore",
    "MetastoreError",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "Op",
    "OpResult",
    "SessionExpiredError",
    "SetData",
    "Stat",
    "Transaction",
    "Watch",
    "WatchEvent",
    "configured_uri",
    "open_metastore",
]
