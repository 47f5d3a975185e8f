"""epochlog's client against a real 3-broker cluster (broker processes sharing a SQLite
or ZooKeeper metastore, tests/cluster's harness). A module shares one cluster; its
tests use fresh topics. The brokers are started so that the one with the highest port
is the controller: the client asks the broker with the lowest port first (it orders
the brokers it knows by address), so that one can be made the lagging broker of
KIP-232 without touching the controller."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cluster"))

from clientcluster_support import Roles, start_ordered  # noqa: E402


@pytest.fixture(scope="module", params=["sqlite", "zookeeper"])
def roles(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Roles]:
    """A module's cluster, once on each metastore (the embedded SQLite file, and a real
    ZooKeeper started for the session); a module may set ``CLUSTER_SETTINGS``."""
    settings = getattr(request.module, "CLUSTER_SETTINGS", {})
    base = tmp_path_factory.mktemp("clientcluster")
    metastore = None
    if request.param == "zookeeper":
        server = request.getfixturevalue("zookeeper")
        metastore = f"zk://127.0.0.1:{server.port}/{base.name}"
    made = start_ordered(base, metastore, **settings)
    try:
        yield made
    finally:
        made.cluster.close()
