"""Quotas in the metastore, in Kafka's ZooKeeper layout, followed by every broker.

    /config/users/<user>                  {"version":1,"config":{"producer_byte_rate":"1024"}}
    /config/users/<user>/clients/<id>     (SCRAM credentials share the user nodes)
    /config/clients/<id>

Names are sanitized as Kafka does, ``<default>`` is an entity type's default. A write
changes only quota keys of one node, by compare-and-set (``metastore.entity_config``);
every broker watches the folders and each node, as it follows ACLs, and hands each
entity's quotas to its managers, so a change reaches each broker at its own moment."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping

from epochlog.metadata import layout
from epochlog.metastore.api import Metastore, NodeExistsError, NoNodeError, Watch
from epochlog.metastore.entity_config import (
    change_entity_config,
    entity_names,
    read_entity_config,
)
from epochlog.quotas.entities import (
    QuotaEntity,
    node_name,
    quotas_of,
    stored_text,
)

log = logging.getLogger("epochlog.quotas")

Quotas = dict[str, float]
OnChange = Callable[[QuotaEntity, Quotas], None]


def _user_clients(user_node: str) -> str:
    return f"{layout.CONFIG_USERS}/{user_node}/clients"


async def read_all(store: Metastore) -> dict[QuotaEntity, Quotas]:
    """Every entity with quotas, straight from the metastore."""
    found: dict[QuotaEntity, Quotas] = {}

    async def read(entity: QuotaEntity) -> None:
        quotas = quotas_of(await read_entity_config(store, entity.path()))
        if quotas:
            found[entity] = quotas

    for client in await entity_names(store, layout.CONFIG_CLIENTS):
        await read(QuotaEntity(client_id=node_name(client)))
    for user in await entity_names(store, layout.CONFIG_USERS):
        await read(QuotaEntity(node_name(user)))
        for client in await entity_names(store, _user_clients(user)):
            await read(QuotaEntity(node_name(user), node_name(client)))
    return found


async def alter(store: Metastore, entity: QuotaEntity, ops: Mapping[str, float | None]) -> Quotas:
    """Set (a value) or remove (None) quota keys of one entity, leaving its other
    entries alone; its quotas afterwards. Values are taken as already checked."""

    def change(config: dict[str, str]) -> dict[str, str]:
        for key, value in ops.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = stored_text(key, value)
        return config

    root = layout.CONFIG_CLIENTS if entity.user is None else layout.CONFIG_USERS
    old = await change_entity_config(store, entity.path(), change, root)
    return quotas_of(change(old))


class _Folder:
    """Follows a folder's children: each one present gets ``open(name)`` (whatever
    it returns is closed when the child goes)."""

    def __init__(self, store: Metastore, path: str, open_child: Callable[[str], object]) -> None:
        self._store = store
        self.path = path
        self._open = open_child
        self._children: dict[str, _Node | _Folder] = {}
        self._watch: Watch | None = None
        self._refreshing = asyncio.Lock()

    async def start(self) -> None:
        self._watch = await self._store.watch_children(self.path, self._refresh)
        await self._refresh()

    async def _refresh(self, _event: object = None) -> None:
        async with self._refreshing:
            try:
                present = set(await self._store.children(self.path))
            except NoNodeError:
                present = set()
            for name in sorted(present - set(self._children)):
                child = self._open(name)
                if child is not None:
                    self._children[name] = child  # type: ignore[assignment]
                    await child.start()  # type: ignore[attr-defined]
            for name in set(self._children) - present:
                self._children.pop(name).close()

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        for child in self._children.values():
            child.close()
        self._children.clear()


class _Node:
    """Follows one entity's node (and, for a user, its clients folder)."""

    def __init__(self, follower: QuotaStore, entity: QuotaEntity, user_node: str | None) -> None:
        self._follower = follower
        self.entity = entity
        self._watch: Watch | None = None
        self._clients: _Folder | None = None
        self._user_node = user_node

    async def start(self) -> None:
        store = self._follower.store
        self._watch = await store.watch_data(self.entity.path(), self._read)
        await self._read()
        if self._user_node is not None:
            # The user's children: "clients" once a (user, client id) quota exists.
            self._clients = _Folder(
                store,
                f"{layout.CONFIG_USERS}/{self._user_node}",
                lambda name: (
                    self._follower.clients_of(self._user_node, self.entity)
                    if name == "clients"
                    else None
                ),
            )
            await self._clients.start()

    async def _read(self, _event: object = None) -> None:
        try:
            config = await read_entity_config(self._follower.store, self.entity.path())
        except (ValueError, TypeError) as exc:
            log.error("ignoring the unreadable quotas of %s: %r", self.entity, exc)
            return
        self._follower.apply(self.entity, quotas_of(config))

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        if self._clients is not None:
            self._clients.close()
        self._follower.apply(self.entity, {})


class QuotaStore:
    """The metastore's quotas, followed into ``on_change(entity, quotas)`` (empty
    quotas: the entity has none any more)."""

    def __init__(self, store: Metastore, on_change: OnChange) -> None:
        self.store = store
        self._on_change = on_change
        self.quotas: dict[QuotaEntity, Quotas] = {}
        self._roots: list[_Folder] = []

    async def follow(self) -> None:
        """Read every quota and keep following them (before the broker serves)."""
        for root in (layout.CONFIG_USERS, layout.CONFIG_CLIENTS):
            with contextlib.suppress(NodeExistsError):
                await self.store.create(root, b"", make_parents=True)
        self._roots = [
            _Folder(
                self.store,
                layout.CONFIG_USERS,
                lambda name: _Node(self, QuotaEntity(node_name(name)), name),
            ),
            _Folder(
                self.store,
                layout.CONFIG_CLIENTS,
                lambda name: _Node(self, QuotaEntity(client_id=node_name(name)), None),
            ),
        ]
        for root in self._roots:
            await root.start()

    def clients_of(self, user_node: str, user: QuotaEntity) -> _Folder:
        return _Folder(
            self.store,
            _user_clients(user_node),
            lambda name: _Node(self, QuotaEntity(user.user, node_name(name)), None),
        )

    def apply(self, entity: QuotaEntity, quotas: Quotas) -> None:
        """Hand one entity's quotas (as now stored) to the managers, once per change."""
        if self.quotas.get(entity, {}) == quotas:
            return
        if quotas:
            self.quotas[entity] = quotas
        else:
            self.quotas.pop(entity, None)
        self._on_change(entity, dict(quotas))

    async def alter(self, entity: QuotaEntity, ops: Mapping[str, float | None]) -> None:
        """Write a change and put it in force here at once (the other brokers follow
        their watches)."""
        self.apply(entity, await alter(self.store, entity, ops))

    def close(self) -> None:
        for root in self._roots:
            root.close()
        self._roots.clear()
