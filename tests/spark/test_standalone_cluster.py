"""The truncation story of ``truncation_story.py`` on a Spark standalone cluster: a
master and two workers, each its own JVM started from PySpark's ``spark-class``, and the
Spark driver a process of its own (``standalone_driver.py``). The executors, and the
Python workers they start, are processes of the workers; they read the brokers
themselves. The same truncation behaviour must hold as on ``local[2]``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from truncation_story import Run, Story, check_fail_stopped, check_policy_resumed, told

import epochlog
from support.spark_standalone import SparkStandalone

pytestmark = pytest.mark.long

HERE = Path(__file__).resolve().parent
# A hang guard on one driver run (four queries); never a judgement of speed.
DRIVER_BOUND_S = 400


class StandaloneDriver:
    """Runs the story's queries in a driver process on the cluster; keeps what each
    run reported about the application and its Python workers."""

    def __init__(self, cluster: SparkStandalone) -> None:
        self.cluster = cluster
        self.reports: list[dict[str, Any]] = []

    def __call__(self, base: Path, topics: dict[str, str], bootstrap: str) -> Run:
        result = base / f"driver-{len(self.reports)}.json"
        src = str(Path(epochlog.__file__).resolve().parents[1])
        path = [str(HERE.parent / "cluster"), str(HERE.parent), src]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
        log = base / f"driver-{len(self.reports)}.log"
        with log.open("wb") as out:
            done = subprocess.run(
                [
                    sys.executable,
                    str(HERE / "standalone_driver.py"),
                    self.cluster.url,
                    str(base),
                    bootstrap,
                    json.dumps(topics),
                    str(result),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                timeout=DRIVER_BOUND_S,
            )
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-60:])
        assert done.returncode == 0, f"driver exited with {done.returncode}:\n{tail}"
        report = json.loads(result.read_text())
        self.reports.append(report)
        outputs = {
            p: [(o, v.encode(), e) for o, v, e in rows] for p, rows in report["outputs"].items()
        }
        return Run(report["errors"], outputs)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    cluster = SparkStandalone(tmp_path_factory.mktemp("spark-standalone")).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def driver(standalone: SparkStandalone) -> StandaloneDriver:
    return StandaloneDriver(standalone)


@pytest.fixture(scope="module")
def story(driver: StandaloneDriver, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    with told(tmp_path_factory.mktemp("standalone-truncation"), driver) as s:
        yield s


def test_the_queries_ran_on_executors_of_both_workers(
    story: Story, driver: StandaloneDriver, standalone: SparkStandalone
) -> None:
    assert len(driver.reports) == 2
    for report in driver.reports:
        assert report["master"] == standalone.url
        assert standalone.executors_of(report["app_id"]) == ["worker0", "worker1"]
        # The Python workers are processes of the Spark workers (under their executors),
        # not of the driver, and import the epochlog under test.
        spark_workers = {w.proc.pid for w in standalone.workers if w.proc is not None}
        for pid, above, file in report["python_workers"]:
            assert report["driver_pid"] not in [pid, *above]
            assert spark_workers & set(above), f"python worker {pid} under {above}"
            assert file == str(Path(epochlog.__file__).resolve())


def test_fail_stops_the_query_naming_the_partition_and_the_lost_range(story: Story) -> None:
    check_fail_stopped(story)


@pytest.mark.parametrize("policy", ["earliest", "latest", "closest"])
def test_policy_reports_the_range_and_reads_the_new_records_once(story: Story, policy: str) -> None:
    check_policy_resumed(story, policy)
