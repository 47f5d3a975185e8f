"""Fixtures for tests that run real epochlog broker processes and real clients.

`tests/` is on sys.path (pytest's rootdir-less conftest import), so test modules
import the harness as `support.*`. Test module basenames must be unique.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from support.broker import LIVE_BROKERS, BrokerProcess, require_binary
from support.zookeeper import ZooKeeperServer

# What every test broker gets unless a test says otherwise.
DEFAULT_SETTINGS: dict[str, object] = {"num.partitions": 1}


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, Any]:
    """On failure, attach the tail of every live broker's log to the report."""
    report = yield
    if report.failed:
        for broker in LIVE_BROKERS:
            report.sections.append((f"broker log {broker.log_path}", broker.tail(80)))
    return report


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long modules first: the workers of `pytest -n` take files in this order, and a
    minutes-long file picked up last would leave the other worker idle at the end."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


BrokerFactory = Callable[..., BrokerProcess]


def _factory(base: Path, made: list[BrokerProcess]) -> BrokerFactory:
    def make(settings: dict[str, object] | None = None, start: bool = True) -> BrokerProcess:
        n = len(made)
        broker = BrokerProcess(
            log_dir=base / f"broker{n}" / "logs",
            output_dir=base / f"broker{n}",
            settings={**DEFAULT_SETTINGS, **(settings or {})},
        )
        made.append(broker)
        return broker.start() if start else broker

    return make


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerFactory]:
    """Function-scoped brokers, for tests that kill, pause or damage them."""
    made: list[BrokerProcess] = []
    yield _factory(tmp_path, made)
    for broker in made:
        broker.close()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by a module's tests that only produce and consume."""
    made: list[BrokerProcess] = []
    broker = _factory(tmp_path_factory.mktemp("broker"), made)()
    yield broker
    # A clean stop is asserted here too: SIGTERM must end in exit 0.
    try:
        broker.stop()
    finally:
        broker.close()


@pytest.fixture(scope="session")
def kcat() -> str:
    """Debian's kcat (librdkafka 2.0.2): a missing binary fails the test, never skips."""
    return require_binary("kcat")


@pytest.fixture(scope="session")
def iperf3() -> str:
    return require_binary("iperf3")


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper for the whole run (Debian's package; starting takes seconds)."""
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    try:
        yield server
    finally:
        server.stop()
