"""bench/spark_read.py runs end to end in a tiny mode: the epochlog source, the
from-memory reference source, parquet and the sink are all timed and the ratios
printed. Only completion and row counts are checked, never speed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "spark_read.py"


def test_spark_read_benchmark_runs_in_a_tiny_mode() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--records", "3000", "--runs", "1", "--sink"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    out = done.stdout
    for line in (
        "run 1: epochlog",
        "epochlog / parquet:",
        "memory / parquet",
        "do-nothing Python sink",
    ):
        assert line in out, out
