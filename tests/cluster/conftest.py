"""Each cluster test runs once per metastore: the embedded SQLite file and a real
ZooKeeper server started for the session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", "zookeeper"])
def metastore_uri(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path}/metastore.db"
    else:
        server = request.getfixturevalue("zookeeper")
        yield f"zk://127.0.0.1:{server.port}/{tmp_path.name}"
