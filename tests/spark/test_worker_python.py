"""Spark's Python workers start through a launcher that imports the installed PySpark
rather than compiling its zipped copy in every new process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from epochlog.spark.session import worker_python

SPARK_LIB = Path(pyspark.__file__).resolve().parent / "python" / "lib"
PROBE = (
    "import json, sys, pyspark, py4j;print(json.dumps([pyspark.__file__, py4j.__file__, sys.path]))"
)


def test_launcher_drops_pysparks_zips_and_keeps_the_rest_of_pythonpath(tmp_path: Path) -> None:
    zips = [str(SPARK_LIB / "pyspark.zip"), *map(str, SPARK_LIB.glob("py4j-*-src.zip"))]
    assert len(zips) == 2, zips
    launcher = worker_python()
    assert launcher != sys.executable
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([zips[0], str(tmp_path), zips[1]]))
    out = subprocess.run(
        [launcher, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    pyspark_file, py4j_file, path = json.loads(out.stdout)
    assert Path(pyspark_file).resolve() == Path(pyspark.__file__).resolve()
    assert ".zip" not in py4j_file
    assert str(tmp_path) in path
    assert not set(zips) & set(path)


def test_launcher_runs_the_interpreter_it_was_made_for() -> None:
    out = subprocess.run(
        [worker_python(), "-c", "import sys; print(sys.prefix)"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip() == sys.prefix


def test_workers_use_the_plain_interpreter_under_another_spark_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    assert worker_python() == sys.executable
