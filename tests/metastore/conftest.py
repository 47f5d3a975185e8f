"""Fixtures for the metastore contract: one harness per backend (ZooKeeper: the
session-wide real server of tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from metastore_harness import BACKENDS, Harness, make_harness


@pytest.fixture(params=BACKENDS)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    zk = request.getfixturevalue("zookeeper") if request.param == "zk" else None
    return make_harness(request.param, tmp_path, zk, request.node.name)
