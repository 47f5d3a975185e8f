"""Dynamic broker settings as stored and followed: Kafka's ZooKeeper layout
(``/config/brokers/<id>`` and ``/config/brokers/<default>``, each
``{"version":1,"config":{...}}``), written by whichever broker an admin client asked,
and followed by every broker through metastore watches, so a change applies without a
restart and survives one. What may change, and how the levels merge:
``epochlog.settings.dynamic``."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable

from epochlog.metadata import layout
from epochlog.metastore.api import BadVersionError, Metastore, NodeExistsError, NoNodeError
from epochlog.settings.dynamic import CLUSTER_DEFAULT, merged
from epochlog.settings.registry import Settings

log = logging.getLogger("epochlog.broker")

Change = Callable[[dict[str, str]], dict[str, str]]


def entity_path(entity: str) -> str:
    """The node of one broker's id or of ``<default>``."""
    return f"{layout.CONFIG_BROKERS}/{entity}"


def _decode(data: bytes) -> dict[str, str]:
    return {str(k): str(v) for k, v in json.loads(data or b"{}").get("config", {}).items()}


def _encode(configs: dict[str, str]) -> bytes:
    return layout.encode_json({"version": 1, "config": configs})


class DynamicBrokerConfigs:
    """One broker's dynamic settings (its own and the cluster-wide default, as
    stored) and the settings in force they make; ``on_change`` is handed the latter
    whenever either level changes."""

    def __init__(
        self, broker_id: int, static: Settings, on_change: Callable[[Settings], None]
    ) -> None:
        self.static = static
        self.settings = static
        self.default: dict[str, str] = {}
        self.own: dict[str, str] = {}
        self._entity = str(broker_id)
        self._on_change = on_change
        self._store: Metastore | None = None

    async def follow(self, store: Metastore) -> None:
        """Read both levels now, and again on every change of either."""
        self._store = store
        with contextlib.suppress(NodeExistsError):
            await store.create(layout.CONFIG_BROKERS, make_parents=True)
        for entity in (CLUSTER_DEFAULT, self._entity):
            await store.watch_data(entity_path(entity), self.refresh)
        await self.refresh()

    async def read(self, entity: str) -> dict[str, str]:
        assert self._store is not None
        try:
            data, _ = await self._store.get(entity_path(entity))
        except NoNodeError:
            return {}
        try:
            return _decode(data)
        except (ValueError, AttributeError) as exc:
            log.error("unreadable dynamic broker settings %s: %r", entity, exc)
            return {}

    async def refresh(self, _event: object = None) -> None:
        default, own = await self.read(CLUSTER_DEFAULT), await self.read(self._entity)
        if (default, own) == (self.default, self.own):
            return
        self.default, self.own = default, own
        self.settings = merged(self.static, default, own)
        log.info(
            "dynamic broker settings in force: cluster-wide default %s, broker %s %s",
            default,
            self._entity,
            own,
        )
        self._on_change(self.settings)

    async def alter(self, entity: str, change: Change, validate_only: bool) -> None:
        """Make ``entity``'s settings ``change(current)`` (compare-and-set, so two
        admins altering at once both count), then follow the change before returning,
        so that the client reads its own write from this broker."""
        assert self._store is not None
        path = entity_path(entity)
        while True:
            try:
                data, stat = await self._store.get(path)
                current, version = _decode(data), stat.version
            except NoNodeError:
                current, version = {}, None
            configs = change(current)
            if validate_only:
                return
            try:
                if version is None:
                    await self._store.create(path, _encode(configs))
                else:
                    await self._store.set(path, _encode(configs), version)
                break
            except (NodeExistsError, BadVersionError):
                continue
        await self.refresh()
