"""Spark tests share ONE local[2] SparkSession (starting Spark takes seconds) and real
epochlog broker processes: one broker for the session, a 3-broker cluster on demand."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cluster"))

from cluster_harness import Cluster, running_cluster  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from epochlog.spark.session import build_session, worker_python  # noqa: E402
from support.broker import BrokerProcess  # noqa: E402

# Settings of the shared broker: topics are created by the tests, unclean election is
# allowed per topic where a test asks for it.
SPARK_BROKER_SETTINGS: dict[str, object] = {
    "num.partitions": 1,
    "auto.create.topics.enable": "false",
    # The retention test waits for segments to be deleted.
    "log.retention.check.interval.ms": 300,
}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local[2] session for every Spark test: UI off, few shuffle partitions, and
    Python workers on this interpreter (through the launcher that imports the installed
    PySpark) so they import the project."""
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = worker_python()
    session = build_session(
        "epochlog-tests", conf={"spark.sql.streaming.forceDeleteTempCheckpointLocation": "true"}
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One real broker process shared by the Spark tests that do not kill brokers."""
    base = tmp_path_factory.mktemp("spark-broker")
    broker = BrokerProcess(
        log_dir=base / "logs", output_dir=base, settings=SPARK_BROKER_SETTINGS
    ).start()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture
def spark_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Three real brokers on the embedded SQLite metastore, for tests that kill one."""
    with running_cluster(tmp_path, f"sqlite://{tmp_path}/metastore.db", 3) as cluster:
        yield cluster
