"""A SparkSession (local, or on a cluster) set up the way epochlog's demo, tests and
benchmarks run Spark.

Spark starts its Python workers with PySpark's zipped copy (``pyspark.zip``) first on
``PYTHONPATH``. Python cannot cache compiled code for a zip, so every fresh worker
compiles PySpark from source; a streaming query starts one such process for its source
(the offset calls), and measured here that took 1.3 s of each query's start. When
PySpark is pip-installed, the zip and the installed package are the same release, so
the workers can import the installed, byte-compiled copy instead: ``worker_python()``
writes a small launcher that drops the zips from ``PYTHONPATH`` and runs this
interpreter."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shlex
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

LAUNCHER = """#!/bin/sh
# Written by epochlog.spark.session.worker_python(): runs {python} for Spark's Python
# workers with PySpark's zipped copies dropped from PYTHONPATH, so that they import the
# installed, byte-compiled PySpark of the same release.
set -f
kept=
IFS=:
for entry in $PYTHONPATH; do
  case "$entry" in
    */python/lib/pyspark.zip|*/python/lib/py4j-*-src.zip) ;;
    *) kept="${{kept:+$kept:}}$entry" ;;
  esac
done
unset IFS
PYTHONPATH=$kept
export PYTHONPATH
exec {python} "$@"
"""


def _zips_duplicate_installed_pyspark() -> bool:
    """Whether the zips Spark puts on its workers' PYTHONPATH are those of the
    pip-installed PySpark this interpreter imports (not, e.g., those of a separate Spark
    distribution named by ``SPARK_HOME``), with py4j installed beside it."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return False
    home = Path(spec.origin).resolve().parent
    spark_home = os.environ.get("SPARK_HOME")
    if spark_home and Path(spark_home).resolve() != home:
        return False
    if not (home / "python" / "lib" / "pyspark.zip").is_file():
        return False
    return importlib.util.find_spec("py4j") is not None


def worker_python(python: str = sys.executable) -> str:
    """The executable to give Spark as ``PYSPARK_PYTHON``: a launcher for ``python``
    that imports the installed PySpark (see the module docstring), or ``python`` itself
    where that cannot be done safely (not POSIX, PySpark not pip-installed)."""
    if os.name != "posix" or not _zips_duplicate_installed_pyspark():
        return python
    text = LAUNCHER.format(python=shlex.quote(python))
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"epochlog-{os.getuid()}"
    launcher = folder / f"spark-worker-python-{digest}"
    if not launcher.is_file():
        folder.mkdir(mode=0o700, exist_ok=True)
        if folder.stat().st_uid != os.getuid():
            return python
        partial = folder / f".{launcher.name}.{os.getpid()}"
        partial.write_text(text)
        partial.chmod(0o755)
        partial.replace(launcher)
    return str(launcher)


def build_session(
    app_name: str,
    log_level: str = "WARN",
    conf: Mapping[str, str] | None = None,
    master: str = "local[2]",
) -> Any:
    """A SparkSession on ``master`` (Spark's ``spark.master``): ``local[2]`` by default
    (``local[2,2]`` retries a failed task once) or a cluster's URL
    (``spark://HOST:7077``). UI off, few shuffle partitions; a local driver binds to
    loopback (executors elsewhere must reach it, so a cluster's driver keeps Spark's
    default host). Python workers run this interpreter
    (through ``worker_python()``) so they import epochlog and pyspark_epochlog: the
    executors' (``PYSPARK_PYTHON``) and the driver's, which answer the source's offset
    calls (``PYSPARK_DRIVER_PYTHON``). Values already set are kept."""
    python = worker_python()
    os.environ.setdefault("PYSPARK_PYTHON", python)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", python)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
    )
    if master.startswith("local"):
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config(
            "spark.driver.host", "127.0.0.1"
        )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(log_level)
    return session
