"""ACLs in the metastore, in Kafka's ZooKeeper layout, and followed by every broker.

    /kafka-acl/<ResourceType>/<name>                     LITERAL patterns (``*`` included)
    /kafka-acl-extended/prefixed/<ResourceType>/<name>   PREFIXED patterns

Each node holds every entry of one pattern as Kafka writes it:
``{"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
"operation": "Read", "host": "*"}]}``. A name is percent-encoded where a path could not
hold it (a ``/`` in a group name). Writes are compare-and-set read-modify-writes of one
node, so concurrent CreateAcls on two brokers lose nothing; each broker watches the
type folders and every node, as it follows topics, and hands each node's entries to its
authorizer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterable
from urllib.parse import quote, unquote

from epochlog.metastore import BadVersionError, Metastore, NodeExistsError, NoNodeError, Watch
from epochlog.security.acls import (
    SUPPORTED_OPERATIONS,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    display_name,
    from_display,
)
from epochlog.security.authorizer import Authorizer

log = logging.getLogger("epochlog.acls")

ROOTS = {PatternType.LITERAL: "/kafka-acl", PatternType.PREFIXED: "/kafka-acl-extended/prefixed"}


def type_path(pattern_type: PatternType, resource_type: object) -> str:
    return f"{ROOTS[pattern_type]}/{display_name(resource_type)}"  # type: ignore[arg-type]


def node_path(pattern: ResourcePattern) -> str:
    encoded = quote(pattern.name, safe="*")
    if encoded in (".", ".."):
        encoded = encoded.replace(".", "%2E")
    return f"{type_path(pattern.pattern_type, pattern.resource_type)}/{encoded}"


def encode_entries(entries: Iterable[AccessControlEntry]) -> bytes:
    acls = [
        {
            "principal": e.principal,
            "permissionType": display_name(e.permission_type),
            "operation": display_name(e.operation),
            "host": e.host,
        }
        for e in sorted(
            entries, key=lambda e: (e.principal, e.host, e.operation, e.permission_type)
        )
    ]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_entries(data: bytes) -> set[AccessControlEntry]:
    fields = json.loads(data or b'{"acls": []}')
    return {
        AccessControlEntry(
            acl["principal"],
            acl["host"],
            AclOperation(from_display(AclOperation, acl["operation"])),
            AclPermissionType(from_display(AclPermissionType, acl["permissionType"])),
        )
        for acl in fields.get("acls", [])
    }


class AclStore:
    """The metastore's ACLs, mirrored into an authorizer."""

    def __init__(self, store: Metastore, authorizer: Authorizer) -> None:
        self.store = store
        self.authorizer = authorizer
        self._watches: dict[ResourcePattern, Watch] = {}
        self._folder_watches: list[Watch] = []
        # One folder refresh at a time: two at once would both watch a new node.
        self._refreshing = asyncio.Lock()

    async def follow(self) -> None:
        """Read every ACL and keep following them (before the broker serves)."""
        for pattern_type in ROOTS:
            for resource_type in SUPPORTED_OPERATIONS:
                folder = type_path(pattern_type, resource_type)
                with contextlib.suppress(NodeExistsError):
                    await self.store.create(folder, b"", make_parents=True)

                async def refresh(_event: object = None, folder: str = folder) -> None:
                    await self._refresh_folder(folder)

                self._folder_watches.append(await self.store.watch_children(folder, refresh))
                await refresh()

    def close(self) -> None:
        for watch in [*self._folder_watches, *self._watches.values()]:
            watch.cancel()
        self._folder_watches.clear()
        self._watches.clear()

    def _pattern_of(self, folder: str, child: str) -> ResourcePattern:
        pattern_type = next(t for t, root in ROOTS.items() if folder.startswith(root + "/"))
        resource_type = next(
            r for r in SUPPORTED_OPERATIONS if folder == type_path(pattern_type, r)
        )
        return ResourcePattern(resource_type, unquote(child), pattern_type)

    async def _refresh_folder(self, folder: str) -> None:
        async with self._refreshing:
            await self._refresh_folder_now(folder)

    async def _refresh_folder_now(self, folder: str) -> None:
        present = {self._pattern_of(folder, c) for c in await self.store.children(folder)}
        known = {p for p in self._watches if node_path(p).rsplit("/", 1)[0] == folder}
        for pattern in sorted(present - known, key=lambda p: p.name):

            async def changed(_event: object, pattern: ResourcePattern = pattern) -> None:
                await self.read(pattern)

            self._watches[pattern] = await self.store.watch_data(node_path(pattern), changed)
            await self.read(pattern)
        for pattern in known - present:
            self._watches.pop(pattern).cancel()
            self.authorizer.set_acls(pattern, ())

    async def read(self, pattern: ResourcePattern) -> None:
        """Hand one node's entries (none if it is gone) to the authorizer."""
        try:
            data, _ = await self.store.get(node_path(pattern))
        except NoNodeError:
            self.authorizer.set_acls(pattern, ())
            return
        try:
            self.authorizer.set_acls(pattern, decode_entries(data))
        except (ValueError, KeyError, TypeError) as exc:
            log.error("ignoring unreadable ACL node %s: %r", node_path(pattern), exc)

    async def _change(
        self,
        pattern: ResourcePattern,
        add: set[AccessControlEntry],
        remove: set[AccessControlEntry],
    ) -> None:
        """Compare-and-set one pattern's node: ``add`` put in, ``remove`` taken out; a
        node left without entries is deleted."""
        path = node_path(pattern)
        while True:
            try:
                data, stat = await self.store.get(path)
            except NoNodeError:
                if not add:
                    break
                try:
                    await self.store.create(path, encode_entries(add), make_parents=True)
                    break
                except NodeExistsError:
                    continue
            entries = (decode_entries(data) | add) - remove
            try:
                if entries:
                    await self.store.set(path, encode_entries(entries), version=stat.version)
                else:
                    await self.store.delete(path, version=stat.version)
                break
            except (BadVersionError, NoNodeError):
                continue
        # This broker answers with its own change in force; the others follow the watch.
        await self.read(pattern)

    async def add(self, bindings: Iterable[AclBinding]) -> None:
        for pattern, entries in _by_pattern(bindings).items():
            await self._change(pattern, entries, set())

    async def remove(self, bindings: Iterable[AclBinding]) -> None:
        for pattern, entries in _by_pattern(bindings).items():
            await self._change(pattern, set(), entries)


def _by_pattern(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, set[AccessControlEntry]]:
    grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for binding in bindings:
        grouped.setdefault(binding.pattern, set()).add(binding.entry)
    return grouped
