"""Each handler declares the versions it serves beside its code, and ApiVersions is
derived from the handlers: nothing is advertised without a handler, no handler module
is left out of the table."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

from inprocess_broker import connect, run, running_broker
from kafka.protocol.metadata import ApiVersionsRequest

import epochlog.broker.handlers as handlers_package
from epochlog.broker.handlers import HANDLERS, MODULES, SUPPORTED
from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import MESSAGES


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_every_handler_module_declares_its_api_and_is_in_the_table() -> None:
    names = {m.name for m in pkgutil.iter_modules(handlers_package.__path__)} - {"context"}
    modules = {importlib.import_module(f"epochlog.broker.handlers.{n}") for n in names}
    assert modules == set(MODULES), "a handler module is missing from MODULES"
    for module in modules:
        assert callable(module.handle), module
        # The module is named for its API, as Kafka names the message (Produce ->
        # produce.py, OffsetForLeaderEpoch -> offset_for_leader_epoch.py).
        assert module.__name__.rsplit(".", 1)[1] == _snake(module.API.name), module
        assert module.API.min_version <= module.API.max_version
        request, response = MESSAGES[module.API.key]
        assert (module.API.request, module.API.response) == (request, response)
        assert module.API.max_version <= request.max_version, (
            f"{module.API.name} v{module.API.max_version} is beyond the message schema"
        )
    assert len({m.API.key for m in modules}) == len(modules), "two modules for one API"


def test_api_versions_advertises_exactly_the_handlers(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            # Every handler is written against HandlerContext: the broker provides it.
            assert isinstance(broker, HandlerContext)
            conn = await connect(broker)
            answer = await conn.send(ApiVersionsRequest(), 0)
            advertised = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
            assert advertised == {
                key: (h.api.min_version, h.api.max_version) for key, h in HANDLERS.items()
            }
            assert set(advertised) == set(SUPPORTED)
            await conn.close()

    run(scenario)
