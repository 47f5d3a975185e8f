"""A local SparkSession set up the way epochlog's demo, tests and benchmarks run Spark."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any


def local_session(
    app_name: str, log_level: str = "WARN", conf: Mapping[str, str] | None = None
) -> Any:
    """``local[2]`` with the UI off, on loopback, few shuffle partitions; Python
    workers run on this interpreter so they import epochlog and pyspark_epochlog."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(log_level)
    return session
