"""Fixtures for the metastore contract: one harness per backend, a real ZooKeeper."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from metastore_harness import BACKENDS, Harness, make_harness

from metastore.zookeeper_server import ZooKeeperServer


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper for the whole run (starting one takes a few seconds)."""
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=BACKENDS)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    zk = request.getfixturevalue("zookeeper") if request.param == "zk" else None
    return make_harness(request.param, tmp_path, zk, request.node.name)
