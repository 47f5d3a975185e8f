"""Kafka's entity config nodes (``/config/users/<user>``, ``/config/clients/<id>``,
``/config/users/<user>/clients/<id>``): ``{"version":1,"config":{KEY: "VALUE"}}``.
Several owners keep entries in one node (a user's SCRAM credentials beside its quotas),
so each changes only its own keys, by compare-and-set of the whole node: concurrent
writers on two brokers lose nothing, and nobody's entries are dropped."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from epochlog.metadata.layout import decode_entity_config, encode_entity_config
from epochlog.metastore.api import (
    BadVersionError,
    Metastore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    parent_of,
)

Config = dict[str, str]


async def read_entity_config(store: Metastore, path: str) -> Config:
    """The node's entries; none when it does not exist."""
    try:
        data, _ = await store.get(path)
    except NoNodeError:
        return {}
    return decode_entity_config(data)


async def change_entity_config(
    store: Metastore, path: str, change: Callable[[Config], Config], keep_under: str
) -> Config:
    """Replace the node's entries by ``change(entries)`` (it gets a copy) by
    compare-and-set, retried on a concurrent change; returns the entries it replaced. A
    node left empty is deleted when nothing lies under it, and so are the emptied
    folders above it, up to ``keep_under`` (kept)."""
    while True:
        try:
            data, stat = await store.get(path)
        except NoNodeError:
            data, stat = None, None
        old = decode_entity_config(data) if data is not None else {}
        new = change(dict(old))
        if new == old and stat is not None:
            return old
        try:
            if stat is None:
                if new:
                    await store.create(path, encode_entity_config(new), make_parents=True)
            elif new or stat.num_children:
                await store.set(path, encode_entity_config(new), stat.version)
            else:
                await store.delete(path, stat.version)
                await _delete_empty_folders(store, parent_of(path), keep_under)
            return old
        except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
            continue  # someone else changed the node meanwhile: read it again


async def _delete_empty_folders(store: Metastore, path: str, keep_under: str) -> None:
    """Remove ``path`` and its parents while they hold no entries and no children
    (``/config/users/alice/clients`` once alice's last client quota is gone, then alice
    if she has no credentials), stopping at ``keep_under``; a concurrent writer wins."""
    while path.startswith(keep_under + "/"):
        try:
            data, stat = await store.get(path)
            if stat.num_children or decode_entity_config(data):
                return
            await store.delete(path, stat.version)
        except (NoNodeError, BadVersionError, NotEmptyError, ValueError):
            return
        path = parent_of(path)


async def entity_names(store: Metastore, folder: str) -> list[str]:
    """The children of a folder, none when it does not exist."""
    with contextlib.suppress(NoNodeError):
        return await store.children(folder)
    return []
